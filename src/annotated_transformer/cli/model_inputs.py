"""What a command reads as its model: `--checkpoint`'s checkpoint, run folder, save-pretrained
folder or CTranslate2 export (an export that the command does not read is refused before any
slow work), the `Translator` opened from it, and `translate --quantize`'s int8 conversion.

Hand-written; read by translate, evaluate, attention, average, save-pretrained and the exports.
The chapters "Engineering a training run" (a run folder as a model) and "Serving the model:
CTranslate2 and `transformers`" (the exports, --quantize) teach them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path
from typing import Any

from annotated_transformer.cli.common import UsageError, _needs


def _check_checkpoint(path: str | None, command: str = "translate") -> None:
    """The checkpoint or run folder exists and is one that `command` reads (read later: checked
    here before any slow work); None is the model that ships with the package."""
    if path is not None and not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such checkpoint or run folder")
    foreign = None if path is None else _model_folder(Path(path))
    if foreign is not None and not (command == "translate" and foreign[1] == "export-ct2"):
        what, writer, reader = foreign
        needs = MODEL_INPUTS.get(command, MODEL_INPUTS["evaluate"])
        raise ValueError(f"{path} is {what} (written by {writer}): {command} needs {needs}; "
                         f"{reader}")  # fmt: skip


MODEL_INPUTS = {  # what each command reads as its model
    "translate": "a checkpoint, a run folder, a save-pretrained folder or a CTranslate2 export",
    "evaluate": "a checkpoint, a run folder or a save-pretrained folder",
    "average": "checkpoint files or a run folder",
    "save-pretrained": "a checkpoint or a run folder",
}


def _model_folder(folder: Path) -> tuple[str, str, str] | None:
    """(what, the command that writes it, what reads it) for a folder that an export wrote (its
    record says so, or it holds the export's first two files); None for any other path."""
    if not folder.is_dir():
        return None
    from annotated_transformer.exports import ct2 as ct2_export
    from annotated_transformer.exports import hf as hf_export
    from annotated_transformer.exports import onnx as onnx_export

    for module, what, writer, reader in (
        (ct2_export, "a CTranslate2 export", "export-ct2", "translate --checkpoint reads it"),
        (hf_export, "a transformers export", "export-hf", "transformers' MarianMTModel reads it"),
        (onnx_export, "an ONNX export", "export-onnx", "ONNX Runtime reads it (the page "
         "'Try it')"),
    ):  # fmt: skip
        try:
            about = json.loads((folder / module.ABOUT).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # (missing, not UTF-8, not JSON)
            about = None
        ours = isinstance(about, dict) and about.get("format") == module.FORMAT
        if ours or all((folder / name).is_file() for name in module.FILES[:2]):
            return what, writer, reader
    return None


def _translator(args: argparse.Namespace):
    """The model to translate with: `--checkpoint`'s, else the one that ships with the package."""
    from annotated_transformer.translator import Translator

    if args.checkpoint is None:
        translator = Translator.pretrained(device=args.device)
    elif _ct2_export(args.checkpoint):
        from annotated_transformer.exports.ct2 import CT2Translator

        _check_ct2_search(args, f"{args.checkpoint} is a CTranslate2 export")
        threads = getattr(args, "threads", None) or 0  # (0: CTranslate2's own default)
        translator = CT2Translator.open(args.checkpoint, device=args.device or "cpu",
                                        threads=threads)  # fmt: skip
    else:
        translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    size, beam = len(translator.tgt_vocab), getattr(args, "beam", 1)
    if beam > size:
        raise UsageError(f"--beam {beam}: larger than the model's target vocabulary ({size:,} "
                         f"tokens): give at most {size:,}")  # fmt: skip
    translator.max_tokens = getattr(args, "max_tokens", translator.max_tokens)
    translator.workers = getattr(args, "threads", None) or translator.workers
    return translator


def _check_ct2_search(args: argparse.Namespace, why: str) -> None:
    """CTranslate2's beam search stops at k finished hypotheses and keeps no greedy lane."""
    if getattr(args, "keep_greedy", False):
        raise UsageError(f"--keep-greedy: {why}, whose search has no greedy hypothesis to keep")
    if getattr(args, "search", "k-finished") != "k-finished":
        raise UsageError(f"--search {args.search}: {why}, whose search stops at k finished "
                         "hypotheses (--search k-finished)")  # fmt: skip


def _quantized(translator: Any, args: argparse.Namespace) -> Any:
    """`--quantize int8`: our own int8 (`Translator.quantized`, PyTorch's dynamic quantization);
    `--quantize ct2-int8`: the model converted to CTranslate2's int8 in memory."""
    from annotated_transformer.exports.ct2 import CT2Translator

    if isinstance(translator, CT2Translator):
        raise UsageError(f"--quantize {args.quantize}: {args.checkpoint} is a CTranslate2 export "
                         f"already ({translator.origin['quantization']}); write another with "
                         f"export-ct2 --quantization int8")  # fmt: skip
    if args.quantize == "int8":
        if next(translator.model.parameters()).device.type != "cpu":
            raise UsageError("--quantize int8 runs on the CPU: give --device cpu (on a GPU, "
                             "--quantize ct2-int8 decodes with CTranslate2's int8)")  # fmt: skip
        return translator.quantized("int8")
    _check_ct2_search(args, f"--quantize {args.quantize} decodes with CTranslate2")
    _needs(f"translate --quantize {args.quantize}", ("ctranslate2",), "serve")
    if translator.bpe is None:
        raise ValueError(f"{args.checkpoint}: --quantize ct2-int8 needs a run with the shared BPE "
                         f"vocabulary (tokenizer bpe); this one has word vocabularies")  # fmt: skip
    return CT2Translator.converted(translator, "int8", threads=translator.workers or 0)


def _ct2_export(path: str) -> bool:
    """Whether `path` is a folder that `export-ct2` wrote (read by CTranslate2, not PyTorch)."""
    from annotated_transformer.exports.ct2 import read_about

    if read_about(path) is None:
        return False
    if not importlib.util.find_spec("ctranslate2"):
        raise OSError(f"{path} is a CTranslate2 model; reading it needs the package "
                      f"ctranslate2: pip install 'annotated-transformer[serve]'")  # fmt: skip
    return True
