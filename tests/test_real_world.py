"""Part III, "Multi30k: words, tokens and vocabularies", "A real-world example" and "Engineering a
training run": data, vocabularies, translating, checkpoints, the trainer on one and two processes,
resuming, and the command line.

Tests that read Multi30k use `$ANNOTATED_TRANSFORMER_MULTI30K` or `../shared/data/multi30k`
and are skipped where neither exists.
"""

import gzip
import http.server
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from annotated_transformer import cli
from annotated_transformer.data import multi30k
from annotated_transformer.data.corpus import encode_split, tokenize_split
from annotated_transformer.data.vocab import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIALS,
    UNK_ID,
    Tokenizer,
    Vocab,
    detokenize,
)
from annotated_transformer.model.transformer import build_model
from annotated_transformer.runs.checkpoints import (
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from annotated_transformer.runs.presets import PRESETS, TrainConfig, preset
from annotated_transformer.training.inputs import prepare_data
from annotated_transformer.training.run import train
from annotated_transformer.translator import Translator
from annotated_transformer.util.atomic import atomic_write
from annotated_transformer.util.settings import SettingError

ROOT = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("ddp_worker.py")


def run_cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def write_gz(path: Path, lines: list[str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    return path


def tiny(**changes) -> TrainConfig:
    return preset("tiny", **{"epochs": None, "eval_every": 1000, **changes})


# --- tokens and vocabularies -------------------------------------------------------------------


def test_tokenizers_split_words_and_punctuation():
    assert Tokenizer("de")("Zwei Männer, im Freien.") == [
        "Zwei",
        "Männer",
        ",",
        "im",
        "Freien",
        ".",
    ]
    assert Tokenizer("en")("A dog's  ball isn't red.") == [
        "A", "dog", "'s", "ball", "is", "n't", "red", ".",
    ]  # fmt: skip


def test_detokenize_undoes_the_spaces_around_punctuation():
    tokens = Tokenizer("en")("A dog's ball (red) isn't here, is it?")
    assert detokenize(tokens) == "A dog's ball (red) isn't here, is it?"


def test_vocab_build_order_specials_and_min_freq():
    vocab = Vocab.build([["b", "a", "c"], ["a", "b"], ["a", "<unk>"]], min_freq=2)
    assert vocab.itos == [*SPECIALS, "a", "b"]  # "c" once: out; "<unk>" is a special already
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert vocab.encode(["a", "c", "b"]) == [4, UNK_ID, 5]
    assert vocab.decode([BOS_ID, 4, 5, EOS_ID, 4, PAD_ID]) == ["a", "b"]
    assert vocab.unknown(["a", "c"]) == ["c"]
    assert Vocab.build([["a"]], min_freq=1).itos == [*SPECIALS, "a"]
    assert len(Vocab.build([["z", "y", "z", "y", "x"]], min_freq=1, max_size=6)) == 6


def test_vocab_json_round_trip_and_bad_files(tmp_path):
    vocab = Vocab.build([["ein", "Hund", "ein", "Hund", "ä"]], min_freq=1)
    vocab.save(tmp_path / "v.json")
    assert Vocab.load(tmp_path / "v.json") == vocab
    assert [p.name for p in tmp_path.iterdir()] == ["v.json"]  # no temporary file left behind
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"bad\.json: not valid JSON"):
        Vocab.load(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text(json.dumps({"tokens": ["a"]}))
    with pytest.raises(ValueError, match=r"other\.json: not a vocabulary saved by this package"):
        Vocab.load(tmp_path / "other.json")
    with pytest.raises(ValueError, match="must start with the specials"):
        Vocab(["a", "b"])
    with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
        Vocab([*SPECIALS, "a", "a"])


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "file.txt"
    path.write_text("old")
    # torch.save reports a full disk as a RuntimeError; atomic_write names the file it kept
    with (
        pytest.raises(OSError, match=r"file\.txt: the write failed \(disk full\); the previous"),
        atomic_write(path, "w") as f,
    ):
        f.write("half of the new")
        raise RuntimeError("disk full")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"]


# --- the corpus ----------------------------------------------------------------------------


def test_empty_lines_are_skipped_and_counted(tmp_path):
    de = write_gz(tmp_path / "x.de.gz", ["Ein Hund.", "", "Eine Katze.", "Ein Baum."])
    en = write_gz(tmp_path / "x.en.gz", ["A dog.", "Nothing.", "  ", "A tree."])
    pairs = multi30k.read_pairs(de, en)
    split = tokenize_split("x", pairs, Tokenizer("de"), Tokenizer("en"))
    assert split.skipped_empty == 2
    assert split.pairs == [("Ein Hund.", "A dog."), ("Ein Baum.", "A tree.")]
    assert split.tgt == [["A", "dog", "."], ["A", "tree", "."]]


def test_different_line_counts_name_both_files(tmp_path):
    de = write_gz(tmp_path / "x.de.gz", ["Ein Hund.", "Eine Katze."])
    en = write_gz(tmp_path / "x.en.gz", ["A dog."])
    with pytest.raises(ValueError, match=r"x\.de\.gz has 2 lines but .*x\.en\.gz has 1"):
        multi30k.read_pairs(de, en)


def test_encoded_pairs_are_framed_and_batched():
    split = tokenize_split("x", [("a b", "c"), ("a", "c d")], Tokenizer("de"), Tokenizer("en"))
    src_vocab, tgt_vocab = Vocab.build(split.src, 1), Vocab.build(split.tgt, 1)
    encoded = encode_split(split, src_vocab, tgt_vocab)
    assert encoded.src[0].tolist() == [*src_vocab.encode(["a", "b"]), EOS_ID]
    assert encoded.tgt[1].tolist() == [BOS_ID, *tgt_vocab.encode(["c", "d"]), EOS_ID]
    assert encoded.src_lengths == [3, 2] and encoded.tgt_lengths == [2, 3]
    batch = encoded.batch([0, 1])
    assert batch.src.shape == (2, 3) and batch.tgt_in.shape == (2, 3)
    assert batch.ntokens == 2 + 3


def test_the_splits_and_a_vocabulary_from_train_only(data_dir):
    data = prepare_data(PRESETS["tiny"], data_dir)
    assert (len(data.train), len(data.val), len(data.val_text)) == (29_000, 1_014, 1_014)
    de = Tokenizer("de")
    test = tokenize_split("test2016", multi30k.read_split("test2016", data_dir), de, de)
    assert len(test) == 1_000
    counts: dict[str, int] = {}
    for sentence in tokenize_split(
        "train", multi30k.read_split("train", data_dir), de, Tokenizer("en")
    ).src:
        for token in sentence:
            counts[token] = counts.get(token, 0) + 1
    expected = {t for t, n in counts.items() if n >= 2}
    assert set(data.src_vocab.itos[len(SPECIALS) :]) == expected
    unseen = {t for s in test.src for t in s} - set(counts)  # test words that train never has
    assert unseen and not unseen & set(data.src_vocab.itos)


# --- downloads --------------------------------------------------------------------------------


@pytest.fixture
def file_server(tmp_path):
    """An HTTP server on localhost serving `tmp_path / "served"`."""
    served = tmp_path / "served"
    served.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_a_download_with_the_wrong_checksum_is_refused_and_not_kept(
    file_server, tmp_path, monkeypatch
):
    served, url = file_server
    write_gz(served / "val.de.gz", ["Ein falscher Satz."])
    monkeypatch.setattr(multi30k, "BASE_URL", url)
    target = tmp_path / "download"
    with pytest.raises(ValueError, match=r"val\.de\.gz: .*(SHA256|hash)"):
        multi30k.download("val", "de", target)
    assert not any(target.iterdir())  # nothing kept as if it were valid


def test_a_failed_download_is_one_clear_error(file_server, tmp_path, monkeypatch, capsys):
    _, url = file_server  # serves an empty folder: every file is a 404
    monkeypatch.setattr(multi30k, "BASE_URL", url)
    code, _, err = run_cli(capsys, "download", "--data-dir", str(tmp_path / "d"))
    assert code == 1
    assert err.startswith("annotated-transformer: error: could not download http://127.0.0.1")
    assert "train.de.gz" in err and err.count("\n") == 1


# --- checkpoints ------------------------------------------------------------------------------


def test_checkpoints_round_trip_and_keep_the_newest(tmp_path):
    for step in (5, 10, 15, 20):
        save_checkpoint(tmp_path / f"checkpoint-{step:08d}.pt", {
            "config": {}, "src_vocab": {}, "tgt_vocab": {}, "model": {"w": torch.ones(2) * step}
        })  # fmt: skip
    prune_checkpoints(tmp_path, keep=2)
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "checkpoint-00000015.pt", "checkpoint-00000020.pt"
    ]  # fmt: skip
    assert load_checkpoint(tmp_path)["model"]["w"].tolist() == [20.0, 20.0]  # a folder: newest


class Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_checkpoints_that_are_not_ours_are_refused(tmp_path):
    torch.save({"weights": Exploit()}, tmp_path / "evil.pt")
    not_ours = r"\.pt is not a checkpoint written by annotated-transformer: "
    with pytest.raises(ValueError, match=r"evil" + not_ours + "it holds Python objects"):
        load_checkpoint(tmp_path / "evil.pt")
    (tmp_path / "junk.pt").write_bytes(b"\x00" * 100)
    with pytest.raises(ValueError, match=r"junk" + not_ours + "neither a zip archive"):
        load_checkpoint(tmp_path / "junk.pt")
    torch.save({"model": {}}, tmp_path / "plain.pt")
    with pytest.raises(ValueError, match=r"plain" + not_ours + "a PyTorch file without"):
        load_checkpoint(tmp_path / "plain.pt")
    with pytest.raises(FileNotFoundError, match=r"nothing\.pt: no such checkpoint"):
        load_checkpoint(tmp_path / "nothing.pt")


# --- the trainer, one process -----------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_run(data_dir, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("tiny") / "run"
    outcome = train(tiny(max_steps=40, eval_every=40), run_dir, data_dir=data_dir, progress=False)
    assert outcome.step == 40 and outcome.stopped_by is None
    return run_dir


def test_a_run_folder_holds_everything(tiny_run):
    names = sorted(p.name for p in tiny_run.iterdir())
    assert names == [
        "checkpoint-00000040.pt", "config.json", "metrics.jsonl", "run.json",
        "src_vocab.json", "tgt_vocab.json", "train.lock",
    ]  # fmt: skip
    payload = load_checkpoint(tiny_run / "checkpoint-00000040.pt")
    assert Vocab.load(tiny_run / "src_vocab.json") == Vocab.from_json(payload["src_vocab"])
    assert TrainConfig.from_dict(json.loads((tiny_run / "config.json").read_text())) == tiny(
        max_steps=40, eval_every=40
    )
    records = [json.loads(line) for line in (tiny_run / "metrics.jsonl").read_text().splitlines()]
    train_losses = [r["loss"] for r in records if r["kind"] == "train"]
    assert [r["step"] for r in records if r["kind"] == "train"] == [10, 20, 30, 40]
    assert train_losses[-1] < train_losses[0]
    (val,) = [r for r in records if r["kind"] == "val"]
    assert val["step"] == 40 and val["loss"] > 0 and 0 <= val["bleu"] <= 100
    assert val["elapsed_s"] >= [r for r in records if r["kind"] == "train"][-1]["elapsed_s"]


def test_an_unwritable_output_folder_is_found_before_training(tmp_path, capsys, monkeypatch):
    from annotated_transformer.training import run as trainer

    def no_data(*args, **kwargs):
        raise AssertionError("the data was read before the output folder was checked")

    monkeypatch.setattr(trainer, "prepare_data", no_data)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    code, _, err = run_cli(capsys, "train", "--preset", "tiny", "--out", str(blocker / "run"))
    assert code == 1 and "a-file/run: cannot write the run there" in err


def test_a_folder_missing_a_split_is_named(tmp_path, capsys):
    code, _, err = run_cli(
        capsys, "train", "--preset", "tiny", "--out", str(tmp_path / "run"),
        "--data-dir", str(tmp_path),
    )  # fmt: skip
    assert code == 1 and "train.de.gz: missing" in err
    assert list_checkpoints(tmp_path / "run") == []


def test_a_run_is_not_overwritten_and_resumes_only_with_its_settings(tiny_run, capsys):
    code, _, err = run_cli(capsys, "train", "--preset", "tiny", "--out", str(tiny_run))
    assert code == 1 and "already holds a run (checkpoint-00000040.pt): pass --resume" in err
    code, _, err = run_cli(
        capsys, "train", "--preset", "tiny", "--out", str(tiny_run), "--resume",
        "--dropout", "0.3", "--max-steps", "41",
    )  # fmt: skip
    assert code == 1 and "checkpoint-00000040.pt was trained with other settings" in err
    assert "dropout: 0.1 vs 0.3" in err


def test_vocabulary_or_weights_that_do_not_match_the_checkpoint(tiny_run, tmp_path):
    run = tmp_path / "copy"
    run.mkdir()
    for name in ("checkpoint-00000040.pt", "src_vocab.json", "tgt_vocab.json"):
        (run / name).write_bytes((tiny_run / name).read_bytes())
    Vocab([*SPECIALS, "nur", "drei", "Wörter"]).save(run / "src_vocab.json")
    with pytest.raises(ValueError, match=r"src_vocab\.json does not match the vocabulary inside"):
        Translator.from_checkpoint(run)
    (run / "src_vocab.json").unlink()
    payload = load_checkpoint(run)
    payload["config"]["model"]["d_ff"] = 128  # the weights were trained with d_ff = 256
    del payload["path"]
    save_checkpoint(run / "checkpoint-00000040.pt", payload)
    with pytest.raises(ValueError, match="the weights do not match the checkpoint's own config"):
        Translator.from_checkpoint(run)


# --- translate and evaluate -------------------------------------------------------------------


def test_translate_arguments_and_stdin(tiny_run, capsys, monkeypatch):
    code, out, _ = run_cli(capsys, "translate", "--checkpoint", str(tiny_run), "Ein Hund.", "Ja.")
    assert code == 0 and len(out.splitlines()) == 2
    monkeypatch.setattr(sys, "stdin", io.StringIO("Ein Hund.\nEine Frau.\n"))
    code, out, _ = run_cli(capsys, "translate", "--checkpoint", str(tiny_run))
    assert code == 0 and len(out.splitlines()) == 2
    monkeypatch.setattr(sys, "stdin", io.StringIO("Ein Hund.\nEine Frau.\n"))
    code, dash, _ = run_cli(capsys, "translate", "--checkpoint", str(tiny_run), "-")
    assert code == 0 and dash == out  # -, alone: standard input, as is usual


def test_translate_refuses_empty_and_over_long_input(tiny_run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, out, err = run_cli(capsys, "translate", "--checkpoint", str(tiny_run))
    assert code == 2 and out == "" and "nothing to translate" in err  # (2: what was typed)
    long = " ".join(["Hund"] * 300)
    code, out, err = run_cli(capsys, "translate", "--checkpoint", str(tiny_run), "Ja.", long)
    assert code == 1 and out.count("\n") == 1  # argument 1's translation, written first
    assert "argument 2 has 300 tokens; this model reads at most 255" in err


def test_translate_warns_about_unknown_words(tiny_run, capsys):
    code, out, err = run_cli(
        capsys, "translate", "--checkpoint", str(tiny_run), "Ein Quokka im Xylophonladen."
    )
    assert code == 0 and len(out.splitlines()) == 1
    assert "argument 1: 2 word(s) not in the German vocabulary, read as <unk>" in err
    assert "Quokka, Xylophonladen" in err


def test_evaluate_scores_a_split(tiny_run, data_dir, capsys, tmp_path):
    code, out, _ = run_cli(
        capsys, "evaluate", "--checkpoint", str(tiny_run), "--split", "mscoco",
        "--data-dir", str(data_dir), "--output", str(tmp_path / "hyp.txt"),
    )  # fmt: skip
    assert code == 0 and "mscoco: 461 sentences" in out and "BLEU|nrefs:1|" in out
    assert len((tmp_path / "hyp.txt").read_text().splitlines()) == 461


@pytest.mark.parametrize(
    "command", ["train", "translate", "evaluate", "download", "average", "attention"]
)
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    assert exit_info.value.code == 0
    assert f"annotated-transformer {command}" in capsys.readouterr().out


# --- two processes, and resuming after a kill -------------------------------------------------


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)


def test_two_processes_equal_one_on_the_same_global_batches(data_dir, tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    two, one = tmp_path / "two", tmp_path / "one"
    subprocess.run(
        [*torchrun, "--nproc_per_node", "2", WORKER, two, data_dir, "1", "3"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    subprocess.run(  # one process, two micro-batches per step: the two ranks' batches
        [sys.executable, WORKER, one, data_dir, "2", "3"], env=env, check=True, capture_output=True
    )
    rank0, rank1 = load_weights(two / "weights-rank0.pt"), load_weights(two / "weights-rank1.pt")
    alone = load_weights(one / "weights-rank0.pt")
    torch.manual_seed(0)
    initial = build_model(PRESETS["tiny"].model.replace(src_vocab=8012, tgt_vocab=6190))
    initial = initial.state_dict()
    for name, weight in alone.items():
        torch.testing.assert_close(rank0[name], rank1[name], rtol=0, atol=0)
        torch.testing.assert_close(rank0[name], weight, rtol=0, atol=1e-5)
    assert not torch.equal(alone["generator.proj.weight"], initial["generator.proj.weight"])


def train_command(run_dir: Path, data_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "annotated_transformer", "train", "--preset", "tiny",
        "--out", str(run_dir), "--data-dir", str(data_dir), "--max-steps", "60",
        "--set", "save_every=5", "--set", "eval_every=1000", "--no-progress", *extra,
    ]  # fmt: skip


def run_until_checkpoint(command: list[str], run_dir: Path, sig: int) -> subprocess.Popen:
    """Start training, and send `sig` as soon as the first checkpoint appears."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list_checkpoints(run_dir):
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, "no checkpoint within 2 minutes"
        time.sleep(0.01)
    process.send_signal(sig)
    process.wait(timeout=120)
    return process


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    payload = load_checkpoint(run_dir)
    assert payload["train_state"]["step"] == 60
    return payload["model"]


def test_a_killed_run_resumes_exactly(data_dir, tmp_path):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    subprocess.run(train_command(whole, data_dir), check=True, capture_output=True)
    process = run_until_checkpoint(train_command(killed, data_dir), killed, signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL
    stopped_at = load_checkpoint(killed)["train_state"]["step"]
    assert stopped_at < 60, "the run ended before it was killed"
    subprocess.run(train_command(killed, data_dir, "--resume"), check=True, capture_output=True)
    for name, weight in final_weights(whole).items():
        assert torch.equal(weight, final_weights(killed)[name]), name
    lines = (killed / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [json.loads(x)["step"] for x in (
        (whole / "metrics.jsonl").read_text().splitlines()
    )]  # fmt: skip


def test_sigterm_saves_a_checkpoint_before_exit(data_dir, tmp_path):
    run_dir = tmp_path / "run"
    process = run_until_checkpoint(train_command(run_dir, data_dir), run_dir, signal.SIGTERM)
    stderr = process.stderr.read()
    assert process.returncode == 128 + signal.SIGTERM, stderr
    step = load_checkpoint(run_dir)["train_state"]["step"]
    assert step < 60, "the run ended before it was stopped"
    assert f"stopped by SIGTERM at step {step}" in stderr and "continue with --resume" in stderr


# --- settings ---------------------------------------------------------------------------------


def test_settings_are_checked():
    with pytest.raises(ValueError, match=r"unknown training settings \['warmpu'\]"):
        preset("tiny", warmpu=10)
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        preset("huge")
    with pytest.raises(ValueError, match="d_model=100 is not divisible by h=8"):
        preset("base", d_model=100)
    with pytest.raises(ValueError, match="a run needs an end"):
        preset("tiny", epochs=None, max_steps=None)
    with pytest.raises(ValueError, match=r"config\.json: setting dropout: expected a number in"):
        TrainConfig.from_dict({"dropout": 1.5}, "config.json")


def test_bad_set_options_are_one_clear_error(tmp_path, capsys):
    out = str(tmp_path / "run")
    code, _, err = run_cli(capsys, "train", "--preset", "tiny", "--out", out, "--set", "warmup")
    assert code == 2 and "--set warmup: write NAME=VALUE" in err  # (2: what was typed)
    code, _, err = run_cli(capsys, "train", "--preset", "tiny", "--out", out, "--set", "seed=x")
    assert code == 2 and "--set seed=x: write NAME=VALUE with a JSON value" in err
    code, _, err = run_cli(capsys, "train", "--preset", "tiny", "--out", out, "--set", "nope=1")
    assert code == 2 and "unknown training settings ['nope']" in err


# A bad setting, and the one line that names it: the same through Python, `--set` and config.json.
BAD_SETTINGS = [
    ({"norm_first": "false"}, 'setting norm_first: expected true or false, got "false" (a string)'),
    ({"norm_first": 1}, "setting norm_first: expected true or false, got 1 (an integer)"),
    ({"share_embeddings": "no"}, 'share_embeddings: expected true or false, got "no" (a string)'),
    ({"bf16": None}, "setting bf16: expected true or false, got null"),
    ({"N": 2.5}, "setting N: expected a positive integer, got 2.5 (a number with a fraction)"),
    ({"N": True}, "setting N: expected a positive integer, got true (a boolean)"),
    ({"N": 0}, "setting N: expected a positive integer, got 0"),
    ({"warmup": "4000"}, 'setting warmup: expected a positive integer, got "4000" (a string)'),
    ({"keep": 0}, "setting keep: expected a positive integer, got 0"),
    ({"seed": -1}, "setting seed: expected an integer >= 0, got -1"),
    ({"max_steps": 0}, "setting max_steps: expected a positive integer or null, got 0"),
    ({"d_k": 1.5}, "setting d_k: expected a positive integer or null, got 1.5 (a number"),
    ({"dropout": 1.0}, "setting dropout: expected a number in [0, 1), got 1.0"),
    ({"dropout": "0.1"}, 'setting dropout: expected a number in [0, 1), got "0.1" (a string)'),
    ({"attention_dropout": -0.1}, "setting attention_dropout: expected a number in [0, 1), got"),
    ({"label_smoothing": 1}, "setting label_smoothing: expected a number in [0, 1), got 1.0"),
    ({"lr_factor": 0}, "setting lr_factor: expected a positive number, got 0.0"),
    ({"lr_factor": float("inf")}, "setting lr_factor: expected a positive number, got Infinity"),
    ({"dropout": float("nan")}, "setting dropout: expected a number in [0, 1), got NaN"),
    ({"clip_norm": -1}, "setting clip_norm: expected a positive number or null, got -1.0"),
    ({"save_minutes": False}, "save_minutes: expected a positive number, got false (a boolean)"),
    ({"tokenizer": "spm"}, 'setting tokenizer: expected one of "word", "bpe", got "spm"'),
    ({"positional": "rotary"}, 'setting positional: expected one of "sinusoidal", "learned", got'),
    ({"d_model": 66}, "settings d_model and h: d_model=66 is not divisible by h=4"),
    ({"d_model": 63, "h": 3}, "sinusoidal positional encoding needs an even d_model, got 63"),
    ({"max_tokens": 100}, "settings max_tokens and max_len: max_tokens=100 must be at least"),
    ({"share_embeddings": True}, "share_embeddings: true ties the source and target embeddings"),
    ({"epochs": None}, "settings epochs and max_steps: give one or both, a run needs an end"),
    ({"src_vocab": 100}, "setting src_vocab: a run reads its vocabulary sizes off its data"),
]


@pytest.mark.parametrize(("changes", "message"), BAD_SETTINGS)
def test_a_bad_setting_is_refused_the_same_from_python_set_and_config_json(
    changes, message, tmp_path, capsys
):
    with pytest.raises(SettingError) as python:
        preset("tiny", **changes)
    assert message in str(python.value)
    # a value of the wrong type is a TypeError too; one out of range is only a ValueError
    assert isinstance(python.value, TypeError) == (" (a" in message or "got null" in message)
    out = tmp_path / "run"
    sets = [word for name, v in changes.items() for word in ("--set", f"{name}={json.dumps(v)}")]
    code, _, err = run_cli(capsys, "train", "--preset", "tiny", "--out", str(out), *sets)
    assert code == 2 and message in err and err.count("\n") == 1, err  # 2: what was typed
    assert not out.exists()  # refused before anything was written
    data = preset("tiny").to_dict()
    for name, value in changes.items():  # where the setting lives: the model's object or beside
        (data["model"] if name in data["model"] or name.endswith("vocab") else data)[name] = value
    out.mkdir()
    (out / "config.json").write_text(json.dumps(data))
    code, _, err = run_cli(capsys, "train", "--resume", "--out", str(out))
    assert code == 1 and err.startswith(f"annotated-transformer: error: {out / 'config.json'}: ")
    assert message in err and err.count("\n") == 1, err


def test_every_setting_has_its_rule_and_values_are_stored_in_their_type():
    from dataclasses import fields

    from annotated_transformer.model.config import ModelConfig
    from annotated_transformer.model.model_checks import MODEL_SETTINGS
    from annotated_transformer.runs.presets import TRAIN_SETTINGS

    assert set(MODEL_SETTINGS) == {f.name for f in fields(ModelConfig)}
    assert set(TRAIN_SETTINGS) == {f.name for f in fields(TrainConfig)} - {"model"}
    config = preset("tiny", N=3.0, dropout=0, lr_factor=2, clip_norm=1)
    assert type(config.model.N) is int and config.model.N == 3
    assert type(config.model.dropout) is float and type(config.lr_factor) is float
    assert type(config.clip_norm) is float and config.clip_norm == 1.0


def test_the_cli_names_every_preset():
    assert cli.PRESET_NAMES == tuple(PRESETS)  # `--help` names them without importing torch


def test_settings_round_trip_through_json_in_both_forms():
    for name, config in PRESETS.items():
        nested = json.loads(json.dumps(config.to_dict()))
        assert "N" not in nested and nested["model"]["N"] == config.model.N, name
        assert "src_vocab" not in nested["model"]
        assert TrainConfig.from_dict(nested) == config, name
        assert TrainConfig.from_dict(config.settings()) == config, name  # flat, as 0.1.0 wrote
    with pytest.raises(SettingError, match=r"x\.json: settings \['N'\] given twice"):
        TrainConfig.from_dict({"N": 2, "model": {"N": 3}}, "x.json")
    with pytest.raises(SettingError, match=r"x\.json: expected an object of settings, got \[\]"):
        TrainConfig.from_dict([], "x.json")


def test_every_committed_configuration_still_loads():
    """config.json files and the settings inside records, in the flat form they were written in."""
    found = []
    for path in sorted((ROOT / "results").rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if path.name == "config.json":
            found.append((path, data))
        elif isinstance(data, dict) and "config" in data and "benchmark" not in data:
            found.append((path, data["config"]))  # a benchmark's "config" is its own
    assert len(found) >= 27  # results/multi30k-small/config.json and the Table 3 grid's records
    for path, data in found:
        config = TrainConfig.from_dict(data, str(path))
        assert TrainConfig.from_dict(config.to_dict()) == config, path
    small = json.loads((ROOT / "results" / "multi30k-small" / "config.json").read_text())
    small = TrainConfig.from_dict(small)
    assert small == PRESETS["small"]  # 0.1.0's flat file, without the settings added since


def test_set_values_are_json_and_reach_the_run_typed(tmp_path, capsys, monkeypatch):
    from types import SimpleNamespace

    from annotated_transformer.training import run as trainer

    seen = []

    def fake_train(config, *args, **kwargs):
        seen.append(config)
        return SimpleNamespace(stopped_by=None)

    monkeypatch.setattr(trainer, "train", fake_train)
    out = str(tmp_path / "run")
    sets = ["norm_first=false", "d_model=128", "dropout=0", "clip_norm=1", 'positional="learned"']
    assert run_cli(capsys, "train", "--preset", "tiny", "--out", out,
                   *[w for s in sets for w in ("--set", s)])[0] == 0  # fmt: skip
    (config,) = seen
    assert config.model.norm_first is False and config.model.d_model == 128
    assert config.model.positional == "learned" and config.model.dropout == 0.0
    assert config.clip_norm == 1.0
    # `train --resume` before the first checkpoint: the settings of the folder's config.json
    Path(out).mkdir()
    (Path(out) / "config.json").write_text(json.dumps(config.to_dict()))
    assert run_cli(capsys, "train", "--resume", "--out", out, "--max-steps", "7")[0] == 0
    assert seen[1] == config.replace(max_steps=7, epochs=None)


def test_resume_checks_the_vocabulary_files_as_translate_does(tiny_run, tmp_path, capsys):
    run = tmp_path / "copy"
    shutil.copytree(tiny_run, run)
    Vocab([*SPECIALS, "nur", "drei", "Wörter"]).save(run / "src_vocab.json")
    code, _, err = run_cli(capsys, "train", "--resume", "--out", str(run), "--max-steps", "41")
    assert code == 1 and "src_vocab.json does not match the vocabulary inside" in err
    code, _, err = run_cli(
        capsys, "train", "--preset", "tiny", "--resume", "--out", str(run), "--max-steps", "41"
    )
    assert code == 1 and "src_vocab.json does not match the vocabulary inside" in err
    assert load_checkpoint(run)["train_state"]["step"] == 40  # nothing trained


def test_a_checkpoint_with_the_flat_settings_of_0_1_0_translates(tiny_run, tmp_path):
    payload = load_checkpoint(tiny_run)
    nested = payload["config"]
    payload["config"] = TrainConfig.from_dict(nested).settings()  # flat, as 0.1.0 saved it
    assert "model" not in payload["config"] and payload["config"]["d_model"] == 64
    del payload["path"]
    save_checkpoint(tmp_path / "checkpoint-00000040.pt", payload)
    old, new = Translator.from_checkpoint(tmp_path), Translator.from_checkpoint(tiny_run)
    assert old.config == new.config
    sentences = ["Ein Hund rennt.", "Zwei Frauen lachen."]
    assert old.translate(sentences, beam_size=2) == new.translate(sentences, beam_size=2)


def test_saved_run_reads_everything_once(tiny_run):
    from annotated_transformer.runs.saved_run import SavedRun

    saved = SavedRun.load(tiny_run)
    assert saved.path.name == "checkpoint-00000040.pt" and saved.step == 40
    assert saved.config == tiny(max_steps=40, eval_every=40) and saved.bpe is None
    assert saved.model_config().src_vocab == len(saved.src_vocab) == 8012
    assert set(saved.extra) >= {"optimizer", "scheduler", "train_state", "rng", "elapsed"}
    assert saved.origin()["step"] == 40


def test_empty_lines_on_stdin_stay_empty(tiny_run, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("Ein Hund.\n\nEine Frau.\n"))
    # Greedy: a 40-step model's beam search may well prefer an empty translation.
    code, out, _ = run_cli(capsys, "translate", "--checkpoint", str(tiny_run), "--beam", "1")
    lines = out.split("\n")
    assert code == 0 and len(lines) == 4 and lines[1] == "" and lines[0] and lines[2]


def test_a_metrics_line_torn_by_a_kill_is_dropped_on_resume(tmp_path):
    from annotated_transformer.training.run_folder import MetricsLog

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 5, "kind": "train"}\n{"step": 10, "kind": "train"}\n{"step": 1')
    MetricsLog(path, after_step=5, enabled=True)
    assert path.read_text() == '{"step": 5, "kind": "train"}\n'


def test_a_bfloat16_autocast_step_matches_float32_closely():
    from annotated_transformer.data.batch import collate
    from annotated_transformer.training.label_smoothing import LabelSmoothing
    from annotated_transformer.training.loop import train_step
    from annotated_transformer.training.schedule import make_optimizer

    pairs = [(torch.randint(4, 50, (n,)), torch.randint(4, 50, (n + 2,))) for n in (5, 7, 9)]
    losses = []
    for autocast in (None, torch.bfloat16):
        torch.manual_seed(0)
        model = build_model(PRESETS["tiny"].model.replace(dropout=0.0, src_vocab=50, tgt_vocab=50))
        result = train_step(
            model, [collate(pairs, PAD_ID)], LabelSmoothing(50, PAD_ID, 0.1),
            make_optimizer(model.parameters()), autocast=autocast,
        )  # fmt: skip
        losses.append(result.loss)
    assert losses[1] == pytest.approx(losses[0], rel=0.02)


# --- Part IV: recorded results and averaged checkpoints ----------------------------------------


def test_a_committed_hypothesis_file_rescores_to_its_record(data_dir):
    from annotated_transformer.evaluation.scores import load_results, rescore

    names = ["test2016-avg5-beam4-keepgreedy", "test2016-avg5-greedy"]
    names.append("mscoco-avg5-beam4-keepgreedy")
    for name in names:
        path = ROOT / "results" / "multi30k-small" / f"{name}.json"
        record, again = load_results(path), rescore(path, data_dir)
        for key in ("sacrebleu", "chrf", "bleu_lowercase"):
            assert again[key]["score"] == record[key]["score"], (name, key)
            assert again[key]["signature"] == record[key]["signature"]


def test_evaluate_records_results_that_rescore(tiny_run, data_dir, capsys, tmp_path):
    from annotated_transformer.evaluation.scores import load_results, rescore

    code, out, _ = run_cli(
        capsys, "evaluate", "--checkpoint", str(tiny_run), "--split", "mscoco", "--beam", "2",
        "--data-dir", str(data_dir), "--results", str(tmp_path / "rec"),
    )  # fmt: skip
    assert code == 0 and "chrF2|" in out and "case:lc" in out
    path = tmp_path / "rec" / "mscoco-last-beam2.json"
    record = load_results(path)
    assert record["decoding"]["beam_size"] == 2 and record["sentences"] == 461
    assert rescore(path, data_dir)["sacrebleu"]["score"] == record["sacrebleu"]["score"]


def test_a_checkpoint_without_a_vocabulary_is_refused(tiny_run, tmp_path, capsys):
    payload = load_checkpoint(tiny_run)
    del payload["tgt_vocab"], payload["path"]
    save_checkpoint(tmp_path / "novocab.pt", payload)
    code, _, err = run_cli(
        capsys, "translate", "--checkpoint", str(tmp_path / "novocab.pt"), "Ein Hund."
    )
    assert code == 1 and "novocab.pt" in err and "lacks tgt_vocab" in err


def test_average_command_writes_a_model_that_translates(tiny_run, tmp_path, capsys):
    out = tmp_path / "average.pt"
    code, text, _ = run_cli(capsys, "average", str(tiny_run), "--last", "1", "--out", str(out))
    assert code == 0 and "averaged 1 checkpoints" in text
    assert load_checkpoint(out)["averaged_from"][0]["step"] == 40
    code, _, err = run_cli(capsys, "average", str(tiny_run), "--last", "1",
                           "--out", str(tmp_path / "checkpoint-00000001.pt"))  # fmt: skip
    assert code == 2 and "named like a training checkpoint" in err
    code, _, err = run_cli(capsys, "average", str(tiny_run), "--last", "9", "--out", str(out))
    assert code == 1 and "fewer than the 9" in err


def test_a_beam_size_below_one_is_one_clear_error(tiny_run, capsys):
    with pytest.raises(SystemExit) as exit_info:  # argparse refuses it: exit status 2
        cli.main(["translate", "--checkpoint", str(tiny_run), "--beam", "0", "Hund."])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert "--beam: expected a positive integer (1 is greedy decoding), got '0'" in err
