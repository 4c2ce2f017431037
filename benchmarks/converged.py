"""Has a run converged? Its validation BLEU over the last 20 % of its validations, within 0.5.

    python benchmarks/converged.py runs/variations/full/base/metrics.jsonl

Prints every validation's BLEU and the verdict (issue 34: Table 3's budget on the GPU must be one
where the base row converges). Exit status 0 if it converged, 1 if not, 2 if the file holds
fewer than two validations.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

TOLERANCE = 0.5  # BLEU
TAIL = 0.2  # the share of the validations, the last ones, that must agree


def converged(bleu: list[float], tolerance: float = TOLERANCE, tail: float = TAIL) -> bool:
    """Whether the last `tail` of the validation BLEU scores (at least two) lie within
    `tolerance` of each other."""
    last = bleu[-max(2, math.ceil(tail * len(bleu))) :]
    return len(bleu) >= 2 and max(last) - min(last) <= tolerance


def main(argv: list[str] | None = None) -> int:
    (path,) = sys.argv[1:] if argv is None else argv
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    val = [record for record in map(json.loads, lines) if record.get("kind") == "val"]
    bleu = [record["bleu"] for record in val]
    print("validation BLEU: " + ", ".join(f"step {r['step']}: {r['bleu']:.2f}" for r in val))
    if len(bleu) < 2:
        print(f"{path}: {len(bleu)} validation(s): too few to judge convergence")
        return 2
    verdict = converged(bleu)
    last = bleu[-max(2, math.ceil(TAIL * len(bleu))) :]
    print(f"last {len(last)} validations within {max(last) - min(last):.2f} BLEU: "
          f"{'converged' if verdict else 'NOT converged'} (tolerance {TOLERANCE})")  # fmt: skip
    return 0 if verdict else 1


if __name__ == "__main__":
    sys.exit(main())
