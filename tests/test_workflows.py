"""The GitHub workflows and the release (issue 48): checked here, since nothing here runs GitHub
Actions. Each workflow against GitHub's own schema (bundled with check-jsonschema: no network),
its commands against the README's; the sdist and the wheel built from it, checked by twine, and
the wheel translating; the CHANGELOG's section for the version the release would publish."""

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from test_anywhere import readme_command_1

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
sys.path.insert(0, str(ROOT / "tools"))
import release_notes  # noqa: E402


def workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))


def runs(job: dict) -> list[str]:
    return [step["run"] for step in job["steps"] if "run" in step]


def uses(job: dict) -> list[str]:
    return [step["uses"].split("@")[0] for step in job["steps"] if "uses" in step]


def readme_command_2() -> str:
    (line,) = [line for line in (ROOT / "README.md").read_text().splitlines() if "# (2)" in line]
    return line.split("#")[0].strip()


@pytest.mark.parametrize("name", sorted(p.name for p in WORKFLOWS.glob("*.yml")))
def test_each_workflow_is_valid_for_github(name: str) -> None:
    checker = Path(sys.executable).with_name("check-jsonschema")
    done = subprocess.run([str(checker), "--builtin-schema", "vendor.github-workflows",
                           str(WORKFLOWS / name)], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_tests_workflow_runs_readme_command_2_and_the_package_everywhere() -> None:
    jobs = workflow("tests.yml")["jobs"]
    assert runs(jobs["everything"]) == [readme_command_2()] != [readme_command_1()]
    matrix = jobs["package"]["strategy"]["matrix"]
    assert matrix["python"] == ["3.11", "3.12", "3.13"]
    assert matrix["os"] == ["ubuntu-latest", "macos-latest", "windows-latest"]
    install, test = runs(jobs["package"])
    assert install.startswith('python -m pip install ".[serve]"')
    assert test.endswith("-m package tests/test_package_smoke.py")
    assert "package" in (ROOT / "pyproject.toml").read_text()  # the marker is declared


def test_the_classifiers_name_the_pythons_that_are_tested() -> None:
    """pyproject.toml's classifiers list the Pythons of the workflow's matrix: 3.11 (README command
    2) and those tools/test_pythons.sh tests beside it; requires-python stays >=3.11."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    prefix = "Programming Language :: Python :: 3."
    named = ["3." + c.removeprefix(prefix) for c in project["classifiers"] if c.startswith(prefix)]
    matrix = workflow("tests.yml")["jobs"]["package"]["strategy"]["matrix"]["python"]
    script = (ROOT / "tools" / "test_pythons.sh").read_text(encoding="utf-8")
    (defaults,) = [line for line in script.splitlines() if line.startswith("[ ${#VERSIONS")]
    assert named == matrix == ["3.11", *defaults.split("VERSIONS=(")[1].rstrip(")").split()]
    assert project["requires-python"] == ">=3.11"


def test_the_release_workflow_builds_checks_installs_and_publishes() -> None:
    jobs = workflow("release.yml")["jobs"]
    build = runs(jobs["build"])
    assert build[0] == 'python tools/release_notes.py "${GITHUB_REF_NAME#v}" > release-notes.md'
    assert any("python -m build" in run for run in build)
    assert "python -m twine check --strict dist/*" in build
    assert any("annotated-transformer translate" in run for run in build)
    assert uses(jobs["publish"]) == ["actions/download-artifact", "pypa/gh-action-pypi-publish"]
    assert jobs["publish"]["permissions"] == {"id-token": "write"}  # trusted publishing
    assert jobs["publish"]["needs"] == "build" and jobs["github-release"]["needs"] == "publish"
    assert "--notes-file release-notes.md" in runs(jobs["github-release"])[0]
    assert workflow("release.yml")[True]["push"]["tags"] == ["v*"]  # (YAML reads `on` as True)


def test_the_changelog_has_a_section_for_the_package_s_version(capsys) -> None:
    version = release_notes.package_version()
    assert release_notes.main([version]) == 0
    assert capsys.readouterr().out.strip()
    assert release_notes.main(["0.0.0"]) == 1
    assert "is not pyproject.toml's" in capsys.readouterr().err
    assert release_notes.section("## 1.0\nnotes\n## 0.9\nolder\n", "1.0") == "notes\n"
    assert release_notes.section("## 1.0\nnotes\n", "2.0") is None


def test_the_sdist_builds_a_wheel_that_twine_accepts_and_that_translates(tmp_path: Path) -> None:
    """`python -m build`: the sdist first, then the wheel built from the unpacked sdist (so the
    sdist holds all the wheel needs); twine checks both; the wheel, installed apart, translates."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                            str(tmp_path / "dist"), str(ROOT)], capture_output=True, text=True,
                           env=env)  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    (sdist,) = (tmp_path / "dist").glob("*.tar.gz")
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = tarfile.open(sdist).getnames()
    assert any(n.endswith("pretrained_model/model.safetensors") for n in names)
    checked = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(sdist),
                              str(wheel)], capture_output=True, text=True)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, env=env)  # fmt: skip
    env["PYTHONPATH"] = str(target)  # (before the editable install of the repository)
    code = (
        "import annotated_transformer as a, sys; print(a.__file__, file=sys.stderr); "
        "from annotated_transformer.cli import main; sys.exit(main(['translate', 'Ein Hund.']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
    assert done.stderr.startswith(str(target))  # the wheel's package, not the repository's
