"""Part VI, "Beyond the paper": the shared BPE vocabulary (exact round trip, files, errors),
three-way weight tying, training and translating with BPE from the command line, and the
runner of the chapter "Table 3 on Multi30k".

Tests that read Multi30k use `$ANNOTATED_TRANSFORMER_MULTI30K` or `../shared/data/multi30k`
and are skipped where neither exists.
"""

import json
from pathlib import Path

import pytest
import torch

from annotated_transformer import cli, variations
from annotated_transformer.data import multi30k
from annotated_transformer.data.bpe import BYTES, BPETokenizer
from annotated_transformer.data.vocab import SPECIALS, UNK_ID, normalize
from annotated_transformer.model.transformer import count_parameters, make_model
from annotated_transformer.runs.averaging import average_checkpoints
from annotated_transformer.runs.checkpoints import load_checkpoint, save_checkpoint
from annotated_transformer.runs.presets import PRESETS, preset
from annotated_transformer.translator import Translator

CORPUS = [
    "Ein Mann fährt Fahrrad.", "A man rides a bike.", "Zwei Hunde spielen im Schnee.",
    "Two dogs play in the snow.", "Eine Frau liest ein Buch.", "A woman reads a book.",
    "Ein Kind spielt mit einem Ball.", "A child plays with a ball.",
] * 5  # fmt: skip
ODD = [
    "Ein Mann fährt Fahrrad.", "  zwei   Leerzeichen ", "Straße 😀 ŋ ĳ", "\tTab\nZeile",
    "<s> </s> <unk> <pad>", "", " ", "Mann's 3,5 m (ca.)!", "日本語",
]  # fmt: skip


@pytest.fixture(scope="module")
def small_bpe() -> BPETokenizer:
    return BPETokenizer.train(CORPUS, vocab_size=400)


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# --- the BPE tokenizer -------------------------------------------------------------------------


@pytest.mark.parametrize("text", ODD)
def test_any_normalized_text_round_trips_exactly_and_is_never_unknown(small_bpe, text):
    pieces = small_bpe(text)
    assert small_bpe.detokenize(pieces) == normalize(text)  # the text as every tokenizer reads it
    assert UNK_ID not in small_bpe.vocab.encode(pieces)


def test_the_space_marker_is_the_one_character_not_kept(small_bpe):
    assert small_bpe.detokenize(small_bpe("a▁b")) == "a b"  # as in SentencePiece


def test_ids_specials_and_bytes_come_first(small_bpe):
    itos = small_bpe.vocab.itos
    assert tuple(itos[:4]) == SPECIALS and tuple(itos[4:260]) == BYTES
    assert len(small_bpe) == 400 and len(set(itos)) == 400
    assert small_bpe("Ein Mann") == ["▁Ein", "▁Mann"]  # frequent words become one piece
    texts = ["Ein Mann", "Two dogs"]
    assert small_bpe.pipe(texts) == [small_bpe(text) for text in texts]
    assert small_bpe("🙂") == ["▁", "<0xF0>", "<0x9F>", "<0x99>", "<0x82>"]  # never seen: bytes


def test_training_is_deterministic_and_checks_the_size(small_bpe):
    assert BPETokenizer.train(CORPUS, vocab_size=400) == small_bpe
    with pytest.raises(ValueError, match="vocab_size must be at least 261, got 100"):
        BPETokenizer.train(CORPUS, vocab_size=100)


def test_save_load_and_files_that_are_not_a_tokenizer(small_bpe, tmp_path):
    path = tmp_path / "bpe.json"
    small_bpe.save(path)
    assert BPETokenizer.load(path) == small_bpe
    assert BPETokenizer.load(path)("Ein Mann") == small_bpe("Ein Mann")
    path.write_text("{not json")
    with pytest.raises(ValueError, match=r"bpe\.json: not valid JSON"):
        BPETokenizer.load(path)
    path.write_text(json.dumps({"format": "annotated-transformer-vocab", "tokens": []}))
    with pytest.raises(ValueError, match=r"bpe\.json: not a BPE tokenizer saved by this package"):
        BPETokenizer.load(path)
    path.write_text(json.dumps({"format": "annotated-transformer-bpe", "version": 1,
                                "tokenizer": "{broken"}))  # fmt: skip
    with pytest.raises(ValueError, match=r"bpe\.json: the tokenizer does not load"):
        BPETokenizer.load(path)


def test_every_normalized_multi30k_sentence_round_trips_with_no_unknown_piece(data_dir):
    train = multi30k.read_split("train", data_dir)
    bpe = BPETokenizer.train([side for pair in train for side in pair], vocab_size=8000)
    assert len(bpe) == 8000
    for split in ("train", "val", "test2016", "mscoco"):
        texts = [side for pair in multi30k.read_split(split, data_dir) for side in pair]
        pieces = bpe.pipe(texts)
        assert [bpe.detokenize(p) for p in pieces] == [normalize(t) for t in texts], split
        assert all(UNK_ID not in bpe.vocab.encode(p) for p in pieces), split


# --- three-way weight tying (§3.4) -------------------------------------------------------------


def test_tying_shares_one_tensor_that_learns_from_all_three_uses():
    torch.manual_seed(0)
    tied = make_model(50, 50, N=1, d_model=16, d_ff=32, h=2, share_embeddings=True)
    untied = make_model(50, 50, N=1, d_model=16, d_ff=32, h=2)
    src, tgt, gen = (tied.src_embed[0].embedding.weight, tied.tgt_embed[0].embedding.weight,
                     tied.generator.proj.weight)  # fmt: skip
    assert src is tgt is gen
    assert src.data_ptr() == tgt.data_ptr() == gen.data_ptr()
    assert count_parameters(untied) - count_parameters(tied) == 2 * 50 * 16
    # A gradient through each use alone reaches the one matrix.
    x = torch.tensor([[5, 6, 7]])
    for use in (lambda: tied.src_embed(x).sum(), lambda: tied.tgt_embed(x).sum(),
                lambda: tied.generator(torch.randn(1, 3, 16)).sum()):  # fmt: skip
        tied.zero_grad()
        use().backward()
        assert src.grad is not None and src.grad.abs().sum() > 0
    # Loading a state dict keeps the three names on one tensor.
    again = make_model(50, 50, N=1, d_model=16, d_ff=32, h=2, share_embeddings=True)
    again.load_state_dict(tied.state_dict())
    assert again.src_embed[0].embedding.weight is again.generator.proj.weight
    assert torch.equal(again.generator.proj.weight, gen)


def test_the_paper_parameter_counts_need_tying():
    """Table 3: base 65M, big 213M, with a shared vocabulary of about 37,000 pieces (§5.1)."""
    base = count_parameters(make_model(37000, 37000, share_embeddings=True))
    big = count_parameters(make_model(37000, 37000, d_model=1024, d_ff=4096, h=16,
                                      share_embeddings=True))  # fmt: skip
    untied = count_parameters(make_model(37000, 37000))
    assert abs(base / 65e6 - 1) < 0.05 and abs(big / 213e6 - 1) < 0.05
    assert untied > 1.5 * base


def test_settings_for_bpe_and_tying_are_checked():
    with pytest.raises(ValueError, match='one vocabulary for both languages: set tokenizer="bpe"'):
        preset("tiny", share_embeddings=True)
    with pytest.raises(ValueError, match='tokenizer: expected one of "word", "bpe", got "spm"'):
        preset("tiny", tokenizer="spm")
    with pytest.raises(ValueError, match="setting positional: expected one of"):
        preset("tiny", positional="rotary")
    config = preset("tiny", tokenizer="bpe", share_embeddings=True, d_k=8, norm_first=True)
    model = config.model.replace(src_vocab=300, tgt_vocab=300)
    assert (model.share_embeddings, model.d_k, model.norm_first) == (True, 8, True)
    assert PRESETS["base"].tokenizer == "bpe" and PRESETS["base"].model.share_embeddings
    assert PRESETS["small"].tokenizer == "word"


# --- training and translating with BPE ----------------------------------------------------------


@pytest.fixture(scope="module")
def bpe_run(data_dir, tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("bpe") / "run"
    code = cli.main([
        "train", "--preset", "tiny", "--tokenizer", "bpe", "--max-steps", "20",
        "--set", "eval_every=20", "--set", "vocab_size=2000", "--out", str(run),
        "--data-dir", str(data_dir), "--no-progress",
    ])  # fmt: skip
    assert code == 0
    return run


def test_the_cli_trains_translates_and_evaluates_with_bpe(bpe_run, data_dir, capsys, tmp_path):
    names = sorted(p.name for p in bpe_run.iterdir())
    assert names == [
        "bpe.json", "checkpoint-00000020.pt", "config.json", "metrics.jsonl", "run.json",
        "src_vocab.json", "tgt_vocab.json", "train.lock",
    ]  # fmt: skip
    payload = load_checkpoint(bpe_run)
    bpe = BPETokenizer.from_json(payload["bpe"])
    assert bpe == BPETokenizer.load(bpe_run / "bpe.json") and len(bpe) == 2000
    assert payload["src_vocab"] == payload["tgt_vocab"] == bpe.vocab.to_json()
    translator = Translator.from_checkpoint(bpe_run)
    model = translator.model
    assert model.src_embed[0].embedding.weight is model.generator.proj.weight
    assert translator.tokenizer is translator.bpe and translator.unknown_words("Straße 😀") == []
    code, out, _ = run_cli(capsys, "translate", "--checkpoint", str(bpe_run), "--beam", "2",
                           "Ein Hund 😀.", "Zwei Katzen.")  # fmt: skip
    assert code == 0 and len(out.splitlines()) == 2
    code, out, _ = run_cli(
        capsys, "evaluate", "--checkpoint", str(bpe_run), "--split", "val", "--beam", "1",
        "--data-dir", str(data_dir), "--results", str(tmp_path), "--tag", "t",
    )  # fmt: skip
    assert code == 0 and "val: 1014 sentences" in out
    assert json.loads((tmp_path / "val-t.json").read_text())["decoding"]["keep_greedy"] is False
    code, out, _ = run_cli(
        capsys, "evaluate", "--checkpoint", str(bpe_run), "--split", "mscoco", "--beam", "2",
        "--keep-greedy", "--data-dir", str(data_dir), "--results", str(tmp_path),
    )  # fmt: skip
    record = json.loads((tmp_path / "mscoco-last-beam2-keepgreedy.json").read_text())
    assert code == 0 and "beam search, 2 beams, alpha 0.6, with the greedy hypothesis" in out
    assert record["decoding"] == {
        "beam_size": 2, "alpha": 0.6, "keep_greedy": True, "search": "k-finished",
        "max_output_tokens": "source tokens + 50 (§6.1)",
    }  # fmt: skip
    code, out, _ = run_cli(capsys, "attention", "--checkpoint", str(bpe_run), "--beam", "1",
                           "--output", str(tmp_path / "a.json"), "Zwei Hunde.")  # fmt: skip
    maps = json.loads((tmp_path / "a.json").read_text())
    assert code == 0 and maps["src_tokens"] == ["▁Zwei", "▁Hunde", ".", "</s>"]


def test_a_bpe_run_resumes_with_its_own_tokenizer(bpe_run, tmp_path, data_dir, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    for path in bpe_run.iterdir():
        (run / path.name).write_bytes(path.read_bytes())
    before = (run / "bpe.json").read_bytes()

    def no_training(*args, **kwargs):
        raise AssertionError("a resumed run learned a new BPE instead of reading its own")

    monkeypatch.setattr(BPETokenizer, "train", no_training)
    code = cli.main(["train", "--resume", "--out", str(run), "--max-steps", "22",
                     "--data-dir", str(data_dir), "--no-progress"])  # fmt: skip
    assert code == 0 and (run / "bpe.json").read_bytes() == before
    assert load_checkpoint(run)["train_state"]["step"] == 22
    assert load_checkpoint(run)["bpe"] == load_checkpoint(bpe_run)["bpe"]


def test_a_bpe_checkpoint_without_its_tokenizer_or_beside_another_is_refused(bpe_run, tmp_path):
    run = tmp_path / "copy"
    run.mkdir()
    (run / "checkpoint-00000020.pt").write_bytes((bpe_run / "checkpoint-00000020.pt").read_bytes())
    BPETokenizer.train(CORPUS, vocab_size=300).save(run / "bpe.json")
    with pytest.raises(ValueError, match=r"bpe\.json does not match the BPE tokenizer inside"):
        Translator.from_checkpoint(run)
    (run / "bpe.json").unlink()
    payload = load_checkpoint(run)
    del payload["bpe"], payload["path"]
    save_checkpoint(run / "checkpoint-00000020.pt", payload)
    with pytest.raises(ValueError, match="a BPE run's checkpoint without its BPE tokenizer"):
        Translator.from_checkpoint(run)


def test_averaging_keeps_the_tokenizer_and_refuses_another(bpe_run, tmp_path):
    path = bpe_run / "checkpoint-00000020.pt"
    averaged = average_checkpoints([path])  # (a step given twice is refused: counted twice)
    averaged.save(tmp_path / "average.pt")
    assert load_checkpoint(tmp_path / "average.pt")["bpe"] == load_checkpoint(path)["bpe"]
    other = load_checkpoint(path)  # another run's tokenizer, with its vocabularies
    bpe = BPETokenizer.train(CORPUS, vocab_size=300)
    other["bpe"] = bpe.to_json()
    other["src_vocab"] = other["tgt_vocab"] = bpe.vocab.to_json()
    del other["path"]
    save_checkpoint(tmp_path / "checkpoint-00000020.pt", other)
    with pytest.raises(ValueError, match=r"differ \(their tokenizers or vocabularies\)"):
        average_checkpoints([path, tmp_path / "checkpoint-00000020.pt"])
    other["tgt_vocab"] = load_checkpoint(path)["tgt_vocab"]  # one that does not match its BPE
    save_checkpoint(tmp_path / "checkpoint-00000020.pt", other)
    with pytest.raises(ValueError, match="the BPE tokenizer does not match the vocabularies"):
        average_checkpoints([path, tmp_path / "checkpoint-00000020.pt"])


# --- the Table 3 grid --------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_the_grid_scales_every_row_of_table_3(profile):
    base = variations.base_config(profile)
    grid = variations.grid(base)
    names = [v.name for v in grid]
    assert len(set(names)) == len(names)
    assert {v.row for v in grid} == {"base", "A", "B", "C", "D", "E", "BPE", "norm"}
    for v in grid:
        config = base.replace(**v.changes)  # every variation is a valid run
        assert v.paper is None or v.paper in variations.PAPER
        if v.row == "A":  # constant computation: h · d_k = d_model
            model = config.model
            assert model.h * (model.d_k or model.d_model // model.h) == base.model.d_model
    assert sum(v.row == "A" for v in grid) == 4 and sum(v.row == "D" for v in grid) == 4


def test_a_variation_is_trained_scored_and_recorded(data_dir, tmp_path):
    base = variations.base_config("quick").replace(
        N=1, d_model=16, d_ff=32, h=2, max_steps=3, eval_every=3, save_every=3, max_len=40,
        max_tokens=512,
    )  # fmt: skip
    variation = variations.Variation("E", "E-learned", "learned", {"positional": "learned"})
    record = variations.run(variation, base, tmp_path / "runs", tmp_path / "results", data_dir)
    saved = json.loads((tmp_path / "results" / "E-learned.json").read_text())
    assert saved == json.loads(json.dumps(record))
    assert saved["steps"] == 3 and saved["config"]["model"]["positional"] == "learned"
    assert saved["val"]["perplexity"] > 1 and 0 <= saved["val"]["bleu"]["score"] <= 100
    assert [step for step, _, _ in saved["train_curve"]] == [3]
    hypotheses = (tmp_path / "results" / "E-learned.val.en").read_text().splitlines()
    assert len(hypotheses) == 1014
    assert variations.recorded(tmp_path / "results", variation, base) == saved
    assert variations.recorded(tmp_path / "results", variation, base.replace(seed=1)) is None


def test_an_unknown_variation_is_named(capsys):
    assert cli.main(["grid", "--only", "A-h3"]) == 2  # (2: what was typed)
    err = capsys.readouterr().err
    assert "--only: unknown variations ['A-h3']" in err and len(err.strip().splitlines()) == 1


def test_the_grid_is_a_command_and_its_records_name_it(tmp_path, monkeypatch, capsys):
    help_text = cli.build_parser().format_help()
    for command in ("info", "download", "train", "translate", "evaluate", "attention", "average",
                    "grid"):  # fmt: skip
        assert f"\n    {command} " in help_text or f"\n    {command}\n" in help_text, command
    made = {}

    def fake_run(variation, base, runs, results, data_dir, device, command, sentences=None):
        made[variation.name] = (runs, command)
        return {"val": {"bleu": {"score": 1.0}, "perplexity": 2.0}, "seconds": 3.0}

    monkeypatch.setattr(variations, "run", fake_run)
    runs, results = tmp_path / "runs", tmp_path / "results"
    args = ["grid", "--only", "A-h1", "E-learned", "--runs", str(runs), "--results", str(results),
            "--device", "cpu", "--data-dir", "data"]  # fmt: skip
    assert cli.main(args) == 0
    assert "2 of 26 variations to train" in capsys.readouterr().out
    assert made["A-h1"] == (
        runs / "quick",
        f"annotated-transformer grid --profile quick --only A-h1 --runs {runs} "
        f"--results {results} --device cpu --data-dir data",
    )


def test_the_grid_replaces_its_own_records_and_no_other_file(tmp_path, monkeypatch, capsys):
    scores = {"val": {"bleu": {"score": 1.0}, "perplexity": 2.0}, "seconds": 3.0}
    monkeypatch.setattr(variations, "run", lambda *args, **kwargs: scores)
    results = tmp_path / "results"
    results.mkdir()
    record, hypotheses = results / "A-h1.json", results / "A-h1.val.en"
    hypotheses.write_text("A dog.\n", encoding="utf-8")
    args = ["grid", "--only", "A-h1", "--runs", str(tmp_path / "runs"), "--results",
            str(results), "--device", "cpu"]  # fmt: skip
    assert cli.main(args) == 1  # translations with no record beside them: not the grid's
    assert "A-h1.val.en: the file exists and is not the translations beside a record of the " \
        "grid" in capsys.readouterr().err  # fmt: skip
    record.write_text(json.dumps({"variation": {"name": "A-h1"}, "config": {}}), "utf-8")
    assert cli.main(args) == 0  # a record of the grid's, and its translations: replaced
    record.write_text('{"mine": true}', encoding="utf-8")
    assert cli.main(args) == 1
    assert "A-h1.json: the file exists and is not a record of the grid" in capsys.readouterr().err
    assert record.read_text(encoding="utf-8") == '{"mine": true}'


def test_the_grid_runs_its_processes_through_the_command_line(capsys):
    # Each process runs `python -m annotated_transformer ARGS`; one that fails fails the grid.
    commands = {"ok": ["--version"], "bad": ["grid", "--only", "no-such-variation"]}
    assert variations.run_in_processes(["ok"], commands.get, jobs=2) == 0
    assert variations.run_in_processes(["ok", "bad"], commands.get, jobs=2) == 1
    out = capsys.readouterr().out
    assert "ok: done" in out and "bad: FAILED" in out
