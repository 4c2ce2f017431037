"""The benchmarks in `benchmarks/` (not part of the package): their baselines and their records.

`nn.Transformer` as the training benchmark builds it, against our model with the same weights;
the loader of the 2022 Annotated Transformer's code; beam search without the cache, as the
decoding benchmark runs it; each benchmark end to end, with its record and its errors. Tests that
read Multi30k are skipped where it is not available. (pyproject.toml puts `benchmarks/` on the
tests' path.)
"""

import json
import math
from pathlib import Path

import common
import ct2_sweep
import decoding as decoding_benchmark
import pytest
import torch
import train as train_benchmark
from code_2022 import NAMES_2022, load_2022
from decoding import WholePrefix
from random_batches import PAD, a_batch
from torch import nn
from torch_transformer import TorchTransformer

from annotated_transformer.data.multi30k import read_split
from annotated_transformer.decoding.kernels import KERNELS_ENV
from annotated_transformer.exports.formats import PYTORCH, open_translator
from annotated_transformer.model.transformer import ModelConfig, build_model, make_model
from annotated_transformer.runs.presets import preset
from annotated_transformer.training.run import train

ROOT = Path(__file__).resolve().parent.parent

# --- the baselines of the training benchmark ------------------------------------------------------


def copy_into_torch(ours: nn.Module, theirs: TorchTransformer) -> None:
    """Our weights in nn.Transformer's layout (its projection biases set to 0)."""
    with torch.no_grad():
        for p in theirs.parameters():
            p.zero_()
        theirs.src_embed.weight.copy_(ours.src_embed[0].embedding.weight)
        theirs.tgt_embed.weight.copy_(ours.tgt_embed[0].embedding.weight)
        theirs.generator.load_state_dict(ours.generator.state_dict())
        stacks = (
            (ours.encoder.layers, theirs.transformer.encoder.layers, ("self_attn",)),
            (ours.decoder.layers, theirs.transformer.decoder.layers, ("self_attn", "src_attn")),
        )
        for our_layers, their_layers, attentions in stacks:
            for a, t in zip(our_layers, their_layers, strict=True):
                for name, their_name in zip(
                    attentions, ("self_attn", "multihead_attn")[: len(attentions)], strict=True
                ):
                    mha, their = getattr(a, name), getattr(t, their_name)
                    weight = torch.cat([mha.w_q.weight, mha.w_k.weight, mha.w_v.weight])
                    their.in_proj_weight.copy_(weight)
                    their.out_proj.weight.copy_(mha.w_o.weight)
                t.linear1.load_state_dict(a.feed_forward.w_1.state_dict())
                t.linear2.load_state_dict(a.feed_forward.w_2.state_dict())
                for i, sub in enumerate(a.sublayer):
                    getattr(t, f"norm{i + 1}").load_state_dict(sub.norm.state_dict())


def test_the_nn_transformer_baseline_is_configured_like_our_model():
    torch.manual_seed(11)
    config = ModelConfig(40, 40, N=2, d_model=16, d_ff=32, h=4, dropout=0.0, max_len=64)
    ours, theirs = build_model(config), TorchTransformer(config)
    copy_into_torch(ours, theirs)
    b = a_batch(V=40)
    expected = ours(b.src, b.tgt_in, b.src_mask, b.tgt_mask)
    got = theirs(b.src, b.tgt_in, b.src_mask, b.tgt_mask)
    keep = b.tgt_out != PAD  # padded target positions are never read
    torch.testing.assert_close(got[keep], expected[keep], rtol=1e-4, atol=1e-5)
    # Apart from nn.Transformer's projection biases (4·d_model + ... per attention), the same size.
    biases = sum(
        m.in_proj_bias.numel() + m.out_proj.bias.numel()
        for m in theirs.modules()
        if isinstance(m, nn.MultiheadAttention)
    )
    count = sum(p.numel() for p in theirs.parameters())
    assert count - biases == sum(p.numel() for p in ours.parameters())


FAKE_2022 = """
import this_module_does_not_exist  # never executed: only the named definitions are

def make_model(src_vocab, tgt_vocab, N=6, d_model=512, d_ff=2048, h=8, dropout=0.1):
    ours = __import__("annotated_transformer.model.transformer", fromlist=["make_model"]).make_model
    return ours(src_vocab, tgt_vocab, N, d_model, d_ff, h, dropout)

def helper():  # not one of the names: never defined
    raise AssertionError

class LabelSmoothing(nn.Module):
    def __init__(self, size, padding_idx, smoothing=0.0):
        super().__init__()
        self.size, self.padding_idx, self.smoothing = size, padding_idx, smoothing

    def forward(self, x, target):
        q = torch.full_like(x, self.smoothing / (self.size - 2))
        q.scatter_(1, target.unsqueeze(1), 1 - self.smoothing)
        q[:, self.padding_idx] = 0
        q[target == self.padding_idx] = 0
        return nn.KLDivLoss(reduction="sum")(x, q)
"""


def fake_2022(folder: Path) -> Path:
    """A stand-in for the 2022 file: its make_model is ours, and the other names are stubs."""
    names = [n for n in NAMES_2022 if n not in ("make_model", "LabelSmoothing")]
    path = folder / "the_annotated_transformer.py"
    path.write_text(FAKE_2022 + "".join(f"\nclass {name}:\n    pass\n" for name in names))
    return path


def test_the_2022_loader_runs_only_the_named_definitions_and_names_what_is_missing(tmp_path):
    code = load_2022(fake_2022(tmp_path))
    assert set(NAMES_2022) <= set(code) and "helper" not in code
    assert len(code["sha256"]) == 64
    with pytest.raises(OSError, match=r"no_such_file\.py"):
        load_2022(tmp_path / "no_such_file.py")
    broken = tmp_path / "broken.py"
    broken.write_text("def make_model(:\n")
    with pytest.raises(ValueError, match=r"broken.py: not Python \(line 1"):
        load_2022(broken)
    other = tmp_path / "other.py"
    other.write_text("def make_model():\n    pass\n")
    with pytest.raises(ValueError, match="defines no Decoder, DecoderLayer, Embeddings"):
        load_2022(other)


def test_the_train_benchmark_writes_a_complete_record(data_dir, tmp_path, capsys):
    code = fake_2022(tmp_path)
    out = tmp_path / "bench.json"
    args = [
        "--preset",
        "tiny",
        "--data-dir",
        str(data_dir),
        "--batches",
        "2",
        "--rounds",
        "1",
        "--lengths",
        "16",
        "--code-2022",
        str(code),
        "--output",
        str(out),
    ]
    assert train_benchmark.main(args) == 0
    printed = capsys.readouterr().out
    assert "ours / nn.Transformer" in printed and f"wrote {out}" in printed
    record = json.loads(out.read_text())
    names = [
        "reference",
        "+ SDPA",
        "+ fused QKV",
        "+ loss from logits",
        "ours",
        "nn.Transformer",
        "2022 code",
        "2022 as published",
    ]
    assert list(record["results"]) == names
    for result in record["results"].values():
        assert result["tokens_per_second"] > 0 and result["peak_step_memory_mb"] > 0
        assert 0 < result["model_flops_utilization"] < 1.5
        assert len(result["tokens_per_second_per_round"]) == 1
    assert set(record["ratios"]) >= {
        "ours / reference",
        "ours / nn.Transformer",
        "ours / 2022 code",
        "ours / 2022 as published",
    }
    assert record["config"]["preset"] == "tiny" and record["config"]["batches"] == 2
    assert record["flops_per_target_token"] > 0 and record["matmul"]["flops_per_second"] > 0
    assert record["lengths"][0]["length"] == 16 and "ours" in record["lengths"][0]
    assert record["code_2022"]["sha256"] == load_2022(code)["sha256"]
    assert record["device"].startswith("cpu")
    assert record["command"].startswith("python benchmarks/train.py --preset tiny ")


def test_the_train_benchmark_errors_are_one_line(data_dir, tmp_path, capsys):
    missing = tmp_path / "missing.py"
    code = train_benchmark.main(
        [
            "--preset",
            "tiny",
            "--data-dir",
            str(data_dir),
            "--code-2022",
            str(missing),
            "--lengths",
            "",
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and "missing.py" in err and len(err.strip().splitlines()) == 1
    with pytest.raises(SystemExit):
        train_benchmark.main(["--lengths", "16,x"])
    assert "comma-separated integers" in capsys.readouterr().err
    assert (
        train_benchmark.main(["--preset", "tiny", "--data-dir", str(data_dir), "--lengths", "4096"])
        == 1
    )
    assert "exceed the preset's max_len=256" in capsys.readouterr().err


def test_beam_search_without_the_cache_finds_the_same_translations():
    from annotated_transformer.decoding.search import beam_search

    torch.manual_seed(12)
    model = make_model(30, 30, N=2, d_model=16, d_ff=32, h=4, dropout=0.0).eval()
    b = a_batch(V=30)
    limits = [12] * b.size
    cached = beam_search(model, b.src, b.src_mask, limits, 1, 2, 4, n_best=3)
    uncached = beam_search(
        model, b.src, b.src_mask, limits, 1, 2, 4, n_best=3,
        start=WholePrefix.start, step=WholePrefix.step,
    )  # fmt: skip
    assert [[ids for ids, _ in best] for best in uncached] == [
        [ids for ids, _ in best] for best in cached
    ]
    for best_a, best_b in zip(cached, uncached, strict=True):
        for (_, a), (_, c) in zip(best_a, best_b, strict=True):
            assert math.isclose(a, c, rel_tol=1e-4, abs_tol=1e-5)


def test_the_decoding_benchmark_writes_a_complete_record(data_dir, tmp_path, capsys):
    config = preset("tiny", epochs=None, max_steps=2, eval_every=1000, save_every=2)
    train(config, tmp_path / "run", data_dir=data_dir, progress=False, log=lambda message: None)
    out = tmp_path / "bench.json"
    args = [
        "--checkpoint",
        str(tmp_path / "run"),
        "--data-dir",
        str(data_dir),
        "--limit",
        "6",
        "--baseline-limit",
        "3",
        "--batch",
        "4",
        "--busy",
        "1",
        "--rounds",
        "5",
        "--threads",
        "1",
        "--output",
        str(out),
    ]  # one thread: no spin-wait against the spinner
    assert decoding_benchmark.main(args) == 0
    printed = capsys.readouterr().out
    assert f"wrote {out}" in printed
    record = json.loads(out.read_text())
    assert record["benchmark"] == "decoding" and record["sentences"] == 6
    assert sorted(record) == ["attention", "benchmark", "busy", "checkpoint", "command",
                              "ctranslate2_sweep", "date", "device", "left_out", "machine",
                              "ratios", "results", "rounds", "sentences", "split",
                              "versions"]  # fmt: skip
    # the tests turn the kernels off (conftest.py): PyTorch's attention, and the record says so
    assert record["attention"] == {"attention": f"PyTorch's ({KERNELS_ENV}=off)"}
    # no other engine for word vocabularies: none swept, none left out
    assert record["ctranslate2_sweep"] == {} == record["left_out"]
    # the processor it ran on, with the vector instructions PyTorch's kernels use there
    assert record["versions"]["cpu"].endswith(f", {torch.backends.cpu.get_cpu_capability()}")
    during = record["machine"]["during"]  # issue 50: what the machine let it use
    assert during["busy_niceness"] == [0] and record["machine"]["before"]["busy_niceness"] == []
    assert during["cores_allowed"] >= 1 and len(during["load_average"]) == 3
    rounds = [len(r["every_seconds"]) for r in record["results"].values()]
    assert set(rounds) == {5} and all(r["spread"] >= 0 for r in record["results"].values())
    assert record["command"].startswith("python benchmarks/decoding.py --checkpoint ")
    sentences = {name: r["sentences"] for name, r in record["results"].items()}
    assert sentences == {
        "greedy, 2022 way": 3, "greedy, cached, batched": 6, "beam 4, cached, batched": 6,
        "beam 4 plain": 6, "40 tokens, uncached": 6, "40 tokens, cached": 6,
        "beam 4, uncached": 3, "beam 4, cached (same)": 3,
        "greedy text, whole": 6, "greedy text, streamed": 6,
    }  # fmt: skip
    assert len(record["ratios"]) == 6 and all(value > 0 for value in record["ratios"].values())
    assert "streamed / whole, greedy" in record["ratios"]  # issue 45: both, side by side
    assert "engines: left out (a run with word vocabularies" in printed
    assert record["busy"] == 1 and "1 other processes keep the CPU busy" in printed


def test_the_decoding_benchmark_compares_the_engines(data_dir, tmp_path, capsys):
    """The shipped model (BPE) through ours, CTranslate2 float32 and int8, and transformers:
    text in, text out, each row with its BLEU, and our speed over each other engine's."""
    out = tmp_path / "bench.json"
    args = ["--data-dir", str(data_dir), "--limit", "6", "--baseline-limit", "2", "--batch", "6",
            "--rounds", "2", "--output", str(out)]  # fmt: skip
    assert decoding_benchmark.main(args) == 0
    record = json.loads(out.read_text())
    engines = ["ours", "CTranslate2 float32", "CTranslate2 int8", "CTranslate2 float32 native",
               "CTranslate2 int8 native", "CTranslate2 float32 tuned", "CTranslate2 int8 tuned",
               "transformers", "ours int8", "ours, one search"]  # fmt: skip
    rows = {f"{name}, {how}" for name in engines for how in ("greedy", "beam 4")}
    assert rows <= set(record["results"])
    assert all(record["results"][row]["sentences"] == 6 for row in rows)
    assert all(len(record["results"][row]["every_seconds"]) == 2 for row in rows)  # the median's
    assert all(0 <= record["results"][row]["bleu"] <= 100 for row in rows)
    float32 = [
        record["results"][f"CTranslate2 float32, {how}"]["bleu"] for how in ("greedy", "beam 4")
    ]
    assert float32 == [record["results"][f"ours, {how}"]["bleu"] for how in ("greedy", "beam 4")]
    others = [f"ours / {name}, {how}" for name in engines[1:-2] for how in ("greedy", "beam 4")]
    assert set(others) <= set(record["ratios"])
    assert {"ours int8 / ours, greedy", "ours int8 / ours, beam 4"} <= set(record["ratios"])
    for how in ("greedy", "beam 4"):  # the workers translate as one search does
        assert (
            record["results"][f"ours, one search, {how}"]["bleu"]
            == (record["results"][f"ours, {how}"]["bleu"])
        )
        for quantization in ("float32", "int8"):  # every setting of CTranslate2's sweep, timed
            swept = record["ctranslate2_sweep"][quantization][how]
            assert len(swept) == len(ct2_sweep.SETTINGS)
            assert all(row["sentences_per_second"] > 0 for row in swept)


class _Raised:
    """A future of the other process that failed as CTranslate2's CUDA 12 wheel does beside
    CUDA 13's libraries."""

    def result(self) -> dict:
        raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded\nsecond line")


def test_on_a_gpu_the_decoding_benchmark_leaves_out_what_cannot_run_and_says_why(
    data_dir, monkeypatch, capsys
):
    """On a GPU: no CPU-only row and no sweep of CPU threads; a CTranslate2 that cannot decode
    there leaves its rows out with the reason in one line, and the other engines still run."""
    on_cpu = [name for name, _, _ in decoding_benchmark.engines_for(torch.device("cpu"))]
    on_gpu = [name for name, _, _ in decoding_benchmark.engines_for(torch.device("cuda"))]
    assert set(on_cpu) - set(on_gpu) == set(decoding_benchmark.CPU_ONLY)
    assert "CTranslate2 float32" in on_gpu and "transformers" in on_gpu
    why = "RuntimeError: Library libcublas.so.12 is not found or cannot be loaded"
    assert decoding_benchmark.other_round(lambda *_: _Raised(), {}, True) == (None, why)
    with pytest.raises(RuntimeError, match="libcublas"):  # on a CPU, CTranslate2 must run
        decoding_benchmark.other_round(lambda *_: _Raised(), {}, False)

    tries = []  # the engine rounds CTranslate2 was asked for, here failing as on that machine

    def fails(submit, job: dict, on_gpu: bool) -> tuple[None, str]:
        tries.append(job["name"])
        return None, why

    monkeypatch.setattr(decoding_benchmark, "other_round", fails)
    timings, left_out = decoding_benchmark.Timings(torch.device("cuda")), {}
    translator = decoding_benchmark._translator(None, "cpu")  # (its rows run here on the CPU)
    pairs = read_split("test2016", data_dir)[:3]
    job = {"checkpoint": None, "device": "cpu", "threads": 1}
    swept = decoding_benchmark._time_engines(timings, translator, pairs, job, 2, left_out)
    assert swept == {} and left_out == {"CTranslate2": why} and tries == ["CTranslate2 float32"]
    names = {name.rsplit(", ", 1)[0] for name in timings.results}
    assert names == {"ours", "transformers"}
    assert f"CTranslate2 on cuda: left out ({why})" in capsys.readouterr().out


def test_the_decoding_benchmark_names_a_missing_checkpoint(tmp_path, capsys):
    assert decoding_benchmark.main(["--checkpoint", str(tmp_path / "nothing.pt")]) == 1
    err = capsys.readouterr().err
    assert "nothing.pt" in err and len(err.strip().splitlines()) == 1
    assert decoding_benchmark.main(["--busy", "2", "--rounds", "2"]) == 1  # too few to trust
    err = capsys.readouterr().err
    assert "--busy 2 needs at least 5 --rounds" in err and len(err.strip().splitlines()) == 1


# --- the GPU work's benchmarks, run small on the CPU ----------------------------------------------


def test_the_wmt_benchmark_projects_the_papers_steps_from_its_own_timing(tmp_path, capsys):
    import wmt_throughput

    out = tmp_path / "wmt.json"
    # one layer a side (--layers 1): the same record as the base model's, for a sixth of the work
    args = ["--tokens", "120", "--length", "8", "--vocab", "300", "--steps", "1", "--layers", "1",
            "--no-compile", "--device", "cpu", "--spread", "3", "--profile-kernels", "5",
            "--output", str(out)]  # fmt: skip
    assert wmt_throughput.main(args) == 0
    record = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert record["config"]["N"] == 1 and "base model with N=1" in printed
    assert record["config"]["sentences"] == 15 and record["config"]["target_tokens"] == 120
    assert record["config"]["vocab"] == 300 and record["config"]["d_model"] == 512
    assert record["config"]["varied_lengths"] == [4, 10, 16]  # half to twice --length
    assert record["config"]["length_buckets"] == 4
    assert list(record["results"]) == [  # each change on and off, side by side
        "ours", "ours, the loss unchunked", "ours, the loss read every step", "varied lengths",
        "varied lengths, buckets"]  # fmt: skip
    results = record["results"]
    for name in ("ours, the loss unchunked", "ours, the loss read every step"):
        assert results[name]["flops_per_step"] == results["ours"]["flops_per_step"]  # same work
    assert results["varied lengths"]["shapes"] == 3  # a shape per length ...
    assert results["varied lengths, buckets"]["shapes"] == 2  # ... or per bucket: 8, 16
    assert (
        results["varied lengths, buckets"]["flops_per_step"]
        == results["varied lengths"]["flops_per_step"]
    )  # (counted on the unpadded batches: padding is not useful work)
    assert all("graphs" not in r and "kernels" not in r for r in results.values())
    assert list(record["kernels"]) == ["ours"]  # (and the compiled step, when it runs)
    table = record["kernels"]["ours"]
    assert len(table) == 5 and all(set(row) == {"name", "calls", "self_share"} for row in table)
    assert all(row["calls"] >= 3 for row in table)  # (3 steps profiled)
    assert all(0 < row["self_share"] <= 1 for row in table) and sum(
        row["self_share"] for row in table) <= 1.0001  # fmt: skip
    shares = [row["self_share"] for row in table]
    assert shares == sorted(shares, reverse=True)
    result = record["results"]["ours"]
    assert result["peak_step_memory_mb"] > 0
    seconds = result["seconds_per_step"]
    assert all(r["spread"][0] <= r["seconds_per_step"] <= r["spread"][1] for r in results.values())
    assert result["hours_to_100k_steps"] == round(seconds * 100_000 / 3600, 2)
    assert result["tokens_per_second"] == round(120 / seconds, 1)
    assert 0 < result["model_flops_utilization"] < 1.5
    assert record["paper"] == {"steps": 100_000, "hours": 12.0, "gpus": "8 P100"}
    assert record["complete"] is True  # written after each variant: a capped run keeps those
    assert printed.count(f"wrote {out}") == len(results)  # it finished
    assert wmt_throughput.main(["--vocab", "3", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1].endswith("--vocab must exceed the 4 special ids, got 3")
    assert wmt_throughput.main(["--layers", "0", "--device", "cpu"]) == 1
    assert capsys.readouterr().err.strip().endswith("--layers must be at least 1, got 0")


def test_the_wmt_benchmark_compiles_with_each_mode_and_times_cuda_modes_on_cuda_only(monkeypatch):
    import wmt_throughput

    calls = []
    monkeypatch.setattr(wmt_throughput.torch, "compile", lambda model, **how: calls.append(how))
    by_name = {variant.name: variant for variant in wmt_throughput.VARIANTS}
    model = torch.nn.Linear(2, 2)
    for name in ("ours + torch.compile, CUDA graphs", "ours + torch.compile, max-autotune",
                 "varied lengths + torch.compile"):  # fmt: skip
        wmt_throughput.compiled(model, by_name[name])
    assert calls == [{"mode": "reduce-overhead"}, {"mode": "max-autotune"},
                     {"dynamic": True, "mode": None}]  # fmt: skip
    assert wmt_throughput.compiled(model, by_name["ours"]) is model
    args = wmt_throughput.build_parser().parse_args([])  # compiled variants on, --spread 6
    timed = {kind: [v.name for v in wmt_throughput.VARIANTS
                    if wmt_throughput.runs_here(v, args, torch.device(kind), varied=True)]
             for kind in ("cpu", "cuda")}  # fmt: skip
    assert set(timed["cuda"]) - set(timed["cpu"]) == {
        "ours + torch.compile, CUDA graphs", "ours + torch.compile, max-autotune",
        "varied lengths, buckets + torch.compile, CUDA graphs"}  # fmt: skip
    assert "ours + torch.compile" in timed["cpu"] and len(timed["cuda"]) == len(by_name)
    chosen = ["ours", "ours + torch.compile, CUDA graphs"]  # --variant: these only, where they run
    args = wmt_throughput.build_parser().parse_args([f"--variant={name}" for name in chosen])
    assert [
        v.name
        for v in wmt_throughput.VARIANTS
        if wmt_throughput.runs_here(v, args, torch.device("cuda"), varied=True)
    ] == chosen
    assert [
        v.name
        for v in wmt_throughput.VARIANTS
        if wmt_throughput.runs_here(v, args, torch.device("cpu"), varied=True)
    ] == ["ours"]


def test_the_wmt_benchmark_names_an_unknown_variant(capsys):
    import wmt_throughput

    assert wmt_throughput.main(["--variant", "ours, fast", "--device", "cpu"]) == 1
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--variant: no variant named 'ours, fast'; expected one of 'ours', " in line


def test_one_process_under_torchrun_equals_the_plain_run(data_dir, tmp_path, capsys):
    import ddp_check

    out = tmp_path / "ddp.json"
    args = ["--preset", "tiny", "--steps", "2", "--data-dir", str(data_dir), "--device", "cpu",
            "--output", str(out)]  # fmt: skip
    assert ddp_check.main(args) == 0
    record = json.loads(out.read_text())
    assert record["backend"] == "gloo" and record["equal"] is True
    assert record["largest_weight_difference"] == {"plain vs plain": 0.0, "plain vs torchrun": 0.0}
    assert len(record["losses"]["plain"]) == 2
    assert record["losses"]["plain"] == record["losses"]["torchrun"]


def test_the_search_rules_benchmark_writes_a_complete_record(data_dir, tmp_path, capsys):
    import search_rules

    out = tmp_path / "rules.json"
    args = ["--data-dir", str(data_dir), "--limit", "12", "--rounds", "2", "--output", str(out)]
    assert search_rules.main(args) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["benchmark"] == "search_rules" and record["sentences"] == 12
    assert sorted(record["rules"]) == ["k-finished", "t2t"]
    for row in record["rules"].values():
        assert len(row["seconds_per_round"]) == 2 and row["decoder_steps"] > 0
    assert 0 <= record["different_translations"] <= 12


def test_the_variants_benchmark_measures_each_step_and_counts_its_translations(
    data_dir, tmp_path, capsys
):
    import decoding_variants

    out = tmp_path / "variants.json"
    args = ["--data-dir", str(data_dir), "--limit", "12", "--rounds", "2", "--part", "5",
            "--compile-rows", "0", "--whole-step-rows", "", "--output", str(out)]  # fmt: skip
    assert decoding_variants.main(args) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["sentences"] == 12 and record["compiled_step"] is None and record["part"] == 5
    assert record["whole_step"] is None
    names = [f"{v}, {how}" for v in decoding_variants.VARIANTS for how in ("greedy", "beam 4")]
    assert sorted(record["results"]) == sorted(names)
    for name, row in record["results"].items():
        assert len(row["every_seconds"]) == 2 and row["seconds"] > 0
        assert row["fastest_seconds"] == min(row["every_seconds"])
        if name.startswith(("in place", "fused", "packed")):  # as the reference step does
            assert row["same_as_reference"] == 12, name
        assert row["speed / reference"] == 1.0 or not name.startswith("reference")
    products = record["products"]  # nn.Linear's products against oneDNN's, every shape, 2 sizes
    assert len(products) == 2 * len({(r["in"], r["out"]) for r in products}) >= 2
    assert all(r["max_abs_difference"] < 1e-3 and r["onednn_gflops"] > 0 for r in products)


def test_the_refill_benchmark_translates_as_the_package_in_fewer_steps(data_dir, tmp_path):
    """Continuous batching, both forms (benchmarks/decoding_refill.py), on 1 and 2 workers: the
    package's translations; overlapped batches take fewer steps than the package's pieces;
    refilled rows read more keys than their own positions need (the older rows' columns)."""
    import decoding_refill

    out = tmp_path / "refill.json"
    threads = torch.get_num_threads()
    args = ["--data-dir", str(data_dir), "--limit", "40", "--rounds", "1", "--rows", "12",
            "--refill-at", "4", "--next-at", "8", "--output", str(out)]  # fmt: skip
    assert decoding_refill.main(args) == 0
    assert torch.get_num_threads() == threads  # as it found them
    record = json.loads(out.read_text())
    assert sorted(record["results"]) == sorted(
        decoding_refill.label(kind, w) for kind in decoding_refill.KINDS for w in (1, 2)
    )
    rows = record["results"]
    for name, row in rows.items():
        assert row["same_as_package"] == 40 and len(row["every_seconds"]) == 1, name
    assert rows["overlapped, 2 workers"]["steps"] < rows["package, 2 workers"]["steps"]
    for w in (1, 2):
        assert rows[decoding_refill.label("refilled", w)]["keys_read / keys_needed"] > 1.0  # joined


@pytest.mark.parametrize("bad", [["--rows", "4", "--refill-at", "4"], ["--next-at", "-1"]])
def test_the_refill_benchmark_refuses_settings_it_cannot_run_in_one_line(bad, tmp_path, capsys):
    import decoding_refill

    out = tmp_path / "refill.json"
    assert decoding_refill.main([*bad, "--output", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--refill-at" in err and not out.exists()


def test_the_whole_step_compiled_ahead_of_time_computes_the_packages_step(data_dir):
    """The variants benchmark's whole step (AOTInductor, the weights frozen in), at any rows:
    the package's logits but for their last bits, and the same next token in every row."""
    import decoding_variants
    from torch._inductor import cpp_builder

    try:
        cpp_builder.get_cpp_compiler()
    except Exception:  # (InvalidCxxCompiler: the build needs one)
        pytest.skip("no C++ compiler")
    translator = open_translator(None, device="cpu", reads=PYTORCH)
    german = [g for g, _ in read_split("test2016", data_dir)[:7]]
    found = decoding_variants.whole_step(translator, german, (3, 9), positions=4)
    assert found["compile_seconds"] > 0 and sorted(found) == ["3", "9", "compile_seconds"]
    for rows in (3, 9):  # (9 rows: the 7 sentences and 2 again)
        row = found[str(rows)]
        assert row["rows"] == row["same_argmax_rows"] == rows and row["positions"] == 4
        assert row["eager_ms"] > 0 and row["compiled_ms"] > 0
        assert row["max_abs_difference"] < 1e-4


def test_the_batches_benchmark_compares_each_size_with_the_base_in_the_same_rounds(
    data_dir, tmp_path, capsys
):
    import decoding_batches

    out = tmp_path / "batches.json"
    args = ["--data-dir", str(data_dir), "--limit", "10", "--sizes", "16,4096", "--base", "4096",
            "--rounds", "2", "--output", str(out)]  # fmt: skip
    assert decoding_batches.main(args) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    record = json.loads(out.read_text())
    assert record["sentences"] == 10 and record["base"] == 4096 and record["rounds"] == 2
    assert sorted(record["results"]) == ["16, beam 4", "16, greedy", "4096, beam 4", "4096, greedy"]
    for row in record["results"].values():
        assert len(row["every_seconds"]) == 2 and 0 <= row["same_as_4096"] <= 10
    assert record["results"]["4096, greedy"]["speed / 4096"] == 1.0
    assert record["results"]["4096, beam 4"]["same_as_4096"] == 10


@pytest.mark.parametrize(
    "sizes, why",
    [("16,x", "--sizes must be integers separated by commas, got '16,x'"),
     ("16,32", "--sizes must be positive and hold --base (4096), got '16,32'"),
     ("0,4096", "--sizes must be positive and hold --base (4096), got '0,4096'")],
)  # fmt: skip
def test_the_batches_benchmark_refuses_sizes_in_one_line(sizes, why, tmp_path, capsys):
    import decoding_batches

    out = tmp_path / "batches.json"
    argv = ["--sizes", sizes, "--base", "4096", "--output", str(out)]
    assert decoding_batches.main(argv) == 1
    assert capsys.readouterr().err == f"decoding_batches.py: error: {why}\n"
    assert not out.exists()


def test_the_in_place_cache_gives_the_steps_log_probabilities():
    import decoding_variants

    from annotated_transformer.decoding.cache import decode_step, start_cache

    torch.manual_seed(3)
    model = make_model(11, 11, N=2, d_model=16, d_ff=32, h=2).eval()
    src = torch.randint(3, 11, (3, 5))
    mask = torch.ones(3, 1, 5, dtype=torch.bool)
    with torch.no_grad():
        memory = model.encode(src, mask)
        a = start_cache(model, memory, mask)
        b = decoding_variants.start_in_place(model, memory, mask)
        tokens = torch.tensor([1, 1, 1])
        for t in range(70):  # past its first room of 64 positions
            if t == 3:  # beam search's widening and reordering
                rows = torch.tensor([0, 0, 2, 1, 2, 0])
                a, b, tokens = a.select(rows, 2), b.select(rows, 2), tokens[rows]
            expected, a = decode_step(model, tokens, a)
            found, b = decoding_variants.in_place_step(model, tokens, b)
            torch.testing.assert_close(found, expected, rtol=0, atol=1e-6)
            tokens = expected.argmax(-1)
    assert b.length == 70 and b.store["keys"][0].shape[0] >= 70


def _counting(path: Path) -> bool:
    """Whether the benchmark at `path` runs through `run_main` and takes --rounds or --limit."""
    text = path.read_text(encoding="utf-8")
    counts = ('"--rounds"', '"--limit"', "sentence_options(parser)")
    return path.stem != "common" and "run_main(" in text and any(c in text for c in counts)


COUNTING = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py") if _counting(p))


@pytest.mark.parametrize("name", COUNTING)
def test_a_count_below_one_is_refused_in_one_line(name, tmp_path, capsys):
    """`--rounds 0` would time nothing, `--limit 0` is not "no limit" and `--limit -1` not "all
    but the last": in every benchmark that has them, one line and no record."""
    import importlib

    module = importlib.import_module(name)
    options = vars(module.build_parser().parse_args([]))  # (every option, at its default)
    counts = [(n, unit) for n, unit in common.COUNTS.items() if n in options]
    assert counts, f"{name} has neither --rounds nor --limit"
    out = tmp_path / "record.json"
    assert len(COUNTING) >= 9  # (every decoding benchmark, search_rules, train)
    for option, unit in counts:
        for value in ("0", "-1"):
            assert module.main([f"--{option}", value, "--output", str(out)]) == 1
            err = capsys.readouterr().err.strip().splitlines()
            expected = f"--{option} must be at least 1{unit}, got {value}"
            assert len(err) == 1 and err[0].endswith(expected), err
            assert not out.exists()
