"""How many sentences the fast path translates exactly as the simple decoders do in float64.

    python benchmarks/decoding_exactness.py --output results/decoding-exactness-cpu.json

The model that ships with the package translates every sentence of each split with
`translate_ids`, the path of `translate` and the `Translator` (batched, cached, float32, on
workers, with the compiled attention of `decoding.kernels` unless `--attention pytorch`), greedy
and with the paper's beam search (k = 4, α = 0.6, plain). The same weights in
float64 translate each sentence alone with Part II's `simple_greedy_decode` and
`simple_beam_search`, which re-run the whole decoder over every prefix, with the same length
limit per sentence (<s> + its length + 50). The record counts, per split and search, the
sentences whose tokens agree, and names the first few that differ; for one split (`--keep`,
test2016) it also keeps the float64 translations, as tokens.

A fused or reordered kernel may change the last bits of a float, and so, rarely, a token: a
faster path must keep at least this agreement less 0.5 % of the sentences:
`tests/test_exactness.py` checks that on test2016 against the kept translations. The float64
searches are slow (one sentence at a time, the whole prefix every step): `--limit` takes the
first N sentences of each split.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import torch
from common import attention_kernels, command, now, run_main, versions, write_report
from torch import Tensor, nn

from annotated_transformer.data.multi30k import SPLITS, read_split
from annotated_transformer.data.vocab import BOS_ID, EOS_ID, PAD_ID, Vocab
from annotated_transformer.decoding.batched import EXTRA_LENGTH, translate_ids
from annotated_transformer.decoding.simple import simple_beam_search, simple_greedy_decode
from annotated_transformer.exports.formats import PYTORCH, open_translator
from annotated_transformer.model.masks import padding_mask
from annotated_transformer.util.errors import InputError

SEARCHES = {"greedy": 1, "beam 4": 4}  # name -> beam size (plain beam search, α = 0.6)


def reference_tokens(
    model64: nn.Module, source: Tensor, tgt_vocab: Vocab, max_len: int, beam: int
) -> list[str]:
    """One sentence's translation by the simple decoder in float64: source (n,) ids."""
    src = source.unsqueeze(0)  # (1, n)
    mask = padding_mask(src, PAD_ID)  # (1, 1, n)
    limit = min(source.numel() + 1 + EXTRA_LENGTH, max_len)  # as translate_ids: <s> + n + 50
    if beam == 1:
        ids = simple_greedy_decode(model64, src, mask, limit, BOS_ID, EOS_ID)[0].tolist()
    else:
        ids = simple_beam_search(model64, src, mask, limit, BOS_ID, EOS_ID, beam_size=beam)[0][0]
    return tgt_vocab.decode(ids)


def agreement(fast: list[list[str]], reference: list[list[str]]) -> dict:
    """How many translations agree, as a count and a share, and the first ones that differ."""
    differ = [i for i, (a, b) in enumerate(zip(fast, reference, strict=True)) if a != b]
    return {
        "sentences": len(fast),
        "agree": len(fast) - len(differ),
        "share": round((len(fast) - len(differ)) / len(fast), 4),
        "first_differing": differ[:10],
    }


WORKER: dict = {}  # each pool process's model, opened once by `_open`


def _open(data_dir: str | None, kernels: bool) -> None:
    """A pool process's setup: one thread, the shipped model in float32 and a float64 copy, and
    the attention the fast path runs (the compiled kernels, with `kernels`)."""
    torch.set_num_threads(1)
    translator = open_translator(None, device="cpu", reads=PYTORCH)
    model64 = copy.deepcopy(translator.model).double().eval()
    attend, _ = attention_kernels(translator, kernels)
    WORKER.update(translator=translator, model64=model64, data_dir=data_dir, attend=attend)


def compare(split: str, name: str, limit: int | None, keep: bool) -> tuple[str, str, dict]:
    """One split and search, in a pool process: the fast path against the float64 reference;
    with `keep`, the reference's tokens of every sentence too (one string each)."""
    translator, start = WORKER["translator"], time.perf_counter()
    german = [g for g, _ in read_split(split, WORKER["data_dir"])[:limit]]
    sources, max_len, beam = (
        translator.encode(german),
        translator.config.model.max_len,
        SEARCHES[name],
    )
    fast = translate_ids(translator.model, sources, translator.tgt_vocab, max_len=max_len,
                         beam_size=beam, workers=1, attend=WORKER["attend"])  # fmt: skip
    reference = [reference_tokens(WORKER["model64"], s, translator.tgt_vocab, max_len, beam)
                 for s in sources]  # fmt: skip
    found = agreement(fast, reference)
    if keep:
        found["references"] = [" ".join(tokens) for tokens in reference]
    print(f"{split}, {name}: {found['agree']} of {len(sources)} agree "
          f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)  # fmt: skip
    return split, name, found


def bench_exactness(args: argparse.Namespace, argv: Sequence[str]) -> int:
    splits = args.splits.split(",")
    for split in splits:
        if split not in SPLITS:  # before any process starts
            raise InputError(f"unknown Multi30k split {split!r}: expected some of "
                             f"{', '.join(SPLITS)}")  # fmt: skip
    tasks = [(split, name) for split in splits for name in SEARCHES][::-1]  # beam first: longer
    use = args.attention == "kernels"  # (built here first, where they are not, then loaded by each)
    _, attention = attention_kernels(open_translator(None, device="cpu", reads=PYTORCH), use)
    with ProcessPoolExecutor(args.jobs, initializer=_open, initargs=(args.data_dir, use)) as pool:
        splits_, names = zip(*tasks, strict=True)
        limits, keep = [args.limit] * len(tasks), [split == args.keep for split in splits_]
        done = {(s, n): found
                for s, n, found in pool.map(compare, splits_, names, limits, keep)}  # fmt: skip
    results = {split: {name: done[split, name] for name in SEARCHES} for split in splits}
    report = {
        "benchmark": "decoding_exactness",
        "command": command("decoding_exactness.py", argv),
        "date": now(),
        "device": f"cpu ({args.jobs} processes of 1 thread)",
        "fast": "translate_ids: float32, batched, cached (as translate and the Translator)",
        "attention": attention,  # the fast path's: the compiled kernels, or PyTorch's
        "reference": "simple_greedy_decode / simple_beam_search in float64, one sentence at once",
        "limit": args.limit,
        "results": results,
        "versions": versions(),
    }
    write_report(report, args.output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="decoding_exactness.py", description=__doc__.splitlines()[0]
    )
    every = ",".join(s for s in SPLITS if s != "train")
    parser.add_argument("--splits", default=every, help="comma-separated Multi30k splits "
                        "(default: all but train)")  # fmt: skip
    parser.add_argument("--data-dir", help="folder holding the raw Multi30k files")
    parser.add_argument("--limit", type=int, help="only the first N sentences of each split")
    parser.add_argument("--keep", default="test2016", help="the split whose float64 "
                        "translations the record keeps, for tests/test_exactness.py "
                        "(default test2016)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2), 1 thread each")
    parser.add_argument("--attention", choices=["kernels", "pytorch"], default="kernels",
                        help="the fast path's attention: the compiled kernels of decoding.kernels "
                        "(the default; built first where they are not), or PyTorch's")  # fmt: skip
    parser.add_argument("--output", help="write the results as JSON here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_exactness, argv)


if __name__ == "__main__":
    raise SystemExit(main())
