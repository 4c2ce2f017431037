"""One-off edit for issue 31 (helper 31-D), run once at integration from the repository root:

    .venv/bin/python /tmp/31D/add_reads.py && .venv/bin/python tools/first_cell.py

The chapters that read files of the repository (records in results/, the page's script) name them
in their first cell, `profile = setup_chapter(reads=[...])`: outside a clone they stop there with
one line instead of failing later on a missing _toc.yml. Idempotent.
"""

import json
from pathlib import Path

READS = {
    "decoding": ["results/release", "results/multi30k-small"],
    "fast_decoding": ["results/bench-decoding-cpu.json"],
    "performance": ["results/bench-train-cpu.json", "results/bench-decoding-cpu.json"],
    "real_world": ["results/multi30k-small"],
    "results": ["results/multi30k-small", "results/release"],
    "subwords": ["results/variations-*"],
    "table3": ["results/variations-*", "results/multi30k-small"],
    "tryit": ["book/_static/tryit.js"],
}
OLD = "profile = setup_chapter()"

for chapter, reads in READS.items():
    path = Path("book") / f"{chapter}.ipynb"
    text = path.read_text(encoding="utf-8")
    notebook = json.loads(text)
    new_call = "profile = setup_chapter(reads=" + json.dumps(reads) + ")"
    cell = next(c for c in notebook["cells"] if c["cell_type"] == "code" and "setup_chapter(" in "".join(c["source"]))
    source = "".join(cell["source"])
    if new_call in source:
        continue
    assert source.count(OLD) == 1, (chapter, source)
    cell["source"] = source.replace(OLD, new_call).splitlines(keepends=True)
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{path}: {new_call}")
