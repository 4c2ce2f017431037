"""Benchmarks that print ratios measured side by side in one run (hand-written, not generated).

    python -m annotated_transformer.bench decoding --checkpoint runs/small/average.pt \\
        --split test2016 --output results/bench-decoding-cpu.json

`decoding` translates one Multi30k split with one trained model in several ways, one after the
other in the same process, and reports sentences per second and the ratios between them:

- the 2022 Annotated Transformer's way: one sentence at a time, re-running the decoder over the
  whole prefix at every step (`decoding.greedy_decode`; given an end symbol, so it stops at `</s>`
  where the 2022 code always ran to its maximum length: a generous baseline). It is slow, so it
  translates only the first `--baseline-limit` sentences; rates are per sentence;
- batched greedy decoding with the cache (`search.greedy_decode`), as `translate` runs it;
- cached against uncached at equal batches, with every output forced to 40 tokens;
- beam search with 4 beams (with and without the greedy lane), as `translate --beam 4` runs it.

Machines are noisy: compare ratios within one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import torch
from torch import nn

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
    from annotated_transformer.vocab import PAD_ID

    return nn.utils.rnn.pad_sequence(list(sources), batch_first=True, padding_value=PAD_ID).to(
        device
    )  # (B, S)


def bench_decoding(args: argparse.Namespace) -> int:
    from annotated_transformer import __version__, decoding, search
    from annotated_transformer.masks import padding_mask
    from annotated_transformer.multi30k import read_split
    from annotated_transformer.trainer import describe_device
    from annotated_transformer.translate import EXTRA_LENGTH, Translator, translate_ids
    from annotated_transformer.vocab import BOS_ID, EOS_ID, PAD_ID

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
            decoding.greedy_decode(model, src, padding_mask(src, PAD_ID), limit, BOS_ID, EOS_ID)

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
        record("40 tokens, uncached", _timed(forced(decoding.greedy_decode), device), n, note)
        record("40 tokens, cached", _timed(forced(search.greedy_decode), device), n, note)
    speed = {name: r["sentences_per_second"] for name, r in results.items()}
    ratios = {
        "cached batched greedy / 2022 way": speed["greedy, cached, batched"]
        / speed["greedy, 2022 way"],
        "cached / uncached, 40 tokens, equal batch": speed["40 tokens, cached"]
        / speed["40 tokens, uncached"],
        "beam 4 time / greedy time": speed["greedy, cached, batched"]
        / speed["beam 4, cached, batched"],
        "plain beam 4 time / greedy time": speed["greedy, cached, batched"] / speed["beam 4 plain"],
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
        "versions": {
            "annotated_transformer": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
        },
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if args.output:
        from annotated_transformer.atomic import atomic_write

        with atomic_write(args.output, "w") as file:
            json.dump(report, file, indent=2)
            file.write("\n")
        print(f"wrote {args.output}")
    return 0


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
        "--baseline-limit", type=int, default=200,
        help="sentences for the slow 2022 way (default 200; its rate is per sentence)",
    )  # fmt: skip
    dec.add_argument("--device", choices=["cpu", "cuda"])
    dec.add_argument("--output", help="write the results as JSON here")
    dec.set_defaults(run=bench_decoding)
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
