"""What a user gets from `pip install .`: the tests marked `package`, which the workflow
.github/workflows/tests.yml runs on Python 3.11 to 3.13 on Linux, macOS and Windows, with the
package and pytest alone installed (and CTranslate2, for `export-ct2`). They read nothing of the
repository but this file: no chapters, no data, no fixtures; here they run with the rest."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.package
SENTENCE = "Ein Hund rennt über die Wiese."


def cli(*args: str, stdin: bytes = b"", cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`annotated-transformer ARGS` in a subprocess, as bytes."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "annotated_transformer", *args], input=stdin,
                          capture_output=True, cwd=cwd, env=env, timeout=300)  # fmt: skip


def test_importing_the_package_prints_nothing() -> None:
    done = subprocess.run([sys.executable, "-c", "import annotated_transformer"],
                          capture_output=True, timeout=120)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_the_api_and_the_command_line_translate_alike() -> None:
    from annotated_transformer.translator import Translator

    (english,) = Translator.pretrained().translate([SENTENCE])
    assert english and english != SENTENCE
    done = cli("translate", SENTENCE)
    assert done.returncode == 0 and done.stdout.decode("utf-8").strip() == english
    piped = cli("translate", stdin=f"{SENTENCE}\n\n{SENTENCE}\n".encode())
    assert piped.stdout.decode("utf-8").splitlines() == [english, "", english]


@pytest.mark.parametrize(
    ("args", "stdin", "status", "message"),
    [
        (("translate", "--beam", "0", SENTENCE), b"", 2, "argument --beam: expected a positive"),
        (("translate", "--checkpoint", "missing.pt", SENTENCE), b"", 1, "missing.pt: no such"),
        (("translate",), b"Ein Hund.\n\xe4\n", 1, "standard input is not UTF-8 text (line 2"),
        (("average", "a.pt", "--out", "checkpoint-00000001.pt"), b"", 2, "an averaged model"),
    ],
    ids=["beam-zero", "missing-checkpoint", "stdin-not-utf8", "average-named-like-training"],
)
def test_bad_input_is_one_line(tmp_path: Path, args, stdin, status, message) -> None:
    done = cli(*args, stdin=stdin, cwd=tmp_path)
    lines = done.stderr.decode("utf-8").strip().splitlines()
    assert done.returncode == status and message in lines[-1], lines
    assert "Traceback" not in done.stderr.decode("utf-8") and list(tmp_path.iterdir()) == []


def test_export_ct2_translates_as_the_package_does(tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    from annotated_transformer.translator import Translator

    done = cli("export-ct2", "--out", str(tmp_path / "ct2"))
    assert done.returncode == 0, done.stderr.decode("utf-8")
    translated = cli("translate", "--checkpoint", str(tmp_path / "ct2"), SENTENCE)
    assert translated.returncode == 0
    assert translated.stdout.decode("utf-8").strip() == Translator.pretrained().translate(
        [SENTENCE])[0]  # fmt: skip
