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
ON_THE_HOST = {"check_target"}


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
    from annotated_transformer.training.epochs import Diverged

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


def random_batch(generator: torch.Generator, sentences: int, src_len: int, tgt_len: int):
    """A batch of random ids: S = `src_len` and T = `tgt_len` - 1 (the first sentence), the other
    sentences shorter or as long."""
    from annotated_transformer.data.batch import collate
    from annotated_transformer.data.vocab import BOS_ID, EOS_ID, PAD_ID

    def ids(n: int) -> torch.Tensor:
        return torch.randint(EOS_ID + 1, 40, (n,), generator=generator)

    def up_to(n: int) -> int:
        return int(torch.randint(1, n + 1, (), generator=generator))

    lengths = [(src_len, tgt_len)] + [
        (up_to(src_len), up_to(tgt_len)) for _ in range(sentences - 1)
    ]
    bos, eos = torch.tensor([BOS_ID]), torch.tensor([EOS_ID])
    pairs = [(torch.cat([ids(s - 1), eos]), torch.cat([bos, ids(t - 1), eos])) for s, t in lengths]
    return collate(pairs, PAD_ID)


def small_model(seed: int = 0):
    from annotated_transformer.model.transformer import ModelConfig, build_model

    torch.manual_seed(seed)
    config = ModelConfig(src_vocab=40, tgt_vocab=40, N=1, d_model=16, h=2, d_ff=32, max_len=64)
    return build_model(config).eval()  # (no dropout: the same numbers drawn either way)


@pytest.mark.parametrize("fused", [False, True])
def test_padding_to_a_bucket_leaves_the_loss_and_its_gradients_unchanged(fused):
    from annotated_transformer.data.batch import bucket_length, padded_to_buckets
    from annotated_transformer.data.vocab import PAD_ID
    from annotated_transformer.training.fused import LabelSmoothingFromLogits
    from annotated_transformer.training.label_smoothing import LabelSmoothing
    from annotated_transformer.training.loop import batch_loss

    criterion = (LabelSmoothingFromLogits if fused else LabelSmoothing)(40, PAD_ID, 0.1)
    batch = random_batch(torch.Generator().manual_seed(1), 5, 11, 9)
    padded = padded_to_buckets(batch, 4, 64, PAD_ID)
    assert padded.src.shape == (5, 16) and padded.tgt_in.shape == (5, 16)  # buckets 16, 32, ...
    assert padded.ntokens == batch.ntokens and bucket_length(17, 4, 64) == 32
    grads = []
    for b in (batch, padded):
        model = small_model()
        loss = batch_loss(model, b, criterion)
        loss.backward()
        grads.append((loss.detach(), [p.grad for p in model.parameters()]))
    (loss, grad), (loss_padded, grad_padded) = grads
    torch.testing.assert_close(loss_padded, loss, rtol=1e-6, atol=0)  # float32
    for g, gp in zip(grad, grad_padded, strict=True):
        torch.testing.assert_close(gp, g, rtol=1e-4, atol=1e-6)  # (sums over more zeros)


def test_a_compiled_model_sees_one_graph_per_pair_of_buckets(monkeypatch):
    from torch._dynamo.utils import counters

    from annotated_transformer.data.batch import bucket_length, padded_to_buckets
    from annotated_transformer.data.vocab import PAD_ID
    from annotated_transformer.training import run as run_module

    compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda model, **kw: compile(model, backend="eager", **kw))
    config = preset("tiny", length_buckets=4, compile=True, max_len=64)
    procs = run_module.Processes(0, 1, 0, torch.device("cpu"), None)
    model = small_model()
    net = run_module.wrap(model, config, procs)
    torch._dynamo.reset()
    counters.clear()
    generator = torch.Generator().manual_seed(0)
    shapes, buckets = set(), set()
    with torch.no_grad():
        for src_len, tgt_len, sentences in [(s, t, 2 + (s * t) % 5) for s in range(3, 30, 4)
                                            for t in (4, 9, 20)]:  # fmt: skip
            batch = random_batch(generator, sentences, src_len, tgt_len)
            shapes.add((batch.src.shape, batch.tgt_in.shape))
            padded = padded_to_buckets(batch, config.length_buckets, 64, PAD_ID)
            buckets.add((padded.src.size(1), padded.tgt_in.size(1)))
            net(padded.src, padded.tgt_in, padded.src_mask, padded.tgt_mask)
    assert buckets == {(bucket_length(s, 4, 64), bucket_length(t - 1, 4, 64))
                       for s in (4, 30) for t in (4, 9, 20)}  # fmt: skip
    assert len(shapes) >= 15  # a graph per shape would be this many
    assert counters["stats"]["unique_graphs"] == len(buckets)  # one per pair of buckets
    torch._dynamo.reset()


def test_length_buckets_is_a_setting_checked_like_the_others(capsys, tmp_path, small_data):
    from test_cli_errors import TINY, run_cli

    from annotated_transformer.util.settings import SettingError

    assert preset("tiny").length_buckets == 0  # off: every batch as long as its longest
    for bad in (-1, 65, 2.5, True):
        with pytest.raises(SettingError, match="length_buckets") as error:
            preset("tiny", length_buckets=bad)
        assert "\n" not in str(error.value) and "an integer >= 0 up to 64" in str(error.value)
    code, _, err = run_cli(capsys, "train", *TINY, "--set", "length_buckets=x", "--out",
                           str(tmp_path / "bad"))  # fmt: skip
    assert code == 2 and err.strip().count("\n") == 0 and "length_buckets" in err
    code, _, err = run_cli(capsys, "train", *TINY, "--set", "length_buckets=4", "--out",
                           str(tmp_path / "run"))  # fmt: skip
    assert code == 0, err
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["length_buckets"] == 4
