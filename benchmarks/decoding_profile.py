"""Where a decoding step's time goes: one worker's searches under `torch.profiler`, per step.

    python benchmarks/decoding_profile.py --output results/bench-decoding-profile-cpu.json

The model that ships with the package translates every sentence of test2016 the way one of
`translate_ids`'s workers does (one search at a time on one CPU thread), greedy and beam 4, in
float32 and with its linear layers in int8 (`Translator.quantized`), with the attention a
`Translator` runs: the compiled kernels of `decoding.kernels` (`--attention kernels`, the default;
built first where they are not), whose calls the profiler sees as one region of their own
(`KERNELS_EVENT`, counted with attention's products), or PyTorch's (`--attention pytorch`). For
each it records:

- the seconds in the encoder (once per sentence) and in the decoder's steps (the rest is the
  searches' own work between steps, and batching);
- the decoder steps, the rows they fed, and each step's time against its rows: a least-squares
  line `seconds = fixed + per_row × rows`. `fixed` is what a step costs whatever its rows, which
  is what continuous batching (refilling a finished sentence's row from the queue) could share
  out: the record keeps the bound `fixed × (steps − row_steps / width)`, the steps it would save
  at most, as a share of the time;
- `torch.profiler`'s operators, per step: their self time in groups (the linear layers' matrix
  products, attention's, softmax, the cache's gathers and appends, the search, the rest), the
  time outside any operator (Python and the search's bookkeeping), and the top operators.

The profiler slows what it watches: its times are shares, the unprofiled runs give the seconds.
Those are timed in `--rounds` interleaved rounds (each of the four runs once a round), and each
run's median round is kept, with every round's seconds, so that float32 and int8 are compared as
the machine was at the same moments.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial

import torch
from common import (
    attention_kernels,
    command,
    now,
    run_main,
    sentence_options,
    split_pairs,
    versions,
    write_report,
)
from torch import nn
from torch.profiler import ProfilerActivity, profile

from annotated_transformer.decoding import batched
from annotated_transformer.decoding.batched import translate_ids
from annotated_transformer.exports.formats import PYTORCH, open_translator
from annotated_transformer.util.device import describe_device

KERNELS_EVENT = "attention: compiled kernels"  # the profiler's region around each kernel call
# group: the operators whose self time it sums (the rest are "other operators")
GROUPS = {
    "linear layers' matrix products": (
        "aten::addmm",
        "aten::mm",
        "quantized::linear_dynamic",
        "mkldnn::_linear_pointwise",
    ),
    # (the fused step's kernel does the products and the softmax at once: counted here)
    "attention's matrix products": (
        "aten::bmm",
        "aten::_scaled_dot_product_flash_attention_for_cpu",
        KERNELS_EVENT,
    ),
    "softmax and log-softmax": ("aten::_softmax", "aten::_log_softmax"),
    "cache: gathers and appends": ("aten::index_select", "aten::cat", "aten::copy_"),
    "search: argmax, top-k, masks": (
        "aten::argmax",
        "aten::max",
        "aten::topk",
        "aten::amax",
        "aten::nonzero",
        "aten::searchsorted",
        "aten::gather",
        "aten::index",
        "aten::index_put_",
        "aten::eq",
        "aten::ne",
        "aten::gt",
        "aten::lt",
        "aten::isfinite",
        "aten::bitwise_and",
        "aten::sum",
        "aten::_local_scalar_dense",
    ),
    "layer norm, ReLU, residuals, masking": (
        "aten::native_layer_norm",
        "aten::add",
        "aten::clamp_min",
        "aten::relu",
        "aten::masked_fill_",
        "aten::div",
        "aten::mul",
    ),
}
OUTSIDE = "outside any operator (Python, bookkeeping)"


class Steps:
    """The step that `translate_ids` gives its searches (what `packed_step` makes) and the
    encoder of the model it decodes with (what `onednn_linears` makes of `model`), watched: each
    step's rows, cache length and seconds, and the encoder's seconds in all."""

    def __init__(self, model: nn.Module | None = None) -> None:
        self.calls: list[tuple[int, int, float]] = []  # (rows, cache length, seconds)
        self.encoder_seconds = 0.0
        self.model, self.original = model, batched.packed_step
        self.onednn, self.watched = batched.onednn_linears, []

    def __enter__(self) -> Steps:
        def timed_packed_step(*args, **options):  # translate_ids' step, its calls timed
            step = self.original(*args, **options)

            def timed_step(model, tokens, cache):  # the same call, timed
                start = time.perf_counter()
                out = step(model, tokens, cache)
                self.calls.append((tokens.numel(), cache.length, time.perf_counter() - start))
                return out

            return timed_step

        def timed_encode(model: nn.Module, *args):
            start = time.perf_counter()
            out = type(model).encode(model, *args)
            self.encoder_seconds += time.perf_counter() - start
            return out

        def watched_model(model: nn.Module) -> nn.Module:  # what translate_ids decodes with
            decoding = self.onednn(model)
            if self.model is not None and model is self.model:  # this model's only
                decoding.encode = functools.partial(timed_encode, decoding)
                self.watched.append(decoding)
            return decoding

        batched.packed_step = timed_packed_step  # what translate_ids makes its step with
        batched.onednn_linears = watched_model
        return self

    def __exit__(self, *exc: object) -> None:
        batched.packed_step, batched.onednn_linears = self.original, self.onednn
        for model in self.watched:  # until the block ends
            del model.encode
        self.watched.clear()

    def summary(self, seconds: float) -> dict:
        """Steps, rows, the fitted line and the bound on what continuous batching could save."""
        rows = torch.tensor([r for r, _, _ in self.calls], dtype=torch.float64)
        times = torch.tensor([s for _, _, s in self.calls], dtype=torch.float64)
        design = torch.stack([torch.ones_like(rows), rows], dim=1)  # (steps, 2)
        fixed, per_row = torch.linalg.lstsq(design, times.unsqueeze(1)).solution.flatten()
        widths, width = [], 0  # each search's widest step: the rows its batch could hold
        for r, length, _ in self.calls:
            if length == 0 and width:  # a new search begins
                widths.append(width)
                width = 0
            width = max(width, r)
        widths.append(width)
        steps, row_steps = len(self.calls), float(rows.sum())
        saved = max(0.0, float(fixed) * (steps - row_steps / (sum(widths) / len(widths))))
        return {"encoder_seconds": round(self.encoder_seconds, 3), "steps": steps,
                "row_steps": int(row_steps), "searches": len(widths),
                "mean_width": round(sum(widths) / len(widths), 1),
                "step_seconds": round(float(times.sum()), 3),
                "fixed_ms_per_step": round(float(fixed) * 1e3, 3),
                "per_row_us": round(float(per_row) * 1e6, 3),
                "continuous_batching_bound": round(saved / seconds, 3)}  # fmt: skip


def operator_table(prof: profile, steps: int, seconds: float) -> dict:
    """The profiler's operators per step: grouped self times and their shares, and the top 12."""
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events) / 1e6  # seconds inside operators
    grouped = dict.fromkeys([*GROUPS, "other operators"], 0.0)
    for event in events:
        group = next((g for g, names in GROUPS.items() if event.key in names), "other operators")
        grouped[group] += event.self_cpu_time_total / 1e6
    grouped[OUTSIDE] = max(0.0, seconds - total)
    whole = sum(grouped.values())
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:12]
    return {
        "groups": {
            g: {"ms_per_step": round(s * 1e3 / steps, 3), "share": round(s / whole, 3)}
            for g, s in grouped.items()
        },
        "top_operators": [
            {
                "name": e.key,
                "calls_per_step": round(e.count / steps, 2),
                "us_per_step": round(e.self_cpu_time_total / steps, 1),
                "share": round(e.self_cpu_time_total / 1e6 / whole, 3),
            }
            for e in top
        ],
    }


def visible(attend: Callable | None) -> Callable | None:
    """`attend` (None: `translate_ids`' own), each call a region of the profiler's named
    KERNELS_EVENT: the compiled kernels run no operator that the profiler could see."""
    if attend is None:
        return None

    def attention(*args, **options):
        with torch.profiler.record_function(KERNELS_EVENT):
            return attend(*args, **options)

    return attention


def timed(model: nn.Module, translate: Callable[[], object]) -> tuple[float, dict]:
    """One unprofiled run of `translate`, which translates with `model`: its seconds, and its
    steps and encoder timed (`Steps.summary`)."""
    with Steps(model) as steps:
        start = time.perf_counter()
        translate()
        seconds = time.perf_counter() - start
    return seconds, steps.summary(seconds)


def profiled(translate: Callable[[], object]) -> dict:
    """One run of `translate` under `torch.profiler`: its seconds and its operators per step."""
    with Steps() as counted, profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        translate()
        seconds = time.perf_counter() - start
    return {"profiled_seconds": round(seconds, 3),
            **operator_table(prof, len(counted.calls), seconds)}  # fmt: skip


def measure(runs: dict[str, tuple[nn.Module, Callable[[], object]]], rounds: int) -> dict:
    """Each run warmed up, then timed in `rounds` interleaved rounds (so that a machine that
    slows down slows every run alike), its median round kept; then each run profiled once."""
    for _, translate in runs.values():
        translate()  # warm up: the first call pays for allocations
    found: dict[str, list[tuple[float, dict]]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, (model, translate) in runs.items():
            found[name].append(timed(model, translate))
    results = {}
    for name, (_, translate) in runs.items():
        seconds, summary = sorted(found[name], key=lambda pair: pair[0])[(rounds - 1) // 2]
        every = [round(s, 3) for s, _ in found[name]]
        results[name] = {"seconds": round(seconds, 3), "rounds_seconds": every, **summary,
                         **profiled(translate)}  # fmt: skip
    return results


def bench_profile(args: argparse.Namespace, argv: Sequence[str]) -> int:
    torch.set_num_threads(1)  # one worker's thread
    translator = open_translator(device="cpu", reads=PYTORCH)
    pairs = split_pairs(args)
    sources = translator.encode([s for s, _ in pairs])
    attend, attention = attention_kernels(translator, args.attention == "kernels")
    runs = {}
    for kind, model in (("float32", translator.model),
                        ("int8", translator.quantized("int8").model)):  # fmt: skip
        for beam, how in ((1, "greedy"), (4, "beam 4")):
            runs[f"{kind}, {how}"] = (model, partial(
                translate_ids, model, sources, translator.tgt_vocab,
                max_len=translator.config.model.max_len, max_tokens=translator.max_tokens,
                beam_size=beam, workers=1, attend=visible(attend)))  # fmt: skip
    results = measure(runs, args.rounds)
    for name, found in results.items():
        print(
            f"{name}: {len(sources) / found['seconds']:.1f} sentences/s (median of "
            f"{found['rounds_seconds']} s), {found['steps']} steps, "
            f"{found['fixed_ms_per_step']} ms fixed per step"
        )
        for group, row in found["groups"].items():
            print(f"  {group:<44} {row['ms_per_step']:8.3f} ms/step {row['share']:6.1%}")
    report = {"benchmark": "decoding_profile", "command": command("decoding_profile.py", argv),
              "split": args.split, "sentences": len(sources), "threads": 1, "workers": 1,
              "rounds": args.rounds, "max_tokens": translator.max_tokens, "attention": attention,
              "device": describe_device(torch.device("cpu")), "results": results,
              "versions": versions(), "date": now()}  # fmt: skip
    write_report(report, args.output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="decoding_profile.py", description=__doc__.split("\n")[0])
    sentence_options(parser)
    parser.add_argument(
        "--rounds", type=int, default=3, help="timed rounds, interleaved; the median kept (3)"
    )
    parser.add_argument(
        "--attention", choices=("kernels", "pytorch"), default="kernels",
        help="kernels: the compiled kernels of decoding.kernels, built first where they are not "
        "(what a Translator runs); pytorch: scaled_dot_product_attention (kernels)",
    )  # fmt: skip
    parser.add_argument("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_profile, argv)


if __name__ == "__main__":
    sys.exit(main())
