"""What every chapter calls first (hand-written plumbing, not generated from a chapter).

    from annotated_transformer.notebook import setup_chapter
    profile = setup_chapter()

`setup_chapter` makes Altair charts work with no network (the JavaScript travels inside the
page), makes matplotlib draw crisp SVG figures, seeds Python's and PyTorch's random generators
(NumPy code takes a `numpy.random.default_rng(seed)` of its own), and returns the compute
profile (see the introduction). Nothing happens at import time; the plotting libraries are
imported only when a chapter asks, so the package itself does not need them.

`add_to_class` lets a chapter write a class across cells, with prose between its methods.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from annotated_transformer.profile import Profile, current_profile

OFFLINE_RENDERER = "annotated-transformer-offline"

Member = TypeVar("Member")


def add_to_class(cls: type) -> Callable[[Member], Member]:
    """Set the decorated function on `cls` as a method, so a class can be written across cells.

        class MultiHeadedAttention(nn.Module):
            def __init__(self, h: int, d_model: int) -> None: ...

        # ... prose ...

        @add_to_class(MultiHeadedAttention)
        def forward(self, query, key, value, mask=None): ...

    It goes first, above any other decorator (`@property`, `@staticmethod`, `@torch.no_grad()`),
    and adds what they make. The chapter runs top to bottom as written; `tools/export.py` folds
    the function into the class statement, so the package never calls this. As any `def`, the
    function's name is also bound in the notebook; the decorator returns it unchanged.
    """

    def add(member: Member) -> Member:
        # A function has a name; a property, classmethod or cached_property holds one that has.
        wrapped = [getattr(member, attribute, None) for attribute in ("fget", "__func__", "func")]
        names = [getattr(candidate, "__name__", None) for candidate in (member, *wrapped)]
        name = next((name for name in names if isinstance(name, str)), None)
        if name is None:
            raise TypeError(f"add_to_class({cls.__name__}): {member!r} has no name to add it as")
        setattr(cls, name, member)
        if hasattr(type(member), "__set_name__"):  # functools.cached_property and the like
            member.__set_name__(cls, name)
        return member

    return add


def offline_altair_html(spec: dict[str, Any], **embed_options: Any) -> dict[str, str]:
    """Render a Vega-Lite spec as HTML that carries Vega itself, so it draws without a CDN.

    Altair's "inline" template puts the vega-embed bundle (from `vl-convert-python`) into the
    page. Its scripts are turned into ES modules so that each chart has its own scope: as plain
    scripts, two charts on one page would declare `spec` twice, and the bundle would clash with
    the globals of the book's theme.
    """
    import altair as alt
    from altair.utils.html import spec_to_html

    html = spec_to_html(
        spec,
        mode="vega-lite",
        vega_version=alt.VEGA_VERSION,
        vegaembed_version=alt.VEGAEMBED_VERSION,
        vegalite_version=alt.VEGALITE_VERSION,
        output_div=f"altair-{uuid.uuid4().hex[:12]}",
        embed_options=embed_options or {"actions": False},
        fullhtml=False,
        template="inline",
    )
    html = html.replace('<script type="text/javascript">', '<script type="module">')
    return {"text/html": html}


def enable_offline_altair() -> None:
    """Make Altair draw every chart with `offline_altair_html`."""
    import altair as alt

    alt.renderers.register(OFFLINE_RENDERER, offline_altair_html)
    alt.renderers.enable(OFFLINE_RENDERER)


def enable_crisp_matplotlib() -> None:
    """Draw matplotlib figures as SVG: sharp at any zoom, in the notebook and in the book."""
    import matplotlib.pyplot as plt
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("svg")
    plt.rcParams.update(
        {
            "figure.figsize": (7.0, 3.6),
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "svg.hashsalt": "annotated-transformer",  # stable element ids between builds
        }
    )


def setup_chapter(seed: int | None = 0) -> Profile:
    """Prepare a chapter: offline charts, crisp figures, seeded generators. Returns the profile.

    It prints nothing: the introduction prints the profile once (`profile.describe()`), and a
    chapter's first output is its own.
    """
    import warnings

    enable_offline_altair()
    enable_crisp_matplotlib()
    # pooch imports tqdm.auto, which warns in a kernel without ipywidgets; the chapters show
    # no progress bars, so the warning says nothing to a reader.
    warnings.filterwarnings("ignore", message="IProgress not found")
    if seed is not None:
        import random

        import torch

        random.seed(seed)
        torch.manual_seed(seed)
    return current_profile()


def markdown_table(rows: list[dict[str, Any]]):  # -> IPython.display.Markdown
    """A list of dicts with the same keys, as a table in the page."""
    from IPython.display import Markdown

    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(row[k]) for k in keys) + " |" for row in rows]
    return Markdown("\n".join(lines))


def project_root(start: str | Path = ".") -> Path:
    """The book's folder at or above `start`: the one holding `_toc.yml` and `results/`.

    The chapters read the committed records in `results/` from there, whether or not the book
    is a git checkout.
    """
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        if (folder / "_toc.yml").exists() and (folder / "results").is_dir():
            return folder
    raise FileNotFoundError(f"no folder with _toc.yml and results/ at or above {start}")
