"""Either direction, and the paper's presets (issue 35): a run's `pair` is read by every command.

An English→German Multi30k run trains, translates, averages and evaluates with the same commands
as a German→English one, and its translations and references are German files; configurations
written before `pair` existed read as German→English; `wmt14-base` and `wmt14-big` hold the
paper's recipe (§5, §6.1).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from annotated_transformer import cli
from annotated_transformer.data import multi30k
from annotated_transformer.data.vocab import Vocab
from annotated_transformer.evaluation.scores import scores
from annotated_transformer.runs.presets import (
    LANGUAGE_NAMES,
    PAIRS,
    PRESETS,
    TrainConfig,
    preset,
)
from annotated_transformer.util.settings import SettingError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_CONFIG = ROOT / "src" / "annotated_transformer" / "pretrained_model" / "config.json"
# The subprocesses read the real Multi30k files, cut short: train 2,000 pairs, other splits 20
SITECUSTOMIZE = '''\
"""Loaded by the test's subprocesses only: Multi30k's splits, cut short."""
from annotated_transformer.data import multi30k

_read_split = multi30k.read_split


def read_split(split, data_dir=None, pair="de-en"):
    return _read_split(split, data_dir, pair)[: 2000 if split == "train" else 20]


multi30k.read_split = read_split
'''


# --- settings: old runs read as German→English; the presets ---------------------------------------


def test_configurations_without_a_pair_read_as_german_to_english():
    shipped = json.loads(SHIPPED_CONFIG.read_text(encoding="utf-8"))["config"]
    assert "pair" not in shipped and "dataset" not in shipped
    config = TrainConfig.from_dict(shipped)
    assert (config.dataset, config.pair, config.languages) == ("multi30k", "de-en", ("de", "en"))
    assert TrainConfig().languages == ("de", "en")
    assert preset("tiny", pair="en-de").languages == ("en", "de")


def test_a_wrong_pair_or_dataset_is_one_line():
    with pytest.raises(SettingError, match=r'^setting pair: expected one of "de-en", "en-de", '
                       r'got "fr-en"$'):  # fmt: skip
        preset("tiny", pair="fr-en")
    with pytest.raises(SettingError, match=r"^x\.json: setting dataset: expected one of"):
        TrainConfig.from_dict({"dataset": "wmt17"}, "x.json")
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        multi30k.read_split("val", None, "fr-en")


def test_the_cli_names_the_pairs_and_languages_without_torch():
    assert cli.PAIRS == PAIRS and cli.LANGUAGE_NAMES == LANGUAGE_NAMES


def test_the_wmt14_presets_hold_the_papers_recipe():
    base, big = PRESETS["wmt14-base"], PRESETS["wmt14-big"]
    for config, steps, hours, averaged in ((base, 100_000, 12, 5), (big, 300_000, 84, 20)):
        assert (config.dataset, config.pair, config.tokenizer) == ("wmt14-en-de", "en-de", "bpe")
        assert config.vocab_size == 37_000 and config.model.share_embeddings  # §5.1, §3.4
        assert config.max_steps == steps and config.epochs is None and config.warmup == 4000
        # ~25,000 tokens per side and step: max_tokens × accumulate × processes (1 here, or 8
        # processes with accumulate 1)
        assert config.max_tokens * config.accumulate == 25_000
        # a checkpoint per 10 minutes of the paper's training, as steps
        assert config.save_every == round(steps / (hours * 6))
        assert config.average_last == averaged and config.keep >= averaged  # §6.1
        assert config.bf16  # the departure named in the chapter "Engineering a training run"
        assert config.save_minutes >= 24 * 60  # steps, not minutes, space the checkpoints
    assert base.save_every == 1389 and big.save_every == 595
    m = base.model
    assert (m.N, m.d_model, m.d_ff, m.h, m.dropout, base.label_smoothing) == (
        6, 512, 2048, 8, 0.1, 0.1)  # fmt: skip
    m = big.model
    assert (m.N, m.d_model, m.d_ff, m.h, m.dropout) == (6, 1024, 4096, 16, 0.3)
    # beam 4, alpha 0.6 and the source's length + 50: what translate and evaluate do for any run
    parsed = cli.build_parser().parse_args(["evaluate", "--checkpoint", "run"])
    assert (parsed.beam, parsed.alpha) == (4, 0.6)


def test_a_wmt14_run_without_its_text_is_refused_before_it_writes_anything(tmp_path):
    from annotated_transformer.training.run import train

    with pytest.raises(FileNotFoundError, match=r"holds no manifest.json, train.en, train.de"):
        train(preset("wmt14-base"), tmp_path / "run", data_dir=tmp_path / "wmt", progress=False)
    assert not (tmp_path / "run").exists() and not (tmp_path / "wmt").exists()


def test_exports_name_the_direction():
    from annotated_transformer.exports.hf import hub_card

    card = hub_card(None, "en-de")
    assert "language:\n- en\n- de\n" in card and "English→German" in card
    assert "A dog runs through the snow." in card
    assert "language:\n- de\n- en\n" in hub_card(None)


# --- an English→German run, through the command line ---------------------------------------------


def command(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(folder), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "annotated_transformer", *args], cwd=folder, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_an_english_to_german_run_trains_translates_averages_and_evaluates(data_dir, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    trained = command(
        tmp_path, "train", "--preset", "tiny", "--pair", "en-de", "--out", "run", "--data-dir",
        str(data_dir), "--max-steps", "4", "--set", "save_every=2", "--set", "average_last=2",
        "--set", "eval_every=1000", "--set", "bleu_sentences=5", "--no-progress",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    assert "English and" in trained.stderr and "German tokens" in trained.stderr
    run = tmp_path / "run"
    assert json.loads((run / "config.json").read_text())["pair"] == "en-de"
    src, tgt = Vocab.load(run / "src_vocab.json"), Vocab.load(run / "tgt_vocab.json")
    assert "dog" in src.itos and "Hund" not in src.itos and "Hund" in tgt.itos

    translated = command(tmp_path, "translate", "--checkpoint", "run", "--beam", "1",
                         "A dog runs past Quokkaville.")  # fmt: skip
    assert translated.returncode == 0 and len(translated.stdout.splitlines()) == 1
    assert "not in the English vocabulary, read as <unk>: Quokkaville" in translated.stderr

    averaged = command(tmp_path, "average", "run", "--out", "run/average.pt")  # its average_last
    assert averaged.returncode == 0 and "averaged 2 checkpoints (steps 2, 4)" in averaged.stdout

    evaluated = command(
        tmp_path, "evaluate", "--checkpoint", "run/average.pt", "--beam", "1", "--split",
        "mscoco", "--data-dir", str(data_dir), "--results", "results",
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr
    record = json.loads((tmp_path / "results" / "mscoco-avg2-greedy.json").read_text())
    assert record["pair"] == "en-de" and record["sentences"] == 20
    assert record["references"]["file"] == "test_2017_mscoco.de.gz"
    assert record["hypotheses"].endswith("mscoco-avg2-greedy.de")
    assert not (tmp_path / "results" / "mscoco-avg2-greedy.en").exists()
    hypotheses = (tmp_path / "results" / "mscoco-avg2-greedy.de").read_text().splitlines()
    german = [de for _, de in multi30k.read_split("mscoco", data_dir, "en-de")[:20]]
    english = [en for en, _ in multi30k.read_split("mscoco", data_dir, "en-de")[:20]]
    assert record["chrf"]["score"] == scores(hypotheses, german)["chrf"]["score"]
    assert record["chrf"]["score"] != scores(hypotheses, english)["chrf"]["score"]
