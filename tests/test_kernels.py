"""Issue 61: the attention at one query, compiled ahead of time (`decoding.kernels`).

The kernels are built once for this module, into a temporary folder (about 13 s), never into the
user's cache; every test that needs them shares that build. Without a C++ compiler the build
fails with one line, and decoding runs PyTorch's attention.
"""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from decoding_exactness import SEARCHES

from annotated_transformer import cli
from annotated_transformer.data.multi30k import read_split
from annotated_transformer.decoding import kernels
from annotated_transformer.decoding.batched import translate_ids
from annotated_transformer.decoding.cache import fused_attention
from annotated_transformer.model.attention import attention
from annotated_transformer.translator import Translator
from annotated_transformer.util.errors import ModelFolderError

SHAPE = (8, 32, 32)  # (h, d_k, d_v) of the shipped model
EXACTNESS = Path(__file__).resolve().parent.parent / "results" / "decoding-exactness-cpu.json"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    """A kernels folder with the shipped model's kernels built in it, for every test here."""
    from torch._inductor import cpp_builder

    try:
        cpp_builder.get_cpp_compiler()
    except Exception as error:  # (a machine without one: the fallback is tested without it)
        pytest.skip(f"no C++ compiler to build the kernels with ({type(error).__name__})")
    folder = tmp_path_factory.mktemp("kernels")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(kernels.KERNELS_ENV, str(folder))
        kernels.build_kernels(*SHAPE)
    return str(folder)


@pytest.fixture(scope="module")
def shipped() -> Translator:
    return Translator.pretrained(device="cpu")


def test_few_queries_attention_is_attention():
    torch.manual_seed(0)
    for B, w, T, masked in ((5, 1, 7, False), (6, 4, 9, True), (1, 1, 1, False), (3, 2, 1, True)):
        q, k, v = torch.randn(B, 8, w, 32), torch.randn(B, 8, T, 32), torch.randn(B, 8, T, 16)
        lengths = torch.randint(1, T + 1, (B, 1, 1, 1))
        mask = torch.arange(T).view(1, 1, 1, T) < lengths if masked else None  # (B, 1, 1, T)
        expected = attention(q, k, v, mask)[0]  # the reference, (B, 8, w, 16)
        assert torch.allclose(kernels.few_queries_attention(q, k, v, mask), expected, atol=1e-6)


def test_the_kernels_compute_attention_and_hand_on_what_they_were_not_built_for(root, monkeypatch):
    monkeypatch.setenv(kernels.KERNELS_ENV, root)
    built = kernels.load_kernels(*SHAPE)
    torch.manual_seed(1)
    for B, w, T, masked in ((333, 1, 1, False), (82, 1, 20, False), (40, 4, 17, True),
                            (7, 1, 30, True), (2, 4, 1, True)):  # fmt: skip
        q, k, v = torch.randn(B, 8, w, 32), torch.randn(B, 8, T, 32), torch.randn(B, 8, T, 32)
        mask = torch.arange(T).view(1, 1, 1, T) < torch.randint(1, T + 1, (B, 1, 1, 1))
        mask = mask if masked else None
        found, weights = built(q, k, v, mask)
        assert weights is None and found.shape == (B, 8, w, 32)
        assert torch.allclose(found, fused_attention(q, k, v, mask)[0], atol=1e-5)
    rows = torch.randn(5, 1, 8, 32).transpose(1, 2)  # (5, 8, 1, 32), not contiguous
    k, v = torch.randn(5, 8, 3, 32), torch.randn(5, 8, 3, 32)
    assert torch.allclose(built(rows, k, v)[0], fused_attention(rows, k, v)[0], atol=1e-5)
    for q, key, value in (  # shapes and types they were not built for: PyTorch's attention, exactly
        (torch.randn(2, 8, 2, 32), k[:2], v[:2]),  # two queries and no mask
        (torch.randn(2, 4, 1, 32), torch.randn(2, 4, 3, 32), torch.randn(2, 4, 3, 32)),  # h = 4
        (rows.double(), k.double(), v.double()),  # float64
    ):
        assert torch.equal(built(q, key, value)[0], fused_attention(q, key, value)[0])


def test_translations_with_the_kernels(root, shipped, data_dir, monkeypatch):
    """With the kernels, test2016 keeps the agreement with the float64 translations that the
    exactness record holds (less 0.5 %), and its first 200 sentences translate as PyTorch's
    attention translates them, greedy and beam 4."""
    monkeypatch.setenv(kernels.KERNELS_ENV, root)
    kept = json.loads(EXACTNESS.read_text(encoding="utf-8"))["results"]
    german = [de for de, _ in read_split("test2016", data_dir)]
    sources = shipped.encode(german)
    built = kernels.load_kernels(*SHAPE)
    for search, beam in SEARCHES.items():
        settings = {"max_len": shipped.config.model.max_len, "beam_size": beam}
        found = translate_ids(shipped.model, sources, shipped.tgt_vocab, attend=built, **settings)
        references = kept["test2016"][search]["references"]
        agree = sum(" ".join(tokens) == ref for tokens, ref in zip(found, references, strict=True))
        assert agree >= (kept["test2016"][search]["share"] - 0.005) * 1000, (search, agree)
        plain = translate_ids(shipped.model, sources[:200], shipped.tgt_vocab, **settings)
        assert found[:200] == plain


def test_a_translator_runs_them_where_built_and_says_so(root, shipped, monkeypatch):
    """A Translator chooses at its first translation (reading $ANNOTATED_TRANSFORMER_KERNELS
    then), and keeps its choice."""
    sentences = ["Ein Hund rennt durch den Schnee.", "Zwei Männer spielen Fußball."]
    monkeypatch.setenv(kernels.KERNELS_ENV, root)
    built = Translator.pretrained(device="cpu")
    with_kernels = built.translate(sentences, beam_size=1)
    int8 = built.quantized()  # float32 activations: the same kernels
    assert isinstance(int8.attention(int8.model), kernels.AttentionKernels)
    monkeypatch.setenv(kernels.KERNELS_ENV, "off")
    plain = Translator.pretrained(device="cpu")
    assert with_kernels == plain.translate(sentences, beam_size=1)
    assert isinstance(built.attention(built.model), kernels.AttentionKernels)  # (kept)
    assert built.attention.why.startswith(f"attention: compiled kernels from {root}")
    assert plain.attention(plain.model) is fused_attention
    assert plain.attention.why == f"attention: PyTorch's ({kernels.KERNELS_ENV}=off)"


def test_a_benchmark_records_the_kernels_build_from_their_record(root, shipped, monkeypatch):
    """A benchmark that finds the kernels built records the seconds their build took (their own
    record's), and that an earlier run built them; with `use=False`, PyTorch's attention."""
    from common import attention_kernels

    monkeypatch.setenv(kernels.KERNELS_ENV, root)
    attend, about = attention_kernels(shipped)
    record = json.loads((kernels.kernel_folder(*SHAPE) / kernels.RECORD).read_text())
    assert isinstance(attend, kernels.AttentionKernels)
    assert about["built_seconds"] == record["build_seconds"] > 0 and about["built"] == "earlier"
    assert about["folder"] == str(kernels.kernel_folder(*SHAPE)) and about["load_ms"] >= 0
    attend, about = attention_kernels(shipped, use=False)  # (turns them off for the process)
    assert attend is None and about == {"attention": "PyTorch's (scaled_dot_product_attention)"}


def test_kernels_that_do_not_match_their_record_are_not_run(root, tmp_path, monkeypatch):
    """A changed kernel file: `load_kernels` refuses it, naming the file; a Translator decodes
    with PyTorch's attention and says why; `ensure_kernels` (`annotated-transformer kernels`) builds
    them again (here the build copies the module's: a real one takes seconds)."""
    monkeypatch.setenv(kernels.KERNELS_ENV, str(tmp_path))
    folder = kernels.kernel_folder(*SHAPE)
    shutil.copytree(Path(root) / folder.name, folder)
    with open(folder / "self.so", "r+b") as library:
        library.seek(1000)
        library.write(b"\0\0\0\0")
    with pytest.raises(ModelFolderError, match=r"self\.so"):
        kernels.load_kernels(*SHAPE)
    translator = Translator.pretrained(device="cpu")
    assert translator.translate(["Ein Hund rennt."], beam_size=1) == ["A dog runs."]
    assert "the compiled kernels do not load" in translator.attention.why
    assert "self.so" in translator.attention.why
    built = []  # `ensure_kernels` (what `kernels` runs) builds them again: here a copy of root's

    def build(h, d_k, d_v, into):
        built.append(into)
        shutil.rmtree(into, ignore_errors=True)
        shutil.copytree(Path(root) / folder.name, into)

    monkeypatch.setattr(kernels, "build_kernels", build)
    loaded, why = kernels.ensure_kernels(*SHAPE)
    assert built == [folder] and why.startswith("those there do not load") and "self.so" in why
    assert isinstance(loaded, kernels.AttentionKernels) and loaded.folder == folder
    assert kernels.ensure_kernels(*SHAPE)[1] is None and len(built) == 1  # (there now: loaded)
    assert kernels.ensure_kernels(*SHAPE, rebuild=True)[1] == "asked to build them again"
    shutil.rmtree(folder)
    assert kernels.ensure_kernels(*SHAPE)[1] == "none were built" and len(built) == 3


def test_a_build_replaces_no_file_it_did_not_write(tmp_path, monkeypatch):
    monkeypatch.setenv(kernels.KERNELS_ENV, str(tmp_path))
    folder = kernels.kernel_folder(*SHAPE)
    folder.mkdir()
    (folder / "self.so").write_bytes(b"another program's library")
    with pytest.raises(FileExistsError, match="not attention kernels"):
        kernels.build_kernels(*SHAPE)  # (refused before it compiles anything)
    assert (folder / "self.so").read_bytes() == b"another program's library"
    monkeypatch.setenv(kernels.KERNELS_ENV, "off")
    with pytest.raises(kernels.KernelsUnavailable, match="turned off"):
        kernels.build_kernels(*SHAPE)


def test_the_command_line_builds_once_and_translate_says_which_attention(root, monkeypatch, capsys):
    monkeypatch.setenv(kernels.KERNELS_ENV, root)
    assert cli.main(["kernels"]) == 0
    assert capsys.readouterr().out == f"already built: {kernels.kernel_folder(*SHAPE)}\n"
    assert cli.main(["translate", "--verbose", "--beam", "1", "Ein Hund rennt."]) == 0
    out, err = capsys.readouterr()
    assert out == "A dog runs.\n"
    folder = kernels.kernel_folder(*SHAPE)
    assert err == f"annotated-transformer: attention: compiled kernels from {folder}\n"
    monkeypatch.setenv(kernels.KERNELS_ENV, "off")
    assert cli.main(["translate", "--verbose", "--beam", "1", "Ein Hund rennt."]) == 0
    assert capsys.readouterr().err == (
        f"annotated-transformer: attention: PyTorch's ({kernels.KERNELS_ENV}=off)\n"
    )


def test_the_package_imports_no_compiler():
    """The compiler (Inductor) is imported to build kernels only; loading them needs none."""
    code = ("import sys, annotated_transformer.translator, annotated_transformer.decoding.kernels\n"
            "print('torch._inductor' in sys.modules)")  # fmt: skip
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout == "False\n"
