"""The paper's WMT 2014 training step, timed on synthetic batches of its shape (§5.1, §5.2).

    python benchmarks/wmt_throughput.py --output results/bench-wmt-base-cuda.json

The paper trained the base model for 100,000 steps on batches of about 25,000 source and 25,000
target tokens, on 8 P100 GPUs in 12 hours (0.4 s a step). Real WMT data cannot reach every
machine, so this benchmark builds batches of that shape from random ids: `--tokens` per side,
sentences of `--length` tokens (no padding), a shared vocabulary of `--vocab` pieces (37,000 in
the paper) with tied embeddings. It times the training step that `annotated-transformer train`
runs (every fast path, bf16 autocast on CUDA), with and without `torch.compile`, and projects
the hours to 100,000 steps on this one device. Random ids make no difference to the step's work:
the same products of the same shapes run whatever the ids are. Real batches are padded, and their
lengths vary; the projection is a floor.

Each change of issue 49 is timed on and off in the same run: the loss chunked or not, the loss
read after every step (the host waiting for the device) or once a window as the trainer does,
and batches of `--spread` lengths with and without length buckets, compiled and not (`shapes`:
the (source, target) lengths the model saw; `graphs`: what torch.compile compiled; `--spread
0` leaves them out). `--profile-kernels N` adds the N kernels that take the most time
(`torch.profiler`: name, calls, share of the time) of the plain and compiled steps.

On CUDA two more ways of compiling are timed beside the default one (issue 63): CUDA graphs
(`mode="reduce-overhead"`: the step's kernels replayed as one graph, for one shape or one graph
per pair of length buckets) and `mode="max-autotune"` (Triton's kernels for the products tried
and the fastest kept). On a CPU they would time the default compile again (CUDA graphs) or spend
many minutes tuning, so they run on CUDA only. Each result keeps the spread of its timed steps
(`spread`: the fastest and the slowest), so that a ratio can be read against the noise.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from collections.abc import Sequence
from typing import NamedTuple

import torch
from common import command, now, on_device, run_main, versions, write_report
from torch._dynamo.utils import counters
from train import _synthetic_batch

from annotated_transformer.data.batch import any_batch_size, padded_to_buckets
from annotated_transformer.data.vocab import EOS_ID, PAD_ID
from annotated_transformer.model.transformer import ModelConfig, build_model
from annotated_transformer.training.fused import LOSS_CHUNK, LabelSmoothingFromLogits, accelerate
from annotated_transformer.training.loop import train_step
from annotated_transformer.training.measure import (
    count_flops,
    matmul_rate,
    peak_step_memory,
    timed,
)
from annotated_transformer.training.schedule import make_optimizer
from annotated_transformer.util.device import describe_device

PAPER_STEPS = 100_000  # §5.3: the base models trained for 100,000 steps ...
PAPER_HOURS = 12.0  # ... in 12 hours on 8 P100 GPUs


BUCKETS = 4  # the varied lengths padded to this many (the setting length_buckets)


class Variant(NamedTuple):
    """One way of taking the step, timed beside the others."""

    name: str
    compile: bool = False
    chunk: int | None = LOSS_CHUNK  # the loss this many positions at a time (None: all at once)
    read_every_step: bool = False  # read the loss after every step (the host waits each time)
    varied: bool = False  # batches of `--spread` lengths in turn, rather than one shape
    buckets: int = 0  # with `varied`: lengths padded to this many buckets (0: none)
    mode: str | None = None  # torch.compile's mode: None (the default), "reduce-overhead", ...


VARIANTS = (
    Variant("ours"), Variant("ours, the loss unchunked", chunk=None),
    Variant("ours, the loss read every step", read_every_step=True),
    Variant("ours + torch.compile", compile=True),
    Variant("varied lengths", varied=True),
    Variant("varied lengths, buckets", varied=True, buckets=BUCKETS),
    Variant("varied lengths + torch.compile", compile=True, varied=True),
    Variant("varied lengths, buckets + torch.compile", compile=True, varied=True, buckets=BUCKETS),
    Variant("ours + torch.compile, CUDA graphs", compile=True, mode="reduce-overhead"),
    Variant("ours + torch.compile, max-autotune", compile=True, mode="max-autotune"),
    Variant("varied lengths, buckets + torch.compile, CUDA graphs", compile=True, varied=True,
            buckets=BUCKETS, mode="reduce-overhead"),
)  # fmt: skip
CUDA_MODES = ("reduce-overhead", "max-autotune")  # modes timed on CUDA only (see the docstring)
PROFILED = ("ours", "ours + torch.compile")  # the variants --profile-kernels profiles


def compiled(model: torch.nn.Module, variant: Variant) -> torch.nn.Module:
    """The model as the trainer compiles it: one shape; any shape (dynamic); or one graph per
    pair of buckets, the sentences symbolic."""
    if not variant.compile:
        return model
    if not variant.varied:
        return torch.compile(model, mode=variant.mode)
    if not variant.buckets:
        return torch.compile(model, dynamic=True, mode=variant.mode)
    net = torch.compile(model, dynamic=False, mode=variant.mode)
    net.register_forward_pre_hook(any_batch_size)
    return net


def time_steps(config: ModelConfig, batches: list, args, device, variant: Variant) -> dict:
    """Seconds per step (median of `--steps` after 3 warm-up steps, and one per shape to
    compile), MFU inputs (the FLOPs of the unpadded batches), peak memory, the (source, target)
    lengths the model sees, and the graphs compiled."""
    torch.manual_seed(args.seed)
    model = accelerate(build_model(config)).to(device)
    criterion = LabelSmoothingFromLogits(config.tgt_vocab, PAD_ID, 0.1, chunk=variant.chunk)
    optimizer = make_optimizer(model.parameters(), fused=on_device(device).fused_adam)
    autocast = on_device(device).autocast
    longest = max(max(b.src.size(1), b.tgt_in.size(1)) for b in batches)  # buckets up to it
    inputs = [padded_to_buckets(b, variant.buckets, longest, PAD_ID) if variant.buckets else b
              for b in batches]  # fmt: skip
    turn = itertools.cycle(inputs)
    torch._dynamo.reset()
    counters.clear()
    net = compiled(model, variant)

    def step() -> None:
        result = train_step(net, [next(turn)], criterion, optimizer, autocast=autocast)
        if variant.read_every_step:
            result.loss  # noqa: B018 (the read is the point: the host waits for the device)

    for _ in range(3 + (len(inputs) if variant.compile else 0)):  # warm up: allocate, pick
        step()  # kernels, compile (every shape)
    seconds = [timed(step, device) for _ in range(args.steps)]
    peak = peak_step_memory(step, device)
    flops = statistics.mean(count_flops(model, b, criterion).get_total_flops() for b in batches)
    r = {"seconds_per_step": statistics.median(seconds), "flops_per_step": round(flops),
         "spread": [min(seconds), max(seconds)],
         "peak_step_memory_mb": round(peak / 2**20, 1),
         "shapes": len({(b.src.size(1), b.tgt_in.size(1)) for b in inputs})}  # fmt: skip
    if variant.compile:
        r["graphs"] = counters["stats"]["unique_graphs"]
    if args.profile_kernels and variant.name in PROFILED:
        r["kernels"] = kernel_table(step, device, args.profile_kernels)
    return r


def kernel_table(step, device: torch.device, top: int) -> list[dict]:
    """The `top` kernels of 3 steps by their own time (on CUDA, the GPU's): name, calls and
    share of the time of all of them, from `torch.profiler`."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profile:
        for _ in range(3):
            step()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    field = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = [e for e in profile.key_averages() if getattr(e, field) > 0]
    if device.type == "cuda":  # the kernels only: an operator's row repeats its kernels' time
        events = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    total = sum(getattr(e, field) for e in events) or 1
    events.sort(key=lambda e: getattr(e, field), reverse=True)
    return [{"name": e.key, "calls": e.count, "self_share": round(getattr(e, field) / total, 4)}
            for e in events[:top]]  # fmt: skip


def check_arguments(args: argparse.Namespace) -> None:
    for name in ("tokens", "length", "vocab", "steps", "layers"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be at least 1, got {getattr(args, name)}")
    for name in ("spread", "profile_kernels"):
        if getattr(args, name) < 0:
            flag = name.replace("_", "-")
            raise ValueError(f"--{flag} must be at least 0, got {getattr(args, name)}")
    if args.vocab <= EOS_ID + 2:
        raise ValueError(f"--vocab must exceed the {EOS_ID + 2} special ids, got {args.vocab}")
    unknown = sorted(set(args.variant or ()) - {variant.name for variant in VARIANTS})
    if unknown:
        names = ", ".join(repr(variant.name) for variant in VARIANTS)
        raise ValueError(f"--variant: no variant named {unknown[0]!r}; expected one of {names}")


def spread_lengths(args: argparse.Namespace) -> list[int]:
    """`--spread` sentence lengths from half to twice `--length`, evenly (a batch of each)."""
    n = args.spread
    low, high = max(1, args.length // 2), 2 * args.length
    return sorted({round(low + (high - low) * k / max(n - 1, 1)) for k in range(n)})


def runs_here(
    variant: Variant, args: argparse.Namespace, device: torch.device, varied: bool
) -> bool:
    """Whether `variant` is timed in this run: one named by --variant (if any are), not a compiled
    one under --no-compile, not one of varied lengths under --spread 0, and a mode of CUDA_MODES
    on CUDA only."""
    if args.variant and variant.name not in args.variant:
        return False
    if (variant.compile and args.no_compile) or (variant.varied and not varied):
        return False
    return variant.mode not in CUDA_MODES or device.type == "cuda"


def bench_wmt(args: argparse.Namespace, argv: Sequence[str]) -> int:
    check_arguments(args)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    lengths = spread_lengths(args) if args.spread else []
    base = ModelConfig.base(share_embeddings=True, max_len=max(256, 2 * args.length + 1))
    config = base.replace(src_vocab=args.vocab, tgt_vocab=args.vocab, N=args.layers)
    batch = _synthetic_batch(args.length, args.tokens, args.vocab, device)
    varied = [_synthetic_batch(n, args.tokens, args.vocab, device) for n in lengths]
    dtype = on_device(device).autocast or torch.float32
    rate = matmul_rate(device, dtype, on_device(device).matmul_size)
    model = "base model" if args.layers == base.N else f"base model with N={args.layers}"
    print(f"{describe_device(device)}: {model}, vocabulary {args.vocab:,} (tied), "
          f"{batch.size} sentences of {args.length} tokens = {batch.ntokens:,} target tokens; "
          f"{str(dtype).removeprefix('torch.')} matrix rate {rate / 1e12:.1f} TFLOP/s")  # fmt: skip
    results, timed = {}, [v for v in VARIANTS if runs_here(v, args, device, bool(varied))]
    for variant in timed:
        batches = varied if variant.varied else [batch]
        r = time_steps(config, batches, args, device, variant)
        s, tokens = r["seconds_per_step"], statistics.mean(b.ntokens for b in batches)
        r.update(tokens_per_second=round(tokens / s, 1),
                 model_flops_utilization=round(r["flops_per_step"] / s / rate, 4),
                 hours_to_100k_steps=round(s * PAPER_STEPS / 3600, 2))  # fmt: skip
        results[variant.name] = r
        print(f"{variant.name:<52} {s * 1000:8.1f} ms/step {r['tokens_per_second']:12,.0f} "
              f"tokens/s MFU {100 * r['model_flops_utilization']:5.1f}%  peak "
              f"{r['peak_step_memory_mb']:9,.1f} MB  100,000 steps: "
              f"{r['hours_to_100k_steps']:.1f} h")  # fmt: skip
        # written after each variant: a run stopped by a time cap keeps those it finished
        report = record(args, argv, device, config, batch, dtype, rate, lengths, results)
        write_report({**report, "complete": len(results) == len(timed)}, args.output)
    return 0


def record(args, argv, device, config, batch, dtype, rate, lengths, results) -> dict:
    """The benchmark's JSON record."""
    kernels = {name: r["kernels"] for name, r in results.items() if "kernels" in r}
    results = {name: {k: v for k, v in r.items() if k != "kernels"} for name, r in results.items()}
    return {
        "benchmark": "wmt-throughput",
        "command": command("wmt_throughput.py", argv),
        "device": describe_device(device),
        "autocast": None if dtype == torch.float32 else "bfloat16",
        "config": {"N": config.N, "d_model": config.d_model, "h": config.h, "d_ff": config.d_ff,
                   "vocab": args.vocab, "share_embeddings": True, "length": args.length,
                   "sentences": batch.size, "target_tokens": batch.ntokens, "steps": args.steps,
                   "varied_lengths": lengths, "length_buckets": BUCKETS},
        "matmul": {"dtype": str(dtype).removeprefix("torch."), "flops_per_second": round(rate)},
        "paper": {"steps": PAPER_STEPS, "hours": PAPER_HOURS, "gpus": "8 P100"},
        "results": results,
        **({"kernels": kernels} if args.profile_kernels else {}),
        "versions": versions(),
        "date": now(),
    }  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmarks/wmt_throughput.py",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    add = parser.add_argument
    add("--tokens", type=int, default=25_000, help="tokens per side of a batch (default 25,000)")
    add("--length", type=int, default=27, help="tokens per sentence (default 27)")
    add("--vocab", type=int, default=37_000, help="shared BPE vocabulary (default 37,000)")
    add("--steps", type=int, default=20, help="timed steps (default 20)")
    add("--layers", type=int, default=6, help="N, the layers of the encoder and of the decoder "
        "(default 6, the base model; fewer only to try the benchmark quickly)")  # fmt: skip
    add("--no-compile", action="store_true", help="leave out torch.compile")
    add("--variant", action="append", metavar="NAME", help="time only this variant (its name as "
        "the record gives it; repeat for more; default: every variant that runs here)")  # fmt: skip
    add(
        "--spread",
        type=int,
        default=6,
        help="batches of this many sentence lengths, from half "
        "to twice --length, timed with and without length buckets (0: none; default 6)",
    )
    add(
        "--profile-kernels",
        type=int,
        default=0,
        metavar="N",
        help="write the N kernels that take "
        "the most time (torch.profiler) into the record (default 0: none)",
    )
    add("--seed", type=int, default=0)
    add("--device", choices=["cpu", "cuda"])
    add("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_wmt, argv)


if __name__ == "__main__":
    sys.exit(main())
