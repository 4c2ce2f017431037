"""The parsers of the export commands (`save-pretrained`, `export-onnx`, `export-ct2`,
`export-hf`), which `parser.build_parser` adds. Building them imports no torch.

Hand-written; the commands are taught by the chapters "Serving the model" and "Try it"
(`export_commands`).
"""

from __future__ import annotations

import argparse

from annotated_transformer.cli.export_commands import (
    cmd_export_ct2,
    cmd_export_hf,
    cmd_export_onnx,
    cmd_save_pretrained,
)

Commands = argparse._SubParsersAction  # what `add_subparsers` returns


def add_save_pretrained(commands: Commands) -> None:
    about = "write a trained BPE run as a shipped model: fp16 safetensors with SHA-256 sums"
    save = commands.add_parser("save-pretrained", help=about, description=about + ".")
    save.add_argument("checkpoint", help="a checkpoint (e.g. an average), or a run folder")
    save.add_argument("--out", required=True, help="the folder to write (files in it that "
                      "are not a shipped model's are not replaced)")  # fmt: skip
    _into_package_option(save)
    save.set_defaults(run=cmd_save_pretrained)


def _add_export(commands: Commands, name: str, about: str, more: str) -> argparse.ArgumentParser:
    """An export command: `--checkpoint` (default: the shipped model) and `--out`, a folder."""
    export = commands.add_parser(name, help=about, description=about + more)
    export.add_argument("--checkpoint", help="a checkpoint, or a run folder, with a BPE "
                        "vocabulary (default: the model that ships with the package)")  # fmt: skip
    export.add_argument("--out", required=True, help="the folder to write (files in it that an "
                        "export did not write are not replaced)")  # fmt: skip
    _into_package_option(export)
    return export


def _into_package_option(parser: argparse.ArgumentParser) -> None:
    """--into-package, hidden: let --out be a folder of the installed package. Only the release
    recipe passes it (`save-pretrained ... --out src/annotated_transformer/pretrained_model`);
    without it such an --out is refused (`util.atomic.check_outside_package`)."""
    parser.add_argument("--into-package", action="store_true", help=argparse.SUPPRESS)


def add_export_onnx(commands: Commands) -> None:
    about = "write the model as ONNX graphs (encoder, one decoder step) with its tokenizer"
    export = _add_export(commands, "export-onnx", about, ": what the book's chapter 'Try it' "
                         "runs in the browser.")  # fmt: skip
    export.set_defaults(run=cmd_export_onnx, device="cpu")


def add_export_ct2(commands: Commands) -> None:
    about = "write the model for CTranslate2 (OpenNMT's inference engine) with its tokenizer"
    export = _add_export(commands, "export-ct2", about, ". `translate --checkpoint OUT` then "
                         "decodes with it exactly as with PyTorch (float32).")  # fmt: skip
    export.add_argument("--quantization", choices=["float32", "int8"], default="float32",
                        help="the weights' type (int8: smaller and faster, a little less "
                        "exact; default: float32)")  # fmt: skip
    export.set_defaults(run=cmd_export_ct2, device="cpu")


def add_export_hf(commands: Commands) -> None:
    about = "write the model for Hugging Face transformers (a MarianMTModel) with a model card"
    export = _add_export(commands, "export-hf", about, ": MarianMTModel.from_pretrained and "
                         "AutoTokenizer.from_pretrained read the folder with no code of this "
                         "package.")  # fmt: skip
    export.set_defaults(run=cmd_export_hf, device="cpu")
