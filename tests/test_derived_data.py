"""Derived data notices when its source changed (issue 44): a prepared WMT folder records the
size and SHA-256 of the text it was made from, and `prepare` makes it again (`train` refuses)
when that text changed; a results record is rescored only against the reference file it was
scored against; a Hub card carries scores only of the weights exported; and damaged shards or
newstest files are one line naming the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from wmt_miniature import make_mirror

from annotated_transformer import cli
from annotated_transformer.data import shards, wmt14
from annotated_transformer.evaluation.scores import rescore

VOCAB = 300  # the miniature's BPE: prepared in about a second


def quiet(message: str) -> None:
    pass


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The miniature WMT text, as `download` writes it, and its folder prepared once."""
    work = tmp_path_factory.mktemp("derived")
    sources = wmt14.sources_from_json(make_mirror(work / "mirror"))
    wmt14.extract({n: work / "mirror" / s.file for n, s in sources.items()}, work / "wmt",
                  sources=sources)  # fmt: skip
    shards.prepare_shards(work / "wmt", VOCAB, 2, say=quiet)
    return work / "wmt"


@pytest.fixture
def text(pristine: Path, tmp_path: Path) -> Path:
    """A copy of the text and its prepared folder, for one test to change."""
    return Path(shutil.copytree(pristine, tmp_path / "wmt"))


def prepared(text: Path) -> Path:
    return shards.shard_folder(text, VOCAB, 2)


def check(text: Path, rebuild: bool = False, said: list[str] | None = None) -> bool:
    say = said.append if said is not None else quiet
    return shards.check_prepared(prepared(text), text, rebuild, say)


def rewrite_train_json(text: Path, change) -> None:
    path = prepared(text) / "train.json"
    meta = json.loads(path.read_text(encoding="utf-8"))
    change(meta)
    path.write_text(json.dumps(meta), encoding="utf-8")


# --- a prepared folder and the text it was made from -----------------------------------------


def test_the_prepared_folder_records_the_size_and_sha256_of_its_text(text):
    meta = json.loads((prepared(text) / "train.json").read_text(encoding="utf-8"))
    assert meta["sources"] == {name: shards.fingerprint(text / name) for name in shards.SOURCES}
    assert check(text)  # the same text: reused as it is


def test_text_rewritten_since_is_prepared_again_by_prepare_and_refused_by_train(text, capsys):
    lines = (text / "train.en").read_text(encoding="utf-8").splitlines(keepends=True)
    german = (text / "train.de").read_text(encoding="utf-8").splitlines(keepends=True)
    (text / "train.en").write_text("".join(lines[:400]), encoding="utf-8")  # (--max-length 6)
    (text / "train.de").write_text("".join(german[:400]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"wmt/train.en: [\d,]+ bytes, not the [\d,]+ that "
                       r"shards-bpe300-min2 was prepared from: the text changed since; prepare "
                       r"it again: annotated-transformer prepare --data-dir .*wmt --vocab-size "
                       r"300 --min-freq 2"):  # fmt: skip
        check(text)
    assert cli.main(["prepare", "--data-dir", str(text), "--vocab-size", str(VOCAB)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines()[0].startswith(f"prepare: {text}/train.en: ")
    assert err.splitlines()[0].endswith("the text changed since; preparing it again")
    assert "400 training pairs" in out and "already prepared" not in out
    assert check(text)
    assert cli.main(["prepare", "--data-dir", str(text), "--vocab-size", str(VOCAB)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "already prepared; 300 BPE pieces, 400 training pairs" in out
    assert [p.name for p in text.iterdir() if p.name.startswith(".")] == []  # no scratch left


def test_a_file_replaced_by_one_of_the_same_size_is_noticed(text):
    data = bytearray((text / "train.de").read_bytes())
    data[10:14] = b"XXXX" if data[10:14] != b"XXXX" else b"YYYY"
    (text / "train.de").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"wmt/train.de: SHA-256 [0-9a-f]{16}…, not the "
                       r"[0-9a-f]{16}… that shards-bpe300-min2 was prepared from"):  # fmt: skip
        check(text)


def test_a_folder_of_the_previous_version_is_never_reused_silently(text):
    rewrite_train_json(text, lambda meta: meta.pop("sources"))
    with pytest.raises(ValueError, match=r"train.json: records no fingerprints of the text it "
                       r"was prepared from \(an earlier version prepared it\); prepare it again: "
                       r"annotated-transformer prepare"):  # fmt: skip
        check(text)
    said: list[str] = []
    assert not check(text, rebuild=True, said=said)
    assert len(said) == 1 and said[0].endswith("earlier version prepared it); preparing it again")
    shards.prepare_shards(text, VOCAB, 2, say=quiet, rebuild=True)
    assert check(text)


def test_text_changed_while_it_was_being_prepared_is_not_recorded(text, monkeypatch):
    shutil.rmtree(prepared(text))
    learn = shards.learn_bpe

    def learn_while_download_writes(paths, *args):
        tokenizer = learn(paths, *args)
        with open(text / "train.de", "r+b") as file:  # another download, rewriting it
            file.write(b"Noch")
        return tokenizer

    monkeypatch.setattr(shards, "learn_bpe", learn_while_download_writes)
    with pytest.raises(ValueError, match=r"wmt/train.de: changed while it was being prepared"):
        shards.prepare_shards(text, VOCAB, 2, say=quiet)
    assert sorted(p.name for p in text.iterdir() if "shards" in p.name) == []


def test_a_vocabulary_changed_after_prepare_is_refused(text):
    other = shards.learn_bpe([text / "newstest2013.en", text / "newstest2013.de"], 280, 1)
    other.save(prepared(text) / "bpe.json")
    assert check(text)  # the text is the same: only the vocabulary differs
    with pytest.raises(ValueError, match=r"train.json was written with another BPE than bpe.json"):
        shards.open_prepared(prepared(text), ("en", "de"))


def test_a_record_of_sources_that_is_damaged_is_refused(text):
    rewrite_train_json(text, lambda meta: meta["sources"]["train.en"].update(size="16744"))
    with pytest.raises(ValueError, match=r"its sources are not train.en and train.de with their "
                       r"size and sha256: the folder is damaged"):  # fmt: skip
        check(text)


# --- damaged shards, and newstest files that do not fit -------------------------------------


def cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


@pytest.mark.parametrize(("damage", "message"), [
    (lambda f: rewrite_train_json(f.parent, lambda m: m.pop("pairs")),
     r"train.json: lacks pairs: the shard is damaged"),
    (lambda f: rewrite_train_json(f.parent, lambda m: m.update(tokens=[1, 2])),
     r"train.json: tokens is list, not dict"),
    (lambda f: np.save(f / "train.en.offsets.npy", np.load(f / "train.en.offsets.npy")[:-5]),
     r"train.en.offsets.npy: 535 offsets \(int64\), expected 540 integers \(539 pairs \+ 1"),
    (lambda f: cut(f / "train.de.offsets.npy", 1000),
     r"train.de.offsets.npy: not a whole offsets array \(mmap length is greater than file size"),
    (lambda f: np.save(f / "train.en.offsets.npy", np.load(f / "train.en.offsets.npy") * 2),
     r"train.en.offsets.npy: runs from 0 to \d+, expected 0 to \d+ \(from train.json\)"),
])  # fmt: skip
def test_a_damaged_shard_names_the_file_and_what_does_not_match(text, damage, message):
    damage(prepared(text))
    with pytest.raises(ValueError, match=message):
        shards.open_prepared(prepared(text), ("en", "de"))


@pytest.mark.parametrize(("damage", "message"), [
    (lambda t: cut(t / "newstest2013.de", 300), r"newstest2013.en and .*newstest2013.de are not "
     r"aligned: one ends at line \d+"),
    (lambda t: (t / "newstest2013.en").write_bytes(b"M\xe4nner im Park\n" * 3),
     r"newstest2013.en: line 1 is not UTF-8 text \(invalid continuation byte at byte 1 of the "
     r"line\)"),
])  # fmt: skip
def test_a_newstest_file_that_does_not_fit_is_named_before_any_work(text, damage, message):
    damage(text)
    with pytest.raises(ValueError, match=message):
        check(text)


def test_evaluate_names_a_misaligned_newstest_file(text):
    from types import SimpleNamespace

    from annotated_transformer.evaluation.newstest import evaluate_newstest

    cut(text / "newstest2014-filtered.de", 200)
    translator = SimpleNamespace(config=SimpleNamespace(pair="en-de"))  # never asked to translate
    with pytest.raises(ValueError, match=r"newstest2014-filtered.en and .*newstest2014-filtered"
                       r".de are not aligned: one ends at line \d+"):  # fmt: skip
        evaluate_newstest(translator, "newstest2014-filtered", text)


# --- a results record and its reference file ------------------------------------------------


@pytest.fixture
def record(text: Path, tmp_path: Path) -> Path:
    """A newstest2014 record whose hypotheses are its references (BLEU 100)."""
    from annotated_transformer.pretrained import sha256

    reference = text / "newstest2014-filtered.de"
    results = tmp_path / "results"
    results.mkdir()
    shutil.copyfile(reference, results / "newstest2014-x.de")
    about = {"split": "newstest2014-filtered", "pair": "en-de", "command": "evaluate",
             "hypotheses": "newstest2014-x.de", "sacrebleu": {"score": 100.0},
             "references": {"file": reference.name, "sha256": sha256(reference)}}  # fmt: skip
    (results / "newstest2014-x.json").write_text(json.dumps(about), encoding="utf-8")
    return results / "newstest2014-x.json"


def test_a_reordered_reference_file_is_refused_by_rescore(record, text):
    assert rescore(record, text)["sacrebleu"]["score"] == 100.0
    reference = text / "newstest2014-filtered.de"
    lines = reference.read_text(encoding="utf-8").splitlines(keepends=True)
    reference.write_text("".join([lines[1], lines[0], *lines[2:]]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"newstest2014-filtered.de: SHA-256 [0-9a-f]{16}…, "
                       r"not the [0-9a-f]{16}… that .*newstest2014-x.json was scored "
                       r"against"):  # fmt: skip
        rescore(record, text)


def test_a_deleted_reference_file_or_a_record_without_its_hash_is_refused(record, text):
    (text / "newstest2014-filtered.de").unlink()
    with pytest.raises(FileNotFoundError, match=r"newstest2014-filtered.de: missing; .*"
                       r"newstest2014-x.json was scored against it"):  # fmt: skip
        rescore(record, text)
    about = json.loads(record.read_text(encoding="utf-8"))
    del about["references"]["sha256"]
    record.write_text(json.dumps(about), encoding="utf-8")
    with pytest.raises(ValueError, match="records no references file and sha256"):
        rescore(record, text)


def test_a_multi30k_record_of_other_references_is_refused(tmp_path):
    from annotated_transformer.data import multi30k

    if multi30k.local_dir() is None:
        pytest.skip("no local Multi30k ($ANNOTATED_TRANSFORMER_MULTI30K)")
    committed = Path(__file__).resolve().parents[1] / "results" / "release"
    about = json.loads((committed / "test2016-shipped-greedy.json").read_text(encoding="utf-8"))
    shutil.copyfile(committed / "test2016-shipped-greedy.en", tmp_path / "hyp.en")
    about |= {"hypotheses": "hyp.en", "references": {"file": "mine.en", "sha256": "0" * 64}}
    (tmp_path / "r.json").write_text(json.dumps(about), encoding="utf-8")
    with pytest.raises(ValueError, match=r"test_2016_flickr.en.gz: SHA-256 611d361c6334bc72…, "
                       r"not the 0000000000000000… that .*r.json was scored against"):  # fmt: skip
        rescore(tmp_path / "r.json")


# --- the Hub card: scores only of the weights exported --------------------------------------


def shipped_copy(folder: Path, change_weights: bool) -> Path:
    """A copy of the shipped model; with `change_weights`, its weights other ones (a short run
    saved into the folder), SHA256SUMS written for them, the shipped card left beside them."""
    from safetensors.torch import load_file, save_file

    from annotated_transformer.pretrained import FILES, SUMS, WEIGHTS, sha256, shipped_folder

    shutil.copytree(shipped_folder(), folder)
    if change_weights:
        tensors = load_file(folder / WEIGHTS)
        name = next(iter(tensors))
        tensors[name] = tensors[name] * 0.5
        save_file(tensors, folder / WEIGHTS)
        sums = "".join(f"{sha256(folder / n)}  {n}\n" for n in FILES)
        (folder / SUMS).write_text(sums, encoding="utf-8")
    return folder


def test_the_card_beside_the_weights_it_describes_is_handed_on(tmp_path):
    from annotated_transformer.exports.hf import card_beside, card_weights_sha256
    from annotated_transformer.pretrained import sha256, shipped_folder

    card, why = card_beside(shipped_folder())
    weights = shipped_folder() / "model.safetensors"
    assert why is None and card_weights_sha256(card) == sha256(weights)
    other, why = card_beside(shipped_copy(tmp_path / "short", change_weights=True))
    assert other is None
    assert why.startswith(f"{tmp_path}/short/MODEL_CARD.md: records the scores of other weights")
    assert why.endswith("here): the Hub card is written without its scores")
    (tmp_path / "short" / "MODEL_CARD.md").write_text("# My model\n\nBLEU 99\n", encoding="utf-8")
    why = card_beside(tmp_path / "short")[1]
    assert why.endswith("records no SHA-256 of model.safetensors: the Hub card is written without "
                        "its scores")  # fmt: skip
    assert card_beside(tmp_path) == (None, None)  # no card: nothing to say


def test_the_front_matter_is_yaml_with_its_model_index():
    import yaml

    from annotated_transformer.exports.hf import hub_card
    from annotated_transformer.pretrained import shipped_folder

    card = (shipped_folder() / "MODEL_CARD.md").read_text(encoding="utf-8")
    odd = card.replace("- BLEU: `nrefs:1", "- BLEU: `it's: #1 | {x}, nrefs:1")  # quotes, colons
    for text, args in ((card, "nrefs:1|case:mixed"), (odd, "it's: #1 | {x}, nrefs:1")):
        front = yaml.safe_load(hub_card(text).split("---\n")[1])
        results = front["model-index"][0]["results"]
        assert [r["dataset"]["split"] for r in results][:2] == ["val", "test2016"]
        assert results[0]["metrics"][0]["value"] == 39.93
        assert results[0]["metrics"][0]["args"].startswith(args)
    front = yaml.safe_load(hub_card(None, "en-de").split("---\n")[1])
    assert front["language"] == ["en", "de"] and "model-index" not in front


def test_export_hf_of_other_weights_beside_the_shipped_card_claims_no_scores(tmp_path, capsys):
    pytest.importorskip("transformers")
    import yaml

    folder = shipped_copy(tmp_path / "short", change_weights=True)
    code = cli.main(["export-hf", "--checkpoint", str(folder), "--out", str(tmp_path / "hf")])
    _, err = capsys.readouterr()
    assert code == 0, err
    notes = [line for line in err.splitlines() if "note:" in line]
    assert notes == [f"annotated-transformer: note: {folder}/MODEL_CARD.md: records the scores "
                     f"of other weights (model.safetensors 321701b02772a400…, not "
                     f"{notes[0].split('not ')[1]}"]  # fmt: skip
    readme = (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(readme.split("---\n")[1])
    assert "model-index" not in front and "39.93" not in readme and "# Model card" not in readme


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("split", None, "its split is null, not a string"),
        ("hypotheses", 3, "its hypotheses is a number, not a string"),
        ("pair", ["en", "de"], "its pair is a list, not a string"),
    ],
)
def test_rescore_refuses_a_record_whose_keys_are_not_strings(record, text, key, value, message):
    from annotated_transformer.util.errors import InputError

    about = json.loads(record.read_text(encoding="utf-8"))
    record.write_text(json.dumps({**about, key: value}), encoding="utf-8")
    with pytest.raises(InputError, match=rf"newstest2014-x.json: {message}: not a results record"):
        rescore(record, text)


def test_rescore_refuses_hypotheses_that_are_not_utf8(record, text):
    from annotated_transformer.util.errors import InputError

    (record.parent / "newstest2014-x.de").write_bytes(b"Ein Hund\n\xe4\n")
    message = (r"newstest2014-x.json: its hypotheses, .*newstest2014-x\.de, are not UTF-8 text "
               r"\(invalid continuation byte at byte 9\)")  # fmt: skip
    with pytest.raises(InputError, match=message):
        rescore(record, text)
