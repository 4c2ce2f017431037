"""Limits and messages (issue 32): bounds the computation can honour, the Python API's edge cases,
out of memory as one line, SHA256SUMS in every form sha256sum writes, and a folder written by
`save-pretrained` given to `--checkpoint`. The command line's bad inputs are rows of CASES in
tests/test_cli_errors.py; here are what a subprocess row cannot show: successes, the Python API,
and errors injected in this process."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from annotated_transformer import cli
from annotated_transformer.data.vocab import BOS_ID, EOS_ID, PAD_ID, SPECIALS, Vocab, read_json
from annotated_transformer.decoding import decoding_checks, search, simple
from annotated_transformer.decoding.batched import translate_ids
from annotated_transformer.model.masks import padding_mask
from annotated_transformer.model.transformer import ModelConfig, build_model
from annotated_transformer.pretrained import FILES, SUMS, check_files, shipped_folder
from annotated_transformer.runs.presets import preset
from annotated_transformer.translator import Translator
from annotated_transformer.util.settings import LARGEST_INT, SettingError

SENTENCE = "Ein Hund rennt durch den Schnee."
ERROR = "annotated-transformer: error:"


@pytest.fixture(scope="module")
def translator() -> Translator:
    return Translator.pretrained(device="cpu")


@pytest.fixture(scope="module")
def tiny() -> torch.nn.Module:
    torch.manual_seed(0)
    config = ModelConfig(src_vocab=11, tgt_vocab=13, N=1, d_model=16, d_ff=32, h=2, max_len=20)
    return build_model(config).eval()


def batch(*rows: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    src = torch.tensor(rows)
    return src, padding_mask(src, PAD_ID)


def one_error(capsys: pytest.CaptureFixture, status: int, message: str, *argv: str) -> str:
    assert cli.main(list(argv)) == status
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(" ")]
    assert lines[-1].startswith(ERROR) and message in lines[-1], err
    assert "Traceback" not in err and sum(line.startswith(ERROR) for line in lines) == 1, err
    return lines[-1]


# --- the constants the command line repeats, so that --help needs no torch -----------------------


def test_the_command_line_bounds_are_the_packages():
    from annotated_transformer.runs.presets import TRAIN_SETTINGS

    assert cli.MAX_ALPHA == decoding_checks.MAX_ALPHA
    assert cli.LARGEST_INT == LARGEST_INT == torch.iinfo(torch.int64).max
    assert cli.MAX_TOKENS == TRAIN_SETTINGS["max_tokens"].high


# --- settings: every integer fits in 64 bits, every budget has a bound ---------------------------


@pytest.mark.parametrize(
    "name, value",
    [("max_tokens", 1e23), ("max_tokens", 2**70), ("accumulate", 2**70), ("seed", 2**63),
     ("seed", 10**400), ("warmup", 10**400), ("seed", -(2**64)), ("max_steps", 2**64)],
)  # fmt: skip
def test_a_setting_beyond_its_bound_is_one_setting_error(name, value):
    with pytest.raises(SettingError, match=f"setting {name}: expected") as caught:
        preset("tiny", **{name: value})
    assert "\n" not in str(caught.value)


def test_the_largest_seed_is_accepted_and_seeds_torch():
    config = preset("tiny", seed=LARGEST_INT)
    torch.manual_seed(config.seed)  # what the trainer does with it
    with pytest.raises(SettingError, match="setting max_len: expected a positive integer up to"):
        preset("tiny", max_len=1 << 20)


# --- the Python API's edge cases ------------------------------------------------------------------


def test_an_empty_batch_is_an_empty_result(translator, tiny):
    assert translator.translate([]) == []
    assert translator.translate(()) == []
    assert translate_ids(tiny, [], Vocab([*SPECIALS, *"abcdefghi"]), max_len=20) == []


def test_numpy_numbers_are_accepted(translator):
    plain = translator.translate([SENTENCE])
    assert translator.translate([SENTENCE], beam_size=np.int64(4), alpha=np.float32(0.6)) == plain
    assert translator.translate([SENTENCE], beam_size=np.int32(1)) == translator.translate(
        [SENTENCE], beam_size=1
    )


def test_one_string_is_not_a_list_of_sentences(translator):
    with pytest.raises(TypeError, match="expected a list of sentences, got one string"):
        translator.translate(SENTENCE)


@pytest.mark.parametrize(
    "changes, message",
    [({"alpha": math.inf}, "alpha must be >= 0 and at most 10"),
     ({"alpha": 1000}, "alpha must be >= 0 and at most 10"),
     ({"alpha": math.nan}, "alpha must be >= 0 and at most 10"),
     ({"alpha": "0.6"}, "alpha must be >= 0 and at most 10"),
     ({"beam_size": 0}, "beam_size must be a positive integer"),
     ({"beam_size": 2.0}, "beam_size must be a positive integer"),
     ({"beam_size": True}, "beam_size must be a positive integer"),
     ({"beam_size": 10**6}, "larger than the target vocabulary")],
)  # fmt: skip
def test_a_search_setting_it_cannot_honour_is_a_value_error(translator, changes, message):
    with pytest.raises(ValueError, match=message):
        translator.translate([SENTENCE], **changes)


def test_the_searches_refuse_what_the_model_cannot_read_or_write(tiny):
    src, mask = batch([4, 5, 6, EOS_ID])
    for decode in (
        lambda *a, **k: search.greedy_decode(tiny, *a, **k),
        lambda *a, **k: search.beam_search(tiny, *a, **k),
    ):
        decode(src, mask, np.int64(5), BOS_ID, EOS_ID)  # NumPy integers are fine
        with pytest.raises(
            ValueError, match=r"from 2 to 99; the model's source vocabulary has ids 0 to 10"
        ):
            decode(*batch([4, 99, EOS_ID]), 5, BOS_ID, EOS_ID)
        with pytest.raises(ValueError, match="src holds token ids from -1 to"):
            decode(*batch([4, -1, EOS_ID]), 5, BOS_ID, EOS_ID)
        with pytest.raises(ValueError, match=r"start_symbol .* \(0 to 12\), got 13"):
            decode(src, mask, 5, 13, EOS_ID)
        with pytest.raises(ValueError, match="end_symbol must be a token id"):
            decode(src, mask, 5, BOS_ID, -1)
        with pytest.raises(ValueError, match="max_len 21 is longer than the model's positional"):
            decode(src, mask, 21, BOS_ID, EOS_ID)
        with pytest.raises(ValueError, match="max_len must be an integer"):
            decode(src, mask, 2**70, BOS_ID, EOS_ID)
    with pytest.raises(ValueError, match="end_symbol must be a token id"):
        search.beam_search(tiny, src, mask, 5, BOS_ID, None)  # beam search needs an end
    search.greedy_decode(tiny, src, mask, 5, BOS_ID, None)  # greedy decoding does not


def test_the_simple_beam_search_checks_its_settings_too(tiny):
    src, mask = batch([4, 5, EOS_ID])
    with pytest.raises(ValueError, match="alpha must be >= 0 and at most 10"):
        simple.simple_beam_search(tiny, src, mask, 5, BOS_ID, EOS_ID, alpha=math.inf)
    ((ids, score),) = simple.simple_beam_search(
        tiny, src, mask, 5, BOS_ID, EOS_ID, beam_size=np.int64(2)
    )
    ((want, want_score),) = search.beam_search(tiny, src, mask, 5, BOS_ID, EOS_ID, beam_size=2)[0][
        :1
    ]
    # the same tokens; the cached and the uncached decoder round differently in the last digits
    assert ids == want and score == pytest.approx(want_score, abs=1e-5)


def test_out_of_range_ids_are_a_value_error_not_an_index_error():
    vocab = Vocab([*SPECIALS, "Hund"])
    assert vocab.decode([BOS_ID, 4]) == ["Hund"]  # no </s>: every token
    for bad in (5, -1, 2**70):
        with pytest.raises(ValueError, match=f"token id {bad} is outside this vocabulary"):
            vocab.decode([BOS_ID, bad, EOS_ID])


def test_a_json_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "src_vocab.json"
    path.write_bytes(b'{"tokens": ["\xff"]}')
    with pytest.raises(ValueError, match=f"{path}: not UTF-8 text"):
        read_json(path)


# --- out of memory: one line naming the option to lower -------------------------------------------

CPU_OOM = RuntimeError(
    "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried "
    "to allocate 68719476736 bytes."
)


def gpu_oom() -> BaseException:
    return torch.OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.1 GiB"
    )


@pytest.mark.parametrize("error", [CPU_OOM, "gpu", MemoryError()], ids=["cpu", "gpu", "python"])
def test_out_of_memory_while_translating_names_max_tokens_and_beam(
    capsys, monkeypatch, translator, error
):
    def out_of_memory(*args, **kwargs):
        raise gpu_oom() if error == "gpu" else error

    monkeypatch.setattr(Translator, "pretrained", classmethod(lambda cls, *args, **kw: translator))
    monkeypatch.setattr("annotated_transformer.translator.translate_ids", out_of_memory)
    line = one_error(capsys, 1, "lower --max-tokens (now 8192) or --beam (now 4)",
                     "translate", SENTENCE)  # fmt: skip
    assert ("out of GPU" if error == "gpu" else "out of memory") in line


def test_out_of_memory_while_evaluating_names_max_tokens(capsys, monkeypatch, translator):
    from annotated_transformer.evaluation import scores

    def out_of_memory(*args, **kwargs):
        raise CPU_OOM

    monkeypatch.setattr(Translator, "pretrained", classmethod(lambda cls, *args, **kw: translator))
    monkeypatch.setattr("annotated_transformer.data.multi30k.fetch", lambda *a, **k: None)
    monkeypatch.setattr(scores, "evaluate_split", out_of_memory)
    one_error(capsys, 1, "while running evaluate: lower --max-tokens (now 100) or --beam (now 2)",
              "evaluate", "--beam", "2", "--max-tokens", "100")  # fmt: skip


def test_out_of_memory_while_training_names_max_tokens(capsys, monkeypatch, tmp_path):
    def out_of_memory(*args, **kwargs):
        raise gpu_oom()

    monkeypatch.setattr("annotated_transformer.training.run.train", out_of_memory)
    out = str(tmp_path / "run")
    one_error(capsys, 1, "out of GPU while running train: lower --max-tokens",
              "train", "--preset", "tiny", "--out", out, "--device", "cpu")  # fmt: skip


def test_another_runtime_error_is_not_called_out_of_memory(capsys, monkeypatch, translator):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(Translator, "pretrained", classmethod(lambda cls, *args, **kw: translator))
    monkeypatch.setattr("annotated_transformer.translator.translate_ids", broken)
    assert cli.main(["translate", SENTENCE]) == 1  # a bug: its traceback, then a line asking
    err = capsys.readouterr().err  # for a report (errors are known by type, issue 59)
    assert "Traceback (most recent call last)" in err and "RuntimeError: a bug" in err
    assert (
        err.rstrip()
        .splitlines()[-1]
        .startswith(
            "annotated-transformer: error: RuntimeError above is a bug of annotated-transformer"
        )
    )


# --- SHA256SUMS, and a save-pretrained folder as --checkpoint -------------------------------------


@pytest.fixture
def shipped(tmp_path):
    folder = tmp_path / "shipped"
    shutil.copytree(shipped_folder(), folder)
    return folder


def digests(folder) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in FILES}


@pytest.mark.parametrize(
    "form",
    [lambda n, h: f"{h}  {n}\n", lambda n, h: f"{h} *{n}\n", lambda n, h: f"SHA256 ({n}) = {h}\n",
     lambda n, h: f"\n{h.upper()}  {n}\r\n\n", lambda n, h: f"  SHA256 ({n}) = {h.upper()}  \n"],
    ids=["text", "binary", "bsd-tag", "upper-case-crlf-blank-lines", "tag-upper-case-spaces"],
)  # fmt: skip
def test_sums_are_read_in_every_form_sha256sum_writes(shipped, form):
    (shipped / SUMS).write_text(
        "".join(form(n, h) for n, h in digests(shipped).items()), encoding="utf-8", newline=""
    )
    check_files(shipped)


@pytest.mark.parametrize("options", [[], ["--binary"], ["--tag"]])
def test_sums_written_by_sha256sum_itself_are_read(shipped, options):
    if shutil.which("sha256sum") is None:
        pytest.skip("no sha256sum here")
    sums = subprocess.run(["sha256sum", *options, *FILES], cwd=shipped, capture_output=True,
                          check=True).stdout  # fmt: skip
    (shipped / SUMS).write_bytes(sums)
    check_files(shipped)
    (shipped / FILES[0]).write_bytes(b"changed")
    with pytest.raises(ValueError, match="differs from SHA256SUMS"):
        check_files(shipped)


def test_a_sums_file_that_is_not_utf8_is_named(shipped):
    (shipped / SUMS).write_bytes(b"\xff\xfe not sums\n")
    with pytest.raises(ValueError, match=f"{shipped / SUMS}: not UTF-8 text"):
        check_files(shipped)


def test_a_save_pretrained_folder_is_a_checkpoint(capsys, shipped, translator):
    expected = translator.translate([SENTENCE])[0]
    assert Translator.from_checkpoint(shipped, device="cpu").translate([SENTENCE]) == [expected]
    assert cli.main(["translate", "--checkpoint", str(shipped), SENTENCE]) == 0
    out, err = capsys.readouterr()
    assert out == expected + "\n" and ERROR not in err
    out_file = shipped.parent / "attention.json"
    assert cli.main(["attention", "--checkpoint", str(shipped), "--output", str(out_file),
                     SENTENCE]) == 0  # fmt: skip
    assert json.loads(out_file.read_text(encoding="utf-8"))["translation"] == expected
    capsys.readouterr()
    assert cli.main(["attention", "--checkpoint", str(shipped), "--output", "-", SENTENCE]) == 0
    out = capsys.readouterr().out  # --output -: the same record, alone on standard output
    assert json.loads(out) == json.loads(out_file.read_text(encoding="utf-8"))
    assert not (Path.cwd() / "-").exists()
