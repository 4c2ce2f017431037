"""Benchmarks that print ratios measured side by side in one run (hand-written, not generated).

    python -m annotated_transformer.bench decoding --checkpoint runs/small/average.pt \\
        --split test2016 --output results/bench-decoding-cpu.json
    python -m annotated_transformer.bench train --preset small --code-2022 PATH \\
        --output results/bench-train-cpu.json

`decoding` translates one Multi30k split with one trained model in several ways, one after the
other in the same process, and reports sentences per second and the ratios between them:

- the 2022 Annotated Transformer's way: one sentence at a time, re-running the decoder over the
  whole prefix at every step (`decoding.simple_greedy_decode`; given an end symbol, so it stops at
  `</s>` where the 2022 code always ran to its maximum length: a generous baseline). It is slow, so
  it translates only the first `--baseline-limit` sentences; rates are per sentence;
- batched greedy decoding with the cache (`search.greedy_decode`), as `translate` runs it;
- cached against uncached at equal batches, with every output forced to 40 tokens;
- beam search with 4 beams (with and without the greedy lane), as `translate --beam 4` runs it;
- beam search with and without the cache (`WholePrefix`), at equal batches.

`train` trains several implementations of one configuration side by side on the same real
Multi30k batches and reports target tokens per second, the peak memory of one step, and model
FLOPs utilization (FLOPs counted by `torch.utils.flop_counter` ÷ a matrix-multiply rate the same
run measures):

- the book's reference code (`build_model`, `LabelSmoothing`, `make_optimizer`), then the fast
  paths of the chapter "Making it fast" added one at a time: fused attention (SDPA), fused QKV
  projections, the loss from logits, fused Adam ("ours": what `annotated-transformer train`
  runs), and optionally `torch.compile`;
- `torch.nn.Transformer` configured identically (same d_model, h, N, d_ff, dropout, layer-norm
  ε, vocabularies, embeddings, positional encoding, generator, loss and optimizer; its extra
  dropouts on attention weights and inside the feed-forward network set to 0, as ours has none,
  and no final layer norms, as post-norm stacks have none);
- the 2022 Annotated Transformer's model code, from a local copy of its
  `the_annotated_transformer.py` (`--code-2022`; not part of this package), with our loss and
  optimizer, and "as published" with its own dense label smoothing and plain Adam.

On CUDA every variant runs under bfloat16 autocast and the rate is that of bfloat16 products.

Machines are noisy: compare ratios within one run, not seconds across runs. Each round runs every
variant over the same batches, in a rotated order; ratios are medians of per-round ratios.
"""

from __future__ import annotations

import argparse
import ast
import copy
import hashlib
import json
import math
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

if TYPE_CHECKING:
    from annotated_transformer.data.batch import Batch
    from annotated_transformer.model.transformer import ModelConfig
    from annotated_transformer.training.presets import TrainConfig

FORCED_TOKENS = 40  # output length of the cached-vs-uncached comparison


def _timed(work: Callable[[], object], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    work()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def _padded(sources: Sequence[torch.Tensor], device: torch.device) -> torch.Tensor:
    from annotated_transformer.data.vocab import PAD_ID

    return nn.utils.rnn.pad_sequence(list(sources), batch_first=True, padding_value=PAD_ID).to(
        device
    )  # (B, S)


@dataclass(frozen=True)
class WholePrefix:
    """A decoder state without a cache: the memory and every token so far, re-read each step.

    It has `DecoderCache`'s `select` and `follow`, so `search.beam_search(..., start=
    WholePrefix.start, step=WholePrefix.step)` runs beam search the uncached way.
    Shapes: memory (rows, S, d_model), src_mask (rows, 1, S), tokens (rows, t).
    """

    memory: Tensor
    src_mask: Tensor
    tokens: Tensor

    @staticmethod
    def start(model: nn.Module, memory: Tensor, src_mask: Tensor) -> WholePrefix:
        return WholePrefix(memory, src_mask, memory.new_zeros(memory.size(0), 0, dtype=torch.long))

    @staticmethod
    def step(model: nn.Module, tokens: Tensor, state: WholePrefix) -> tuple[Tensor, WholePrefix]:
        """(rows,) new tokens -> log-probabilities (rows, V) of the next ones, and the state."""
        from annotated_transformer.model.masks import subsequent_mask

        prefix = torch.cat([state.tokens, tokens[:, None]], dim=1)  # (rows, t)
        mask = subsequent_mask(prefix.size(1), device=prefix.device)  # (1, t, t)
        out = model.decode(state.memory, state.src_mask, prefix, mask)  # (rows, t, d_model)
        return model.generator(out[:, -1]), WholePrefix(state.memory, state.src_mask, prefix)

    def select(self, rows: Tensor) -> WholePrefix:
        return WholePrefix(self.memory[rows], self.src_mask[rows], self.tokens[rows])

    follow = select


def _versions() -> dict[str, str]:
    from annotated_transformer import __version__

    return {
        "annotated_transformer": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _write_report(report: dict, output: str | None) -> None:
    """Write `report` as JSON to `output` (atomically), if given."""
    if output:
        from annotated_transformer.util.atomic import atomic_write

        with atomic_write(output, "w") as file:
            json.dump(report, file, indent=2)
            file.write("\n")
        print(f"wrote {output}")


def bench_decoding(args: argparse.Namespace) -> int:
    from annotated_transformer.data.multi30k import read_split
    from annotated_transformer.data.vocab import BOS_ID, EOS_ID, PAD_ID
    from annotated_transformer.decoding import search
    from annotated_transformer.decoding import simple as decoding
    from annotated_transformer.model.masks import padding_mask
    from annotated_transformer.training.run import describe_device
    from annotated_transformer.translator import EXTRA_LENGTH, Translator, translate_ids

    translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    model, device = translator.model, next(translator.model.parameters()).device
    pairs = [(s, t) for s, t in read_split(args.split, args.data_dir) if s.strip() and t.strip()]
    if args.limit:
        pairs = pairs[: args.limit]
    sources = translator.encode([s for s, _ in pairs])
    n = len(sources)
    max_len = translator.config.max_len
    results: dict[str, dict] = {}

    def record(name: str, seconds: float, sentences: int, note: str) -> None:
        results[name] = {
            "seconds": round(seconds, 3),
            "sentences": sentences,
            "sentences_per_second": round(sentences / seconds, 2),
            "what": note,
        }
        print(f"{name:<28} {sentences / seconds:9.1f} sentences/s  ({seconds:.2f} s)  {note}")

    baseline = sources[: args.baseline_limit]

    def one_at_a_time() -> None:
        for source in baseline:
            src = source.unsqueeze(0).to(device)  # (1, n)
            limit = min(len(source) + 1 + EXTRA_LENGTH, max_len)
            decoding.simple_greedy_decode(
                model, src, padding_mask(src, PAD_ID), limit, BOS_ID, EOS_ID
            )

    def batched(beam: int, keep_greedy: bool = True) -> Callable[[], object]:
        return lambda: translate_ids(
            model, sources, translator.tgt_vocab, max_len=max_len,
            max_tokens=translator.max_tokens, beam_size=beam, keep_greedy=keep_greedy,
        )  # fmt: skip

    print(f"{args.split}: {n} sentences, {translator.origin['path']}, {device}")
    with torch.inference_mode():
        batched(1)()  # warm up: first calls allocate
        note = f"one sentence at a time, whole prefix every step (first {len(baseline)})"
        record("greedy, 2022 way", _timed(one_at_a_time, device), len(baseline), note)
        record("greedy, cached, batched", _timed(batched(1), device), n,
               f"translate --beam 1 (max_tokens {translator.max_tokens})")  # fmt: skip
        record("beam 4, cached, batched", _timed(batched(4), device), n,
               "translate --beam 4 (alpha 0.6, greedy lane)")  # fmt: skip
        record("beam 4 plain", _timed(batched(4, False), device), n, "without the greedy lane")
        # Cached vs uncached at equal batches, every output forced to FORCED_TOKENS tokens.
        batch = args.batch
        groups = [sources[i : i + batch] for i in range(0, n, batch)]
        padded = [_padded(group, device) for group in groups]

        def forced(decode: Callable) -> Callable[[], object]:
            return lambda: [
                decode(model, src, padding_mask(src, PAD_ID), FORCED_TOKENS + 1, BOS_ID)
                for src in padded
            ]

        note = f"batches of {batch}, {FORCED_TOKENS} tokens each"
        record(
            "40 tokens, uncached", _timed(forced(decoding.simple_greedy_decode), device), n, note
        )
        record("40 tokens, cached", _timed(forced(search.greedy_decode), device), n, note)
        # Beam search with and without the cache, on the first --baseline-limit sentences.
        few = [_padded(sources[i : i + batch], device)
               for i in range(0, len(baseline), batch)]  # fmt: skip

        def beams(**how: Callable) -> Callable[[], object]:
            return lambda: [
                search.beam_search(model, src, padding_mask(src, PAD_ID),
                                   [min(int(n) + 1 + EXTRA_LENGTH, max_len) for n in
                                    (src != PAD_ID).sum(1)], BOS_ID, EOS_ID, 4, **how)
                for src in few
            ]  # fmt: skip

        note = f"batches of {batch}, first {len(baseline)} sentences"
        record("beam 4, uncached", _timed(beams(start=WholePrefix.start, step=WholePrefix.step),
                                          device), len(baseline), note)  # fmt: skip
        record("beam 4, cached (same)", _timed(beams(), device), len(baseline), note)
    speed = {name: r["sentences_per_second"] for name, r in results.items()}
    ratios = {
        "cached batched greedy / 2022 way": speed["greedy, cached, batched"]
        / speed["greedy, 2022 way"],
        "cached / uncached, 40 tokens, equal batch": speed["40 tokens, cached"]
        / speed["40 tokens, uncached"],
        "beam 4 time / greedy time": speed["greedy, cached, batched"]
        / speed["beam 4, cached, batched"],
        "plain beam 4 time / greedy time": speed["greedy, cached, batched"] / speed["beam 4 plain"],
        "cached / uncached, beam 4, equal batch": speed["beam 4, cached (same)"]
        / speed["beam 4, uncached"],
    }
    for name, value in ratios.items():
        print(f"{name:<44} {value:6.2f}x")
    report = {
        "benchmark": "decoding",
        "command": " ".join(["python -m annotated_transformer.bench", *sys.argv[1:]]),
        "checkpoint": translator.origin,
        "split": args.split,
        "sentences": n,
        "device": describe_device(device),
        "results": results,
        "ratios": {name: round(value, 2) for name, value in ratios.items()},
        "versions": _versions(),
        "date": _now(),
    }
    _write_report(report, args.output)
    return 0


# --- train ------------------------------------------------------------------------------------

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


def load_2022(path: str | Path) -> dict[str, Any]:
    """The model and loss definitions of the 2022 Annotated Transformer, read from `path`.

    Only the top-level classes and functions named in `NAMES_2022` are executed (the file's own
    imports need torchtext, which no longer loads), with torch, nn, math, copy and log_softmax
    in scope: run this only on a file you trust, as you would `python path`.
    """
    path = Path(path)
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


class TorchTransformer(nn.Module):
    """`torch.nn.Transformer` configured like `build_model(config)`, with our model's interface.

    Same embeddings (× √d_model), sinusoidal positions with dropout, post-norm layers with
    P_drop on each sub-layer's output, layer-norm ε 1e-6 and generator. `nn.Transformer` also
    drops out attention weights and the feed-forward activations with the same rate; both are
    set to 0 here, as our model (and the paper) has neither. Its stacks are built without the
    final layer norm that `nn.Transformer` adds by default, which post-norm stacks do not have.
    Its projections keep their biases (the paper's have none): a negligible cost.

    Shape: like `EncoderDecoder.forward`: src (B, S), tgt (B, T), src_mask (B, 1, S) and
    tgt_mask (B, T, T) bool, True = may attend -> (B, T, d_model).
    """

    def __init__(self, config: ModelConfig) -> None:
        from annotated_transformer.model.encoder_decoder import Generator
        from annotated_transformer.model.layers import LAYER_NORM_EPS
        from annotated_transformer.model.positional import PositionalEncoding

        super().__init__()
        d, h, d_ff, p = config.d_model, config.h, config.d_ff, config.dropout
        options = {"dropout": p, "batch_first": True, "layer_norm_eps": LAYER_NORM_EPS}
        encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, h, d_ff, **options), config.N, enable_nested_tensor=False
        )
        decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, h, d_ff, **options), config.N)
        for layer in [*encoder.layers, *decoder.layers]:
            layer.dropout = nn.Identity()  # the dropout between the two feed-forward linears
            for attention in (layer.self_attn, getattr(layer, "multihead_attn", None)):
                if attention is not None:
                    attention.dropout = 0.0  # dropout on attention weights
        self.transformer = nn.Transformer(
            d, h, custom_encoder=encoder, custom_decoder=decoder, batch_first=True
        )
        self.src_embed = nn.Embedding(config.src_vocab, d)
        self.tgt_embed = nn.Embedding(config.tgt_vocab, d)
        self.position = PositionalEncoding(d, p, config.max_len)
        self.generator = Generator(d, config.tgt_vocab)
        self.scale = math.sqrt(d)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        src_pad = ~src_mask[:, 0, :]  # (B, S), True = padding: nn.Transformer's convention
        tgt_pad = ~tgt_mask[:, -1, :]  # (B, T): the last row sees every real target token
        T = tgt.size(1)
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).triu(1)  # True = blocked
        return self.transformer(
            self.position(self.src_embed(src) * self.scale),
            self.position(self.tgt_embed(tgt) * self.scale),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )


class _Flattened(nn.Module):
    """The 2022 criterion as its `SimpleLossCompute` calls it: on (N, V) and (N,) views."""

    def __init__(self, criterion: nn.Module) -> None:
        super().__init__()
        self.criterion = criterion

    def forward(self, log_probs: Tensor, target: Tensor) -> Tensor:
        return self.criterion(log_probs.reshape(-1, log_probs.size(-1)), target.reshape(-1))


@dataclass
class Variant:
    """One implementation under test: a model, its loss and its optimizer."""

    name: str
    what: str
    model: nn.Module
    criterion: nn.Module
    optimizer: torch.optim.Optimizer
    seconds: list[float] = field(default_factory=list)  # per round


def matmul_rate(device: torch.device, dtype: torch.dtype, n: int, repeats: int = 5) -> float:
    """FLOP/s of the fastest of `repeats` (n × n) @ (n × n) products on `device` in `dtype`."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    a @ b  # warm up
    best = math.inf
    for _ in range(repeats):
        best = min(best, _timed(lambda: a @ b, device))
    return 2 * n**3 / best


def peak_step_memory(step: Callable[[], object], device: torch.device) -> int:
    """Bytes allocated by `step()` at its peak, above what was allocated when it started.

    On CUDA from the caching allocator's statistics; on a CPU from the allocation and free
    events that `torch.profiler` records (PyTorch keeps no CPU allocator statistics).
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    current = peak = 0
    for event in sorted(prof.events(), key=lambda event: event.time_range.start):
        current += event.self_cpu_memory_usage  # + at allocations, − at frees
        peak = max(peak, current)
    return peak


def count_flops(model: nn.Module, batch: Batch, criterion: nn.Module):  # -> FlopCounterMode
    """The FLOPs of one forward and backward pass (matrix products and attention), counted.

    Returns the `torch.utils.flop_counter.FlopCounterMode`: `.get_total_flops()` for the total,
    `.get_flop_counts()` per module and operator. The gradients are cleared again.
    """
    from torch.utils.flop_counter import FlopCounterMode

    from annotated_transformer.training.loop import batch_loss

    with FlopCounterMode(display=False) as counter:
        batch_loss(model, batch, criterion).backward()
    model.zero_grad(set_to_none=True)
    return counter


def _train_batches(config: TrainConfig, args: argparse.Namespace, device: torch.device):
    """Vocabulary sizes and the first `args.batches` training batches of the shuffled sampler."""
    from annotated_transformer.data.sampler import TokenBudgetBatchSampler
    from annotated_transformer.training.run import prepare_data

    data = prepare_data(config, args.data_dir)
    sampler = TokenBudgetBatchSampler(
        data.train.src_lengths, data.train.tgt_lengths, config.max_tokens, seed=config.seed
    )
    batches = [data.train.batch(indices).to(device) for indices in sampler.batches(0)]
    return len(data.src_vocab), len(data.tgt_vocab), batches[: args.batches]


def _variants(
    config: ModelConfig,
    args: argparse.Namespace,
    device: torch.device,
    old: dict[str, Any] | None,
    only: Sequence[str] | None = None,
) -> list[Variant]:
    """The implementations under test (those named in `only`), each with the same initial seed.

    `old` is the 2022 code from `load_2022`, or None to leave it out.
    """
    from annotated_transformer.data.vocab import PAD_ID
    from annotated_transformer.model.transformer import build_model
    from annotated_transformer.training.fused import LabelSmoothingFromLogits, accelerate
    from annotated_transformer.training.label_smoothing import LabelSmoothing
    from annotated_transformer.training.schedule import make_optimizer

    V, eps = config.tgt_vocab, args.label_smoothing

    def ours(sdpa: bool, fused_qkv: bool, logits: bool, fused_adam: bool, compile: bool = False):
        model = build_model(config)
        if sdpa:
            accelerate(model, fused_qkv=fused_qkv)
        loss = (LabelSmoothingFromLogits if logits else LabelSmoothing)(V, PAD_ID, eps)
        optimizer = make_optimizer(model.to(device).parameters(), fused=fused_adam)
        return torch.compile(model, dynamic=True) if compile else model, loss, optimizer

    def baseline(model: nn.Module, own_loss: bool = False):
        model.to(device)
        if own_loss:  # the 2022 LabelSmoothing and Adam, as published
            return (
                model,
                _Flattened(old["LabelSmoothing"](V, PAD_ID, eps)),
                make_optimizer(model.parameters()),
            )
        loss = LabelSmoothingFromLogits(V, PAD_ID, eps)
        return model, loss, make_optimizer(model.parameters(), fused=True)

    def model_2022() -> nn.Module:
        d = config
        return old["make_model"](d.src_vocab, V, d.N, d.d_model, d.d_ff, d.h, d.dropout)

    same = "same loss (from logits) and fused Adam as ours"
    specs = [
        (
            "reference",
            "the book's code: written-out attention, loss on log-softmax, Adam",
            lambda: ours(False, False, False, False),
        ),
        ("+ SDPA", "scaled_dot_product_attention", lambda: ours(True, False, False, False)),
        ("+ fused QKV", "one product for Q, K, V", lambda: ours(True, True, False, False)),
        ("+ loss from logits", "LabelSmoothingFromLogits", lambda: ours(True, True, True, False)),
        (
            "ours",
            "+ fused Adam: what annotated-transformer train runs",
            lambda: ours(True, True, True, True),
        ),
    ]
    if args.compile:
        specs.append(
            (
                "ours + torch.compile",
                "torch.compile(model, dynamic=True)",
                lambda: ours(True, True, True, True, compile=True),
            )
        )
    specs.append(("nn.Transformer", same, lambda: baseline(TorchTransformer(config))))
    if old is not None:
        specs.append(("2022 code", same, lambda: baseline(model_2022())))
        specs.append(
            (
                "2022 as published",
                "its dense label smoothing and plain Adam",
                lambda: baseline(model_2022(), own_loss=True),
            )
        )
    variants = []
    for name, what, build in specs:
        if only is None or name in only:
            torch.manual_seed(args.seed)
            variants.append(Variant(name, what, *build()))
    return variants


def _run_rounds(
    variants: list[Variant],
    batches: list,
    rounds: int,
    device: torch.device,
    autocast: torch.dtype | None,
) -> None:
    """Time one training step of every variant on each batch, in an order rotated per batch.

    Interleaving step by step spreads the machine's slow moments over all variants alike; each
    variant's time per round (its steps over all `batches`) is appended to `variant.seconds`.
    """
    from annotated_transformer.training.loop import train_step

    def step(variant: Variant, batch: Batch) -> None:
        train_step(variant.model, [batch], variant.criterion, variant.optimizer, autocast=autocast)

    for variant in variants:  # warm up: first calls allocate, compile, pick kernels
        variant.model.train()
        for batch in batches[:2]:
            step(variant, batch)
    k = len(variants)
    for r in range(rounds):
        seconds = [0.0] * k
        for i, batch in enumerate(batches):
            for j in [(r + i + n) % k for n in range(k)]:
                seconds[j] += _timed(lambda: step(variants[j], batch), device)  # noqa: B023
        for variant, total in zip(variants, seconds, strict=True):
            variant.seconds.append(total)


def _synthetic_batch(length: int, max_tokens: int, vocab: int, device: torch.device) -> Batch:
    """max_tokens // length sentence pairs of `length` tokens, random ids, no padding."""
    from annotated_transformer.data.batch import Batch
    from annotated_transformer.data.vocab import BOS_ID, EOS_ID, PAD_ID

    rows = max(1, max_tokens // length)
    generator = torch.Generator().manual_seed(length)
    src = torch.randint(EOS_ID + 2, vocab, (rows, length), generator=generator)
    tgt = torch.randint(EOS_ID + 2, vocab, (rows, length + 1), generator=generator)
    tgt[:, 0] = BOS_ID
    return Batch.from_tensors(src, tgt, PAD_ID).to(device)


def bench_train(args: argparse.Namespace) -> int:
    from annotated_transformer.training.loop import train_step
    from annotated_transformer.training.presets import preset
    from annotated_transformer.training.run import describe_device

    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    autocast = torch.bfloat16 if (args.bf16 or device.type == "cuda") else None
    changes = {"max_tokens": args.max_tokens} if args.max_tokens else {}
    # nn.Transformer and the 2022 code have an embedding per side: compare like with like.
    train_config = preset(args.preset, share_embeddings=False, **changes)
    too_long = [n for n in args.lengths if n > train_config.max_len]
    if too_long:
        raise ValueError(f"--lengths {too_long} exceed the preset's max_len={train_config.max_len}")
    old = load_2022(args.code_2022) if args.code_2022 else None  # fails before the slow part
    src_vocab, tgt_vocab, batches = _train_batches(train_config, args, device)
    config = train_config.model_config(src_vocab, tgt_vocab)
    variants = _variants(config, args, device, old)
    reference = variants[0]
    flops = sum(
        count_flops(reference.model, batch, reference.criterion).get_total_flops()
        for batch in batches
    )
    tokens = sum(batch.ntokens for batch in batches)
    dtype = autocast or torch.float32
    args.matmul_size = args.matmul_size or (8192 if device.type == "cuda" else 2048)
    rate = matmul_rate(device, dtype, args.matmul_size)
    print(
        f"{describe_device(device)}: {args.preset} (N={config.N}, d_model={config.d_model}, "
        f"h={config.h}, d_ff={config.d_ff}), {len(batches)} batches of <= "
        f"{train_config.max_tokens} tokens, {tokens:,} target tokens, "
        f"{flops / tokens / 1e6:.1f} MFLOP per target token"
    )
    print(
        f"{str(dtype).removeprefix('torch.')} matrix multiply ({args.matmul_size}^3): "
        f"{rate / 1e9:,.1f} GFLOP/s"
    )
    _run_rounds(variants, batches, args.rounds, device, autocast)
    largest = max(batches, key=lambda batch: batch.src.numel() + batch.tgt_in.numel())
    results = {}
    for variant in variants:
        peak_memory = peak_step_memory(
            lambda v=variant: train_step(
                v.model, [largest], v.criterion, v.optimizer, autocast=autocast
            ),
            device,
        )
        seconds = statistics.median(variant.seconds)
        results[variant.name] = {
            "tokens_per_second": round(tokens / seconds, 1),
            "tokens_per_second_per_round": [round(tokens / s, 1) for s in variant.seconds],
            "model_flops_utilization": round(flops / seconds / rate, 4),
            "peak_step_memory_mb": round(peak_memory / 2**20, 1),
            "what": variant.what,
        }
        r = results[variant.name]
        print(
            f"{variant.name:<22} {r['tokens_per_second']:10,.0f} tokens/s  "
            f"MFU {100 * r['model_flops_utilization']:5.1f}%  "
            f"peak {r['peak_step_memory_mb']:8,.1f} MB  {variant.what}"
        )

    def ratio(fast: str, slow: str) -> float:
        a, b = (next(v for v in variants if v.name == n).seconds for n in (fast, slow))
        return statistics.median([s / f for f, s in zip(a, b, strict=True)])

    names = [v.name for v in variants]
    steps = names[: names.index("ours") + 1]  # reference, then one fast path more each
    pairs = [(steps[i], steps[i - 1]) for i in range(1, len(steps))] + [("ours", "reference")]
    if "ours + torch.compile" in names:
        pairs.append(("ours + torch.compile", "ours"))
    pairs += [
        ("ours", name)
        for name in ("nn.Transformer", "2022 code", "2022 as published")
        if name in names
    ]
    ratios = {f"{a} / {b}": round(ratio(a, b), 3) for a, b in pairs}
    for name, value in ratios.items():
        print(f"{name:<44} {value:6.2f}x")
    lengths = _bench_lengths(args, config, train_config.max_tokens, device, autocast, rate, old)
    report = {
        "benchmark": "train",
        "command": " ".join(["python -m annotated_transformer.bench", *sys.argv[1:]]),
        "device": describe_device(device),
        "autocast": None if autocast is None else str(autocast).removeprefix("torch."),
        "config": {
            "preset": args.preset,
            "N": config.N,
            "d_model": config.d_model,
            "h": config.h,
            "d_ff": config.d_ff,
            "dropout": config.dropout,
            "src_vocab": src_vocab,
            "tgt_vocab": tgt_vocab,
            "max_tokens": train_config.max_tokens,
            "label_smoothing": args.label_smoothing,
            "batches": len(batches),
            "target_tokens": tokens,
            "rounds": args.rounds,
            "seed": args.seed,
        },
        "flops_per_target_token": round(flops / tokens),
        "matmul": {
            "n": args.matmul_size,
            "dtype": str(dtype).removeprefix("torch."),
            "flops_per_second": round(rate),
        },
        "results": results,
        "ratios": ratios,
        "lengths": lengths,
        "code_2022": None
        if old is None
        else {"file": Path(args.code_2022).name, "sha256": old["sha256"]},
        "versions": _versions(),
        "date": _now(),
    }
    _write_report(report, args.output)
    return 0


def _bench_lengths(
    args: argparse.Namespace,
    config: ModelConfig,
    max_tokens: int,
    device: torch.device,
    autocast: torch.dtype | None,
    rate: float,
    old: dict[str, Any] | None,
) -> list[dict]:
    """Tokens/s of reference, ours and nn.Transformer at each of `args.lengths`, equal budgets."""
    if not args.lengths:
        return []
    print(f"sequence lengths, {max_tokens} tokens per batch:")
    rows = []
    for length in args.lengths:
        batch = _synthetic_batch(length, max_tokens, config.tgt_vocab, device)
        variants = _variants(
            config, args, device, old, only=("reference", "ours", "nn.Transformer")
        )
        flops = count_flops(variants[0].model, batch, variants[0].criterion).get_total_flops()
        _run_rounds(variants, [batch] * 2, args.rounds, device, autocast)
        row = {"length": length, "sentences": batch.size, "target_tokens": batch.ntokens}
        for v in variants:
            seconds = statistics.median(v.seconds) / 2
            row[v.name] = {
                "tokens_per_second": round(batch.ntokens / seconds, 1),
                "model_flops_utilization": round(flops / seconds / rate, 4),
            }
        rows.append(row)
        print(
            f"  {length:>4} tokens: "
            + ", ".join(f"{v.name} {row[v.name]['tokens_per_second']:,.0f}/s" for v in variants)
        )
    return rows


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m annotated_transformer.bench", description=__doc__.split("\n\n")[0]
    )
    commands = parser.add_subparsers(dest="command", metavar="BENCHMARK", required=True)
    dec = commands.add_parser("decoding", help="greedy, cached, beam: sentences per second")
    dec.add_argument("--checkpoint", required=True, help="a checkpoint, or a run folder")
    dec.add_argument("--split", default="test2016")
    dec.add_argument("--data-dir", help="folder holding the raw Multi30k files")
    dec.add_argument("--limit", type=int, help="only the first N sentences")
    dec.add_argument("--batch", type=int, default=100, help="batch of the 40-token comparison")
    dec.add_argument(
        "--baseline-limit",
        type=int,
        default=200,
        help="sentences for the slow 2022 way (default 200; its rate is per sentence)",
    )
    dec.add_argument("--device", choices=["cpu", "cuda"])
    dec.add_argument("--output", help="write the results as JSON here")
    dec.set_defaults(run=bench_decoding)
    tr = commands.add_parser("train", help="training throughput against nn.Transformer and 2022")
    tr.add_argument("--preset", default="small", help="model size and token budget (default small)")
    tr.add_argument("--data-dir", help="folder holding the raw Multi30k files")
    tr.add_argument("--max-tokens", type=int, help="token budget per batch (default: the preset's)")
    tr.add_argument("--batches", type=int, default=8, help="batches per round (default 8)")
    tr.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    tr.add_argument(
        "--code-2022",
        metavar="PATH",
        help="a local copy of the 2022 Annotated Transformer's the_annotated_transformer.py",
    )
    tr.add_argument("--compile", action="store_true", help="also time torch.compile")
    tr.add_argument("--bf16", action="store_true", help="bfloat16 autocast (always on CUDA)")
    tr.add_argument(
        "--lengths",
        type=_int_list,
        default=[16, 32, 64, 128],
        help="lengths of the throughput sweep (default 16,32,64,128; '' for none)",
    )
    tr.add_argument(
        "--matmul-size",
        type=int,
        help="n of the n×n products that set the rate (default 2048; 8192 on CUDA)",
    )
    tr.add_argument("--label-smoothing", type=float, default=0.1)
    tr.add_argument("--seed", type=int, default=0)
    tr.add_argument("--device", choices=["cpu", "cuda"])
    tr.add_argument("--output", help="write the results as JSON here")
    tr.set_defaults(run=bench_train)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (OSError, ValueError) as error:
        print(f"annotated_transformer.bench: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
