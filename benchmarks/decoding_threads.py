"""Decoding on a busy machine: the ways to use a CPU's threads, side by side, idle and busy.

    python benchmarks/decoding_threads.py --busy 2 --rounds 5 \\
        --output results/bench-decoding-threads-cpu.json

Each way translates every sentence of test2016 with the model that ships with the package, greedy
and beam 4, text in and text out, in a process of its own (OpenMP reads `OMP_WAIT_POLICY` when
PyTorch starts its threads, so a way that sets it needs a fresh process):

- one search on 2 threads, OpenMP's default wait (waiting threads spin a while, then sleep);
- the same with `OMP_WAIT_POLICY=PASSIVE` (waiting threads sleep at once);
- one search on 1 thread;
- 2 workers, each its own batches on one thread (`translate_ids`'s default on 2 cores);
- 3 workers on the 2 threads' cores.

The ways run in interleaved rounds, first on the idle machine, then while `--busy N` other
processes each keep a core busy; every way reports its median and spread, and busy / idle. The
record keeps what the machine let this process use (cores, cgroup quota, load, niceness).
Timings move with the machine: compare the ways within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

from common import command, now, run_main, versions, write_report
from decoding import busy, machine

# name: (OMP_WAIT_POLICY or None, PyTorch threads, workers)
WAYS = {
    "one search, 2 threads": (None, 2, 1),
    "one search, 2 threads, passive wait": ("PASSIVE", 2, 1),
    "one search, 1 thread": (None, 1, 1),
    "2 workers of 1 thread": (None, 2, 2),
    "3 workers of 1 thread": (None, 2, 3),
}


def child(way: str, split: str, limit: int | None) -> None:
    """In the way's own process: load, warm up, then time greedy and beam 4 (printed as JSON)."""
    import torch

    from annotated_transformer.data.multi30k import read_split
    from annotated_transformer.exports.formats import PYTORCH, open_translator

    _, threads, workers = WAYS[way]
    torch.set_num_threads(threads)
    translator = open_translator(device="cpu", reads=PYTORCH)
    translator.workers = workers
    german = [de for de, en in read_split(split) if de.strip() and en.strip()][:limit]
    translator.translate(german[:20])  # warm up
    seconds = {}
    for beam, how in ((1, "greedy"), (4, "beam 4")):
        start = time.perf_counter()
        translator.translate(german, beam_size=beam)
        seconds[how] = time.perf_counter() - start
    print(json.dumps({"sentences": len(german), "seconds": seconds}))


def measure(way: str, args: argparse.Namespace) -> dict:
    wait = WAYS[way][0]
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if wait:
        env["OMP_WAIT_POLICY"] = wait
    argv = [sys.executable, __file__, "--child", way, "--split", args.split]
    argv += ["--limit", str(args.limit)] if args.limit else []
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def rounds(args: argparse.Namespace, label: str) -> dict[str, dict]:
    """Every way in `args.rounds` interleaved rounds: sentences per second, median and spread."""
    rates: dict[str, dict[str, list[float]]] = {way: {} for way in WAYS}
    for r in range(args.rounds):
        for way in WAYS:
            found = measure(way, args)
            for how, seconds in found["seconds"].items():
                rates[way].setdefault(how, []).append(found["sentences"] / seconds)
        print(f"{label}: round {r + 1} of {args.rounds} done", flush=True)
    return {
        way: {how: {"sentences_per_second": round(statistics.median(x), 1),
                    "spread": [round(min(x), 1), round(max(x), 1)]}
              for how, x in by_how.items()}
        for way, by_how in rates.items()
    }  # fmt: skip


def bench_threads(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if args.child:
        child(args.child, args.split, args.limit)
        return 0
    idle_machine = machine([])
    idle = rounds(args, "idle")
    with busy(args.busy) as niceness:
        busy_machine = machine(niceness)
        loaded = rounds(args, f"busy ({args.busy} spinning processes)")
        busy_machine["load_average_after"] = machine(niceness)["load_average"]
    results = {
        way: {how: {"idle": idle[way][how], "busy": loaded[way][how],
                    "busy / idle": round(loaded[way][how]["sentences_per_second"]
                                         / idle[way][how]["sentences_per_second"], 2)}
              for how in idle[way]}
        for way in WAYS
    }  # fmt: skip
    for way, by_how in results.items():
        for how, r in by_how.items():
            print(f"{way + ', ' + how:45} idle {r['idle']['sentences_per_second']:7.1f}  busy "
                  f"{r['busy']['sentences_per_second']:7.1f} sentences/s  busy/idle "
                  f"{r['busy / idle']:.2f}")  # fmt: skip
    report = {
        "benchmark": "decoding-threads", "command": command("decoding_threads.py", argv),
        "split": args.split, "limit": args.limit, "rounds": args.rounds, "busy": args.busy,
        "ways": {way: {"omp_wait_policy": w or "default", "torch_threads": t, "workers": n}
                 for way, (w, t, n) in WAYS.items()},
        "machine": {"idle": idle_machine, "busy": busy_machine},
        "results": results, "versions": versions(), "date": now(),
    }  # fmt: skip
    write_report(report, args.output)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="benchmarks/decoding_threads.py",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--split", default="test2016")
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--busy", type=int, default=2,
                        help="spinning processes while it measures busy (default 2)")  # fmt: skip
    parser.add_argument("--output", help="write the results as JSON here")
    parser.add_argument("--child", choices=list(WAYS), help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(build_parser(), bench_threads, argv)


if __name__ == "__main__":
    sys.exit(main())
