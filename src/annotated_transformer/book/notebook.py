"""What every chapter calls first (hand-written plumbing, not generated from a chapter).

    from annotated_transformer.book.notebook import setup_chapter
    profile = setup_chapter()

`setup_chapter` makes Altair charts work with no network (the JavaScript travels inside the
page), makes matplotlib draw crisp SVG figures, seeds Python's and PyTorch's random generators
(NumPy code takes a `numpy.random.default_rng(seed)` of its own), and returns the compute
profile (see the appendix "How this book becomes a package"). Nothing happens at import time; the
plotting libraries are imported only when a chapter asks, so the package itself does not need them.

`add_to_class` lets a chapter write a class across cells, with prose between its methods.

A chapter may run outside a clone of the book's repository (downloaded alone, or on Colab): one
that reads the repository's files names them, `setup_chapter(reads=["results/multi30k-small"])`,
and there stops at once with one line (`OutsideTheRepository`). `repository_address` reads the
repository's one address from `_config.yml` for "Running the book" (in the appendix "How this book
becomes a package") and `tools/first_cell.py`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
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


# The book's matplotlib style. The page's content column is 776 px wide at a 1280 px window. An
# SVG figure shows 96 px per inch, so one up to 8 inches wide shows at its own size, where a font
# of s points is 4/3 s px; a wider one is shrunk to the column, its text with it. Every label must
# read at 10 px or more (tests/test_browser.py measures it): at 8 inches that is 7.5 points, so
# the style's smallest size is 9, a chapter's at least 8, and its figures at most 8 inches wide.
BOOK_STYLE: dict[str, Any] = {
    "figure.figsize": (7.0, 3.6),
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "legend.title_fontsize": 10,
    "figure.titlesize": 11,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    # Text stays text: selectable, searchable, sharp, and its size can be read back from the SVG.
    # The reader's browser draws it in DejaVu Sans or a narrower sans-serif.
    "svg.fonttype": "none",
    "svg.hashsalt": "annotated-transformer",  # stable element ids between builds
}


def enable_crisp_matplotlib() -> None:
    """Draw matplotlib figures as SVG in the book's style (`BOOK_STYLE`): sharp at any zoom, with
    text a reader can read in the page's column, in the notebook and in the book."""
    import matplotlib.pyplot as plt
    from matplotlib_inline.backend_inline import set_matplotlib_formats

    set_matplotlib_formats("svg")
    plt.rcParams.update(BOOK_STYLE)


def setup_chapter(seed: int | None = 0, reads: Sequence[str] = ()) -> Profile:
    """Prepare a chapter: offline charts, crisp figures, seeded generators. Returns the profile.

    `reads` names the files of the book's repository that the chapter reads, relative to it
    (`results/multi30k-small`; glob patterns allowed). A chapter opened outside a clone (downloaded
    alone, or on Colab) stops here, saying in one line which files it needs, instead of failing
    later. It prints nothing: the appendix "How this book becomes a package" prints the profile
    once (`profile.describe()`), and a chapter's first output is its own.
    """
    import warnings

    if reads:
        repository_files(reads)
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


class OutsideTheRepository(FileNotFoundError):
    """A chapter reads files of the book's repository, and it is not run from a clone of it.

    IPython (Jupyter, Colab) shows the message alone, one line, instead of a traceback.
    """

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def project_root(start: str | Path = ".") -> Path:
    """The book's folder at or above `start`: the one holding `_toc.yml` and `results/`.

    The chapters read the committed records in `results/` from there, whether or not the book
    is a git checkout. Outside a clone it raises `OutsideTheRepository`, one line.
    """
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        if (folder / "_toc.yml").exists() and (folder / "results").is_dir():
            return folder
    raise OutsideTheRepository(
        f"No clone of the book's repository at or above {start} (a folder holding _toc.yml and "
        "results/): this chapter reads its files, so run it in a clone"
    )


def repository_files(reads: Sequence[str], start: str | Path = ".") -> Path:
    """The clone at or above `start` that holds every file `reads` names (see `setup_chapter`)."""
    named = " and ".join([", ".join(reads[:-1]), reads[-1]] if len(reads) > 1 else reads)
    try:
        root = project_root(start)
    except OutsideTheRepository:
        raise OutsideTheRepository(
            f"This chapter reads {named}, kept in the book's repository and not in the "
            'package: it runs only in a clone of the repository (see "Running the book" in the '
            'appendix "How this book becomes a package")'
        ) from None
    missing = [pattern for pattern in reads if next(root.glob(pattern), None) is None]
    if missing:
        raise OutsideTheRepository(f"This chapter reads {', '.join(missing)}, missing in {root}")
    return root


def repository_address(root: str | Path | None = None) -> tuple[str, str] | None:
    """The book's repository (`repository: url:` and `branch:` of `_config.yml`), or None.

    `root` is the clone (default: the one around the current folder). The launch buttons, the
    chapters' hidden first cells (`tools/first_cell.py`) and the commands of "Running the book" all
    come from this one setting.
    """
    import yaml

    folder = Path(root) if root is not None else project_root()
    settings = yaml.safe_load((folder / "_config.yml").read_text(encoding="utf-8")) or {}
    repository = settings.get("repository") or {}
    url = str(repository.get("url") or "").strip().rstrip("/")
    return (url, str(repository.get("branch") or "main")) if url else None


def install_command(url: str, branch: str) -> str:
    """The pip command that installs the package and the chapters' extras from the repository."""
    return f'pip install "annotated-transformer[book] @ git+{url}@{branch}"'


def running_the_book(root: str | Path | None = None):  # -> IPython.display.Markdown
    """The commands of "Running the book": with the book's real address, or what to do without."""
    from IPython.display import Markdown

    try:
        address = repository_address(root if root is not None else project_root())
    except OutsideTheRepository:
        return Markdown("Outside a clone, this page cannot read the repository's address.")
    if address is None:
        return Markdown(
            "This copy of the book names no repository address (`repository: url:` in "
            "`_config.yml` is empty), so its pages have no Colab or Binder button and a chapter on "
            "its own cannot install the package: run the chapters from a clone of the repository "
            "you have the book from, with the commands above."
        )
    url, branch = address
    folder = url.rsplit("/", 1)[-1].removesuffix(".git")
    return Markdown(
        f"The book's repository is <{url}>. To run every chapter on your machine:\n\n"
        f"```bash\ngit clone --branch {branch} {url}\ncd {folder} && bash tools/book.sh\n```\n\n"
        "A chapter on its own (its `.ipynb` from the download button, or the launch button's "
        "Colab and Binder) installs the package in its first cell, as you would with "
        f"`%{install_command(url, branch)}`."
    )


# --- The reading map: what the path from the introduction to "Try it" asks of a reader ----------

COLLAPSED_TAGS = frozenset({"hide-input", "hide-cell", "remove-input", "remove-cell"})
WORDS_PER_MINUTE, CODE_LINES_PER_MINUTE = 230, 20
READING_PATH_END = "book/tryit"  # the last chapter of the reading path


SECTIONS = ("main", "deeper", "exercises")  # a chapter's three kinds of reading, in page order
SECTION_HEADINGS = {"## Going deeper": "deeper", "## Exercises": "exercises"}


def _section_of(line: str, section: str) -> str:
    """The section that `line` opens, or `section` if it opens none (sections only go forward)."""
    for heading, name in SECTION_HEADINGS.items():
        if line.rstrip() == heading or line.startswith(heading + " "):
            return max(section, name, key=SECTIONS.index)
    return section


def chapter_counts(path: str | Path) -> dict[str, Any]:
    """A chapter's title and, for its main line, visible and collapsed code lines, prose words and
    reading minutes; the same for its "## Going deeper" and "## Exercises" sections under `deeper`
    and `exercises`, and for the whole page under `whole`.

    The main line is everything above the first of those two headings. Code lines count blank
    ones; a cell tagged with one of `COLLAPSED_TAGS` is collapsed. Words are those of the markdown
    cells outside code fences. Minutes: words at `WORDS_PER_MINUTE`, visible code at
    `CODE_LINES_PER_MINUTE`.
    """
    import json
    import re

    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    counts = {name: dict(visible=0, collapsed=0, words=0) for name in SECTIONS}
    section, title = "main", ""
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            title = title or source.partition("\n")[0].removeprefix("# ").strip()
            prose = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", source, flags=re.S | re.M)
            for line in prose.split("\n"):  # a heading may open a section inside a cell
                section = _section_of(line, section)
                counts[section]["words"] += len(line.split())
        elif cell["cell_type"] == "code":
            hidden = COLLAPSED_TAGS & set(cell.get("metadata", {}).get("tags", []))
            counts[section]["collapsed" if hidden else "visible"] += len(source.split("\n"))
    counts["whole"] = {key: sum(counts[name][key] for name in SECTIONS) for key in counts["main"]}
    for part in counts.values():
        part["minutes"] = part["words"] / WORDS_PER_MINUTE + part["visible"] / CODE_LINES_PER_MINUTE
    main = counts.pop("main")
    return dict(title=title, **main, **counts)


def reading_path(root: str | Path | None = None) -> list[tuple[str, str, Path]]:
    """(part caption, entry, notebook) of each chapter from the introduction to "Try it"."""
    import yaml

    folder = Path(root) if root is not None else project_root()
    toc = yaml.safe_load((folder / "_toc.yml").read_text(encoding="utf-8"))
    entries = [("Introduction", toc["root"])]
    for part in toc.get("parts", []):
        entries += [(part["caption"], chapter["file"]) for chapter in part["chapters"]]
    path = entries[: [entry for _, entry in entries].index(READING_PATH_END) + 1]
    return [(part, entry, folder / f"{entry}.ipynb") for part, entry in path]


def reading_map(root: str | Path | None = None) -> list[dict[str, Any]]:
    """One row per chapter of the reading path: its part, entry and `chapter_counts`."""
    return [
        dict(part=part, entry=entry, **chapter_counts(path))
        for part, entry, path in reading_path(root)
    ]
