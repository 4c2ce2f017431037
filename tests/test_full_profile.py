"""The full profile's code, proven on the CPU at a tiny scale (issue 34, part 1).

Every chapter that branches on the profile (`profile.pick(...)`, `profile.quick`) runs under the
override `ANNOTATED_TRANSFORMER_TINY=DIR` (see the appendix "How the package is built"), up to its
last branch, with `tools/run_chapters.py`: the full branch's training runs, model sizes, grid and
files, cut to seconds. The chapters run once, in one process, for the whole module; each chapter
is then one test. What the branches write must land in DIR, never in the repository.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import run_chapters

from annotated_transformer import variations
from annotated_transformer.profile import (
    ENV_VAR,
    TINY_STEPS,
    TINY_VAR,
    Profile,
    current_profile,
    shrink,
)
from annotated_transformer.runs.presets import preset

ROOT = Path(__file__).resolve().parent.parent
BRANCHING = [
    path
    for path in sorted((ROOT / "book").glob("*.ipynb"))
    if run_chapters.last_branch(run_chapters.code_cells(path)) is not None
]
WATCHED = ("results", "runs", "book/runs", "book/results")  # where a branch must not write


def tree(root: Path) -> dict[str, float]:
    """Every file under the watched folders of `root`, with its modification time."""
    found = {}
    for name in WATCHED:
        for path in (root / name).rglob("*"):
            if path.is_file():
                found[path.relative_to(root).as_posix()] = path.stat().st_mtime
    return found


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """Run every branching chapter under the tiny override; the record, its output, and DIR."""
    scratch = tmp_path_factory.mktemp("tiny")
    record = scratch / "chapters.json"
    before = tree(ROOT)
    env = {**os.environ, TINY_VAR: str(scratch / "written"), "MPLBACKEND": "Agg"}
    env.pop(ENV_VAR, None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "src"), str(ROOT / "tools"), env.get("PYTHONPATH", "")]
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "run_chapters.py"), "--upto-branch", "--record",
         str(record), *map(str, BRANCHING)],
        env=env, capture_output=True, text=True, timeout=1800, cwd=ROOT,
    )  # fmt: skip
    outcome = json.loads(record.read_text()) if record.exists() else {}
    return {"record": outcome, "stdout": done.stdout, "stderr": done.stderr,
            "written": scratch / "written", "before": before, "after": tree(ROOT)}  # fmt: skip


def test_the_branching_chapters_are_found():
    names = {path.stem for path in BRANCHING}
    expected = {"attention", "decoding", "engineering", "fast_decoding", "performance",
                "real_world", "serving", "subwords", "table3"}  # fmt: skip
    assert expected <= names, sorted(expected - names)


@pytest.mark.parametrize("chapter", [path.name for path in BRANCHING])
def test_the_full_branch_runs_at_a_tiny_scale(tiny_run, chapter):
    outcome = tiny_run["record"].get("chapters", {}).get(chapter)
    assert outcome is not None, f"{chapter} did not run:\n{tiny_run['stderr'][-3000:]}"
    assert outcome["error"] is None, outcome["error"]
    assert outcome["done"] == outcome["cells"] > 0
    print(f"{chapter}: {outcome['cells']} code cells in {outcome['seconds']} s")


def test_the_branches_write_into_the_scratch_folder_only(tiny_run):
    assert tiny_run["after"] == tiny_run["before"]  # nothing new or changed in the repository
    records = tiny_run["written"] / "results" / "variations-tiny-cpu"
    names = sorted(path.stem for path in records.glob("*.json"))
    assert names == sorted(variations.TINY_ROWS)
    record = json.loads((records / "base.json").read_text())
    assert record["steps"] == TINY_STEPS and record["config"]["model"]["d_model"] == 32
    assert (tiny_run["written"] / "runs" / "variations" / "tiny" / "base").is_dir()


def test_checks_of_the_full_scale_say_they_were_skipped(tiny_run):
    assert (
        "tiny scale: not checked (it holds at full scale): the training loss falls"
        in (tiny_run["stdout"])
    )


def test_shrink_cuts_what_the_full_branches_pick():
    tiny = current_profile({TINY_VAR: "scratch"}, cuda=False)
    assert tiny.name == "full" and tiny.scale == "tiny" and tiny.root(ROOT) == Path("scratch")
    base = tiny.pick(quick=preset("tiny", epochs=1), full=preset("base"))
    assert base.max_steps == TINY_STEPS and base.epochs is None
    assert (base.model.N, base.model.d_model, base.model.h) == (1, 32, 2)
    assert base.tokenizer == "bpe" and base.model.share_embeddings  # the full run's code paths
    assert tiny.pick(quick=300, full=10_000) == 30 and tiny.pick(quick=1, full=10) == 1
    assert tiny.pick(quick=[128, 256], full=[128, 256, 512, 4096]) == [128, 256]
    assert tiny.pick(quick="tiny", full="base") == "base"
    assert shrink(True, False) is True  # a flag is not a count
    assert tiny.scaled(preset("small")).max_steps == TINY_STEPS


def test_the_quick_and_full_profiles_are_unchanged():
    quick, full = Profile("quick", "cpu"), Profile("full", "cuda")
    assert quick.pick(quick=1, full=2) == 1 and full.pick(quick=1, full=2) == 2
    assert full.scaled(preset("base")) == preset("base") and full.scale == "full"
    assert quick.root(ROOT) == ROOT and full.root(ROOT) == ROOT
    with pytest.raises(AssertionError, match="a claim"):
        quick.at_scale(False, "a claim")
    quick.at_scale(True, "a claim")


def test_the_tiny_grid_is_the_full_grid_cut(capsys):
    base, rows = variations.grid_of("tiny")
    full_base, full_rows = variations.grid_of("full")
    assert base == shrink(full_base) and base.max_steps == TINY_STEPS
    assert [v.name for v in rows] == [v.name for v in full_rows if v.name in variations.TINY_ROWS]
    assert len(rows) == len(variations.TINY_ROWS) < len(full_rows)
    assert variations.grid_of("quick")[1] == variations.grid(variations.base_config("quick"))


def test_convergence_is_judged_on_the_last_fifth_of_the_validations(tmp_path, capsys):
    import converged

    assert converged.converged([1.0, 5.0, 9.0, 14.0, 17.0, 19.0, 20.0, 20.2, 20.1, 20.4])
    assert not converged.converged([1.0, 5.0, 9.0, 12.0, 14.0, 16.0, 18.0, 19.0, 20.0, 21.0])
    assert not converged.converged([20.0])
    metrics = tmp_path / "metrics.jsonl"
    lines = [{"kind": "train", "step": 1, "loss": 5.0}]
    lines += [{"kind": "val", "step": s, "loss": 2.0, "bleu": b} for s, b in ((10, 3.0), (20, 3.3))]
    metrics.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert converged.main([str(metrics)]) == 0
    assert "step 20: 3.30" in capsys.readouterr().out
    metrics.write_text(json.dumps(lines[0]) + "\n")
    assert converged.main([str(metrics)]) == 2


def test_the_gpu_script_has_every_step_of_part_two():
    script = (ROOT / "benchmarks" / "gpu.sh").read_text()
    for step in ("bench", "ddp", "base", "wheels", "chapters", "table3", "decoding"):
        assert f"\n{step})" in script or f'"$step" = {step}' in script, step
    assert "tools/run_chapters.py --record results/chapters-full-cuda.json --skip-clean" in script
    assert "--results results/variations-full-cuda" in script


def test_the_gpu_scripts_wheels_step_puts_a_split_wheel_together(tmp_path):
    """A wheel larger than one device call carries travels in parts: `gpu.sh wheels` keeps each
    call's part, and installs the wheel once its parts give the SHA-256 it was split with."""
    import hashlib
    import os
    import subprocess
    import sys
    import zipfile

    name = "hello_parts-1.0-py3-none-any.whl"
    wheel = tmp_path / name
    files = {"hello_parts.py": "WORDS = 'in two parts'\n" + "# padding\n" * 400,
             "hello_parts-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: hello-parts\n"
             "Version: 1.0\n", "hello_parts-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\n"
             "Generator: a test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             "hello_parts-1.0.dist-info/RECORD": ""}  # fmt: skip
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    data = wheel.read_bytes()
    digest = f"{hashlib.sha256(data).hexdigest()}  {name}\n"
    for folder, part in (("first", data[: len(data) // 2]), ("second", data[len(data) // 2 :])):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / f"{name}.part-{'aa' if folder == 'first' else 'ab'}").write_bytes(part)
        (tmp_path / folder / f"{name}.sha256").write_text(digest)
    site, parts = tmp_path / "site", tmp_path / "parts"
    env = {**os.environ, "GPU_SITE": str(site), "GPU_PARTS": str(parts),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip

    def call(folder: str) -> str:
        script = ["bash", str(ROOT / "benchmarks" / "gpu.sh"), "wheels", str(tmp_path / folder)]
        done = subprocess.run(script, env=env, capture_output=True, text=True, check=True)
        return done.stdout

    first = call("first")
    assert first == f"{name}: 1 part(s) so far; carry the rest\ninstalled 0 wheels into {site}\n"
    assert not site.exists()
    assert call("second") == f"installed 1 wheels into {site}\n"
    assert "in two parts" in (site / "hello_parts.py").read_text()
    assert sorted(p.name for p in parts.iterdir()) == []  # the parts are gone once installed


def test_a_variation_stopped_by_a_signal_records_nothing(tmp_path, monkeypatch, capsys):
    """`timeout -s TERM` in `gpu.sh table3` stops every row's process: each saves and records
    nothing, so the next call of the grid goes on with it instead of keeping a short run."""
    import argparse
    import signal

    from annotated_transformer.training import run as training

    def stopped_early(config, run_dir, **how):
        return training.Outcome(step=3, checkpoint=run_dir / "checkpoint-00000003.pt",
                                stopped_by=signal.SIGTERM, val_loss=None, val_bleu=None,
                                model=None)  # fmt: skip

    monkeypatch.setattr(training, "train", stopped_early)
    base, rows = variations.grid_of("tiny")
    with pytest.raises(variations.Stopped) as stop:
        variations.run(rows[0], base, tmp_path / "runs", tmp_path / "results", device="cpu")
    assert stop.value.signum == signal.SIGTERM and not (tmp_path / "results").exists()
    args = argparse.Namespace(
        profile="tiny",
        only=["base"],
        results=str(tmp_path / "results"),
        runs=str(tmp_path / "runs"),
        jobs=1,
        device="cpu",
        data_dir=None,
    )
    assert variations.run_grid(args) == 128 + signal.SIGTERM
    assert "base: stopped by signal 15; run the grid again to go on" in capsys.readouterr().out
    assert not (tmp_path / "results").exists()


def test_table3_reads_the_cpu_grid_its_text_describes_in_every_profile(tiny_run):
    # The sections before "The grid on a GPU" describe the CPU grid's records; under the full
    # profile (here at a tiny scale) the chapter trains its own grid, then reads those records.
    assert "26 records in results/variations-quick-cpu/, trained on cpu" in tiny_run["stdout"]
    assert "variations to train; records in" in tiny_run["stdout"]  # the grid ran first
