"""Ways to make a decoder step faster, measured against the reference step in one run.

    python benchmarks/decoding_variants.py --rounds 3 \
        --output results/bench-decoding-variants-cpu.json

The model that ships with the package translates all of test2016 as one of `translate_ids`'s
workers does (one search at a time, one thread; `translate_ids` batches as `translate` does),
greedy and beam 4, with each variant of the decoder step in turn, after an untimed warm-up. The
machine's speed drifts by more than the variants differ, so they take turns often: each round
goes through the sentences in parts of `--part` (250), and every variant translates a part before
the next part begins, the variants' order turning from part to part. A variant's time in a round
is the sum over the parts; its speed against "reference" is the median over the rounds of the two
times of the same round:

- "reference": `decode_step`, whose attention is the reference `attention` of the chapter
  "Attention", and whose cache appends each position (`torch.cat`);
- "fused": `fused_step`, the same with `scaled_dot_product_attention` (issue 61, item 3);
- "packed": what `packed_step` makes, `fused_step`'s arithmetic with each self-attention's
  W^Q, W^K, W^V stacked into one product and every row a vector, returning logits to greedy
  decoding, its products through MKL as `nn.Linear` computes them;
- "oneDNN": the packed step on `onednn_linears(model)`, every linear layer's product through
  oneDNN: what `translate_ids` runs with PyTorch's attention;
- "kernels": the same with the compiled attention of `decoding.kernels` (built first where they
  are not; `kernels` in the record says where, and the build's seconds): what a `Translator` runs
  once they are built;
- "in place": the reference step on a cache allocated once per search, (L, R, h, d) per layer,
  each step writing its position at index t and attention reading the filled prefix; a beam's
  reordering gathers the filled positions into a second set of tensors, which then swap (item 1).

Each row gives the median and fastest seconds, the speed against "reference", and how many of
the 1,000 translations equal reference's. The last part compiles `fused_step` (`torch.compile`,
Inductor, one fixed shape: a batch of 500 rows after 30 positions; `--compile-rows 0` skips it)
and times it against the eager step at that shape, with the seconds the first call took to
compile (item 2). `whole_step` compiles the whole greedy step ahead of time instead
(`WholeStep`: `torch.export` for any rows, positions and source length, AOTInductor with the
weights frozen in, so that its products are oneDNN's and each residual sum and ReLU is computed
in the product before it) and times it against the package's step (`packed_step` on oneDNN's
products, with the compiled attention) at each of `--whole-step-rows` (16, 83, 256, 512) after 15
positions, in turns, with the seconds the compile took. Before it, `encoder`: the batches
`translate_ids` makes of the sentences (`max_tokens` 8,192 for greedy decoding, 2,048 for beam 4)
encoded whole (`model.encode`) and by `encode_in_pieces`, on the model with oneDNN's products, in
turns, five times: the fastest seconds of each, and how many batches' memories are the same bit
for bit. Last, `products`: each shape of the model's linear layers multiplied by `nn.Linear`
(MKL) and by `OneDNNLinear` (oneDNN) on 64 and 512 rows, in turns, in GFLOP/s.
Machines are noisy: compare the ratios within one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

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
from annotated_transformer.decoding import cache as cache_module
from annotated_transformer.decoding import kernels
from annotated_transformer.decoding.batched import length_batches, translate_ids
from annotated_transformer.decoding.cache import (
    DecoderCache,
    decode_step,
    encode_in_pieces,
    fused_step,
    start_cache,
)
from annotated_transformer.decoding.onednn import OneDNNLinear, onednn_linears
from annotated_transformer.decoding.search import beam_search, greedy_decode
from annotated_transformer.exports.formats import PYTORCH, open_translator
from annotated_transformer.model.masks import padding_mask
from annotated_transformer.util.device import describe_device

SEARCHES = {"greedy": 1, "beam 4": 4}
ROOM = 64  # positions a search's in-place cache starts with; it doubles when it needs more


@dataclass(frozen=True)
class InPlace:
    """A cache written in place: keys[i] (L, R, h, d_k) and values[i] (L, R, h, d_v) per layer,
    positions 0..length-1 of rows 0..B-1 filled; `spare` the same shapes, to gather into.
    The source side, `parents` and `width` are `DecoderCache`'s."""

    store: dict[str, list[Tensor]]  # "keys", "values", "spare_keys", "spare_values"
    src_keys: tuple[Tensor, ...]
    src_values: tuple[Tensor, ...]
    src_mask: Tensor
    length: int = 0
    parents: Tensor | None = None
    width: int = 1

    rows = DecoderCache.rows
    select = DecoderCache.select
    follow = DecoderCache.follow


def start_in_place(model: nn.Module, memory: Tensor, src_mask: Tensor) -> InPlace:
    """The in-place cache before the first step: the source side as `start_cache` computes it."""
    start = start_cache(model, memory, src_mask)
    B = memory.size(0)
    room = {name: [x.new_zeros(ROOM, B, x.size(1), x.size(3)) for x in like]  # (L, R, h, d)
            for name, like in (("keys", start.self_keys), ("values", start.self_values),
                               ("spare_keys", start.self_keys),
                               ("spare_values", start.self_values))}  # fmt: skip
    return InPlace(room, start.src_keys, start.src_values, start.src_mask)


def make_room(store: dict[str, list[Tensor]], rows: int, positions: int, filled: int) -> None:
    """Grow every tensor of `store` to hold `rows` rows and `positions` positions (the positions
    doubled), keeping the first `filled` positions."""
    L, R = store["keys"][0].shape[:2]
    if rows <= R and positions <= L:
        return
    L, R = 2 * positions if positions > L else L, max(rows, R)
    for tensors in store.values():
        for i, x in enumerate(tensors):
            grown = x.new_zeros(L, R, x.size(2), x.size(3))  # (L, R, h, d)
            grown[:filled, : x.size(1)] = x[:filled]
            tensors[i] = grown


def in_place_step(model: nn.Module, tokens: Tensor, cache: InPlace) -> tuple[Tensor, InPlace]:
    """`decode_step` on the in-place cache: the same log-probabilities (B, V), with the
    reference `attention`."""
    B, t, store = tokens.numel(), cache.length, cache.store
    make_room(store, B, t + 1, filled=t)
    if cache.parents is not None:  # gather the filled positions of each row's parent, then swap
        for kept, spare in (("keys", "spare_keys"), ("values", "spare_values")):
            for i, x in enumerate(store[kept]):
                torch.index_select(x[:t], 1, cache.parents, out=store[spare][i][:t, :B])
                store[kept][i], store[spare][i] = store[spare][i], x
    embed, position = model.tgt_embed
    x = position(embed(tokens.unsqueeze(1)), offset=t)  # (B, 1, d_model)
    for i, layer in enumerate(model.decoder.layers):
        x = layer_step(layer, x, cache, i, store["keys"][i], store["values"][i])
    if model.decoder.norm is not None:
        x = model.decoder.norm(x)
    return model.generator(x[:, 0]), replace(cache, length=t + 1, parents=None)


def layer_step(
    layer: nn.Module, x: Tensor, cache: InPlace, i: int, keys: Tensor, values: Tensor
) -> Tensor:
    """Decoder layer i at position t = cache.length, x (B, 1, d_model): its key and value
    written into keys (L, R, h, d_k) and values (L, R, h, d_v) at index t."""
    own, src, B, t, w = layer.self_attn, layer.src_attn, x.size(0), cache.length, cache.width

    def self_attention(x: Tensor) -> Tensor:  # (B, 1, d_model)
        q = own.w_q(x).view(B, 1, own.h, own.d_k).transpose(1, 2)  # (B, h, 1, d_k)
        keys[t, :B] = own.w_k(x).view(B, own.h, own.d_k)  # position t, in place
        values[t, :B] = own.w_v(x).view(B, own.h, own.d_v)
        past_k = keys[: t + 1, :B].permute(1, 2, 0, 3)  # (B, h, t+1, d_k), a view
        past_v = values[: t + 1, :B].permute(1, 2, 0, 3)  # (B, h, t+1, d_v)
        out, _ = cache_module.attention(q, past_k, past_v, None)  # (B, h, 1, d_v)
        return own.w_o(out.transpose(1, 2).reshape(B, 1, own.h * own.d_v))  # (B, 1, d_model)

    def source_attention(x: Tensor) -> Tensor:  # (B, 1, d_model)
        q = src.w_q(x).view(B // w, w, src.h, src.d_k).transpose(1, 2)  # (B/w, h, w, d_k)
        out, _ = cache_module.attention(q, cache.src_keys[i], cache.src_values[i],
                                        cache.src_mask)  # (B/w, h, w, d_v)  # fmt: skip
        return src.w_o(out.transpose(1, 2).reshape(B, 1, src.h * src.d_v))  # (B, 1, d_model)

    x = layer.sublayer[0](x, self_attention)
    x = layer.sublayer[1](x, source_attention)
    return layer.sublayer[2](x, layer.feed_forward)


@contextmanager
def running(start: Callable | None = None, step: Callable | None = None,
            onednn: bool = False, kernels: bool = False) -> Iterator[Callable | None]:  # fmt: skip
    """`translate_ids` with another cache (`start`) and step, or its own where None; its linear
    layers' products through MKL (`nn.Linear`'s) unless `onednn` (`onednn_linears`). Yields the
    attention to pass it (`attend`): the compiled kernels in KERNELS with `kernels`, else None
    (PyTorch's)."""

    def greedy(*args, **options):
        return greedy_decode(*args, **{**options, "start": start, "step": step})

    def beams(*args, **options):
        return beam_search(*args, **{**options, "start": start, "step": step})

    originals = (batched.greedy_decode, batched.beam_search, batched.onednn_linears)
    if step is not None:
        batched.greedy_decode, batched.beam_search = greedy, beams
    if not onednn:
        batched.onednn_linears = lambda model: model
    try:
        yield KERNELS.get("attend") if kernels else None
    finally:
        batched.greedy_decode, batched.beam_search, batched.onednn_linears = originals


KERNELS: dict[str, Callable | None] = {}  # "attend": the compiled kernels (bench_variants)


VARIANTS: dict[str, Callable[[], object]] = {
    "reference": lambda: running(start_cache, decode_step),
    "fused": lambda: running(start_cache, fused_step),
    "packed": lambda: running(),  # packed_step's, nn.Linear's products
    "oneDNN": lambda: running(onednn=True),  # what translate_ids runs with PyTorch's attention
    "kernels": lambda: running(onednn=True, kernels=True),  # ... with the compiled kernels
    "in place": lambda: running(start_in_place, in_place_step),
}


def compiled_step(translator, german: list[str], rows: int, positions: int) -> dict:
    """`fused_step` eager and compiled, at one shape: rows × positions, on real sentences."""
    model = translator.model
    sources = translator.encode((german * (rows // len(german) + 1))[:rows])
    src = nn.utils.rnn.pad_sequence(sources, batch_first=True)  # (rows, S)
    mask = (src != 0).unsqueeze(1)  # (rows, 1, S)
    with torch.inference_mode():
        cache = start_cache(model, model.encode(src, mask), mask)
        tokens = torch.full((rows,), 5)
        for _ in range(positions):
            _, cache = fused_step(model, tokens, cache)
        compiled = torch.compile(fused_step, dynamic=False)
        start = time.perf_counter()
        fast, _ = compiled(model, tokens, cache)
        compile_seconds = time.perf_counter() - start
        eager, _ = fused_step(model, tokens, cache)
        best = {"eager": float("inf"), "compiled": float("inf")}
        for _ in range(15):
            for name, step in (("eager", fused_step), ("compiled", compiled)):
                start = time.perf_counter()
                step(model, tokens, cache)
                best[name] = min(best[name], time.perf_counter() - start)
    return {"rows": rows, "positions": positions, "compile_seconds": round(compile_seconds, 1),
            "eager_ms": round(best["eager"] * 1e3, 2),
            "compiled_ms": round(best["compiled"] * 1e3, 2),
            "eager / compiled": round(best["eager"] / best["compiled"], 2),
            "max_abs_difference": float((fast - eager).abs().max()),
            "same_argmax_rows": int((fast.argmax(-1) == eager.argmax(-1)).sum())}  # fmt: skip


class WholeStep(nn.Module):
    """The step `translate_ids` runs for greedy decoding (`packed_step`'s, logits), with the
    arithmetic of the compiled attention, as a function of tensors alone: what `torch.export`
    traces. Inputs: tokens (B,), parents (B,), then per layer the self-attention's keys and
    values (B₀, h, t, d), the source side's (B, h, S, d), and src_mask (B, 1, 1, S); outputs:
    logits (B, V) and the keys and values with position t appended (B, h, t+1, d)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

        def attend(query, key, value, mask=None, dropout=None):  # (the kernels' arithmetic)
            return kernels.few_queries_attention(query, key, value, mask), None

        self.step = cache_module.packed_step(model, log_probs=False, attend=attend)

    def forward(self, tokens, parents, keys, values, src_keys, src_values, src_mask):
        cache = DecoderCache(tuple(keys), tuple(values), tuple(src_keys), tuple(src_values),
                             src_mask, parents=parents)  # fmt: skip
        scores, new = self.step(self.model, tokens, cache)
        return scores, *new.self_keys, *new.self_values


def compile_whole_step(model: nn.Module, folder: Path, max_len: int) -> Callable:
    """`WholeStep(model)` exported for any rows, positions (2 ≤ t < max_len: a size of 1 would
    be a case of its own) and source length, compiled by AOTInductor with `freezing` (the weights
    constants, the products oneDNN's, a residual's sum and the ReLU computed in the product
    before it) into `folder`, and loaded by PyTorch's loader."""
    from torch._inductor import aoti_compile_and_package, aoti_load_package

    N, (h, d_k, d_v) = len(model.decoder.layers), kernels.attention_shape(model)
    rows, past = torch.export.Dim("rows", max=1 << 16), torch.export.Dim("past", max=1 << 16)
    t, S = torch.export.Dim("t", min=2, max=max_len - 1), torch.export.Dim("S", max=max_len)

    def zeros(*shape: int) -> list[Tensor]:  # one tensor a layer (one tensor N times would be
        return [torch.zeros(*shape) for _ in range(N)]  # traced as one input, read N times)

    example = (torch.zeros(5, dtype=torch.long), torch.zeros(5, dtype=torch.long),
               zeros(6, h, 4, d_k), zeros(6, h, 4, d_v), zeros(5, h, 7, d_k), zeros(5, h, 7, d_v),
               torch.ones(5, 1, 1, 7, dtype=torch.bool))  # fmt: skip
    shapes = ({0: rows}, {0: rows}, [{0: past, 2: t}] * N, [{0: past, 2: t}] * N,
              [{0: rows, 2: S}] * N, [{0: rows, 2: S}] * N, {0: rows, 3: S})  # fmt: skip
    with torch.no_grad():
        program = torch.export.export(WholeStep(model), example, dynamic_shapes=shapes)
        path = aoti_compile_and_package(program, package_path=str(folder / "step.pt2"),
                                        inductor_configs={"freezing": True})  # fmt: skip
    return aoti_load_package(path)


def whole_step(translator, german: list[str], sizes: Sequence[int], positions: int = 15) -> dict:
    """The package's greedy step (oneDNN's products, the compiled attention where built) against
    `compile_whole_step`'s, at each number of rows after `positions` steps, on real sentences:
    the median of 30 calls of each, in turns."""
    model, attend = translator.model.eval(), KERNELS.get("attend") or cache_module.fused_attention
    fast, found = onednn_linears(model), {}
    eager = cache_module.packed_step(fast, log_probs=False, attend=attend)
    with tempfile.TemporaryDirectory() as scratch, torch.inference_mode():
        start = time.perf_counter()
        compiled = compile_whole_step(model, Path(scratch), translator.config.model.max_len)
        found["compile_seconds"] = round(time.perf_counter() - start, 1)

        def compiled_step(_, tokens: Tensor, cache: DecoderCache) -> tuple:
            parents = torch.arange(tokens.numel()) if cache.parents is None else cache.parents
            return compiled(tokens, parents, [*cache.self_keys], [*cache.self_values],
                            [*cache.src_keys], [*cache.src_values], cache.src_mask)  # fmt: skip

        for rows in sizes:
            some = (german * (rows // len(german) + 1))[:rows]  # (the split again, if short)
            src = nn.utils.rnn.pad_sequence(translator.encode(some), batch_first=True)  # (rows, S)
            mask = (src != 0).unsqueeze(1)  # (rows, 1, S)
            cache, tokens = start_cache(fast, fast.encode(src, mask), mask), torch.full((rows,), 5)
            for _ in range(positions):
                _, cache = eager(fast, tokens, cache)
            times: dict[str, list[float]] = {"eager": [], "compiled": []}
            for _ in range(30):
                for name, step in (("eager", eager), ("compiled", compiled_step)):
                    began = time.perf_counter()
                    out = step(fast, tokens, cache)
                    times[name].append(time.perf_counter() - began)
            ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
            scores = eager(fast, tokens, cache)[0]  # (rows, V): the package's logits
            same = int((out[0].argmax(-1) == scores.argmax(-1)).sum())
            found[str(rows)] = {"rows": rows, "positions": positions,
                                "eager_ms": round(ms["eager"], 2),
                                "compiled_ms": round(ms["compiled"], 2),
                                "eager / compiled": round(ms["eager"] / ms["compiled"], 2),
                                "max_abs_difference": float((out[0] - scores).abs().max()),
                                "same_argmax_rows": same}  # fmt: skip
    return found


def product_rates(model: nn.Module, rows: Sequence[int] = (64, 512)) -> list[dict]:
    """The shipped model's linear layers, one of each shape, multiplied by `nn.Linear` (MKL)
    and by `OneDNNLinear` (oneDNN) on `rows` rows, in turns: each one's GFLOP/s at its fastest
    of 20 calls, and how far the two results are apart."""
    shapes = {}
    for module in model.modules():
        if type(module) is nn.Linear:
            shapes.setdefault((module.in_features, module.out_features), module)
    found = []
    with torch.inference_mode():
        for (d_in, d_out), linear in shapes.items():
            fast = OneDNNLinear(linear.weight, linear.bias)
            for n in rows:
                x = torch.randn(n, d_in, generator=torch.Generator().manual_seed(n))  # (n, d_in)
                best = {"mkl": float("inf"), "onednn": float("inf")}
                for _ in range(20):
                    for name, layer in (("mkl", linear), ("onednn", fast)):
                        start = time.perf_counter()
                        layer(x)
                        best[name] = min(best[name], time.perf_counter() - start)
                flops, apart = 2 * n * d_in * d_out, (linear(x) - fast(x)).abs().max()
                found.append({"rows": n, "in": d_in, "out": d_out,
                              "mkl_gflops": round(flops / best["mkl"] / 1e9, 1),
                              "onednn_gflops": round(flops / best["onednn"] / 1e9, 1),
                              "onednn / mkl": round(best["mkl"] / best["onednn"], 2),
                              "max_abs_difference": float(apart)})  # fmt: skip
    return found


def encoder_pieces(model: nn.Module, sources: list, rounds: int = 5) -> dict:
    """The batches `translate_ids` makes (greedy's 8,192 source positions, beam 4's 2,048),
    encoded whole and in pieces by the model with oneDNN's products, in turns: the fastest of
    `rounds` seconds of each way over all batches; the batches whose memories are equal at the
    real positions, bit for bit, and the largest difference there; the padded and the real
    positions."""
    model = onednn_linears(model.eval())
    lengths = torch.tensor([len(s) for s in sources])
    found = {}
    for how, max_tokens in (("greedy", 8192), ("beam 4", 2048)):
        batches = length_batches(lengths, max_tokens)
        srcs = [
            nn.utils.rnn.pad_sequence([sources[i] for i in b], batch_first=True) for b in batches
        ]
        pairs = [(src, padding_mask(src, 0)) for src in srcs]  # (B, S), (B, 1, S)
        ways = {"whole": lambda m, s, k: m.encode(s, k), "in pieces": encode_in_pieces}
        best = dict.fromkeys(ways, float("inf"))
        with torch.inference_mode():
            for _ in range(rounds):
                for name, encode in ways.items():
                    start = time.perf_counter()
                    for src, mask in pairs:
                        encode(model, src, mask)
                    best[name] = min(best[name], time.perf_counter() - start)
            real = [mask[:, 0].unsqueeze(-1) for _, mask in pairs]  # (B, S, 1): real positions
            with_real = list(zip(pairs, real, strict=True))
            whole = [model.encode(*pair) * r for pair, r in with_real]
            pieces = [encode_in_pieces(model, *pair) * r for pair, r in with_real]
            same = sum(torch.equal(a, b) for a, b in zip(whole, pieces, strict=True))
            apart = max(float((a - b).abs().max()) for a, b in zip(whole, pieces, strict=True))
        found[how] = {"max_tokens": max_tokens, "batches": len(srcs), "same_memory": same,
                      "largest_difference": apart, "positions": sum(s.numel() for s in srcs),
                      "real_positions": int(sum(r.sum() for r in real)),
                      "whole_seconds": round(best["whole"], 3),
                      "in_pieces_seconds": round(best["in pieces"], 3),
                      "whole / in pieces": round(best["whole"] / best["in pieces"], 2)}  # fmt: skip
    return found


def translate_part(
    variant: str, translator, sources: list, beam: int, found: list[list[str]]
) -> float:
    """Translate one part of the sentences with one variant, as one worker; append the
    translations to `found` and return the seconds."""
    with VARIANTS[variant]() as attend:
        start = time.perf_counter()
        out = translate_ids(translator.model, sources, translator.tgt_vocab, beam_size=beam,
                            max_len=translator.config.model.max_len, workers=1,
                            attend=attend)  # fmt: skip
        took = time.perf_counter() - start
    found.extend(out)
    return took


def time_variants(
    translator, sources: list, args: argparse.Namespace
) -> tuple[dict[tuple[str, str], list[float]], dict[tuple[str, str], list[list[str]]]]:
    """Each variant's seconds per round and its last round's translations, for greedy decoding
    and beam search: the parts of the split in every variant, the order turning each part."""
    seconds: dict[tuple[str, str], list[float]] = {}
    found: dict[tuple[str, str], list[list[str]]] = {}
    for variant in VARIANTS:  # an untimed warm-up of each: the allocator, the caches
        with VARIANTS[variant]() as attend:
            for beam in SEARCHES.values():
                translate_ids(translator.model, sources[:50], translator.tgt_vocab, beam_size=beam,
                              max_len=translator.config.model.max_len, workers=1,
                              attend=attend)  # fmt: skip
    parts = range(0, len(sources), args.part)
    for round_ in range(args.rounds):
        for key in ((variant, how) for variant in VARIANTS for how in SEARCHES):
            seconds.setdefault(key, []).append(0.0)
            found[key] = []  # this round's translations, part after part
        for n, first in enumerate(parts):  # each part in every variant, the order turning
            turn = (round_ + n) % len(VARIANTS)
            for variant in [*VARIANTS][turn:] + [*VARIANTS][:turn]:
                for how, beam in SEARCHES.items():
                    seconds[variant, how][-1] += translate_part(
                        variant, translator, sources[first : first + args.part], beam,
                        found[variant, how],
                    )  # fmt: skip
        for key, times in seconds.items():
            print(f"round {round_ + 1}, {key[0]}, {key[1]}: {times[-1]:.2f} s", file=sys.stderr)
    return seconds, found


def summarize(seconds: dict, found: dict, sentences: int) -> dict:
    """Per variant and search: median seconds, speed against the reference paired by round, and
    how many translations are the reference's."""
    results = {}
    for (variant, how), times in seconds.items():
        median = statistics.median(times)
        paired = [b / s for b, s in zip(seconds["reference", how], times, strict=True)]
        same = sum(
            a == b for a, b in zip(found[variant, how], found["reference", how], strict=True)
        )
        results[f"{variant}, {how}"] = {
            "seconds": round(median, 3), "every_seconds": [round(s, 3) for s in times],
            "sentences_per_second": round(sentences / median, 1),
            "speed / reference": round(statistics.median(paired), 2),
            "fastest_seconds": round(min(times), 3), "same_as_reference": same,
        }  # fmt: skip
    return results


def print_summary(report: dict) -> None:
    for row in report["products"]:
        print(f"product {row['rows']} x {row['in']} -> {row['out']}: MKL {row['mkl_gflops']} "
              f"GFLOP/s, oneDNN {row['onednn_gflops']}")  # fmt: skip
    for name, row in report["results"].items():
        print(f"{name:20} {row['seconds']:7.2f} s  x{row['speed / reference']:.2f}  "
              f"{row['same_as_reference']} the same")  # fmt: skip
    print("compiled step:", report["compiled_step"] or "not measured (--compile-rows 0)")
    print("whole step, AOTInductor:", report["whole_step"] or "not measured (--whole-step-rows '')")
    for how, row in report["encoder"].items():
        print(f"encoder, {how}: whole / in pieces {row['whole / in pieces']}, "
              f"{row['same_memory']} of {row['batches']} batches the same memory, at most "
              f"{row['largest_difference']:.0e} apart")  # fmt: skip


def bench_variants(args: argparse.Namespace, argv: Sequence[str]) -> int:
    torch.set_num_threads(1)
    translator = open_translator(None, device="cpu", reads=PYTORCH)
    german = [g for g, _ in split_pairs(args)]
    sources = translator.encode(german)
    KERNELS["attend"], attention = attention_kernels(translator)
    seconds, found = time_variants(translator, sources, args)
    report = {
        "benchmark": "decoding_variants", "command": command("decoding_variants.py", argv),
        "date": now(), "device": describe_device(torch.device("cpu")),  # (1 thread)
        "split": args.split, "sentences": len(german), "rounds": args.rounds, "part": args.part,
        "results": summarize(seconds, found, len(german)), "kernels": attention,
        # (before compiling: Inductor's run leaves the allocator holding large blocks, which
        # spares the whole batch's large tensors the fresh memory that a translation's meets)
        "encoder": encoder_pieces(translator.model, sources),
        "compiled_step": compiled_step(translator, german, args.compile_rows, positions=30)
        if args.compile_rows else None,
        "whole_step": whole_step(translator, german, args.whole_step_rows)
        if args.whole_step_rows else None,
        "products": product_rates(translator.model), "versions": versions(),
    }  # fmt: skip
    print_summary(report)
    write_report(report, args.output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="decoding_variants.py", description=__doc__.splitlines()[0]
    )
    sentence_options(parser)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--part", type=int, default=250, help="sentences a variant translates "
                        "before the next takes the same ones (default 250)")  # fmt: skip
    parser.add_argument("--compile-rows", type=int, default=500, help="rows of the compiled "
                        "step's batch (default 500; 0: do not compile)")  # fmt: skip
    parser.add_argument("--whole-step-rows", type=row_counts, default=(16, 83, 256, 512),
                        help="rows at which to time the whole step compiled ahead of time "
                        "against the package's (default 16,83,256,512; '': none)")  # fmt: skip
    parser.add_argument("--output", help="write the results as JSON here")
    return parser


def row_counts(text: str) -> tuple[int, ...]:
    """'16,83' -> (16, 83); '' -> ()."""
    return tuple(int(n) for n in text.split(",") if n.strip())


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_variants, argv)


if __name__ == "__main__":
    raise SystemExit(main())
