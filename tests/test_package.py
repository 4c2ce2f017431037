"""The package as users get it: a clean import, the command line, the profile, Table 1."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from annotated_transformer.cli import main
from annotated_transformer.model import complexity
from annotated_transformer.profile import ENV_VAR, Profile, current_profile

ROOT = Path(__file__).resolve().parent.parent


def test_import_prints_nothing_and_seeds_nothing() -> None:
    code = (
        "import importlib, pkgutil, random, sys, torch\n"
        "torch.manual_seed(123); random.seed(123)\n"
        "state, pystate = torch.get_rng_state(), random.getstate()\n"
        "import annotated_transformer\n"
        "for module in pkgutil.iter_modules(annotated_transformer.__path__):\n"
        "    if module.name != '__main__':\n"
        "        importlib.import_module(f'annotated_transformer.{module.name}')\n"
        "assert 'annotated_transformer.model.transformer' in sys.modules\n"
        "assert torch.equal(state, torch.get_rng_state()), 'import changed the torch seed'\n"
        "assert pystate == random.getstate(), 'import changed the random seed'\n"
        "assert 'altair' not in sys.modules and 'matplotlib' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == ""


def test_the_names_a_user_starts_from_import_from_the_top_lazily() -> None:
    code = (
        "import sys\n"
        "import annotated_transformer as at\n"
        "assert 'torch' not in sys.modules, 'import annotated_transformer imported torch'\n"
        "from annotated_transformer import Translator, open_translator, make_model\n"
        "from annotated_transformer import ModelConfig, TrainConfig, preset, Error\n"
        "from annotated_transformer import greedy_decode, beam_search\n"
        "from annotated_transformer.translator import Translator as T\n"
        "from annotated_transformer.exports.formats import open_translator as o\n"
        "assert Translator is T and open_translator is o\n"
        "assert set(at.PUBLIC) <= set(at.__all__) <= set(dir(at))\n"
        "try:\n"
        "    at.Translater\n"
        "except AttributeError as error:\n"
        "    assert 'Translater' in str(error)\n"
        "else:\n"
        "    raise AssertionError('a misspelt name was found')\n"
        "model = make_model(11, 11, N=1, d_model=16, d_ff=32, h=2)\n"
        "assert ModelConfig().d_model == 512 and TrainConfig is type(preset('tiny'))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""


def test_console_script_help_and_version() -> None:
    exe = Path(sys.executable).parent / "annotated-transformer"
    result = subprocess.run([str(exe), "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "annotated-transformer" in result.stdout and "info" in result.stdout
    version = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.startswith("annotated-transformer ")


def test_info_lists_each_generated_module_with_its_chapter(capsys: pytest.CaptureFixture) -> None:
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert "annotated_transformer.profile" in out and "book/appendix_settings.ipynb" in out
    # a module written by several chapters names them all, though its header wraps
    scores = next(line for line in out.splitlines() if "evaluation.scores" in line)
    assert "book/real_world.ipynb" in scores and "book/engineering.ipynb" in scores, scores
    assert "annotated_transformer.model.complexity" in out and "book/background.ipynb" in out
    assert "annotated_transformer.cli " not in out  # hand-written modules are not listed
    rows = out.split("book (", 1)[1].splitlines()[1:]  # the chapters in one column, however long
    assert len({row.index("book/") for row in rows}) == 1, rows


def test_unknown_command_is_a_clear_error(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_profile_defaults_and_override() -> None:
    assert current_profile({}, cuda=False) == Profile("quick", "cpu")
    assert current_profile({}, cuda=True) == Profile("full", "cuda")
    assert current_profile({ENV_VAR: " FULL "}, cuda=False).name == "full"
    assert Profile("full", "cuda").pick(quick=1, full=2) == 2


def test_profile_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match=r"ANNOTATED_TRANSFORMER_PROFILE='fast' is not a profile"):
        current_profile({ENV_VAR: "fast"}, cuda=False)
    with pytest.raises(ValueError, match="unknown profile 'medium'"):
        Profile("medium", "cpu")


def test_table1_rows() -> None:
    n, d, k, r = 100, 512, 3, 10
    rows = {row.layer: row for row in complexity.table1(n, d, k, r)}
    assert rows["Self-Attention"] == complexity.LayerCost("Self-Attention", n * n * d, 1, 1)
    assert (
        rows["Recurrent"].complexity == n * d * d and rows["Recurrent"].sequential_operations == n
    )
    assert rows["Convolutional"].complexity == k * n * d * d
    assert rows["Convolutional"].maximum_path_length == pytest.approx(4.1918, abs=1e-4)  # log_3 100
    assert rows["Self-Attention (restricted)"].maximum_path_length == n / r


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: complexity.self_attention(0, 512), "n must be a positive integer, got 0"),
        (lambda: complexity.recurrent(10, 2.5), "d must be a positive integer, got 2.5"),
        (lambda: complexity.convolutional(10, 8, 1), "kernel width k must be at least 2"),
        (lambda: complexity.restricted_self_attention(10, 8, -1), "r must be a positive integer"),
    ],
)
def test_table1_rejects_bad_sizes(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_the_configuration_and_the_help_load_no_torch() -> None:
    """`ModelConfig`, the presets, `TrainConfig` and the values `--help` names import without
    torch (issue 59): the command line's parser is built from them alone."""
    code = (
        "import sys\n"
        "import annotated_transformer.model.config, annotated_transformer.runs.presets\n"
        "from annotated_transformer.cli.parser import build_parser\n"
        "build_parser()\n"
        "assert 'torch' not in sys.modules, 'the configuration imported torch'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_parameter_count_by_formula_is_the_models() -> None:
    import torch

    from annotated_transformer.model.config import ModelConfig
    from annotated_transformer.model.model_checks import parameter_count
    from annotated_transformer.model.transformer import build_model, count_parameters

    for config in (
        ModelConfig.base(37_000, 37_000, share_embeddings=True),
        ModelConfig(50, 60, N=1, d_model=32, h=2, d_ff=7, norm_first=True),
        ModelConfig(9, 9, N=2, d_model=16, h=4, d_k=3, d_v=5, positional="learned", max_len=7),
    ):
        with torch.device("meta"):
            assert parameter_count(config) == count_parameters(build_model(config))


def test_a_model_too_large_for_the_memory_is_refused_before_it_is_built() -> None:
    from annotated_transformer.model.config import ModelConfig
    from annotated_transformer.model.transformer import build_model
    from annotated_transformer.util.settings import SettingError

    with pytest.raises(SettingError, match=r"settings N=100000, d_model=512, .* parameters needs"):
        build_model(ModelConfig(8000, 8000, N=100_000))  # (at once: nothing is allocated)
