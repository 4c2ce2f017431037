"""Issue 44, item 1: a folder of several files is the old export, the new one, or refused.

`util.atomic.write_files` renames the record last and `write_export` puts the SHA-256 of every
file in it; each reader checks them (`check_export`). Here an export is stopped after each of
its renames (an injected stop, no sleeping), two writers race into one folder (the lock held by
the test, or a second export started while the first is stopped inside `write_files`), and
plain CTranslate2 reads an export as our `CT2Translator` does.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from annotated_transformer.model.transformer import ModelConfig, build_model
from annotated_transformer.pretrained import load_pretrained
from annotated_transformer.util import atomic
from annotated_transformer.util.atomic import FolderInUse, lock_path

fcntl = pytest.importorskip("fcntl")
pytest.importorskip("ctranslate2")
from annotated_transformer.exports import ct2 as ct2_export  # noqa: E402
from annotated_transformer.exports import hf as hf_export  # noqa: E402
from annotated_transformer.exports import onnx as onnx_export  # noqa: E402

MODULES = {"ct2": ct2_export, "onnx": onnx_export, "hf": hf_export}


class Stop(BaseException):
    """The process ends here (as when it is killed): nothing after it runs."""


@pytest.fixture(scope="module")
def shipped():
    return load_pretrained()


@pytest.fixture(scope="module")
def models(shipped) -> tuple[torch.nn.Module, torch.nn.Module]:
    """Two small untrained models over the shipped vocabulary: the old export's and the new's."""
    n = len(shipped.bpe)
    config = ModelConfig(src_vocab=n, tgt_vocab=n, N=1, d_model=32, d_ff=64, h=4, dropout=0.0,
                         max_len=64, share_embeddings=True)  # fmt: skip
    made = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        made.append(build_model(config).eval())
    return made[0], made[1]


def export(kind: str, model: torch.nn.Module, shipped, folder: Path, tag: str) -> dict:
    """Export `model` as `kind` into `folder`, its origin saying `tag`."""
    origin = {"model": tag}
    if kind == "ct2":
        unsized = dataclasses.replace(model_config(model), src_vocab=None, tgt_vocab=None)
        config = dataclasses.replace(shipped.config, model=unsized)
        return ct2_export.export_ct2(model, shipped.bpe, config, folder, origin=origin)
    if kind == "onnx":
        return onnx_export.export_onnx(model, shipped.bpe, folder, origin=origin)
    return hf_export.export_hf(model, shipped.bpe, folder, origin=origin)


def model_config(model: torch.nn.Module) -> ModelConfig:
    n = model.src_embed[0].embedding.num_embeddings
    return ModelConfig(src_vocab=n, tgt_vocab=n, N=1, d_model=32, d_ff=64, h=4, dropout=0.0,
                       max_len=64, share_embeddings=True)  # fmt: skip


def files_of(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


@contextmanager
def stopped_after(monkeypatch: pytest.MonkeyPatch, renames: int) -> Iterator[list[str]]:
    """The process stops right after its `renames`-th rename (`os.replace` in util.atomic)."""
    done: list[str] = []
    real = os.replace

    def replace(source, target):
        if len(done) == renames:
            raise Stop
        real(source, target)
        done.append(Path(target).name)

    with monkeypatch.context() as patch:
        patch.setattr(atomic.os, "replace", replace)
        yield done


@pytest.fixture(scope="module")
def both_exports(shipped, models, tmp_path_factory) -> dict[str, tuple[Path, Path | None]]:
    """Each kind of export of the old model, and of the new one (not ONNX: slow to convert)."""
    root = tmp_path_factory.mktemp("exports")
    made = {}
    for kind in MODULES:
        old, new = root / f"{kind}-old", root / f"{kind}-new"
        export(kind, models[0], shipped, old, "old")
        if kind != "onnx":
            export(kind, models[1], shipped, new, "new")
        made[kind] = old, new if kind != "onnx" else None
    return made


def test_the_record_is_renamed_last(monkeypatch, tmp_path):
    with stopped_after(monkeypatch, 99) as done:
        atomic.write_export(tmp_path / "x", {"a": b"1", "b": b"2"}, "record.json", {"format": "f"})
    assert done == ["a", "b", "record.json"]
    assert not lock_path(tmp_path / "x").exists()


@pytest.mark.parametrize("kind", list(MODULES))
def test_an_export_stopped_after_each_rename_is_the_old_the_new_or_refused(
    kind, shipped, models, both_exports, monkeypatch, tmp_path
):
    module, old, n = MODULES[kind], both_exports[kind][0], len(MODULES[kind].FILES)
    before, records = files_of(old), {}
    monkeypatch.setattr(module, "write_export", lambda f, files, record, about: records.update(
        files=files, about=about) or atomic.write_export(f, files, record, about))  # fmt: skip
    for renames in (1, 0, *range(2, n + 1)):
        folder = tmp_path / f"stopped-after-{renames}"
        shutil.copytree(old, folder)
        if renames == 1:  # the export itself, stopped after its first rename
            with stopped_after(monkeypatch, renames) as done, pytest.raises(Stop):
                export(kind, models[1], shipped, folder, "new")
        else:  # what it wrote, written again (converting the model again would only be slower)
            with stopped_after(monkeypatch, renames) as done:
                try:
                    atomic.write_export(folder, records["files"], module.ABOUT, records["about"])
                except Stop:
                    pass
        assert done == [*records["files"], module.ABOUT][:renames]  # in order, the record last
        for path in folder.glob(".*.tmp"):  # what a killed process leaves (the next removes it)
            path.unlink()
        try:
            about = module.check_export(folder)
        except (ValueError, FileNotFoundError) as error:
            assert 0 < renames < n and str(error).startswith(str(folder)), error
            assert "\n" not in str(error) and "differs from" in str(error)
            continue
        if renames < n:
            assert files_of(folder) == before  # the old export (its renamed files the same bytes)
        else:  # the new one, whole
            assert about["origin"] == {"model": "new"}
            assert {name: (folder / name).read_bytes() for name in records["files"]} == records[
                "files"
            ]
    if kind == "ct2":  # the new one loads and translates as the new model
        assert ct2_export.CT2Translator.open(folder).origin["model"] == "new"


def test_a_ct2_export_stopped_midway_is_refused_by_translate(both_exports, tmp_path, capsys):
    """The issue's case: the new model.bin beside the old record; translate exited 0 with
    garbage. Now one line naming the file."""
    from annotated_transformer import cli

    old, new = both_exports["ct2"]
    folder = tmp_path / "ct2"
    shutil.copytree(old, folder)
    shutil.copyfile(new / "model.bin", folder / "model.bin")
    assert cli.main(["translate", "--checkpoint", str(folder), "Ein Hund."]) == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and f"{folder / 'model.bin'}: SHA-256" in error[0], error
    assert "differs from export.json" in error[0]


def test_a_ct2_export_whose_bpe_json_is_another_models_is_refused(shipped, both_exports,
                                                                  tmp_path):  # fmt: skip
    old, _ = both_exports["ct2"]
    folder = tmp_path / "ct2"
    shutil.copytree(old, folder)
    from annotated_transformer.data.bpe import BPETokenizer

    other = BPETokenizer.train(["ein Hund", "a dog"] * 20, vocab_size=300, min_frequency=1)
    other.save(folder / "bpe.json")
    with pytest.raises(ValueError, match=r"bpe\.json: SHA-256 .* differs from export\.json"):
        ct2_export.CT2Translator.open(folder)


def test_a_second_writer_is_refused_naming_the_first(shipped, models, tmp_path, monkeypatch):
    """Export B starts while export A is stopped inside write_files (after its first rename):
    B is refused with one line naming A's pid, and A then finishes whole."""
    folder, refused = tmp_path / "ct2", []
    real, done = os.replace, []

    def second_export() -> None:
        try:
            export("ct2", models[1], shipped, folder, "B")
        except FolderInUse as error:
            refused.append(str(error))

    def replace(source, target):
        real(source, target)
        done.append(target)
        if len(done) == 1:  # A holds the folder: B, in another thread, tries to write it
            other = threading.Thread(target=second_export)
            other.start()
            other.join()

    monkeypatch.setattr(atomic.os, "replace", replace)
    export("ct2", models[0], shipped, folder, "A")
    assert len(refused) == 1 and "\n" not in refused[0]
    assert f"{folder} is being written by another process (pid {os.getpid()}," in refused[0]
    assert ct2_export.CT2Translator.open(folder).origin["model"] == "A"
    assert not lock_path(folder).exists()


@contextmanager
def holding(folder: Path, pid: str) -> Iterator[None]:
    """Hold `folder`'s lock as another writer would, its lock file saying `pid`."""
    fd = os.open(lock_path(folder), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{pid}\n".encode())
        yield
    finally:
        os.close(fd)


@pytest.mark.parametrize("kind", list(MODULES))
def test_each_export_is_refused_while_another_writes_its_folder(kind, shipped, models, tmp_path):
    folder = tmp_path / kind
    with holding(folder, "4242"), pytest.raises(FolderInUse, match=r"\(pid 4242, which holds"):
        export(kind, models[0], shipped, folder, "A")
    assert not folder.exists()


def test_save_pretrained_is_refused_while_an_export_writes_the_folder(shipped, tmp_path,
                                                                      monkeypatch):  # fmt: skip
    """export-hf and save-pretrained racing into one folder: the second is refused."""
    from annotated_transformer import pretrained

    saved = type("Saved", (), {"bpe": shipped.bpe, "config": shipped.config})()
    monkeypatch.setattr(pretrained, "check_replaceable", lambda folder: None)
    with holding(tmp_path / "out", "977"), pytest.raises(FolderInUse, match=r"\(pid 977,"):
        pretrained.write_pretrained(saved, tmp_path / "out")


def test_a_lock_left_by_a_dead_process_is_no_refusal(shipped, models, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    folder = tmp_path / "ct2"
    lock_path(folder).write_text(f"{dead}\n")  # its flock ended with it
    export("ct2", models[0], shipped, folder, "A")
    assert ct2_export.CT2Translator.open(folder).origin["model"] == "A"
    assert not lock_path(folder).exists()


def test_an_old_export_without_sums_is_refused_saying_to_export_again(both_exports, tmp_path):
    import json

    old, _ = both_exports["onnx"]
    folder = tmp_path / "web"
    shutil.copytree(old, folder)
    about = json.loads((folder / "export.json").read_text())
    del about["sha256"]
    (folder / "export.json").write_text(json.dumps(about))
    with pytest.raises(ValueError, match=r"export\.json: no key 'sha256' .*export again"):
        onnx_export.OnnxTransformer(folder)


def test_the_transformers_export_is_checked_before_transformers_reads_it(both_exports, tmp_path):
    old, new = both_exports["hf"]
    folder = tmp_path / "hf"
    shutil.copytree(old, folder)
    assert hf_export.check_export(folder)["origin"] == {"model": "old"}
    shutil.copyfile(new / "model.safetensors", folder / "model.safetensors")
    with pytest.raises(ValueError, match=r"model\.safetensors: SHA-256 .* differs"):
        hf_export.check_export(folder)


# --- issue 60: no write through a link, none into the package, dead writers' leftovers removed ----


def dead_pid() -> int:
    """The pid of a process that has ended."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    return int(ended.stdout)


@pytest.mark.parametrize("kind", list(MODULES))
@pytest.mark.parametrize("target", ["victim.txt", "missing.txt"])
def test_a_link_planted_as_the_lock_is_refused_not_followed(kind, target, shipped, models,
                                                            tmp_path):  # fmt: skip
    """The issue's case: `ln -s victim.txt .L3.lock` had the exporter write its pid into
    victim.txt (and a link to a missing file made that file). Now one line naming the link."""
    (tmp_path / "victim.txt").write_text("precious\n")
    lock_path(tmp_path / "L3").symlink_to(target)
    with pytest.raises(OSError, match=rf"\.L3\.lock: a symbolic link \(to {target}\)") as caught:
        export(kind, models[0], shipped, tmp_path / "L3", "A")
    assert "\n" not in str(caught.value)
    assert (tmp_path / "victim.txt").read_text() == "precious\n"
    assert not (tmp_path / "missing.txt").exists() and not (tmp_path / "L3").exists()
    assert lock_path(tmp_path / "L3").is_symlink()  # the user's link is left as it was


def test_no_writer_writes_into_the_installed_package_unless_told(shipped, models):
    """`save-pretrained`/`export-*` --out the package's own folder replaced the shipped model;
    the Python API is refused the same way, and only `into_package=True` (the release recipe's
    --into-package) lets a writer in."""
    from annotated_transformer import pretrained
    from annotated_transformer.util.errors import InputError

    folder = pretrained.shipped_folder()
    before = {path.name: pretrained.sha256(path) for path in folder.iterdir()}
    saved = type("Saved", (), {"bpe": shipped.bpe, "config": shipped.config})()
    with pytest.raises(InputError, match=r"pretrained_model is inside the installed package"):
        pretrained.write_pretrained(saved, folder)
    for kind in MODULES:
        with pytest.raises(InputError, match=r"--into-package; into_package=True in Python"):
            export(kind, models[0], shipped, folder.parent / "web", "A")
    with pytest.raises(InputError, match="inside the installed package"):
        atomic.write_export(folder, {"a.bin": b"a"}, "record.json", {"format": "demo"})
    assert {path.name: pretrained.sha256(path) for path in folder.iterdir()} == before
    assert not (folder.parent / "web").exists() and not lock_path(folder).exists()
    atomic.check_outside_package(folder, into_package=True)  # what the release recipe passes


def test_the_next_writer_removes_what_a_killed_writer_left(shipped, models, tmp_path):
    """A killed export left `.NAME.written-by-PID.*.tmp` files in its folder and a scratch
    folder beside it; the next writer of that folder, holding its lock, removes those of a pid
    that no longer runs, and keeps a live writer's and a user's files."""
    folder, dead = tmp_path / "ct2", dead_pid()
    export("ct2", models[0], shipped, folder, "A")
    left = [folder / f".model.bin.written-by-{dead}.k1ll3d00.tmp",
            tmp_path / f".ct2.written-by-{dead}.k1ll3d00.tmp"]  # fmt: skip
    left[0].write_bytes(b"half a model")
    left[1].mkdir()
    (left[1] / "model.bin").write_bytes(b"a converter's scratch")
    kept = [folder / f".model.bin.written-by-{os.getpid()}.l1v1ng00.tmp",  # (a live writer's)
            tmp_path / f".web.written-by-{dead}.0th3r000.tmp",  # (another folder's)
            folder / ".notes.tmp"]  # fmt: skip
    for path in kept:
        path.write_text("kept")
    export("ct2", models[1], shipped, folder, "B")
    assert not any(path.exists() for path in left)
    assert all(path.read_text() == "kept" for path in kept)
    assert ct2_export.CT2Translator.open(folder).origin["model"] == "B"
    with atomic.scratch_folder(folder) as scratch:  # named so that it would be found the same
        assert atomic.TEMPORARY.match(scratch.name)["name"] == "ct2"
    assert not scratch.exists()


# --- plain CTranslate2 ----------------------------------------------------------------------------

PLAIN_BEAM_EQUAL = 188  # of the first 200 sentences of test2016 (the README says so)


def test_plain_ctranslate2_translates_as_ct2translator_on_test2016(shipped, tmp_path, data_dir):
    """`ctranslate2.Translator(folder).translate_batch(pieces)` on our BPE pieces: greedy, our
    output on every sentence (it appends `</s>` itself); with 4 beams and its |Y|^0.6 penalty,
    the README's count."""
    import ctranslate2

    from annotated_transformer.data import multi30k

    folder = tmp_path / "ct2"
    ct2_export.export_ct2(shipped.model, shipped.bpe, shipped.config, folder)
    assert "add_source_eos" in (folder / "config.json").read_text()
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "translate_batch" in readme and f"{PLAIN_BEAM_EQUAL} of the first 200" in readme
    sentences = [source for source, _ in multi30k.read_split("test2016", data_dir)][:200]
    ours = ct2_export.CT2Translator.open(folder)
    plain = ctranslate2.Translator(str(folder))
    pieces = shipped.bpe.pipe(sentences)
    for beam, penalty in ((1, 1.0), (4, 0.6)):
        found = plain.translate_batch(pieces, beam_size=beam, length_penalty=penalty)
        theirs = [shipped.bpe.detokenize(result.hypotheses[0]) for result in found]
        equal = sum(a == b for a, b in zip(theirs, ours.translate(sentences, beam), strict=True))
        assert equal == (200 if beam == 1 else PLAIN_BEAM_EQUAL), (beam, equal)


READERS = """
import sys
from pathlib import Path

from annotated_transformer.data import multi30k
from annotated_transformer.data.vocab import read_json
from annotated_transformer.data.wmt14 import sources_from_json
from annotated_transformer.evaluation.attention_maps import is_attention_record
from annotated_transformer.evaluation.scores import is_results_record, load_results
from annotated_transformer.exports.ct2 import read_about
from annotated_transformer.pretrained import read_sums
from annotated_transformer.training.inputs import read_run_json
from annotated_transformer.util.atomic import read_json_object

pipe = Path(sys.argv[1])  # a pipe, and links to it named as each reader's file
print(is_attention_record(pipe), is_results_record(pipe), read_json_object(pipe),
      read_about(pipe.parent), read_run_json(pipe.parent))
for read in (sources_from_json, load_results, read_json, lambda _: read_sums(pipe.parent),
             lambda _: multi30k.fetch("val", "de", pipe.parent)):  # readers that say what is wrong
    try:
        read(pipe)
    except ValueError as error:
        print(str(error).replace(str(pipe.parent), "DIR"))
"""


def test_the_readers_of_our_records_never_wait_on_a_pipe(tmp_path):
    # Each reader of a file of ours, given a named pipe: refused or found not ours, unread (a
    # read would wait for a writer that never comes). In a process of its own, with a timeout.
    os.mkfifo(tmp_path / "export.json")
    for name in ("run.json", "SHA256SUMS", "val.de.gz"):
        (tmp_path / name).symlink_to("export.json")
    done = subprocess.run([sys.executable, "-c", READERS, str(tmp_path / "export.json")],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    first, *refused = done.stdout.splitlines()
    assert first.split() == ["False", "False", "None", "None", "{}"]
    files = ["export.json"] * 3 + ["SHA256SUMS", "val.de.gz"]
    assert refused == [f"DIR/{name}: not a regular file (a folder, a pipe or a device)"
                       for name in files]  # fmt: skip
