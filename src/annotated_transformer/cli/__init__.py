"""The `annotated-transformer` command line (hand-written glue, not generated from a chapter).
It stands above every other part of the package (the exports included), and nothing in the
package imports it.

Subcommands are added by the parts of the book that build them (training, translation,
evaluation, ...). A mistake is one line on stderr, `annotated-transformer: error: ...`, never a
traceback, with an exit status that says whose it is: 2 for what was typed (a `UsageError`, or
argparse's own errors), 1 for what the files or the machine did (`OSError`, `ValueError`: a
missing or damaged file, an output that cannot be written, no CUDA, a full disk). Every command
checks where it will write before it reads or computes anything, and never replaces a file that
it did not write.

One module per group of commands, with the parser and the error handling each in one place:

- `parser`: `build_parser`, every command's options and help, the exit statuses;
- `entry`: `main`, which checks paths and standard output first and makes every error one line;
- `common`: what the commands share (`UsageError`, the checks of outputs and `--device`);
- `model_inputs`: what a command reads as its model, and the `Translator` opened from it;
- `standard_input`: `translate`'s standard input, as UTF-8 lines in chunks;
- `train_commands`: train, average, grid;
- `translate_commands`: translate, kernels, evaluate, attention (`translate_input`: translate's
  chunks of standard input on the workers);
- `export_commands`: save-pretrained, export-onnx, export-ct2, export-hf (`export_parser`: their
  options);
- `data_commands`: info, download, prepare.
"""

from annotated_transformer.cli.common import (
    LANGUAGE_NAMES,
    LARGEST_INT,
    MAX_ALPHA,
    MAX_TOKENS,
    PAIRS,
    PRESET_NAMES,
    PROG,
    StdoutError,
    UsageError,
    check_output_file,
    check_output_folder,
)
from annotated_transformer.cli.entry import check_text_is_utf8, main, out_of_memory
from annotated_transformer.cli.parser import EXIT_STATUS, build_parser
from annotated_transformer.cli.standard_input import CHUNK_LINES

__all__ = [
    "CHUNK_LINES",
    "EXIT_STATUS",
    "LANGUAGE_NAMES",
    "LARGEST_INT",
    "MAX_ALPHA",
    "MAX_TOKENS",
    "PAIRS",
    "PRESET_NAMES",
    "PROG",
    "StdoutError",
    "UsageError",
    "build_parser",
    "check_output_file",
    "check_output_folder",
    "check_text_is_utf8",
    "main",
    "out_of_memory",
]
