"""The model served by CTranslate2 (chapter "Serving the model", `ct2_export`).

The export is exact: CTranslate2 in float32 translates all 1,000 sentences of test2016 as our
own decoding does, greedy and beam 4 (α 0 and 0.6). int8's BLEU is printed beside float32's.
Models of other shapes (pre-norm, learned positions) are exact too; what CTranslate2 cannot
compute as we do is refused before any file is written.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest
import torch

pytest.importorskip("ctranslate2")

from annotated_transformer.data.multi30k import read_split
from annotated_transformer.evaluation.scores import bleu
from annotated_transformer.exports import ct2 as ct2_export
from annotated_transformer.exports.ct2 import CT2Translator, export_ct2
from annotated_transformer.model.transformer import ModelConfig, build_model
from annotated_transformer.translator import Translator


@pytest.fixture(scope="module")
def ours() -> Translator:
    torch.set_num_threads(2)
    return Translator.pretrained(device="cpu")


@pytest.fixture(scope="module")
def exports(ours: Translator, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ct2")
    for quantization in ct2_export.QUANTIZATIONS:
        export_ct2(ours.model, ours.bpe, ours.config, folder / quantization,
                   quantization=quantization, origin=ours.origin)  # fmt: skip
    return {q: folder / q for q in ct2_export.QUANTIZATIONS}


@pytest.fixture(scope="module")
def test2016(data_dir: Path) -> tuple[list[str], list[str]]:
    pairs = read_split("test2016", data_dir)
    return [de for de, _ in pairs], [en for _, en in pairs]


def timed(translator: Translator, sentences: list[str], beam: int, alpha: float):
    start = time.perf_counter()
    out = translator.translate(sentences, beam_size=beam, alpha=alpha)
    return out, len(sentences) / (time.perf_counter() - start)


@pytest.mark.parametrize(("beam", "alpha"), [(1, 0.0), (4, 0.0), (4, 0.6)])
def test_float32_translates_all_of_test2016_as_we_do(ours, exports, test2016, beam, alpha):
    german, english = test2016
    engine = CT2Translator.open(exports["float32"], threads=2)
    mine, mine_speed = timed(ours, german, beam, alpha)
    theirs, their_speed = timed(engine, german, beam, alpha)
    differ = [i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b]
    print(f"k={beam} α={alpha}: ours {mine_speed:.0f} sent/s, CTranslate2 float32 "
          f"{their_speed:.0f} sent/s, BLEU {bleu(mine, english).score:.2f} both")  # fmt: skip
    assert len(german) == 1000
    assert differ == [], f"{len(differ)} sentences differ, the first {german[differ[0]]!r}"


def test_int8_bleu_beside_float32(exports, test2016):
    german, english = test2016
    scores = {}
    for quantization, folder in exports.items():
        out, speed = timed(CT2Translator.open(folder, threads=2), german, 4, 0.6)
        scores[quantization] = bleu(out, english).score
        print(f"CTranslate2 {quantization}: beam 4 BLEU {scores[quantization]:.2f}, "
              f"{speed:.0f} sent/s")  # fmt: skip
    assert abs(scores["int8"] - scores["float32"]) < 2.0  # int8 changes a few translations
    assert (exports["int8"] / "model.bin").stat().st_size < (
        exports["float32"] / "model.bin"
    ).stat().st_size / 3  # 1 byte a weight instead of 4


@pytest.mark.parametrize("options", [
    {"norm_first": True}, {"positional": "learned"}, {"share_embeddings": False},
])  # fmt: skip
def test_other_shapes_of_model_are_exact(ours, tmp_path, options):
    config = ModelConfig(src_vocab=len(ours.bpe), tgt_vocab=len(ours.bpe), N=2, d_model=64,
                         d_ff=128, h=4, max_len=64, **options)  # fmt: skip
    torch.manual_seed(0)
    model = build_model(config).eval()
    unsized = dataclasses.replace(config, src_vocab=None, tgt_vocab=None)  # (a run's config)
    train_config = dataclasses.replace(ours.config, model=unsized)
    mine = Translator(model, train_config, ours.bpe.vocab, ours.bpe.vocab, bpe=ours.bpe)
    export_ct2(model, ours.bpe, train_config, tmp_path / "m")
    engine = CT2Translator.open(tmp_path / "m", threads=2)
    sentences = ["Ein Hund rennt durch den Schnee.", "Zwei Männer spielen Fußball.", "Hallo"]
    for beam in (1, 3):
        assert engine.translate(sentences, beam) == mine.translate(sentences, beam)


def test_what_ctranslate2_cannot_compute_is_refused_before_writing(ours, tmp_path):
    config = ModelConfig(src_vocab=len(ours.bpe), tgt_vocab=len(ours.bpe), N=1, d_model=64,
                         d_ff=128, h=4, d_k=8, d_v=8)  # fmt: skip
    model = build_model(config)
    with pytest.raises(ValueError, match="splits d_model=64 evenly into h=4 heads; this model "
                       "has d_k=8, d_v=8"):  # fmt: skip
        export_ct2(model, ours.bpe, ours.config, tmp_path / "x")
    with pytest.raises(ValueError, match="quantization must be one of float32, int8"):
        export_ct2(ours.model, ours.bpe, ours.config, tmp_path / "x", quantization="int4")
    assert not (tmp_path / "x").exists()
    assert list(tmp_path.iterdir()) == []  # no scratch folder left either


def test_exporting_leaves_the_model_as_it_was(ours, exports):
    before = {name: p.clone() for name, p in ours.model.state_dict().items()}
    export_ct2(ours.model, ours.bpe, ours.config, exports["int8"], quantization="int8")
    after = ours.model.state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)


def test_a_folder_is_replaced_only_when_an_export_wrote_it(ours, exports, tmp_path):
    export_ct2(ours.model, ours.bpe, ours.config, exports["float32"])  # its own: replaced
    assert json.loads((exports["float32"] / "export.json").read_text())["format"] == (
        ct2_export.FORMAT
    )
    (tmp_path / "model.bin").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match=r"holds model\.bin, not a CTranslate2 export's"):
        export_ct2(ours.model, ours.bpe, ours.config, tmp_path)
    assert (tmp_path / "model.bin").read_bytes() == b"mine"
    assert [p.name for p in tmp_path.iterdir()] == ["model.bin"]


def test_the_translator_refuses_what_it_cannot_do(exports, tmp_path):
    with pytest.raises(ValueError, match="not a CTranslate2 export"):
        CT2Translator.open(tmp_path)
    engine = CT2Translator.open(exports["float32"])
    with pytest.raises(ValueError, match="keep_greedy"):
        engine.translate(["Ein Hund."], keep_greedy=True)
    with pytest.raises(ValueError, match="beam_size must be a positive integer"):
        engine.translate(["Ein Hund."], beam_size=0)
    with pytest.raises(TypeError, match="expected a list of sentences"):
        engine.translate("Ein Hund.")


def test_the_command_line_translates_with_an_export(exports, capsys):
    from annotated_transformer import cli

    status = cli.main(["translate", "--checkpoint", str(exports["float32"]),
                       "Ein Hund rennt durch den Schnee."])  # fmt: skip
    assert status == 0
    assert capsys.readouterr().out == "A dog runs through the snow.\n"


# --- Hugging Face transformers -----------------------------------------------------------------

LOAD_WITH_TRANSFORMERS_ONLY = """
import sys, torch
from transformers import AutoTokenizer, MarianMTModel
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
model = MarianMTModel.from_pretrained(sys.argv[1]).eval()
batch = tokenizer(["Ein Hund rennt durch den Schnee."], return_tensors="pt")
with torch.no_grad():
    made = model.generate(**batch)
print(tokenizer.batch_decode(made, skip_special_tokens=True)[0])
assert not any(name.startswith("annotated_transformer") for name in sys.modules)
"""


@pytest.fixture(scope="module")
def hf_folder(ours: Translator, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from annotated_transformer.exports.hf import export_hf
    from annotated_transformer.pretrained import shipped_folder

    folder = tmp_path_factory.mktemp("hf") / "shipped"
    card = (shipped_folder() / "MODEL_CARD.md").read_text(encoding="utf-8")
    export_hf(ours.model, ours.bpe, folder, card=card, origin=ours.origin)
    return folder


def test_transformers_alone_reads_the_export(hf_folder):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LOAD_WITH_TRANSFORMERS_ONLY, str(hf_folder)],
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "A dog runs through the snow."


def test_marian_greedy_equals_ours_on_test2016(ours, hf_folder, test2016):
    from transformers import AutoTokenizer, MarianMTModel

    from annotated_transformer.exports.hf import GREEDY_EQUAL

    german, _ = test2016
    tokenizer = AutoTokenizer.from_pretrained(hf_folder)
    marian = MarianMTModel.from_pretrained(hf_folder).eval()
    start, theirs = time.perf_counter(), []
    with torch.no_grad():
        for i in range(0, len(german), 50):
            batch = tokenizer(german[i : i + 50], return_tensors="pt", padding=True)
            theirs += tokenizer.batch_decode(marian.generate(**batch, num_beams=1),
                                             skip_special_tokens=True)  # fmt: skip
    speed = len(german) / (time.perf_counter() - start)
    mine, mine_speed = timed(ours, german, 1, 0.0)
    pairs = enumerate(zip(mine, theirs, strict=True))
    differ = [(german[i], a, b) for i, (a, b) in pairs if a != b]
    print(f"Marian greedy {speed:.0f} sent/s, ours {mine_speed:.0f} sent/s; differ on "
          f"{len(differ)}: {differ}")  # fmt: skip
    assert len(german) - len(differ) == GREEDY_EQUAL  # what the model card says
    assert GREEDY_EQUAL >= 995
    for _, mine_text, their_text in differ:  # our limit (source + 50 tokens) cut a repetition
        assert their_text.startswith(mine_text) and len(their_text) > len(mine_text)


@pytest.mark.parametrize(("options", "why"), [
    ({"norm_first": True}, "it is pre-norm"),
    ({"positional": "learned"}, "its positions are learned"),
    ({"share_embeddings": False}, "its embeddings are not tied"),
])  # fmt: skip
def test_what_marian_cannot_hold_is_refused_before_writing(ours, tmp_path, options, why):
    pytest.importorskip("transformers")
    from annotated_transformer.exports.hf import export_hf

    config = ModelConfig(src_vocab=len(ours.bpe), tgt_vocab=len(ours.bpe), N=1, d_model=32,
                         d_ff=64, h=4, **options)  # fmt: skip
    with pytest.raises(ValueError, match=f"a MarianMTModel cannot hold this model: {why}"):
        export_hf(build_model(config), ours.bpe, tmp_path / "hf")
    assert list(tmp_path.iterdir()) == []


def test_the_hub_card_carries_the_scores_with_their_signatures(hf_folder):
    import yaml

    card = (hf_folder / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(card.split("---")[1])
    assert front["language"] == ["de", "en"] and front["license"] == "mit"
    results = {r["dataset"]["split"]: r["metrics"] for r in front["model-index"][0]["results"]}
    assert list(results) == ["val", "test2016", "test2017", "test2018", "mscoco"]
    assert results["test2016"][0]["value"] == 38.96  # the shipped card's beam-4 BLEU
    assert results["test2016"][0]["args"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "# Model card" in card  # the shipped card follows the front matter


def test_the_exported_tokenizer_normalizes_as_ours(ours):
    pytest.importorskip("transformers")
    from annotated_transformer.exports.hf import hf_tokenizer

    tokenizer = hf_tokenizer(ours.bpe, ours.config.model.max_len)
    plain = "Ein Hund rennt durch den Schnee."
    variants = [plain, "\ufeff" + plain, plain.replace(" ", "\xa0"), plain.replace(" ", "\t\t"),
                f"  {plain} \u3000", plain.replace("Hund", "Hu\u200bnd"),
                "Scho\u0308ne Gru\u0308ße u\u0308ber Ba\u0308ume."]  # fmt: skip
    for text in variants:
        assert tokenizer(text).input_ids == ours.encode([text])[0].tolist(), repr(text)
    assert tokenizer(variants[1]).input_ids == tokenizer(plain).input_ids


@pytest.mark.parametrize(("command", "package"), [
    ("export-ct2", "ctranslate2"), ("export-hf", "transformers"),
])  # fmt: skip
def test_an_export_without_its_package_says_what_to_install(monkeypatch, capsys, tmp_path,
                                                             command, package):  # fmt: skip
    from annotated_transformer import cli

    real = cli.importlib.util.find_spec
    monkeypatch.setattr(cli.importlib.util, "find_spec",
                        lambda name: None if name == package else real(name))  # fmt: skip
    status = cli.main([command, "--out", str(tmp_path / "out")])
    error = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(error) == 1
    assert (
        f"{command} needs the package {package}: pip install 'annotated-transformer[serve]'"
        in (error[0])
    )
    assert not (tmp_path / "out").exists()
