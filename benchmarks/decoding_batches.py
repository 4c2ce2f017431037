"""How many source tokens a decoding batch should hold: `translate`'s batch sizes side by side.

    python benchmarks/decoding_batches.py --rounds 5 \\
        --output results/bench-decoding-batches-cpu.json

The model that ships with the package translates all of test2016 with `translate_ids` as
`translate` runs it (its workers, one per thread PyTorch may use), greedy and beam 4, with each
`max_tokens` of `--sizes` in turn: the source positions a batch may hold, a k-th of them for k
beams. Larger batches share each step's fixed cost (reading every weight, launching every
operation) among more rows; smaller ones keep each step's tensors smaller. The sizes take turns
in every round, their order turning from round to round; a size's speed against `--base` (the
default of `translate`) is the median, over the rounds, of their two times in the same round.
Each row also counts the translations that equal the base size's: batching changes which
sentences share a product, which may change the last bits of a float.
Machines are noisy: compare the sizes within one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence

import torch
from common import command, now, run_main, sentence_options, split_pairs, versions, write_report

from annotated_transformer.decoding.batched import translate_ids
from annotated_transformer.exports.formats import PYTORCH, open_translator
from annotated_transformer.translator import Translator
from annotated_transformer.util.device import describe_device

SEARCHES = {"greedy": 1, "beam 4": 4}


def sizes_of(text: str, base: int) -> list[int]:
    """`--sizes` as positive integers, the base size among them."""
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--sizes must be integers separated by commas, got {text!r}") from None
    if not sizes or min(sizes) < 1 or base not in sizes:
        raise ValueError(f"--sizes must be positive and hold --base ({base}), got {text!r}")
    return sizes


def bench_batches(args: argparse.Namespace, argv: Sequence[str]) -> int:
    sizes = sizes_of(args.sizes, args.base)
    translator = open_translator(None, device="cpu", reads=PYTORCH)
    german = [g for g, _ in split_pairs(args)]
    sources = translator.encode(german)
    seconds: dict[tuple[int, str], list[float]] = {}
    found: dict[tuple[int, str], list[list[str]]] = {}
    for beam in SEARCHES.values():  # an untimed warm-up: the allocator, the caches
        translate(translator, sources[:50], beam, max_tokens=args.base)
    for round_ in range(args.rounds):
        turn = round_ % len(sizes)
        for size in sizes[turn:] + sizes[:turn]:
            for how, beam in SEARCHES.items():
                start = time.perf_counter()
                found[size, how] = translate(translator, sources, beam, max_tokens=size)
                took = time.perf_counter() - start
                seconds.setdefault((size, how), []).append(took)
                print(f"round {round_ + 1}, {size}, {how}: {took:.2f} s", file=sys.stderr)
    results = {}
    for (size, how), times in seconds.items():
        paired = [b / s for b, s in zip(seconds[args.base, how], times, strict=True)]
        same = sum(a == b for a, b in zip(found[size, how], found[args.base, how], strict=True))
        results[f"{size}, {how}"] = {
            "max_tokens": size, "search": how, "seconds": round(statistics.median(times), 3),
            "every_seconds": [round(s, 3) for s in times],
            "sentences_per_second": round(len(german) / statistics.median(times), 1),
            f"speed / {args.base}": round(statistics.median(paired), 2),
            f"same_as_{args.base}": same,
        }  # fmt: skip
    report = {
        "benchmark": "decoding_batches", "command": command("decoding_batches.py", argv),
        "date": now(), "device": describe_device(torch.device("cpu")),
        "threads": torch.get_num_threads(), "split": args.split, "sentences": len(german),
        "rounds": args.rounds, "base": args.base, "results": results, "versions": versions(),
    }  # fmt: skip
    for name, row in results.items():
        print(f"{name:16} {row['seconds']:7.2f} s  x{row[f'speed / {args.base}']:.2f}  "
              f"{row[f'same_as_{args.base}']} the same")  # fmt: skip
    write_report(report, args.output)
    return 0


def translate(translator: Translator, sources: list, beam: int, max_tokens: int) -> list:
    """`translate_ids` as `translate` runs it, with batches of `max_tokens` source positions."""
    model, vocab, max_len = translator.model, translator.tgt_vocab, translator.config.model.max_len
    return translate_ids(model, sources, vocab, beam_size=beam, max_len=max_len,
                         max_tokens=max_tokens)  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="decoding_batches.py", description=__doc__.splitlines()[0]
    )
    sentence_options(parser)
    parser.add_argument("--sizes", default="2048,4096,8192,16384",
                        help="max_tokens to compare, separated by commas")  # fmt: skip
    parser.add_argument("--base", type=int, default=Translator.max_tokens,
                        help="the size compared with (default: translate's)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_batches, argv)


if __name__ == "__main__":
    raise SystemExit(main())
