"""The 2022 Annotated Transformer's model and loss, read from a local copy of its file.

The 2022 code (harvardnlp/annotated-transformer, `the_annotated_transformer.py`) is not part of
this project: the training benchmark reads it from a file the user fetched (`--code-2022`).
"""

from __future__ import annotations

import ast
import copy
import hashlib
import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

NAMES_2022 = (
    "EncoderDecoder",
    "Generator",
    "clones",
    "Encoder",
    "LayerNorm",
    "SublayerConnection",
    "EncoderLayer",
    "Decoder",
    "DecoderLayer",
    "attention",
    "MultiHeadedAttention",
    "PositionwiseFeedForward",
    "Embeddings",
    "PositionalEncoding",
    "make_model",
    "LabelSmoothing",
)


def _definitions(path: Path) -> tuple[str, list[ast.stmt]]:
    """The text of `path` and its top-level definitions named in `NAMES_2022`, all of them."""
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as error:
        raise OSError(f"--code-2022 {path}: cannot read it ({error.strerror})") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as error:
        raise ValueError(
            f"--code-2022 {path}: not Python (line {error.lineno}: {error.msg})"
        ) from None
    wanted = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in NAMES_2022
    ]
    missing = sorted(set(NAMES_2022) - {node.name for node in wanted})
    if missing:
        raise ValueError(
            f"--code-2022 {path}: not the 2022 Annotated Transformer's code, it defines no "
            f"{', '.join(missing)}"
        )
    return source, wanted


def load_2022(path: str | Path) -> dict[str, Any]:
    """The model and loss definitions of the 2022 Annotated Transformer, read from `path`.

    Only the top-level classes and functions named in `NAMES_2022` are executed (the file's own
    imports need torchtext, which no longer loads), with torch, nn, math, copy and log_softmax
    in scope: run this only on a file you trust, as you would `python path`. The namespace also
    holds the file's SHA-256 as "sha256".
    """
    path = Path(path)
    source, wanted = _definitions(path)
    namespace: dict[str, Any] = {
        "__name__": "annotated_transformer_2022",
        "torch": torch,
        "nn": nn,
        "math": math,
        "copy": copy,
        "log_softmax": F.log_softmax,
    }
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(path), "exec"), namespace)
    namespace["sha256"] = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return namespace


class Flattened(nn.Module):
    """The 2022 criterion as its `SimpleLossCompute` calls it: on (N, V) and (N,) views."""

    def __init__(self, criterion: nn.Module) -> None:
        super().__init__()
        self.criterion = criterion

    def forward(self, log_probs: Tensor, target: Tensor) -> Tensor:
        # (..., V) -> (N, V) and (...) -> (N,): one row per target position
        return self.criterion(log_probs.reshape(-1, log_probs.size(-1)), target.reshape(-1))
