"""Decoding speed: one trained model translates one Multi30k split in several ways, side by side.

    python benchmarks/decoding.py --checkpoint runs/small/average.pt --split test2016 \\
        --output results/bench-decoding-cpu.json

The ways run one after the other in the same process (CTranslate2 in one of its own, started
once); it reports sentences per second and the ratios between them:

- the 2022 Annotated Transformer's way: one sentence at a time, re-running the decoder over the
  whole prefix at every step (`decoding.simple_greedy_decode`; given an end symbol, so it stops at
  `</s>` where the 2022 code always ran to its maximum length: a generous baseline). It is slow, so
  it translates only the first `--baseline-limit` sentences; rates are per sentence;
- batched greedy decoding with the cache (`search.greedy_decode`), as `translate` runs it;
- cached against uncached at equal batches, with every output forced to 40 tokens;
- beam search with 4 beams (with and without the greedy lane), as `translate --beam 4` runs it;
- beam search with and without the cache (`WholePrefix`), at equal batches;
- text in, text out, every sentence of the split, greedy and beam 4 (α 0.6): our `Translator`
  (its batches on single-threaded workers, and, as before them, one search on every thread),
  CTranslate2 (float32 and int8, converted by `export_ct2`; decoding as we do, and "native": one
  call, its own length limit and penalty, as its users run it; "tuned": native at the fastest
  of its documented throughput settings, swept first) and `transformers` (the
  `MarianMTModel` of `export_hf`), each with its BLEU, all on `--threads` threads, one engine
  alive at a time. The other engines need the `[serve]` extra; without it their rows are left out.

Our `Translator` runs the compiled attention of `decoding.kernels` (`--attention kernels`, the
default): the kernels are built first where they are not, and the record says so (`attention`:
where, the build's seconds, the load's milliseconds). `--attention pytorch` measures without them.

Machines are noisy: compare ratios within one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import gc
import importlib.util
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import ct2_sweep
import torch
from common import (
    attention_kernels,
    command,
    now,
    padded,
    run_main,
    sentence_options,
    split_pairs,
    versions,
    write_report,
)
from torch import Tensor, nn

from annotated_transformer.data.vocab import BOS_ID, EOS_ID, PAD_ID
from annotated_transformer.decoding import search
from annotated_transformer.decoding.batched import EXTRA_LENGTH, translate_ids
from annotated_transformer.decoding.simple import simple_greedy_decode
from annotated_transformer.evaluation.scores import bleu
from annotated_transformer.exports.formats import PYTORCH, open_translator
from annotated_transformer.model.masks import padding_mask, subsequent_mask
from annotated_transformer.training.measure import timed
from annotated_transformer.translator import Translator
from annotated_transformer.util.cores import cpu_quota
from annotated_transformer.util.device import describe_device

FORCED_TOKENS = 40  # output length of the cached-vs-uncached comparison


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
        prefix = torch.cat([state.tokens, tokens[:, None]], dim=1)  # (rows, t)
        mask = subsequent_mask(prefix.size(1), device=prefix.device)  # (1, t, t)
        out = model.decode(state.memory, state.src_mask, prefix, mask)  # (rows, t, d_model)
        return model.generator(out[:, -1]), WholePrefix(state.memory, state.src_mask, prefix)

    def select(self, rows: Tensor, width: int = 1) -> WholePrefix:  # (memory per row)
        return WholePrefix(self.memory[rows], self.src_mask[rows], self.tokens[rows])

    follow = select


class Timings:
    """Sentences per second of each way of decoding, printed as they are measured."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.results: dict[str, dict] = {}

    def time(self, name: str, work: Callable[[], object], sentences: int, note: str,
             references: list[str] | None = None) -> None:  # fmt: skip
        """Time `work`; given `references`, `work` returns translations, and their BLEU is kept.
        Timed again under the same name, a row keeps every time and reports their median."""
        out: list = []
        seconds = timed(lambda: out.append(work()), self.device)
        self.record(name, seconds, sentences, note, out[0] if references else None, references)

    def record(self, name: str, seconds: float, sentences: int, note: str,
               translations: list[str] | None = None,
               references: list[str] | None = None) -> None:  # fmt: skip
        """Add one time of row `name` (measured elsewhere), and the BLEU of its translations."""
        every = [*self.results.get(name, {}).get("every_seconds", []), round(seconds, 3)]
        median = statistics.median(every)
        self.results[name] = {
            "seconds": round(median, 3),
            "sentences": sentences,
            "sentences_per_second": round(sentences / median, 2),
            "what": note,
            "every_seconds": every,
            "spread": round((max(every) - min(every)) / median, 3),  # of the rounds, / median
        }
        score = ""
        if references is not None:
            found = bleu(translations, references)
            self.results[name]["bleu"] = round(found.score, 2)
            score = f"  BLEU {found.score:5.2f}"
        print(
            f"{name:<36} {sentences / seconds:9.1f} sentences/s  ({seconds:.2f} s){score}  {note}"
        )

    def speed(self, name: str) -> float:
        return self.results[name]["sentences_per_second"]


def _time_translate(timings: Timings, translator: Translator, sources: list, few: int) -> None:
    """The 2022 way on the first `few` sentences, then `translate`'s greedy and beam search."""
    model, device, max_len = translator.model, timings.device, translator.config.model.max_len

    def one_at_a_time() -> None:
        for source in sources[:few]:
            src = source.unsqueeze(0).to(device)  # (1, n)
            limit = min(len(source) + 1 + EXTRA_LENGTH, max_len)
            simple_greedy_decode(model, src, padding_mask(src, PAD_ID), limit, BOS_ID, EOS_ID)

    def batched(beam: int, keep_greedy: bool = True) -> Callable[[], object]:
        return lambda: translate_ids(
            model, sources, translator.tgt_vocab, max_len=max_len,
            max_tokens=translator.max_tokens, beam_size=beam, keep_greedy=keep_greedy,
        )  # fmt: skip

    n = len(sources)
    batched(1)()  # warm up: first calls allocate
    note = f"one sentence at a time, whole prefix every step (first {few})"
    timings.time("greedy, 2022 way", one_at_a_time, few, note)
    timings.time("greedy, cached, batched", batched(1), n,
                 f"translate --beam 1 (max_tokens {translator.max_tokens})")  # fmt: skip
    timings.time("beam 4, cached, batched", batched(4), n,
                 "translate --beam 4 --keep-greedy (alpha 0.6)")  # fmt: skip
    timings.time("beam 4 plain", batched(4, False), n, "translate --beam 4 (no greedy lane)")


def _time_streaming(timings: Timings, translator: Translator, german: list[str]) -> None:
    """`translate` (every sentence at once) against `translate_stream` (what the command line
    does: CHUNK_LINES sentences at a time), greedy, text in and text out, in turn."""
    from annotated_transformer.cli import CHUNK_LINES

    def streamed() -> list[str]:
        return list(translator.translate_stream(german, chunk=CHUNK_LINES, beam_size=1))

    whole = partial(translator.translate, german, beam_size=1)
    assert streamed() == whole()  # the same translations, in the same order
    timings.time("greedy text, whole", whole, len(german), "Translator.translate, beam 1")
    timings.time("greedy text, streamed", streamed, len(german),
                 f"translate_stream, chunks of {CHUNK_LINES} (the command line's)")  # fmt: skip


def _time_equal_batches(
    timings: Timings, model: nn.Module, sources: list, few: int, batch: int, max_len: int
) -> None:
    """Cached against uncached at equal batches: greedy, every output forced to FORCED_TOKENS
    tokens, on every sentence; beam search on the first `few` sentences."""
    device, n = timings.device, len(sources)
    every = [padded(sources[i : i + batch], device) for i in range(0, n, batch)]
    first = [padded(sources[i : min(i + batch, few)], device) for i in range(0, few, batch)]

    def forced(decode: Callable) -> Callable[[], object]:
        return lambda: [
            decode(model, src, padding_mask(src, PAD_ID), FORCED_TOKENS + 1, BOS_ID)
            for src in every
        ]

    def beams(**how: Callable) -> Callable[[], object]:
        return lambda: [
            search.beam_search(model, src, padding_mask(src, PAD_ID),
                               [min(int(n) + 1 + EXTRA_LENGTH, max_len) for n in
                                (src != PAD_ID).sum(1)], BOS_ID, EOS_ID, 4, **how)
            for src in first
        ]  # fmt: skip

    note = f"batches of {batch}, {FORCED_TOKENS} tokens each"
    timings.time("40 tokens, uncached", forced(simple_greedy_decode), n, note)
    timings.time("40 tokens, cached", forced(search.greedy_decode), n, note)
    note = f"batches of {batch}, first {few} sentences"
    uncached = beams(start=WholePrefix.start, step=WholePrefix.step)
    timings.time("beam 4, uncached", uncached, few, note)
    timings.time("beam 4, cached (same)", beams(), few, note)


Engine = Callable[[list[str], int], list[str]]  # (sentences, beam size) -> translations


def _ours(translator: Translator, folder: Path, threads: int) -> Engine:
    return lambda german, beam: translator.translate(german, beam_size=beam, alpha=0.6)


def _ours_one_search(translator: Translator, folder: Path, threads: int) -> Engine:
    """Ours as before the workers: one search at a time on all `threads` (`workers=1`)."""
    return _ours(dataclasses.replace(translator, workers=1), folder, threads)


def _ours_int8(translator: Translator, folder: Path, threads: int) -> Engine:
    """Ours with int8 linear layers (`Translator.quantized`: PyTorch's dynamic quantization)."""
    return _ours(translator.quantized("int8"), folder, threads)


def _ctranslate2(quantization: str) -> Callable[[Translator, Path, int], Engine]:
    def make(translator: Translator, folder: Path, threads: int) -> Engine:
        export = ct2_sweep.export(translator, quantization, folder)  # (one per run, shared)
        engine = open_translator(export, device=translator.device.type, workers=threads)
        return lambda german, beam: engine.translate(german, beam_size=beam, alpha=0.6)

    return make


def _ctranslate2_native(quantization: str) -> Callable[[Translator, Path, int], Engine]:
    """CTranslate2 as its users call it: every sentence in one `translate_batch`, its own length
    limit (max_len) and length penalty (log P / |Y|^α), at its defaults."""

    def make(translator: Translator, folder: Path, threads: int) -> Engine:
        export = ct2_sweep.export(translator, quantization, folder)
        return ct2_sweep.Native(export, translator, ct2_sweep.SETTINGS[0], threads,
                                device=translator.device.type)  # fmt: skip

    return make


def _transformers(translator: Translator, folder: Path, threads: int) -> Engine:
    """MarianMTModel.generate on the export of `export_hf`, 50 sentences a batch, by length."""
    from transformers import AutoTokenizer, MarianMTModel

    from annotated_transformer.exports.hf import export_hf, quiet

    device = next(translator.model.parameters()).device
    with quiet():
        if not (folder / "hf").exists():  # (once: the rounds reuse it)
            export_hf(translator.model, translator.bpe, folder / "hf", origin=translator.origin)
        tokenizer = AutoTokenizer.from_pretrained(folder / "hf")
        marian = MarianMTModel.from_pretrained(folder / "hf").eval().to(device)

    def translate(german: list[str], beam: int) -> list[str]:
        order = sorted(range(len(german)), key=lambda i: len(german[i]))
        out = [""] * len(german)
        for start in range(0, len(order), 50):
            indices = order[start : start + 50]
            batch = tokenizer([german[i] for i in indices], return_tensors="pt", padding=True)
            with torch.inference_mode():
                made = marian.generate(**batch.to(device), num_beams=beam, do_sample=False)
            for i, text in zip(indices, tokenizer.batch_decode(made, skip_special_tokens=True),
                               strict=True):  # fmt: skip
                out[i] = text
        return out

    return translate


OURS = "GNMT length penalty, alpha 0.6; length limit source + 50"
THEIRS = "its own length penalty, log P / length^0.6; its length limit"
TUNED = f"{THEIRS}; the fastest settings of this run's sweep"
# name, the package it needs (None: ours), how to make it, how it ranks and stops
ENGINES = (
    ("ours", None, _ours, OURS),
    ("ours, one search", None, _ours_one_search, OURS),
    ("ours int8", None, _ours_int8, OURS),
    ("CTranslate2 float32", "ctranslate2", _ctranslate2("float32"), OURS),
    ("CTranslate2 int8", "ctranslate2", _ctranslate2("int8"), OURS),
    ("CTranslate2 float32 native", "ctranslate2", _ctranslate2_native("float32"), THEIRS),
    ("CTranslate2 int8 native", "ctranslate2", _ctranslate2_native("int8"), THEIRS),
    (
        "transformers",
        "transformers",
        _transformers,
        "generate's length penalty (generation_config), log P / length^0.6; max_length",
    ),
)
# rows that only a CPU has: the workers are one search on a GPU, and PyTorch's dynamic int8 is
# the CPU's (CTranslate2's sweep, of CPU threads, runs on a CPU only too)
CPU_ONLY = ("ours, one search", "ours int8")


def engines_for(device: torch.device) -> list[tuple[str, str | None, str]]:
    """The engines to time on `device`, as (name, package, ranking): every engine of `ENGINES`
    whose package is installed (on a GPU, not the rows of `CPU_ONLY`)."""
    engines = []
    for name, package, _, ranking in ENGINES:
        if package and not importlib.util.find_spec(package):
            print(f"{name}: left out ({package} is not installed: the [serve] extra)")
        elif device.type == "cpu" or name not in CPU_ONLY:
            engines.append((name, package, ranking))
    return engines


def other_round(submit: Callable, job: dict, on_gpu: bool) -> tuple[dict | None, str | None]:
    """One round of CTranslate2's engine `job["name"]` in its own process (`submit`, a pool's):
    (its times, None); on a GPU, where its wheel cannot decode (it is built for CUDA 12, and
    a machine may hold only CUDA 13's libraries), (None, why, in one line). On a CPU a failure
    is raised: there CTranslate2 always runs."""
    try:
        return submit(_engine_round, job).result(), None
    except Exception as error:  # (raised in the other process: CTranslate2's own RuntimeError)
        if not on_gpu:
            raise
        first = (str(error).strip().splitlines() or [""])[0]
        return None, f"{type(error).__name__}: {first}"


@functools.cache
def _translator(checkpoint: str | None, device: str | None) -> Translator:
    """The model to translate with, loaded once per process."""
    return open_translator(checkpoint, device=device, reads=PYTORCH)


def _engine_round(job: dict, translator: Translator | None = None) -> dict:
    """One round of one engine, `job["name"]`: made, warmed up, then every sentence greedy and
    with 4 beams; returns (seconds, translations) of each. `job` holds what a fresh process
    needs (CTranslate2's run in one of their own: see `_time_engines`)."""
    torch.set_num_threads(job["threads"])
    translator = translator or _translator(job["checkpoint"], job["device"])
    if job["name"].endswith(" tuned"):  # "CTranslate2 float32 tuned": the sweep's fastest
        make = ct2_sweep.tuned(job["name"].split()[1], job["swept"])
    else:
        make = next(make for name, _, make, _ in ENGINES if name == job["name"])
    engine, german = make(translator, Path(job["scratch"]), job["threads"]), job["german"]
    engine(german[:20], 4)  # warm up
    found = {}
    for beam, how in ((1, "greedy"), (4, "beam 4")):
        start = time.perf_counter()
        translations = engine(german, beam)
        found[how] = (time.perf_counter() - start, translations)
    return found


def _sweep(job: dict) -> dict:
    """`ct2_sweep.sweep` for `_time_engines`, in CTranslate2's process."""
    translator = _translator(job["checkpoint"], job["device"])
    return ct2_sweep.sweep(translator, job["german"], job["threads"], Path(job["scratch"]))


def _time_engines(timings: Timings, translator: Translator, pairs: list, job: dict,
                  rounds: int, left_out: dict[str, str]) -> dict:  # fmt: skip
    """Text in, text out, every sentence: each engine alone in turn, greedy and beam 4, in
    `rounds` rounds (engine after engine, so that a slow minute of the machine is shared); every
    row reports its median. CTranslate2's settings are swept first (`ct2_sweep`), and its
    "tuned" rows use the fastest; returns the sweep.

    CTranslate2 runs in a process of its own, started once: in ours, the PyTorch decoding that
    came after it ran up to a third slower (its OpenMP runtime beside PyTorch's), which would
    have charged CTranslate2's cost to the rows of ours. `job` holds the checkpoint, device and
    threads for it. On a GPU, where CTranslate2 cannot decode, its rows are left out and
    `left_out` says why."""
    german, english = [de for de, _ in pairs], [en for _, en in pairs]
    on_gpu = timings.device.type != "cpu"
    engines, swept = engines_for(timings.device), {}
    spawn = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="bench-decoding-") as scratch, \
            ProcessPoolExecutor(1, mp_context=spawn) as other:  # fmt: skip
        job = {**job, "german": german, "scratch": scratch}
        if importlib.util.find_spec("ctranslate2") and not on_gpu:  # its best, then its rows
            swept = other.submit(_sweep, job).result()
            engines += [(f"CTranslate2 {q} tuned", "ctranslate2", TUNED)
                        for q in ("float32", "int8")]  # fmt: skip
        for _ in range(rounds):
            for name, package, ranking in engines:
                one = {**job, "name": name, "swept": swept}
                if package == "ctranslate2":
                    if "CTranslate2" in left_out:  # it failed once on this device: no retry
                        continue
                    found, why = other_round(other.submit, one, on_gpu)
                    if found is None:  # no CTranslate2 row on this device: the record says why
                        print(f"CTranslate2 on {timings.device}: left out ({why})")
                        left_out["CTranslate2"] = why
                        continue
                else:
                    found = _engine_round(one, translator)
                    gc.collect()  # its threads and memory gone before the next engine starts
                note = f"text in, text out, {job['threads']} threads, {ranking}, median of {rounds}"
                for how, (seconds, translations) in found.items():
                    timings.record(f"{name}, {how}", seconds, len(german), note, translations,
                                   english)  # fmt: skip
    return swept


def _ratios(timings: Timings) -> dict[str, float]:
    speed = timings.speed
    ratios = {
        "cached batched greedy / 2022 way": speed("greedy, cached, batched")
        / speed("greedy, 2022 way"),
        "cached / uncached, 40 tokens, equal batch": speed("40 tokens, cached")
        / speed("40 tokens, uncached"),
        "beam 4 time / greedy time": speed("greedy, cached, batched")
        / speed("beam 4, cached, batched"),
        "plain beam 4 time / greedy time": speed("greedy, cached, batched") / speed("beam 4 plain"),
        "cached / uncached, beam 4, equal batch": speed("beam 4, cached (same)")
        / speed("beam 4, uncached"),
        "streamed / whole, greedy": speed("greedy text, streamed") / speed("greedy text, whole"),
    }
    for how in ("greedy", "beam 4"):
        if f"ours, one search, {how}" in timings.results:
            ratios[f"ours / ours one search, {how}"] = speed(f"ours, {how}") / speed(
                f"ours, one search, {how}"
            )
        if f"ours int8, {how}" in timings.results:
            ratios[f"ours int8 / ours, {how}"] = speed(f"ours int8, {how}") / speed(f"ours, {how}")
    for other in ("CTranslate2 float32", "CTranslate2 int8", "CTranslate2 float32 native",
                  "CTranslate2 int8 native", "CTranslate2 float32 tuned", "CTranslate2 int8 tuned",
                  "transformers"):  # fmt: skip
        for how in ("greedy", "beam 4"):
            if f"{other}, {how}" in timings.results:
                ratios[f"ours / {other}, {how}"] = speed(f"ours, {how}") / speed(f"{other}, {how}")
    return ratios


@contextmanager
def busy(processes: int) -> Iterator[list[int]]:
    """`processes` other programs that keep a CPU core busy each, for the `with` block; it
    yields their niceness (0: as much right to the CPU as this process)."""
    spin = f"import os\nwhile os.getppid() == {os.getpid()}: pass"  # ends with this process
    loops = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(processes)]
    try:
        yield [os.getpriority(os.PRIO_PROCESS, loop.pid) for loop in loops]
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def machine(busy_niceness: list[int]) -> dict:
    """What the machine let this process use while it measured: the cores it may run on, the
    cgroup's quota, the load average (1, 5, 15 minutes) and the other processes' niceness."""
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {"cpu_count": os.cpu_count(), "cores_allowed": len(allowed) if allowed else None,
            "cpu_quota_cores": cpu_quota(), "busy_niceness": busy_niceness,
            "load_average": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg")
            else None}  # fmt: skip


def bench_decoding(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if args.busy and args.rounds < 5:
        raise ValueError(f"--busy {args.busy} needs at least 5 --rounds (interleaved, each "
                         f"row's spread kept), got {args.rounds}")  # fmt: skip
    before = machine([])
    with busy(args.busy) as niceness:
        return _bench_decoding(args, argv, {"before": before, "niceness": niceness})


def _bench_decoding(args: argparse.Namespace, argv: Sequence[str], state: dict) -> int:
    torch.set_num_threads(args.threads)
    if args.busy:
        print(f"{args.busy} other processes keep the CPU busy while it measures")
    translator = open_translator(args.checkpoint, device=args.device, reads=PYTORCH)
    model, device = translator.model, translator.device
    _, attention = attention_kernels(translator, args.attention == "kernels")  # (the Translators')
    print(f"attention: {attention}")
    pairs = split_pairs(args)
    sources = translator.encode([s for s, _ in pairs])
    few = len(sources[: args.baseline_limit])
    print(f"{args.split}: {len(sources)} sentences, {translator.origin['path']}, {device}")
    timings = Timings(device)
    with torch.inference_mode():
        for _ in range(args.rounds):  # interleaved: a slow minute of the machine is shared
            _time_translate(timings, translator, sources, few)
            max_len = translator.config.model.max_len
            _time_equal_batches(timings, model, sources, few, args.batch, max_len)
            _time_streaming(timings, translator, [s for s, _ in pairs])
    swept, left_out = {}, {}
    if args.engines and translator.bpe is None:
        print("engines: left out (a run with word vocabularies: the other engines read BPE)")
    elif args.engines:
        job = {"checkpoint": args.checkpoint, "device": args.device, "threads": args.threads}
        swept = _time_engines(timings, translator, pairs, job, args.rounds, left_out)
    ratios = _ratios(timings)
    for name, value in ratios.items():
        print(f"{name:<44} {value:6.2f}x")
    report = {
        "benchmark": "decoding",
        "command": command("decoding.py", argv),
        "checkpoint": translator.origin,
        "split": args.split,
        "sentences": len(sources),
        "device": describe_device(device),
        "busy": args.busy,
        "rounds": args.rounds,
        "attention": attention,  # what every Translator (ours) decoded with
        "machine": {"before": state["before"], "during": machine(state["niceness"])},
        "results": timings.results,
        "ctranslate2_sweep": swept,
        "left_out": left_out,  # engine -> why it has no rows on this device
        "ratios": {name: round(value, 2) for name, value in ratios.items()},
        "versions": versions(),
        "date": now(),
    }
    write_report(report, args.output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="benchmarks/decoding.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--checkpoint", help="a checkpoint, or a run folder (default: the model "
                        "that ships with the package)")  # fmt: skip
    sentence_options(parser)
    parser.add_argument("--batch", type=int, default=100, help="batch of the 40-token comparison")
    parser.add_argument(
        "--baseline-limit",
        type=int,
        default=200,
        help="sentences for the slow 2022 way (default 200; its rate is per sentence)",
    )
    parser.add_argument("--device", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="interleaved rounds of every row, each row's median and spread reported (default "
        "3; at least 5 with --busy)",
    )
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="measure while N other processes each keep a core busy")  # fmt: skip
    parser.add_argument(
        "--attention", choices=["kernels", "pytorch"], default="kernels",
        help="our Translator's attention: kernels, the compiled kernels of decoding.kernels "
        "(built first where they are not; the default, as translate runs once they are built), "
        "or pytorch, PyTorch's scaled_dot_product_attention",
    )  # fmt: skip
    parser.add_argument("--no-engines", dest="engines", action="store_false",
                        help="leave out the text-in, text-out rows of every engine")  # fmt: skip
    parser.add_argument("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_decoding, argv)


if __name__ == "__main__":
    sys.exit(main())
