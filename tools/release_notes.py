"""Print CHANGELOG.md's section for a version: the notes of its GitHub release.

    python tools/release_notes.py 0.2.0

The release workflow (.github/workflows/release.yml) runs it with the pushed tag's version. It
refuses, in one line and with exit 1, a version that is not pyproject.toml's or has no section.
"""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def package_version() -> str:
    """pyproject.toml's version of the package."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        return tomllib.load(file)["project"]["version"]


def section(changelog: str, version: str) -> str | None:
    """The text under `## VERSION` up to the next `## ` heading, or None if there is none."""
    found = re.search(rf"^## {re.escape(version)}[ \t]*\n(.*?)(?=^## |\Z)", changelog, re.M | re.S)
    return found[1].strip() + "\n" if found else None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/release_notes.py VERSION", file=sys.stderr)
        return 2
    (version,) = argv
    if version != package_version():
        print(f"release_notes: the tag's version {version} is not pyproject.toml's "
              f"{package_version()}", file=sys.stderr)  # fmt: skip
        return 1
    notes = section((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"), version)
    if notes is None:
        print(f"release_notes: CHANGELOG.md has no section '## {version}'", file=sys.stderr)
        return 1
    print(notes, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
