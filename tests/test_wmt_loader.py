"""A WMT run's batches through a DataLoader with worker processes (`loader_workers`, `train
--workers`), and its data folder remembered for `--resume`, on the miniature corpus
(tests/wmt_miniature.py): the same weights with and without workers, killed with its workers
(SIGTERM to the whole process group) and resumed exactly without `--data-dir`, and a data folder
moved since named in one line."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from wmt_miniature import make_mirror

from annotated_transformer.data import wmt14
from annotated_transformer.runs.checkpoints import list_checkpoints
from annotated_transformer.runs.presets import preset
from annotated_transformer.training.run import train

STEPS = 16  # steps of the runs compared: past the end of the first epoch (13 steps)
SIZES = {"N": 1, "d_model": 32, "d_ff": 64, "h": 2, "max_len": 64, "vocab_size": 300,
         "max_tokens": 400, "accumulate": 2, "eval_every": 1000, "bleu_sentences": 4,
         "save_every": 4, "log_every": 4}  # fmt: skip


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The miniature's text, as `download --dataset wmt14-en-de` writes it."""
    work = tmp_path_factory.mktemp("wmt-loader")
    sources = wmt14.sources_from_json(make_mirror(work / "mirror"))
    wmt14.extract({n: work / "mirror" / s.file for n, s in sources.items()}, work / "text",
                  sources=sources)  # fmt: skip
    return work / "text"


def run(folder: Path, data_dir: Path | None, resume: bool = False, **changes: object):
    config = preset("wmt14-base", **SIZES, **{"max_steps": STEPS, **changes})
    return train(config, folder, data_dir=data_dir, resume=resume, device="cpu", progress=False,
                 log=lambda message: None)  # fmt: skip


def same_weights(one: torch.nn.Module, other: torch.nn.Module) -> bool:
    a, b = one.state_dict(), other.state_dict()
    return a.keys() == b.keys() and all(torch.equal(a[name], b[name]) for name in a)


def test_workers_train_the_same_weights_and_resume_exactly(text: Path, tmp_path: Path) -> None:
    assert preset("wmt14-base").loader_workers == 2 and preset("tiny").loader_workers == 0
    alone = run(tmp_path / "alone", text, loader_workers=0)
    workers = run(tmp_path / "workers", text, loader_workers=2)
    assert alone.step == workers.step == STEPS
    assert same_weights(alone.model, workers.model)  # bit for bit: the same batches, same dropout
    stopped = run(tmp_path / "resumed", text, loader_workers=2, max_steps=6)
    assert stopped.step == 6
    about = json.loads((tmp_path / "resumed" / "run.json").read_text(encoding="utf-8"))
    assert about["data_dir"] == str(text.resolve())  # remembered, as an absolute path
    resumed = run(tmp_path / "resumed", None, resume=True, loader_workers=1)  # no data_dir
    assert resumed.step == STEPS and same_weights(alone.model, resumed.model)


def test_a_moved_data_folder_is_named_and_a_new_one_remembered(text: Path, tmp_path: Path) -> None:
    copy = tmp_path / "text"
    shutil.copytree(text, copy)  # (its prepared shards too)
    run(tmp_path / "run", copy, max_steps=2, loader_workers=0)
    moved = copy.rename(tmp_path / "moved")
    with pytest.raises(FileNotFoundError) as caught:
        run(tmp_path / "run", None, resume=True, max_steps=3)
    assert str(caught.value) == (
        f"{tmp_path / 'run' / 'run.json'}: the run's data was read from {copy.resolve()}, which "
        f"is not there any more (moved or deleted?): pass --data-dir with the folder where it is "
        f"now"
    )
    assert run(tmp_path / "run", moved, resume=True, max_steps=3).step == 3
    about = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert about["data_dir"] == str(moved.resolve())  # the next --resume reads it from there
    assert "command" in about and "processes" in about  # the rest of run.json kept


def test_a_signal_to_the_process_group_stops_the_workers_run_and_it_resumes(
    text: Path, tmp_path: Path
) -> None:
    """Ctrl-C in a terminal, or a scheduler's SIGTERM, reaches the workers too: they leave the
    signal to the trainer, which saves and stops; `--resume --out run` alone continues."""
    sizes = [arg for name, value in SIZES.items() for arg in ("--set", f"{name}={value}")]
    command = [sys.executable, "-m", "annotated_transformer", "train", "--out", "run",
               "--device", "cpu", "--no-progress"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = [*command, "--preset", "wmt14-base", "--data-dir", str(text), "--workers", "2", *sizes,
             "--max-steps", "100000"]  # fmt: skip
    process = subprocess.Popen(first, cwd=tmp_path, env=env, start_new_session=True,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not list_checkpoints(tmp_path / "run") and process.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint in 2 minutes"
            time.sleep(0.2)
        os.killpg(process.pid, signal.SIGTERM)  # the trainer and its two workers
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "stopped by SIGTERM at step" in stderr and "Traceback" not in stderr
    step = int(stderr.split("stopped by SIGTERM at step ")[1].split(";")[0])
    done = subprocess.run([*command, "--resume", "--max-steps", str(step + 2)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"resume: run/checkpoint-{step:08d}.pt (step {step}," in done.stderr
    assert f"done: step {step + 2}" in done.stderr


def test_each_process_gets_its_own_share_of_what_is_left_of_the_epoch(text: Path) -> None:
    """`epoch_batches` under torchrun: rank r's micro-batches are its sampler's, from the step a
    resumed epoch stands at, made in the workers exactly as the trainer would make them."""
    from types import SimpleNamespace

    from annotated_transformer.data import shards
    from annotated_transformer.data.sampler import TokenBudgetBatchSampler
    from annotated_transformer.training.epochs import epoch_batches

    folder = shards.prepare_shards(text, 300, 2, say=lambda message: None)
    _, pairs = shards.open_prepared(folder, ("en", "de"))
    split = shards.PairsWithin(pairs, 64)
    config = preset("wmt14-base", **SIZES, loader_workers=2)
    shares = []
    for rank in (0, 1):
        sampler = TokenBudgetBatchSampler(split.src_lengths, split.tgt_lengths, 400, seed=0,
                                          num_replicas=2, rank=rank)  # fmt: skip
        run = SimpleNamespace(sampler=sampler, epoch=1, epoch_step=3, config=config,
                              data=SimpleNamespace(train=split))  # fmt: skip
        made = list(epoch_batches(run))
        sampler.set_epoch(1)
        expected = [split.batch(indices) for indices in list(sampler)[3 * 2 :]]
        assert len(made) == len(expected) > 0
        assert all(torch.equal(m.src, e.src) and torch.equal(m.tgt_out, e.tgt_out)
                   for m, e in zip(made, expected, strict=True))  # fmt: skip
        shares.append({i for indices in list(sampler) for i in indices})
    assert not shares[0] & shares[1]  # two processes, two different slices of the epoch
