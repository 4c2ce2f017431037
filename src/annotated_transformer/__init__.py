"""The annotated "Attention Is All You Need" (Vaswani et al., 2017), as a PyTorch package.

Most modules here are generated from the chapters of the book in `book/` (each says which one at
its top: edit the notebook, not the module). Hand-written modules carry no such header:

- `cli`: the `annotated-transformer` command line;
- `notebook`: plumbing the chapters call first (offline charts, crisp figures, the profile);
- `figures`: the drawing code of the book's figures (Figure 1, Table 1's costs), which the
  chapters call in collapsed cells.

Importing the package prints, downloads and seeds nothing.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("annotated-transformer")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
