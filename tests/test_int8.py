"""Int8 of our own (issue 50): `Translator.quantized`, PyTorch's dynamic quantization of the
linear layers, behind `translate --quantize int8` without CTranslate2; exports refuse it; the
BLEU of every split is recorded beside float32's (`results/release/*-beam4-int8.json`)."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import pytest
from torch import nn
from torch.ao.nn.quantized import dynamic

from annotated_transformer import cli
from annotated_transformer.data.multi30k import read_split
from annotated_transformer.translator import Translator

ROOT = Path(__file__).resolve().parent.parent
RELEASE = ROOT / "results" / "release"
SPLITS = ("val", "test2016", "test2017", "test2018", "mscoco")


@pytest.fixture(scope="module")
def shipped() -> Translator:
    return Translator.pretrained(device="cpu")


@pytest.fixture(scope="module")
def int8(shipped: Translator) -> Translator:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing of torch.ao's reaches the user's screen
        return shipped.quantized()


def test_every_linear_layer_is_int8_and_the_original_is_untouched(shipped, int8) -> None:
    linears = [m for m in shipped.model.modules() if isinstance(m, nn.Linear)]
    quantized = [m for m in int8.model.modules() if isinstance(m, dynamic.Linear)]
    assert linears and len(quantized) == len(linears)
    assert not any(isinstance(m, nn.Linear) for m in int8.model.modules())
    assert all(type(m) is nn.Linear for m in linears)  # a copy was quantized, not this model
    assert int8.origin["quantized"] == "int8" and "quantized" not in shipped.origin


def test_int8_translates_as_float32_mostly(shipped, int8) -> None:
    # Which sentences change depends on the batches (an input's int8 scale is read from its
    # whole batch, padding included): on 200 sentences, 162 to 170 were the same here.
    german = [de for de, en in read_split("test2016") if de.strip()][:200]
    ours, theirs = shipped.translate(german, beam_size=1), int8.translate(german, beam_size=1)
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    assert same >= 150, f"int8 equals float32 on {same} of 200 sentences"
    assert int8.translate(german[:4], beam_size=4)  # every search runs on it


@pytest.mark.parametrize("dtype", ["int4", "float16"])
def test_other_types_are_refused(shipped, dtype) -> None:
    with pytest.raises(ValueError, match=f"expected dtype 'int8', got '{dtype}'"):
        shipped.quantized(dtype)


def test_every_export_refuses_a_quantized_model(int8, tmp_path) -> None:
    from annotated_transformer.exports.ct2 import export_ct2
    from annotated_transformer.exports.hf import export_hf
    from annotated_transformer.exports.onnx import export_onnx

    for command, export in (
        ("export-ct2", lambda out: export_ct2(int8.model, int8.bpe, int8.config, out)),
        ("export-hf", lambda out: export_hf(int8.model, int8.bpe, out)),
        ("export-onnx", lambda out: export_onnx(int8.model, int8.bpe, out)),
    ):
        with pytest.raises(ValueError, match=f"^{command}: this model is quantized"):
            export(tmp_path / command)
        assert not (tmp_path / command).exists()  # refused before anything is written


def test_the_command_line_uses_ours_without_ctranslate2(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # as if it were not installed
    assert cli.main(["translate", "--quantize", "int8", "Ein Hund rennt durch den Schnee."]) == 0
    out, err = capsys.readouterr()
    assert out.strip() and err == ""


def test_the_records_hold_int8_within_0_3_bleu_of_float32_on_test2016() -> None:
    scores = {}
    for split in SPLITS:
        for way in ("beam4", "beam4-int8"):
            record = json.loads((RELEASE / f"{split}-shipped-{way}.json").read_text())
            assert record["split"] == split and record["sentences"] > 0
            scores[split, way] = record["sacrebleu"]["score"]
        int8_record = json.loads((RELEASE / f"{split}-shipped-beam4-int8.json").read_text())
        assert int8_record["decoding"]["quantize"] == "int8"
        assert "--quantize int8" in int8_record["command"]
    assert abs(scores["test2016", "beam4-int8"] - scores["test2016", "beam4"]) <= 0.3
