#!/usr/bin/env python3
"""Compare the release records with the shipped model re-evaluated on normalized input (issue 32).

    annotated-transformer evaluate --split all --beam 4 --data-dir DATA --results NEW
    annotated-transformer evaluate --split all --beam 1 --data-dir DATA --results NEW
    annotated-transformer evaluate --split all --beam 4 --keep-greedy --data-dir DATA --results NEW
    python tools/normalized_rescoring.py NEW --data-dir DATA

writes results/release/normalized-rescoring.json: for each record of NEW, the release record's
BLEU, chrF and lowercased BLEU (old) beside NEW's (new), how many source sentences
normalization changes, and how many translations differ.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path

from annotated_transformer.data.multi30k import read_split
from annotated_transformer.data.vocab import normalize
from annotated_transformer.util.atomic import atomic_write

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "results" / "release"
SCORES = ("sacrebleu", "chrf", "bleu_lowercase")


def compare(new: Path, data_dir: str | None) -> dict:
    records = {}
    for path in sorted(new.glob("*-shipped-*.json")):
        old_record = json.loads((RELEASE / path.name).read_text(encoding="utf-8"))
        new_record = json.loads(path.read_text(encoding="utf-8"))
        old_lines = (RELEASE / path.with_suffix(".en").name).read_text(encoding="utf-8")
        new_lines = path.with_suffix(".en").read_text(encoding="utf-8")
        sources = [de for de, _ in read_split(new_record["split"], data_dir)]
        lines = zip(sources, old_lines.splitlines(), new_lines.splitlines(), strict=True)
        changed = [source != normalize(source) for source, old, new in lines if old != new]
        records[path.stem] = {
            "split": new_record["split"],
            "sentences": new_record["sentences"],
            "sources_changed_by_normalize": sum(s != normalize(s) for s in sources),
            "translations_changed": len(changed),
            "translations_changed_of_unchanged_sources": changed.count(False),
            "old": {name: old_record[name]["score"] for name in SCORES},
            "new": {name: new_record[name]["score"] for name in SCORES},
            "command": new_record["command"],
        }
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("new", type=Path, help="the folder of the new evaluate records")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    result = {
        "what": "the shipped model re-evaluated with normalized input (issue 32): every record "
        "of results/release on the shipped weights, old (as recorded) and new",
        "command": "python tools/normalized_rescoring.py NEW --data-dir DATA, after "
        "annotated-transformer evaluate --split all [--beam 4 | --beam 1 | --beam 4 "
        "--keep-greedy] --data-dir DATA --results NEW",
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "records": compare(args.new, args.data_dir),
        "not_rescored": "the small run (results/multi30k-small holds its records, not its "
        "weights) and val-avg5-beam4 (the float32 average, runs/release/average.pt, is not "
        "committed): no checkpoint to translate with",
    }
    with atomic_write(RELEASE / "normalized-rescoring.json", "w") as file:
        json.dump(result, file, indent=1, ensure_ascii=False)
        file.write("\n")
    print(f"wrote {RELEASE / 'normalized-rescoring.json'}")


if __name__ == "__main__":
    main()
