"""The training commands: `train` (a preset, or --resume a run; under torchrun on many
processes), `average` (the last checkpoints of a run into one model, §6.1) and `grid` (Table 3's
variations, each trained and recorded).

Hand-written; taught by the chapters "Multi30k: words, tokens and vocabularies", "A real-world
example" and "Engineering a training run" (train), "Results" and "At the paper's scale"
(train, average), "Table 3 on Multi30k" and "Tied embeddings, and words against pieces" (grid).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from annotated_transformer.cli.common import (
    PRESET_LIST,
    UsageError,
    check_device,
    check_output_file,
    check_output_folder,
    check_replaceable_file,
)
from annotated_transformer.cli.model_inputs import check_model_input
from annotated_transformer.util.errors import InputError


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
    from annotated_transformer.training.run import train
    from annotated_transformer.training.run_folder import holds_a_run

    _check_not_another_commands(Path(args.out))
    if args.preset is None and not holds_a_run(Path(args.out)):
        raise UsageError(f"give --preset ({PRESET_LIST}), or --resume a run folder that holds a "
                         "checkpoint or a config.json")  # fmt: skip
    config = _train_config(args, changes)  # (`train` checks the run folder, before any write)
    check_device(args.device)
    _check_fits(config, args.device)
    outcome = train(
        config, args.out, data_dir=args.data_dir, resume=args.resume, device=args.device,
        progress=not args.no_progress,
        log=lambda message: print(message, file=sys.stderr, flush=True),
    )  # fmt: skip
    return 0 if outcome.stopped_by is None else 128 + outcome.stopped_by


def _check_not_another_commands(out: Path) -> None:
    """Refuse `--out` a model folder that another command wrote (an export, a save-pretrained
    folder), naming it, rather than reading its config.json as a run's."""
    if not out.is_dir():
        return
    from annotated_transformer.exports.formats import identify
    from annotated_transformer.util.errors import ModelFolderError

    found = identify(out)
    if found.name != "run folder":
        raise ModelFolderError(
            f"--out {out} is {found.what} (written by {found.writer}), not a run folder: train "
            f"writes a new run into a new or empty folder, or continues a run folder (--resume)"
        )


def _check_fits(config, device: str | None) -> None:
    """Before any data is read: refuse a model whose training state (16 bytes a parameter:
    weight, gradient, Adam's two moments) cannot fit the memory of the device it would train on.
    The vocabularies, not read yet, count as empty; `build_model` checks again with them."""
    from annotated_transformer.model.model_checks import TRAINING_BYTES, check_fits_device
    from annotated_transformer.util.device import default_device

    check_fits_device(config.model, default_device(device), TRAINING_BYTES)


def cmd_average(args: argparse.Namespace) -> int:
    """Average the last K checkpoints of a run (or the files given) into one model (§6.1)."""
    from annotated_transformer.runs.averaging import (
        average_checkpoints,
        check_average_path,
        last_checkpoints,
    )
    from annotated_transformer.runs.checkpoints import is_checkpoint

    try:
        out = check_average_path(args.out)
    except InputError as error:
        raise UsageError(str(error)) from None
    check_output_file(out, "--out", is_checkpoint, "a checkpoint")
    for given in args.checkpoints:
        check_model_input(given, "average")
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


def _grid_record(path: Path) -> bool:
    """Whether `path` is a record `grid` wrote: a JSON object with a variation and a config."""
    from annotated_transformer.util.atomic import read_json_object

    data = read_json_object(path)
    return data is not None and {"variation", "config"} <= set(data)


def _grid_translations(path: Path) -> bool:
    """Whether `path` (NAME.val.en) stands beside a record `grid` wrote (NAME.json)."""
    name = path.name.removesuffix(".val.en")
    return name != path.name and _grid_record(path.with_name(f"{name}.json"))


def cmd_grid(args: argparse.Namespace) -> int:
    """Check the grid's options and outputs, then run it (`variations.run_grid`)."""
    from annotated_transformer import variations
    from annotated_transformer.util.device import default_device

    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: expected a positive number of processes")
    names = [v.name for v in variations.grid(variations.base_config(args.profile))]
    unknown = sorted(set(args.only or []) - set(names))
    if unknown:
        raise UsageError(f"--only: unknown variations {unknown}; the grid: {', '.join(names)}")
    check_device(args.device)
    device = default_device(args.device).type  # "cuda" or "cpu", as the results folder says
    results = check_output_folder(
        args.results or f"results/variations-{args.profile}-{device}", "--results"
    )
    check_output_folder(args.runs, "--runs")
    for name in args.only or names:  # a record of the grid's, and its translations of val
        record, hypotheses = results / f"{name}.json", results / f"{name}.val.en"
        instead = "choose another --results folder"
        check_replaceable_file(record, "--results", _grid_record, "a record of the grid", instead)
        check_replaceable_file(hypotheses, "--results", _grid_translations,
                               "the translations beside a record of the grid", instead)  # fmt: skip
    return variations.run_grid(args)
