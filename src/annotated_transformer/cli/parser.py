"""The parser of `annotated-transformer`, in one place: `build_parser`, every command's options
and help, the exit statuses its `--help` lists, and argparse's mistakes in the command's one-line
form (exit status 2). Building it imports no torch: `--help` is quick.

Hand-written; each command's options are taught by the chapters its module names
(`train_commands`, `translate_commands`, `export_commands`, `data_commands`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn

from annotated_transformer import __version__
from annotated_transformer.cli.common import (
    LARGEST_INT,
    MAX_ALPHA,
    MAX_TOKENS,
    PAIRS,
    PRESET_NAMES,
    PROG,
    thread_count,
)
from annotated_transformer.cli.data_commands import cmd_download, cmd_info, cmd_prepare
from annotated_transformer.cli.export_parser import (
    add_export_ct2,
    add_export_hf,
    add_export_onnx,
    add_save_pretrained,
)
from annotated_transformer.cli.standard_input import CHUNK_LINES
from annotated_transformer.cli.train_commands import cmd_average, cmd_grid, cmd_train
from annotated_transformer.cli.translate_commands import (
    cmd_attention,
    cmd_evaluate,
    cmd_kernels,
    cmd_translate,
)
from annotated_transformer.data.multi30k import DATA_DIR_ENV
from annotated_transformer.data.wmt14 import DATA_DIR_ENV as WMT14_DATA_DIR_ENV

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
    for add in (_add_train, _add_prepare, _add_translate, _add_kernels, _add_evaluate,
                _add_attention, _add_average, add_save_pretrained, add_export_onnx,
                add_export_ct2, add_export_hf, _add_grid):  # fmt: skip
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
    train.add_argument(
        "--preset", choices=PRESET_NAMES, help="the settings to start from (chapter \"Engineering "
        "a training run\"): tiny for tests, small for two CPU cores, release for the shipped "
        "model, base and big as Table 3, wmt14-base and wmt14-big as the paper trained",
    )  # fmt: skip
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
    train.add_argument("--seed", type=int, help="seeds the initial weights, the batches' order "
                       "and dropout (default: the preset's, 0)")  # fmt: skip
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
    translate.add_argument("text", nargs="*", help="sentences (default, or -: one per line on "
                           "stdin)")  # fmt: skip
    _model_options(translate)
    translate.add_argument(
        "--chunk", type=_count(high=1_000_000), default=CHUNK_LINES, metavar="LINES",
        help="standard input is read, translated and written this many lines at a time at most, "
        f"so memory stays bounded and each translation is written soon (default: {CHUNK_LINES})",
    )  # fmt: skip
    _quantize_option(translate)
    translate.add_argument(
        "--verbose", action="store_true",
        help="say on standard error which attention decodes (compiled kernels, or PyTorch's), "
        "and why",
    )  # fmt: skip
    translate.set_defaults(run=cmd_translate)


def _add_kernels(commands: Commands) -> None:
    about = ("compile the attention kernels of a model for this processor into the package's "
             "cache (a C++ compiler; seconds, once): translate runs them from then on")  # fmt: skip
    kernels = commands.add_parser("kernels", help=about, description=about[0].upper() + about[1:]
                                  + " (chapter Fast decoding; $ANNOTATED_TRANSFORMER_KERNELS "
                                  "names another folder, or off).")  # fmt: skip
    kernels.add_argument("--checkpoint", help="a checkpoint, or a run folder (default: the "
                         "model that ships with the package)")  # fmt: skip
    kernels.add_argument("--rebuild", action="store_true", help="compile them again even where "
                         "they are built")  # fmt: skip
    kernels.set_defaults(run=cmd_kernels, device="cpu")


def _add_evaluate(commands: Commands) -> None:
    evaluate = commands.add_parser(
        "evaluate", help="BLEU, chrF and lowercased BLEU on the splits of the model's corpus "
        "(sacreBLEU)",
    )  # fmt: skip
    evaluate.add_argument(
        "--split", nargs="+", metavar="SPLIT", help="Multi30k: val, test2016, test2017, "
        "test2018, mscoco, or all (default: test2016). WMT 2014: newstest2013, newstest2014-full "
        "(3,003 sentences, the form whose scores compare with the paper's), newstest2014-filtered "
        "(2,737, sacreBLEU's wmt14), or all (default: newstest2014-full)",
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
    _quantize_option(evaluate)
    evaluate.set_defaults(run=cmd_evaluate)


def _add_attention(commands: Commands) -> None:
    attention = commands.add_parser(
        "attention", help="save every head's attention weights for one translated sentence"
    )
    attention.add_argument("--output", required=True, help="JSON file to write (an existing "
                           "file is replaced only if it is such a file), or - for standard "
                           "output")  # fmt: skip
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


def _quantize_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quantize", choices=["int8", "ct2-int8"],
        help="decode with 8-bit weights: int8, our own (PyTorch's dynamic quantization of the "
        "linear layers, on the CPU); ct2-int8, the model converted to CTranslate2's int8 in "
        "memory (needs the [serve] extra). A little less exact; see the chapter Serving",
    )  # fmt: skip


def _model_options(parser: argparse.ArgumentParser) -> None:
    """The options of every command that loads a trained model and translates with it."""
    parser.add_argument("--checkpoint", help="a checkpoint, or a run folder (default: the model "
                        "that ships with the package)")  # fmt: skip
    parser.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda if available")
    parser.add_argument(
        "--beam", type=_count(" (1 is greedy decoding)"), default=4,
        help="beam size; 1 is greedy decoding (default: 4, §6.1)",
    )  # fmt: skip
    parser.add_argument(
        "--alpha", type=_alpha, default=0.6,
        help=f"length penalty alpha, 0 to {MAX_ALPHA:g} (default: 0.6, §6.1)",
    )  # fmt: skip
    parser.add_argument(
        "--max-tokens", type=_count(high=MAX_TOKENS), default=8192,
        help="source tokens per decoding batch, a k-th of it for k beams; lower it if memory "
        "runs out (default: 8192)",
    )  # fmt: skip
    parser.add_argument(
        "--threads", type=thread_count,
        help="CPU threads to decode on, each running its own batches (default: the threads "
        "PyTorch may use, at most the cores this process may run on; see the chapter Serving)",
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
