"""A training run that nothing a real user does can lose (issue 32, runs).

The closed terminal (SIGHUP) saves and resumes; a second job on the same run folder is refused
while the first holds its lock, and `kill -9` frees it; a diverged run stops at its first NaN,
keeps every finite checkpoint and writes only JSON; the trainer deletes only its own temporary
files; a full disk inside `torch.save` is named as one; torchrun's variables and compile=true are
checked before any file is written. README's reliability table has the one-line rows
(tests/test_cli_errors.py, "Issue 32, runs"); these go further.
"""

from __future__ import annotations

import errno
import io
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
from test_cli_errors import CHECKPOINT, FIXTURE, PAIRS, TINY, run_cli

from annotated_transformer.runs.checkpoints import (
    list_checkpoints,
    load_checkpoint,
    save_checkpoint,
)
from annotated_transformer.runs.presets import preset
from annotated_transformer.training import run_folder, training_checks
from annotated_transformer.training.distributed import torchrun_environment
from annotated_transformer.training.epochs import Diverged
from annotated_transformer.training.run import train
from annotated_transformer.util import atomic

SMALL_DATA = '''\
"""Loaded by a test's training subprocess only: every split is a few sentences."""
from annotated_transformer.data import multi30k

PAIRS = [("Ein Hund rennt über die Wiese.", "A dog runs across the meadow."),
         ("Eine Frau lacht.", "A woman laughs."), ("Ein Mann fährt Rad.", "A man rides.")] * 8
multi30k.read_split = lambda split, data_dir=None, pair="de-en": list(PAIRS)
'''
LONG = ("--max-steps", "100000", "--set", "log_every=1", "--set", "save_every=100000",
        "--set", "eval_every=100000")  # fmt: skip


@pytest.fixture
def small_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every split is a few sentences (test_cli_errors.PAIRS): no Multi30k read."""
    from annotated_transformer.data import multi30k

    monkeypatch.setattr(
        multi30k, "read_split", lambda split, data_dir=None, pair="de-en": list(PAIRS)
    )


@pytest.fixture
def trainer(tmp_path: Path):
    """Start `annotated-transformer train` on the tiny model and a few sentences, in a
    subprocess; each started process is killed at the end if it still runs."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SMALL_DATA, encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "TORCHELASTIC_RUN_ID", "ANNOTATED_TRANSFORMER_TINY"):  # fmt: skip
        env.pop(name, None)  # a plain run of one process, whatever the tests before it set
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    started: list[subprocess.Popen] = []

    def start(run_dir: Path, *argv: str) -> subprocess.Popen:
        command = [sys.executable, "-m", "annotated_transformer", "train", *TINY,
                   "--out", str(run_dir), *argv]  # fmt: skip
        process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True,
                                   preexec_fn=hangup_by_default)  # fmt: skip
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def hangup_by_default() -> None:
    """In the trainer's process, before it starts: SIGHUP as a terminal sends it. Under `nohup`
    (a CI job started with it, say) the trainer inherits SIGHUP ignored, and rightly leaves it
    so; the test of a closed terminal needs the terminal's signal."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def wait_for_steps(process: subprocess.Popen, run_dir: Path, steps: int = 2) -> None:
    """Until the run has logged `steps` steps: it is inside its training loop."""
    deadline = time.monotonic() + 120
    log = run_dir / "metrics.jsonl"
    while not (log.exists() and len(log.read_text(encoding="utf-8").splitlines()) >= steps):
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "the run logged no steps within 2 minutes"
        time.sleep(0.05)


def test_sighup_saves_a_checkpoint_and_the_run_resumes(trainer, tmp_path):
    run_dir = tmp_path / "run"
    process = trainer(run_dir, *LONG)
    wait_for_steps(process, run_dir)
    process.send_signal(signal.SIGHUP)  # the terminal closed
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signal.SIGHUP, stderr
    (saved,) = list_checkpoints(run_dir)
    step = load_checkpoint(saved)["train_state"]["step"]
    assert f"stopped by SIGHUP at step {step}; saved {saved}" in stderr
    resumed = trainer(run_dir, "--resume", "--max-steps", str(step + 1))
    _, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stderr
    assert f"resume: {saved} (step {step}," in stderr
    assert load_checkpoint(run_dir)["train_state"]["step"] == step + 1


def test_a_second_job_is_refused_and_kill_9_frees_the_folder(trainer, tmp_path, capsys, small_data):
    run_dir = tmp_path / "run"
    first = trainer(run_dir, *LONG, "--set", "save_every=1")
    wait_for_steps(first, run_dir)
    for argv in (("--resume",), ("--preset", "tiny")):  # with --resume or without: in use
        code, _, err = run_cli(capsys, "train", *argv, "--out", str(run_dir))
        assert code == 1 and f"in use by another training job (pid {first.pid}," in err, err
    first.kill()  # kill -9: no chance to unlock, or to save
    first.wait()
    assert (run_dir / "train.lock").read_text() == f"{first.pid}\n"  # left, but held by no one
    step = load_checkpoint(run_dir)["train_state"]["step"]
    code, _, err = run_cli(capsys, "train", "--resume", "--out", str(run_dir), "--max-steps",
                           str(step + 1), "--no-progress")  # fmt: skip
    assert code == 0, err
    assert load_checkpoint(run_dir)["train_state"]["step"] == step + 1


def test_a_lock_file_alone_is_not_a_run(capsys, tmp_path, small_data):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "train.lock").write_text("12345\n")  # a job killed before it wrote anything
    code, _, err = run_cli(capsys, "train", *TINY, "--out", str(run_dir))
    assert code == 0, err
    assert (run_dir / "train.lock").read_text() == f"{os.getpid()}\n"


def strict_json(line: str) -> dict:
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(line, parse_constant=refuse)


@pytest.mark.parametrize("keep", [1, 2])
def test_a_diverged_run_stops_and_keeps_every_finite_checkpoint(keep, tmp_path, small_data):
    run_dir = tmp_path / "run"
    config = preset("tiny", N=1, d_model=16, h=2, d_ff=32, min_freq=1, lr_factor=1e9, warmup=1,
                    max_steps=50, epochs=None, log_every=1, save_every=1, keep=keep)  # fmt: skip
    with pytest.raises(Diverged, match=r"training diverged at step (\d+): the (loss|gradient "
                       r"norm) is (nan|inf)") as diverged:  # fmt: skip
        train(config, run_dir, progress=False, log=lambda message: None, device="cpu")
    step = int(str(diverged.value).split("step ")[1].split(":")[0])
    assert step > 1, "diverged at once: the test needs a finite checkpoint first"
    found = list_checkpoints(run_dir)
    assert [p.name for p in found] == [
        f"checkpoint-{s:08d}.pt" for s in range(max(1, step - keep), step)
    ]
    for path in found:  # each loads: finite weights (SavedRun.load refuses NaN)
        assert all(torch.isfinite(w).all() for w in load_checkpoint(path)["model"].values())
    assert f"the newest checkpoint kept, {found[-1].name}, is finite" in str(diverged.value)
    records = [strict_json(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, step + 1))
    assert records[-1]["loss"] is None and records[-1]["finite"] is False
    assert all("finite" not in r for r in records[:-1])


def test_a_checkpoint_holding_nan_is_refused_everywhere(tmp_path, capsys):
    from annotated_transformer.runs.averaging import average_checkpoints
    from annotated_transformer.runs.saved_run import SavedRun
    from annotated_transformer.translator import Translator

    shutil.copytree(FIXTURE, tmp_path / "run")
    path = tmp_path / "run" / CHECKPOINT
    payload = load_checkpoint(path)
    del payload["path"]
    payload["model"]["generator.proj.bias"][3] = float("inf")
    save_checkpoint(path, payload)
    message = "the weight generator.proj.bias holds NaN or inf"
    for read in (SavedRun.load, Translator.from_checkpoint, lambda p: average_checkpoints([p])):
        with pytest.raises(ValueError, match=message):
            read(path)
    code, _, err = run_cli(capsys, "train", "--resume", "--out", str(tmp_path / "run"))
    assert code == 1 and message in err


def test_the_trainer_deletes_only_its_own_temporaries(capsys, tmp_path, small_data):
    shutil.copytree(FIXTURE, tmp_path / "run")
    run_dir = tmp_path / "run"
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = run_dir / f".checkpoint-00000003.pt.written-by-{dead.pid}.k1ll3d00.tmp"
    mine = [  # a user's files, and the temporary file of a writer that runs (this test's parent)
        run_dir / ".experiment.notes.tmp",
        run_dir / ".config.json.1234.tmp",
        run_dir / f".avg.pt.written-by-{os.getppid()}.writing0.tmp",
    ]
    for path in (left, *mine):
        path.write_bytes(b"half a file")
    code, _, err = run_cli(capsys, "train", "--resume", "--out", str(run_dir), "--max-steps", "3",
                           "--no-progress")  # fmt: skip
    assert code == 0, err
    assert f"removed {left.name}, left by an interrupted save" in err
    assert not left.exists() and all(path.read_bytes() == b"half a file" for path in mine)
    assert err.count("removed ") == 1


class FullDisk(io.FileIO):
    def write(self, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_inside_torch_save_is_named(capsys, monkeypatch, tmp_path, small_data):
    shutil.copytree(FIXTURE, tmp_path / "run")
    run_dir = tmp_path / "run"
    before = (run_dir / CHECKPOINT).read_bytes()

    def full_open(fd, mode="r", **kwargs):
        if isinstance(fd, int) and "b" in mode:
            return io.BufferedWriter(FullDisk(fd, "w"))
        return open(fd, mode, **kwargs)

    monkeypatch.setattr(atomic, "open", full_open, raising=False)
    code, _, err = run_cli(capsys, "train", "--resume", "--out", str(run_dir), "--max-steps", "3",
                           "--no-progress")  # fmt: skip
    assert code == 1, err
    checkpoint = run_dir / "checkpoint-00000003.pt"
    assert f"cannot write {checkpoint}: No space left on device; the previous file" in err
    assert "enforce fail" not in err and "unexpected pos" not in err
    assert (run_dir / CHECKPOINT).read_bytes() == before and not checkpoint.exists()
    assert not list(tmp_path.rglob("*.tmp"))


def test_why_a_write_failed_without_an_oserror(monkeypatch, tmp_path):
    error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 64 vs 0")
    assert atomic.why_write_failed(error, tmp_path / "x.pt").startswith("the write failed (")
    full = os.statvfs_result((4096, 4096, 10, 0, 0, 10, 0, 0, 0, 255))  # no block left
    monkeypatch.setattr(atomic.os, "statvfs", lambda path: full)
    assert atomic.why_write_failed(error, tmp_path / "x.pt") == "No space left on device"


TORCHRUN_OK = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "localhost",
               "MASTER_PORT": "29500"}  # fmt: skip
TORCHRUN_BAD = [  # (the variables, what the error says)
    ({"WORLD_SIZE": "2.0"}, "WORLD_SIZE='2.0' is not an integer"),
    ({**TORCHRUN_OK, "RANK": "one"}, "RANK='one' is not an integer"),
    ({**TORCHRUN_OK, "LOCAL_RANK": ""}, "LOCAL_RANK='' is not an integer"),
    ({**TORCHRUN_OK, "MASTER_PORT": "http"}, "MASTER_PORT='http' is not an integer"),
    ({**TORCHRUN_OK, "MASTER_ADDR": " "}, "MASTER_ADDR is set but empty"),
    ({"LOCAL_RANK": "0", "MASTER_ADDR": "x"}, "LOCAL_RANK, MASTER_ADDR set without WORLD_SIZE"),
    ({**TORCHRUN_OK, "WORLD_SIZE": "0"}, "WORLD_SIZE=0 is below 1"),
    ({**TORCHRUN_OK, "RANK": "-1"}, "RANK=-1 is not below WORLD_SIZE=2 (or negative)"),
    ({**TORCHRUN_OK, "LOCAL_RANK": "2"}, "LOCAL_RANK=2 is above RANK=1"),
    ({**TORCHRUN_OK, "MASTER_PORT": "70000"}, "MASTER_PORT=70000 is not a port"),
    ({"WORLD_SIZE": "1", "RANK": "1"}, "RANK=1 is not below WORLD_SIZE=1"),
    (
        {k: v for k, v in TORCHRUN_OK.items() if k != "MASTER_PORT"},
        "WORLD_SIZE=2 is set without MASTER_PORT",
    ),
]


def test_torchruns_variables_are_checked():
    assert torchrun_environment({}) == (0, 1, 0)
    assert torchrun_environment({"WORLD_SIZE": "1"}) == (0, 1, 0)
    assert torchrun_environment(TORCHRUN_OK) == (1, 2, 1)
    for environ, message in TORCHRUN_BAD:
        with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
            torchrun_environment(environ)


def test_torchruns_variables_are_checked_before_any_file(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "5")
    code, _, err = run_cli(capsys, "train", *TINY, "--out", str(tmp_path / "new"))
    assert code == 1 and "WORLD_SIZE=2 is set without LOCAL_RANK, MASTER_ADDR" in err, err
    assert not (tmp_path / "new").exists()
    with pytest.raises(ValueError, match="set without LOCAL_RANK"):
        train(preset("tiny"), tmp_path / "new")
    assert not (tmp_path / "new").exists()


def test_compile_is_checked_before_any_file(capsys, monkeypatch, tmp_path):
    from torch._inductor import cpp_builder

    def no_compiler() -> str:
        raise RuntimeError("No working C++ compiler found in torch._inductor.config.cpp.cxx")

    training_checks.check_compile(preset("tiny"))  # compile=False: nothing is imported or checked
    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_compiler)
    out = tmp_path / "new"
    code, _, err = run_cli(capsys, "train", *TINY, "--out", str(out), "--set", "compile=true")
    assert code == 1 and "compile=true: torch.compile cannot run here (No working C++" in err
    assert not out.exists()
    monkeypatch.undo()
    if shutil.which("g++") or shutil.which("clang++"):  # a machine with a compiler passes
        training_checks.check_compile(preset("tiny", compile=True))


def test_sighup_is_caught_unless_nohup_ignores_it():
    from annotated_transformer.training.signals import StopRequests

    previous = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        with StopRequests() as stops:
            assert signal.getsignal(signal.SIGHUP) == stops.handle
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as under `nohup`: the run goes on
        with StopRequests():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, previous)


@pytest.mark.parametrize("target", ["victim.txt", "missing.txt"])
def test_a_link_planted_as_train_lock_or_log_is_refused_not_followed(tmp_path, target):
    """Issue 60: train.lock (checked, then held) and metrics.jsonl (appended to) are opened
    never through a symbolic link: one planted there is refused, naming it, and the file it
    points at is neither written nor made."""
    from annotated_transformer.training.run_folder import append_line
    from annotated_transformer.util.locks import LinkRefused

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (tmp_path / "victim.txt").write_text("precious\n")
    for name in (run_folder.LOCK, "metrics.jsonl"):
        (run_dir / name).symlink_to(tmp_path / target)
    with pytest.raises(LinkRefused, match=r"train\.lock: .*a symbolic link \(to "):
        run_folder.check_not_in_use(run_dir)
    with pytest.raises(OSError, match=r"train\.lock: a symbolic link \(to .*not followed"):
        run_folder.RunLock(run_dir).__enter__()
    with pytest.raises(atomic.WriteFailed, match=r"metrics\.jsonl: a symbolic link"):
        append_line(run_dir / "metrics.jsonl", '{"step": 1}\n')
    assert (tmp_path / "victim.txt").read_text() == "precious\n"
    assert not (tmp_path / "missing.txt").exists()
