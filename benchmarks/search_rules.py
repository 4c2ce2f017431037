"""Beam search's two stopping rules side by side: what each costs, and what each finds.

    python benchmarks/search_rules.py --split test2016 --rounds 3 \\
        --output results/search-rules/speed-cpu.json

The shipped model (or `--checkpoint`'s) translates every sentence of a Multi30k split with beam
search (k = 4, α = 0.6, as `translate --beam 4` runs it), once with the "k-finished" rule (the
default: fairseq, CTranslate2, the page) and once with "t2t" (tensor2tensor's bound), in
interleaved rounds in one process. Each rule's row gives its median seconds and sentences per
second, its BLEU, the decoder steps it ran (a step advances every row of a batch at once), and
the row-steps per sentence (rows advanced, over k beams and the sentences): what the bound costs.
The last row counts the sentences whose translations differ.

Machines are noisy: compare the ratios within one run, not seconds across runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence

import torch
from common import command, now, run_main, sentence_options, split_pairs, versions, write_report

import annotated_transformer.decoding.batched as batched
from annotated_transformer.decoding.cache import decode_step
from annotated_transformer.decoding.decoding_checks import SEARCHES
from annotated_transformer.decoding.search import beam_search
from annotated_transformer.evaluation.scores import bleu
from annotated_transformer.exports.formats import PYTORCH, open_translator
from annotated_transformer.training.measure import timed
from annotated_transformer.translator import Translator
from annotated_transformer.util.device import describe_device


class CountedSteps:
    """A decoder step (`translate_ids`'s, by default `decode_step`) that counts the decoder
    steps and the rows they advance."""

    def __init__(self, step: Callable = decode_step) -> None:
        self.steps = self.rows = 0
        self.step = step

    def __call__(self, model, tokens, cache):
        self.steps, self.rows = self.steps + 1, self.rows + tokens.numel()
        return self.step(model, tokens, cache)


def counted_translation(
    translator: Translator, german: list[str], rule: str, beam: int
) -> tuple[list[str], CountedSteps]:
    """`translator.translate` with the rule `rule`, its decoder steps counted."""
    counter = CountedSteps()

    def search(*args, step: Callable = decode_step, **options):  # translate_ids's, counted
        counter.step = step
        return beam_search(*args, **options, step=counter)

    original, batched.beam_search = batched.beam_search, search
    try:
        english = translator.translate(german, beam_size=beam, search=rule)
    finally:
        batched.beam_search = original
    return english, counter


def bench_search_rules(args: argparse.Namespace, argv: Sequence[str]) -> int:
    torch.set_num_threads(args.threads)
    translator = open_translator(args.checkpoint or None, device=args.device, reads=PYTORCH)
    pairs = split_pairs(args)
    german, references = [g for g, _ in pairs], [e for _, e in pairs]
    seconds: dict[str, list[float]] = {rule: [] for rule in SEARCHES}
    found: dict[str, tuple[list[str], CountedSteps]] = {}
    for round_ in range(args.rounds):
        for rule in SEARCHES if round_ % 2 == 0 else SEARCHES[::-1]:  # interleaved
            device = next(translator.model.parameters()).device
            took = timed(lambda rule=rule: found.update({rule: counted_translation(
                translator, german, rule, args.beam)}), device)  # fmt: skip
            seconds[rule].append(took)
            print(f"round {round_ + 1}, {rule}: {took:.2f} s", file=sys.stderr)
    rows = {}
    for rule in SEARCHES:
        english, counter = found[rule]
        median = statistics.median(seconds[rule])
        rows[rule] = {
            "seconds": round(median, 3),
            "seconds_per_round": [round(s, 3) for s in seconds[rule]],
            "sentences_per_second": round(len(german) / median, 1),
            "bleu": round(bleu(english, references).score, 2),
            "decoder_steps": counter.steps,
            "row_steps_per_sentence": round(counter.rows / args.beam / len(german), 2),
        }
    differ = sum(a != b for a, b in zip(found["k-finished"][0], found["t2t"][0], strict=True))
    report = {
        "benchmark": "search_rules",
        "command": command("search_rules.py", argv),
        "date": now(),
        "device": describe_device(next(translator.model.parameters()).device),
        "threads": args.threads,
        "split": args.split,
        "sentences": len(german),
        "beam_size": args.beam,
        "alpha": 0.6,
        "rounds": args.rounds,
        "rules": rows,
        "t2t_over_k_finished": {
            "seconds": round(rows["t2t"]["seconds"] / rows["k-finished"]["seconds"], 2),
            "decoder_steps": round(
                rows["t2t"]["decoder_steps"] / rows["k-finished"]["decoder_steps"], 2
            ),
            "row_steps_per_sentence": round(
                rows["t2t"]["row_steps_per_sentence"]
                / rows["k-finished"]["row_steps_per_sentence"],
                2,
            ),
        },
        "different_translations": differ,
        "versions": versions(),
    }
    for rule, row in rows.items():
        print(f"{rule:10} {row['seconds']:7.2f} s  {row['sentences_per_second']:6.1f} sent/s  "
              f"BLEU {row['bleu']:.2f}  {row['decoder_steps']} steps  "
              f"{row['row_steps_per_sentence']} row-steps a sentence")  # fmt: skip
    print(f"t2t / k-finished: {report['t2t_over_k_finished']}; {differ} translations differ")
    write_report(report, args.output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="search_rules.py", description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="a checkpoint or run folder (default: the shipped "
                        "model)")  # fmt: skip
    sentence_options(parser)
    parser.add_argument("--beam", type=int, default=4, help="beam size (default 4, §6.1)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--device", choices=["cpu", "cuda"])
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    parser.add_argument("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_search_rules, argv)


if __name__ == "__main__":
    sys.exit(main())
