"""Issue 49, part 1: the training step fast where it matters, each change counted, never timed.

A step never waits for the device (no read of a tensor's value inside `train_step`), and a run
reads its losses once per metrics line; batches padded to a few length buckets give
`torch.compile` one graph per bucket, with the same loss as unpadded batches.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from test_cli_errors import PAIRS

import annotated_transformer
from annotated_transformer.runs.presets import preset
from annotated_transformer.training import epochs
from annotated_transformer.training.run import train

PACKAGE = str(Path(annotated_transformer.__file__).parent)
READS = ("item", "__float__", "__int__", "__bool__", "tolist")  # each waits for the device
# The loss's check of its targets reads them only on the CPU (no device to wait for); on CUDA it
# checks them on the device (torch._assert_async).
ON_THE_HOST = {"_check_target"}


@pytest.fixture
def small_data(monkeypatch: pytest.MonkeyPatch) -> None:
    from annotated_transformer.data import multi30k

    monkeypatch.setattr(
        multi30k, "read_split", lambda split, data_dir=None, pair="de-en": list(PAIRS)
    )


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every read of a tensor's value that the package's own code makes, by name, as it happens."""
    calls: list[str] = []
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            code = sys._getframe(1).f_code
            if code.co_filename.startswith(PACKAGE) and code.co_name not in ON_THE_HOST:
                calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return calls


def between(monkeypatch: pytest.MonkeyPatch, module, name: str, calls: list, out: list) -> None:
    """Record in `out` how many reads each call of `module.name` made."""
    original = getattr(module, name)

    def wrapped(*args, **kwargs):
        before = len(calls)
        try:
            return original(*args, **kwargs)
        finally:
            out.append(len(calls) - before)

    monkeypatch.setattr(module, name, wrapped)


@pytest.mark.parametrize("clip_norm", [None, 1.0])
def test_a_step_never_waits_for_the_device_and_a_window_reads_once(
    clip_norm, tmp_path, small_data, monkeypatch
):
    config = preset("tiny", N=1, d_model=16, h=2, d_ff=32, min_freq=1, max_steps=8, epochs=None,
                    log_every=4, eval_every=1000, save_every=1000, clip_norm=clip_norm)  # fmt: skip
    calls = count_reads(monkeypatch)
    steps, windows = [], []
    between(monkeypatch, epochs, "train_step", calls, steps)
    between(monkeypatch, epochs, "log_window", calls, windows)
    train(config, tmp_path / "run", progress=False, log=lambda message: None, device="cpu")
    assert steps == [0] * 8  # not one read inside a step
    assert windows == [1, 1]  # one transfer per metrics line, for its 4 steps
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert sum('"kind": "train"' in line for line in lines) == 2


def test_a_step_that_diverges_inside_a_window_is_named_and_never_saved(tmp_path, small_data):
    from annotated_transformer.runs.checkpoints import list_checkpoints
    from annotated_transformer.training.guards import Diverged

    config = preset("tiny", N=1, d_model=16, h=2, d_ff=32, min_freq=1, lr_factor=1e9, warmup=1,
                    max_steps=50, epochs=None, log_every=7, save_every=2)  # fmt: skip
    with pytest.raises(Diverged, match=r"training diverged at step (\d+): the") as diverged:
        train(config, tmp_path / "run", progress=False, log=lambda message: None, device="cpu")
    step = int(str(diverged.value).split("step ")[1].split(":")[0])
    saved = [int(p.name[11:19]) for p in list_checkpoints(tmp_path / "run")]
    assert all(s < step for s in saved)  # read before each save: nothing from the first NaN on
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert '"finite": false' in lines[-1]  # the window that holds it, its loss null
    assert json.loads(lines[-1])["step"] in (step, step + 1)  # (the save that read it)
