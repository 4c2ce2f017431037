"""The model that ships with the package: its files are the ones its card describes, it translates
as recorded, and what writes and reads such files refuses what it should.

The card (`MODEL_CARD.md`) lists each shipped file's SHA-256; `results/release/` holds the
evaluation records that the card's scores come from, with their hypothesis files.
"""

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from annotated_transformer import cli, pretrained
from annotated_transformer.data.multi30k import read_split
from annotated_transformer.evaluation.scores import load_results, rescore
from annotated_transformer.runs.saved_run import SavedRun
from annotated_transformer.translator import Translator

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "src" / "annotated_transformer" / "pretrained_model"
RECORDS = ROOT / "results" / "release"
SPLITS = ("val", "test2016", "test2017", "test2018", "mscoco")


@pytest.fixture(scope="module")
def shipped() -> Translator:
    return Translator.pretrained(device="cpu")


def test_the_card_lists_the_sha256_of_every_shipped_file():
    card = (SHIPPED / "MODEL_CARD.md").read_text(encoding="utf-8")
    sums = pretrained.read_sums(SHIPPED)
    for name in pretrained.FILES:
        assert pretrained.sha256(SHIPPED / name) == sums[name], name
        assert f"`{sums[name]}`" in card, f"the card does not give {name}'s SHA-256"
    assert sum((SHIPPED / name).stat().st_size for name in pretrained.FILES) < 20 * 2**20


def test_the_card_gives_the_recorded_scores_of_every_split():
    card = (SHIPPED / "MODEL_CARD.md").read_text(encoding="utf-8")
    for split in SPLITS:
        record = load_results(RECORDS / f"{split}-shipped-beam4.json")
        assert record["decoding"]["keep_greedy"] is False  # the paper's plain beam search
        for key in ("sacrebleu", "chrf", "bleu_lowercase"):
            row = re.search(rf"^\| {split} \|.*$", card, re.MULTILINE)
            assert row and f"{record[key]['score']:.2f}" in row.group(0), (split, key)
            assert record[key]["signature"] in card


def test_the_card_scores_rescore_from_the_committed_hypotheses(data_dir):
    for split in SPLITS:
        path = RECORDS / f"{split}-shipped-beam4.json"
        record, again = load_results(path), rescore(path, data_dir)
        for key in ("sacrebleu", "chrf", "bleu_lowercase"):
            assert again[key]["score"] == record[key]["score"], (split, key)


def test_the_shipped_model_translates_test2016_as_recorded(shipped, data_dir):
    sources = [de for de, _ in read_split("test2016", data_dir)[:30]]
    recorded = (RECORDS / "test2016-shipped-beam4.en").read_text(encoding="utf-8").splitlines()
    assert shipped.translate(sources) == recorded[:30]


def test_the_shipped_model_is_the_tied_bpe_release_preset(shipped):
    model = shipped.model
    assert shipped.config.tokenizer == "bpe" and shipped.bpe is not None
    assert model.src_embed[0].embedding.weight is model.generator.proj.weight
    assert model.tgt_embed[0].embedding.weight is model.generator.proj.weight
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert shipped.origin["shipped"] and len(shipped.origin["averaged_from"]) == 5


def test_translate_needs_no_checkpoint(capsys):
    code = cli.main(["translate", "--device", "cpu", "Ein Hund rennt durch den Schnee."])
    out = capsys.readouterr().out
    assert code == 0 and len(out.splitlines()) == 1 and "dog" in out


def tiny_bpe_run(tmp_path: Path, data_dir: Path) -> Path:
    run = tmp_path / "run"
    code = cli.main([
        "train", "--preset", "tiny", "--tokenizer", "bpe", "--set", "share_embeddings=true",
        "--max-steps", "3", "--set", "vocab_size=600", "--set", "eval_every=3", "--out", str(run),
        "--data-dir", str(data_dir), "--no-progress",
    ])  # fmt: skip
    assert code == 0
    return run


def test_write_then_load_gives_the_fp16_rounded_model(tmp_path, data_dir, capsys):
    run = tiny_bpe_run(tmp_path, data_dir)
    out = tmp_path / "shipped"
    assert cli.main(["save-pretrained", str(run), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([*pretrained.FILES, "SHA256SUMS"])
    loaded = Translator.pretrained(out, device="cpu")
    saved = SavedRun.load(run)
    for name, weight in loaded.model.state_dict().items():
        assert torch.equal(weight, saved.weights[name].half().float()), name
    # the same translations as the checkpoint's model with its weights rounded to fp16
    rounded = Translator.from_checkpoint(run, device="cpu")
    rounded.model.load_state_dict({k: v.half().float() for k, v in saved.weights.items()})
    sentences = ["Ein Hund rennt.", "Zwei Männer spielen Fußball 😀 +<=>."]
    assert loaded.translate(sentences) == rounded.translate(sentences)
    # written again over its own files: allowed
    assert cli.main(["save-pretrained", str(run), "--out", str(out)]) == 0


def test_a_damaged_or_missing_file_is_refused_with_one_line(tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(SHIPPED, folder)
    data = bytearray((folder / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (folder / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"model\.safetensors: SHA-256 .* differs from SHA256SUMS"):
        pretrained.load_pretrained(folder)
    shutil.copy(SHIPPED / "model.safetensors", folder / "model.safetensors")
    (folder / "bpe.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"bpe\.json: missing"):
        pretrained.load_pretrained(folder)
    (folder / "SHA256SUMS").unlink()
    with pytest.raises(FileNotFoundError, match="SHA256SUMS: missing"):
        pretrained.load_pretrained(folder)


def test_save_pretrained_refuses_a_folder_it_did_not_write(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "config.json").write_text('{"my": "settings"}\n')
    code = cli.main(["save-pretrained", str(SHIPPED.parent / "missing.pt"), "--out", str(folder)])
    assert code == 1 and "no such checkpoint" in capsys.readouterr().err
    fixture = ROOT / "tests" / "fixtures" / "checkpoint-0.1.0" / "bpe"
    code = cli.main(["save-pretrained", str(fixture), "--out", str(folder)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert "holds config.json, not a shipped model's files: not replaced" in err
    assert (folder / "config.json").read_text() == '{"my": "settings"}\n'
    other = tmp_path / "other"  # another program's weights, and no config.json at all
    other.mkdir()
    (other / "model.safetensors").write_bytes(b"someone else's weights")
    assert cli.main(["save-pretrained", str(fixture), "--out", str(other)]) == 1
    assert "holds model.safetensors, not a shipped model's files" in capsys.readouterr().err
    assert (other / "model.safetensors").read_bytes() == b"someone else's weights"
    word = ROOT / "tests" / "fixtures" / "checkpoint-0.1.0" / "word"
    code = cli.main(["save-pretrained", str(word), "--out", str(tmp_path / "new")])
    err = capsys.readouterr().err
    assert code == 1 and "a shipped model reads one BPE vocabulary with tied embeddings" in err
    assert not (tmp_path / "new").exists()


def test_the_wheel_ships_the_model_and_stays_under_25_mb(tmp_path):
    project = tmp_path / "project"  # a copy, so that building leaves no build/ in the checkout
    shutil.copytree(ROOT / "src", project / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))  # fmt: skip
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(project), "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(tmp_path), "--quiet", "--disable-pip-version-check"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = tmp_path.glob("annotated_transformer-*.whl")
    print(f"{wheel.name}: {wheel.stat().st_size / 2**20:.1f} MiB")
    assert wheel.stat().st_size < 25 * 2**20
    names = set(zipfile.ZipFile(wheel).namelist())
    folder = "annotated_transformer/pretrained_model/"
    for name in (*pretrained.FILES, "SHA256SUMS", "MODEL_CARD.md"):
        assert folder + name in names, name
    # the repository's records and chapters stay out (the package's own `book/` subpackage is in)
    assert not [name for name in names if name.startswith(("results/", "book/"))]
    assert not [name for name in names if name.endswith(".ipynb")]
