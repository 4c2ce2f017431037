"""The `annotated-transformer` command line (hand-written glue, not generated from a chapter).

Subcommands are added by the parts of the book that build them (training, translation,
evaluation, ...). A mistake is one line on stderr, `annotated-transformer: error: ...`, never a
traceback, with an exit status that says whose it is: 2 for what was typed (a `UsageError`, or
argparse's own errors), 1 for what the files or the machine did (`OSError`, `ValueError`: a
missing or damaged file, an output that cannot be written, no CUDA, a full disk). Every command
checks where it will write before it reads or computes anything, and never replaces a file that
it did not write.
"""

from __future__ import annotations

import argparse
import codecs
import hashlib
import importlib.util
import io
import itertools
import json
import math
import os
import pkgutil
import platform
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from annotated_transformer import __version__
from annotated_transformer.data.multi30k import DATA_DIR_ENV
from annotated_transformer.data.vocab import normalize
from annotated_transformer.data.wmt14 import DATA_DIR_ENV as WMT14_DATA_DIR_ENV

PROG = "annotated-transformer"
# runs.presets.PRESETS, named here so that `--help` needs no torch (a test keeps them equal)
PRESET_NAMES = ("tiny", "small", "release", "base", "big", "wmt14-base", "wmt14-big")
PRESET_LIST = ", ".join(PRESET_NAMES[:-1]) + " or " + PRESET_NAMES[-1]
# decoding.simple.MAX_ALPHA and util.settings.LARGEST_INT, named here so that `--help` needs no
# torch (a test keeps them equal); the largest token budget is runs.presets' for max_tokens
MAX_ALPHA, LARGEST_INT, MAX_TOKENS = 10.0, 2**63 - 1, 1 << 20
# runs.presets' PAIRS and LANGUAGE_NAMES, named here so that `--help` needs no torch (tested)
PAIRS, LANGUAGE_NAMES = ("de-en", "en-de"), {"de": "German", "en": "English"}
EXIT_STATUS = """\
exit status:
  0      done
  1      a problem with the files or the machine: a missing or damaged checkpoint or data
         file, a bad config.json, an output that cannot be written or that would replace a
         file this tool did not write, no CUDA for --device cuda, a closed standard input,
         a full disk; train: a run folder in use by another job or holding a run (without
         --resume), a diverged run, torchrun variables that do not fit, compile=true
         without a C++ compiler
  2      a mistake in what was typed: an unknown command or option, a bad value (--set,
         --beam, --alpha, --split, ...), nothing to translate
  130    interrupted (Ctrl-C)
  128+N  train only: stopped by signal N (129 SIGHUP: the terminal closed; 130 SIGINT;
         143 SIGTERM) after saving a checkpoint (continue with --resume)

Every command checks where it will write before it reads or computes anything. Files are
written whole or not at all, and no command replaces a file it did not write."""


class UsageError(Exception):
    """A mistake in what was typed (an option, a value): exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, with its errors in the one-line form of every other error of the command."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        command = self.prog[len(PROG) :].strip()
        self.exit(2, f"{PROG}: error: {command + ': ' if command else ''}{message}\n")


def _count(note: str = "", high: int = LARGEST_INT) -> Callable[[str], int]:
    """An argparse type: a positive integer up to `high` (64 bits), else an error naming it."""

    def positive(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value < 1:
            raise argparse.ArgumentTypeError(f"expected a positive integer{note}, got {text!r}")
        if value > high:
            raise argparse.ArgumentTypeError(f"expected a positive integer up to {high:,}{note}, "
                                             f"got {text!r}")  # fmt: skip
        return value

    return positive


def _alpha(text: str) -> float:
    """An argparse type: the length penalty alpha, a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0 (the paper: 0.6), got {text!r}")
    if value > MAX_ALPHA:
        raise argparse.ArgumentTypeError(
            f"expected a number <= {MAX_ALPHA:g} (the length penalty ((5 + |Y|) / 6)^alpha "
            f"overflows beyond), got {text!r}"
        )
    return value


# --- checks made before any work ---------------------------------------------------------------


def _probe(folder: Path, option: str, path: Path) -> None:
    """A file can be created in `folder` (tried: a temporary file), or an OSError naming it."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise OSError(
            f"{option} {path}: cannot write in {folder} ({error.strerror or error})"
        ) from None


def check_output_file(
    path: str | os.PathLike[str], option: str, ours: Callable[[Path], bool], kind: str
) -> Path:
    """Refuse an output file whose folder is missing or cannot be written, a folder, or an existing
    file that is not `kind` written by this tool (which `ours` tells), which it would replace."""
    path = Path(path)
    if path.is_dir():
        raise OSError(f"{option} {path}: a folder, not a file")
    folder = path.parent
    if not folder.is_dir():
        state = "is not a folder" if folder.exists() else "does not exist"
        raise OSError(f"{option} {path}: the folder {folder} {state}")
    _probe(folder, option, path)
    if path.exists() and not ours(path):
        raise OSError(
            f"{option} {path}: the file exists and is not {kind} written by {PROG}, so it is "
            f"not replaced: move it away or choose another name"
        )
    return path


def check_output_folder(path: str | os.PathLike[str], option: str) -> Path:
    """Refuse an output folder that is a file, or that cannot be created or written in."""
    path = Path(path)
    existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        raise OSError(f"{option} {path}: {existing} is a file, not a folder")
    _probe(existing, option, path)
    return path


def _check_checkpoint(path: str | None, command: str = "translate") -> None:
    """The checkpoint or run folder exists and is one that `command` reads (read later: checked
    here before any slow work); None is the model that ships with the package."""
    if path is not None and not Path(path).exists():
        raise FileNotFoundError(f"{path}: no such checkpoint or run folder")
    foreign = None if path is None else _model_folder(Path(path))
    if foreign is not None and not (command == "translate" and foreign[1] == "export-ct2"):
        what, writer, reader = foreign
        needs = MODEL_INPUTS.get(command, MODEL_INPUTS["evaluate"])
        raise ValueError(f"{path} is {what} (written by {writer}): {command} needs {needs}; "
                         f"{reader}")  # fmt: skip


MODEL_INPUTS = {  # what each command reads as its model
    "translate": "a checkpoint, a run folder, a save-pretrained folder or a CTranslate2 export",
    "evaluate": "a checkpoint, a run folder or a save-pretrained folder",
    "average": "checkpoint files or a run folder",
    "save-pretrained": "a checkpoint or a run folder",
}


def _model_folder(folder: Path) -> tuple[str, str, str] | None:
    """(what, the command that writes it, what reads it) for a folder that an export wrote (its
    record says so, or it holds the export's first two files); None for any other path."""
    if not folder.is_dir():
        return None
    from annotated_transformer import ct2_export, hf_export, onnx_export

    for module, what, writer, reader in (
        (ct2_export, "a CTranslate2 export", "export-ct2", "translate --checkpoint reads it"),
        (hf_export, "a transformers export", "export-hf", "transformers' MarianMTModel reads it"),
        (onnx_export, "an ONNX export", "export-onnx", "ONNX Runtime reads it (the page "
         "'Try it')"),
    ):  # fmt: skip
        try:
            about = json.loads((folder / module.ABOUT).read_text(encoding="utf-8"))
        except (OSError, ValueError):  # (missing, not UTF-8, not JSON)
            about = None
        ours = isinstance(about, dict) and about.get("format") == module.FORMAT
        if ours or all((folder / name).is_file() for name in module.FILES[:2]):
            return what, writer, reader
    return None


def _translator(args: argparse.Namespace):
    """The model to translate with: `--checkpoint`'s, else the one that ships with the package."""
    from annotated_transformer.translator import Translator

    if args.checkpoint is None:
        translator = Translator.pretrained(device=args.device)
    elif _ct2_export(args.checkpoint):
        from annotated_transformer.ct2_export import CT2Translator

        _check_ct2_search(args, f"{args.checkpoint} is a CTranslate2 export")
        translator = CT2Translator.open(args.checkpoint, device=args.device or "cpu")
    else:
        translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
    size, beam = len(translator.tgt_vocab), getattr(args, "beam", 1)
    if beam > size:
        raise UsageError(f"--beam {beam}: larger than the model's target vocabulary ({size:,} "
                         f"tokens): give at most {size:,}")  # fmt: skip
    translator.max_tokens = getattr(args, "max_tokens", translator.max_tokens)
    return translator


def _check_ct2_search(args: argparse.Namespace, why: str) -> None:
    """CTranslate2's beam search stops at k finished hypotheses and keeps no greedy lane."""
    if getattr(args, "keep_greedy", False):
        raise UsageError(f"--keep-greedy: {why}, whose search has no greedy hypothesis to keep")
    if getattr(args, "search", "k-finished") != "k-finished":
        raise UsageError(f"--search {args.search}: {why}, whose search stops at k finished "
                         "hypotheses (--search k-finished)")  # fmt: skip


def _quantized(translator: Any, args: argparse.Namespace) -> Any:
    """`translate --quantize int8`: the model converted to CTranslate2's int8 in memory."""
    from annotated_transformer.ct2_export import CT2Translator

    if isinstance(translator, CT2Translator):
        raise UsageError(f"--quantize {args.quantize}: {args.checkpoint} is a CTranslate2 export "
                         f"already ({translator.origin['quantization']}); write another with "
                         f"export-ct2 --quantization {args.quantize}")  # fmt: skip
    _check_ct2_search(args, f"--quantize {args.quantize} decodes with CTranslate2")
    _needs(f"translate --quantize {args.quantize}", ("ctranslate2",), "serve")
    if translator.bpe is None:
        raise ValueError(f"{args.checkpoint}: --quantize needs a run with the shared BPE "
                         f"vocabulary (tokenizer bpe); this one has word vocabularies")  # fmt: skip
    return CT2Translator.converted(translator, args.quantize)


def _ct2_export(path: str) -> bool:
    """Whether `path` is a folder that `export-ct2` wrote (read by CTranslate2, not PyTorch)."""
    from annotated_transformer.ct2_export import read_about

    if read_about(path) is None:
        return False
    if not importlib.util.find_spec("ctranslate2"):
        raise OSError(f"{path} is a CTranslate2 model; reading it needs the package "
                      f"ctranslate2: pip install 'annotated-transformer[serve]'")  # fmt: skip
    return True


def _check_device(device: str | None) -> None:
    """`--device cuda` only where PyTorch sees a CUDA GPU."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            why = "it was built without CUDA" if torch.version.cuda is None else "no GPU found"
            raise OSError(
                f"--device cuda: PyTorch {torch.__version__} sees no CUDA GPU ({why}); "
                f"use --device cpu"
            )


# --- the commands --------------------------------------------------------------------------------


def _generated_modules() -> list[tuple[str, str]]:
    """(module, source notebook) for every module generated from a chapter."""
    import annotated_transformer

    found = []
    for info in pkgutil.walk_packages(annotated_transformer.__path__, "annotated_transformer."):
        spec = importlib.util.find_spec(info.name)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            continue
        with open(spec.origin, encoding="utf-8") as file:
            header = file.readline()
            while (line := file.readline()).startswith("#   "):  # the header, wrapped
                header += line[1:]
        mark = "# Generated by tools/export.py from "
        if header.startswith(mark):
            found.append((info.name, " ".join(header[len(mark) :].split()).rstrip(".")))
    return sorted(found)


def cmd_info(args: argparse.Namespace) -> int:
    """Print versions, the compute device, and which chapter each module comes from."""
    import torch

    print(f"annotated-transformer {__version__}")
    print(f"python {platform.python_version()}, torch {torch.__version__}")
    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        print(f"device: cuda ({names})")
    else:
        print(f"device: cpu ({torch.get_num_threads()} threads)")
    modules = _generated_modules()
    print(f"modules generated from the book ({len(modules)}):")
    for name, notebook in modules:
        print(f"  {name:<40} {notebook}")
    return 0


def _sha256_is(path: Path, digest: str) -> bool:
    return hashlib.sha256(path.read_bytes()).hexdigest() == digest


def cmd_download(args: argparse.Namespace) -> int:
    """Download every Multi30k file (checking its SHA-256) into the cache or --data-dir; with
    --dataset wmt14-en-de, WMT 2014's archives, checked, as plain text."""
    from annotated_transformer.data import multi30k

    if args.dataset == "wmt14-en-de":
        return _download_wmt14(args)
    wmt_only = [option for option, value in (("--mirror", args.mirror), ("--max-length",
                args.max_length), ("--max-ratio", args.max_ratio), ("--dedup", args.dedup or None),
                ("--test-sources", args.test_sources)) if value is not None]  # fmt: skip
    if wmt_only:
        raise UsageError(f"{', '.join(wmt_only)}: only with --dataset wmt14-en-de")
    folder = Path(args.data_dir) if args.data_dir is not None else multi30k.cache_dir()
    check_output_folder(folder, "--data-dir" if args.data_dir is not None else "the cache")
    others = []  # files of Multi30k's names that are not its files: a download would replace them
    for name, digest in multi30k.SHA256.items():
        path = folder / name
        if path.is_dir() or (path.is_file() and not _sha256_is(path, digest)):
            others.append(name)
    if others:
        raise OSError(
            f"{folder} holds {', '.join(others)}, which are not the Multi30k files (their "
            f"SHA-256 differs) and which a download would replace: move them away"
        )
    for split in multi30k.SPLITS:
        for lang in multi30k.LANGUAGES:
            path = multi30k.download(split, lang, folder, progress=sys.stderr.isatty())
            print(f"ok  {path}")
    return 0


def _download_wmt14(args: argparse.Namespace) -> int:
    """WMT 2014 English–German: every archive fetched and checked, then extracted as text."""
    from annotated_transformer.data import wmt14

    for option, value in (("--max-length", args.max_length), ("--max-ratio", args.max_ratio)):
        if value is not None and not value > 0:
            raise UsageError(f"{option} {value}: give a positive number")
    folder = Path(args.data_dir) if args.data_dir is not None else wmt14.data_dir()
    check_output_folder(folder, "--data-dir" if args.data_dir is not None else "the cache")
    wmt14.check_extraction_folder(folder)
    sources = wmt14.SOURCES
    if args.test_sources is not None:  # a miniature mirror's own checksums: for tests only
        sources = wmt14.sources_from_json(args.test_sources)
        print(f"checksums from {args.test_sources}, not the package's (--test-sources)")
    filters = wmt14.Filters(args.max_length, args.max_ratio, args.dedup)
    manifest = wmt14.download(folder, args.mirror, filters, sources, sys.stderr.isatty())
    for split, counts in manifest["splits"].items():
        left_out = sum(counts["left_out"].values())
        print(f"ok  {folder / split}.{{en,de}}: {counts['pairs']:,} pairs ({left_out:,} left out)")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    """Learn the shared BPE and write the training shard of a WMT 2014 download, once: what
    `train` reads (and, in a single process, writes itself when it is missing)."""
    from annotated_transformer.data import shards, wmt14
    from annotated_transformer.data.bpe import check_vocab_size

    try:
        check_vocab_size(args.vocab_size)
    except ValueError as error:  # (a usage mistake, as the parser's own)
        raise UsageError(f"--vocab-size {args.vocab_size}: {error}") from None
    folder = Path(args.data_dir) if args.data_dir is not None else wmt14.data_dir()
    said: list[str] = []  # what prepare_shards says: nothing when the folder is reused

    def say(message: str) -> None:
        said.append(message)
        print(message, file=sys.stderr, flush=True)

    prepared = shards.prepare_shards(folder, args.vocab_size, args.min_freq, say, rebuild=True)
    tokenizer, train = shards.open_prepared(prepared, ("en", "de"))
    print(f"{prepared}: {'' if said else 'already prepared; '}{len(tokenizer):,} BPE pieces, "
          f"{len(train):,} training pairs; train with --data-dir {folder} --set "
          f"vocab_size={args.vocab_size} --set min_freq={args.min_freq} (the wmt14 presets: "
          f"37000 and 2)")  # fmt: skip
    return 0


def _set_changes(args: argparse.Namespace) -> dict:
    """The settings that the options of `train` and its `--set NAME=VALUE`s change."""
    changes = {k: v for k, v in (("max_steps", args.max_steps), ("epochs", args.epochs),
                                 ("accumulate", args.accumulate), ("dropout", args.dropout),
                                 ("max_tokens", args.max_tokens), ("seed", args.seed),
                                 ("loader_workers", args.workers))
               if v is not None}  # fmt: skip
    if args.max_steps is not None and args.epochs is None:
        changes["epochs"] = None  # --max-steps alone: stop by steps only
    if args.tokenizer is not None:  # BPE as the paper used it: shared, with tied embeddings
        changes |= {"tokenizer": args.tokenizer, "share_embeddings": args.tokenizer == "bpe"}
    if args.pair is not None:
        changes["pair"] = args.pair
    for setting in args.set or []:
        name, equals, value = setting.partition("=")
        if not equals:
            raise UsageError(f"--set {setting}: write NAME=VALUE, e.g. --set warmup=2000")
        try:
            changes[name] = json.loads(value)
        except json.JSONDecodeError:
            raise UsageError(
                f"--set {setting}: write NAME=VALUE with a JSON value (a number, true, false, "
                f"null, or a string in double quotes)"
            ) from None
    return changes


def _train_config(args: argparse.Namespace, changes: dict):
    """The run's settings: a preset's, or (with --resume) the run's own, with the changes typed.
    A setting typed wrong is a UsageError; one wrong in the run's files is not."""
    from annotated_transformer.runs.presets import preset
    from annotated_transformer.runs.saved_run import saved_config
    from annotated_transformer.util.settings import SettingError

    saved = None
    if args.preset is None:
        # the run's own settings: its newest checkpoint's, or its config.json's
        saved = saved_config(args.out) if args.resume else None
        if saved is None:
            raise UsageError(
                f"give --preset ({PRESET_LIST}), or --resume a run folder that holds a "
                "checkpoint or a config.json"
            )
    try:
        return preset(args.preset, **changes) if saved is None else saved.replace(**changes)
    except SettingError as error:
        raise UsageError(str(error)) from None


def cmd_train(args: argparse.Namespace) -> int:
    """Train on Multi30k; under torchrun, on every process it starts."""
    changes = _set_changes(args)
    if args.preset is None and not args.resume:
        raise UsageError(f"give --preset ({PRESET_LIST}), or --resume a run folder")
    from annotated_transformer.training.guards import holds_a_run, torchrun_environment
    from annotated_transformer.training.run import train
    from annotated_transformer.training.run_folder import check_run_folder

    if args.preset is None and not holds_a_run(Path(args.out)):
        raise UsageError(f"give --preset ({PRESET_LIST}), or --resume a run folder that holds a "
                         "checkpoint or a config.json")  # fmt: skip
    rank, _, _ = torchrun_environment()  # (rank 0 checks the folder for the whole job)
    if rank == 0:
        check_run_folder(Path(args.out), args.resume)
    config = _train_config(args, changes)
    _check_device(args.device)
    outcome = train(
        config, args.out, data_dir=args.data_dir, resume=args.resume, device=args.device,
        progress=not args.no_progress,
        log=lambda message: print(message, file=sys.stderr, flush=True),
    )  # fmt: skip
    return 0 if outcome.stopped_by is None else 128 + outcome.stopped_by


_LINE_END = re.compile(r"\r\n|\r|\n")
_END_OF_INPUT = object()  # what the reader of standard input sends after the last line
CHUNK_LINES = 500  # `translate --chunk`: lines read, translated and written at a time


def _stdin_blocks() -> Iterator[bytes | str]:
    """Standard input as it arrives: blocks of bytes read from its file descriptor, or a text
    stream's lines where it has none. Reading the descriptor takes no lock of Python's, so a
    thread blocked on it cannot stall the interpreter's exit (Ctrl-C while it waits)."""
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        yield from sys.stdin
        return
    while block := os.read(fd, 1 << 16):
        yield block


def _stdin_lines() -> Iterator[str]:
    """Standard input's lines as they arrive, read as UTF-8 whatever the locale; CR, CRLF and LF
    all end a line."""
    if sys.stdin is None:
        raise OSError(
            "standard input is closed: give the sentences as arguments, or one per line on "
            "standard input"
        )
    if sys.stdin.isatty():
        print(f"{PROG}: reading sentences to translate, one per line; end with Ctrl-D",
              file=sys.stderr)  # fmt: skip
    decoder, pending, number = codecs.getincrementaldecoder("utf-8")(), "", 0
    try:
        for block in itertools.chain(_stdin_blocks(), [b""]):  # b"": the end, told the decoder
            text = decoder.decode(block, final=block == b"") if isinstance(block, bytes) else block
            data = pending + text
            held = "\r" if data.endswith("\r") and block != b"" else ""  # (its \n may follow)
            *lines, pending = _LINE_END.split(data[: len(data) - len(held)])
            pending += held
            for line in lines:
                number += 1
                yield line
        if pending:
            yield pending
    except UnicodeDecodeError as error:
        before = pending + error.object[: error.start].decode("utf-8", errors="replace")
        line = number + 1 + len(_LINE_END.findall(before))
        raise ValueError(
            f"standard input is not UTF-8 text (line {line}: {error.reason})"
        ) from None
    except OSError as error:
        raise OSError(f"cannot read standard input: {error.strerror or error}") from None


def _stdin_chunks(size: int) -> Iterator[list[str]]:
    """Standard input in lists of at most `size` lines: each holds what has arrived once a first
    line has, so that a translation is written while the input is still open (an interactive
    session, a pipe fed slowly). A thread reads ahead at most `size` lines: memory stays bounded
    however long the input."""
    import queue
    import threading

    lines: queue.Queue = queue.Queue(maxsize=size)

    def read() -> None:
        try:
            for line in _stdin_lines():
                lines.put(line)
            lines.put(_END_OF_INPUT)
        except (OSError, ValueError) as error:  # raised again in the translating thread
            lines.put(error)

    threading.Thread(target=read, name="stdin", daemon=True).start()
    while True:
        chunk, item = [], lines.get()  # wait for a first line
        while True:
            if item is _END_OF_INPUT or isinstance(item, Exception):
                if chunk:
                    yield chunk
                if item is _END_OF_INPUT:
                    return
                raise item
            chunk.append(item)
            if len(chunk) == size or lines.empty():
                break
            item = lines.get()
        yield chunk


def _translate_chunk(translator, lines: list[str], first: int, args: argparse.Namespace) -> None:
    """Translate input lines `first`, `first + 1`, ... and write one output line for each (an
    empty line stays empty), then flush, so that what is written is kept whatever comes next.
    Messages name a line of standard input ("line 5"), or an argument ("argument 2")."""
    unit = "argument" if args.text else "line"
    source = LANGUAGE_NAMES[translator.config.languages[0]]
    filled = [i for i, line in enumerate(lines) if normalize(line)]
    for i in filled:
        unknown = translator.unknown_words(lines[i])
        if unknown:
            print(
                f"{PROG}: warning: {unit} {first + i}: {len(unknown)} word(s) not in "
                f"the {source} vocabulary, read as <unk>: {', '.join(unknown)}",
                file=sys.stderr,
            )
    try:
        outputs = translator.translate(
            [lines[i] for i in filled], beam_size=args.beam, alpha=args.alpha,
            keep_greedy=args.keep_greedy, progress=bool(args.text) and sys.stderr.isatty(),
            search=args.search,
        )  # fmt: skip
    except ValueError as error:  # "sentence N ...": N counted among this chunk's sentences
        found = re.match(r"sentence (\d+) ", str(error))
        if found is None:
            raise
        line = first + filled[int(found.group(1)) - 1]
        raise ValueError(f"{unit} {line} " + str(error)[found.end() :]) from None
    translations = dict(zip(filled, outputs, strict=True))
    for i in range(len(lines)):
        print(translations.get(i, ""))
    _flush_stdout()


def cmd_translate(args: argparse.Namespace) -> int:
    """Translate sentences (arguments, or one per line on stdin) in the direction the model was
    trained (its run's `pair`; the shipped model: German into English). Standard input is read,
    translated and written a chunk at a time (`--chunk` lines at most)."""
    if sys.stdout is None:
        raise OSError("standard output is closed: the translations would be lost")
    _check_checkpoint(args.checkpoint)
    _check_device(args.device)
    chunks = iter([args.text]) if args.text else _stdin_chunks(args.chunk)
    translator, read, empty = None, 0, 0  # empty: lines held until a first sentence comes
    for chunk in chunks:
        read += len(chunk)
        if translator is None and not any(normalize(line) for line in chunk):
            empty += len(chunk)
            continue
        if translator is None:
            translator = _translator(args)
            translator = _quantized(translator, args) if args.quantize else translator
            print("\n" * empty, end="")
        _translate_chunk(translator, chunk, read - len(chunk) + 1, args)
    if translator is None:
        raise UsageError(
            "nothing to translate: give sentences as arguments, or one per line on standard input"
        )
    return 0


def _decoding_name(
    beam: int, alpha: float, keep_greedy: bool = False, search: str = "k-finished"
) -> str:
    if beam == 1:
        return "greedy decoding"
    lane = ", with the greedy hypothesis" if keep_greedy else ""
    rule = ", tensor2tensor's stopping rule" if search == "t2t" else ""
    return f"beam search, {beam} beams, alpha {alpha}{lane}{rule}"


def _splits(given: list[str], known: Sequence[str], wmt: Sequence[str] = ()) -> list[str]:
    """The splits `--split` names (each once), or a UsageError; `wmt`: WMT 2014's, also known."""
    if "all" in given:
        if len(given) > 1:
            raise UsageError(f"--split all stands alone: it means every split ({', '.join(known)})")
        return list(known)
    for split in given:
        if split not in (*known, *wmt):
            also = f" (Multi30k), or {', '.join(wmt)} or all (WMT 2014)" if wmt else ""
            raise UsageError(f"--split {split}: expected one of {', '.join(known)} or all{also}")
    return list(dict.fromkeys(given))


def _our_translations(path: Path) -> bool:
    """Whether a file is the translations of a results record (`evaluate --results` wrote it)."""
    from annotated_transformer.evaluation.scores import is_results_record

    suffixes = {f".{code}" for code in LANGUAGE_NAMES}  # SPLIT-TAG.en, or .de (en-de runs)
    return path.suffix in suffixes and is_results_record(path.with_suffix(".json"))


def _check_results(folder: str, split: str, tag: str, target: str = "en") -> None:
    """The two files `--results` writes for a split replace only a record of ours and its
    translations (SPLIT-TAG.en, or .de for an English→German model)."""
    from annotated_transformer.evaluation.scores import is_results_record, results_paths

    hyp_path, json_path = results_paths(folder, split, tag, target)
    ours = json_path.is_file() and is_results_record(json_path) and not hyp_path.is_dir()
    for path in (json_path, hyp_path):
        if path.exists() and not ours:
            raise OSError(
                f"--results {folder}: {path.name} exists and is not a results record written "
                f"by {PROG} (or the translations beside one), so it is not replaced: move it "
                f"away, or choose another --tag or folder"
            )


def _check_tag_fits(folder: str, tag: str | None, splits: Sequence[str]) -> None:
    """The longest file name `--results` writes (SPLIT-TAG.json) fits the folder's file system:
    checked before translating, not after."""
    if tag is None:  # (the default tags are short)
        return
    existing = next(p for p in (Path(folder), *Path(folder).parents) if p.exists())
    try:
        most = os.pathconf(existing, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):  # (no pathconf on Windows)
        most = 255
    name = f"{max(splits, key=len)}-{tag}.json"
    if len(os.fsencode(name)) > most:
        raise UsageError(
            f"--tag: {len(tag)} characters make the file name {name[:40]}... "
            f"{len(os.fsencode(name))} bytes long; {existing} takes at most {most}"
        )


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Translate the splits of the model's corpus (Multi30k, or WMT 2014's newstest sets) in its
    direction and score them with sacreBLEU; optionally record the results."""
    from annotated_transformer.data import multi30k
    from annotated_transformer.evaluation.newstest import NEWSTEST
    from annotated_transformer.evaluation.scores import EVAL_SPLITS

    splits = _splits(args.split or ["test2016"], EVAL_SPLITS, tuple(NEWSTEST))
    if args.output and len(splits) > 1:
        raise UsageError("--output takes the translations of one split; use --results for many")
    if args.tag is not None and (not args.tag or "/" in args.tag or args.tag.startswith(".")):
        raise UsageError(f"--tag {args.tag!r}: the tag names files (SPLIT-TAG.json): give a name "
                         f"without / that does not start with a dot")  # fmt: skip
    if args.output:
        check_output_file(args.output, "--output", _our_translations,
                          "the translations of a results record")  # fmt: skip
    if args.results:
        check_output_folder(args.results, "--results")
        _check_tag_fits(args.results, args.tag, splits)
    _check_checkpoint(args.checkpoint, "evaluate")
    _check_device(args.device)
    translator = _translator(args)
    splits, wmt = _splits_of_the_run(args.split, translator.config.dataset), None
    if translator.config.dataset != "multi30k":
        wmt = _newstest_folder(args, splits, translator.config.pair)
    averaged = translator.origin.get("averaged_from")
    tag = args.tag or "-".join([
        "shipped" if translator.origin.get("shipped") else
        f"avg{len(averaged)}" if averaged else "last",
        "greedy" if args.beam == 1 else f"beam{args.beam}",
        *(["keepgreedy"] if args.keep_greedy and args.beam > 1 else []),
        *(["t2t"] if args.search == "t2t" and args.beam > 1 else []),
    ])  # fmt: skip
    for split in splits:  # (the tag is known now: the checkpoint says if it is an average)
        if args.results:
            _check_results(args.results, split, tag, translator.config.languages[1])
    for split in splits if wmt is None else []:  # every input file, checked before translating
        for lang in multi30k.LANGUAGES:
            multi30k.fetch(split, lang, args.data_dir)
    for split in splits:
        _evaluate_split(args, translator, split, tag, wmt)
    return 0


def _splits_of_the_run(given: list[str] | None, dataset: str) -> list[str]:
    """The splits to evaluate, of the corpus the model was trained on (default: its test set)."""
    from annotated_transformer.evaluation.newstest import NEWSTEST
    from annotated_transformer.evaluation.scores import EVAL_SPLITS

    known = EVAL_SPLITS if dataset == "multi30k" else tuple(NEWSTEST)
    given = given or ["test2016" if dataset == "multi30k" else "newstest2014"]
    foreign = [split for split in given if split not in (*known, "all")]
    if foreign:
        raise UsageError(f"--split {foreign[0]}: not a split of {dataset}, the corpus this model "
                         f"was trained on: expected one of {', '.join(known)} or all")  # fmt: skip
    return list(known) if "all" in given else list(dict.fromkeys(given))


def _newstest_folder(args: argparse.Namespace, splits: list[str], pair: str) -> Path:
    """The WMT 2014 text folder (--data-dir, else the default), holding every file `splits` read."""
    from annotated_transformer.data import wmt14
    from annotated_transformer.evaluation.newstest import newstest_files

    folder = Path(args.data_dir) if args.data_dir is not None else wmt14.data_dir()
    for split in splits:
        for path in newstest_files(split, folder, pair):
            if not path.is_file():
                raise FileNotFoundError(f"{path}: missing; write it with `{PROG} download "
                                        f"--dataset wmt14-en-de --data-dir {folder}`")  # fmt: skip
    return folder


def _evaluate_split(
    args: argparse.Namespace, translator, split: str, tag: str, wmt: Path | None = None
) -> None:
    """Translate and score one split (of WMT 2014, in the folder `wmt`, if given); print the
    scores and write what was asked."""
    import shlex

    from annotated_transformer.evaluation import scores as evaluation
    from annotated_transformer.evaluation.newstest import evaluate_newstest, newstest_files
    from annotated_transformer.util.atomic import atomic_write
    from annotated_transformer.util.device import describe_device

    run = evaluation.evaluate_split if wmt is None else evaluate_newstest
    result = run(
        translator, split, args.data_dir if wmt is None else wmt, beam_size=args.beam,
        alpha=args.alpha, keep_greedy=args.keep_greedy, progress=sys.stderr.isatty(),
        search=args.search,
    )  # fmt: skip
    skipped = f" ({result.skipped} pairs with an empty side left out)" if result.skipped else ""
    decoding = _decoding_name(args.beam, args.alpha, args.keep_greedy, args.search)
    print(f"{split}: {len(result.hypotheses)} sentences{skipped}, {decoding}, "
          f"{result.seconds:.1f} s")  # fmt: skip
    for key in ("sacrebleu", "chrf", "bleu_lowercase"):
        print(f"  {result.scores[key]['text']}")
    if args.output:
        with atomic_write(args.output, "w") as file:
            file.writelines(h + "\n" for h in result.hypotheses)
    if args.results:
        path = evaluation.write_results(
            result, args.results, tag,
            command=shlex.join([PROG, *sys.argv[1:]]),
            checkpoint=translator.origin,
            decoding={
                "beam_size": args.beam,
                "alpha": args.alpha if args.beam > 1 else None,
                "keep_greedy": args.keep_greedy and args.beam > 1,
                "search": args.search if args.beam > 1 else None,
                "max_output_tokens": "source tokens + 50 (§6.1)",
            },
            device=describe_device(next(translator.model.parameters()).device),
            data_dir=args.data_dir if wmt is None else wmt,
            reference=None if wmt is None else newstest_files(split, wmt, result.pair)[1],
        )  # fmt: skip
        print(f"  wrote {path}")


def cmd_average(args: argparse.Namespace) -> int:
    """Average the last K checkpoints of a run (or the files given) into one model (§6.1)."""
    from annotated_transformer.runs.checkpoints import is_checkpoint
    from annotated_transformer.training.averaging import (
        average_checkpoints,
        check_average_path,
        last_checkpoints,
    )

    try:
        out = check_average_path(args.out)
    except ValueError as error:
        raise UsageError(str(error)) from None
    check_output_file(out, "--out", is_checkpoint, "a checkpoint")
    for given in args.checkpoints:
        _check_checkpoint(given, "average")
    paths: list = []
    for given in args.checkpoints:
        if Path(given).is_dir():
            paths.extend(last_checkpoints(given, args.last or _average_last(Path(given))))
        else:
            paths.append(Path(given))
    _check_distinct(paths, out)
    averaged = average_checkpoints(paths)
    averaged.save(out)
    steps = ", ".join(str(entry["step"]) for entry in averaged.extra["averaged_from"])
    print(f"averaged {len(paths)} checkpoints (steps {steps}) into {out}")
    return 0


def _check_distinct(paths: Sequence[Path], out: Path) -> None:
    """No checkpoint averaged twice, and --out none of them (it would replace a checkpoint of
    training with a weights-only file): both are usage mistakes."""
    seen: dict[Path, Path] = {}
    for path in paths:
        real = path.resolve()
        if real in seen:
            raise UsageError(f"{path}: given twice (also as {seen[real]}); each checkpoint is "
                             f"averaged once")  # fmt: skip
        seen[real] = path
    if (real := out.resolve()) in seen:
        raise UsageError(f"--out {out}: one of the checkpoints averaged ({seen[real]}), which "
                         f"it would replace; choose another name, e.g. average.pt")  # fmt: skip


def _average_last(run_dir: Path) -> int:
    """How many checkpoints a run averages (its `average_last`: §6.1's 5, or 20 for big)."""
    from annotated_transformer.runs.saved_run import saved_config

    if not any(run_dir.glob("checkpoint-*.pt")):  # not a run folder: last_checkpoints says why
        return 5
    config = saved_config(run_dir)
    return 5 if config is None else config.average_last


def cmd_save_pretrained(args: argparse.Namespace) -> int:
    """Write a trained BPE run as the files a shipped model is made of (fp16 safetensors, config,
    tokenizer, SHA256SUMS): what `annotated_transformer/pretrained_model/` holds."""
    _check_checkpoint(args.checkpoint, "save-pretrained")
    from annotated_transformer.pretrained import check_replaceable, write_pretrained
    from annotated_transformer.runs.saved_run import SavedRun

    check_replaceable(check_output_folder(args.out, "--out"))
    sums = write_pretrained(SavedRun.load(args.checkpoint), args.out)
    print(f"wrote {args.out}:")
    print(sums.read_text(encoding="utf-8"), end="")
    return 0


def cmd_export_onnx(args: argparse.Namespace) -> int:
    """Write the model as two ONNX graphs (the encoder, one decoder step) with its tokenizer:
    what the book's chapter "Try it" runs in the browser."""
    _needs("export-onnx", ("onnx", "onnxscript", "onnxruntime"), "onnx")
    from annotated_transformer import onnx_export

    translator = _model_to_export(args, "export-onnx", onnx_export.check_replaceable)
    onnx_export.export_onnx(
        translator.model,
        translator.bpe,
        args.out,
        origin=translator.origin,
        pair=translator.config.pair,
    )
    return _wrote(Path(args.out), onnx_export.FILES)


def cmd_export_ct2(args: argparse.Namespace) -> int:
    """Write the model as a CTranslate2 model with its tokenizer, which `translate --checkpoint`
    and `CT2Translator.open` read."""
    _needs("export-ct2", ("ctranslate2",), "serve")
    from annotated_transformer import ct2_export

    translator = _model_to_export(args, "export-ct2", ct2_export.check_replaceable)
    ct2_export.check_convertible(translator.model)
    ct2_export.export_ct2(translator.model, translator.bpe, translator.config, args.out,
                          quantization=args.quantization, origin=translator.origin)  # fmt: skip
    return _wrote(Path(args.out), ct2_export.FILES)


def cmd_export_hf(args: argparse.Namespace) -> int:
    """Write the model as a Hugging Face `transformers` MarianMTModel folder with its tokenizer
    and a Hub model card."""
    _needs("export-hf", ("transformers",), "serve")
    from annotated_transformer import hf_export

    translator = _model_to_export(args, "export-hf", hf_export.check_replaceable)
    hf_export.check_marian(translator.model)
    hf_export.export_hf(translator.model, translator.bpe, args.out,
                        card=_model_card(args.checkpoint), origin=translator.origin,
                        pair=translator.config.pair)  # fmt: skip
    return _wrote(Path(args.out), hf_export.FILES)


def _needs(command: str, packages: Sequence[str], extra: str) -> None:
    """An OSError naming the packages `command` needs that are not installed, and the extra."""
    missing = [name for name in packages if not importlib.util.find_spec(name)]
    if missing:
        package = "the packages" if len(missing) > 1 else "the package"
        raise OSError(f"{command} needs {package} {', '.join(missing)}: "
                      f"pip install 'annotated-transformer[{extra}]'")  # fmt: skip


def _model_to_export(args: argparse.Namespace, command: str, check_out: Callable) -> Any:
    """--out checked (`check_out`), then the model of --checkpoint, which must have the shared
    BPE vocabulary that every export carries (a Translator)."""
    check_out(check_output_folder(args.out, "--out"))
    _check_checkpoint(args.checkpoint, command)
    translator = _translator(args)
    if translator.bpe is None:
        raise ValueError(f"{args.checkpoint}: {command} needs a run with the shared BPE "
                         f"vocabulary (tokenizer bpe); this one has word vocabularies")  # fmt: skip
    return translator


def _wrote(out: Path, files: Sequence[str]) -> int:
    for name in files:
        print(f"wrote {out / name} ({(out / name).stat().st_size:,} bytes)")
    return 0


def _model_card(checkpoint: str | None) -> str | None:
    """The card beside a model (the shipped model's, or a save-pretrained folder's) when it
    records the SHA-256 of these very weights; else None, and a note on standard error."""
    from annotated_transformer.hf_export import card_beside
    from annotated_transformer.pretrained import shipped_folder

    card, why = card_beside(shipped_folder() if checkpoint is None else Path(checkpoint))
    if why is not None:
        print(f"{PROG}: note: {why}", file=sys.stderr, flush=True)
    return card


def _our_attention_file(path: Path) -> bool:
    """Whether a file is one `attention` wrote (asked only of an existing file)."""
    from annotated_transformer.evaluation.attention_maps import is_attention_record

    return is_attention_record(path)


def cmd_attention(args: argparse.Namespace) -> int:
    """Translate one sentence and save every head's attention weights for it as JSON."""
    if not normalize(args.text):
        raise UsageError("nothing to translate: give one sentence, in the model's source language")
    check_output_file(args.output, "--output", _our_attention_file, "an attention file")
    _check_checkpoint(args.checkpoint, "attention")
    _check_device(args.device)
    import shlex

    import torch

    from annotated_transformer.data.vocab import BOS, BOS_ID, EOS
    from annotated_transformer.decoding.batched import translate_ids
    from annotated_transformer.evaluation.attention_maps import attention_maps, save_attention_maps

    translator = _translator(args)
    (src,) = translator.encode([args.text])  # (S,): the tokens and </s>
    (words,) = translate_ids(
        translator.model, [src], translator.tgt_vocab, max_len=translator.config.model.max_len,
        max_tokens=translator.max_tokens, beam_size=args.beam, alpha=args.alpha,
        keep_greedy=args.keep_greedy, search=args.search,
    )  # fmt: skip
    tgt = torch.tensor([BOS_ID, *translator.tgt_vocab.encode(words)])  # (T,): <s> and the words
    device = next(translator.model.parameters()).device
    maps = attention_maps(translator.model, src.to(device), tgt.to(device))
    translation = translator.detokenize(words)
    about = {
        "command": shlex.join([PROG, *sys.argv[1:]]),
        "checkpoint": translator.origin,
        "source": args.text,
        "translation": translation,
        "unknown_words": translator.unknown_words(args.text),
    }
    src_tokens = [*translator.tokenizer(args.text), EOS]
    save_attention_maps(args.output, maps, src_tokens, [BOS, *words], about)
    print(f"{translation}\nwrote {args.output}")
    return 0


def cmd_grid(args: argparse.Namespace) -> int:
    """Check the grid's options and outputs, then run it (`variations.run_grid`)."""
    import torch

    from annotated_transformer import variations

    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: expected a positive number of processes")
    names = [v.name for v in variations.grid(variations.base_config(args.profile))]
    unknown = sorted(set(args.only or []) - set(names))
    if unknown:
        raise UsageError(f"--only: unknown variations {unknown}; the grid: {', '.join(names)}")
    _check_device(args.device)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    results = check_output_folder(
        args.results or f"results/variations-{args.profile}-{device}", "--results"
    )
    check_output_folder(args.runs, "--runs")
    for name in args.only or names:  # a record is a JSON object of the grid's, with its .val.en
        record, hypotheses = results / f"{name}.json", results / f"{name}.val.en"
        try:
            data = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # (missing, not UTF-8, not JSON)
            data = None
        ours = isinstance(data, dict) and {"variation", "config"} <= set(data)
        for path in (record, hypotheses):
            if path.exists() and not ours:
                raise OSError(f"--results {results}: {path.name} exists and is not a record of "
                              f"the grid, so it is not replaced: move it away")  # fmt: skip
    return variations.run_grid(args)


# --- the parser ----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description='The annotated "Attention Is All You Need": the package built from the book.',
        epilog=EXIT_STATUS,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    info = commands.add_parser("info", help="versions, device, and the chapter behind each module")
    info.set_defaults(run=cmd_info)
    download = commands.add_parser("download", help="download Multi30k (or WMT 2014 en-de), "
                                   "checking every file")  # fmt: skip
    download.add_argument("--data-dir", help="download into this folder (default: the cache)")
    _add_wmt14_options(download)
    download.set_defaults(run=cmd_download)
    for add in (_add_train, _add_prepare, _add_translate, _add_evaluate, _add_attention,
                _add_average, _add_save_pretrained, _add_export_onnx, _add_export_ct2,
                _add_export_hf, _add_grid):  # fmt: skip
        add(commands)
    return parser


def _add_wmt14_options(download: argparse.ArgumentParser) -> None:
    download.add_argument("--dataset", choices=["multi30k", "wmt14-en-de"], default="multi30k",
                          help="multi30k (default), or wmt14-en-de: the paper's WMT 2014 "
                          "archives, extracted as plain text into --data-dir")  # fmt: skip
    wmt = download.add_argument_group("wmt14-en-de")
    wmt.add_argument("--mirror", help="a folder holding the archives, or a URL to fetch them "
                     "from (https://, file://) instead of statmt.org")  # fmt: skip
    wmt.add_argument("--max-length", type=int, help="leave out training pairs with more words "
                     "on a side (default: keep all; fairseq: 250 BPE pieces)")  # fmt: skip
    wmt.add_argument(
        "--max-ratio",
        type=float,
        help="leave out training pairs whose longer "
        "side has more than this many words per word of the other (fairseq: 1.5)",
    )
    wmt.add_argument("--dedup", action="store_true", help="leave out repeated training pairs")
    wmt.add_argument(
        "--test-sources",
        help="for tests only: a JSON registry of the archives "
        "with its own checksums (a miniature mirror's), instead of the package's",
    )


DATA_HELP = f"folder holding the raw Multi30k files (default: ${DATA_DIR_ENV}, else download)"
Commands = argparse._SubParsersAction  # what `add_subparsers` returns


def _add_train(commands: Commands) -> None:
    train = commands.add_parser(
        "train",
        help="train a translation model: a preset's data and direction (Multi30k German→English "
        "unless --pair or the preset says otherwise); under torchrun, on many processes",
        description="Train a translation model from a preset (or --resume a run). Run it under "
        "`torchrun --nproc-per-node G` for G processes on one machine, or on N machines with "
        "`torchrun --nnodes N --nproc-per-node G --rdzv-backend c10d --rdzv-endpoint HOST:PORT` "
        "on each (NCCL on GPUs, gloo on CPUs; rank 0 writes the run folder, which every machine "
        "must see, e.g. on a shared disk).",
    )
    train.add_argument("--preset", choices=PRESET_NAMES)
    train.add_argument("--out", required=True, help="run folder: config, vocabularies, metrics, "
                       "checkpoints; new, empty, or a run folder of the trainer's")  # fmt: skip
    train.add_argument("--data-dir", help=DATA_HELP + "; for a WMT 2014 preset, the folder "
                       "`download --dataset wmt14-en-de` wrote")  # fmt: skip
    train.add_argument("--pair", choices=PAIRS, help="source-target languages: de-en translates "
                       "German into English, en-de back (default: the preset's)")  # fmt: skip
    length = train.add_mutually_exclusive_group()
    length.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    length.add_argument("--epochs", type=int, help="stop after this many passes over the data")
    train.add_argument("--resume", action="store_true", help="continue the run in --out")
    train.add_argument("--accumulate", type=int, help="micro-batches per optimizer step")
    train.add_argument("--max-tokens", type=int, help="tokens per micro-batch and side")
    train.add_argument("--dropout", type=float, help="P_drop (0 turns dropout off)")
    train.add_argument(
        "--tokenizer", choices=["word", "bpe"], help="word: spaCy words, a vocabulary per "
        "language; bpe: one BPE vocabulary for both, all embeddings tied (§3.4, §5.1; set "
        "share_embeddings=false to untie). Default: the preset's",
    )  # fmt: skip
    train.add_argument("--seed", type=int)
    train.add_argument(
        "--workers", type=int, help="DataLoader worker processes that read and pad the next "
        "batches while a step trains (setting loader_workers; 0: the trainer itself). Default: "
        "the preset's (WMT 2014: 2; others: 0)",
    )  # fmt: skip
    train.add_argument(
        "--set", action="append", metavar="NAME=VALUE", help="change any other setting of the "
        "preset, a JSON value: --set warmup=2000 --set clip_norm=1.0",
    )  # fmt: skip
    train.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda if available")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.set_defaults(run=cmd_train)


def _add_prepare(commands: Commands) -> None:
    about = ("learn the shared BPE of a WMT 2014 download and write its training shards, once "
             "(train does it in a single process; a torchrun job needs it done first)")  # fmt: skip
    prepare = commands.add_parser("prepare", help=about, description=about[0].upper() + about[1:]
                                  + ": into DATA_DIR/shards-bpeN-minF/, reused by every run "
                                  "with the same text and vocabulary.")  # fmt: skip
    prepare.add_argument("--data-dir", help="the folder `download --dataset wmt14-en-de` wrote "
                         f"(default: ${WMT14_DATA_DIR_ENV}, else the cache)")  # fmt: skip
    prepare.add_argument("--vocab-size", type=_count(high=1 << 20), default=37_000,
                         help="BPE pieces (the run's vocab_size; default 37000, §5.1)")  # fmt: skip
    prepare.add_argument("--min-freq", type=_count(), default=2,
                         help="the run's min_freq (default 2)")  # fmt: skip
    prepare.set_defaults(run=cmd_prepare)


def _add_translate(commands: Commands) -> None:
    translate = commands.add_parser(
        "translate", help="translate sentences from the model's source language into its target "
        "(the shipped model: German into English)",
    )  # fmt: skip
    translate.add_argument("text", nargs="*", help="sentences (default: one per line on stdin)")
    _model_options(translate)
    translate.add_argument(
        "--chunk", type=_count(high=1_000_000), default=CHUNK_LINES, metavar="LINES",
        help="standard input is read, translated and written this many lines at a time at most, "
        f"so memory stays bounded and each translation is written soon (default: {CHUNK_LINES})",
    )  # fmt: skip
    translate.add_argument(
        "--quantize", choices=["int8"],
        help="decode with 8-bit weights: the model converted to CTranslate2's int8 in memory "
        "(needs the [serve] extra; faster, a little less exact; see the chapter Serving)",
    )  # fmt: skip
    translate.set_defaults(run=cmd_translate)


def _add_evaluate(commands: Commands) -> None:
    evaluate = commands.add_parser(
        "evaluate", help="BLEU, chrF and lowercased BLEU on the splits of the model's corpus "
        "(sacreBLEU)",
    )  # fmt: skip
    evaluate.add_argument(
        "--split", nargs="+", metavar="SPLIT", help="Multi30k: val, test2016, test2017, "
        "test2018, mscoco, or all (default: test2016). WMT 2014: newstest2013, newstest2014 "
        "(2,737 sentences, sacreBLEU's wmt14), newstest2014-full (3,003), or all (default: "
        "newstest2014)",
    )  # fmt: skip
    evaluate.add_argument("--data-dir", help=DATA_HELP + "; for a WMT 2014 model, the folder "
                          "`download --dataset wmt14-en-de` wrote")  # fmt: skip
    evaluate.add_argument(
        "--output", help="also write the translations to this file (an existing file is "
        "replaced only if it is the translations of a results record, SPLIT-TAG.en, or .de "
        "for an English→German model)",
    )  # fmt: skip
    evaluate.add_argument(
        "--results", metavar="DIR", help="record each split in DIR: SPLIT-TAG.json (command, "
        "checkpoint, decoding, scores with signatures) and SPLIT-TAG.en (the translations; "
        ".de for an English→German model)",
    )  # fmt: skip
    evaluate.add_argument("--tag", help="name of the recorded files (default e.g. avg5-beam4, "
                          "avg5-beam4-keepgreedy with --keep-greedy, avg5-beam4-t2t with "
                          "--search t2t)")  # fmt: skip
    _model_options(evaluate)
    evaluate.set_defaults(run=cmd_evaluate)


def _add_attention(commands: Commands) -> None:
    attention = commands.add_parser(
        "attention", help="save every head's attention weights for one translated sentence"
    )
    attention.add_argument("--output", required=True, help="JSON file to write (an existing "
                           "file is replaced only if it is such a file)")  # fmt: skip
    attention.add_argument("text", help="one sentence in the model's source language")
    _model_options(attention)
    attention.set_defaults(run=cmd_attention)


def _add_average(commands: Commands) -> None:
    about = "average the last checkpoints of a run into one model (§6.1)"
    average = commands.add_parser("average", help=about)
    given = "a run folder (its last --last checkpoints), or checkpoint files"
    average.add_argument("checkpoints", nargs="+", metavar="PATH", help=given)
    average.add_argument("--last", type=_count(), help="checkpoints per run folder (default: "
                         "the run's average_last: 5, or 20 for wmt14-big)")  # fmt: skip
    average.add_argument("--out", required=True, help="the averaged model, e.g. runs/x/average.pt "
                         "(an existing file is replaced only if it is a checkpoint)")  # fmt: skip
    average.set_defaults(run=cmd_average)


def _add_save_pretrained(commands: Commands) -> None:
    about = "write a trained BPE run as a shipped model: fp16 safetensors with SHA-256 sums"
    save = commands.add_parser("save-pretrained", help=about, description=about + ".")
    save.add_argument("checkpoint", help="a checkpoint (e.g. an average), or a run folder")
    save.add_argument("--out", required=True, help="the folder to write (files in it that "
                      "are not a shipped model's are not replaced)")  # fmt: skip
    save.set_defaults(run=cmd_save_pretrained)


def _add_export(commands: Commands, name: str, about: str, more: str) -> argparse.ArgumentParser:
    """An export command: `--checkpoint` (default: the shipped model) and `--out`, a folder."""
    export = commands.add_parser(name, help=about, description=about + more)
    export.add_argument("--checkpoint", help="a checkpoint, or a run folder, with a BPE "
                        "vocabulary (default: the model that ships with the package)")  # fmt: skip
    export.add_argument("--out", required=True, help="the folder to write (files in it that an "
                        "export did not write are not replaced)")  # fmt: skip
    return export


def _add_export_onnx(commands: Commands) -> None:
    about = "write the model as ONNX graphs (encoder, one decoder step) with its tokenizer"
    export = _add_export(commands, "export-onnx", about, ": what the book's chapter 'Try it' "
                         "runs in the browser.")  # fmt: skip
    export.set_defaults(run=cmd_export_onnx, device="cpu")


def _add_export_ct2(commands: Commands) -> None:
    about = "write the model for CTranslate2 (OpenNMT's inference engine) with its tokenizer"
    export = _add_export(commands, "export-ct2", about, ". `translate --checkpoint OUT` then "
                         "decodes with it exactly as with PyTorch (float32).")  # fmt: skip
    export.add_argument("--quantization", choices=["float32", "int8"], default="float32",
                        help="the weights' type (int8: smaller and faster, a little less "
                        "exact; default: float32)")  # fmt: skip
    export.set_defaults(run=cmd_export_ct2, device="cpu")


def _add_export_hf(commands: Commands) -> None:
    about = "write the model for Hugging Face transformers (a MarianMTModel) with a model card"
    export = _add_export(commands, "export-hf", about, ": MarianMTModel.from_pretrained and "
                         "AutoTokenizer.from_pretrained read the folder with no code of this "
                         "package.")  # fmt: skip
    export.set_defaults(run=cmd_export_hf, device="cpu")


def _add_grid(commands: Commands) -> None:
    from annotated_transformer import variations  # without torch: it is imported when a run starts

    grid = commands.add_parser(
        "grid",
        help="train Table 3's variations on Multi30k and record each (§6.2)",
        description="Train the variations of Table 3 (and more) of one base run on Multi30k, score "
        "each on val with beam search and record it; what is recorded with the same settings is "
        "skipped. The grid's processes (--jobs) run `python -m annotated_transformer grid`.",
    )
    variations.add_grid_options(grid)
    grid.set_defaults(run=cmd_grid)


def _model_options(parser: argparse.ArgumentParser) -> None:
    """The options of every command that loads a trained model and translates with it."""
    parser.add_argument("--checkpoint", help="a checkpoint, or a run folder (default: the model "
                        "that ships with the package)")  # fmt: skip
    parser.add_argument("--device", choices=["cpu", "cuda"])
    parser.add_argument(
        "--beam", type=_count(" (1 is greedy decoding)"), default=4,
        help="beam size; 1 is greedy decoding (default: 4, §6.1)",
    )  # fmt: skip
    parser.add_argument(
        "--alpha", type=_alpha, default=0.6,
        help=f"length penalty alpha, 0 to {MAX_ALPHA:g} (default: 0.6, §6.1)",
    )  # fmt: skip
    parser.add_argument(
        "--max-tokens", type=_count(high=MAX_TOKENS), default=16384,
        help="source tokens per decoding batch, a k-th of it for k beams; lower it if memory "
        "runs out (default: 16384)",
    )  # fmt: skip
    parser.add_argument(
        "--keep-greedy", action="store_true",
        help="let the greedy hypothesis compete with the beams (default: the plain beam "
        "search; see the chapter Decoding)",
    )  # fmt: skip
    parser.add_argument(
        "--search", choices=["k-finished", "t2t"], default="k-finished",
        help="beam search's stopping rule: k-finished stops at k finished hypotheses (fairseq, "
        "CTranslate2, the page; the default), t2t at tensor2tensor's bound, as the paper's "
        "authors' code did (exact, slower; see the chapter Decoding)",
    )  # fmt: skip


# --- running a command ---------------------------------------------------------------------------


def _one_line(error: BaseException) -> str:
    """An error as one line: an OSError of the system as "FILE: REASON", else its message."""
    if isinstance(error, OSError) and error.filename and error.strerror:
        text = f"{error.filename}: {error.strerror}"
    else:
        text = str(error) or type(error).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _fail(error: BaseException, status: int) -> int:
    print(f"{PROG}: error: {_one_line(error)}", file=sys.stderr)
    return status


OUTPUTS = ("out", "output", "results", "runs", "data_dir", "checkpoint")  # paths typed
WRITTEN = ("out", "output", "results", "runs")  # the paths written to


def _check_not_a_broken_link(path: Path, option: str) -> None:
    """An output that is a symbolic link to nothing (or a loop of links) would be replaced by a
    regular file: refused, naming the link."""
    if not path.is_symlink():
        return
    try:
        path.resolve(strict=True)
    except FileNotFoundError:
        raise OSError(
            f"{option} {path}: a symbolic link to {os.readlink(path)}, which does not "
            f"exist: not replaced; remove the link or give its target"
        ) from None
    except (OSError, RuntimeError):  # RuntimeError: Python 3.11's word for a loop
        raise OSError(
            f"{option} {path}: a loop of symbolic links ({path} -> "
            f"{os.readlink(path)}): not replaced; remove the link"
        ) from None


def _check_paths_and_stdout(args: argparse.Namespace) -> None:
    """Before any work: no path option given empty, and (for every command that prints its
    results, all but train) a standard output that is open and not /dev/full or a full disk."""
    _check_text_is_utf8(args)
    for name in OUTPUTS:
        value = getattr(args, name, None)
        option = "--" + name.replace("_", "-")
        if isinstance(value, str) and not value.strip():
            raise UsageError(f"{option} {value!r}: an empty path; give a file or folder name")
        if isinstance(value, str) and name in WRITTEN:
            _check_not_a_broken_link(Path(value), option)
    if args.command == "train":  # (it logs on standard error)
        return
    if sys.stdout is None:
        raise OSError("standard output is closed: what the command prints would be lost")
    try:
        mode, full = os.fstat(sys.stdout.fileno()), None
        if stat.S_ISCHR(mode.st_mode) and os.path.exists("/dev/full"):
            full = mode.st_rdev == os.stat("/dev/full").st_rdev
        elif stat.S_ISREG(mode.st_mode):
            full = os.fstatvfs(sys.stdout.fileno()).f_bavail == 0
    except (OSError, ValueError, io.UnsupportedOperation):  # (not a file: a test's capture)
        return
    if full:
        raise OSError("standard output: No space left on device (it is /dev/full or on a full "
                      "disk): what the command prints would be lost")  # fmt: skip


# PyTorch's wordings: "CUDA out of memory", "MPS backend out of memory", "DefaultCPUAllocator:
# can't allocate memory: ... Error code 12 (Cannot allocate memory)" (Linux), "not enough
# memory" (Windows), "std::bad_alloc"
OUT_OF_MEMORY = ("out of memory", "not enough memory", "can't allocate memory",
                 "cannot allocate memory", "bad_alloc")  # fmt: skip


def _out_of_memory(args: argparse.Namespace, error: BaseException) -> str | None:
    """One line for running out of memory, naming the option to lower; None for another error."""
    text = str(error)
    if not (isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError"
            or any(words in text.lower() for words in OUT_OF_MEMORY)):  # fmt: skip
        return None
    where = "GPU" if any(name in text for name in ("CUDA", "cuda", "MPS", "HIP")) else "memory"
    if args.command == "train":
        lower = ("lower --max-tokens (or --set max_tokens=N; raise --accumulate to keep the "
                 "batch), then --resume")  # fmt: skip
    elif hasattr(args, "beam"):
        lower = f"lower --max-tokens (now {args.max_tokens}) or --beam (now {args.beam})"
    else:
        lower = "close other programs, or run it on a machine with more memory"
    found = re.search(r"tried to allocate (\d+) bytes|tried to allocate ([\d.]+ [KMGT]iB)",
                      text, re.IGNORECASE)  # fmt: skip
    asked = "" if found is None else "; {} asked for at once".format(
        f"{int(found[1]) / 2**30:,.1f} GiB" if found[1] else found[2]
    )  # fmt: skip
    return f"out of {where} while running {args.command}: {lower}{asked}"


def _check_text_is_utf8(args: argparse.Namespace) -> None:
    """The sentences typed as arguments are UTF-8 text: Python keeps a byte that is not (typed
    in a terminal of another encoding) as a lone surrogate, which no tokenizer reads."""
    text = getattr(args, "text", None)
    for number, sentence in enumerate([text] if isinstance(text, str) else text or [], 1):
        try:
            sentence.encode("utf-8")
        except UnicodeEncodeError as error:
            byte = ord(sentence[error.start]) - 0xDC00  # (surrogateescape keeps byte b as U+DCbb)
            shown = f"byte 0x{byte:02x}" if 0x80 <= byte <= 0xFF else "a lone surrogate"
            raise ValueError(f"argument {number} is not UTF-8 text ({shown} at character "
                             f"{error.start + 1}): set the terminal to UTF-8, or give the "
                             f"sentences as UTF-8 on standard input") from None  # fmt: skip


class StdoutError(OSError):
    """Standard output could not be written (a full disk): what was printed is lost."""


def _flush_stdout() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        raise StdoutError(f"cannot write standard output: {error.strerror or error}") from None


def _drop_stdout() -> None:
    """Point standard output at /dev/null, so that the exit's flush fails no more."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # (standard output is not a file)
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # (argparse exits: 0 after --help or --version, 2 on a mistake)
    if not getattr(args, "run", None):
        parser.print_usage(sys.stderr)
        commands = ("info, download, train, prepare, translate, evaluate, attention, average, "
                    "save-pretrained, export-onnx, export-ct2, export-hf")  # fmt: skip
        return _fail(UsageError(f"give a command: {commands} or grid (--help for each)"), 2)
    try:
        _check_paths_and_stdout(args)
        status = args.run(args)
        if sys.stdout is not None:
            _flush_stdout()
        return status
    except UsageError as error:  # what was typed
        return _fail(error, 2)
    except BrokenPipeError:  # the reader of standard output went away (`| head`): stop quietly
        _drop_stdout()
        return 1
    except StdoutError as error:  # standard output filled up
        _drop_stdout()
        return _fail(error, 1)
    except (OSError, ValueError) as error:  # the files or the machine
        return _fail(error, 1)
    except (RuntimeError, MemoryError) as error:  # from PyTorch: only out of memory is ours
        message = _out_of_memory(args, error)
        if message is None:
            raise
        return _fail(RuntimeError(message), 1)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
