"""Training speed: several implementations of one configuration, side by side on the same batches.

    python benchmarks/train.py --preset small --code-2022 the_annotated_transformer.py \\
        --compile --output results/bench-train-cpu.json

It trains each implementation on the same real Multi30k batches and reports target tokens per
second, the peak memory of one step, and model FLOPs utilization (FLOPs counted by
`torch.utils.flop_counter` ÷ a matrix-multiply rate the same run measures; both with
`annotated_transformer.training.measure`):

- the book's reference code (`build_model`, `LabelSmoothing`, `make_optimizer`), then the fast
  paths of the chapter "Making it fast" added one at a time: fused attention (SDPA), fused QKV
  projections, the loss from logits, fused Adam ("ours": what `annotated-transformer train`
  runs), and optionally `torch.compile`;
- `torch.nn.Transformer` configured identically (`torch_transformer.py`);
- the 2022 Annotated Transformer's model code, from a local copy of its
  `the_annotated_transformer.py` (`--code-2022`; not part of this project, see `code_2022.py`),
  with our loss and optimizer, and "as published" with its own dense label smoothing and plain
  Adam.

Then the reference, ours and `nn.Transformer` again on synthetic batches of each of `--lengths`
tokens per sentence, at the same token budget. On CUDA every variant runs under bfloat16 autocast
and the rate is that of bfloat16 products.

Machines are noisy: compare ratios within one run, not seconds across runs. Each round runs every
variant over the same batches, in a rotated order; ratios are medians of per-round ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from code_2022 import Flattened, load_2022
from common import command, int_list, now, on_device, run_main, versions, write_report
from torch import nn
from torch_transformer import TorchTransformer

from annotated_transformer.data.batch import Batch
from annotated_transformer.data.sampler import TokenBudgetBatchSampler
from annotated_transformer.data.vocab import BOS_ID, EOS_ID, PAD_ID
from annotated_transformer.model.transformer import ModelConfig, build_model
from annotated_transformer.runs.presets import TrainConfig, preset
from annotated_transformer.training.fused import LabelSmoothingFromLogits, accelerate
from annotated_transformer.training.inputs import prepare_data
from annotated_transformer.training.label_smoothing import LabelSmoothing
from annotated_transformer.training.loop import train_step
from annotated_transformer.training.measure import (
    count_flops,
    matmul_rate,
    peak_step_memory,
    timed,
)
from annotated_transformer.training.schedule import make_optimizer
from annotated_transformer.util.device import describe_device


@dataclass
class Variant:
    """One implementation under test: a model, its loss and its optimizer."""

    name: str
    what: str
    model: nn.Module
    criterion: nn.Module
    optimizer: torch.optim.Optimizer
    seconds: list[float] = field(default_factory=list)  # per round


Built = tuple[nn.Module, nn.Module, torch.optim.Optimizer]  # a model, its loss, its optimizer
ALL_FAST = (True, True, True, True)  # SDPA, fused QKV, the loss from logits, fused Adam


def _ours(
    config: ModelConfig,
    eps: float,
    device: torch.device,
    fast: tuple[bool, bool, bool, bool],
    compile: bool = False,
) -> Built:
    """The book's model with the fast paths that `fast` switches on: (SDPA, fused QKV, the loss
    from logits, fused Adam); and optionally torch.compile."""
    sdpa, fused_qkv, logits, fused_adam = fast
    model = build_model(config)
    if sdpa:
        accelerate(model, fused_qkv=fused_qkv)
    loss = (LabelSmoothingFromLogits if logits else LabelSmoothing)(config.tgt_vocab, PAD_ID, eps)
    optimizer = make_optimizer(model.to(device).parameters(), fused=fused_adam)
    return torch.compile(model, dynamic=True) if compile else model, loss, optimizer


def _baseline(
    model: nn.Module, V: int, eps: float, device: torch.device, old: dict | None = None
) -> Built:
    """Another model with our loss from logits and fused Adam; given `old` (the 2022 code), with
    its own LabelSmoothing and plain Adam instead, as published."""
    model.to(device)
    if old is not None:
        loss = Flattened(old["LabelSmoothing"](V, PAD_ID, eps))
        return model, loss, make_optimizer(model.parameters())
    loss = LabelSmoothingFromLogits(V, PAD_ID, eps)
    return model, loss, make_optimizer(model.parameters(), fused=True)


def _specs(
    config: ModelConfig, args: argparse.Namespace, device: torch.device, old: dict | None
) -> list[tuple[str, str, Callable[[], Built]]]:
    """(name, what it is, how to build it) of every implementation under test, in order."""
    eps, V, d = args.label_smoothing, config.tgt_vocab, config
    same = "same loss (from logits) and fused Adam as ours"
    specs = [
        ("reference", "the book's code: written-out attention, loss on log-softmax, Adam",
         lambda: _ours(config, eps, device, (False, False, False, False))),
        ("+ SDPA", "scaled_dot_product_attention",
         lambda: _ours(config, eps, device, (True, False, False, False))),
        ("+ fused QKV", "one product for Q, K, V",
         lambda: _ours(config, eps, device, (True, True, False, False))),
        ("+ loss from logits", "LabelSmoothingFromLogits",
         lambda: _ours(config, eps, device, (True, True, True, False))),
        ("ours", "+ fused Adam: what annotated-transformer train runs",
         lambda: _ours(config, eps, device, ALL_FAST)),
    ]  # fmt: skip
    if args.compile:
        specs.append(("ours + torch.compile", "torch.compile(model, dynamic=True)",
                      lambda: _ours(config, eps, device, ALL_FAST, compile=True)))  # fmt: skip
    specs.append(("nn.Transformer", same,
                  lambda: _baseline(TorchTransformer(config), V, eps, device)))  # fmt: skip
    if old is not None:

        def model_2022() -> nn.Module:
            return old["make_model"](d.src_vocab, V, d.N, d.d_model, d.d_ff, d.h, d.dropout)

        specs.append(("2022 code", same, lambda: _baseline(model_2022(), V, eps, device)))
        specs.append(("2022 as published", "its dense label smoothing and plain Adam",
                      lambda: _baseline(model_2022(), V, eps, device, old)))  # fmt: skip
    return specs


def _variants(
    config: ModelConfig,
    args: argparse.Namespace,
    device: torch.device,
    old: dict[str, Any] | None,
    only: Sequence[str] | None = None,
) -> list[Variant]:
    """The implementations under test (those named in `only`), each with the same initial seed.

    `old` is the 2022 code from `load_2022`, or None to leave it out.
    """
    variants = []
    for name, what, build in _specs(config, args, device, old):
        if only is None or name in only:
            torch.manual_seed(args.seed)
            variants.append(Variant(name, what, *build()))
    return variants


def _run_rounds(
    variants: list[Variant],
    batches: list[Batch],
    rounds: int,
    device: torch.device,
    autocast: torch.dtype | None,
) -> None:
    """Time one training step of every variant on each batch, in an order rotated per batch.

    Interleaving step by step spreads the machine's slow moments over all variants alike; each
    variant's time per round (its steps over all `batches`) is appended to `variant.seconds`.
    """

    def step(variant: Variant, batch: Batch) -> None:
        train_step(variant.model, [batch], variant.criterion, variant.optimizer, autocast=autocast)

    for variant in variants:  # warm up: first calls allocate, compile, pick kernels
        variant.model.train()
        for batch in batches[:2]:
            step(variant, batch)
    k = len(variants)
    for r in range(rounds):
        seconds = [0.0] * k
        for i, batch in enumerate(batches):
            for j in [(r + i + n) % k for n in range(k)]:
                seconds[j] += timed(lambda: step(variants[j], batch), device)  # noqa: B023
        for variant, total in zip(variants, seconds, strict=True):
            variant.seconds.append(total)


def _train_batches(config: TrainConfig, args: argparse.Namespace, device: torch.device):
    """Vocabulary sizes and the first `args.batches` training batches of the shuffled sampler."""
    data = prepare_data(config, args.data_dir)
    sampler = TokenBudgetBatchSampler(
        data.train.src_lengths, data.train.tgt_lengths, config.max_tokens, seed=config.seed
    )
    batches = [data.train.batch(indices).to(device) for indices in sampler.batches(0)]
    return len(data.src_vocab), len(data.tgt_vocab), batches[: args.batches]


def _synthetic_batch(length: int, max_tokens: int, vocab: int, device: torch.device) -> Batch:
    """max_tokens // length sentence pairs of `length` tokens, random ids, no padding."""
    rows = max(1, max_tokens // length)
    generator = torch.Generator().manual_seed(length)
    src = torch.randint(EOS_ID + 2, vocab, (rows, length), generator=generator)
    tgt = torch.randint(EOS_ID + 2, vocab, (rows, length + 1), generator=generator)
    tgt[:, 0] = BOS_ID
    return Batch.from_tensors(src, tgt, PAD_ID).to(device)


@dataclass(frozen=True)
class Run:
    """What one run of the benchmark measures with: settings, machine, the 2022 code."""

    args: argparse.Namespace
    config: ModelConfig
    max_tokens: int  # per batch and side
    device: torch.device
    autocast: torch.dtype | None
    rate: float  # FLOP/s of the machine's matrix products, in the autocast dtype
    old: dict[str, Any] | None  # the 2022 code, or None


def _measure(
    run: Run, variants: list[Variant], batches: list[Batch], flops: int
) -> dict[str, dict]:
    """Time `variants` over `batches` (`flops` in all); tokens/s, MFU and the peak memory of a
    step of each."""
    tokens = sum(batch.ntokens for batch in batches)
    _run_rounds(variants, batches, run.args.rounds, run.device, run.autocast)
    largest = max(batches, key=lambda batch: batch.src.numel() + batch.tgt_in.numel())
    results = {}
    for v in variants:
        step = partial(train_step, v.model, [largest], v.criterion, v.optimizer,
                       autocast=run.autocast)  # fmt: skip
        peak_memory = peak_step_memory(step, run.device)
        seconds = statistics.median(v.seconds)
        results[v.name] = r = {
            "tokens_per_second": round(tokens / seconds, 1),
            "tokens_per_second_per_round": [round(tokens / s, 1) for s in v.seconds],
            "model_flops_utilization": round(flops / seconds / run.rate, 4),
            "peak_step_memory_mb": round(peak_memory / 2**20, 1),
            "what": v.what,
        }
        print(
            f"{v.name:<22} {r['tokens_per_second']:10,.0f} tokens/s  "
            f"MFU {100 * r['model_flops_utilization']:5.1f}%  "
            f"peak {r['peak_step_memory_mb']:8,.1f} MB  {v.what}"
        )
    return results


def _ratios(variants: list[Variant]) -> dict[str, float]:
    """Each fast path against the step before it, ours against the reference and the others."""

    def ratio(fast: str, slow: str) -> float:
        a, b = (next(v for v in variants if v.name == n).seconds for n in (fast, slow))
        return statistics.median([s / f for f, s in zip(a, b, strict=True)])

    names = [v.name for v in variants]
    steps = names[: names.index("ours") + 1]  # reference, then one fast path more each
    pairs = [(steps[i], steps[i - 1]) for i in range(1, len(steps))] + [("ours", "reference")]
    if "ours + torch.compile" in names:
        pairs.append(("ours + torch.compile", "ours"))
    pairs += [
        ("ours", name)
        for name in ("nn.Transformer", "2022 code", "2022 as published")
        if name in names
    ]
    ratios = {f"{a} / {b}": round(ratio(a, b), 3) for a, b in pairs}
    for name, value in ratios.items():
        print(f"{name:<44} {value:6.2f}x")
    return ratios


def _bench_lengths(run: Run) -> list[dict]:
    """Tokens/s of reference, ours and nn.Transformer at each of `--lengths`, equal budgets."""
    if not run.args.lengths:
        return []
    print(f"sequence lengths, {run.max_tokens} tokens per batch:")
    rows = []
    for length in run.args.lengths:
        batch = _synthetic_batch(length, run.max_tokens, run.config.tgt_vocab, run.device)
        variants = _variants(run.config, run.args, run.device, run.old,
                             only=("reference", "ours", "nn.Transformer"))  # fmt: skip
        flops = count_flops(variants[0].model, batch, variants[0].criterion).get_total_flops()
        _run_rounds(variants, [batch] * 2, run.args.rounds, run.device, run.autocast)
        row = {"length": length, "sentences": batch.size, "target_tokens": batch.ntokens}
        for v in variants:
            seconds = statistics.median(v.seconds) / 2
            row[v.name] = {
                "tokens_per_second": round(batch.ntokens / seconds, 1),
                "model_flops_utilization": round(flops / seconds / run.rate, 4),
            }
        rows.append(row)
        print(
            f"  {length:>4} tokens: "
            + ", ".join(f"{v.name} {row[v.name]['tokens_per_second']:,.0f}/s" for v in variants)
        )
    return rows


def _start(args: argparse.Namespace) -> tuple[TrainConfig, torch.device, dict | None]:
    """The preset, the device and the 2022 code, checked before the slow part begins."""
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    changes = {"max_tokens": args.max_tokens} if args.max_tokens else {}
    # nn.Transformer and the 2022 code have an embedding per side: compare like with like.
    train_config = preset(args.preset, share_embeddings=False, **changes)
    max_len = train_config.model.max_len
    too_long = [n for n in args.lengths if n > max_len]
    if too_long:
        raise ValueError(f"--lengths {too_long} exceed the preset's max_len={max_len}")
    old = load_2022(args.code_2022) if args.code_2022 else None
    return train_config, device, old


def bench_train(args: argparse.Namespace, argv: Sequence[str]) -> int:
    train_config, device, old = _start(args)
    autocast = on_device(device, args.bf16).autocast
    src_vocab, tgt_vocab, batches = _train_batches(train_config, args, device)
    config = train_config.model.replace(src_vocab=src_vocab, tgt_vocab=tgt_vocab)
    variants = _variants(config, args, device, old)
    dtype = autocast or torch.float32
    n = args.matmul_size or on_device(device).matmul_size
    run = Run(args, config, train_config.max_tokens, device, autocast,
              matmul_rate(device, dtype, n), old)  # fmt: skip
    tokens = sum(batch.ntokens for batch in batches)
    flops = sum(count_flops(variants[0].model, b, variants[0].criterion).get_total_flops()
                for b in batches)  # fmt: skip
    print(
        f"{describe_device(device)}: {args.preset} (N={config.N}, d_model={config.d_model}, "
        f"h={config.h}, d_ff={config.d_ff}), {len(batches)} batches of <= "
        f"{train_config.max_tokens} tokens, {tokens:,} target tokens, "
        f"{flops / tokens / 1e6:.1f} MFLOP per target token\n"
        f"{str(dtype).removeprefix('torch.')} matrix multiply ({n}^3): "
        f"{run.rate / 1e9:,.1f} GFLOP/s"
    )
    results = _measure(run, variants, batches, flops)
    report = {
        "benchmark": "train",
        "command": command("train.py", argv),
        "device": describe_device(device),
        "autocast": None if autocast is None else str(autocast).removeprefix("torch."),
        "config": {"preset": args.preset, "N": config.N, "d_model": config.d_model,
                   "h": config.h, "d_ff": config.d_ff, "dropout": config.dropout,
                   "src_vocab": src_vocab, "tgt_vocab": tgt_vocab,
                   "max_tokens": train_config.max_tokens, "label_smoothing": args.label_smoothing,
                   "batches": len(batches), "target_tokens": tokens, "rounds": args.rounds,
                   "seed": args.seed},
        "flops_per_target_token": round(flops / tokens),
        "matmul": {"n": n, "dtype": str(dtype).removeprefix("torch."),
                   "flops_per_second": round(run.rate)},
        "results": results,
        "ratios": _ratios(variants),
        "lengths": _bench_lengths(run),
        "code_2022": None if old is None
        else {"file": Path(args.code_2022).name, "sha256": old["sha256"]},
        "versions": versions(),
        "date": now(),
    }  # fmt: skip
    write_report(report, args.output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchmarks/train.py", description=__doc__.split("\n\n")[0]
    )
    add = parser.add_argument
    add("--preset", default="small", help="model size and token budget (default small)")
    add("--data-dir", help="folder holding the raw Multi30k files")
    add("--max-tokens", type=int, help="token budget per batch (default: the preset's)")
    add("--batches", type=int, default=8, help="batches per round (default 8)")
    add("--rounds", type=int, default=5, help="rounds (default 5)")
    add(
        "--code-2022",
        metavar="PATH",
        help="a local copy of the 2022 Annotated Transformer's the_annotated_transformer.py",
    )
    add("--compile", action="store_true", help="also time torch.compile")
    add("--bf16", action="store_true", help="bfloat16 autocast (always on CUDA)")
    add(
        "--lengths",
        type=int_list,
        default=[16, 32, 64, 128],
        help="lengths of the throughput sweep (default 16,32,64,128; '' for none)",
    )
    add(
        "--matmul-size",
        type=int,
        help="n of the n×n products that set the rate (default 2048; 8192 on CUDA)",
    )
    add("--label-smoothing", type=float, default=0.1)
    add("--seed", type=int, default=0)
    add("--device", choices=["cpu", "cuda"])
    add("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_train, argv)


if __name__ == "__main__":
    sys.exit(main())
