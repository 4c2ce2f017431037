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
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Sequence

import torch
from common import command, now, on_device, run_main, versions, write_report
from train import _synthetic_batch

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


def time_steps(config: ModelConfig, batch, args, device, compile: bool, chunk: int | None) -> dict:
    """Seconds per step (median of `--steps` after 3 warm-up steps), MFU inputs, peak memory;
    the loss `chunk` positions at a time (None: all at once)."""
    torch.manual_seed(args.seed)
    model = accelerate(build_model(config)).to(device)
    criterion = LabelSmoothingFromLogits(config.tgt_vocab, PAD_ID, 0.1, chunk=chunk)
    optimizer = make_optimizer(model.parameters(), fused=on_device(device).fused_adam)
    net = torch.compile(model) if compile else model
    autocast = on_device(device).autocast

    def step() -> None:
        train_step(net, [batch], criterion, optimizer, autocast=autocast)

    for _ in range(3):  # warm up: allocate, compile, pick kernels
        step()
    seconds = [timed(step, device) for _ in range(args.steps)]
    peak = peak_step_memory(step, device)
    flops = count_flops(model, batch, criterion).get_total_flops()
    return {"seconds_per_step": statistics.median(seconds), "flops_per_step": flops,
            "peak_step_memory_mb": round(peak / 2**20, 1)}  # fmt: skip


def bench_wmt(args: argparse.Namespace, argv: Sequence[str]) -> int:
    for name in ("tokens", "length", "vocab", "steps"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.vocab <= EOS_ID + 2:
        raise ValueError(f"--vocab must exceed the {EOS_ID + 2} special ids, got {args.vocab}")
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    base = ModelConfig.base(share_embeddings=True, max_len=max(256, args.length + 1))
    config = base.replace(src_vocab=args.vocab, tgt_vocab=args.vocab)
    batch = _synthetic_batch(args.length, args.tokens, args.vocab, device)
    dtype = on_device(device).autocast or torch.float32
    rate = matmul_rate(device, dtype, on_device(device).matmul_size)
    print(f"{describe_device(device)}: base model, vocabulary {args.vocab:,} (tied), "
          f"{batch.size} sentences of {args.length} tokens = {batch.ntokens:,} target tokens; "
          f"{str(dtype).removeprefix('torch.')} matrix rate {rate / 1e12:.1f} TFLOP/s")  # fmt: skip
    results = {}
    variants = (("ours", False, LOSS_CHUNK), ("ours, the loss unchunked", False, None),
                ("ours + torch.compile", True, LOSS_CHUNK))  # fmt: skip
    for name, compiled, chunk in variants:
        if compiled and args.no_compile:
            continue
        r = time_steps(config, batch, args, device, compiled, chunk)
        s = r["seconds_per_step"]
        r.update(tokens_per_second=round(batch.ntokens / s, 1),
                 model_flops_utilization=round(r["flops_per_step"] / s / rate, 4),
                 hours_to_100k_steps=round(s * PAPER_STEPS / 3600, 2))  # fmt: skip
        results[name] = r
        print(f"{name:<22} {s * 1000:8.1f} ms/step {r['tokens_per_second']:12,.0f} tokens/s "
              f"MFU {100 * r['model_flops_utilization']:5.1f}%  peak "
              f"{r['peak_step_memory_mb']:9,.1f} MB  100,000 steps: "
              f"{r['hours_to_100k_steps']:.1f} h")  # fmt: skip
    report = {
        "benchmark": "wmt-throughput",
        "command": command("wmt_throughput.py", argv),
        "device": describe_device(device),
        "autocast": None if dtype == torch.float32 else "bfloat16",
        "config": {"N": config.N, "d_model": config.d_model, "h": config.h, "d_ff": config.d_ff,
                   "vocab": args.vocab, "share_embeddings": True, "length": args.length,
                   "sentences": batch.size, "target_tokens": batch.ntokens, "steps": args.steps},
        "matmul": {"dtype": str(dtype).removeprefix("torch."), "flops_per_second": round(rate)},
        "paper": {"steps": PAPER_STEPS, "hours": PAPER_HOURS, "gpus": "8 P100"},
        "results": results,
        "versions": versions(),
        "date": now(),
    }  # fmt: skip
    write_report(report, args.output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmarks/wmt_throughput.py",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    add = parser.add_argument
    add("--tokens", type=int, default=25_000, help="tokens per side of a batch (default 25,000)")
    add("--length", type=int, default=27, help="tokens per sentence (default 27)")
    add("--vocab", type=int, default=37_000, help="shared BPE vocabulary (default 37,000)")
    add("--steps", type=int, default=20, help="timed steps (default 20)")
    add("--no-compile", action="store_true", help="leave out torch.compile")
    add("--seed", type=int, default=0)
    add("--device", choices=["cpu", "cuda"])
    add("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_wmt, argv)


if __name__ == "__main__":
    sys.exit(main())
