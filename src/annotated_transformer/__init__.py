"""The annotated "Attention Is All You Need" (Vaswani et al., 2017), as a PyTorch package.

Most modules here are generated from the chapters of the book in `book/` (each says which one at
its top: edit the notebook, not the module). Hand-written modules carry no such header:

- `cli`: the `annotated-transformer` command line;
- `notebook`: plumbing the chapters call first (offline charts, crisp figures, the profile);
- `figures`: the drawing code of the book's figures (Figure 1, Table 1's costs), which the
  chapters call in collapsed cells.

Importing the package prints, downloads and seeds nothing, and imports no torch: the names a user
starts from (`Translator`, `open_translator`, `make_model`, the configurations, the searches) are
imported from their modules when first used.
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import Any

try:
    __version__ = version("annotated-transformer")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

# The names a user starts from, each imported from its module on first use (so that `import
# annotated_transformer` stays fast and imports no torch): `from annotated_transformer import
# Translator` is `from annotated_transformer.translator import Translator`.
PUBLIC = {
    "Translator": "annotated_transformer.translator",
    "open_translator": "annotated_transformer.exports.formats",
    "make_model": "annotated_transformer.model.transformer",
    "ModelConfig": "annotated_transformer.model.transformer",
    "TrainConfig": "annotated_transformer.runs.presets",
    "preset": "annotated_transformer.runs.presets",
    "greedy_decode": "annotated_transformer.decoding.search",
    "beam_search": "annotated_transformer.decoding.search",
    "Error": "annotated_transformer.util.errors",
}

__all__ = ["__version__", *PUBLIC]


def __getattr__(name: str) -> Any:
    if name not in PUBLIC:
        raise AttributeError(f"module 'annotated_transformer' has no attribute {name!r}")
    value = getattr(import_module(PUBLIC[name]), name)
    globals()[name] = value  # (looked up once)
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *PUBLIC])
