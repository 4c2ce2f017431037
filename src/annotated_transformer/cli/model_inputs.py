"""What a command reads as its model: which forms of `exports.formats.FORMATS` each command
reads (`command_reads`; a form it does not read is refused before any slow work), and the
translator opened from `--checkpoint` by `open_translator`, the package's one door to a model.

Hand-written; read by translate, evaluate, attention, average, save-pretrained and the exports.
The chapters "Engineering a training run" (a run folder as a model) and "Serving the model:
CTranslate2 and `transformers`" (the exports, `open_translator`, --quantize) teach them.
"""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from annotated_transformer.cli.common import UsageError, needs_packages


def command_reads(command: str) -> tuple[str, ...]:
    """The forms of a model that `command` reads (names of `exports.formats.FORMATS`): the
    PyTorch forms, a CTranslate2 export too for translate, no shipped model for average and
    save-pretrained."""
    from annotated_transformer.exports.formats import PYTORCH

    if command == "translate":
        return (*PYTORCH, "ct2")
    if command in ("average", "save-pretrained"):
        return ("checkpoint", "run folder")
    return PYTORCH


def check_model_input(path: str | None, command: str) -> None:
    """The checkpoint or folder `path` exists and is a form that `command` reads (checked before
    any slow work: opening it comes later); None is the model that ships with the package."""
    if path is None:
        return
    from annotated_transformer.exports.formats import check_format, identify

    if identify(path).name == "ct2" and "ct2" in command_reads(command):
        needs_ct2(path)
    check_format(path, command_reads(command), command)


def needs_ct2(path: str) -> None:
    """Reading a CTranslate2 export needs the package ctranslate2."""
    if not importlib.util.find_spec("ctranslate2"):
        raise OSError(f"{path} is a CTranslate2 model; reading it needs the package "
                      f"ctranslate2: pip install 'annotated-transformer[serve]'")  # fmt: skip


def open_model(args: argparse.Namespace, command: str) -> Any:
    """The model `command` translates with (`--checkpoint`'s, else the one that ships with the
    package), opened by `open_translator` with the command's settings (a `TranslatorLike`)."""
    from annotated_transformer.exports.formats import identify, open_translator

    quantize = getattr(args, "quantize", None)
    if args.checkpoint is not None and identify(args.checkpoint).name == "ct2":
        check_ct2_search(args, f"{args.checkpoint} is a CTranslate2 export")
    elif quantize == "ct2-int8":
        check_ct2_search(args, f"--quantize {quantize} decodes with CTranslate2")
        needs_packages(f"translate --quantize {quantize}", ("ctranslate2",), "serve")
    translator = open_translator(
        args.checkpoint, device=args.device, max_tokens=getattr(args, "max_tokens", 8192),
        workers=getattr(args, "threads", None), quantize=quantize, reads=command_reads(command),
        who=command,
    )  # fmt: skip
    size, beam = len(translator.tgt_vocab), getattr(args, "beam", 1)
    if beam > size:
        raise UsageError(f"--beam {beam}: larger than the model's target vocabulary ({size:,} "
                         f"tokens): give at most {size:,}")  # fmt: skip
    return translator


def check_ct2_search(args: argparse.Namespace, why: str) -> None:
    """CTranslate2's beam search stops at k finished hypotheses and keeps no greedy lane."""
    if getattr(args, "keep_greedy", False):
        raise UsageError(f"--keep-greedy: {why}, whose search has no greedy hypothesis to keep")
    if getattr(args, "search", "k-finished") != "k-finished":
        raise UsageError(f"--search {args.search}: {why}, whose search stops at k finished "
                         "hypotheses (--search k-finished)")  # fmt: skip
