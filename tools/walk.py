"""How a reader walks the trainer: follow `annotated-transformer train` through the package's code,
reading each function the first time it runs, and count the moves between modules.

    python tools/walk.py [--steps N] [--show]

It runs `train` on the tiny preset for N steps (default 2) on the CPU, in a scratch folder, with
the profiler hook of `sys.setprofile`, and prints:

- `entries`: how often the reader moves from one module of `training/` into another (code
  outside `training/`, in `data/` or `model/`, is read in passing and is not a step);
- `returns`: how many of those moves come back to a module already left (a call returns into
  it, or calls into it again): the "climbing back up" of reading a trainer;
- `check_run_folder`: how many times one `train` checks its run folder.

The reader's place is the module of the function being read: a function's first call moves the
reader into it, and its return moves the reader back to its caller. Calls of a function already
read are not followed (the reader knows it), but a first call made inside them is. With `--show`
it prints the walk, one module per line.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

PACKAGE = "annotated_transformer"
TRAINING = f"{PACKAGE}.training."


class Walk:
    """The reader's path through the package's modules, built from profiler events."""

    def __init__(self) -> None:
        self.read: set = set()  # code objects read already
        self.places: list[str] = []  # the module of each function being read, innermost last
        self.path: list[str] = []  # the reader's modules, a move per entry
        self.calls: dict[str, int] = {}
        self.frames: set[int] = set()  # the ids of the frames the reader followed

    def event(self, frame, kind: str, _arg) -> None:
        module = frame.f_globals.get("__name__", "")
        code = frame.f_code
        if not module.startswith(PACKAGE) or kind not in ("call", "return"):
            return
        if code.co_name == "<module>" or _importing(frame):  # an import runs a module's body
            return  # (its classes, decorators): not a call that one reads
        if kind == "call":
            self.calls[code.co_name] = self.calls.get(code.co_name, 0) + 1
            if code in self.read:
                return
            self.read.add(code)
            self.frames.add(id(frame))
            self.places.append(module)
            self.move(module)
        elif id(frame) in self.frames:
            self.frames.discard(id(frame))
            self.places.pop()
            if self.places:
                self.move(self.places[-1])

    def move(self, module: str) -> None:
        """The reader's place is `module`: a step of the path if it is a module of `training/`
        (code elsewhere, in `data/` or `model/`, is read in passing)."""
        if module.startswith(TRAINING) and (not self.path or self.path[-1] != module):
            self.path.append(module)

    def counts(self) -> dict[str, int]:
        entries = returns = 0
        left: set[str] = set()
        for before, after in zip(self.path, self.path[1:], strict=False):
            left.add(before)
            entries += 1
            returns += after in left
        return {"entries": entries, "returns": returns,
                "check_run_folder": self.calls.get("check_run_folder", 0)}  # fmt: skip


def _importing(frame) -> bool:
    """Whether `frame` runs for a module's body (a class body, a decorator, a dataclass)."""
    caller = frame.f_back
    while caller is not None:
        if caller.f_code.co_name == "<module>" and caller.f_globals.get("__name__", "").startswith(
            PACKAGE
        ):
            return True
        caller = caller.f_back
    return False


def walk(steps: int) -> Walk:
    """Run `train` on the tiny preset for `steps` steps, walked."""
    from annotated_transformer import cli

    with tempfile.TemporaryDirectory() as scratch:
        run = Path(scratch) / "run"
        arguments = ["train", "--preset", "tiny", "--out", str(run), "--device", "cpu",
                     "--no-progress", "--set", f"max_steps={steps}",
                     "--set", "epochs=null"]  # fmt: skip
        reader = Walk()
        sys.setprofile(reader.event)
        try:
            status = cli.main(arguments)
        finally:
            sys.setprofile(None)
        if status != 0:
            raise SystemExit(f"tools/walk.py: train exited with status {status}")
    return reader


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2, help="training steps (default 2)")
    parser.add_argument("--show", action="store_true", help="print the walk, a module a line")
    args = parser.parse_args(argv)
    reader = walk(args.steps)
    if args.show:
        print("\n".join(reader.path))
    counts = reader.counts()
    print(", ".join(f"{name}: {value}" for name, value in counts.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
