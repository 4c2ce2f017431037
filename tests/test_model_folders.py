"""Issue 44, item 3: a damaged or foreign model folder is one line, never a traceback.

What the table of tests/test_cli_errors.py runs as subprocesses, checked here in this process
and further: a folder is told by what wrote it (even with its record damaged), a save-pretrained
folder's sizes are compared with its weights before any model is built, each part of a
checkpoint has the type this package writes, PyTorch's own out-of-memory errors (a real
allocation that fails, and each wording it has) are one line, and so is a sentence typed in
another encoding than UTF-8.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from test_cli_errors import (
    CHECKPOINT,
    FIXTURE,
    crafted_checkpoint,
    export_of,
    fails,
    shipped_with,
)

from annotated_transformer import cli, pretrained
from annotated_transformer.runs.checkpoints import check_payload, load_checkpoint, read_checkpoint


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A scratch folder holding `run`: a copy of the tiny 0.1.0 run."""
    shutil.copytree(FIXTURE, tmp_path / "run")
    return tmp_path


# --- a folder that another command wrote ---------------------------------------------------------


def test_a_folder_is_told_by_what_wrote_it_even_without_its_record(folder):
    export_of("export-ct2", "ct2")(folder)
    assert cli._model_folder(folder / "ct2")[1] == "export-ct2"
    (folder / "ct2" / "export.json").unlink()  # its record lost: its files still tell
    assert cli._model_folder(folder / "ct2")[1] == "export-ct2"
    for path in (folder / "run", folder / "run" / CHECKPOINT, folder / "nowhere"):
        assert cli._model_folder(path) is None  # a run folder, a checkpoint: what commands read
    shipped_with()(folder)
    assert cli._model_folder(folder / "shipped") is None


def test_a_ct2_export_given_to_evaluate_writes_no_record_and_translates_nothing(
    capsys, monkeypatch, folder
):
    export_of("export-ct2", "ct2")(folder)
    opened = []
    translator = "annotated_transformer.cli.translate_commands._translator"  # (never reached)
    monkeypatch.setattr(translator, lambda args: opened.append(args))
    ct2, results = str(folder / "ct2"), str(folder / "res")
    fails(capsys, 1, "evaluate needs a checkpoint, a run folder or a save-pretrained folder",
          "evaluate", "--checkpoint", ct2, "--results", results)  # fmt: skip
    assert not opened and not (folder / "res").exists()


# --- a save-pretrained folder: checked before the model is built ---------------------------------


def sized(folder: Path, **model: object) -> Path:
    """The shipped model's weights and tokenizer (linked) under a config.json of other sizes."""
    source, sized = pretrained.shipped_folder(), folder / "sized"
    sized.mkdir()
    for name in (pretrained.WEIGHTS, pretrained.TOKENIZER):
        (sized / name).symlink_to(source / name)
    about = json.loads((source / pretrained.CONFIG).read_text(encoding="utf-8"))
    about["config"]["model"] |= model
    (sized / pretrained.CONFIG).write_text(json.dumps(about), encoding="utf-8")
    return sized


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"d_model": 4194304}, "(8000, 256) in the weights, (8000, 4194304) by the config"),
        ({"N": 100000}, "N is 100000 by the config, the weights hold 3 encoder and 3 decoder"),
        ({"d_ff": 1 << 30}, "w_1.weight is (1024, 256) in the weights, (1073741824, 256)"),
        ({"h": 4, "d_k": 1 << 20, "d_v": 64}, "w_q.weight is (256, 256) in the weights, (4194304"),
    ],
)
def test_sizes_that_do_not_fit_the_weights_are_refused_before_building(
    monkeypatch, tmp_path, sizes, message
):
    def build_model(config):
        raise AssertionError(f"a model was built for {config}")

    monkeypatch.setattr(pretrained, "check_files", lambda folder: None)  # (sums: not tested here)
    monkeypatch.setattr(pretrained, "build_model", build_model)
    with pytest.raises(ValueError, match="does not fit") as error:
        pretrained.load_pretrained(sized(tmp_path, **sizes))
    assert message in str(error.value)


def test_a_save_pretrained_folder_that_fits_still_loads(monkeypatch, tmp_path):
    monkeypatch.setattr(pretrained, "check_files", lambda folder: None)
    loaded = pretrained.load_pretrained(sized(tmp_path))  # (the sizes as they were)
    assert loaded.config.model.d_model == 256 and pretrained.tied_names(loaded.model)


# --- a checkpoint: each part of the type this package writes -------------------------------------


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ({"model": {"encoder.weight": 3}}, "model['encoder.weight'] is an integer, expected a "
         "tensor"),
        ({"train_state": {"step": 2, "wall": 1.5}}, "train_state['wall'] is a number, expected "
         "an integer counter, one of micro_batches, sentences, skipped, step, tokens"),
        ({"train_state": {"step": "2"}}, "train_state['step'] is a string, expected an integer"),
        ({"epoch": 1.5}, "epoch is a number, expected an integer"),
        ({"elapsed": "long"}, "elapsed is a string, expected a number of seconds"),
        ({"averaged_from": [{"path": "a.pt"}]}, "averaged_from is a list, expected a list of the "
         "checkpoints averaged, each with its step"),
    ],
)  # fmt: skip
def test_each_part_of_a_checkpoint_has_its_type(folder, parts, message):
    payload = read_checkpoint(folder / "run" / CHECKPOINT)
    check_payload(payload, folder / "run" / CHECKPOINT)  # the run's own: as it was written
    with pytest.raises(ValueError, match="the checkpoint's") as error:
        check_payload({**payload, **parts}, Path("crafted.pt"))
    assert message in str(error.value)


def test_the_counters_a_checkpoint_may_hold_are_the_trainers():
    from dataclasses import fields

    from annotated_transformer.runs.checkpoints import COUNTERS
    from annotated_transformer.training.loop import TrainState

    assert COUNTERS == tuple(sorted(field.name for field in fields(TrainState)))


def test_a_crafted_checkpoint_is_refused_by_every_command_that_reads_one(capsys, folder):
    crafted_checkpoint("crafted.pt", train_state=[2])(folder)
    crafted = str(folder / "crafted.pt")
    for argv in (
        ("translate", "--checkpoint", crafted, "Hund."),
        ("average", crafted, "--out", str(folder / "avg.pt")),
        ("save-pretrained", crafted, "--out", str(folder / "shipped")),
    ):
        fails(capsys, 1, "crafted.pt: the checkpoint's train_state is a list", *argv)
    assert not (folder / "avg.pt").exists() and not (folder / "shipped").exists()
    assert load_checkpoint(folder / "run")["train_state"]["step"] == 2  # the run's own loads


# --- out of memory, as PyTorch says it -----------------------------------------------------------


def overcommitted() -> bool:
    try:
        return Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1"
    except OSError:
        return False


def test_a_real_allocation_that_fails_is_one_line(capsys, monkeypatch, folder):
    if overcommitted():
        pytest.skip("this machine overcommits memory: 2^44 bytes would be granted")

    def decode(*args, **kwargs):
        return torch.empty(2**44, dtype=torch.uint8)  # 16 TiB: PyTorch's own error

    monkeypatch.setattr("annotated_transformer.translator.translate_ids", decode)
    err = fails(capsys, 1, "out of memory while running translate: lower --max-tokens (now "
                "16384) or --beam (now 4); 16,384.0 GiB asked for at once", "translate",
                "--checkpoint", str(folder / "run"), "Hund.")  # fmt: skip
    assert "DefaultCPUAllocator" not in err


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
         "memory: you tried to allocate 17592186044416 bytes. Error code 12 (Cannot allocate "
         "memory)", "memory"),  # Linux
        ("[enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you "
         "tried to allocate 17592186044416 bytes.", "memory"),  # Windows
        ("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.1 "
         "GiB", "GPU"),
        ("MPS backend out of memory (MPS allocated: 1.00 GB, other allocations: 0 bytes, max "
         "allowed: 9.07 GB). Tried to allocate 16.00 GiB on private pool.", "GPU"),
        ("std::bad_alloc", "memory"),
    ],
)  # fmt: skip
def test_every_wording_of_pytorch_for_out_of_memory_is_known(text, where):
    args = cli.build_parser().parse_args(["translate", "Hund."])
    line = cli._out_of_memory(args, RuntimeError(text))
    assert line is not None and line.startswith(f"out of {where} while running translate")
    other = RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)")
    assert cli._out_of_memory(args, other) is None  # PyTorch's other errors stay tracebacks


# --- a sentence typed in another encoding --------------------------------------------------------


def test_a_sentence_that_is_not_utf8_is_one_line_before_any_model(capsys, monkeypatch, folder):
    translator = "annotated_transformer.cli.translate_commands._translator"
    monkeypatch.setattr(translator, lambda args: pytest.fail("a model was loaded"))
    latin1 = os.fsdecode("Männer".encode("latin-1"))  # as Python reads a Latin-1 terminal's bytes
    fails(capsys, 1, "argument 2 is not UTF-8 text (byte 0xe4 at character 2)",
          "translate", "Hund.", latin1)  # fmt: skip
    fails(capsys, 1, "argument 1 is not UTF-8 text (byte 0xe4 at character 2)",
          "attention", "--output", str(folder / "a.json"), latin1)  # fmt: skip
    assert not (folder / "a.json").exists()
    args = cli.build_parser().parse_args(["translate", "Männer", "\u2603"])
    cli._check_text_is_utf8(args)  # UTF-8 text, however far from ASCII, passes
