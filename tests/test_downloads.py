"""A download killed mid-way leaves pooch's temporary file behind: the next download removes it
(issue 45, item 2). The lock and the removal are shown in the appendix "How the package is built:
files, downloads and records"; here, that both downloaders use them."""

from pathlib import Path

import pooch
import pytest

from annotated_transformer.data import multi30k, wmt14
from annotated_transformer.util.downloads import downloading, remove_partials


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list]:
    """The package's cache folder, in a scratch folder; pooch.retrieve lists what it finds."""
    monkeypatch.setattr(pooch, "os_cache", lambda name: tmp_path / name)
    seen: list[list[str]] = []

    def retrieve(url, known_hash, fname, path, **how):
        seen.append(sorted(p.name for p in Path(path).iterdir()))
        (Path(path) / fname).write_bytes(b"checked")
        return str(Path(path) / fname)

    monkeypatch.setattr(pooch, "retrieve", retrieve)
    return tmp_path / "annotated-transformer", seen


def test_a_multi30k_download_removes_what_a_killed_one_left(cache: tuple[Path, list]) -> None:
    folder = cache[0] / "multi30k"
    folder.mkdir(parents=True)
    (folder / "tmpa1b2c3d4").write_bytes(b"x" * 1000)
    multi30k.download("val", "de")
    assert cache[1] == [[]]  # pooch found the folder empty
    assert [p.name for p in folder.iterdir()] == [multi30k.file_name("val", "de")]


def test_a_wmt_download_removes_what_a_killed_one_left(cache: tuple[Path, list]) -> None:
    folder = cache[0] / "wmt14"
    folder.mkdir(parents=True)
    (folder / "tmpzz_99xyq").write_bytes(b"x")
    source = next(iter(wmt14.SOURCES.values()))
    wmt14.fetch(source)
    assert cache[1] == [[]]  # pooch found the folder empty
    assert [p.name for p in folder.iterdir()] == [source.file]


def test_only_pooch_s_temporary_names_are_removed(tmp_path: Path) -> None:
    names = ["tmpa1b2c3d4", "tmpa1b2c3d", "tmpa1b2c3d45", "tmpA1B2C3D4", "xtmpa1b2c3d4", "notes"]
    for name in names:
        (tmp_path / name).write_text("x")
    (tmp_path / "tmpfolder_1").mkdir()  # (a folder of that name is not a download)
    assert [p.name for p in remove_partials(tmp_path)] == ["tmpa1b2c3d4"]
    assert remove_partials(tmp_path / "missing") == []


def test_downloads_one_after_another_each_clean_up(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    for _ in range(2):
        (folder / "tmpqwertyui").write_bytes(b"x")
        with downloading(folder, tmp_path / "cache") as removed:
            assert [p.name for p in removed] == ["tmpqwertyui"]


@pytest.mark.parametrize("target", ["victim.txt", "missing.txt"])
def test_a_link_planted_as_the_download_lock_is_refused_not_followed(
    tmp_path: Path, target: str
) -> None:
    """Issue 60: the cache's lock is opened as every lock is (`util.locks`), never through a
    link: one planted there is refused, naming it, and what it points at is left as it was."""
    from annotated_transformer.util.downloads import LOCK
    from annotated_transformer.util.locks import LinkRefused

    cache = tmp_path / "cache"
    cache.mkdir()
    (tmp_path / "victim.txt").write_text("precious\n")
    (cache / LOCK).symlink_to(tmp_path / target)
    with pytest.raises(LinkRefused, match="a symbolic link"), downloading(tmp_path, cache):
        pass
    assert (tmp_path / "victim.txt").read_text() == "precious\n"
    assert not (tmp_path / "missing.txt").exists()


def test_a_download_beside_another_removes_nothing(tmp_path: Path) -> None:
    """Two downloads at once hold the lock shared; the second, finding the first, leaves the
    partial files (they may be the first's) and removes them only once it is alone."""
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "tmpqwertyui").write_bytes(b"x")
    with downloading(folder, tmp_path / "cache") as first:
        (folder / "tmpasdfghjk").write_bytes(b"the first's own")
        with downloading(folder, tmp_path / "cache") as second:
            assert [p.name for p in first] == ["tmpqwertyui"] and second == []
        assert (folder / "tmpasdfghjk").exists()
