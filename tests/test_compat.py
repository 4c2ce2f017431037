"""Users of 0.1.0 are not stranded: run folders written by version 0.1.0 still load and translate.

`tests/fixtures/checkpoint-0.1.0/{word,bpe}` were written by the 0.1.0 code (commit bddc6b7):
`annotated-transformer train --preset tiny --max-steps 2 --set N=1 --set d_model=16 --set h=2
--set d_ff=32 --set min_freq=100` (and `--tokenizer bpe --set vocab_size=320`), then translated by
that code's `Translator` into `translations-0.1.0.json`. The model is two steps old, so the
translations are nonsense; they are the test because they must not change.
"""

import json
from pathlib import Path

import pytest

from annotated_transformer.translator import Translator

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "checkpoint-0.1.0"


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_a_0_1_0_run_folder_translates_as_it_did(kind: str) -> None:
    expected = json.loads((FIXTURES / kind / "translations-0.1.0.json").read_text())
    translator = Translator.from_checkpoint(FIXTURES / kind)
    sentences = expected["sentences"]
    assert translator.translate(sentences, keep_greedy=True) == expected["beam4"]  # 0.1.0's search
    assert translator.translate(sentences, beam_size=1) == expected["greedy"]


@pytest.mark.parametrize("kind", ["word", "bpe"])
def test_a_0_1_0_checkpoint_file_translates_as_it_did(kind: str) -> None:
    expected = json.loads((FIXTURES / kind / "translations-0.1.0.json").read_text())
    translator = Translator.from_checkpoint(FIXTURES / kind / "checkpoint-00000002.pt")
    assert translator.translate(expected["sentences"], keep_greedy=True) == expected["beam4"]
