"""Every mistake a user can make with `annotated-transformer`: one clear line, never a traceback,
the right exit status, and no file lost.

`CASES` is one table of bad inputs. Each row runs the command line in a scratch folder holding a
copy of a tiny trained run (`run`, from tests/fixtures/checkpoint-0.1.0/word), and must end with
exit status 2 (what was typed) or 1 (what the files or the machine did), with exactly one line
`annotated-transformer: error: ...` naming the problem, and with every file of the folder as it
was (and no temporary file left). README's reliability table is generated from it
(`reliability_table`).

Most rows run `cli.main` in this interpreter (`run_in_process`: its standard input a pipe, its
output captured, the interpreter checked unchanged afterwards); a row that needs a process of its
own (`Case.needs`: a closed or full standard stream, a failure injected by sitecustomize.py, a
lock another process holds) runs `python -m annotated_transformer` as a subprocess (`run_case`).
`IN_PROCESS_ROWS` and `SUBPROCESS_ROWS` count the two, so no row changes its way unnoticed.

Then one test per class of error (`CLASSES`) goes further in the same process: each write site
on a full disk, outputs checked before any work, files replaced only when this tool wrote them.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import annotated_transformer
from annotated_transformer import cli

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "checkpoint-0.1.0" / "word"
CHECKPOINT = "checkpoint-00000002.pt"  # the fixture's one checkpoint (step 2)
README = ROOT / "README.md"
TABLE_START = "<!-- reliability table: generated from tests/test_cli_errors.py -->"
TABLE_END = "<!-- end of reliability table -->"
ERROR = "annotated-transformer: error:"
MAIN = Path(annotated_transformer.__file__).parent / "__main__.py"  # sys.argv[0] of `python -m`

# --- the classes of bad input --------------------------------------------------------------------

OPTION = "an unknown command or option"
VALUE = "a bad value for an option"
SETTING = "a bad setting (--set or an option)"
CONFLICT = "options that do not go together"
NOTHING = "nothing to translate"
MISSING = "a missing checkpoint or data file"
NOT_CHECKPOINT = "a file that is not a checkpoint"
RUN_FILES = "a run whose files do not fit"
UNWRITABLE = "an output that cannot be written"
CLOBBER = "an output that would replace a file this tool did not write"
MACHINE = "something the machine lacks"
DISK_FULL = "a full disk"
IN_USE = "a run folder in use, or holding a run"
DIVERGED = "a diverged run or checkpoint"
ENVIRONMENT = "torchrun variables that do not fit"
LONG = "a long translation"
WRITTEN_TWICE = "a folder written twice at once"
DERIVED = "data prepared from changed text"
FOREIGN = "a model folder from another command"
CLASSES = (
    OPTION, VALUE, SETTING, CONFLICT, NOTHING, MISSING, NOT_CHECKPOINT, RUN_FILES, UNWRITABLE,
    CLOBBER, MACHINE, DISK_FULL, IN_USE, DIVERGED, ENVIRONMENT, LONG, WRITTEN_TWICE, DERIVED,
    FOREIGN,
)  # fmt: skip


# --- what a case needs in its folder -------------------------------------------------------------


def write(name: str, content: str | bytes) -> Callable[[Path], None]:
    """A setup: a file `name` (folders made) holding `content`."""

    def setup(folder: Path) -> None:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")

    return setup


def both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        for one in setups:
            one(folder)

    return setup


def empty_folder(name: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).mkdir()


def zip_of_photos(folder: Path) -> None:
    with zipfile.ZipFile(folder / "photos.zip", "w") as archive:
        archive.writestr("dog.jpg", b"\xff\xd8 not really a photo")


def checkpoint_cut_short(folder: Path) -> None:
    data = (folder / "run" / CHECKPOINT).read_bytes()
    (folder / "cut.pt").write_bytes(data[: len(data) // 2])


class Exploit:
    """What a malicious "checkpoint" could hold: unpickling it would run a command."""

    def __reduce__(self):
        return (os.system, ("echo this would have run",))


def pickle_of_code(folder: Path) -> None:
    import torch

    torch.save({"model": Exploit()}, folder / "evil.pt")


def state_dict_of_other_code(folder: Path) -> None:
    import torch

    torch.save({"encoder.weight": torch.zeros(2, 2)}, folder / "weights.pt")


def vocabulary_of_another_run(folder: Path) -> None:
    from annotated_transformer.data.vocab import SPECIALS, Vocab

    Vocab([*SPECIALS, "nur", "drei", "Wörter"]).save(folder / "run" / "src_vocab.json")


def checkpoint_with(name: str, **settings: object) -> Callable[[Path], None]:
    """A setup: a copy of the run's checkpoint, named `name`, trained with other settings."""

    def setup(folder: Path) -> None:
        from annotated_transformer.runs.checkpoints import load_checkpoint, save_checkpoint

        payload = load_checkpoint(folder / "run" / CHECKPOINT)
        del payload["path"]
        payload["config"] = {**payload["config"], **settings}
        save_checkpoint(folder / name, payload)

    return setup


def copy_of_checkpoint(name: str) -> Callable[[Path], None]:
    return lambda folder: shutil.copyfile(folder / "run" / CHECKPOINT, folder / name)


def link(name: str, target: str) -> Callable[[Path], None]:
    """A setup: a symbolic link `name` to `target` (which may not exist, or may be a link)."""
    return lambda folder: (folder / name).symlink_to(target)


def pipe(name: str) -> Callable[[Path], None]:
    """A setup: a named pipe `name` (mkfifo), in place of the file of that name if there is one:
    reading it waits for a writer that never comes."""

    def setup(folder: Path) -> None:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).unlink(missing_ok=True)
        os.mkfifo(folder / name)

    return setup


# Issue 32, runs: what its cases need
def nan_checkpoint(name: str) -> Callable[[Path], None]:
    """A setup: a copy of the run's checkpoint whose first weight is NaN (a diverged run's)."""

    def setup(folder: Path) -> None:
        from annotated_transformer.runs.checkpoints import load_checkpoint, save_checkpoint

        payload = load_checkpoint(folder / "run" / CHECKPOINT)
        del payload["path"]
        weight = next(k for k, v in payload["model"].items() if v.is_floating_point())
        payload["model"][weight] = torch_full_like(payload["model"][weight], float("nan"))
        save_checkpoint(folder / name, payload)

    return setup


def shipped_with(**model: object) -> Callable[[Path], None]:
    """A setup: `shipped`, a copy of the shipped model whose config.json has other model
    settings, its SHA256SUMS written again (so that only the shapes do not fit)."""

    def setup(folder: Path) -> None:
        from annotated_transformer.pretrained import CONFIG, FILES, SUMS, sha256, shipped_folder

        shutil.copytree(shipped_folder(), folder / "shipped")
        about = json.loads((folder / "shipped" / CONFIG).read_text(encoding="utf-8"))
        about["config"]["model"] |= model
        (folder / "shipped" / CONFIG).write_text(json.dumps(about), encoding="utf-8")
        sums = "".join(f"{sha256(folder / 'shipped' / name)}  {name}\n" for name in FILES)
        (folder / "shipped" / SUMS).write_text(sums, encoding="utf-8")

    return setup


def torch_full_like(tensor, value: float):
    import torch

    return torch.full_like(tensor, value)


def without_checkpoint(folder: Path) -> None:
    """The run finished, and its checkpoints were deleted; its log stays."""
    (folder / "run" / CHECKPOINT).unlink()
    lines = [{"step": 1, "kind": "train", "loss": 9.0}, {"step": 2, "kind": "train", "loss": 8.0}]
    (folder / "run" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))


def edited(name: str, change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """A setup: the run's file `name`, changed by hand (or cut short)."""

    def setup(folder: Path) -> None:
        path = folder / "run" / name
        path.write_bytes(change(path.read_bytes()))

    return setup


def shipped_sums(text: str) -> Callable[[Path], None]:
    """A setup: `shipped`, a copy of the shipped model whose SHA256SUMS holds `text`."""

    def setup(folder: Path) -> None:
        from annotated_transformer.pretrained import SUMS, shipped_folder

        shutil.copytree(shipped_folder(), folder / "shipped")
        (folder / "shipped" / SUMS).write_text(text, encoding="utf-8")

    return setup


# --- the table -----------------------------------------------------------------------------------


def ct2_folder(folder: Path) -> None:
    """The shipped model exported for CTranslate2 (float32) into `folder` (a copy of the one
    export made per session)."""
    shutil.copytree(ct2_export_of("float32"), folder)


# Issue 44, a folder written whole: what its cases need
CT2_EXPORTS: dict[str, Path] = {}  # quantization -> the shipped model exported once per session


def ct2_copy(change: Callable[[Path], None] | None = None) -> Callable[[Path], None]:
    """A setup: `ct2`, a copy of the shipped model's CTranslate2 export, then `change`d."""

    def setup(folder: Path) -> None:
        shutil.copytree(ct2_export_of("float32"), folder / "ct2")
        if change is not None:
            change(folder / "ct2")

    return setup


def ct2_export_of(quantization: str) -> Path:
    if quantization not in CT2_EXPORTS:
        import tempfile

        from annotated_transformer.exports.ct2 import export_ct2
        from annotated_transformer.translator import Translator

        shipped = Translator.pretrained()
        folder = Path(tempfile.mkdtemp(prefix="ct2-")) / quantization
        export_ct2(shipped.model, shipped.bpe, shipped.config, folder, quantization)
        CT2_EXPORTS[quantization] = folder
    return CT2_EXPORTS[quantization]


def ct2_record(change: Callable[[dict], None]) -> Callable[[Path], None]:
    """A change: export.json edited by `change`."""

    def edit(ct2: Path) -> None:
        about = json.loads((ct2 / "export.json").read_text(encoding="utf-8"))
        change(about)
        (ct2 / "export.json").write_text(json.dumps(about), encoding="utf-8")

    return edit


def ct2_int8_model_bin(ct2: Path) -> None:
    """An export-ct2 --quantization int8 stopped after renaming its model.bin into `ct2`."""
    shutil.copyfile(ct2_export_of("int8") / "model.bin", ct2 / "model.bin")


def ct2_cut_model_bin(ct2: Path) -> None:
    data = (ct2 / "model.bin").read_bytes()
    (ct2 / "model.bin").write_bytes(data[: len(data) // 2])


def another_bpe(ct2: Path) -> None:
    from annotated_transformer.data.bpe import BPETokenizer

    BPETokenizer.train(["ein Hund", "a dog"] * 20, vocab_size=300, min_frequency=1).save(
        ct2 / "bpe.json"
    )


@dataclass(frozen=True)
class Case:
    """One bad input: run `annotated-transformer *argv` in a folder prepared by `setup`."""

    id: str
    kind: str  # its class, one of CLASSES
    argv: tuple[str, ...]
    status: int  # 2: what was typed; 1: the files or the machine
    message: str  # a part of the error line
    you_get: str  # what the user gets, in words
    setup: Callable[[Path], None] | None = None
    stdin: bytes | None = b""  # None: standard input closed
    disk_full: str | None = None  # writing a file of this name fails: no space left on device
    note: str = ""  # shown after the example
    needs_no_cuda: bool = False
    env: tuple[str, ...] = ()  # NAME=VALUE: environment variables set for it, shown
    inject: tuple[str, ...] = ()  # NAME=VALUE: set for it, not shown (see SITECUSTOMIZE)
    locked: str | None = None  # the folder whose train.lock the test holds while it runs
    stdout: str = ""  # "closed": standard output closed; "full": standard output is /dev/full
    shown: str = ""  # the example as the README shows it, where the real one is too long to read
    process: str = ""  # why it runs in a process of its own, besides the reasons `needs` finds

    def needs(self) -> str:
        """Why this row runs as a subprocess ("": it runs in the test's own interpreter)."""
        if self.process:
            return self.process
        if self.stdin is None or self.stdout:
            return "a standard stream closed or /dev/full (the process's own descriptors)"
        if self.disk_full or self.inject:
            return "a failure injected by sitecustomize.py (FULL_DISK)"
        if self.locked:
            return "a lock held by another process"
        return ""

    def example(self) -> str:
        if self.shown:
            return self.shown
        command = shlex.join(["annotated-transformer", *self.argv])
        # a byte that is not UTF-8 (Python's surrogate escape U+DCxx) as bash writes it: $'\xHH'
        command = re.sub(r"'([^']*[\udc80-\udcff][^']*)'", lambda m: "$'" + "".join(
            f"\\x{ord(c) - 0xDC00:02x}" if "\udc80" <= c <= "\udcff" else c for c in m[1]
        ) + "'", command)  # fmt: skip
        if self.env:
            command = " ".join([*map(shlex.quote, self.env), command])
        if self.stdin is None:
            command += " <&-"
        elif self.stdin:  # as printf writes it: \n, and \xHH for a byte that is not ASCII
            shown = "".join(
                "\\n" if b == 10 else chr(b) if 32 <= b < 127 and b != 92 else f"\\x{b:02x}"
                for b in self.stdin
            )
            command = f"printf {shlex.quote(shown)} | {command}"
        return command + {"": "", "closed": " >&-", "full": " > /dev/full"}[self.stdout]


def miniature_mirror(
    damaged: str | None = None, missing: str | None = None, misaligned: str | None = None
) -> Callable[[Path], None]:
    """A miniature WMT 2014 mirror in `mirror/` (tests/wmt_miniature.py), one archive spoiled."""

    def setup(folder: Path) -> None:
        from wmt_miniature import make_mirror

        make_mirror(folder / "mirror", misaligned=misaligned)
        if damaged:
            (folder / "mirror" / damaged).write_bytes(b"not the archive\n")
        if missing:
            (folder / "mirror" / missing).unlink()

    return setup


def miniature_text(name: str = "wmt") -> Callable[[Path], None]:
    """The miniature WMT 2014's text in `name/`, as `download --dataset wmt14-en-de` writes it."""

    def setup(folder: Path) -> None:
        from wmt_miniature import make_mirror

        from annotated_transformer.data import wmt14

        sources = wmt14.sources_from_json(make_mirror(folder / ".mirror"))
        wmt14.extract({n: folder / ".mirror" / s.file for n, s in sources.items()},
                      folder / name, sources=sources)  # fmt: skip
        shutil.rmtree(folder / ".mirror")

    return setup


# Issue 35, loader workers and resume: what its cases need
def wmt_run_whose_data_moved(folder: Path) -> None:
    """`wmtrun`: a WMT run stopped before its first checkpoint, whose run.json names its data
    folder, `wmt`, which is not there (moved away)."""
    from annotated_transformer import __version__
    from annotated_transformer.runs.presets import preset

    run = folder / "wmtrun"
    run.mkdir()
    (run / "config.json").write_text(json.dumps(preset("wmt14-base").to_dict()), encoding="utf-8")
    about = {"command": ["annotated-transformer", "train"], "annotated_transformer": __version__,
             "data_dir": str(folder / "wmt")}  # fmt: skip
    (run / "run.json").write_text(json.dumps(about), encoding="utf-8")


# Issue 44, data prepared from changed text: what its cases need
def text_then(change: Callable[[Path], None], prepare: bool = True) -> Callable[[Path], None]:
    """A setup: the miniature WMT text in `wmt/`, its folder prepared (a BPE of 300 pieces,
    `wmt/shards-bpe300-min2`) unless not `prepare`, then `change(wmt)`: what happened since."""

    def setup(folder: Path) -> None:
        from annotated_transformer.data import shards

        miniature_text()(folder)
        if prepare:
            shards.prepare_shards(folder / "wmt", 300, 2, say=lambda message: None)
        change(folder / "wmt")

    return setup


# Issue 44, damaged or foreign model folders: what its cases need
_EXPORTS: dict[str, Path] = {}  # the shipped model exported once per test session


def export_of(command: str, name: str) -> Callable[[Path], None]:
    """A setup: `name`, the shipped model as `command` (export-ct2 or export-hf) writes it."""

    def setup(folder: Path) -> None:
        import tempfile

        from annotated_transformer.translator import Translator

        if command == "export-ct2":  # (the float32 export the other rows copy)
            _EXPORTS.setdefault(command, ct2_export_of("float32"))
        if command not in _EXPORTS:
            from annotated_transformer.exports.hf import export_hf

            out = Path(tempfile.mkdtemp(prefix="at-export-")) / command
            shipped = Translator.pretrained(device="cpu")
            export_hf(shipped.model, shipped.bpe, out, card=None, origin=shipped.origin)
            _EXPORTS[command] = out
        shutil.copytree(_EXPORTS[command], folder / name)

    return setup


def rewritten(name: str, change: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """A change: the file `name` of the text (or of its prepared folder) rewritten."""
    return lambda wmt: (wmt / name).write_bytes(change((wmt / name).read_bytes()))


def first_lines(n: int) -> Callable[[bytes], bytes]:
    return lambda data: b"".join(data.splitlines(keepends=True)[:n])


def without_key(key: str) -> Callable[[bytes], bytes]:
    return lambda data: json.dumps({k: v for k, v in json.loads(data).items() if k != key}).encode()


def offsets_short_by(n: int) -> Callable[[bytes], bytes]:
    import numpy as np

    def change(data: bytes) -> bytes:
        buffer = io.BytesIO()
        np.save(buffer, np.load(io.BytesIO(data))[:-n])
        return buffer.getvalue()

    return change


def another_vocabulary(wmt: Path) -> None:
    from annotated_transformer.data import shards

    other = shards.learn_bpe([wmt / "newstest2013.en", wmt / "newstest2013.de"], 280, 1)
    other.save(wmt / "shards-bpe300-min2" / "bpe.json")


def id_at(position: int, value: int) -> Callable[[bytes], bytes]:
    """A change of a shard's ids file (uint16): the id at `position` made `value`."""
    import numpy as np

    def change(data: bytes) -> bytes:
        ids = np.frombuffer(data, dtype=np.uint16).copy()
        ids[position] = value
        return ids.tobytes()

    return change


def json_key(key: str, value: object) -> Callable[[bytes], bytes]:
    return lambda data: json.dumps({**json.loads(data), key: value}).encode()


def onnx_record(folder: Path) -> None:
    """`web`: what export-onnx writes, its graphs stand-ins (the record, export.json, says what
    wrote the folder)."""
    from annotated_transformer.exports import onnx as onnx_export

    (folder / "web").mkdir()
    for name in (onnx_export.ENCODER, onnx_export.DECODER):
        (folder / "web" / name).write_bytes(b"an ONNX graph")
    about = {"format": onnx_export.FORMAT, "version": 1, "pair": "de-en"}
    (folder / "web" / onnx_export.ABOUT).write_text(json.dumps(about), encoding="utf-8")


def shipped_edited(
    about: Callable[[dict], object] | None = None, weights: Callable[[bytes], bytes] | None = None
) -> Callable[[Path], None]:
    """A setup: `shipped`, a copy of the shipped model whose config.json (`about` edits it; what
    it returns, if not None, is the file's new content) or weights were changed, its SHA256SUMS
    written again (so that only the change is wrong)."""

    def setup(folder: Path) -> None:
        from annotated_transformer.pretrained import CONFIG, FILES, SUMS, WEIGHTS, sha256

        shipped_with()(folder)
        copy = folder / "shipped"
        if about is not None:
            content = json.loads((copy / CONFIG).read_text(encoding="utf-8"))
            changed = about(content)
            (copy / CONFIG).write_text(json.dumps(content if changed is None else changed))
        if weights is not None:
            (copy / WEIGHTS).write_bytes(weights((copy / WEIGHTS).read_bytes()))
        sums = "".join(f"{sha256(copy / name)}  {name}\n" for name in FILES)
        (copy / SUMS).write_text(sums, encoding="utf-8")

    return setup


def a_weight_nan(data: bytes) -> bytes:
    from safetensors.torch import load, save

    weights, name = load(data), "encoder.layers.0.feed_forward.w_1.bias"
    weights[name] = torch_full_like(weights[name], float("nan"))
    return save(weights)


def averaged(name: str) -> Callable[[Path], None]:
    """A setup: `name`, the average of run's one checkpoint (as `average run --last 1` makes)."""

    def setup(folder: Path) -> None:
        from annotated_transformer.runs.averaging import average_checkpoints

        average_checkpoints([folder / "run" / CHECKPOINT]).save(folder / name)

    return setup


def crafted_checkpoint(name: str, **parts: object) -> Callable[[Path], None]:
    """A setup: `name`, the run's checkpoint with `parts` replaced by values of other types."""

    def setup(folder: Path) -> None:
        from annotated_transformer.runs.checkpoints import read_checkpoint, save_checkpoint

        payload = read_checkpoint(folder / "run" / CHECKPOINT)
        save_checkpoint(folder / name, {**payload, **parts})

    return setup


WMT = ("download", "--dataset", "wmt14-en-de", "--mirror", "mirror", "--test-sources",
       "mirror/SOURCES.json", "--data-dir", "wmt")  # fmt: skip
T = ("train", "--preset", "tiny", "--out")  # a new run; it never gets as far as the data
TW = ("train", "--preset", "wmt14-base", "--data-dir", "wmt", "--out", "new", "--set",
      "vocab_size=300")  # a new WMT run on the miniature text  # fmt: skip
PW = ("prepare", "--data-dir", "wmt", "--vocab-size", "300")
TR = ("translate", "--checkpoint", "run")
TS = ("translate", "--checkpoint", "shipped")
SENTENCE = "Ein Hund rennt."
# The installed package: no command writes into it but the release recipe's (--into-package).
PACKAGE = Path(annotated_transformer.__file__).parent
PIPE = "a named pipe: where it is read, the read waits for ever (a process stopped at a timeout)"
CASES = [
    # What was typed: exit status 2
    Case("unknown-option", OPTION, (*TR, "--bem", "2", SENTENCE), 2,
         "unrecognized arguments: --bem", "exit 2, names the option, shows the usage"),
    Case("unknown-command", OPTION, ("tranlsate", SENTENCE), 2,
         "invalid choice: 'tranlsate'", "exit 2, names the commands there are"),
    Case("no-command", OPTION, (), 2, "give a command: info, download, train",
         "exit 2, lists the commands"),
    Case("missing-option", OPTION, ("average", "run", "--last", "1"), 2,
         "average: the following arguments are required: --out", "exit 2, names the option"),
    Case("export-onnx-without-out", OPTION, ("export-onnx",), 2,
         "the following arguments are required: --out", "exit 2, names the option"),
    Case("unknown-preset", OPTION, ("train", "--preset", "huge", "--out", "new"), 2,
         "invalid choice: 'huge'", "exit 2, names the presets"),
    Case("beam-zero", VALUE, (*TR, "--beam", "0", SENTENCE), 2,
         "argument --beam: expected a positive integer (1 is greedy decoding), got '0'",
         "exit 2, names the option, the value and what is allowed"),
    Case("beam-words", VALUE, ("evaluate", "--checkpoint", "run", "--beam", "four"), 2,
         "argument --beam: expected a positive integer", "exit 2, as above"),
    Case("alpha-negative", VALUE, (*TR, "--alpha", "-1", SENTENCE), 2,
         "argument --alpha: expected a number >= 0 (the paper: 0.6), got '-1'",
         "exit 2, names the option, the value and what is allowed"),
    Case("alpha-nan", VALUE,
         ("attention", "--checkpoint", "run", "--output", "a.json", "--alpha", "nan", SENTENCE),
         2, "argument --alpha: expected a number >= 0", "exit 2, as above"),
    Case("last-zero", VALUE, ("average", "run", "--last", "0", "--out", "average.pt"), 2,
         "argument --last: expected a positive integer, got '0'", "exit 2, names the option"),
    Case("unknown-split", VALUE, ("evaluate", "--checkpoint", "run", "--split", "test2019"), 2,
         "--split test2019: expected one of val, test2016, test2017, test2018, mscoco or all",
         "exit 2, lists the splits"),
    Case("tag-path", VALUE,
         ("evaluate", "--checkpoint", "run", "--results", "res", "--tag", "../x"), 2,
         "--tag '../x': the tag names files", "exit 2, says what a tag may be"),
    Case("average-named-like-a-checkpoint", VALUE,
         ("average", "run", "--last", "1", "--out", "checkpoint-00000009.pt"), 2,
         "cannot be named like a training checkpoint", "exit 2, suggests average.pt"),
    Case("grid-jobs", VALUE, ("grid", "--jobs", "0"), 2,
         "--jobs 0: expected a positive number of processes", "exit 2, names the option"),
    Case("grid-unknown-variation", VALUE, ("grid", "--only", "A-h3"), 2,
         "--only: unknown variations ['A-h3']; the grid: base", "exit 2, lists the variations"),
    Case("setting-wrong-type", SETTING, (*T, "new", "--set", 'N="2"'), 2,
         'setting N: expected a positive integer, got "2" (a string)',
         "exit 2, names the setting, the value and its type, and what is allowed"),
    Case("setting-unknown", SETTING, (*T, "new", "--set", "warmpu=2000"), 2,
         "unknown training settings ['warmpu']; the settings:", "exit 2, lists the settings"),
    Case("setting-not-json", SETTING, (*T, "new", "--set", "seed=x"), 2,
         "--set seed=x: write NAME=VALUE with a JSON value", "exit 2, says how to write it"),
    Case("setting-no-value", SETTING, (*T, "new", "--set", "warmup"), 2,
         "--set warmup: write NAME=VALUE, e.g. --set warmup=2000", "exit 2, shows an example"),
    Case("settings-that-clash", SETTING, (*T, "new", "--set", "max_tokens=100"), 2,
         "max_tokens=100 must be at least max_len=256", "exit 2, names both settings"),
    Case("output-of-several-splits", CONFLICT,
         ("evaluate", "--checkpoint", "run", "--split", "val", "test2016", "--output", "o.en"),
         2, "--output takes the translations of one split", "exit 2, points to --results"),
    Case("split-all-and-more", CONFLICT,
         ("evaluate", "--checkpoint", "run", "--split", "all", "val"), 2,
         "--split all stands alone", "exit 2, says what all means"),
    Case("train-without-preset", CONFLICT, ("train", "--out", "new"), 2,
         "give --preset (tiny, small, release, base, big, wmt14-base or wmt14-big), or --resume",
         "exit 2, names both ways"),
    Case("translate-empty", NOTHING, (*TR, " "), 2, "nothing to translate",
         "exit 2, says where sentences go"),
    Case("translate-empty-stdin", NOTHING, TR, 2, "nothing to translate", "exit 2, as above",
         stdin=b"\n  \n"),
    Case("attention-empty", NOTHING,
         ("attention", "--checkpoint", "run", "--output", "a.json", ""), 2,
         "nothing to translate: give one sentence", "exit 2"),
    # What the files did: exit status 1
    Case("checkpoint-missing", MISSING, ("translate", "--checkpoint", "runs/x", SENTENCE), 1,
         "runs/x: no such checkpoint or run folder", "exit 1, names the path"),
    Case("folder-without-checkpoint", MISSING, ("evaluate", "--checkpoint", "empty"), 1,
         "empty: no checkpoint-*.pt in this folder", "exit 1, names the folder",
         setup=empty_folder("empty"), note="empty: a folder without checkpoints"),
    Case("data-dir-a-file", MISSING,
         ("evaluate", "--checkpoint", "run", "--data-dir", "notes.txt", "--split", "val"), 1,
         "notes.txt: a file, not a folder; give the folder that holds Multi30k's raw files",
         "exit 1, names the file", setup=write("notes.txt", "my notes\n"),
         note="notes.txt: a file"),
    Case("data-folder-of-the-environment-missing", MISSING,
         ("evaluate", "--checkpoint", "run", "--split", "val"), 1,
         "nowhere ($ANNOTATED_TRANSFORMER_MULTI30K): no such folder",
         "exit 1, names the folder and the variable that named it",
         env=("ANNOTATED_TRANSFORMER_MULTI30K=nowhere",)),
    Case("data-missing", MISSING,
         ("evaluate", "--checkpoint", "run", "--data-dir", "empty", "--split", "val"), 1,
         "empty/val.de.gz: missing", "exit 1, names the file and where it comes from",
         setup=empty_folder("empty"), note="empty: a folder without the Multi30k files"),
    Case("text-file", NOT_CHECKPOINT, ("translate", "--checkpoint", "notes.txt", SENTENCE), 1,
         "notes.txt is not a checkpoint written by annotated-transformer: a text file",
         "exit 1, says what the file is", setup=write("notes.txt", "my notes\n"),
         note="notes.txt: a text file"),
    Case("checkpoint-a-named-pipe", NOT_CHECKPOINT,
         ("translate", "--checkpoint", "model.pt", SENTENCE), 1,
         "model.pt is not a checkpoint written by annotated-transformer: not a regular file",
         "exit 1, nothing read from it",
         setup=pipe("model.pt"), note="model.pt: a named pipe", process=PIPE),
    Case("random-bytes", NOT_CHECKPOINT, ("translate", "--checkpoint", "random.pt", SENTENCE),
         1, "random.pt is not a checkpoint written by annotated-transformer: neither a zip",
         "exit 1, as above", setup=write("random.pt", bytes(range(256)) * 8),
         note="random.pt: random bytes"),
    Case("zip-of-other-files", NOT_CHECKPOINT,
         ("average", "photos.zip", "--out", "average.pt"), 1,
         "photos.zip is not a checkpoint written by annotated-transformer: a zip archive of "
         "other files (dog.jpg)", "exit 1, as above", setup=zip_of_photos,
         note="photos.zip: a zip of photos"),
    Case("checkpoint-cut-short", NOT_CHECKPOINT, ("translate", "--checkpoint", "cut.pt", SENTENCE),
         1, "cut.pt is not a checkpoint written by annotated-transformer: a zip archive cut "
         "short", "exit 1, says it was cut short", setup=checkpoint_cut_short,
         note="cut.pt: the first half of a checkpoint"),
    Case("pickle-of-code", NOT_CHECKPOINT, ("translate", "--checkpoint", "evil.pt", SENTENCE), 1,
         "evil.pt is not a checkpoint written by annotated-transformer: it holds Python objects",
         "exit 1, nothing in it runs; no advice to load it unsafely", setup=pickle_of_code,
         note="evil.pt: a pickle that would run a command"),
    Case("state-dict-of-other-code", NOT_CHECKPOINT,
         ("attention", "--checkpoint", "weights.pt", "--output", "a.json", SENTENCE), 1,
         "without this package's format marker", "exit 1, says what is missing",
         setup=state_dict_of_other_code, note="weights.pt: a state dict saved by other code"),
    Case("vocabulary-of-another-run", RUN_FILES, (*TR, SENTENCE), 1,
         "run/src_vocab.json does not match the vocabulary inside run/checkpoint-00000002.pt",
         "exit 1, names both files", setup=vocabulary_of_another_run,
         note="run/src_vocab.json: another run's"),
    Case("resume-with-another-vocabulary", RUN_FILES,
         ("train", "--resume", "--out", "run", "--max-steps", "3"), 1,
         "run/src_vocab.json does not match the vocabulary inside", "exit 1, nothing trained",
         setup=vocabulary_of_another_run, note="run/src_vocab.json: another run's"),
    Case("resume-with-other-settings", RUN_FILES,
         ("train", "--resume", "--out", "run", "--max-steps", "3", "--dropout", "0.3"), 1,
         "was trained with other settings than these (checkpoint vs now): dropout: 0.1 vs 0.3",
         "exit 1, names each setting that differs"),
    Case("config-json-bad-setting", RUN_FILES, ("train", "--resume", "--out", "started"), 1,
         'started/config.json: setting N: expected a positive integer, got "2" (a string)',
         "exit 1 (a file, not what was typed), names the file and the setting",
         setup=write("started/config.json", '{"model": {"N": "2"}}'),
         note='started/config.json: {"model": {"N": "2"}}'),
    Case("save-pretrained-word-run", RUN_FILES, ("save-pretrained", "run", "--out", "shipped"), 1,
         "a shipped model reads one BPE vocabulary with tied embeddings", "exit 1, writes nothing",
         note="run: a run with word vocabularies"),
    Case("export-onnx-word-run", RUN_FILES, ("export-onnx", "--checkpoint", "run", "--out", "web"),
         1, "export-onnx needs a run with the shared BPE vocabulary", "exit 1, writes nothing",
         note="run: a run with word vocabularies"),
    Case("average-different-runs", RUN_FILES, ("average", "a.pt", "b.pt", "--out", "avg.pt"),
         1, "differ (dropout: 0.3 vs 0.1)", "exit 1, names the setting that differs",
         setup=both(copy_of_checkpoint("a.pt"), checkpoint_with("b.pt", dropout=0.3)),
         note="b.pt: trained with dropout 0.3"),
    Case("output-folder-missing", UNWRITABLE,
         ("evaluate", "--checkpoint", "run", "--split", "val", "--output", "out/val.en"), 1,
         "--output out/val.en: the folder out does not exist",
         "exit 1 before any translating, names the folder"),
    Case("output-is-a-folder", UNWRITABLE,
         ("attention", "--checkpoint", "run", "--output", "run", SENTENCE), 1,
         "--output run: a folder, not a file", "exit 1 before any work"),
    Case("results-in-a-file", UNWRITABLE,
         ("evaluate", "--checkpoint", "run", "--results", "notes.txt"), 1,
         "--results notes.txt: notes.txt is a file, not a folder", "exit 1 before any work",
         setup=write("notes.txt", "my notes\n"), note="notes.txt: a file"),
    Case("run-folder-is-a-file", UNWRITABLE, (*T, "notes.txt"), 1,
         "notes.txt is a file, not a folder", "exit 1 before any work",
         setup=write("notes.txt", "my notes\n"), note="notes.txt: a file"),
    Case("download-into-a-file", UNWRITABLE, ("download", "--data-dir", "notes.txt/data"), 1,
         "--data-dir notes.txt/data: notes.txt is a file, not a folder",
         "exit 1 before any download", setup=write("notes.txt", "my notes\n"),
         note="notes.txt: a file"),
    Case("save-pretrained-into-a-file", UNWRITABLE,
         ("save-pretrained", "run", "--out", "notes.txt"), 1,
         "--out notes.txt: notes.txt is a file, not a folder", "exit 1 before any work",
         setup=write("notes.txt", "my notes\n"), note="notes.txt: a file"),
    Case("export-onnx-into-a-file", UNWRITABLE, ("export-onnx", "--out", "notes.txt"), 1,
         "--out notes.txt: notes.txt is a file, not a folder", "exit 1 before any work",
         setup=write("notes.txt", "my notes\n"), note="notes.txt: a file"),
    Case("train-into-foreign-files", CLOBBER, (*T, "mine"), 1,
         "mine holds config.json, metrics.jsonl, not written by the trainer",
         "exit 1, lists the files, replaces none",
         setup=both(write("mine/config.json", '{"lr": 0.1}'),
                    write("mine/metrics.jsonl", "epoch 1: loss 3.2\n")),
         note="mine: a config.json and a metrics.jsonl of something else"),
    Case("train-into-another-folder", CLOBBER, (*T, "docs"), 1,
         "docs is not a run folder", "exit 1, lists what is there",
         setup=write("docs/thesis.tex", "\\begin{document}\n"), note="docs: other files"),
    Case("train-over-a-run", CLOBBER, (*T, "run"), 1,
         "run already holds a run (checkpoint-00000002.pt): pass --resume", "exit 1",
         note="run: a run with a checkpoint"),
    Case("average-onto-a-vocabulary", CLOBBER,
         ("average", "run", "--last", "1", "--out", "run/src_vocab.json"), 1,
         "--out run/src_vocab.json: the file exists and is not a checkpoint written by",
         "exit 1, the run still translates"),
    Case("attention-onto-a-file", CLOBBER,
         ("attention", "--checkpoint", "run", "--output", "notes.txt", SENTENCE), 1,
         "--output notes.txt: the file exists and is not an attention file", "exit 1",
         setup=write("notes.txt", "my notes\n"), note="notes.txt: the user's file"),
    Case("translations-onto-a-file", CLOBBER,
         ("evaluate", "--checkpoint", "run", "--split", "mscoco", "--output", "mine.en"), 1,
         "--output mine.en: the file exists and is not the translations of a results record",
         "exit 1 before translating", setup=write("mine.en", "my own translations\n"),
         note="mine.en: the user's file"),
    Case("results-onto-a-file", CLOBBER,
         ("evaluate", "--checkpoint", "run", "--split", "mscoco", "--results", "res"), 1,
         "--results res/mscoco-last-beam4.en: the file exists and is not the translations of a "
         "results record", "exit 1 before translating",
         setup=write("res/mscoco-last-beam4.en", "my own translations\n"),
         note="res/mscoco-last-beam4.en: the user's file"),
    Case("save-pretrained-over-other-files", CLOBBER, ("save-pretrained", "run", "--out", "mine"),
         1, "mine holds config.json, not a shipped model's files: not replaced",
         "exit 1, replaces nothing", setup=write("mine/config.json", '{"lr": 0.1}'),
         note="mine/config.json: another program's settings"),
    Case("export-onnx-over-other-files", CLOBBER, ("export-onnx", "--out", "mine"), 1,
         "mine holds encoder.onnx, not an ONNX export's: not replaced", "exit 1, replaces nothing",
         setup=write("mine/encoder.onnx", "another model\n"),
         note="mine/encoder.onnx: another program's model"),
    Case("download-onto-other-files", CLOBBER, ("download", "--data-dir", "data"), 1,
         "data holds train.de.gz, which are not the Multi30k files", "exit 1, downloads nothing",
         setup=write("data/train.de.gz", "not the data\n"), note="data/train.de.gz: another file"),
    Case("download-onto-a-named-pipe", CLOBBER, ("download", "--data-dir", "data"), 1,
         "data holds train.de.gz, which are not the Multi30k files",
         "exit 1, downloads nothing, reads nothing from it", setup=pipe("data/train.de.gz"),
         note="data/train.de.gz: a named pipe", process=PIPE),
    Case("train-onto-a-named-pipe", CLOBBER, (*T, "mine"), 1,
         "mine holds config.json, not written by the trainer", "exit 1, reads nothing from it",
         setup=pipe("mine/config.json"), note="mine/config.json: a named pipe",
         process=PIPE),
    Case("grid-onto-a-file", CLOBBER, ("grid", "--only", "base", "--results", "res"), 1,
         "--results res/base.json: the file exists and is not a record of the grid",
         "exit 1 before training", setup=write("res/base.json", '{"mine": true}\n'),
         note="res/base.json: the user's file"),
    Case("grid-onto-a-named-pipe", CLOBBER, ("grid", "--only", "base", "--results", "res"), 1,
         "--results res/base.json: not a regular file (a device, a pipe or a socket)",
         "exit 1 before training, reads nothing from it", setup=pipe("res/base.json"),
         note="res/base.json: a named pipe", process=PIPE),
    # What the machine did: exit status 1
    Case("no-cuda", MACHINE, (*TR, "--device", "cuda", SENTENCE), 1,
         "--device cuda: PyTorch", "exit 1, says why, suggests --device cpu",
         needs_no_cuda=True, note="no CUDA GPU"),
    Case("stdin-closed", MACHINE, TR, 1, "standard input is closed",
         "exit 1, says where sentences go", stdin=None),
    Case("stdin-not-utf8", MACHINE, TR, 1, "standard input is not UTF-8 text", "exit 1",
         stdin=b"Ein Hund \xe4\n"),
    # Issue 33, CTranslate2
    Case("export-ct2-word-run", RUN_FILES, ("export-ct2", "--checkpoint", "run", "--out", "ct2"),
         1, "export-ct2 needs a run with the shared BPE vocabulary", "exit 1, writes nothing",
         note="run: a run with word vocabularies"),
    Case("export-ct2-into-a-file", UNWRITABLE, ("export-ct2", "--out", "notes.txt"), 1,
         "--out notes.txt: notes.txt is a file, not a folder", "exit 1 before any work",
         setup=write("notes.txt", "my notes\n"), note="notes.txt: a file"),
    Case("export-ct2-over-other-files", CLOBBER, ("export-ct2", "--out", "mine"), 1,
         "mine holds model.bin, not a CTranslate2 export's: not replaced",
         "exit 1, replaces nothing", setup=write("mine/model.bin", "another model\n"),
         note="mine/model.bin: another program's model"),
    Case("export-ct2-quantization", VALUE, ("export-ct2", "--out", "ct2", "--quantization", "int4"),
         2, "argument --quantization: invalid choice: 'int4'", "exit 2, names the choices"),
    # Issue 33, decoding with int8 weights
    Case("translate-quantize-word-run", RUN_FILES,
         ("translate", "--checkpoint", "run", "--quantize", "ct2-int8", "Hallo"), 1,
         "quantize ct2-int8 needs a run with the shared BPE vocabulary", "exit 1",
         note="run: a run with word vocabularies"),
    Case("translate-quantize-an-export", VALUE,
         ("translate", "--checkpoint", "ct2", "--quantize", "int8", "Hallo"), 2,
         "ct2 is a CTranslate2 export already (float32)", "exit 2, says how to write an int8 one",
         setup=lambda folder: ct2_folder(folder / "ct2"),
         note="ct2: written by export-ct2 (float32)"),
    Case("translate-t2t-with-ct2", CONFLICT,
         ("translate", "--checkpoint", "ct2", "--search", "t2t", "Hallo"), 2,
         "--search t2t: ct2 is a CTranslate2 export, whose search stops at k finished",
         "exit 2, names the rule CTranslate2 has", setup=lambda folder: ct2_folder(folder / "ct2"),
         note="ct2: written by export-ct2"),
    Case("translate-keep-greedy-with-ct2", CONFLICT,
         ("translate", "--checkpoint", "ct2", "--keep-greedy", "Hallo"), 2,
         "--keep-greedy: ct2 is a CTranslate2 export, whose search has no greedy hypothesis",
         "exit 2, as the parser's mistakes", setup=lambda folder: ct2_folder(folder / "ct2"),
         note="ct2: written by export-ct2"),
    Case("export-hf-word-run", RUN_FILES, ("export-hf", "--checkpoint", "run", "--out", "hf"),
         1, "export-hf needs a run with the shared BPE vocabulary", "exit 1, writes nothing",
         note="run: a run with word vocabularies"),
    Case("export-hf-over-other-files", CLOBBER, ("export-hf", "--out", "mine"), 1,
         "mine holds config.json, not a transformers export's: not replaced",
         "exit 1, replaces nothing", setup=write("mine/config.json", '{"lr": 0.1}'),
         note="mine/config.json: another program's settings"),
    Case("disk-full", DISK_FULL, ("average", "run", "--last", "1", "--out", "average.pt"), 1,
         "cannot write average.pt: No space left on device; the previous file is unchanged",
         "exit 1, names the file; the previous average.pt is kept",
         setup=copy_of_checkpoint("average.pt"), disk_full="average.pt", note="on a full disk"),
    # Issue 32, runs
    Case("train-on-a-run-in-use", IN_USE, ("train", "--resume", "--out", "run"), 1,
         "run is in use by another training job (pid ", "exit 1, names the job's pid",
         locked="run", note="run: another job trains there"),
    Case("train-over-a-run-without-checkpoints", IN_USE, (*T, "run"), 1,
         "run already holds a run (config.json, metrics.jsonl, ", "exit 1, replaces none",
         setup=without_checkpoint, note="run: a finished run whose checkpoints were deleted"),
    Case("resume-without-a-run", IN_USE,
         ("train", "--preset", "tiny", "--resume", "--out", "empty"), 1,
         "--resume: empty holds no run to resume", "exit 1, says to leave out --resume",
         setup=empty_folder("empty"), note="empty: an empty folder"),
    Case("train-over-a-run-stopped-early", IN_USE, (*T, "run"), 1,
         "run already holds a run (config.json, src_vocab.json, tgt_vocab.json): pass --resume",
         "exit 1, says to pass --resume",
         setup=lambda folder: (folder / "run" / CHECKPOINT).unlink(),
         note="run: a run stopped before its first checkpoint"),
    Case("train-diverges", DIVERGED, ("train", "--resume", "--out", "hot", "--max-steps", "12",
         "--no-progress"), 1, "training diverged at step ",
         "exit 1 at the first NaN, names the step and the value; no NaN checkpoint, no NaN in "
         "metrics.jsonl", setup=both(empty_folder("hot"), checkpoint_with(
             "hot/checkpoint-00000002.pt", lr_factor=1e9, warmup=1)),
         inject=("SMALL_DATA=1",), note="hot: a run with --set lr_factor=1e9 --set warmup=1"),
    Case("translate-a-diverged-checkpoint", DIVERGED,
         ("translate", "--checkpoint", "nan.pt", SENTENCE), 1,
         "nan.pt: the weight encoder.layers.0.self_attn.w_q.weight holds NaN",
         "exit 1, names the weight",
         setup=nan_checkpoint("nan.pt"), note="nan.pt: a checkpoint holding NaN"),
    Case("evaluate-a-diverged-checkpoint", DIVERGED, ("evaluate", "--checkpoint", "nan.pt"), 1,
         "nan.pt: the weight encoder.layers.0.self_attn.w_q.weight holds NaN",
         "exit 1, before any data",
         setup=nan_checkpoint("nan.pt"), note="nan.pt: as above"),
    Case("average-a-diverged-checkpoint", DIVERGED,
         ("average", "run", "nan.pt", "--last", "1", "--out", "avg.pt"), 1,
         "nan.pt: the weight encoder.layers.0.self_attn.w_q.weight holds NaN",
         "exit 1, writes nothing",
         setup=nan_checkpoint("nan.pt"), note="nan.pt: as above"),
    Case("world-size-not-a-number", ENVIRONMENT, (*T, "new"), 1,
         "WORLD_SIZE='two' is not an integer: run under torchrun", "exit 1, names the variable",
         env=("WORLD_SIZE=two",)),
    Case("rank-without-world-size", ENVIRONMENT, (*T, "new"), 1,
         "RANK set without WORLD_SIZE", "exit 1, names both", env=("RANK=1",)),
    Case("rank-beyond-world-size", ENVIRONMENT, (*T, "new"), 1,
         "RANK=2 is not below WORLD_SIZE=2", "exit 1, names both",
         env=("WORLD_SIZE=2", "RANK=2", "LOCAL_RANK=0", "MASTER_ADDR=localhost",
              "MASTER_PORT=29500")),
    Case("local-rank-above-rank", ENVIRONMENT, (*T, "new"), 1,
         "LOCAL_RANK=1 is above RANK=0", "exit 1, names both",
         env=("WORLD_SIZE=2", "RANK=0", "LOCAL_RANK=1", "MASTER_ADDR=localhost",
              "MASTER_PORT=29500")),
    Case("master-addr-empty", ENVIRONMENT, (*T, "new"), 1, "MASTER_ADDR is set but empty",
         "exit 1, names it", env=("WORLD_SIZE=2", "RANK=0", "LOCAL_RANK=0", "MASTER_ADDR=",
                                  "MASTER_PORT=29500")),
    Case("world-size-without-the-rest", ENVIRONMENT, (*T, "new"), 1,
         "WORLD_SIZE=2 is set without RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT",
         "exit 1, names what is missing", env=("WORLD_SIZE=2",)),
    Case("compile-without-a-compiler", MACHINE, (*T, "new", "--set", "compile=true"), 1,
         "setting compile=true: torch.compile cannot run here", "exit 1, before any file",
         inject=("PATH=/no-compiler-here", "CXX="), note="no C++ compiler on the machine"),
    Case("kernels-without-a-compiler", MACHINE, ("kernels",), 1,
         "cannot compile the attention kernels here", "exit 1, before any file; translate runs "
         "without them", inject=("PATH=/no-compiler-here", "CXX=",
                                 "ANNOTATED_TRANSFORMER_KERNELS=kernels"),  # (not the user's cache)
         note="no C++ compiler on the machine"),
    Case("config-json-cut-short", RUN_FILES, ("train", "--resume", "--out", "run"), 1,
         "run/config.json is not valid JSON (line 17 column 1", "exit 1, names the file and "
         "what is wrong", setup=edited("config.json", lambda data: data[: len(data) // 2]),
         note="run/config.json: its first half"),
    Case("config-json-unknown-setting", RUN_FILES, ("train", "--resume", "--out", "run"), 1,
         "run/config.json: unknown setting 'foo'", "exit 1, names the file and the setting",
         setup=edited("config.json", lambda data: data.replace(b"5\n}", b'5, "foo": 1\n}')),
         note='run/config.json: "foo": 1 added'),
    Case("config-json-not-utf8", RUN_FILES, ("train", "--resume", "--out", "run"), 1,
         "run/config.json is not UTF-8 text (byte 0xf6", "exit 1, names the file and the byte",
         setup=edited("config.json", lambda data: data.replace(b'"word"', b'"w\xf6rd"')),
         note="run/config.json: saved as Latin-1"),
    Case("metrics-hand-edited", RUN_FILES, ("train", "--resume", "--out", "run"), 1,
         "run/metrics.jsonl is not valid JSON (line 2 column 1", "exit 1, names the file and line",
         setup=write("run/metrics.jsonl", '{"step": 1, "kind": "train"}\n# good run\n'
                     '{"step": 2, "kind": "train"}\n'), note="run/metrics.jsonl: a note added"),
    Case("metrics-a-named-pipe", RUN_FILES, ("train", "--resume", "--out", "run"), 1,
         "run/metrics.jsonl is not a regular file (a folder, a pipe or a device): the trainer "
         "writes a file there: move it away", "exit 1, names the file, reads nothing from it",
         setup=pipe("run/metrics.jsonl"), note="run/metrics.jsonl: a named pipe", process=PIPE),
    Case("disk-full-in-torch-save", DISK_FULL,
         ("average", "run", "--last", "1", "--out", "average.pt"), 1,
         "cannot write average.pt: No space left on device; the previous file is unchanged",
         "exit 1, names the file (not PyTorch's \"unexpected pos\")",
         setup=copy_of_checkpoint("average.pt"), disk_full="average.pt",
         inject=("FULL_DISK_AT=write",), note="the disk fills up inside torch.save"),
    # Issue 32, limits and messages
    Case("alpha-1000", VALUE, (*TR, "--alpha", "1000", SENTENCE), 2,
         "argument --alpha: expected a number <= 10", "exit 2, says the length penalty overflows"),
    Case("alpha-inf", VALUE, (*TR, "--alpha", "inf", SENTENCE), 2,
         "argument --alpha: expected a number >= 0 (the paper: 0.6), got 'inf'", "exit 2"),
    Case("beam-above-vocabulary", VALUE, (*TR, "--beam", "100000", SENTENCE), 2,
         "--beam 100000: larger than the model's target vocabulary (397 tokens)",
         "exit 2 once the model is loaded, names both numbers"),
    Case("beam-beyond-64-bits", VALUE, (*TR, "--beam", "1180591620717411303424", SENTENCE), 2,
         "argument --beam: expected a positive integer up to 9,223,372,036,854,775,807",
         "exit 2, names the bound"),
    Case("translate-max-tokens-zero", VALUE, (*TR, "--max-tokens", "0", SENTENCE), 2,
         "argument --max-tokens: expected a positive integer, got '0'", "exit 2"),
    Case("translate-threads-zero", VALUE, (*TR, "--threads", "0", SENTENCE), 2,
         "argument --threads: expected a positive integer, got '0'", "exit 2"),
    Case("translate-max-tokens-huge", VALUE,
         (*TR, "--max-tokens", "1180591620717411303424", SENTENCE), 2,
         "argument --max-tokens: expected a positive integer up to 1,048,576", "exit 2"),
    Case("max-tokens-1e23", SETTING, (*T, "new", "--set", "max_tokens=1e23"), 2,
         "setting max_tokens: expected a positive integer up to 1,048,576",
         "exit 2, names the bound, creates nothing"),
    Case("max-tokens-option-1e23", SETTING, (*T, "new", "--max-tokens", "1e23"), 2,
         "argument --max-tokens: invalid int value: '1e23'", "exit 2"),
    Case("accumulate-2**70", SETTING, (*T, "new", "--accumulate", "1180591620717411303424"), 2,
         "setting accumulate: expected a positive integer up to 65,536", "exit 2"),
    Case("seed-too-big", SETTING, (*T, "new", "--seed", str(2**63)), 2,
         "setting seed: expected an integer >= 0 up to 9,223,372,036,854,775,807 (64 bits)",
         "exit 2, the seed must fit in 64 bits"),
    Case("max-len-beyond-the-table", SETTING, (*T, "new", "--set", "max_len=1000000"), 2,
         "setting max_len: expected a positive integer up to 65,536", "exit 2"),
    Case("empty-out-path", VALUE, ("average", "run", "--out", ""), 2,
         "--out '': an empty path", "exit 2 before any work"),
    Case("empty-output-path", VALUE, ("evaluate", "--checkpoint", "run", "--output", ""), 2,
         "--output '': an empty path", "exit 2, rather than writing nothing"),
    Case("empty-export-path", VALUE, ("export-onnx", "--out", " "), 2,
         "--out ' ': an empty path", "exit 2, rather than writing into the current folder"),
    Case("empty-run-folder-path", VALUE, (*T, ""), 2, "--out '': an empty path", "exit 2"),
    Case("empty-checkpoint-path", VALUE, ("translate", "--checkpoint", "", SENTENCE), 2,
         "--checkpoint '': an empty path", "exit 2"),
    Case("stdout-closed", MACHINE, (*TR, SENTENCE), 1, "standard output is closed",
         "exit 1 before any work", stdout="closed"),
    Case("stdout-closed-info", MACHINE, ("info",), 1, "standard output is closed",
         "exit 1 before any work", stdout="closed"),
    Case("stdout-full", DISK_FULL, (*TR, SENTENCE), 1,
         "standard output: No space left on device", "exit 1 before any work", stdout="full"),
    Case("stdout-full-average", DISK_FULL, ("average", "run", "--last", "1", "--out", "avg.pt"),
         1, "standard output: No space left on device", "exit 1, writes no average",
         stdout="full"),
    Case("vocab-a-named-pipe", RUN_FILES, (*TR, SENTENCE), 1,
         "run/src_vocab.json: not a regular file (a folder, a pipe or a device)",
         "exit 1, names the file, reads nothing from it", setup=pipe("run/src_vocab.json"),
         note="run/src_vocab.json: a named pipe", process=PIPE),
    Case("vocab-not-utf8", RUN_FILES, (*TR, SENTENCE), 1,
         "src_vocab.json: not UTF-8 text", "exit 1, names the file",
         setup=write("run/src_vocab.json", b'{"tokens": ["\xff\xfe"]}'),
         note="run/src_vocab.json: bytes that are not UTF-8"),
    Case("shipped-config-mismatch", RUN_FILES, ("translate", "--checkpoint", "shipped", SENTENCE),
         1, "shipped/config.json does not fit shipped/model.safetensors: "
         "encoder.layers.0.feed_forward.w_1.weight is (1024, 256) in the weights, (512, 256) by "
         "the config",
         "exit 1, names the tensor and both shapes", setup=shipped_with(d_ff=512),
         note="shipped: a save-pretrained folder whose config.json says d_ff 512"),
    Case("sums-not-sha256sum", RUN_FILES, ("translate", "--checkpoint", "shipped", SENTENCE), 1,
         "SHA256SUMS: line 1 is not a line of sha256sum", "exit 1, names the file and line",
         setup=shipped_sums("model.safetensors: ok\n"),
         note="shipped/SHA256SUMS: another program's list"),
    Case("shipped-folder-to-average", NOT_CHECKPOINT, ("average", "shipped", "--out", "avg.pt"),
         1, "shipped is a save-pretrained folder (written by save-pretrained): average needs a "
         "checkpoint or a run folder; translate, evaluate, attention and the exports read it",
         "exit 1, says what the folder is and which commands take it", setup=shipped_with(),
         note="shipped: a save-pretrained folder"),
    Case("shipped-folder-to-save-pretrained", NOT_CHECKPOINT,
         ("save-pretrained", "shipped", "--out", "again"), 1,
         "save-pretrained needs a checkpoint or a run folder; translate, evaluate, attention and "
         "the exports read it",
         "exit 1, as above", setup=shipped_with(), note="shipped: a save-pretrained folder"),
    # Issue 32, normalization
    Case("translate-only-zero-width", NOTHING, (*TR, "\u200b\u2060"), 2, "nothing to translate",
         "exit 2, as for spaces: the text is normalized first",
         note="U+200B, U+2060: zero-width characters"),
    Case("translate-bom-only-stdin", NOTHING, TR, 2, "nothing to translate", "exit 2, as above",
         stdin="\ufeff\r\n\u00a0\t\r".encode()),
    Case("translate-unicode-spaces-shipped", NOTHING, ("translate", "\u00a0\u3000\u2009"), 2,
         "nothing to translate", "exit 2, the same for the shipped (BPE) model",
         note="U+00A0, U+3000, U+2009: Unicode spaces"),
    Case("attention-only-zero-width", NOTHING,
         ("attention", "--checkpoint", "run", "--output", "a.json", "\ufeff\u200b"), 2,
         "nothing to translate: give one sentence", "exit 2",
         note="U+FEFF, U+200B: a byte-order mark, a zero-width space"),
    # Issue 35, WMT data
    Case("wmt14-archive-damaged", MISSING, WMT, 1,
         "mirror/dev.tgz: SHA256 is", "exit 1, names the archive, both checksums and their "
         "source; extracts nothing", setup=miniature_mirror(damaged="dev.tgz"),
         note="mirror: a miniature WMT whose dev.tgz is damaged"),
    Case("wmt14-archive-missing", MISSING, WMT, 1,
         "mirror/test-full.tgz: missing", "exit 1, names the archive and its address",
         setup=miniature_mirror(missing="test-full.tgz"), note="mirror: without test-full.tgz"),
    Case("wmt14-archive-a-named-pipe", MISSING, WMT, 1,
         "mirror/test-full.tgz: not a regular file; the mirror must hold test-full.tgz",
         "exit 1, names the archive, reads nothing from it",
         setup=both(miniature_mirror(missing="test-full.tgz"), pipe("mirror/test-full.tgz")),
         note="mirror: test-full.tgz a named pipe", process=PIPE),
    Case("wmt14-sides-misaligned", MISSING, WMT, 1,
         "training/europarl-v7.de-en.en has 240 sentences but training/europarl-v7.de-en.de has "
         "239", "exit 1, names both files and counts; no output, no temporary file",
         setup=miniature_mirror(misaligned="europarl-v7"),
         note="mirror: its Europarl archive lost a German line"),
    Case("wmt14-filter-not-positive", VALUE,
         ("download", "--dataset", "wmt14-en-de", "--max-ratio", "0"), 2,
         "--max-ratio 0.0: give a positive number", "exit 2 before any download"),
    Case("wmt14-onto-other-files", CLOBBER, WMT, 1,
         "wmt holds train.en, not a WMT 2014 extraction's: not replaced",
         "exit 1 before any download",
         setup=both(miniature_mirror(), write("wmt/train.en", "my text\n")),
         note="wmt/train.en: the user's file"),
    # Issue 35, either direction and the paper's presets
    Case("pair-unknown", SETTING, (*T, "new", "--set", 'pair="fr-en"'), 2,
         'setting pair: expected one of "de-en", "en-de", got "fr-en"',
         "exit 2, names the setting and the directions there are"),
    Case("pair-option-unknown", VALUE, (*T, "new", "--pair", "de-fr"), 2,
         "argument --pair: invalid choice: 'de-fr'", "exit 2, lists the directions"),
    Case("wmt14-without-text", MISSING,
         ("train", "--preset", "wmt14-base", "--data-dir", "wmt", "--out", "new"), 1,
         "wmt: holds no manifest.json, train.en, train.de", "exit 1, names the files and the "
         "command that writes them; no folder made"),
    # Issue 35, the data hookup
    Case("prepare-without-text", MISSING, ("prepare", "--data-dir", "wmt"), 1,
         "wmt: holds no manifest.json", "exit 1, names the files and the download command"),
    Case("prepare-vocab-size-zero", VALUE, ("prepare", "--vocab-size", "0"), 2,
         "argument --vocab-size: expected a positive integer, got '0'", "exit 2, names the option"),
    Case("prepare-onto-a-foreign-folder", CLOBBER,
         ("prepare", "--data-dir", "wmt", "--vocab-size", "300"), 1,
         "wmt/shards-bpe300-min2: not a prepared folder (no train.json): move it away",
         "exit 1, nothing learned or written", setup=both(miniature_text(),
         write("wmt/shards-bpe300-min2/notes.txt", "mine\n")),
         note="wmt/shards-bpe300-min2/: the user's folder"),
    Case("torchrun-before-prepare", MISSING,
         ("train", "--preset", "wmt14-base", "--data-dir", "wmt", "--out", "new"), 1,
         "wmt/shards-bpe37000-min2: missing; a job of many processes reads the BPE and shards "
         "prepared once", "exit 1, gives the prepare command; no folder made",
         setup=miniature_text(), env=("RANK=0", "WORLD_SIZE=2", "LOCAL_RANK=0",
         "MASTER_ADDR=localhost", "MASTER_PORT=29500")),
    Case("wmt14-with-word-tokens", SETTING,
         ("train", "--preset", "wmt14-base", "--tokenizer", "word", "--out", "new"), 2,
         "settings dataset and tokenizer: a wmt14-en-de run reads the shared BPE of its shards",
         "exit 2, names both settings"),
    Case("evaluate-a-split-of-another-corpus", VALUE,
         ("evaluate", "--split", "newstest2014-full"), 2,
         "--split newstest2014-full: not a split of multi30k, the corpus this model was trained on",
         "exit 2, lists the model's splits"),
    Case("evaluate-newstest2014-names-two-sets", VALUE, ("evaluate", "--split", "newstest2014"), 2,
         "--split newstest2014: there are two; say newstest2014-full (3,003 sentences",
         "exit 2, names both forms, before the model is read"),
    # Issue 35, loader workers and resume
    Case("train-workers-negative", SETTING, (*T, "new", "--workers", "-1"), 2,
         "setting loader_workers: expected an integer >= 0 up to 256, got -1",
         "exit 2, names the setting and what it accepts; no folder made"),
    Case("wmt14-resume-data-moved", MISSING, ("train", "--resume", "--out", "wmtrun"), 1,
         "wmtrun/run.json: the run's data was read from", "exit 1, names the folder and says to "
         "pass --data-dir; nothing read or written", setup=wmt_run_whose_data_moved,
         note="wmtrun: a WMT run whose data folder, wmt, was moved away"),
    # Issue 45: outputs checked before the work; a long translation
    Case("average-onto-its-input", CONFLICT, ("average", "a.pt", "--out", "a.pt"), 2,
         "--out a.pt: one of the checkpoints averaged (a.pt), which it would replace",
         "exit 2, a.pt kept", setup=copy_of_checkpoint("a.pt"), note="a.pt: a checkpoint"),
    Case("average-the-same-file-twice", VALUE, ("average", "a.pt", "a.pt", "--out", "avg.pt"),
         2, "a.pt: given twice (also as a.pt); each checkpoint is averaged once", "exit 2",
         setup=copy_of_checkpoint("a.pt"), note="a.pt: a checkpoint"),
    Case("average-a-run-and-its-checkpoint", VALUE,
         ("average", "run", f"run/{CHECKPOINT}", "--last", "1", "--out", "avg.pt"), 2,
         f"run/{CHECKPOINT}: given twice (also as run/{CHECKPOINT})",
         "exit 2, names the file the folder gave too"),
    Case("output-a-dangling-link", CLOBBER,
         ("attention", "--checkpoint", "run", "--output", "map.json", SENTENCE), 1,
         "--output map.json: a symbolic link to gone.json, which does not exist: not replaced",
         "exit 1 before any work, the link kept", setup=link("map.json", "gone.json"),
         note="map.json: a link to a file that is gone"),
    Case("output-a-named-pipe", CLOBBER,
         ("attention", "--checkpoint", "run", "--output", "map.json", SENTENCE), 1,
         "--output map.json: not a regular file (a device, a pipe or a socket)",
         "exit 1 before any work, nothing read from it", setup=pipe("map.json"),
         note="map.json: a named pipe (mkfifo)", process=PIPE),
    Case("output-a-device", CLOBBER,
         ("evaluate", "--checkpoint", "run", "--split", "val", "--output", "/dev/null"), 1,
         "--output /dev/null: not a regular file (a device, a pipe or a socket)",
         "exit 1 before translating, nothing read from it"),
    Case("export-over-a-named-pipe", CLOBBER, ("export-onnx", "--out", "mine"), 1,
         "mine holds export.json, not an ONNX export's: not replaced",
         "exit 1, nothing read from it", setup=pipe("mine/export.json"),
         note="mine/export.json: a named pipe", process=PIPE),
    Case("output-a-loop-of-links", CLOBBER, ("export-ct2", "--out", "a"), 1,
         "--out a: a loop of symbolic links (a -> b): not replaced", "exit 1 before any work",
         setup=both(link("a", "b"), link("b", "a")), note="a, b: links to each other"),
    Case("results-a-dangling-link", CLOBBER,
         ("evaluate", "--checkpoint", "run", "--split", "val", "--results", "res"), 1,
         "--results res: a symbolic link to /nowhere/res, which does not exist",
         "exit 1 before translating", setup=link("res", "/nowhere/res"),
         note="res: a link to a folder that is gone"),
    Case("export-out-under-a-file", UNWRITABLE,
         ("save-pretrained", "run", "--out", "notes.txt/model"), 1,
         "--out notes.txt/model: notes.txt is a file, not a folder",
         "exit 1 before loading anything", setup=write("notes.txt", "my notes\n"),
         note="notes.txt: the user's file"),
    Case("tag-too-long", VALUE,
         ("evaluate", "--checkpoint", "run", "--split", "val", "--results", "res",
          "--tag", "t" * 300), 2, "--tag: 300 characters make the file name",
         "exit 2 before translating, names the limit",
         shown="annotated-transformer evaluate --checkpoint run --split val --results res "
               "--tag ttt…t (300 characters)"),
    Case("evaluate-output-standard-output", VALUE,
         ("evaluate", "--checkpoint", "run", "--split", "val", "--output", "-"), 2,
         "--output -: evaluate writes a file or folder here, not to standard output",
         "exit 2 before translating; writes no file named -"),
    Case("average-out-standard-output", VALUE, ("average", "run", "--last", "1", "--out", "-"),
         2, "--out -: average writes a file or folder here, not to standard output: give its "
         "name (./- for one named -)", "exit 2 before loading anything; writes no file named -"),
    Case("download-data-dir-standard-output", VALUE, ("download", "--data-dir", "-"), 2,
         "--data-dir -: download writes a file or folder here", "exit 2; makes no folder named -"),
    Case("prepare-vocab-size-one", VALUE, ("prepare", "--vocab-size", "1"), 2,
         "--vocab-size 1: a BPE vocabulary needs room for the 4 specials",
         "exit 2 before reading anything, says the least it takes"),
    Case("chunk-zero", VALUE, (*TR, "--chunk", "0"), 2,
         "argument --chunk: expected a positive integer, got '0'",
         "exit 2, names the option and the value", stdin=b"Ein Hund rennt.\n"),
    Case("a-line-too-long", LONG, TR, 1, "line 3 has 300 tokens; this model reads at most",
         "exit 1, names the line of the input", stdin=b"Ein Hund.\n\n" + b"Hund " * 300,
         shown="(echo 'Ein Hund.'; echo; yes Hund | head -300 | paste -sd ' ') | "
               "annotated-transformer translate --checkpoint run"),
    Case("a-line-too-long-in-a-later-chunk", LONG, (*TR, "--chunk", "1"), 1,
         "line 3 has 300 tokens", "exit 1, names the line; lines 1 and 2 already written",
         stdin=b"Ein Hund.\nEin Mann.\n" + b"Hund " * 300,
         shown="(printf 'Ein Hund.\\nEin Mann.\\n'; yes Hund | head -300 | paste -sd ' ') | "
               "annotated-transformer translate --checkpoint run --chunk 1"),
    Case("not-utf8-on-a-later-line", LONG, TR, 1,
         "standard input is not UTF-8 text (line 2", "exit 1, names the line; line 1 kept",
         stdin=b"Ein Hund rennt.\n\xe4\n"),
    # issue 44: a folder written whole (item 1), a CTranslate2 export checked (items 2 and 3)
    Case("export-ct2-while-another-writes", WRITTEN_TWICE, ("export-ct2", "--out", "ct2"), 1,
         "ct2 is being written by another process (pid", "exit 1, names the writer's pid; "
         "nothing written", locked=".ct2.lock", note="another export-ct2 writes ct2"),
    Case("export-hf-while-another-writes", WRITTEN_TWICE, ("export-hf", "--out", "hf"), 1,
         "hf is being written by another process (pid", "exit 1, names the writer's pid; "
         "nothing written", locked=".hf.lock", note="save-pretrained --out hf runs"),
    Case("export-onnx-while-another-writes", WRITTEN_TWICE, ("export-onnx", "--out", "web"), 1,
         "web is being written by another process (pid", "exit 1, names the writer's pid; "
         "nothing written", locked=".web.lock", note="another export-onnx writes web"),
    Case("translate-ct2-export-stopped-midway", WRITTEN_TWICE,
         ("translate", "--checkpoint", "ct2", "Hallo"), 1,
         "ct2/model.bin: SHA-256", "exit 1, names the file whose SHA-256 export.json does not give",
         setup=ct2_copy(ct2_int8_model_bin),
         note="ct2: an export-ct2 --quantization int8 stopped after renaming model.bin"),
    Case("translate-ct2-bpe-of-another-model", RUN_FILES,
         ("translate", "--checkpoint", "ct2", "Hallo"), 1,
         "ct2/bpe.json: SHA-256", "exit 1, names the file; nothing translated",
         setup=ct2_copy(another_bpe), note="ct2: its bpe.json swapped for another model's"),
    Case("translate-ct2-without-model-bin", MISSING, ("translate", "--checkpoint", "ct2", "Hallo"),
         1, "ct2/model.bin: missing (export.json lists it)", "exit 1, names the file",
         setup=ct2_copy(lambda ct2: (ct2 / "model.bin").unlink()),
         note="ct2: an export without model.bin"),
    Case("translate-ct2-cut-model-bin", RUN_FILES, ("translate", "--checkpoint", "ct2", "Hallo"),
         1, "ct2/model.bin: SHA-256", "exit 1, names the file",
         setup=ct2_copy(ct2_cut_model_bin), note="ct2: its model.bin cut in half"),
    Case("translate-ct2-without-config-json", MISSING,
         ("translate", "--checkpoint", "ct2", "Hallo"), 1,
         "ct2/config.json: missing (export.json lists it)", "exit 1, names the file",
         setup=ct2_copy(lambda ct2: (ct2 / "config.json").unlink()),
         note="ct2: an export without config.json"),
    Case("translate-ct2-record-lacks-a-key", RUN_FILES,
         ("translate", "--checkpoint", "ct2", "Hallo"), 1,
         "ct2/export.json: no key 'quantization'", "exit 1, names the file and the key",
         setup=ct2_copy(ct2_record(lambda about: about.pop("quantization"))),
         note="ct2: its export.json without quantization"),
    Case("translate-ct2-record-wrong-type", RUN_FILES,
         ("translate", "--checkpoint", "ct2", "Hallo"), 1,
         "ct2/export.json: extra_length must be int, got str", "exit 1, names the file, the key "
         "and both types", setup=ct2_copy(ct2_record(lambda about: about.update(
             extra_length="50"))), note="ct2: its export.json says extra_length \"50\""),
    Case("translate-ct2-record-without-sums", RUN_FILES,
         ("translate", "--checkpoint", "ct2", "Hallo"), 1,
         "ct2/export.json: no key 'sha256' (an older or damaged export: export again)",
         "exit 1, says to export again", setup=ct2_copy(ct2_record(lambda about: about.pop(
             "sha256"))), note="ct2: written before exports recorded their files' sums"),
    # issue 44: data prepared from changed text, damaged shards and newstest files
    Case("train-on-text-rewritten-since", DERIVED, TW, 1,
         "wmt/train.en: 12,381 bytes, not the 16,744 that shards-bpe300-min2 was prepared from: "
         "the text changed since; prepare it again: annotated-transformer prepare --data-dir wmt",
         "exit 1 before any file, names the file, the sizes and the prepare command",
         setup=text_then(both(rewritten("train.en", first_lines(400)),
                              rewritten("train.de", first_lines(400)))),
         note="wmt/: prepared, then `download --max-length 6` rewrote train.en and train.de"),
    Case("train-on-text-replaced-same-size", DERIVED, TW, 1,
         "that shards-bpe300-min2 was prepared from: the text changed since; prepare it again",
         "exit 1 before any file, names the file and both SHA-256s",
         setup=text_then(rewritten("train.de", lambda data: data.replace(b"e", b"E", 1))),
         note="wmt/train.de: one letter changed since prepare, the size the same"),
    Case("train-on-a-folder-of-the-previous-version", DERIVED, TW, 1,
         "wmt/shards-bpe300-min2/train.json: records no fingerprints of the text it was "
         "prepared from (an earlier version prepared it); prepare it again",
         "exit 1 before any file, gives the prepare command (which prepares it again)",
         setup=text_then(rewritten("shards-bpe300-min2/train.json", without_key("sources"))),
         note="wmt/shards-bpe300-min2/: prepared by 0.2.0, without fingerprints"),
    Case("prepare-with-a-vocabulary-changed-since", DERIVED, PW, 1,
         "wmt/shards-bpe300-min2: train.json was written with another BPE than bpe.json",
         "exit 1, names the folder; nothing replaced",
         setup=text_then(another_vocabulary),
         note="wmt/shards-bpe300-min2/bpe.json: replaced by another vocabulary"),
    Case("prepare-shard-description-lacks-keys", MISSING, PW, 1,
         "wmt/shards-bpe300-min2/train.json: lacks pairs: the shard is damaged",
         "exit 1, names the file and the missing key",
         setup=text_then(rewritten("shards-bpe300-min2/train.json", without_key("pairs"))),
         note="wmt/shards-bpe300-min2/train.json: its pairs deleted"),
    Case("prepare-offsets-short", MISSING, PW, 1,
         "wmt/shards-bpe300-min2/train.en.offsets.npy: 535 offsets (int64), expected 540 "
         "integers (539 pairs + 1, from train.json)", "exit 1, names the file and both counts",
         setup=text_then(rewritten("shards-bpe300-min2/train.en.offsets.npy",
                                   offsets_short_by(5))),
         note="wmt/shards-bpe300-min2/train.en.offsets.npy: 5 offsets short"),
    Case("prepare-offsets-cut-mid-array", MISSING, PW, 1,
         "wmt/shards-bpe300-min2/train.de.offsets.npy: not a whole offsets array (mmap length "
         "is greater than file size)", "exit 1, names the file",
         setup=text_then(rewritten("shards-bpe300-min2/train.de.offsets.npy",
                                   lambda data: data[:1000])),
         note="wmt/shards-bpe300-min2/train.de.offsets.npy: cut at byte 1,000"),
    Case("train-newstest-misaligned", MISSING, TW, 1,
         "wmt/newstest2013.en and wmt/newstest2013.de are not aligned: one ends at line 20",
         "exit 1 before any file, names both files and the line",
         setup=text_then(rewritten("newstest2013.de", first_lines(20)), prepare=False),
         note="wmt/newstest2013.de: its first 20 lines only"),
    Case("train-newstest-not-utf8", MISSING, TW, 1,
         "wmt/newstest2013.en: line 1 is not UTF-8 text (invalid continuation byte",
         "exit 1 before any file, names the file and the line",
         setup=text_then(rewritten("newstest2013.en", lambda data: b"M\xe4nner\n" + data),
                         prepare=False),
         note="wmt/newstest2013.en: a Latin-1 line first"),
    # issue 44: a damaged or foreign model folder is one line (item 3)
    Case("ct2-export-to-export-ct2", FOREIGN,
         ("export-ct2", "--checkpoint", "ct2", "--out", "again"), 1,
         "ct2 is a CTranslate2 export (written by export-ct2): export-ct2 needs a checkpoint, a "
         "run folder or a save-pretrained folder", "exit 1 before any work, says what the "
         "command reads and what reads the folder", setup=export_of("export-ct2", "ct2"),
         note="ct2: written by export-ct2"),
    Case("ct2-export-to-export-hf", FOREIGN, ("export-hf", "--checkpoint", "ct2", "--out", "hf"),
         1, "ct2 is a CTranslate2 export (written by export-ct2): export-hf needs a checkpoint",
         "exit 1, as above", setup=export_of("export-ct2", "ct2"),
         note="ct2: written by export-ct2"),
    Case("ct2-export-to-export-onnx", FOREIGN,
         ("export-onnx", "--checkpoint", "ct2", "--out", "web"), 1,
         "ct2 is a CTranslate2 export (written by export-ct2): export-onnx needs a checkpoint",
         "exit 1, as above", setup=export_of("export-ct2", "ct2"),
         note="ct2: written by export-ct2"),
    Case("ct2-export-to-attention", FOREIGN,
         ("attention", "--checkpoint", "ct2", "--output", "a.json", SENTENCE), 1,
         "ct2 is a CTranslate2 export (written by export-ct2): attention needs a checkpoint",
         "exit 1, as above", setup=export_of("export-ct2", "ct2"),
         note="ct2: written by export-ct2"),
    Case("ct2-export-to-evaluate", FOREIGN,
         ("evaluate", "--checkpoint", "ct2", "--results", "results"), 1,
         "ct2 is a CTranslate2 export (written by export-ct2): evaluate needs a checkpoint",
         "exit 1 before translating, not after printing the scores; no record",
         setup=export_of("export-ct2", "ct2"), note="ct2: written by export-ct2"),
    Case("hf-export-to-translate", FOREIGN, ("translate", "--checkpoint", "hf", SENTENCE), 1,
         "hf is a transformers export (written by export-hf): translate needs a checkpoint, a run "
         "folder, a save-pretrained folder or a CTranslate2 export", "exit 1, says that "
         "transformers' MarianMTModel reads it", setup=export_of("export-hf", "hf"),
         note="hf: written by export-hf"),
    Case("onnx-export-to-evaluate", FOREIGN, ("evaluate", "--checkpoint", "web"), 1,
         "web is an ONNX export (written by export-onnx): evaluate needs a checkpoint",
         "exit 1, says that ONNX Runtime reads it", setup=onnx_record,
         note="web: written by export-onnx"),
    Case("ct2-export-to-average", FOREIGN, ("average", "ct2", "--out", "avg.pt"), 1,
         "ct2 is a CTranslate2 export (written by export-ct2): average needs a checkpoint or a "
         "run folder", "exit 1, as above", setup=export_of("export-ct2", "ct2"),
         note="ct2: written by export-ct2"),
    Case("hf-export-to-save-pretrained", FOREIGN, ("save-pretrained", "hf", "--out", "again"), 1,
         "hf is a transformers export (written by export-hf): save-pretrained needs a checkpoint "
         "or a run folder", "exit 1, writes nothing", setup=export_of("export-hf", "hf"),
         note="hf: written by export-hf"),
    Case("shipped-weights-cut-short", NOT_CHECKPOINT, (*TS, SENTENCE), 1,
         "shipped/model.safetensors: not a whole safetensors file (Error while deserializing "
         "header: incomplete metadata", "exit 1, names the file",
         setup=shipped_edited(weights=lambda data: data[: len(data) // 2]),
         note="shipped: a save-pretrained folder whose model.safetensors lost its second half, "
         "SHA256SUMS written again"),
    Case("shipped-weights-garbage-header", NOT_CHECKPOINT, (*TS, SENTENCE), 1,
         "shipped/model.safetensors: not a whole safetensors file", "exit 1, names the file",
         setup=shipped_edited(weights=lambda data: data[:8] + b"\xff" * 64 + data[72:]),
         note="shipped: its model.safetensors' header overwritten, SHA256SUMS written again"),
    Case("shipped-config-lacks-settings", RUN_FILES, (*TS, SENTENCE), 1,
         'shipped/config.json: lacks the key "config"', "exit 1, names the file and the key",
         setup=shipped_edited(about=lambda about: about.pop("config") and None),
         note="shipped: its config.json without the run's settings, SHA256SUMS written again"),
    Case("shipped-config-origin-a-list", RUN_FILES, (*TS, SENTENCE), 1,
         'shipped/config.json: "origin" is a list, expected an object',
         "exit 1, names the file, the key and both types",
         setup=shipped_edited(about=lambda about: about | {"origin": [1]}),
         note="shipped: its config.json's origin a list, SHA256SUMS written again"),
    Case("shipped-weights-not-finite", DIVERGED, (*TS, SENTENCE), 1,
         "shipped/model.safetensors: the weight encoder.layers.0.feed_forward.w_1.bias holds NaN",
         "exit 1, names the weight", setup=shipped_edited(weights=a_weight_nan),
         note="shipped: a NaN weight, SHA256SUMS written again"),
    Case("shipped-d-model-too-large", RUN_FILES, (*TS, SENTENCE), 1,
         "shipped/config.json does not fit shipped/model.safetensors: "
         "src_embed.0.embedding.weight is (8000, 256) in the weights, (8000, 4194304) by the "
         "config", "exit 1 before the model is built: nothing allocated",
         setup=shipped_with(d_model=4194304), note="shipped: its config.json says d_model "
         "4194304, SHA256SUMS written again"),
    Case("shipped-n-too-large", RUN_FILES, (*TS, SENTENCE), 1,
         "N is 100000 by the config, the weights hold 3 encoder and 3 decoder layers",
         "exit 1 before the model is built", setup=shipped_with(N=100000),
         note="shipped: its config.json says N 100000, SHA256SUMS written again"),
    Case("checkpoint-model-a-list", NOT_CHECKPOINT, ("translate", "--checkpoint", "crafted.pt",
         SENTENCE), 1, "crafted.pt: the checkpoint's model is a list, expected a dict of names "
         "and tensors", "exit 1, names the part and both types",
         setup=crafted_checkpoint("crafted.pt", model=[1, 2]),
         note="crafted.pt: a checkpoint whose weights are a list"),
    Case("checkpoint-train-state-a-string", NOT_CHECKPOINT,
         ("average", "crafted.pt", "--out", "avg.pt"), 1,
         "crafted.pt: the checkpoint's train_state is a string, expected a dict of integer",
         "exit 1, as above; no average", setup=crafted_checkpoint("crafted.pt", train_state="2"),
         note="crafted.pt: a checkpoint whose counters are a string"),
    Case("checkpoint-averaged-from-a-string", NOT_CHECKPOINT,
         ("evaluate", "--checkpoint", "crafted.pt", "--results", "results"), 1,
         "crafted.pt: the checkpoint's averaged_from is a string", "exit 1 before translating, "
         "not a record citing it", setup=crafted_checkpoint("crafted.pt", averaged_from="x"),
         note="crafted.pt: a checkpoint whose list of averaged steps is a string"),
    Case("out-of-memory-real", MACHINE, (*TR, SENTENCE), 1,
         "out of memory while running translate: lower --max-tokens (now 8192) or --beam "
         "(now 4); 16,384.0 GiB asked for at once", "exit 1, names the options to lower",
         inject=("REAL_OUT_OF_MEMORY=1",),
         note="decoding asks PyTorch for 2^44 bytes, which it cannot allocate"),
    Case("argument-not-utf8", MACHINE, (*TR, os.fsdecode(b"M\xe4nner")), 1,
         "argument 1 is not UTF-8 text (byte 0xe4 at character 2)", "exit 1, as for standard "
         "input", note="\\xe4: ä in Latin-1"),
    # issue 60: writes through links and into the package
    Case("export-lock-a-link-to-a-file", CLOBBER,
         ("export-ct2", "--checkpoint", "shipped", "--out", "L3"), 1,
         ".L3.lock: a symbolic link (to victim.txt), which is not followed",
         "exit 1, victim.txt unchanged (it got the exporter's pid)",
         setup=both(shipped_with(), write("victim.txt", "precious\n"),
                    link(".L3.lock", "victim.txt")),
         note="shipped: a copy of the shipped model; .L3.lock: a link to the user's victim.txt, "
              "planted as the lock of L3"),
    Case("export-lock-a-link-to-a-missing-file", CLOBBER,
         ("export-ct2", "--checkpoint", "shipped", "--out", "L3"), 1,
         ".L3.lock: a symbolic link (to gone.txt), which is not followed",
         "exit 1, gone.txt not made (it was)", setup=both(shipped_with(), link(".L3.lock",
         "gone.txt")), note="shipped: as above; .L3.lock: a link to a file that is not there"),
    Case("train-lock-a-link", CLOBBER, ("train", "--resume", "--out", "run"), 1,
         "run/train.lock: a symbolic link (to ../victim.txt), which is not followed",
         "exit 1 before any work, victim.txt unchanged",
         setup=both(write("victim.txt", "precious\n"), link("run/train.lock", "../victim.txt")),
         note="run/train.lock: a link to the user's victim.txt"),
    Case("save-pretrained-into-the-package", CLOBBER,
         ("save-pretrained", "run", "--out",
          str(Path(annotated_transformer.__file__).parent / "pretrained_model")), 1,
         "pretrained_model is inside the installed package", "exit 1 before loading anything, "
         "the shipped model kept (it was replaced, exit 0); --into-package lets the release "
         "recipe write there",
         shown="annotated-transformer save-pretrained run --out SITE/annotated_transformer/"
               "pretrained_model"),
    Case("export-onnx-into-the-package", CLOBBER,
         ("export-onnx", "--out", str(Path(annotated_transformer.__file__).parent / "web")), 1,
         "web is inside the installed package", "exit 1 before loading anything",
         shown="annotated-transformer export-onnx --out SITE/annotated_transformer/web"),
    Case("attention-into-the-package", CLOBBER,
         ("attention", "--checkpoint", "run", "--output", str(PACKAGE / "a.json"), SENTENCE), 1,
         "a.json: inside the installed package", "exit 1 before any work, the package unchanged",
         shown=f"annotated-transformer attention --checkpoint run --output "
               f"SITE/annotated_transformer/a.json '{SENTENCE}'"),
    Case("train-into-the-package", CLOBBER, (*T, str(PACKAGE / "runs" / "mine")), 1,
         "mine is inside the installed package", "exit 1 before any work, the package unchanged",
         shown="annotated-transformer train --preset tiny --out SITE/annotated_transformer/runs/"
               "mine"),
    Case("grid-into-the-package", CLOBBER, ("grid", "--only", "base", "--runs", str(PACKAGE)), 1,
         "--runs " + str(PACKAGE) + ": inside the installed package", "exit 1 before any work",
         shown="annotated-transformer grid --only base --runs SITE/annotated_transformer"),
    Case("download-into-the-package", CLOBBER, ("download", "--data-dir", str(PACKAGE / "data")),
         1, "data: inside the installed package", "exit 1, downloads nothing",
         shown="annotated-transformer download --data-dir SITE/annotated_transformer/data"),
    Case("kernels-into-the-package", CLOBBER, ("kernels",), 1,
         "is inside the installed package (",
         "exit 1 before compiling, the package unchanged",
         env=(f"ANNOTATED_TRANSFORMER_KERNELS={PACKAGE / 'kernels'}",),
         shown="ANNOTATED_TRANSFORMER_KERNELS=SITE/annotated_transformer/kernels "
               "annotated-transformer kernels"),
    Case("kernels-under-a-file", UNWRITABLE, ("kernels",), 1,
         "notes.txt ($ANNOTATED_TRANSFORMER_KERNELS): notes.txt is a file, not a folder",
         "exit 1 before compiling", setup=write("notes.txt", "my notes\n"),
         env=("ANNOTATED_TRANSFORMER_KERNELS=notes.txt",), note="notes.txt: the user's file"),
    Case("wmt14-data-folder-under-a-file", UNWRITABLE,
         ("download", "--dataset", "wmt14-en-de", "--mirror", "mirror"), 1,
         "$ANNOTATED_TRANSFORMER_WMT14 notes.txt/wmt: notes.txt is a file, not a folder",
         "exit 1 before reading the mirror", setup=write("notes.txt", "my notes\n"),
         env=("ANNOTATED_TRANSFORMER_WMT14=notes.txt/wmt",), note="notes.txt: the user's file"),
    # issue 60: input that is not text, lines lost before an error, long lines
    Case("prepare-shard-id-outside-the-vocabulary", MISSING, PW, 1,
         "wmt/shards-bpe300-min2/train.en.ids: token 5 is id 65535, outside the vocabulary of "
         "300 pieces: the shard is damaged", "exit 1, names the file and the id; not \"already "
         "prepared\"", setup=text_then(rewritten("shards-bpe300-min2/train.en.ids",
                                                  id_at(5, 65535))),
         note="wmt/shards-bpe300-min2/train.en.ids: its sixth id made 65,535, the size the same"),
    Case("train-shard-id-outside-the-vocabulary", MISSING, TW, 1,
         "wmt/shards-bpe300-min2/train.de.ids: token 0 is id 300, outside the vocabulary of 300",
         "exit 1 before any step (not an IndexError mid-epoch), names the file",
         setup=text_then(rewritten("shards-bpe300-min2/train.de.ids", id_at(0, 300))),
         note="wmt/shards-bpe300-min2/train.de.ids: its first id made 300, one past the last"),
    Case("train-shard-offsets-a-named-pipe", MISSING, TW, 1,
         "wmt/shards-bpe300-min2/train.en.offsets.npy: not a regular file (a folder, a pipe or a "
         "device): the shard is damaged", "exit 1 before any step, reads nothing from it",
         setup=text_then(pipe("shards-bpe300-min2/train.en.offsets.npy")),
         note="wmt/shards-bpe300-min2/train.en.offsets.npy: a named pipe", process=PIPE),
    Case("prepare-shard-ids-a-named-pipe", MISSING, PW, 1,
         "wmt/shards-bpe300-min2/train.de.ids: not a regular file (a folder, a pipe or a device)",
         "exit 1, names the file; not \"None bytes\"",
         setup=text_then(pipe("shards-bpe300-min2/train.de.ids")),
         note="wmt/shards-bpe300-min2/train.de.ids: a named pipe", process=PIPE),
    Case("prepare-shard-vocab-size-edited", MISSING, PW, 1,
         "wmt/shards-bpe300-min2/train.json: vocab_size 70,000, but bpe.json holds 300 pieces",
         "exit 1, names both files",
         setup=text_then(rewritten("shards-bpe300-min2/train.json",
                                   json_key("vocab_size", 70000))),
         note="wmt/shards-bpe300-min2/train.json: its vocab_size made 70000"),
    Case("not-utf8-on-line-1015", LONG, (*TR, "--beam", "1"), 1,
         "standard input is not UTF-8 text (line 1015", "exit 1 once lines 1 to 1,014 are "
         "written", stdin=b"Ein Hund rennt.\n" * 1014 + b"M\xe4nner\n",
         shown="(yes 'Ein Hund rennt.' | head -1014; printf 'M\\xe4nner\\n') | "
               "annotated-transformer translate --checkpoint run --beam 1"),
    Case("a-line-too-long-after-others-of-its-chunk", LONG, (*TR, "--beam", "1"), 1,
         "line 15 has 300 tokens", "exit 1 once lines 1 to 14 are written",
         stdin=b"Ein Hund.\n" * 14 + b"Hund " * 300 + b"\nEin Mann.\n",
         shown="(yes 'Ein Hund.' | head -14; yes Hund | head -300 | paste -sd ' ') | "
               "annotated-transformer translate --checkpoint run --beam 1"),
    Case("an-argument-too-long-after-another", LONG,
         (*TR, "--beam", "1", SENTENCE, " ".join(["Hund"] * 300)), 1,
         "argument 2 has 300 tokens", "exit 1 once argument 1's translation is written",
         shown="annotated-transformer translate --checkpoint run --beam 1 'Ein Hund rennt.' "
               "\"$(yes Hund | head -300 | paste -sd ' ')\""),
    Case("a-20-megabyte-line", LONG, TR, 1,
         "standard input: line 2 is longer than 4,194,304 characters, more than any model reads",
         "exit 1 after reading 4 MB of it, not 20 (in time linear in what is read)",
         stdin=b"Ein Hund.\n" + b"Hund " * 4_000_000, process="20 MB on standard input",
         shown="(echo 'Ein Hund.'; yes Hund | head -4000000 | paste -sd ' ') | "
               "annotated-transformer translate --checkpoint run"),
    Case("a-line-of-more-characters-than-the-model-reads", LONG, TR, 1,
         "line 1 has 50,000 characters, more than this model's 255 tokens can hold (16,320: at "
         "most 64 characters a token)", "exit 1 before it is tokenized",
         stdin=b"Hundeh\xc3\xbctte" * 5000 + b"\n",
         shown="(yes Hundehütte | head -5000 | paste -sd '') | "
               "annotated-transformer translate --checkpoint run"),
    # issue 60: sizes and threads without a bound, settings that mislead
    Case("train-n-100000", MACHINE, (*T, "new", "--set", "N=100000"), 1,
         "settings N=100000, d_model=64, d_ff=256: a model of 11,596,800,000 parameters needs "
         "185,548,800,000 bytes (172.8 GiB) for its weights, gradients and Adam's two moments",
         "exit 1 at once, before any data is read: names the sizes, the bytes needed and the "
         "bytes there are"),
    Case("train-d-model-1048576", MACHINE, (*T, "new", "--set", "d_model=1048576"), 1,
         "settings N=2, d_model=1048576, d_ff=256: a model of 26,390,451,717,120 parameters",
         "exit 1 at once, not the out-of-memory advice to lower --max-tokens"),
    Case("translate-threads-1024", VALUE, (*TR, "--threads", "1024", SENTENCE), 2,
         "argument --threads: expected at most", "exit 2, names the cores this process may run "
         "on, before the model is read"),
    Case("evaluate-threads-more-than-the-cores", VALUE,
         ("evaluate", "--checkpoint", "run", "--threads", str(2**20)), 2,
         "the cores this process may run on (more would only wait for them)", "exit 2, as above"),
    Case("train-out-ct2-export", FOREIGN, (*T, "ct2"), 1,
         "--out ct2 is a CTranslate2 export (written by export-ct2), not a run folder",
         "exit 1, says what the folder is, not \"unknown setting 'add_source_bos'\"",
         setup=export_of("export-ct2", "ct2"), note="ct2: written by export-ct2"),
    Case("train-resume-ct2-export", FOREIGN, ("train", "--resume", "--out", "ct2"), 1,
         "--out ct2 is a CTranslate2 export (written by export-ct2), not a run folder",
         "exit 1, as above", setup=export_of("export-ct2", "ct2"),
         note="ct2: written by export-ct2"),
    Case("train-out-save-pretrained", FOREIGN, (*T, "shipped"), 1,
         "--out shipped is a save-pretrained folder (written by save-pretrained), not a run "
         "folder", "exit 1, as above", setup=shipped_with(),
         note="shipped: a copy of the model that ships with the package"),
    Case("train-max-len-1", SETTING, (*T, "new", "--set", "max_len=1"), 2,
         "setting max_len: max_len=1 leaves no room for any sentence: a target takes <s>, at "
         "least one token and </s>, so max_len must be at least 3",
         "exit 2 before any data is read, not \"no examples to batch\""),
    Case("train-max-len-2", SETTING, (*T, "new", "--set", "max_len=2", "--max-tokens", "64"), 2,
         "setting max_len: max_len=2 leaves no room for any sentence", "exit 2, as above"),
    # issues 59 and 60: one door to a model, records that name their model
    Case("t2t-with-keep-greedy", CONFLICT, (*TR, "--search", "t2t", "--keep-greedy", SENTENCE),
         2, "keep_greedy goes with the k-finished search, not with search='t2t' (--keep-greedy "
         "with --search t2t)", "exit 2 before the model is read (it was exit 1, after)"),
    Case("mirror-sftp", VALUE, ("download", "--dataset", "wmt14-en-de", "--data-dir", "wmt",
         "--mirror", "sftp://example.org/wmt"), 2,
         "--mirror sftp://example.org/wmt: sftp:// is not read here; give a folder",
         "exit 2, names the URL schemes it reads (it asked for paramiko)"),
    Case("ct2-record-edited", RUN_FILES, ("translate", "--checkpoint", "ct2", "Hallo"), 1,
         "ct2/export.json: changed after the export wrote it (its record_sha256 no longer "
         "matches its content): export again", "exit 1, loads nothing (it loaded, then reported "
         "int8)", setup=ct2_copy(ct2_record(lambda about: about.update(quantization="int8"))),
         note="ct2: its export.json edited from float32 to int8"),
    Case("own-save-pretrained-damaged", RUN_FILES, (*TS, SENTENCE), 1,
         "the file is damaged or was changed, or the folder mixes two writes: write the folder "
         "again with save-pretrained",
         "exit 1, names the file; not \"reinstall the package\" for a user's own folder",
         setup=both(shipped_with(), write("shipped/bpe.json", "{}")),
         note="shipped: a save-pretrained folder whose bpe.json was replaced"),
    Case("average-an-average-and-its-member", RUN_FILES,
         ("average", "avg.pt", f"run/{CHECKPOINT}", "--out", "again.pt"), 1,
         "both hold step 2", "exit 1, says the step would count twice", setup=averaged("avg.pt"),
         note="avg.pt: an average of run's last checkpoint"),
]  # fmt: skip


def reliability_table() -> str:
    """CASES as README's markdown table: bad input | example | what you get."""
    rows = ["| bad input | example | what you get |", "| --- | --- | --- |"]
    for case in CASES:
        example = f"`{case.example()}`" + (f" ({case.note})" if case.note else "")
        rows.append(f"| {case.kind} | {example.replace('|', chr(92) + '|')} | {case.you_get} |")
    return "\n".join(rows) + "\n"


# --- running a case ------------------------------------------------------------------------------

FULL_DISK = '''\
"""Loaded by a test's subprocess only: os.fsync fails for one file, as on a full disk."""
import errno
import os

_fsync = os.fsync


def fsync(fd):
    if os.environ["FULL_DISK_FILE"] in os.readlink(f"/proc/self/fd/{fd}"):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    return _fsync(fd)


os.fsync = fsync

if os.environ.get("FULL_DISK_AT") == "write":  # a write fails (inside torch.save too), not fsync
    import builtins
    import io

    _open = builtins.open

    class _FullDisk(io.FileIO):
        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def _full_open(file, mode="r", *args, **kwargs):
        if isinstance(file, int) and "w" in mode and "b" in mode and (
            os.environ["FULL_DISK_FILE"] in os.readlink(f"/proc/self/fd/{file}")
        ):
            return io.BufferedWriter(_FullDisk(file, "w"))
        return _open(file, mode, *args, **kwargs)

    builtins.open = _full_open

if os.environ.get("SMALL_DATA"):  # every split: a few sentences, not Multi30k
    from annotated_transformer.data import multi30k as _multi30k

    _PAIRS = [("Ein Hund rennt über die Wiese.", "A dog runs across the meadow."),
              ("Eine Frau lacht.", "A woman laughs."), ("Ein Mann fährt Rad.", "A man rides.")] * 8
    _multi30k.read_split = lambda split, data_dir=None, pair="de-en": list(_PAIRS)

if os.environ.get("REAL_OUT_OF_MEMORY"):  # decoding asks for 2^44 bytes: PyTorch's own error
    import torch
    from annotated_transformer import translator as _translator

    def _allocate(*args, **kwargs):
        torch.empty(2**44, dtype=torch.uint8)  # (where memory is overcommitted, 2^60 fails)
        return torch.empty(2**60, dtype=torch.uint8)

    _translator.translate_ids = _allocate
'''


@pytest.fixture(scope="session")
def full_disk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder whose sitecustomize.py makes a subprocess's disk full for one file."""
    folder = tmp_path_factory.mktemp("full-disk")
    (folder / "sitecustomize.py").write_text(FULL_DISK, encoding="utf-8")
    return folder


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A scratch folder holding `run`: a copy of the tiny 0.1.0 run (never the fixture itself)."""
    shutil.copytree(FIXTURE, tmp_path / "run")
    return tmp_path


def package_files() -> list[str]:
    """The files and folders of the installed package (not Python's bytecode caches)."""
    return sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if "__pycache__" not in path.parts
    )


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder`, with the SHA-256 of its bytes."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def settings(case: Case, full_disk: Path) -> dict[str, str]:
    """The environment variables a row sets: the data folder, its `env`, and its `inject` with
    the sitecustomize.py that reads them (a subprocess's)."""
    from annotated_transformer.data import multi30k

    local = multi30k.local_dir()
    # Data from the local copy; with none, a folder that is not there rather than a download.
    env = {multi30k.DATA_DIR_ENV: str(local) if local else str(ROOT / "no-multi30k-here")}
    if case.disk_full or case.inject:
        path = os.environ.get("PYTHONPATH")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(full_disk), path]))
        env["FULL_DISK_FILE"] = case.disk_full or "no file"
    for setting in (*case.env, *case.inject):
        name, _, value = setting.partition("=")
        env[name] = value
    return env


def skip_where_it_cannot_run(case: Case) -> None:
    if case.needs_no_cuda:
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    if case.disk_full and not Path("/proc/self/fd").is_dir():
        pytest.skip("the full disk is simulated through /proc/self/fd")
    if case.stdout == "full" and not Path("/dev/full").exists():
        pytest.skip("no /dev/full")


def run_case(case: Case, folder: Path, full_disk: Path) -> subprocess.CompletedProcess:
    """`python -m annotated_transformer *argv` in a process of its own."""
    skip_where_it_cannot_run(case)
    closed = [fd for fd, shut in ((0, case.stdin is None), (1, case.stdout == "closed")) if shut]
    with open(os.devnull if case.stdout != "full" else "/dev/full", "wb") as sink:
        result = subprocess.run(
            [sys.executable, "-m", "annotated_transformer", *case.argv],
            cwd=folder, env={**os.environ, **settings(case, full_disk)}, timeout=300,
            input=case.stdin, stdout=sink if case.stdout else subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=(lambda: [os.close(fd) for fd in closed]) if closed else None,
        )  # fmt: skip
    if result.stdout is None:
        result.stdout = b""
    return result


# Python's own warning filters (no -W, no PYTHONWARNINGS): what a fresh interpreter shows.
PYTHON_WARNINGS = (("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, ""),
                   ("ignore", PendingDeprecationWarning, ""), ("ignore", ImportWarning, ""),
                   ("ignore", ResourceWarning, ""))  # fmt: skip


@contextlib.contextmanager
def as_a_fresh_interpreter() -> Iterator[None]:
    """Warnings and log records on standard error, as `python -m` shows them (pytest would
    record them instead, and a row would pass here that fails as a command)."""
    import logging
    import warnings

    def show(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for action, category, module in PYTHON_WARNINGS:
            warnings.filterwarnings(action, category=category, module=module, append=True)
        warnings.showwarning = show
        root.handlers, root.level = [], logging.WARNING  # logging.lastResort: standard error
        try:
            yield
        finally:
            root.handlers, root.level = handlers, level


def process_state() -> dict[str, object]:
    """What a command could change in the interpreter that runs it and leave changed."""
    import signal
    import threading

    import torch

    stopping = (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", signal.SIGTERM))
    return {
        "cwd": os.getcwd(), "environ": dict(os.environ), "argv": list(sys.argv),
        "streams": (sys.stdin, sys.stdout, sys.stderr),
        "signal handlers": {signum: signal.getsignal(signum) for signum in stopping},
        "threads": sorted(thread.name for thread in threading.enumerate()
                          if thread.name != "tqdm_monitor"),  # (tqdm's one, for the process)
        "torch threads": torch.get_num_threads(), "grad": torch.is_grad_enabled(),
        "dtype": torch.get_default_dtype(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "descriptors": len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").is_dir() else 0,
    }  # fmt: skip


def run_in_process(
    case: Case, folder: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture
) -> subprocess.CompletedProcess:
    """`annotated-transformer *argv` in this interpreter, as `python -m annotated_transformer`
    runs it: in `folder`, with the row's environment, its standard input from a pipe, standard
    output and error captured (descriptors 1 and 2 too); an exception that escapes `main` is a
    traceback and exit status 1, as Python's. Whatever it leaves changed fails the row."""
    import threading
    import traceback

    skip_where_it_cannot_run(case)
    assert case.stdin is not None and len(case.stdin) < 65536, "(a pipe's buffer holds it)"
    before = process_state()
    read, written = os.pipe()
    os.write(written, case.stdin)
    os.close(written)
    stdin = open(read, encoding="utf-8")  # (as Python opens descriptor 0)
    capfd.readouterr()
    try:
        with monkeypatch.context() as patch, as_a_fresh_interpreter():
            patch.chdir(folder)
            for name, value in settings(case, Path("no sitecustomize")).items():
                patch.setenv(name, value)
            patch.setattr(sys, "stdin", stdin)
            patch.setattr(sys, "argv", [str(MAIN), *case.argv])
            try:
                status = cli.main(list(case.argv))
            except SystemExit as exit:  # (argparse)
                status = exit.code
            except Exception:
                traceback.print_exc()
                status = 1
            if status is not None and not isinstance(status, int):  # as sys.exit(main()) does
                print(status, file=sys.stderr)
                status = 1
        for thread in threading.enumerate():  # translate's reader of standard input
            if thread.name == "stdin":
                thread.join(timeout=30)
    finally:
        stdin.close()
    out, err = capfd.readouterr()
    after = process_state()
    assert after == before, {key: (before[key], after[key]) for key in before
                             if after[key] != before[key]}  # fmt: skip
    return subprocess.CompletedProcess(case.argv, status or 0, out.encode(), err.encode())


@contextlib.contextmanager
def holding(run_dir: Path) -> Iterator[None]:
    """Hold the lock of `run_dir` as a training job does (this process's pid in train.lock)."""
    import fcntl

    path = run_dir if run_dir.name.endswith(".lock") else run_dir / "train.lock"  # (issue 44)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


def check_one_error_line(stderr: str, status: int, message: str, logs: bool = False) -> None:
    """Exactly one error line, the last, holding `message`; before it, only argparse's usage
    (or, with `logs`, what a training run logs before it fails)."""
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(ERROR)]
    assert len(errors) == 1 and lines[-1] == errors[0], stderr
    assert message in errors[0], stderr
    if len(lines) > 1 and not logs:  # argparse prints its usage first, "usage: ...", indented
        assert status == 2 and lines[0].startswith("usage: "), stderr


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_bad_input_gets_one_line_and_loses_nothing(case, folder, full_disk, monkeypatch, capfd):
    if case.setup is not None:
        case.setup(folder)
    package = package_files() if case.id.endswith("into-the-package") else None
    with holding(folder / case.locked) if case.locked else contextlib.nullcontext():
        before = snapshot(folder)
        if case.needs():
            result = run_case(case, folder, full_disk)
        else:
            result = run_in_process(case, folder, monkeypatch, capfd)
    stdout, stderr = result.stdout.decode(), result.stderr.decode()
    assert result.returncode == case.status, stderr
    check_one_error_line(stderr, case.status, case.message, logs=case.kind == DIVERGED)
    assert "Traceback" not in stdout and "weights_only=False" not in stderr
    after = snapshot(folder)
    assert {name: after.get(name) for name in before} == before  # every file as it was
    assert not [name for name in after if name.endswith(".tmp")]  # no temporary file left
    assert package is None or package_files() == package  # nothing made in the package


# The rows that run as a subprocess, by reason; every other row runs in this interpreter. A row
# added, or changed so that it needs a process of its own (or no longer does), changes these.
IN_PROCESS_ROWS = 221
SUBPROCESS_ROWS = {
    "a standard stream closed or /dev/full (the process's own descriptors)": 5,
    "a failure injected by sitecustomize.py (FULL_DISK)": 6,
    "a lock held by another process": 4,
    "20 MB on standard input": 1,
    PIPE: 11,
}


def test_most_rows_run_in_this_interpreter_and_the_rest_in_a_process_of_their_own():
    reasons = [case.needs() for case in CASES]
    assert reasons.count("") == IN_PROCESS_ROWS
    assert {why: reasons.count(why) for why in set(reasons) - {""}} == SUBPROCESS_ROWS
    assert all(case.stdin is not None and not case.stdout for case in CASES if not case.needs())
    assert all(not (case.disk_full or case.inject or case.locked) for case in CASES
               if not case.needs())  # fmt: skip


SAME_EITHER_WAY = ["unknown-option", "vocabulary-of-another-run", "stdin-not-utf8"]


@pytest.mark.parametrize("name", SAME_EITHER_WAY)
def test_a_row_gets_the_same_in_this_interpreter_as_in_a_process(
    name, folder, full_disk, monkeypatch, capfd
):
    (case,) = [case for case in CASES if case.id == name]
    if case.setup is not None:
        case.setup(folder)
    here = run_in_process(case, folder, monkeypatch, capfd)
    there = run_case(case, folder, full_disk)
    assert (here.returncode, here.stdout) == (there.returncode, there.stdout)
    lines = [[line for line in result.stderr.decode().splitlines() if line.startswith(ERROR)]
             for result in (here, there)]  # fmt: skip
    assert lines[0] == lines[1] and len(lines[0]) == 1, lines


def test_an_exception_that_escapes_main_fails_an_in_process_row(monkeypatch, capfd, tmp_path):
    def main(argv):
        raise RuntimeError("not caught by main")

    monkeypatch.setattr(cli, "main", main)
    case = Case("raises", OPTION, ("info",), 1, "no such line", "")
    result = run_in_process(case, tmp_path, monkeypatch, capfd)
    stderr = result.stderr.decode()
    assert result.returncode == 1 and "Traceback (most recent call last)" in stderr
    assert "RuntimeError: not caught by main" in stderr
    with pytest.raises(AssertionError):
        check_one_error_line(stderr, 1, "no such line")


def test_warnings_show_and_changes_left_behind_fail_an_in_process_row(monkeypatch, capfd, tmp_path):
    import signal
    import warnings

    def warns(argv):
        warnings.warn("shown as Python shows it", UserWarning, stacklevel=1)
        print(f"{ERROR} the one line", file=sys.stderr)
        return 1

    monkeypatch.setattr(cli, "main", warns)
    case = Case("warns", OPTION, ("info",), 1, "the one line", "")
    stderr = run_in_process(case, tmp_path, monkeypatch, capfd).stderr.decode()
    assert "UserWarning: shown as Python shows it" in stderr  # as a subprocess's stderr holds it
    with pytest.raises(AssertionError):
        check_one_error_line(stderr, 1, "the one line")

    def leaves_a_handler(argv):
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        return 1

    previous = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(cli, "main", leaves_a_handler)
    try:
        with pytest.raises(AssertionError, match="signal handlers"):
            run_in_process(case, tmp_path, monkeypatch, capfd)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_table_is_well_formed():
    assert len({case.id for case in CASES}) == len(CASES)
    assert {case.kind for case in CASES} == set(CLASSES)
    assert all(case.status in (1, 2) for case in CASES)
    typed = {OPTION, VALUE, SETTING, CONFLICT, NOTHING}
    assert all((case.status == 2) == (case.kind in typed) for case in CASES)
    assert all("|" not in case.you_get and "|" not in case.kind for case in CASES)


def test_readme_holds_the_reliability_table():
    text = README.read_text(encoding="utf-8")
    assert TABLE_START in text and TABLE_END in text
    inside = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    assert inside.strip("\n") == reliability_table().strip("\n"), (
        "README's reliability table is not the one generated from tests/test_cli_errors.py: "
        "paste what `cd tests && python -c 'import test_cli_errors as t; "
        "print(t.reliability_table())'` prints"
    )


# --- one test per class of error, in this process ------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    """`annotated-transformer *argv` in this process: its exit status, stdout and stderr."""
    try:
        code = cli.main(list(argv))
    except SystemExit as exit:  # argparse's own errors (and --help) exit
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def fails(capsys: pytest.CaptureFixture, status: int, message: str, *argv: str) -> str:
    """Run a command that must fail with `status` and one error line holding `message` (after
    what `train` logs, if it got as far as logging)."""
    code, _, err = run_cli(capsys, *argv)
    assert code == status, err
    check_one_error_line(err, status, message, logs=argv[:1] == ("train",))
    return err


# Sentences enough to train and translate a few steps on, without Multi30k.
PAIRS = [
    ("Ein Hund rennt über die Wiese.", "A dog runs across the meadow."),
    ("Eine Frau lacht.", "A woman laughs."),
    ("Zwei Kinder spielen im Park.", "Two children play in the park."),
    ("Ein Mann fährt Fahrrad.", "A man rides a bike."),
] * 8
TINY = (
    "--preset", "tiny", "--max-steps", "1", "--set", "N=1", "--set", "d_model=16", "--set", "h=2",
    "--set", "d_ff=32", "--set", "min_freq=1", "--no-progress", "--device", "cpu",
)  # fmt: skip


@pytest.fixture
def small_data(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every split is PAIRS, and every data file a stand-in: no Multi30k read or downloaded."""
    from annotated_transformer.data import multi30k
    from annotated_transformer.evaluation import scores

    reference = tmp_path_factory.mktemp("data") / "reference.en"
    reference.write_text("".join(english + "\n" for _, english in PAIRS), encoding="utf-8")
    for module in (multi30k, scores):
        monkeypatch.setattr(
            module, "read_split", lambda split, data_dir=None, pair="de-en": list(PAIRS)
        )
        monkeypatch.setattr(module, "fetch", lambda split, lang, data_dir=None: reference)


def work(*args: object, **kwargs: object) -> None:
    raise AssertionError("work began before the inputs and outputs were checked")


@pytest.fixture
def no_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading, downloading or training on data fails the test."""
    from annotated_transformer.data import multi30k
    from annotated_transformer.evaluation import scores
    from annotated_transformer.training import run as trainer

    for module, name in ((multi30k, "read_split"), (multi30k, "fetch"), (scores, "read_split"),
                         (trainer, "prepare_data"), (multi30k, "download")):  # fmt: skip
        monkeypatch.setattr(module, name, work)


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch, no_data: None) -> None:
    """Reading a checkpoint or data, or translating, fails the test: outputs come first."""
    from annotated_transformer.runs.saved_run import SavedRun

    monkeypatch.setattr(SavedRun, "load", work)


def full_disk_for(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Writing a file called `name` (its temporary file, `.NAME.*.tmp`) fails: a full disk."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("the full disk is simulated through /proc/self/fd")
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).startswith(f".{name}."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd)

    monkeypatch.setattr("annotated_transformer.util.atomic.os.fsync", fsync)


def temporaries(folder: Path) -> list[Path]:
    return [path for path in folder.rglob(".*.tmp")]


def test_an_unknown_command_or_option_is_exit_2(capsys):
    for argv in (
        ("train", "--out", "x"),
        ("translate", "--checkpoint", "x"),
        ("evaluate", "--checkpoint", "x"),
        ("attention", "--checkpoint", "x", "--output", "y", "z"),
        ("average", "x", "--out", "y"),
        ("grid",),
        ("download",),
        ("info",),
    ):
        fails(capsys, 2, "unrecognized arguments: --frobnicate", *argv, "--frobnicate")
    fails(capsys, 2, "invalid choice: 'evaluat'", "evaluat")
    fails(capsys, 2, "give a command")
    both_ends = ("--epochs", "1", "--max-steps", "2")
    fails(capsys, 2, "argument --max-steps: not allowed with argument --epochs",
          "train", "--preset", "tiny", "--out", "x", *both_ends)  # fmt: skip


def test_a_bad_value_for_an_option_is_exit_2_naming_the_option_and_the_value(capsys, folder):
    for command in (("translate", "Hund."), ("evaluate",), ("attention", "--output", "a", "x")):
        base = (*command, "--checkpoint", str(folder / "run"))
        for beam in ("0", "-2", "1.5", "vier"):
            fails(capsys, 2, f"argument --beam: expected a positive integer (1 is greedy "
                  f"decoding), got '{beam}'", *base, "--beam", beam)  # fmt: skip
        for alpha in ("-0.1", "inf", "nan", "viel"):
            fails(capsys, 2, f"argument --alpha: expected a number >= 0 (the paper: 0.6), got "
                  f"'{alpha}'", *base, "--alpha", alpha)  # fmt: skip
    fails(capsys, 2, "argument --last: expected a positive integer, got '-1'",
          "average", str(folder / "run"), "--last", "-1", "--out", "a.pt")  # fmt: skip
    fails(capsys, 2, "--split val2: expected one of val, test2016",
          "evaluate", "--checkpoint", "run", "--split", "val", "val2")  # fmt: skip
    fails(capsys, 2, "--tag '': the tag names files", "evaluate", "--checkpoint", "x", "--tag", "")
    fails(capsys, 2, "--jobs -1", "grid", "--jobs", "-1")


def test_a_setting_typed_wrong_is_exit_2_and_the_same_in_config_json_is_exit_1(capsys, tmp_path):
    from annotated_transformer.runs.presets import preset

    typed = [
        (("--set", 'norm_first="false"'), {"norm_first": "false"}, "setting norm_first: "
         'expected true or false, got "false" (a string)'),
        (("--dropout", "1.5"), {"dropout": 1.5}, "setting dropout: expected a number in [0, 1)"),
        (("--seed", "-1"), {"seed": -1}, "setting seed: expected an integer >= 0, got -1"),
        (("--set", "max_tokens=100"), {"max_tokens": 100}, "max_tokens=100 must be at least"),
        (("--set", "d_model=66"), {"d_model": 66}, "d_model=66 is not divisible by h=4"),
    ]  # fmt: skip
    for i, (options, changes, message) in enumerate(typed):
        out = tmp_path / f"run{i}"
        fails(capsys, 2, message, "train", "--preset", "tiny", "--out", str(out), *options)
        assert not out.exists()  # refused before anything was written
        data = preset("tiny").to_dict()
        for name, value in changes.items():
            (data["model"] if name in data["model"] else data)[name] = value
        out.mkdir()
        (out / "config.json").write_text(json.dumps(data), encoding="utf-8")
        err = fails(capsys, 1, message, "train", "--resume", "--out", str(out))
        assert err.startswith(f"{ERROR} {out / 'config.json'}: ")  # (1: the file's fault)


def test_options_that_do_not_go_together_are_exit_2(capsys, no_work):
    fails(capsys, 2, "--output takes the translations of one split", "evaluate", "--checkpoint",
          "x", "--split", "all", "--output", "all.en")  # fmt: skip
    fails(capsys, 2, "--split all stands alone", "evaluate", "--checkpoint", "x", "--split",
          "val", "all")  # fmt: skip
    fails(capsys, 2, "give --preset (tiny, small, release, base, big, wmt14-base or wmt14-big), "
          "or --resume", "train", "--out", "x", "--max-steps", "3")  # fmt: skip
    fails(capsys, 2, "give --preset", "train", "--out", "nothing-here", "--resume")


def test_nothing_to_translate_is_exit_2_before_the_model_is_loaded(capsys, monkeypatch, folder):
    from annotated_transformer.translator import Translator

    monkeypatch.setattr(Translator, "from_checkpoint", lambda *a, **k: pytest.fail("loaded"))
    run = str(folder / "run")
    for text in ("", "   ", "\n\n", " \t \n"):
        monkeypatch.setattr(sys, "stdin", io.StringIO(text))
        fails(capsys, 2, "nothing to translate", "translate", "--checkpoint", run)
    fails(capsys, 2, "nothing to translate", "translate", "--checkpoint", run, "", " ")
    fails(capsys, 2, "nothing to translate", "attention", "--checkpoint", run, "--output",
          str(folder / "a.json"), "\t")  # fmt: skip


def test_a_string_is_not_a_list_of_sentences(folder):
    from annotated_transformer.translator import Translator

    translator = Translator.from_checkpoint(folder / "run", device="cpu")
    with pytest.raises(TypeError, match=r"expected a list of sentences, got one string \('Ein"):
        translator.translate("Ein Hund rennt.")
    with pytest.raises(TypeError, match="translate\\(\\[sentence\\]\\)\\[0\\]"):
        translator.encode("Ein Hund rennt.")
    assert len(translator.translate(["Ein Hund rennt."], beam_size=1)) == 1


def test_a_missing_checkpoint_or_data_file_is_exit_1_naming_it(capsys, folder):
    (folder / "empty").mkdir()
    for argv in (("translate", "Hund."), ("evaluate",), ("attention", "--output", "a.json", "x")):
        fails(capsys, 1, "nowhere: no such checkpoint or run folder",
              *argv, "--checkpoint", str(folder / "nowhere"))  # fmt: skip
        fails(capsys, 1, "empty: no checkpoint-*.pt in this folder",
              *argv, "--checkpoint", str(folder / "empty"))  # fmt: skip
    fails(capsys, 1, "nowhere.pt: no such checkpoint",
          "average", str(folder / "run"), str(folder / "nowhere.pt"), "--out", "a.pt")  # fmt: skip
    fails(capsys, 1, "fewer than the 5 to average", "average", str(folder / "run"), "--out",
          str(folder / "a.pt"))  # fmt: skip
    fails(capsys, 1, f"{folder / 'empty' / 'val.de.gz'}: missing", "evaluate", "--checkpoint",
          str(folder / "run"), "--split", "val", "--data-dir", str(folder / "empty"))  # fmt: skip


NOT_CHECKPOINTS = {  # file: what the message says it is
    "notes.txt": "a text file",
    "random.pt": "neither a zip archive, as torch.save writes, nor text",
    "empty.pt": "an empty file",
    "photos.zip": "a zip archive of other files (dog.jpg), not one PyTorch wrote",
    "cut.pt": "a zip archive cut short or damaged",
    "evil.pt": "it holds Python objects, which could run code and are not loaded (GLOBAL",
    "weights.pt": "a PyTorch file without this package's format marker",
    "legacy.pt": "neither a zip archive, as torch.save writes, nor text",
}


def test_a_file_that_is_not_a_checkpoint_says_what_it_is(capsys, folder):
    import torch

    from annotated_transformer.runs.checkpoints import is_checkpoint, load_checkpoint

    for setup in (write("notes.txt", "Hund\n"), write("random.pt", bytes(range(256)) * 8),
                  write("empty.pt", b""), zip_of_photos, checkpoint_cut_short, pickle_of_code,
                  state_dict_of_other_code):  # fmt: skip
        setup(folder)
    torch.save({"format": "x"}, folder / "legacy.pt", _use_new_zipfile_serialization=False)
    for name, what in NOT_CHECKPOINTS.items():
        path = folder / name
        with pytest.raises(ValueError) as error:
            load_checkpoint(path)
        message = str(error.value)
        assert message.startswith(f"{path} is not a checkpoint written by annotated-transformer: ")
        assert what in message and "weights_only=False" not in message, message
        assert not is_checkpoint(path)
        err = fails(capsys, 1, what, "translate", "--checkpoint", str(path), "Hund.")
        assert "weights_only=False" not in err
    assert is_checkpoint(folder / "run" / CHECKPOINT) and not is_checkpoint(folder / "run")


def test_average_tells_bookkeeping_from_settings_that_change_the_model(capsys, folder):
    from annotated_transformer.runs.checkpoints import load_checkpoint, save_checkpoint

    def checkpoint(name: str, step: int, **settings: object) -> str:
        payload = load_checkpoint(folder / "run" / CHECKPOINT)
        del payload["path"]
        payload["config"] = {**payload["config"], **settings}
        payload["train_state"] = {**payload["train_state"], "step": step}
        save_checkpoint(folder / name, payload)
        return str(folder / name)

    # A run resumed with a larger --max-steps, logging and saving on another schedule: fine.
    a = checkpoint("a.pt", 2)
    b = checkpoint("b.pt", 9, max_steps=9, eval_every=3, save_every=3, keep=9, epochs=4)
    code, out, err = run_cli(capsys, "average", a, b, "--out", str(folder / "avg.pt"))
    assert code == 0 and "averaged 2 checkpoints (steps 2, 9)" in out, err
    assert load_checkpoint(folder / "avg.pt")["config"]["max_steps"] == 9  # the newest's
    # Settings that change the model or its training: refused, each named.
    for change, named in (
        ({"dropout": 0.3}, "dropout: 0.3 vs 0.1"),
        ({"warmup": 50, "d_ff": 64}, "d_ff: 64 vs 32; warmup: 50 vs 200"),
    ):
        c = checkpoint("c.pt", 9, **change)  # fmt: skip
        fails(capsys, 1, f"{c} and {a} differ ({named})", "average", a, c, "--out",
              str(folder / "avg2.pt"))  # fmt: skip


def test_a_run_whose_files_do_not_fit_is_exit_1_and_nothing_trains(capsys, folder, small_data):
    run = folder / "run"
    vocabulary_of_another_run(folder)
    before = snapshot(run)
    fails(capsys, 1, f"{run / 'src_vocab.json'} does not match the vocabulary inside",
          "train", "--resume", "--out", str(run), "--max-steps", "3")  # fmt: skip
    fails(capsys, 1, f"{run / 'src_vocab.json'} does not match the vocabulary inside",
          "translate", "--checkpoint", str(run), "Hund.")  # fmt: skip
    assert snapshot(run) == before  # nothing trained, nothing written
    (run / "config.json").write_text("{not json", encoding="utf-8")
    (run / "src_vocab.json").unlink()
    fails(capsys, 1, "config.json is not valid JSON (line 1 column 2: Expecting property name",
          "train", "--resume", "--out", str(run), "--max-steps", "3")  # fmt: skip


UNWRITABLE_OUTPUTS = [  # (how, the path relative to the folder, the message)
    ("a missing folder", "nowhere/out", "the folder {folder}/nowhere does not exist"),
    ("a folder", "run", "{folder}/run: a folder, not a file"),
    ("a file's child", "notes.txt/out", "the folder {folder}/notes.txt is not a folder"),
]


def test_an_output_that_cannot_be_written_is_found_before_any_work(capsys, folder, no_work):
    write("notes.txt", "Hund\n")(folder)
    run = str(folder / "run")
    for _, relative, message in UNWRITABLE_OUTPUTS:
        path, message = str(folder / relative), message.format(folder=folder)
        fails(capsys, 1, f"--output {path}", "evaluate", "--checkpoint", run, "--output", path)
        fails(capsys, 1, message, "attention", "--checkpoint", run, "--output", path, "Hund.")
        fails(capsys, 1, message, "average", run, "--last", "1", "--out", path)
    fails(
        capsys,
        1,
        f"--results {folder}/notes.txt/res: {folder}/notes.txt is a file",
        "evaluate",
        "--checkpoint",
        run,
        "--results",
        str(folder / "notes.txt" / "res"),
    )
    fails(capsys, 1, "notes.txt/run: cannot write the run there", "train", *TINY,
          "--out", str(folder / "notes.txt" / "run"))  # fmt: skip
    fails(capsys, 1, "--runs", "grid", "--only", "base", "--runs", str(folder / "notes.txt"),
          "--results", str(folder / "res"))  # fmt: skip
    if os.geteuid() != 0:  # (root may write anywhere)
        locked = folder / "locked"
        locked.mkdir(mode=0o555)
        fails(capsys, 1, f"cannot write in {locked}", "attention", "--checkpoint", run,
              "--output", str(locked / "a.json"), "Hund.")  # fmt: skip


def test_no_command_replaces_a_file_it_did_not_write(capsys, folder, small_data):
    run = folder / "run"
    write("notes.txt", "my notes\n")(folder)
    write("res/val-last-greedy.json", '{"mine": true}\n')(folder)
    before = snapshot(folder)
    notes, res = str(folder / "notes.txt"), str(folder / "res")
    fails(capsys, 1, "not an attention file", "attention", "--checkpoint", str(run), "--output",
          notes, "Hund.")  # fmt: skip
    fails(capsys, 1, "not a checkpoint written by", "average", str(run), "--last", "1",
          "--out", str(run / "tgt_vocab.json"))  # fmt: skip
    fails(capsys, 1, "not the translations of a results record", "evaluate", "--checkpoint",
          str(run), "--split", "val", "--output", notes)  # fmt: skip
    fails(
        capsys,
        1,
        "val-last-greedy.json: the file exists and is not a results record",
        "evaluate",
        "--checkpoint",
        str(run),
        "--split",
        "val",
        "--beam",
        "1",
        "--results",
        res,
    )
    fails(capsys, 1, "not a run folder", "train", *TINY, "--out", str(folder / "res"))
    assert snapshot(folder) == before
    # What it wrote, it replaces: the same commands twice.
    (folder / "res" / "val-last-greedy.json").unlink()
    for _ in range(2):
        argv = ("evaluate", "--checkpoint", str(run), "--split", "val", "--beam", "1")
        assert run_cli(capsys, *argv, "--results", res)[0] == 0
        assert (
            run_cli(capsys, *argv, "--output", str(folder / "res" / "val-last-greedy.en"))[0] == 0
        )
        assert run_cli(capsys, "attention", "--checkpoint", str(run), "--beam", "1", "--output",
                       str(folder / "a.json"), "Ein Hund.")[0] == 0  # fmt: skip
        assert (
            run_cli(capsys, "average", str(run), "--last", "1", "--out", str(run / "avg.pt"))[0]
            == 0
        )
    # A named pipe beside a record of ours is not its translations: neither read nor replaced.
    hyp = folder / "res" / "val-last-greedy.en"
    hyp.unlink()
    pipe("res/val-last-greedy.en")(folder)
    fails(capsys, 1, "val-last-greedy.en: not a regular file (a device, a pipe", "evaluate",
          "--checkpoint", str(run), "--split", "val", "--beam", "1", "--results", res)  # fmt: skip
    assert stat.S_ISFIFO(hyp.stat().st_mode)
    # A run folder may hold other files (an average, notes) and a log torn by a kill.
    write("run/notes.md", "# my run\n")(folder)
    write("run/metrics.jsonl", '{"step": 1, "kind": "train"}\n{"step": 2, "ki')(folder)
    code, _, err = run_cli(capsys, "train", "--resume", "--out", str(run), "--max-steps", "3")
    assert code == 0, err
    assert (run / "avg.pt").exists() and (run / "notes.md").exists()


def test_what_the_machine_lacks_is_exit_1(capsys, monkeypatch, folder, no_work):
    import torch

    run = str(folder / "run")
    if not torch.cuda.is_available():
        for argv in (("translate", "--checkpoint", run, "Hund."), ("evaluate", "--checkpoint", run),
                     ("attention", "--checkpoint", run, "--output", "a.json", "Hund."),
                     ("train", "--preset", "tiny", "--out", str(folder / "new")),
                     ("grid", "--only", "base")):  # fmt: skip
            fails(capsys, 1, "--device cuda: PyTorch", *argv, "--device", "cuda")
    monkeypatch.setattr(sys, "stdin", None)
    fails(capsys, 1, "standard input is closed", "translate", "--checkpoint", run)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"Ein Hund \xe4\xff\n")))
    fails(capsys, 1, "standard input is not UTF-8 text", "translate", "--checkpoint", run)


RUN_FILES_WRITTEN = ("config.json", "src_vocab.json", "tgt_vocab.json", "run.json", "metrics.jsonl",
                     "checkpoint-00000001.pt")  # fmt: skip


@pytest.mark.parametrize("name", RUN_FILES_WRITTEN)
def test_a_full_disk_while_a_run_writes_a_file_names_it(
    name, capsys, monkeypatch, tmp_path, small_data
):
    full_disk_for(monkeypatch, name)
    out = tmp_path / "new"
    fails(capsys, 1, f"cannot write {out / name}: No space left on device", "train", *TINY,
          "--out", str(out))  # fmt: skip
    assert not temporaries(tmp_path) and not (out / name).exists()


def resumable(folder: Path) -> tuple[Path, dict[str, str]]:
    """The run, with a log of its first two steps, ready to resume; and what its files hold."""
    run = folder / "run"
    lines = [{"step": 1, "kind": "train", "loss": 9.0}, {"step": 2, "kind": "train", "loss": 8.0}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return run, snapshot(run)


def test_a_full_disk_while_saving_a_checkpoint_keeps_the_previous_one(
    capsys, monkeypatch, folder, small_data
):
    run, before = resumable(folder)
    full_disk_for(monkeypatch, "checkpoint-00000003.pt")
    fails(capsys, 1, f"cannot write {run / 'checkpoint-00000003.pt'}: No space left on device; "
          f"the previous file is unchanged", "train", "--resume", "--out", str(run),
          "--max-steps", "3", "--no-progress")  # fmt: skip
    after = snapshot(run)
    assert after[CHECKPOINT] == before[CHECKPOINT] and "checkpoint-00000003.pt" not in after
    assert not temporaries(folder)


def test_a_full_disk_while_logging_leaves_the_log_whole(capsys, monkeypatch, folder, small_data):
    run, before = resumable(folder)
    real, calls = os.write, []

    def write(fd: int, data: bytes) -> int:  # a metrics line: half of it written, then no space
        if not calls and bytes(data[:8]) != b'{"step":':
            return real(fd, data)
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)
    fails(capsys, 1, f"cannot write {run / 'metrics.jsonl'}: No space left on device; its "
          f"earlier lines are unchanged", "train", "--resume", "--out", str(run),
          "--max-steps", "3", "--no-progress")  # fmt: skip
    assert len(calls) == 2 and snapshot(run)["metrics.jsonl"] == before["metrics.jsonl"]


def test_a_full_disk_while_writing_outputs_keeps_the_previous_ones(
    capsys, monkeypatch, folder, small_data
):
    run, res, attention = str(folder / "run"), folder / "res", str(folder / "a.json")
    evaluate = ("evaluate", "--checkpoint", run, "--split", "val", "--beam", "1")
    attend = ("attention", "--checkpoint", run, "--beam", "1", "--output", attention, "Hund.")
    average = ("average", run, "--last", "1", "--out", str(folder / "avg.pt"))
    for argv in ((*evaluate, "--results", str(res)), attend, average):
        assert run_cli(capsys, *argv)[0] == 0
    before, real_fsync = snapshot(folder), os.fsync
    for name, argv in (("val-last-greedy.json", (*evaluate, "--results", str(res))),
                       ("val-last-greedy.en", (*evaluate, "--results", str(res), "--beam", "1")),
                       ("new.en", (*evaluate, "--output", str(folder / "new.en"))),
                       ("a.json", attend), ("avg.pt", average)):  # fmt: skip
        monkeypatch.setattr(os, "fsync", real_fsync)
        full_disk_for(monkeypatch, name)
        fails(capsys, 1, f"{name}: No space left on device", *argv)
        assert snapshot(folder) == before and not temporaries(folder)


def test_a_resumed_run_removes_what_an_interrupted_save_left(capsys, folder, small_data):
    run = folder / "run"
    dead = subprocess.Popen(["true"])  # a process that no longer runs
    dead.wait()
    left = run / f".checkpoint-00000003.pt.written-by-{dead.pid}.k1ll3d00.tmp"
    left.write_bytes(b"half a checkpoint")
    code, _, err = run_cli(capsys, "train", "--resume", "--out", str(run), "--max-steps", "3",
                           "--no-progress")  # fmt: skip
    assert code == 0, err
    assert f"removed {left.name}, left by an interrupted save" in err
    assert not temporaries(folder) and (run / "checkpoint-00000003.pt").exists()


# Issue 32, runs: one test per class of error


def test_a_run_folder_in_use_or_holding_a_run_is_never_replaced(capsys, folder, small_data):
    run = folder / "run"
    with holding(run):
        before = snapshot(folder)
        for argv in (("--resume",), ("--preset", "tiny")):
            fails(capsys, 1, f"{run} is in use by another training job (pid {os.getpid()},",
                  "train", *argv, "--out", str(run))  # fmt: skip
        assert snapshot(folder) == before
    without_checkpoint(folder)  # a finished run whose checkpoints were deleted
    before = snapshot(folder)
    fails(capsys, 1, f"{run} already holds a run (config.json, metrics.jsonl, src_vocab.json",
          "train", *TINY, "--out", str(run))  # fmt: skip
    assert snapshot(folder) == before
    fails(capsys, 1, "holds no run to resume (no checkpoint or config.json)", "train", *TINY,
          "--resume", "--out", str(folder / "new"))  # fmt: skip
    # --resume: from its settings (config.json), from step 0 again
    code, _, err = run_cli(capsys, "train", "--resume", "--out", str(run), "--no-progress")
    assert code == 0 and (run / CHECKPOINT).exists(), err


def test_a_diverged_run_stops_and_its_checkpoints_hold_no_nan(capsys, folder, small_data):
    from annotated_transformer.runs.checkpoints import load_checkpoint

    out = folder / "hot"
    err = fails(capsys, 1, "training diverged at step ", "train", *TINY, "--out", str(out),
                "--max-steps", "40", "--set", "lr_factor=1e9", "--set", "warmup=1",
                "--set", "save_every=1", "--set", "log_every=1")  # fmt: skip
    step = int(err.split("training diverged at step ")[1].split(":")[0])
    assert [load_checkpoint(out)["train_state"]["step"]] == [step - 1]  # the last finite one
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert "NaN" not in "".join(lines) and json.loads(lines[-1])["finite"] is False
    nan_checkpoint("nan.pt")(folder)
    nan, average = str(folder / "nan.pt"), str(folder / "avg.pt")
    for argv in (
        ("translate", "--checkpoint", nan, "Hund."),
        ("average", nan, "--out", average),
        ("evaluate", "--checkpoint", nan),
    ):
        fails(
            capsys, 1, "nan.pt: the weight encoder.layers.0.self_attn.w_q.weight holds NaN", *argv
        )
    assert not (folder / "avg.pt").exists()


def test_torchruns_variables_that_do_not_fit_are_refused_before_any_file(
    capsys, monkeypatch, tmp_path
):
    out = tmp_path / "new"
    for variables, message in (
        ({"WORLD_SIZE": "two"}, "WORLD_SIZE='two' is not an integer"),
        ({"RANK": "0", "LOCAL_RANK": "0"}, "RANK, LOCAL_RANK set without WORLD_SIZE"),
        ({"WORLD_SIZE": "4", "RANK": "1", "LOCAL_RANK": "2", "MASTER_ADDR": "node1",
          "MASTER_PORT": "29500"}, "LOCAL_RANK=2 is above RANK=1"),
    ):  # fmt: skip
        with monkeypatch.context() as patch:
            for name, value in variables.items():
                patch.setenv(name, value)
            fails(capsys, 1, message, "train", *TINY, "--out", str(out))
        assert not out.exists()


# Issue 44, data prepared from changed text: one test for the class


def test_data_prepared_from_changed_text_is_prepared_again_or_refused(capsys, tmp_path):
    """`train` refuses a folder prepared from text that changed since, before any file; `prepare`
    says so in one line and prepares it again, and then `train` reads it."""
    from annotated_transformer.data import shards

    text_then(rewritten("train.en", lambda data: data.replace(b"a", b"o", 1)))(tmp_path)
    wmt, out = tmp_path / "wmt", tmp_path / "new"
    before = snapshot(tmp_path)
    fails(capsys, 1, f"{wmt}/train.en: SHA-256 ", "train", *TW[1:4], str(wmt), "--out", str(out),
          *TW[7:])  # fmt: skip
    assert snapshot(tmp_path) == before and not out.exists()
    code, printed, err = run_cli(capsys, *PW[:2], str(wmt), *PW[3:])
    assert code == 0, err
    assert err.splitlines()[0].startswith(f"prepare: {wmt}/train.en: SHA-256 ")
    assert err.splitlines()[0].endswith("the text changed since; preparing it again")
    assert "already prepared" not in printed
    assert shards.check_prepared(shards.shard_folder(wmt, 300, 2), wmt)  # train reads it now
    assert [p.name for p in wmt.iterdir() if p.name.startswith(".")] == []


# Issue 44, damaged or foreign model folders: one test for its class


def test_a_model_folder_from_another_command_is_refused_before_any_work(capsys, folder):
    export_of("export-ct2", "ct2")(folder)
    ct2, before = str(folder / "ct2"), snapshot(folder)
    outputs = [folder / name for name in ("web", "hf", "results", "a.json", "again", "avg.pt")]
    for argv in (
        ("export-onnx", "--checkpoint", ct2, "--out", str(outputs[0])),
        ("export-hf", "--checkpoint", ct2, "--out", str(outputs[1])),
        ("evaluate", "--checkpoint", ct2, "--results", str(outputs[2])),
        ("attention", "--checkpoint", ct2, "--output", str(outputs[3]), "Hund."),
        ("save-pretrained", ct2, "--out", str(outputs[4])),
        ("average", ct2, "--out", str(outputs[5])),
    ):
        fails(capsys, 1, f"{ct2} is a CTranslate2 export (written by export-ct2): {argv[0]} "
              "needs", *argv)  # fmt: skip
    assert snapshot(folder) == before and not any(path.exists() for path in outputs)
    code, out, err = run_cli(capsys, "translate", "--checkpoint", ct2, "Ein Hund rennt.")
    assert code == 0 and out.strip(), err  # translate reads it


# --- every subcommand, and the help --------------------------------------------------------------

BAD_INPUTS = {  # for each subcommand, inputs it must refuse in one line (and never a traceback)
    "train": [["--preset", "tiny"], ["--out", "x", "--preset", "tiny", "--set", "=1"],
              ["--out", "x", "--preset", "tiny", "--set", "N=null"],
              ["--out", "x", "--preset", "tiny", "--set", "model=3"],
              ["--out", "x", "--preset", "tiny", "--accumulate", "0"],
              ["--out", "x", "--preset", "tiny", "--max-tokens", "-5"],
              ["--out", "x", "--preset", "tiny", "--set", "lr_factor=-1"],
              ["--out", "notes.txt", "--preset", "tiny"], ["--out", "run", "--resume",
              "--set", "d_model=20"], ["--out", "run", "--resume", "--epochs", "0"]],
    "translate": [[], ["--checkpoint"], ["--checkpoint", "notes.txt", "x"],
                  ["--checkpoint", "run", "--beam", ""], ["--checkpoint", "run", "--device", "tpu"],
                  ["--checkpoint", "run", " ".join(["Hund"] * 300)]],
    "evaluate": [["--checkpoint", "run", "--split"], ["--checkpoint", "run", "--split", "train"],
                 ["--checkpoint", "run", "--tag", ".hidden", "--results", "r"],
                 ["--checkpoint", "notes.txt"], ["--checkpoint", "run", "--output", "run"]],
    "attention": [["--checkpoint", "run", "x"], ["--checkpoint", "run", "--output", "a.json"],
                  ["--checkpoint", "run", "--output", "notes.txt", "x"],
                  ["--checkpoint", "run", "--output", "a.json", " ".join(["Hund"] * 300)]],
    "average": [["--out", "a.pt"], ["run", "--out", "run/checkpoint-00000001.pt"],
                ["notes.txt", "--out", "a.pt"], ["run", "run", "--last", "1", "--out", "run"],
                ["run", "--last", "x", "--out", "a.pt"]],
    "grid": [["--profile", "huge"], ["--only"], ["--jobs", "x"], ["--only", "base", "--results",
             "notes.txt"]],
    "download": [["--data-dir"], ["--data-dir", "notes.txt"], ["--data-dir", "dl", "--x"]],
    "info": [["--verbose"], ["extra"]],
    "prepare": [["--vocab-size", "0"], ["--data-dir", "notes.txt"], ["--data-dir", "nowhere"],
                ["--min-freq", "x"]],
}  # fmt: skip


@pytest.mark.parametrize("command", sorted(BAD_INPUTS))
def test_every_subcommand_refuses_bad_input_without_a_traceback(
    command, capsys, monkeypatch, folder, no_data
):
    write("notes.txt", "Hund\n")(folder)
    monkeypatch.chdir(folder)
    for argv in BAD_INPUTS[command]:
        code, out, err = run_cli(capsys, command, *argv)  # an exception would fail the test
        assert code in (1, 2), (argv, err)
        check_one_error_line(err, code, "", logs=command == "train")
        assert "Traceback" not in out


def test_help_documents_the_exit_statuses(capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "exit status:" in text
    for status, words in (("0", "done"), ("1", "the files or the machine"),
                          ("2", "what was typed"), ("130", "interrupted")):  # fmt: skip
        assert any(line.split()[:1] == [status] and words in line for line in text.splitlines())


def test_a_folder_written_twice_at_once_is_refused_and_stays_whole(capsys, folder):
    """Issue 44: a second writer of an export folder is refused naming the first, while the
    first finishes; a folder an export left half-written is refused by its readers."""
    ct2_copy()(folder)
    with holding(folder / ".ct2.lock"), holding(folder / ".hf.lock"):
        before = snapshot(folder)
        for command, out in (("export-ct2", "ct2"), ("export-hf", "hf")):
            fails(capsys, 1, f"{out} is being written by another process (pid {os.getpid()},",
                  command, "--out", str(folder / out))  # fmt: skip
        assert snapshot(folder) == before
    ct2_int8_model_bin(folder / "ct2")
    fails(capsys, 1, "ct2/model.bin: SHA-256", "translate", "--checkpoint", str(folder / "ct2"),
          "Hallo")  # fmt: skip


def test_a_long_translation_keeps_what_it_wrote_and_names_the_line(folder):
    """Issue 45: a bad line in a later chunk stops the translation there: every line before it,
    in its own chunk too (issue 60), is written (and flushed) first, and the error names the
    line of the input, counted as the user counts them (empty lines too)."""
    lines = ["Ein Hund.", "", "Ein Mann.", "Hund " * 300, "Eine Frau."]
    done = subprocess.run(
        [sys.executable, "-m", "annotated_transformer", "translate", "--checkpoint", "run",
         "--chunk", "2"], input="\n".join(lines).encode(), capture_output=True, cwd=folder,
        timeout=300,
    )  # fmt: skip
    written = done.stdout.decode("utf-8").splitlines()
    assert done.returncode == 1 and len(written) == 3 and written[1] == ""  # lines 1 to 3
    (line,) = done.stderr.decode("utf-8").strip().splitlines()
    assert line.startswith(f"{ERROR} line 4 has 300 tokens")


CLASS_TESTS = {  # each class of error, and the test that goes further than the table
    OPTION: test_an_unknown_command_or_option_is_exit_2,
    VALUE: test_a_bad_value_for_an_option_is_exit_2_naming_the_option_and_the_value,
    SETTING: test_a_setting_typed_wrong_is_exit_2_and_the_same_in_config_json_is_exit_1,
    CONFLICT: test_options_that_do_not_go_together_are_exit_2,
    NOTHING: test_nothing_to_translate_is_exit_2_before_the_model_is_loaded,
    MISSING: test_a_missing_checkpoint_or_data_file_is_exit_1_naming_it,
    NOT_CHECKPOINT: test_a_file_that_is_not_a_checkpoint_says_what_it_is,
    RUN_FILES: test_a_run_whose_files_do_not_fit_is_exit_1_and_nothing_trains,
    UNWRITABLE: test_an_output_that_cannot_be_written_is_found_before_any_work,
    CLOBBER: test_no_command_replaces_a_file_it_did_not_write,
    MACHINE: test_what_the_machine_lacks_is_exit_1,
    DISK_FULL: test_a_full_disk_while_writing_outputs_keeps_the_previous_ones,
    IN_USE: test_a_run_folder_in_use_or_holding_a_run_is_never_replaced,
    DIVERGED: test_a_diverged_run_stops_and_its_checkpoints_hold_no_nan,
    ENVIRONMENT: test_torchruns_variables_that_do_not_fit_are_refused_before_any_file,
    LONG: test_a_long_translation_keeps_what_it_wrote_and_names_the_line,
    WRITTEN_TWICE: test_a_folder_written_twice_at_once_is_refused_and_stays_whole,
    DERIVED: test_data_prepared_from_changed_text_is_prepared_again_or_refused,
    FOREIGN: test_a_model_folder_from_another_command_is_refused_before_any_work,
}


def test_every_class_of_error_has_its_own_test():
    assert set(CLASS_TESTS) == set(CLASSES)
