"""CTranslate2 at its best on this machine: its documented throughput settings, swept.

`benchmarks/decoding.py` times CTranslate2 three ways: decoding as we do (our length limit and
penalty, one call per limit), "native" (one `translate_batch` call at its defaults, its own
limit and penalty), and "tuned": native at the settings that were fastest in a sweep that the
same run makes first. The settings swept are the ones CTranslate2's documentation names for
throughput on a CPU (docs "Performance tips"): the batch type and size (`batch_type="tokens"`
with `max_batch_size` in tokens, or sentences), and how the threads are shared between
independent translations and one translation (`inter_threads` x `intra_threads`, their product
the threads given). Each setting translates every sentence once, greedy and beam 4.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

# (inter_threads, batch_type, max_batch_size); max_batch_size 0: everything in one batch
SETTINGS = (
    (1, "examples", 0),
    (1, "examples", 64),
    (1, "tokens", 1024),
    (1, "tokens", 2048),
    (1, "tokens", 4096),
    (2, "examples", 64),
    (2, "tokens", 1024),
    (2, "tokens", 2048),
)
HOWS = ((1, "greedy"), (4, "beam 4"))


def describe(setting: tuple[int, str, int], threads: int) -> dict:
    inter, batch_type, size = setting
    return {"inter_threads": inter, "intra_threads": max(threads // inter, 1),
            "batch_type": batch_type, "max_batch_size": size}  # fmt: skip


class Native:
    """A CTranslate2 export called as its users call it, at one setting: all sentences in one
    `translate_batch`, its own length limit (max_len) and penalty (log P / |Y|^alpha)."""

    def __init__(self, folder: Path, translator, setting: tuple[int, str, int], threads: int,
                 device: str = "cpu") -> None:  # fmt: skip
        import ctranslate2

        from annotated_transformer.data.bpe import BPETokenizer
        from annotated_transformer.exports.ct2 import TOKENIZER

        self.bpe = BPETokenizer.load(folder / TOKENIZER)  # the export's tokenizer
        inter, self.batch_type, self.size = setting
        self.engine = ctranslate2.Translator(str(folder), device=device, inter_threads=inter,
                                             intra_threads=max(threads // inter, 1))  # fmt: skip
        self.limit = translator.config.model.max_len - 1  # tokens it may write, </s> included

    def __call__(self, german: list[str], beam: int) -> list[str]:
        # our pieces without `</s>`: CTranslate2 appends it (add_source_eos in config.json)
        found = self.engine.translate_batch(
            self.bpe.pipe(german), beam_size=beam, length_penalty=0.6,
            max_decoding_length=self.limit, batch_type=self.batch_type, max_batch_size=self.size,
        )  # fmt: skip
        return [self.bpe.detokenize(result.hypotheses[0]) for result in found]


def export(translator, quantization: str, scratch: Path) -> Path:
    """`translator`'s model exported to CTranslate2 in `quantization`, once per scratch folder."""
    from annotated_transformer.exports.ct2 import export_ct2

    folder = scratch / f"ct2-{quantization}"
    if not folder.exists():
        export_ct2(translator.model, translator.bpe, translator.config, folder,
                   quantization=quantization, origin=translator.origin)  # fmt: skip
    return folder


def sweep(translator, german: list[str], threads: int, scratch: Path) -> dict:
    """Every setting, float32 and int8, greedy and beam 4: sentences per second, and the best."""
    found: dict = {}
    for quantization in ("float32", "int8"):
        folder = export(translator, quantization, scratch)
        for setting in SETTINGS:
            native = Native(folder, translator, setting, threads)
            native(german[:20], 4)  # warm up
            for beam, how in HOWS:
                start = time.perf_counter()
                native(german, beam)
                rate = len(german) / (time.perf_counter() - start)
                row = {**describe(setting, threads), "sentences_per_second": round(rate, 1)}
                found.setdefault(quantization, {}).setdefault(how, []).append(row)
            del native
    for quantization, by_how in found.items():
        for how, rows in by_how.items():
            best = max(rows, key=lambda row: row["sentences_per_second"])
            print(f"CTranslate2 {quantization}, {how}: fastest with {best}")
    return found


def tuned(quantization: str, chosen: dict) -> Callable:
    """An engine maker (as `decoding.ENGINES` holds) for CTranslate2 at the sweep's best
    settings, per search: `chosen[quantization][how]` lists the sweep's rows."""

    def make(translator, scratch: Path, threads: int) -> Callable[[list[str], int], list[str]]:
        folder = export(translator, quantization, scratch)
        engines = {}
        for beam, how in HOWS:
            best = max(chosen[quantization][how], key=lambda row: row["sentences_per_second"])
            setting = (best["inter_threads"], best["batch_type"], best["max_batch_size"])
            engines[beam] = Native(folder, translator, setting, threads)
        return lambda german, beam: engines[beam](german, beam)

    return make
