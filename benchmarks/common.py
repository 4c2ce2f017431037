"""What the benchmarks share: their records, their command lines, their errors.

Each benchmark is one script of this folder, run as `python benchmarks/NAME.py ...`. It writes
one JSON record to `results/` (the chapters read `results/bench-*.json`) holding the command that
made it, the device, the versions and the date beside what it measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import torch
from torch import nn

from annotated_transformer import __version__
from annotated_transformer.data.multi30k import read_split
from annotated_transformer.data.vocab import PAD_ID
from annotated_transformer.decoding.kernels import processor
from annotated_transformer.util.atomic import atomic_write


@dataclass(frozen=True)
class OnDevice:
    """What the benchmarks do differently on CUDA (tests/test_cuda_decisions.py checks each)."""

    autocast: torch.dtype | None  # bfloat16 autocast on CUDA (or when asked); None: float32
    matmul_size: int  # side of the square products that measure the matrix rate
    fused_adam: bool  # Adam's updates in one kernel (CUDA)
    backend: str  # the process group's: NCCL between GPUs, gloo between CPU processes


def on_device(device: torch.device, bf16: bool = False) -> OnDevice:
    """The benchmarks' choices for `device`; `bf16` asks for bfloat16 autocast on a CPU too."""
    cuda = device.type == "cuda"
    return OnDevice(
        autocast=torch.bfloat16 if bf16 or cuda else None,
        matmul_size=8192 if cuda else 2048,
        fused_adam=cuda,
        backend="nccl" if cuda else "gloo",
    )


def padded(sources: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    """Token ids of different lengths as one right-padded (B, S) batch on `device`."""
    return nn.utils.rnn.pad_sequence(list(sources), batch_first=True, padding_value=PAD_ID).to(
        device
    )  # (B, S)


def versions() -> dict[str, str]:
    """The software that measured, and the processor it ran on (`cpu`), since CPU records taken
    on different processors differ by more than what they compare."""
    return {
        "annotated_transformer": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpu": processor(),  # (decoding.kernels names it, and keys its kernels by it)
    }


def attention_kernels(translator, use: bool = True) -> tuple[Callable | None, dict]:
    """The attention a benchmark decodes with, and what to record of it: with `use`, on the CPU,
    the compiled kernels of `decoding.kernels` (`ensure_kernels`: built first where they are not,
    into $ANNOTATED_TRANSFORMER_KERNELS or the package's cache; recorded with the seconds their
    build took, from their own record, and whether this run built them or an earlier one did),
    which every `Translator` of the process then runs; else PyTorch's (None), the kernels turned
    off for this process and the ones it starts."""
    from annotated_transformer.decoding import kernels

    shape = kernels.attention_shape(translator.model)
    if not use or translator.device.type != "cpu" or shape is None:
        os.environ[kernels.KERNELS_ENV] = "off"
        return None, {"attention": "PyTorch's (scaled_dot_product_attention)"}
    if kernels.kernel_folder(*shape) is None:  # ($ANNOTATED_TRANSFORMER_KERNELS=off)
        return None, {"attention": f"PyTorch's ({kernels.KERNELS_ENV}=off)"}
    built, why = kernels.ensure_kernels(*shape)
    began = time.perf_counter()
    loaded = kernels.load_kernels(*shape, built.folder)  # (again, timed: what a later process pays)
    load_ms = round(1e3 * (time.perf_counter() - began), 1)
    about = json.loads((built.folder / kernels.RECORD).read_text(encoding="utf-8"))
    when = "earlier" if why is None else "by this run"
    return loaded, {"attention": "compiled kernels (decoding.kernels)", "folder": str(built.folder),
                    "built_seconds": about["build_seconds"], "built": when,
                    "load_ms": load_ms}  # fmt: skip


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def command(script: str, argv: Sequence[str]) -> str:
    """The command line that ran `script` with `argv`, as a shell would read it back."""
    return shlex.join(["python", f"benchmarks/{script}", *argv])


def write_report(report: dict, output: str | None) -> None:
    """Write `report` as JSON to `output` (atomically), if given."""
    if output:
        with atomic_write(output, "w") as file:
            json.dump(report, file, indent=2)
            file.write("\n")
        print(f"wrote {output}")


def int_list(text: str) -> list[int]:
    """An argparse type: "16,32,64" -> [16, 32, 64]; "" -> []."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def sentence_options(parser: argparse.ArgumentParser) -> None:
    """The options that choose the sentences a benchmark translates (read by `split_pairs`)."""
    parser.add_argument("--split", default="test2016", help="Multi30k split (default test2016)")
    parser.add_argument("--data-dir", help="folder holding the raw Multi30k files")
    parser.add_argument("--limit", type=int, help="only the first N sentences")


def split_pairs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The (German, English) pairs of `args.split` with text on both sides, the first
    `args.limit` of them if given (`run_main` refuses a limit below 1)."""
    pairs = read_split(args.split, args.data_dir)
    return [(de, en) for de, en in pairs if de.strip() and en.strip()][: args.limit]


COUNTS = {"rounds": "", "limit": " sentence"}  # options that count: at least 1 wherever they are


def run_main(
    parser: argparse.ArgumentParser,
    bench: Callable[[argparse.Namespace, list[str]], int],
    argv: Sequence[str] | None,
) -> int:
    """Parse `argv` (default: the command line) and run `bench(args, argv)`.

    Bad input (a missing file, a setting out of range) is one line on stderr and exit status 1;
    among it, a count of COUNTS (`--rounds`, `--limit`) below 1, whichever benchmark it is given.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    try:
        for name, unit in COUNTS.items():
            if getattr(args, name, None) is not None and getattr(args, name) < 1:
                raise ValueError(f"--{name} must be at least 1{unit}, got {getattr(args, name)}")
        return bench(args, argv)
    except (OSError, ValueError) as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1
