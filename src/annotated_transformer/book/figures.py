"""Figures the book draws from code (hand-written, not generated from a chapter).

    from annotated_transformer.book.figures import draw_architecture, table1_chart
    draw_architecture()      # the paper's Figure 1, each box naming the class that implements it
    table1_chart(d=512)      # Table 1's complexity column against n (Altair)

The chapters call these in collapsed cells, so that the page shows the picture and the code a
reader studies, not the drawing. matplotlib, NumPy and Altair are imported only when a figure is
drawn, so the package itself does not need them.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

FILLS = {"Attention": "#fbe3c2", "Add & Norm": "#f3f3b8", "Feed Forward": "#c9e8f5",
         "Embedding": "#f8d0d0", "Linear": "#d6d6f5", "Softmax": "#c8f0c8"}  # fmt: skip
RED = "#c0392b"  # the residual connections


def _box(ax: Any, x: float, y: float, text: str, code: str) -> None:
    """A box centred at (x, y): the paper's name and our class."""
    from matplotlib.patches import FancyBboxPatch

    fill = next(color for key, color in FILLS.items() if key in text)
    ax.add_patch(FancyBboxPatch((x - 1.95, y - 0.32), 3.9, 0.64, boxstyle="round,pad=0.04",
                                fc=fill, ec="#333", lw=0.9, zorder=3))  # fmt: skip
    ax.text(x, y + 0.14, text, ha="center", va="center", fontsize=10, zorder=4)
    ax.text(x, y - 0.16, code, ha="center", va="center", fontsize=9, zorder=4,
            family="monospace", color="#333")  # fmt: skip


def _line(ax: Any, *points: tuple[float, float], color="black", lw=1.1, head=True) -> None:
    """A polyline through `points`, an arrowhead at its end."""
    xs, ys = zip(*points, strict=True)
    ax.plot(xs[: len(xs) - head], ys[: len(ys) - head], color=color, lw=lw, zorder=2)
    if head:
        ax.annotate("", points[-1], points[-2], zorder=2,
                    arrowprops={"arrowstyle": "-|>", "lw": lw, "color": color,
                                "shrinkA": 0, "shrinkB": 0, "mutation_scale": 10})  # fmt: skip


def _sublayer(ax: Any, x: float, base: float, text: str, code: str, side: int,
              inputs: tuple[float, ...] = (0,)) -> float:  # fmt: skip
    """From the main path at height `base`: a sub-layer (fed by arrows at offsets `inputs`),
    its Add & Norm, and around both on `side` (-1 left, 1 right) the residual connection.
    Returns the height of the Add & Norm's top."""
    y = base + 0.85
    _box(ax, x, y, text, code)
    for dx in inputs:
        _line(ax, (x, base), (x + dx, base), (x + dx, y - 0.36))
    _box(ax, x, y + 1.0, "Add & Norm", "SublayerConnection")
    _line(ax, (x, y + 0.36), (x, y + 0.64))
    _line(ax, (x, base), (x + 2.25 * side, base), (x + 2.25 * side, y + 1.0),
          (x + 1.99 * side, y + 1.0), color=RED, lw=1.6)  # fmt: skip
    return y + 1.36


def _embed(ax: Any, x: float, text: str, tokens: str, side: int) -> float:
    """Tokens -> embedding -> + positional encoding; returns the height of the sum's top."""
    import numpy as np
    from matplotlib.patches import Circle

    ax.text(x, 0.0, tokens, ha="center", va="center", fontsize=10)
    _box(ax, x, 1.05, text, "Embeddings")
    _line(ax, (x, 0.25), (x, 0.69))
    ax.add_patch(Circle((x, 1.95), 0.2, fc="white", ec="black", lw=1.1, zorder=3))
    ax.text(x, 1.95, "+", ha="center", va="center", fontsize=12, zorder=4)
    _line(ax, (x, 1.41), (x, 1.73))
    cx, wave = x + 0.85 * side, np.linspace(-0.22, 0.22, 40)  # a sinusoid in a circle
    ax.plot(cx + wave, 1.95 + 0.12 * np.sin(wave * 4.5 * np.pi), color="black", lw=1)
    ax.add_patch(Circle((cx, 1.95), 0.3, fc="none", ec="black", lw=1))
    _line(ax, (cx - 0.3 * side, 1.95), (x + 0.22 * side, 1.95))
    ax.text(cx + 0.42 * side, 1.95, "Positional Encoding\nPositionalEncoding", fontsize=9,
            ha="left" if side > 0 else "right", va="center")  # fmt: skip
    return 2.15


def _frame(ax: Any, x: float, bottom: float, top: float, label: str, side: int) -> None:
    """The grey frame of one layer, repeated N times."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((x - 2.5, bottom), 5.0, top - bottom, zorder=0,
                                boxstyle="round,pad=0.08", fc="#eee", ec="#999"))  # fmt: skip
    align = "right" if side < 0 else "left"
    ax.text(x + 2.75 * side, (bottom + top) / 2, "N×" if side < 0 else "×N", fontsize=12,
            ha=align, va="center")  # fmt: skip
    ax.text(x - 2.35 * side, top - 0.2, label, fontsize=9, style="italic", ha=align,
            va="center")  # fmt: skip


def draw_architecture() -> None:
    """Figure 1 of the paper, redrawn: each box names the class that implements it; the red
    arrows are the residual connections, around each sub-layer into its Add & Norm."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.8, 8.6))
    fig.subplots_adjust(0, 0, 1, 1)
    ax.set(xlim=(-1.0, 11.6), ylim=(-0.35, 13.2), aspect="equal")
    ax.axis("off")
    ex, dx = 2.6, 8.0  # the encoder's and the decoder's column
    # The encoder: self-attention, then feed-forward.
    _line(ax, (ex, _embed(ax, ex, "Input Embedding", "source tokens (B, S)", -1)), (ex, 2.8),
          head=False)  # fmt: skip
    top = _sublayer(ax, ex, 2.8, "Multi-Head Attention", "MultiHeadedAttention", -1,
                    (-0.9, 0, 0.9))  # fmt: skip
    _line(ax, (ex, top), (ex, top + 0.25), head=False)
    encoder_top = _sublayer(ax, ex, top + 0.25, "Feed Forward", "PositionwiseFeedForward", -1)
    _frame(ax, ex, 2.55, encoder_top + 0.5, "EncoderLayer", -1)
    # The decoder: masked self-attention, attention over the memory, then feed-forward.
    base = _embed(ax, dx, "Output Embedding", "target tokens, shifted right (B, T)", 1)
    _line(ax, (dx, base), (dx, 2.8), head=False)
    top = _sublayer(ax, dx, 2.8, "Masked Multi-Head Attention", "MultiHeadedAttention", 1,
                    (-0.9, 0, 0.9))  # fmt: skip
    _line(ax, (dx, top), (dx, top + 0.2), head=False)
    memory_in = top + 0.5  # where the memory enters the second attention
    top = _sublayer(ax, dx, top + 0.2, "Multi-Head Attention", "MultiHeadedAttention", 1)
    _line(ax, (dx, top), (dx, top + 0.25), head=False)
    top = _sublayer(ax, dx, top + 0.25, "Feed Forward", "PositionwiseFeedForward", 1)
    _frame(ax, dx, 2.55, top + 0.5, "DecoderLayer", 1)
    # The memory z, the encoder's output: the keys and values of each decoder layer's 2nd attention.
    _line(ax, (ex, encoder_top), (ex, 8.45), (5.3, 8.45), (5.3, memory_in),
          (dx - 0.55, memory_in), head=False)  # fmt: skip
    for x in (dx - 1.15, dx - 0.55):
        _line(ax, (x, memory_in), (x, memory_in + 0.24))
    ax.text(3.95, 8.55, "memory z\n(B, S, d_model)", fontsize=9, ha="center", va="bottom")
    # The generator on top.
    _line(ax, (dx, top), (dx, top + 0.56))
    _box(ax, dx, top + 0.9, "Linear", "Generator.proj")
    _line(ax, (dx, top + 1.22), (dx, top + 1.58))
    _box(ax, dx, top + 1.9, "Softmax", "Generator (log-softmax)")
    _line(ax, (dx, top + 2.22), (dx, top + 2.5))
    ax.text(dx, top + 2.7, "next-token log-probabilities\n(B, T, vocab)", fontsize=10,
            ha="center", va="bottom")  # fmt: skip
    plt.show()


def main_path_sizes(
    norm_first: bool, depth: int = 24, width: int = 64, seed: int = 0
) -> list[float]:
    """The RMS of the main path after each of `depth` residual blocks (`SublayerConnection`),
    their feed-forward sub-layers initialized as `make_model` does, at initialization."""
    import torch
    from torch import nn

    from annotated_transformer.model.layers import SublayerConnection, clones

    torch.manual_seed(seed)
    blocks = clones(SublayerConnection(width, dropout=0.0, norm_first=norm_first), depth)
    sublayers = [
        nn.Sequential(nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, width))
        for _ in range(depth)
    ]
    for sublayer in sublayers:
        for linear in (sublayer[0], sublayer[2]):
            nn.init.xavier_uniform_(linear.weight)
    x = torch.randn(8, 32, width)  # (B, positions, width), RMS 1
    sizes = []
    with torch.no_grad():
        for block, sublayer in zip(blocks, sublayers, strict=True):
            x = block(x, sublayer)
            sizes.append(x.pow(2).mean().sqrt().item())
    return sizes


def draw_main_path_sizes() -> tuple[list[float], list[float]]:
    """The size of the main path through a stack of 24 blocks, post-norm and pre-norm, drawn;
    returns the two lists of sizes (`main_path_sizes`)."""
    import matplotlib.pyplot as plt

    post_sizes = main_path_sizes(norm_first=False)
    pre_sizes = main_path_sizes(norm_first=True)
    _, ax = plt.subplots(figsize=(6.4, 3.3))
    layers = range(1, len(post_sizes) + 1)
    ax.plot(layers, post_sizes, "o-", ms=3, label="post-norm (paper, default)")
    ax.plot(layers, pre_sizes, "s-", ms=3, label="pre-norm (norm_first=True)")
    ax.set(xlabel="residual block", ylabel="RMS of the main path", ylim=(0, None))
    ax.set_title("Signal size through a stack of 24 blocks, at initialization", fontsize=10)
    ax.legend(fontsize=8)
    plt.show()
    return post_sizes, pre_sizes


def table1_chart(d: int = 512, k: int = 3, r: int = 16) -> Any:  # -> altair.LayerChart
    """Table 1's complexity column (`annotated_transformer.model.complexity.table1`) against the
    sequence length n, log-log, at width `d`, with a dashed rule at n = d; hover for values."""
    import altair as alt

    from annotated_transformer.model.complexity import table1

    grid = [2**e for e in range(2, 15)]
    records = [
        {"n": n, "layer": row.layer, "operations": row.complexity}
        for n in grid
        for row in table1(n, d, k=k, r=r)
    ]
    lines = (
        alt.Chart(alt.Data(values=records))
        .mark_line(point=True)
        .encode(
            x=alt.X("n:Q", scale=alt.Scale(type="log", base=2), title="sequence length n"),
            y=alt.Y("operations:Q", scale=alt.Scale(type="log"), title="operations per layer"),
            color=alt.Color("layer:N", title=None),
            tooltip=["layer:N", "n:Q", alt.Tooltip("operations:Q", format=".3s")],
        )
    )
    crossover = (
        alt.Chart(alt.Data(values=[{"n": d}]))
        .mark_rule(strokeDash=[4, 4], color="gray")
        .encode(x="n:Q")
    )
    return (lines + crossover).properties(
        width=560, height=320, title=f"Complexity per layer, d = {d} (Table 1, constants dropped)"
    )


RUN_FOLDER = """\
runs/NAME/
├── config.json         the settings (TrainConfig)
├── run.json            command, versions, device;
│                       a WMT run's data folder
├── src_vocab.json      the vocabularies
├── tgt_vocab.json      (bpe.json: shared pieces)
├── metrics.jsonl       a line per log window
│                       and per validation
├── checkpoint-STEP.pt  weights, optimizer,
│                       schedule, random states
└── train.lock          held by the job training
"""


def _stage(ax: Any, y: float, text: str, code: str, fill: str = "#d6e9f8") -> None:
    """One stage of a run's life at height y: what happens, and the function that does it."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((0.7, y - 0.34), 4.4, 0.68, boxstyle="round,pad=0.04",
                                fc=fill, ec="#333", lw=0.9, zorder=3))  # fmt: skip
    ax.text(2.9, y + 0.13, text, ha="center", va="center", fontsize=10, zorder=4)
    ax.text(2.9, y - 0.17, code, ha="center", va="center", fontsize=9, zorder=4,
            family="monospace", color="#333")  # fmt: skip


def _aside(ax: Any, y: float, text: str, color: str = RED) -> None:
    """An arrow from the loop's right side at height y to what happens there, named."""
    _line(ax, (5.1, y), (5.9, y), color=color, lw=1.4)
    ax.text(6.0, y, text, ha="left", va="center", fontsize=8.5, color=color)


def draw_run_life() -> None:
    """A training run's life, as the trainer of "Engineering a training run" lives it: start or
    resume, epochs of steps, validate and save every so many steps, and the three ways a run ends.
    The folder it leaves is `RUN_FOLDER`."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.6, 4.6))
    fig.subplots_adjust(0, 0, 1, 1)
    ax.set(xlim=(0, 11.0), ylim=(0.45, 6.75))
    ax.axis("off")
    stages = [
        (6.2, "start, or resume from the last checkpoint", "set_up"),
        (5.0, "an epoch: its batches, shuffled by seed", "run_epoch, epoch_batches"),
        (3.8, "a step: batch → loss → step → schedule", "take_step"),
        (2.6, "when due: validate, then save", "validate_run, save"),
        (1.4, "the last epoch done: the run ends", "finish"),
    ]
    for y, text, code in stages:
        _stage(ax, y, text, code, "#c8f0c8" if code == "finish" else "#d6e9f8")
    for (y, *_), (below, *_) in pairwise(stages):
        _line(ax, (2.9, y - 0.34), (2.9, below + 0.34))
    _line(ax, (0.7, 3.6), (0.45, 3.6), (0.45, 4.55), (0.7, 4.55), lw=1.0)  # step after step
    _line(ax, (0.7, 2.5), (0.2, 2.5), (0.2, 5.1), (0.7, 5.1), lw=1.0)  # the next epoch
    ax.text(0.85, 4.5, "next batch", fontsize=8, va="center")
    ax.text(0.3, 2.12, "next epoch", fontsize=8, va="top")
    _aside(ax, 4.02, "every log_every steps: a line in metrics.jsonl", "#2c6e9b")
    _aside(ax, 3.8, "Ctrl-C or SIGTERM (StopRequests): save, stop")
    _aside(ax, 3.58, "a loss not finite (Diverged): stop, nothing saved")
    _aside(ax, 2.6, "a weight not finite: stop, the last checkpoint kept")
    ax.text(6.0, 1.4, "one process, or one per GPU under\ntorchrun: the same life in each",
            ha="left", va="center", fontsize=9, style="italic")  # fmt: skip
    plt.show()
