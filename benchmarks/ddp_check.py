"""One process through torchrun equals the plain run: the same steps, the same weights.

    python benchmarks/ddp_check.py --data-dir ../shared/data/multi30k \\
        --output results/ddp-check-cuda.json

It trains the same short run three times in fresh processes, on the same seed: twice alone, once
under `torchrun --standalone --nproc_per_node 1` (a process group of one: NCCL on a GPU, gloo on
a CPU, and `DistributedDataParallel` around the model). The two plain runs give the noise floor
of the machine (on a GPU some kernels add in a varying order); the torchrun run must differ from
the first plain run by no more than that floor. The record holds the largest weight difference of
each pair and the loss of every step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch
from common import command, now, on_device, run_main, versions, write_report

from annotated_transformer.runs.presets import preset
from annotated_transformer.util.device import describe_device


def worker(run_dir: str, data_dir: str, preset_name: str, steps: int, device: str) -> None:
    """Train `steps` steps in `run_dir`, then save this rank's weights and step losses."""
    from annotated_transformer.training.run import train

    config = preset(preset_name, max_steps=steps, epochs=None, eval_every=10**6, log_every=1,
                    save_every=10**6)  # fmt: skip
    outcome = train(config, run_dir, data_dir=data_dir, device=device, progress=False,
                    log=lambda message: None)  # fmt: skip
    rank = int(os.environ.get("RANK", "0"))
    state = {name: t.detach().float().cpu() for name, t in outcome.model.state_dict().items()}
    torch.save(state, Path(run_dir) / f"weights-rank{rank}.pt")


def largest_difference(a: Path, b: Path) -> float:
    """The largest absolute difference between two saved state dicts of the same model."""
    one, two = (torch.load(p / "weights-rank0.pt", weights_only=True) for p in (a, b))
    return max((one[name] - two[name]).abs().max().item() for name in one)


def step_losses(run_dir: Path) -> list[float]:
    """The loss of every logged step, from the run's metrics file."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return [r["loss"] for r in records if r.get("kind", "train") == "train" and "loss" in r]


def bench_ddp(args: argparse.Namespace, argv: Sequence[str]) -> int:
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    with tempfile.TemporaryDirectory(prefix="ddp-check-") as folder:  # three runs' checkpoints
        return _compare(args, argv, device, Path(folder))


def _compare(
    args: argparse.Namespace, argv: Sequence[str], device: torch.device, work: Path
) -> int:
    """Run the three trainings in `work`, compare them, write the record."""
    script = str(Path(__file__).resolve())
    common = [args.data_dir or "", args.preset, str(args.steps), device.type]
    runs = {
        "plain": [sys.executable, script, "--worker", str(work / "plain"), *common],
        "plain again": [sys.executable, script, "--worker", str(work / "again"), *common],
        "torchrun, 1 process": [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
            "1", script, "--worker", str(work / "torchrun"), *common,
        ],
    }  # fmt: skip
    for name, argv_run in runs.items():
        print(f"{name}: {args.steps} steps of the {args.preset} preset on {device.type}")
        subprocess.run(argv_run, check=True)
    floor = largest_difference(work / "plain", work / "again")
    ddp = largest_difference(work / "plain", work / "torchrun")
    backend = on_device(device).backend
    print(f"largest weight difference: plain vs plain {floor:.3g}, plain vs torchrun {ddp:.3g}")
    report = {
        "benchmark": "ddp-check",
        "command": command("ddp_check.py", argv),
        "device": describe_device(device),
        "backend": backend,
        "preset": args.preset,
        "steps": args.steps,
        "largest_weight_difference": {"plain vs plain": floor, "plain vs torchrun": ddp},
        "equal": ddp <= floor,
        "losses": {name: step_losses(work / folder) for name, folder in
                   (("plain", "plain"), ("torchrun", "torchrun"))},
        "versions": versions(),
        "date": now(),
    }  # fmt: skip
    write_report(report, args.output)
    return 0 if ddp <= floor else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmarks/ddp_check.py",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--preset", default="base")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--data-dir", help="folder holding the raw Multi30k files")
    parser.add_argument("--device", choices=["cpu", "cuda"])
    parser.add_argument("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--worker"]:
        run_dir, data_dir, preset_name, steps, device = argv[1:6]
        worker(run_dir, data_dir or None, preset_name, int(steps), device)
        return 0
    return run_main(build_parser(), bench_ddp, argv)


if __name__ == "__main__":
    sys.exit(main())
