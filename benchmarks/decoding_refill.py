"""Continuous batching for greedy decoding, in two forms, measured against `translate_ids`.

    python benchmarks/decoding_refill.py --rounds 7 --output results/bench-decoding-refill-cpu.json

Greedy decoding runs a batch until its last sentence ends, and its last steps feed a few rows.
The profile (`decoding_profile.py`) fits a step's seconds as `fixed + per_row × rows`, and its
`continuous_batching_bound` is what sharing out `fixed` could save at most. This benchmark builds
the two ways of sharing it and times them against the package's path (`translate_ids`, greedy,
the compiled attention of `decoding.kernels` where they build) on all of test2016, with 1 worker
on 1 thread and with 2 workers on 2, in `--rounds` interleaved rounds (the three take turns):

- "refilled": one batch of at most `--rows` rows per worker, refilled from a queue of the
  sentences (sorted by length, shared by the workers) whenever `--refill-at` or fewer rows are
  left. A new row starts at position 0 beside rows at later positions, so each row has its own
  position (its positional encoding) and its own first column in the self-attention cache, whose
  columns before it a mask hides; the columns that no row needs any more are dropped. Every row
  then reads as many cached keys as the oldest row has: the record counts them against the keys
  each row's own positions need (`keys_read / keys_needed`).
- "overlapped": the package's batches (`length_batches`, `pieces`), taken from a shared queue;
  when a worker's rows fall to `--next-at` or fewer, it starts its next batch beside them. Each
  step runs the linear layers' products on all the rows at once, and attention and the cache
  batch by batch, as the package computes them: no mask, no padding.

Each row gives the median seconds, the speed against the package's (median of the rounds' paired
ratios), the decoder steps and the seconds spent in them (summed over the workers, the median
round's; the package's step timed where `translate_ids` makes it), and the translations equal to
the package's. Beam search is not measured: its bound is half greedy decoding's (the profile's
record). Compare ratios within one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from common import (
    attention_kernels,
    command,
    now,
    run_main,
    sentence_options,
    split_pairs,
    versions,
    write_report,
)
from torch import Tensor, nn

import annotated_transformer.decoding.batched as batched
from annotated_transformer.data.vocab import BOS_ID, EOS_ID, PAD_ID
from annotated_transformer.decoding.batched import EXTRA_LENGTH, length_batches, translate_ids
from annotated_transformer.decoding.cache import (
    DecoderCache,
    PackedStep,
    encode_in_pieces,
    fused_attention,
    packed_step,
    start_cache,
)
from annotated_transformer.decoding.onednn import onednn_linears
from annotated_transformer.decoding.workers import pieces, run_searches
from annotated_transformer.exports.formats import PYTORCH, open_translator
from annotated_transformer.model.masks import padding_mask

KINDS = ("package", "refilled", "overlapped")


def label(kind: str, workers: int) -> str:
    """A row's name in the record: "overlapped, 1 worker", "package, 2 workers"."""
    return f"{kind}, {workers} worker{'s' if workers > 1 else ''}"


class Counts:
    """Decoder steps, their seconds and the keys they read, summed over a run's workers."""

    def __init__(self) -> None:
        self.lock, self.steps, self.seconds = threading.Lock(), 0, 0.0
        self.keys_read, self.keys_needed = 0, 0

    def add(self, seconds: float, read: int = 0, needed: int = 0) -> None:
        """One step more, which took `seconds` and read `read` keys where it needed `needed`."""
        with self.lock:  # (the workers' threads add at once)
            self.steps, self.seconds = self.steps + 1, self.seconds + seconds
            self.keys_read, self.keys_needed = self.keys_read + read, self.keys_needed + needed


@contextmanager
def counted(counts: Counts) -> Iterator[None]:
    """`translate_ids`'s steps counted and timed: the step that `batched.packed_step` makes for
    it, wrapped, until the block ends."""
    make = batched.packed_step

    def counted_step(*args: Any, **options: Any) -> Callable:
        step = make(*args, **options)

        def timed(model: nn.Module, tokens: Tensor, cache: DecoderCache) -> tuple:
            start = time.perf_counter()
            found = step(model, tokens, cache)
            counts.add(time.perf_counter() - start)
            return found

        return timed

    batched.packed_step = counted_step
    try:
        yield
    finally:
        batched.packed_step = make


def append(past: Tensor, new: Tensor, parents: Tensor | None) -> Tensor:
    """past (B₀, h, t, d) with new (B, h, 1, d) appended, row i continuing row parents[i]."""
    return torch.cat([past if parents is None else past.index_select(0, parents), new], dim=2)


def encoded(model: nn.Module, sources: list[Tensor], indices: list[int]) -> DecoderCache:
    """The cache of sentences `indices` before their first step (as `greedy_decode` starts)."""
    src = nn.utils.rnn.pad_sequence([sources[i] for i in indices], batch_first=True,
                                    padding_value=PAD_ID)  # (B, S)  # fmt: skip
    mask = padding_mask(src, PAD_ID)  # (B, 1, S)
    return start_cache(model, encode_in_pieces(model, src, mask), mask)


def limits_of(sources: list[Tensor], indices: list[int], max_len: int) -> Tensor:
    """Each sentence's output positions, <s> included (B,): as `translate_ids` gives them."""
    lengths = torch.tensor([len(sources[i]) for i in indices])
    return (lengths + 1 + EXTRA_LENGTH).clamp(max=max_len)


class Refilled:
    """One worker's rows for "refilled": each row at its own position. Self-attention keys and
    values (B, h, T, d) per layer, row r's first real column `first[r]`; the source side as
    `DecoderCache`'s (B, h, S, d), padded to the longest source among the rows."""

    def __init__(self, cache: DecoderCache, ids: list[int], limits: Tensor) -> None:
        B = len(ids)
        self.keys, self.values = list(cache.self_keys), list(cache.self_values)  # (B, h, 0, d)
        self.src_keys, self.src_values = list(cache.src_keys), list(cache.src_values)
        self.src_mask, self.parents = cache.src_mask, None  # (B, 1, 1, S); rows to gather
        self.first = torch.zeros(B, dtype=torch.long)  # (B,): each row's first column
        self.position = torch.zeros(B, dtype=torch.long)  # (B,): of the token fed next
        self.tokens = torch.full((B,), BOS_ID)  # (B,)
        self.limits, self.ids = limits, torch.tensor(ids)  # (B,) each

    def keep(self, rows: Tensor) -> None:
        """Keep rows (B',) in that order: the source side now, the self side at the next step."""
        self.src_keys = [x.index_select(0, rows) for x in self.src_keys]
        self.src_values = [x.index_select(0, rows) for x in self.src_values]
        self.src_mask = self.src_mask.index_select(0, rows)
        self.parents = rows if self.parents is None else self.parents[rows]
        for name in ("first", "position", "tokens", "limits", "ids"):
            setattr(self, name, getattr(self, name)[rows])

    def add(self, new: Refilled) -> None:
        """Put the rows of `new` (before their first step) after these, at column T."""
        S = max(self.src_mask.size(-1), new.src_mask.size(-1))

        def padded(x: Tensor, dim: int) -> Tensor:  # (..., S', ...) -> (..., S, ...), zeros
            pad = [0, 0] * (x.dim() - 1 - dim) + [0, S - x.size(dim)]
            return nn.functional.pad(x, pad)

        for side in ("src_keys", "src_values"):  # (B + n, h, S, d)
            mine, theirs = getattr(self, side), getattr(new, side)
            setattr(self, side, [torch.cat([padded(a, 2), padded(b, 2)])
                                 for a, b in zip(mine, theirs, strict=True)])  # fmt: skip
        self.src_mask = torch.cat([padded(self.src_mask, 3), padded(new.src_mask, 3)])
        T, n = self.keys[0].size(2), new.tokens.numel()
        for side in ("keys", "values"):  # (B + n, h, T, d): the new rows' columns all hidden
            setattr(self, side, [torch.cat([x if self.parents is None
                                            else x.index_select(0, self.parents),
                                            x.new_zeros(n, *x.shape[1:])])
                                 for x in getattr(self, side)])  # fmt: skip
        self.parents = None
        self.first = torch.cat([self.first, torch.full((n,), T)])
        for name in ("position", "tokens", "limits", "ids"):
            setattr(self, name, torch.cat([getattr(self, name), getattr(new, name)]))

    def drop_columns(self) -> None:
        """Drop the self-attention columns before every row's first."""
        cut = int(self.first.min()) if self.first.numel() else 0
        if cut:
            self.keys = [x[:, :, cut:] for x in self.keys]  # (B, h, T - cut, d)
            self.values = [x[:, :, cut:] for x in self.values]
            self.first = self.first - cut


def refilled_step(model: nn.Module, step: PackedStep, rows: Refilled) -> Tensor:
    """Feed each row's token at its own position; return each row's next token (B,)."""
    embed, position = model.tgt_embed
    B, T = rows.tokens.numel(), rows.keys[0].size(2) + 1  # T: the columns after this step's
    hidden = rows.first.unsqueeze(1) > torch.arange(T)  # (B, T): columns before a row's first
    mask = ~hidden.view(B, 1, 1, T) if bool(rows.first.any()) else None  # (B, 1, 1, T)
    x = embed(rows.tokens.unsqueeze(1))[:, 0] + position.pe[rows.position]  # (B, d_model)
    for i, layer in enumerate(model.decoder.layers):
        x = refilled_layer(layer, i, x, rows, step, mask)  # (B, d_model)
    rows.parents = None  # (every layer's keys and values gathered as they were appended)
    if model.decoder.norm is not None:
        x = model.decoder.norm(x)
    return model.generator.proj(x).max(dim=-1).indices  # (B,): logits' argmax


def refilled_layer(layer: nn.Module, i: int, x: Tensor, rows: Refilled, step: PackedStep,
                   mask: Tensor | None) -> Tensor:  # fmt: skip
    """Decoder layer i on rows at their own positions, x (B, d_model) -> (B, d_model); its
    self-attention keys and values appended to `rows`, `mask` (B, 1, 1, T) hiding the columns
    before each row's first (None: none to hide)."""
    own, src, B = layer.self_attn, layer.src_attn, x.size(0)

    def self_attention(x: Tensor) -> Tensor:  # (B, d_model)
        widths = [own.h * own.d_k, own.h * own.d_k, own.h * own.d_v]
        q, k, v = step.qkv[i](x).split(widths, dim=1)  # (B, h·d) each
        rows.keys[i] = append(rows.keys[i], k.view(B, own.h, 1, own.d_k), rows.parents)
        rows.values[i] = append(rows.values[i], v.view(B, own.h, 1, own.d_v), rows.parents)
        out, _ = step.attend(q.view(B, own.h, 1, own.d_k), rows.keys[i], rows.values[i], mask,
                             own.dropout)  # (B, h, 1, d_v)  # fmt: skip
        return own.w_o(out.reshape(B, own.h * own.d_v))  # (B, d_model)

    def source_attention(x: Tensor) -> Tensor:  # (B, d_model)
        q = src.w_q(x).view(B, 1, src.h, src.d_k).transpose(1, 2)  # (B, h, 1, d_k)
        out, _ = step.attend(q, rows.src_keys[i], rows.src_values[i], rows.src_mask,
                             src.dropout)  # (B, h, 1, d_v)  # fmt: skip
        return src.w_o(out.transpose(1, 2).reshape(B, src.h * src.d_v))  # (B, d_model)

    x = layer.sublayer[0](x, self_attention)
    x = layer.sublayer[1](x, source_attention)
    return layer.sublayer[2](x, layer.feed_forward)


def refilled_search(model: nn.Module, step: PackedStep, sources: list[Tensor],
                    take: Callable[[int], list[int]], args: argparse.Namespace,
                    counts: Counts) -> dict[int, list[int]]:  # fmt: skip
    """One worker's "refilled" greedy decoding: sentences from `take(n)` (at most n) until it
    gives none; each sentence's generated ids."""
    out: dict[int, list[int]] = {}
    rows: Refilled | None = None
    while True:
        live = 0 if rows is None else rows.tokens.numel()
        indices = take(args.rows - live) if live <= args.refill_at else []
        if indices:
            new = Refilled(encoded(model, sources, indices), indices,
                           limits_of(sources, indices, args.max_len))  # fmt: skip
            out.update((i, []) for i in indices)
            if rows is None or live == 0:
                rows = new
            else:
                rows.add(new)
        elif live == 0:
            return out
        T, start = rows.keys[0].size(2) + 1, time.perf_counter()
        tokens = refilled_step(model, step, rows)  # (B,)
        counts.add(time.perf_counter() - start, rows.tokens.numel() * T,
                   int((rows.position + 1).sum()))  # fmt: skip
        rows.tokens, rows.position = tokens, rows.position + 1
        for i, token in zip(rows.ids.tolist(), tokens.tolist(), strict=True):
            out[i].append(token)
        going = ((tokens != EOS_ID) & (rows.position + 1 < rows.limits)).nonzero().flatten()
        if going.numel() < tokens.numel():
            rows.keep(going)
        rows.drop_columns()


class Batch:
    """One of the package's batches in "overlapped": its cache, sentences, limits, tokens."""

    def __init__(self, model: nn.Module, sources: list[Tensor], indices: list[int],
                 max_len: int) -> None:  # fmt: skip
        self.cache = encoded(model, sources, indices)
        self.ids, self.limits = torch.tensor(indices), limits_of(sources, indices, max_len)
        self.tokens, self.t = torch.full((len(indices),), BOS_ID), 0  # (B,); position fed next


def overlapped_step(model: nn.Module, step: PackedStep, batches: list[Batch]) -> None:
    """One step of every batch: the products on all their rows at once (x holds their rows, one
    batch after another), attention and the cache batch by batch; each batch's `tokens` become
    its next tokens."""
    embed, position = model.tgt_embed
    x = torch.cat([position(embed(b.tokens.unsqueeze(1)), offset=b.t)[:, 0]
                   for b in batches])  # (ΣB, d_model)  # fmt: skip
    new: list[tuple[list[Tensor], list[Tensor]]] = [([], []) for _ in batches]
    for i, layer in enumerate(model.decoder.layers):
        x = overlapped_layer(layer, i, x, batches, new, step)  # (ΣB, d_model)
    if model.decoder.norm is not None:
        x = model.decoder.norm(x)
    tokens = model.generator.proj(x).max(dim=-1).indices  # (ΣB,): logits' argmax
    sizes = [b.tokens.numel() for b in batches]
    for batch, (keys, values), next_tokens in zip(batches, new, tokens.split(sizes), strict=True):
        old = batch.cache
        batch.cache = DecoderCache(tuple(keys), tuple(values), old.src_keys, old.src_values,
                                   old.src_mask)  # fmt: skip
        batch.tokens, batch.t = next_tokens, batch.t + 1


def overlapped_layer(
    layer: nn.Module,
    i: int,
    x: Tensor,
    batches: list[Batch],
    new: list[tuple[list[Tensor], list[Tensor]]],
    step: PackedStep,
) -> Tensor:
    """Decoder layer i on the rows of every batch, x (ΣB, d_model) -> (ΣB, d_model): each
    batch's self-attention keys and values, its position appended, added to its lists in
    `new`."""
    own, src, sizes = layer.self_attn, layer.src_attn, [b.tokens.numel() for b in batches]

    def self_attention(x: Tensor) -> Tensor:  # (ΣB, d_model)
        widths, outs = [own.h * own.d_k, own.h * own.d_k, own.h * own.d_v], []
        for rows, batch, (keys, values) in zip(step.qkv[i](x).split(sizes), batches, new,
                                               strict=True):  # fmt: skip
            B, (q, k, v), cache = rows.size(0), rows.split(widths, dim=1), batch.cache
            keys.append(append(cache.self_keys[i], k.view(B, own.h, 1, own.d_k),
                               cache.parents))  # (B, h, t+1, d_k)  # fmt: skip
            values.append(append(cache.self_values[i], v.view(B, own.h, 1, own.d_v),
                                 cache.parents))  # (B, h, t+1, d_v)  # fmt: skip
            out, _ = step.attend(q.view(B, own.h, 1, own.d_k), keys[-1], values[-1], None,
                                 own.dropout)  # (B, h, 1, d_v)  # fmt: skip
            outs.append(out.reshape(B, own.h * own.d_v))
        return own.w_o(torch.cat(outs))  # (ΣB, d_model)

    def source_attention(x: Tensor) -> Tensor:  # (ΣB, d_model)
        outs = []
        for rows, batch in zip(src.w_q(x).split(sizes), batches, strict=True):
            B, cache = rows.size(0), batch.cache
            q = rows.view(B, 1, src.h, src.d_k).transpose(1, 2)  # (B, h, 1, d_k)
            out, _ = step.attend(q, cache.src_keys[i], cache.src_values[i], cache.src_mask,
                                 src.dropout)  # (B, h, 1, d_v)  # fmt: skip
            outs.append(out.transpose(1, 2).reshape(B, src.h * src.d_v))
        return src.w_o(torch.cat(outs))  # (ΣB, d_model)

    x = layer.sublayer[0](x, self_attention)
    x = layer.sublayer[1](x, source_attention)
    return layer.sublayer[2](x, layer.feed_forward)


def overlapped_search(model: nn.Module, step: PackedStep, sources: list[Tensor],
                      take: Callable[[], list[int] | None], args: argparse.Namespace,
                      counts: Counts) -> dict[int, list[int]]:  # fmt: skip
    """One worker's "overlapped" greedy decoding: batches from `take()` until it gives None,
    the next one started when `--next-at` or fewer rows are left; each sentence's ids."""
    out: dict[int, list[int]] = {}
    batches: list[Batch] = []
    while True:
        live = sum(b.tokens.numel() for b in batches)
        indices = take() if live <= args.next_at else None
        if indices:
            batches.append(Batch(model, sources, indices, args.max_len))
            out.update((i, []) for i in indices)
            continue  # (and another, while the rows are still few)
        if live == 0:
            return out
        start = time.perf_counter()
        overlapped_step(model, step, batches)
        counts.add(time.perf_counter() - start)
        for batch in batches:
            for i, token in zip(batch.ids.tolist(), batch.tokens.tolist(), strict=True):
                out[i].append(token)
            going = ((batch.tokens != EOS_ID) & (batch.t + 1 < batch.limits)).nonzero().flatten()
            if going.numel() < batch.tokens.numel():
                batch.cache = batch.cache.select(going)
                batch.tokens, batch.ids = batch.tokens[going], batch.ids[going]
                batch.limits = batch.limits[going]
        batches = [b for b in batches if b.tokens.numel()]


def translate(kind: str, translator, sources: list[Tensor], workers: int, attend: Callable | None,
              args: argparse.Namespace, counts: Counts) -> list[list[str]]:  # fmt: skip
    """All `sources` translated greedily by `kind`, on `workers` workers of one thread each."""
    model, vocab = translator.model, translator.tgt_vocab
    if kind == "package":
        with counted(counts):
            return translate_ids(model, sources, vocab, max_len=args.max_len, beam_size=1,
                                 max_tokens=translator.max_tokens, workers=workers,
                                 attend=attend)  # fmt: skip
    model = onednn_linears(model.eval())  # (as translate_ids decodes)
    step = packed_step(model, log_probs=False, attend=attend or fused_attention)
    lengths = torch.tensor([len(s) for s in sources])
    batches = length_batches(lengths, translator.max_tokens)
    queue = [i for batch in batches for i in batch]  # shortest first
    jobs = pieces(batches, workers, lengths.tolist())  # the largest first
    lock, taken = threading.Lock(), [0]

    def take_sentences(n: int) -> list[int]:
        with lock:
            first, taken[0] = taken[0], min(taken[0] + n, len(queue))
            return queue[first : taken[0]]

    def take_batch() -> list[int] | None:
        with lock:
            taken[0] += 1
            return jobs[taken[0] - 1] if taken[0] <= len(jobs) else None

    def search(_: int) -> dict[int, list[int]]:
        if kind == "refilled":
            return refilled_search(model, step, sources, take_sentences, args, counts)
        return overlapped_search(model, step, sources, take_batch, args, counts)

    found: dict[int, list[int]] = {}
    for _, ids in run_searches(search, list(range(workers)), workers):
        found.update(ids)
    return [vocab.decode([BOS_ID, *found[i]]) for i in range(len(sources))]


def timed_rounds(translator, sources: list[Tensor], attend: Callable | None,
                 args: argparse.Namespace) -> tuple[dict, dict, dict]:  # fmt: skip
    """Each kind on 1 and 2 workers, in `args.rounds` rounds after a warm-up, the order turning:
    seconds and `Counts` (a list of the rounds' per (workers, kind)), the last translations."""
    seconds: dict[tuple[int, str], list[float]] = {}
    steps: dict[tuple[int, str], list[Counts]] = {}
    found: dict[tuple[int, str], list[list[str]]] = {}
    threads = torch.get_num_threads()
    try:
        for round_ in range(args.rounds + 1):  # round 0: an untimed warm-up
            for workers in (1, 2):
                torch.set_num_threads(workers)
                for kind in KINDS[round_ % 3 :] + KINDS[: round_ % 3]:  # the order turning
                    counts, start = Counts(), time.perf_counter()
                    found[workers, kind] = translate(kind, translator, sources, workers, attend,
                                                     args, counts)  # fmt: skip
                    took = time.perf_counter() - start
                    if round_:
                        seconds.setdefault((workers, kind), []).append(took)
                        steps.setdefault((workers, kind), []).append(counts)
                        print(f"round {round_}, {label(kind, workers)}: {took:.2f} s",
                              file=sys.stderr)  # fmt: skip
    finally:
        torch.set_num_threads(threads)  # (as the caller had it)
    return seconds, steps, found


def bench_refill(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if not 0 <= args.refill_at < args.rows or args.next_at < 0:
        got = f"--refill-at {args.refill_at}, --rows {args.rows}, --next-at {args.next_at}"
        raise ValueError(f"need 0 <= --refill-at < --rows and --next-at >= 0, got {got}")
    translator = open_translator(None, device="cpu", reads=PYTORCH)
    args.max_len = translator.config.model.max_len
    german = [g for g, _ in split_pairs(args)]
    sources = translator.encode(german)
    attend, attention = attention_kernels(translator)
    seconds, steps, found = timed_rounds(translator, sources, attend, args)
    results = {}
    for workers, kind in ((w, k) for w in (1, 2) for k in KINDS):  # (the package first)
        times, package = seconds[workers, kind], seconds[workers, "package"]
        counts = steps[workers, kind]
        step_seconds = [c.seconds for c in counts]
        same = sum(a == b for a, b in zip(found[workers, kind], found[workers, "package"],
                                          strict=True))  # fmt: skip
        results[label(kind, workers)] = {
            "seconds": round(statistics.median(times), 3),
            "every_seconds": [round(s, 3) for s in times],
            "speed / package": round(statistics.median(
                p / s for p, s in zip(package, times, strict=True)), 3),
            "steps": counts[-1].steps,
            "step_seconds": round(statistics.median(step_seconds), 3),
            "every_step_seconds": [round(s, 3) for s in step_seconds],
            "same_as_package": same,
            **({"keys_read / keys_needed": round(counts[-1].keys_read / counts[-1].keys_needed, 2)}
               if kind == "refilled" else {}),
        }  # fmt: skip
    report = {
        "benchmark": "decoding_refill", "command": command("decoding_refill.py", argv),
        "date": now(), "device": "cpu (1 worker of 1 thread; 2 workers of 1)", "split": args.split,
        "sentences": len(german), "rounds": args.rounds, "max_tokens": translator.max_tokens,
        "rows": args.rows, "refill_at": args.refill_at, "next_at": args.next_at,
        "attention": attention, "results": results, "versions": versions(),
    }  # fmt: skip
    for name, row in results.items():
        print(f"{name:24} {row['seconds']:6.2f} s  x{row['speed / package']:.2f}  "
              f"{row['same_as_package']} the same")  # fmt: skip
    write_report(report, args.output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sentence_options(parser)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--rows",
        type=int,
        default=333,
        help="refilled: rows a worker keeps "
        "(default 333, the package's batch of greedy decoding on test2016)",
    )
    parser.add_argument(
        "--refill-at",
        type=int,
        default=33,
        help="refilled: refill when this many rows or fewer are left (default 33)",
    )
    parser.add_argument(
        "--next-at",
        type=int,
        default=64,
        help="overlapped: start the next batch when this many rows or fewer are left (default 64)",
    )
    parser.add_argument("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_refill, argv)


if __name__ == "__main__":
    sys.exit(main())
