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
from annotated_transformer.exports.formats import identify
from annotated_transformer.runs.checkpoints import check_payload, load_checkpoint, read_checkpoint


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A scratch folder holding `run`: a copy of the tiny 0.1.0 run."""
    shutil.copytree(FIXTURE, tmp_path / "run")
    return tmp_path


# --- a folder that another command wrote ---------------------------------------------------------


def test_a_folder_is_told_by_what_wrote_it_even_without_its_record(folder):
    export_of("export-ct2", "ct2")(folder)
    assert identify(folder / "ct2").writer == "export-ct2"
    (folder / "ct2" / "export.json").unlink()  # its record lost: its files still tell
    assert identify(folder / "ct2").writer == "export-ct2"
    assert identify(folder / "run").name == "run folder"
    assert identify(folder / "run" / CHECKPOINT).name == "checkpoint"
    with pytest.raises(FileNotFoundError, match="no such checkpoint or run folder"):
        identify(folder / "nowhere")
    shipped_with()(folder)
    assert identify(folder / "shipped").name == "save-pretrained"
    assert identify(None).name == "shipped"


def test_a_ct2_export_given_to_evaluate_writes_no_record_and_translates_nothing(
    capsys, monkeypatch, folder
):
    export_of("export-ct2", "ct2")(folder)
    opened = []
    translator = "annotated_transformer.cli.translate_commands.open_model"  # (never reached)
    monkeypatch.setattr(translator, lambda args, command: opened.append(args))
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

    unchecked = {pretrained.WEIGHTS: "unchecked"}  # (the sums: not tested here)
    monkeypatch.setattr(pretrained, "check_files", lambda folder: unchecked)
    monkeypatch.setattr(pretrained, "build_model", build_model)
    with pytest.raises(ValueError, match="does not fit") as error:
        pretrained.load_pretrained(sized(tmp_path, **sizes))
    assert message in str(error.value)


def test_a_save_pretrained_folder_that_fits_still_loads(monkeypatch, tmp_path):
    monkeypatch.setattr(pretrained, "check_files", lambda folder: {pretrained.WEIGHTS: "unchecked"})
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
                "8192) or --beam (now 4); 16,384.0 GiB asked for at once", "translate",
                "--checkpoint", str(folder / "run"), "Hund.")  # fmt: skip
    assert "DefaultCPUAllocator" not in err


@pytest.mark.parametrize(
    ("error", "where"),
    [
        (RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
         "allocate memory: you tried to allocate 17592186044416 bytes. Error code 12 (Cannot "
         "allocate memory)"), "memory"),  # Linux
        (RuntimeError("[enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough "
         "memory: you tried to allocate 17592186044416 bytes."), "memory"),  # Windows
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a "
         "total capacity of 79.1 GiB"), "GPU"),
        (torch.OutOfMemoryError("MPS backend out of memory (MPS allocated: 1.00 GB, other "
         "allocations: 0 bytes, max allowed: 9.07 GB). Tried to allocate 16.00 GiB on private "
         "pool."), "GPU"),
        (RuntimeError("std::bad_alloc"), "memory"),
        (MemoryError(), "memory"),
    ],
)  # fmt: skip
def test_running_out_of_memory_is_known_by_type(error, where):
    args = cli.build_parser().parse_args(["translate", "Hund."])
    line = cli.out_of_memory(args, error)
    assert line is not None and line.startswith(f"out of {where} while running translate")
    other = RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)")
    assert cli.out_of_memory(args, other) is None  # PyTorch's other errors are bugs: tracebacks
    text = RuntimeError("CUDA out of memory. Tried to allocate 20.00 GiB")  # words, not a type
    assert cli.out_of_memory(args, text) is None


# --- a sentence typed in another encoding --------------------------------------------------------


def test_a_sentence_that_is_not_utf8_is_one_line_before_any_model(capsys, monkeypatch, folder):
    translator = "annotated_transformer.cli.translate_commands.open_model"
    monkeypatch.setattr(translator, lambda args, command: pytest.fail("a model was loaded"))
    latin1 = os.fsdecode("Männer".encode("latin-1"))  # as Python reads a Latin-1 terminal's bytes
    fails(capsys, 1, "argument 2 is not UTF-8 text (byte 0xe4 at character 2)",
          "translate", "Hund.", latin1)  # fmt: skip
    fails(capsys, 1, "argument 1 is not UTF-8 text (byte 0xe4 at character 2)",
          "attention", "--output", str(folder / "a.json"), latin1)  # fmt: skip
    assert not (folder / "a.json").exists()
    args = cli.build_parser().parse_args(["translate", "Männer", "\u2603"])
    cli.check_text_is_utf8(args)  # UTF-8 text, however far from ASCII, passes


# --- one door to a model (issue 59) and records that name their model (issue 60) ----------------


def test_every_form_opens_through_one_door_and_a_ct2_engine_is_wrapped(folder):
    from annotated_transformer import open_translator
    from annotated_transformer.exports.ct2 import CT2Translator
    from annotated_transformer.translator import Translator

    export_of("export-ct2", "ct2")(folder)
    shipped_with()(folder)
    engine = open_translator(folder / "ct2", workers=1)
    assert isinstance(engine, CT2Translator) and not isinstance(engine, Translator)
    assert not hasattr(engine, "model") and engine.device.type == "cpu"
    mine = open_translator(folder / "shipped", device="cpu", max_tokens=999, workers=1)
    assert isinstance(mine, Translator) and (mine.max_tokens, mine.workers) == (999, 1)
    sentence = ["Ein Hund rennt durch den Schnee."]
    assert engine.translate(sentence, beam_size=1) == mine.translate(sentence, beam_size=1)
    streamed = engine.translate_stream(iter(["", *sentence]), beam_size=1)
    assert list(streamed) == ["", *mine.translate(sentence, beam_size=1)]
    run = open_translator(folder / "run", device="cpu")
    assert run.origin["step"] == 2 and run.device.type == "cpu"
    with pytest.raises(ValueError, match=r"ct2 is a CTranslate2 export .*: average needs a "
                       r"checkpoint or a run folder"):  # fmt: skip
        open_translator(folder / "ct2", reads=("checkpoint", "run folder"), who="average")
    with pytest.raises(ValueError, match="not quantized again"):
        open_translator(folder / "ct2", quantize="int8")
    with pytest.raises(ValueError, match=r"an export \(it holds export.json\).*open_translator"):
        Translator.from_checkpoint(folder / "ct2")  # (it said: no checkpoint-*.pt)


def test_only_the_packages_own_weights_are_shipped_and_records_name_the_weights(folder):
    from annotated_transformer import open_translator
    from annotated_transformer.pretrained import SUMS, WEIGHTS, read_sums, shipped_folder

    shipped_with()(folder)
    copy = open_translator(folder / "shipped", device="cpu")
    own = open_translator(device="cpu")
    assert own.origin["shipped"] is True and copy.origin["shipped"] is False
    sums = read_sums(shipped_folder())
    assert own.origin["weights_sha256"] == copy.origin["weights_sha256"] == sums[WEIGHTS]
    (folder / "shipped" / WEIGHTS).write_bytes(b"changed")  # a user's own folder, damaged
    with pytest.raises(ValueError, match="write the folder again with save-pretrained"):
        open_translator(folder / "shipped", device="cpu")
    assert (shipped_folder() / SUMS).is_file()


def test_evaluate_with_ctranslate2s_int8_records_its_scores(folder, monkeypatch, capsys):
    pytest.importorskip("ctranslate2")
    from annotated_transformer.data import multi30k

    pairs = [("Ein Hund rennt.", "A dog runs."), ("Eine Frau lacht.", "A woman laughs.")] * 3
    monkeypatch.setattr(multi30k, "read_split", lambda split, data_dir=None, pair="de-en": pairs)
    results = folder / "results"
    status = cli.main(["evaluate", "--quantize", "ct2-int8", "--split", "val", "--beam", "1",
                       "--results", str(results)])  # fmt: skip
    assert status == 0, capsys.readouterr().err
    (record,) = results.glob("val-*.json")
    about = json.loads(record.read_text(encoding="utf-8"))
    assert "ct2-int8" in record.name and about["checkpoint"]["shipped"] is True
    assert about["device"].startswith("cpu")


def test_a_disk_that_fills_under_standard_output_is_named(folder, monkeypatch, capsys):
    """Standard output on a disk that fills while translating (the check before any work saw
    room): the one line names standard output, not a bare "[Errno 28]" (issue 60)."""
    import errno
    import io
    import sys

    class FillingDisk(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sys, "stdout", FillingDisk())
    status = cli.main(["translate", "--checkpoint", str(folder / "run"), "--beam", "1", "Hund."])
    err = capsys.readouterr().err
    assert status == 1 and isinstance(sys.stdout, FillingDisk)  # (put back as it was)
    assert err.strip().splitlines() == [
        "annotated-transformer: error: cannot write standard output: No space left on device"
    ]


def test_an_error_that_is_not_the_packages_is_a_bug_with_its_traceback(folder, monkeypatch, capsys):
    """Errors are known by type (issue 59): a ValueError from outside the package is no longer
    taken for "the files or the machine"; it is a bug, shown with its traceback."""
    from annotated_transformer.cli import translate_commands

    def broken(args, command):
        raise ValueError("invalid literal for int() with base 10: 'x'")  # (not the package's)

    monkeypatch.setattr(translate_commands, "open_model", broken)
    status = cli.main(["translate", "--checkpoint", str(folder / "run"), "Hund."])
    err = capsys.readouterr().err
    assert status == 1 and "Traceback (most recent call last)" in err
    assert err.rstrip().endswith("annotated-transformer: error: ValueError above is a bug of "
                                 "annotated-transformer: please report it with the traceback "
                                 "and what `annotated-transformer info` prints")  # fmt: skip


def test_the_debug_switch_shows_every_errors_traceback(folder, monkeypatch, capsys):
    from annotated_transformer.util.errors import ModelFolderError

    args = ["translate", "--checkpoint", str(folder / "nowhere"), "Hund."]
    assert cli.main(args) == 1  # one line, as always
    assert capsys.readouterr().err.count("\n") == 1
    monkeypatch.setenv("ANNOTATED_TRANSFORMER_DEBUG", "1")
    with pytest.raises(FileNotFoundError, match="no such checkpoint or run folder"):
        cli.main(args)
    export_of("export-hf", "hf")(folder)
    with pytest.raises(ModelFolderError, match="hf is a transformers export"):
        cli.main(["translate", "--checkpoint", str(folder / "hf"), "Hund."])


def test_translate_takes_any_iterable_of_sentences(folder):
    from annotated_transformer import open_translator

    translator = open_translator(folder / "run", device="cpu")
    sentences = ["Ein Hund rennt.", "Eine Frau lacht."]
    expected = translator.translate(sentences, beam_size=1)
    assert translator.translate((s for s in sentences), beam_size=1) == expected  # a generator
    assert translator.translate(iter(()), beam_size=1) == []
    with pytest.raises(TypeError, match="got one string"):
        translator.translate("Ein Hund rennt.")


def test_two_sums_that_differ_late_are_shown_until_they_differ():
    from annotated_transformer.util.atomic import sums_shown

    a, b = "ab" * 16 + "0" * 32, "ab" * 16 + "0" * 31 + "1"
    assert sums_shown(a, b) == (a, b)  # (they differ at the last digit: all 64 shown)
    c, d = "1" + "0" * 63, "2" + "0" * 63
    assert sums_shown(c, d) == (c[:16] + "…", d[:16] + "…")
    assert sums_shown(c, "x") == (c[:16] + "…", "x")  # a damaged record's short entry
