"""What the book needs and the package does not: hand-written, not generated from a chapter.

- `notebook`: what every chapter calls first (`setup_chapter`), `add_to_class` for a class written
  across cells, `markdown_table`, and where the book's repository is (`project_root`).
- `figures`: the figures the book draws from code (Figure 1, Table 1's chart).
- `exercises`: the chapters' exercises and the checks that tell a reader whether an answer is
  right.

Nothing in the package's other layers imports these; the plotting libraries they use are imported
only when a chapter asks. Before 0.3.0 they lay beside the subpackages; those old paths still
import them, with a `DeprecationWarning`, until 0.4.0.
"""
