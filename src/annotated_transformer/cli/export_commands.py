"""The commands that write a trained model for others to read: `save-pretrained` (the files of
a shipped model), `export-onnx` (the graphs the page runs in the browser), `export-ct2`
(CTranslate2) and `export-hf` (a `transformers` MarianMTModel). The export modules are imported
only when their command runs.

Hand-written; taught by the chapters "Serving the model: CTranslate2 and `transformers`"
(save-pretrained, export-ct2, export-hf) and "Try it: the model in your browser" (export-onnx).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from annotated_transformer.cli.common import PROG, check_output_folder, needs_packages
from annotated_transformer.cli.model_inputs import check_model_input, open_model
from annotated_transformer.util.errors import InputError


def cmd_save_pretrained(args: argparse.Namespace) -> int:
    """Write a trained BPE run as the files a shipped model is made of (fp16 safetensors, config,
    tokenizer, SHA256SUMS): what `annotated_transformer/pretrained_model/` holds."""
    check_model_input(args.checkpoint, "save-pretrained")
    from annotated_transformer.pretrained import check_replaceable, write_pretrained
    from annotated_transformer.runs.saved_run import SavedRun

    check_replaceable(_out_folder(args))
    with _writing(args):
        sums = write_pretrained(SavedRun.load(args.checkpoint), args.out)
    print(f"wrote {args.out}:")
    print(sums.read_text(encoding="utf-8"), end="")
    return 0


def cmd_export_onnx(args: argparse.Namespace) -> int:
    """Write the model as two ONNX graphs (the encoder, one decoder step) with its tokenizer:
    what the book's chapter "Try it" runs in the browser."""
    needs_packages("export-onnx", ("onnx", "onnxscript", "onnxruntime"), "onnx")
    from annotated_transformer.exports import onnx as onnx_export

    translator = _model_to_export(args, "export-onnx", onnx_export.check_replaceable)
    with _writing(args):
        onnx_export.export_onnx(
            translator.model,
            translator.bpe,
            args.out,
            origin=translator.origin,
            pair=translator.config.pair,
        )
    return _wrote(Path(args.out), onnx_export.FILES)


def cmd_export_ct2(args: argparse.Namespace) -> int:
    """Write the model as a CTranslate2 model with its tokenizer, which `translate --checkpoint`
    and `CT2Translator.open` read."""
    needs_packages("export-ct2", ("ctranslate2",), "serve")
    from annotated_transformer.exports import ct2 as ct2_export

    translator = _model_to_export(args, "export-ct2", ct2_export.check_replaceable)
    ct2_export.check_convertible(translator.model)
    with _writing(args):
        ct2_export.export_ct2(translator.model, translator.bpe, translator.config, args.out,
                              quantization=args.quantization, origin=translator.origin)  # fmt: skip
    return _wrote(Path(args.out), ct2_export.FILES)


def cmd_export_hf(args: argparse.Namespace) -> int:
    """Write the model as a Hugging Face `transformers` MarianMTModel folder with its tokenizer
    and a Hub model card."""
    needs_packages("export-hf", ("transformers",), "serve")
    from annotated_transformer.exports import hf as hf_export

    translator = _model_to_export(args, "export-hf", hf_export.check_replaceable)
    hf_export.check_marian(translator.model)
    with _writing(args):
        hf_export.export_hf(translator.model, translator.bpe, args.out,
                            card=_model_card(args.checkpoint), origin=translator.origin,
                            pair=translator.config.pair)  # fmt: skip
    return _wrote(Path(args.out), hf_export.FILES)


def _model_to_export(args: argparse.Namespace, command: str, check_out: Callable) -> Any:
    """--out checked (`check_out`), then the model of --checkpoint, which must have the shared
    BPE vocabulary that every export carries (a Translator)."""
    check_out(_out_folder(args))
    check_model_input(args.checkpoint, command)
    translator = open_model(args, command)
    if translator.bpe is None:
        raise InputError(f"{args.checkpoint}: {command} needs a run with the shared BPE "
                         f"vocabulary (tokenizer bpe); this one has word vocabularies")  # fmt: skip
    return translator


def _out_folder(args: argparse.Namespace) -> Path:
    """--out checked as an output (`check_output_folder`), and refused inside the installed
    package unless --into-package (`util.atomic.check_outside_package`), before any work."""
    from annotated_transformer.util.atomic import check_outside_package

    check_outside_package(args.out, getattr(args, "into_package", False))
    return check_output_folder(args.out, "--out", into_package=True)


def _writing(args: argparse.Namespace) -> AbstractContextManager[None]:
    """The lock of --out (`util.atomic.writing`), with --into-package's permission: the writer's
    own lock of the same folder, inside it, shares both."""
    from annotated_transformer.util.atomic import writing

    return writing(args.out, into_package=getattr(args, "into_package", False))


def _wrote(out: Path, files: Sequence[str]) -> int:
    for name in files:
        print(f"wrote {out / name} ({(out / name).stat().st_size:,} bytes)")
    return 0


def _model_card(checkpoint: str | None) -> str | None:
    """The card beside a model (the shipped model's, or a save-pretrained folder's) when it
    records the SHA-256 of these very weights; else None, and a note on standard error."""
    from annotated_transformer.exports.hf import card_beside
    from annotated_transformer.pretrained import shipped_folder

    card, why = card_beside(shipped_folder() if checkpoint is None else Path(checkpoint))
    if why is not None:
        print(f"{PROG}: note: {why}", file=sys.stderr, flush=True)
    return card
