"""Issue 32: text that looks the same is translated the same.

Every sentence is `normalize`d (annotated_transformer.data.vocab) before it is split, by the word
tokenizer, the BPE tokenizer, the `Translator` and the command line: Unicode NFC, byte-order marks
and zero-width characters removed, every Unicode space read as one space, the ends trimmed; CR,
CRLF and LF all end a line on standard input. A sentence empty after that is refused by every
model. BPE tokenizer files saved before (version 1) keep loading. The page's tokenizer is compared
with Python's in tests/test_tryit.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from annotated_transformer.data.bpe import BPETokenizer
from annotated_transformer.data.vocab import SPACES, ZERO_WIDTH, Tokenizer, normalize
from annotated_transformer.pretrained import load_pretrained
from annotated_transformer.translator import Translator

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "checkpoint-0.1.0"
SHIPPED_TOKENIZER = ROOT / "src" / "annotated_transformer" / "pretrained_model" / "bpe.json"
PLAIN = "Ein Hund rennt durch den Schnee."
VARIANTS = [
    "\ufeffEin Hund rennt durch den Schnee.",  # a byte-order mark (a file saved by Notepad)
    "Ein\u00a0Hund\u00a0rennt durch den\u00a0Schnee.",  # non-breaking spaces
    "Ein\u2009Hund\u3000rennt\u202fdurch den Schnee.",  # thin, ideographic, narrow spaces
    "\tEin Hund\trennt durch den Schnee.\t",  # tabs
    "Ein  Hund rennt   durch den Schnee.  ",  # double and trailing spaces
    "Ein Hund rennt durch den Schnee.\r\n",  # a Windows line end
    "Ein Hu\u200bnd re\u200cnnt\u200d durch\u2060 den Schnee.",  # zero-width characters
]
UMLAUTS = "Zwei Mädchen laufen über die Brücke."
NFD = unicodedata.normalize("NFD", UMLAUTS)  # "a" + U+0308, ...: looks the same
EMPTY = ["", "   ", "\u200b", "\ufeff", "\u00a0\t\u3000", "\ufeff\u200b \u2060\r\n"]


def test_normalize_gives_the_plain_text() -> None:
    assert SPACES == "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())
    assert NFD != UMLAUTS and normalize(NFD) == UMLAUTS
    assert [normalize(v) for v in VARIANTS] == [PLAIN] * len(VARIANTS)
    assert [normalize(e) for e in EMPTY] == [""] * len(EMPTY)
    for text in [*VARIANTS, NFD, *EMPTY, f"a{SPACES}b{ZERO_WIDTH}c", "u\u200b\u0308"]:
        assert normalize(normalize(text)) == normalize(text)  # idempotent
    assert normalize("u\u200b\u0308 x") == "ü x"  # removed first, then composed
    with pytest.raises(TypeError, match="expected a sentence as a string, got bytes"):
        normalize(PLAIN.encode())


def test_both_tokenizers_split_the_variants_as_the_plain_text() -> None:
    bpe, words = load_pretrained().bpe, Tokenizer("de")
    for tokenizer in (bpe, words):
        assert tokenizer.pipe(VARIANTS) == [tokenizer(PLAIN)] * len(VARIANTS)
        assert tokenizer(NFD) == tokenizer(UMLAUTS)
        assert tokenizer.pipe(EMPTY) == [[]] * len(EMPTY)
    # the round trip gives the normalized text
    assert [bpe.detokenize(p) for p in bpe.pipe([*VARIANTS, NFD])] == [PLAIN] * 7 + [UMLAUTS]


@pytest.fixture(scope="module")
def shipped() -> Translator:
    return Translator.pretrained(device="cpu")


def test_the_shipped_model_translates_the_variants_as_the_plain_sentence(shipped) -> None:
    plain, umlauts, *rest = shipped.translate([PLAIN, UMLAUTS, *VARIANTS, NFD])
    assert plain.startswith("A dog") and "snow" in plain
    assert rest == [plain] * len(VARIANTS) + [umlauts]
    assert shipped.unknown_words(VARIANTS[0]) == []


def run_cli(*argv: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "annotated_transformer", *argv],
        input=stdin, capture_output=True, timeout=300, cwd=ROOT,
    )  # fmt: skip


def test_the_command_line_translates_the_variants_as_the_plain_sentence(shipped) -> None:
    plain = shipped.translate([PLAIN])[0]
    # CR, CRLF and LF end lines; a line of invisible characters stays an empty output line.
    stdin = ("\ufeff" + PLAIN + "\r\n" + VARIANTS[1] + "\r" + VARIANTS[6] + "\n\u200b\r\n"
             + VARIANTS[4] + "\r\n").encode()  # fmt: skip
    done = run_cli("translate", stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split("\n") == [plain, plain, plain, "", plain, ""]
    done = run_cli("translate", *VARIANTS[:4], NFD)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split("\n")[:4] == [plain] * 4


def test_a_tokenizer_file_of_version_1_loads_and_reads_as_before(tmp_path: Path) -> None:
    saved = json.loads(SHIPPED_TOKENIZER.read_text(encoding="utf-8"))
    assert saved["version"] == 1  # the shipped file, written before normalization
    old = BPETokenizer.load(SHIPPED_TOKENIZER)  # its pipeline set on loading, as it was
    assert old._tokenizer.to_str() == saved["tokenizer"]
    assert old.to_json() == {**saved, "version": 2}
    old.save(tmp_path / "bpe.json")  # saved again: version 2, the same tokenizer
    new = BPETokenizer.load(tmp_path / "bpe.json")
    assert json.loads((tmp_path / "bpe.json").read_text())["version"] == 2 and new == old
    texts = [PLAIN, UMLAUTS, "Im Jahr 2017 spielten 11 Kinder 🐕.", "<s> </s>", "a▁b"]
    assert new.pipe(texts) == old.pipe(texts) == [old(text) for text in texts]
    assert old("Ein Hund") == ["▁Ein", "▁Hund"]
    # A version 2 file is read as saved: its pipeline is not rebuilt on loading.
    data = json.loads((tmp_path / "bpe.json").read_text())
    tokenizer = json.loads(data["tokenizer"])
    tokenizer["normalizer"]["normalizers"] = tokenizer["normalizer"]["normalizers"][1:]  # no ▁
    (tmp_path / "edited.json").write_text(json.dumps({**data, "tokenizer": json.dumps(tokenizer)}))
    assert BPETokenizer.load(tmp_path / "edited.json")("Ein Hund") == ["E", "in", "▁Hund"]
    (tmp_path / "future.json").write_text(json.dumps({**data, "version": 3}))
    with pytest.raises(ValueError, match=r"future\.json: unknown BPE tokenizer version 3"):
        BPETokenizer.load(tmp_path / "future.json")


MODELS = {"shipped": None, "word": FIXTURES / "word", "bpe": FIXTURES / "bpe"}


@pytest.mark.parametrize("kind", MODELS)
def test_a_sentence_empty_after_normalization_is_refused_by_every_model(kind, shipped) -> None:
    translator = (
        shipped if MODELS[kind] is None else Translator.from_checkpoint(MODELS[kind], "cpu")
    )
    for text in EMPTY:
        with pytest.raises(ValueError, match="sentence 1 is empty: nothing to translate"):
            translator.translate([text])
    with pytest.raises(ValueError, match="sentence 2 is empty: nothing to translate"):
        translator.translate([PLAIN, "\ufeff\u200b"])
    checkpoint = () if MODELS[kind] is None else ("--checkpoint", str(MODELS[kind]))
    for argv, stdin in (
        ((*checkpoint, *EMPTY[1:]), b""),
        (checkpoint, "\r\n".join(EMPTY).encode()),
    ):
        done = run_cli("translate", *argv, stdin=stdin)
        assert done.returncode == 2 and done.stdout == b""
        assert done.stderr.decode().splitlines() == [
            "annotated-transformer: error: nothing to translate: give sentences as arguments, "
            "or one per line on standard input"
        ]
