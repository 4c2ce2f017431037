"""WMT 2014 English–German end to end on a miniature corpus in the real archives' layout:
download from a local or `file://` mirror with checksums, extraction, BPE, shards, a tiny model
trained on the shards, averaging, and sacreBLEU on both forms of newstest2014; and the same
through the command line, as a reader runs it: `download`, `prepare`, `train` in two torchrun
processes (and resumed), `average`, `evaluate` on both forms."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from wmt_miniature import COUNTS, make_mirror

from annotated_transformer.data import wmt14
from annotated_transformer.data.bpe import BPETokenizer
from annotated_transformer.data.shards import ShardedPairs, learn_bpe, shard_loader, write_shard
from annotated_transformer.data.vocab import PAD_ID, normalize
from annotated_transformer.evaluation.newstest import bpe_translate, score_newstest
from annotated_transformer.evaluation.scores import rescore
from annotated_transformer.model.transformer import ModelConfig, build_model
from annotated_transformer.runs.averaging import average_state_dicts
from annotated_transformer.training.label_smoothing import LabelSmoothing
from annotated_transformer.training.loop import TrainState, groups_of, train_step
from annotated_transformer.training.schedule import make_optimizer, noam_scheduler

TRAIN = COUNTS["europarl-v7"] + COUNTS["commoncrawl"] + COUNTS["news-commentary-v9"]


def cli(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "annotated_transformer", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def download(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return cli("download", "--dataset", "wmt14-en-de", *args, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The miniature, downloaded by the command line from a `file://` mirror through the pooch
    cache (a cache of its own: `XDG_CACHE_HOME`), checked and extracted."""
    work = tmp_path_factory.mktemp("wmt")
    registry = make_mirror(work / "mirror")
    env = {**os.environ, "XDG_CACHE_HOME": str(work / "cache")}
    done = download("--mirror", (work / "mirror").as_uri(), "--test-sources", str(registry),
                    "--data-dir", "text", cwd=work, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "not the package's" in done.stdout
    cached = sorted(p.name for p in (work / "cache").rglob("*.tgz"))
    assert cached == sorted(s.file for s in wmt14.SOURCES.values())  # through the cache
    return work / "text"


def test_every_checksum_names_where_it_was_published() -> None:
    for name, source in wmt14.SOURCES.items():
        algorithm, digest = source.checksum.split(":")
        if name.startswith("newstest2014"):  # only sacreBLEU publishes one: an MD5
            assert algorithm == "md5" and len(digest) == 32 and "sacreBLEU" in source.published
            assert source.sgml and all(m.endswith(".sgm") for m in source.members.values())
        else:
            assert algorithm == "sha256" and len(digest) == 64 and "TensorFlow" in source.published
            assert source.size and not source.sgml
    assert sorted(s for split in wmt14.SPLITS.values() for s in split) == sorted(wmt14.SOURCES)


def test_download_extracts_aligned_clean_text_and_a_manifest(text: Path) -> None:
    manifest = json.loads((text / "manifest.json").read_text())
    splits = manifest["splits"]
    assert splits["train"]["pairs"] == TRAIN - 1  # the pair with an empty side
    assert splits["train"]["left_out"] == {"empty": 1, "length": 0, "ratio": 0, "duplicate": 0}
    for split, count in (("newstest2013", 40), ("newstest2014-full", 48),
                         ("newstest2014-filtered", 40)):  # fmt: skip
        assert splits[split]["pairs"] == count
        en, de = ((text / f"{split}.{lang}").read_text().split("\n") for lang in ("en", "de"))
        assert len(en) == len(de) == count + 1 and not en[-1]  # one line each, aligned
    train = (text / "train.en").read_text().split("\n")
    assert train[1] == "The old cat sees the tree."  # spaces trimmed and collapsed
    assert "Bonjour." not in train and "<seg" not in (text / "newstest2014-full.en").read_text()
    full = (text / "newstest2014-full.de").read_text().split("\n")
    assert (text / "newstest2014-filtered.de").read_text().split("\n")[:-1] == full[:40]
    assert manifest["filters"] == {"max_length": None, "max_ratio": None, "dedup": False}


def test_filters_leave_out_what_they_say(tmp_path: Path) -> None:
    registry = wmt14.sources_from_json(make_mirror(tmp_path / "mirror"))
    archives = {name: tmp_path / "mirror" / s.file for name, s in registry.items()}
    filters = wmt14.Filters(max_length=6, max_ratio=1.0, dedup=True)
    manifest = wmt14.extract(archives, tmp_path / "out", filters, registry)
    left_out = manifest["splits"]["train"]["left_out"]
    assert left_out["length"] > 0 and left_out["duplicate"] > 0
    assert manifest["splits"]["train"]["pairs"] + sum(left_out.values()) == TRAIN
    for line in (tmp_path / "out" / "train.en").read_text().splitlines():
        assert len(line.split(" ")) <= 6
    assert manifest["splits"]["newstest2014-full"]["pairs"] == 48  # tests are never filtered


def test_a_file_url_mirror_goes_through_the_pooch_cache(tmp_path, monkeypatch) -> None:
    registry = wmt14.sources_from_json(make_mirror(tmp_path / "mirror"))
    monkeypatch.setattr(wmt14, "cache_dir", lambda: tmp_path / "cache")
    url = (tmp_path / "mirror").as_uri()
    wmt14.download(tmp_path / "out", url, sources=registry)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        s.file for s in registry.values()
    )
    assert (tmp_path / "out" / "newstest2014-filtered.en").is_file()
    (tmp_path / "mirror" / "dev.tgz").write_bytes(b"not the archive")
    (tmp_path / "cache" / "dev.tgz").unlink()
    with pytest.raises(ValueError, match="SHA256 hash of downloaded file"):
        wmt14.download(tmp_path / "again", url, sources=registry)
    assert not (tmp_path / "cache" / "dev.tgz").exists() and not (tmp_path / "again").exists()


def test_the_bpe_streams_and_the_shards_hold_the_encoded_pairs(text: Path) -> None:
    tokenizer = learn_bpe([text / "train.en", text / "train.de"], vocab_size=320)
    lines = [*(text / "train.en").read_text().splitlines(),
             *(text / "train.de").read_text().splitlines()]  # fmt: skip
    assert tokenizer == BPETokenizer.train([normalize(s) for s in lines], vocab_size=320)
    meta = write_shard(tokenizer, text, "newstest2013", chunk=7)  # chunks of 7 pairs
    assert meta["pairs"] == 40 and meta["dtype"] == "uint16"
    shard = ShardedPairs(text / "shards", "newstest2013")
    en = (text / "newstest2013.en").read_text().splitlines()
    src, tgt = shard[39]
    assert tokenizer.detokenize(tokenizer.vocab.decode(src[:-1].tolist())) == en[39]
    assert tgt[0].item() == 1 and tgt[-1].item() == 2 and src[-1].item() == 2
    assert list(shard.src_lengths) == [len(shard[i][0]) for i in range(len(shard))]
    one = [b.src.tolist() for b in shard_loader(shard, 200, epoch=1, num_workers=0)]
    two = [b.src.tolist() for b in shard_loader(shard, 200, epoch=1, num_workers=1)]
    assert one == two and sum(len(b) for b in one) == 40  # a worker process gives the same


def test_a_damaged_shard_is_one_clear_error(text: Path, tmp_path: Path) -> None:
    tokenizer = learn_bpe([text / "newstest2013.en", text / "newstest2013.de"], vocab_size=300)
    write_shard(tokenizer, text, "newstest2013", out=tmp_path)
    ids = tmp_path / "newstest2013.en.ids"
    ids.write_bytes(ids.read_bytes()[:-2])
    with pytest.raises(ValueError, match="cut short"):
        ShardedPairs(tmp_path, "newstest2013")
    with pytest.raises(FileNotFoundError, match="write the shard first"):
        ShardedPairs(tmp_path, "train")


def test_a_shard_holding_an_id_outside_the_vocabulary_is_refused_as_it_is_read(
    text: Path, tmp_path: Path
) -> None:
    """An id past the vocabulary (same size: a flipped bit) is found as the shard is opened, by
    its smallest and largest ids, naming the file: not an IndexError in the embedding mid-epoch."""
    import numpy as np

    from annotated_transformer.util.errors import InputError

    tokenizer = learn_bpe([text / "newstest2013.en", text / "newstest2013.de"], vocab_size=300)
    write_shard(tokenizer, text, "newstest2013", out=tmp_path)
    ShardedPairs(tmp_path, "newstest2013")  # whole, it opens
    ids = tmp_path / "newstest2013.de.ids"
    damaged = np.fromfile(ids, dtype=np.uint16)
    damaged[17] = len(tokenizer)  # one past the last piece
    damaged.tofile(ids)
    with pytest.raises(InputError, match=r"newstest2013.de.ids: token 17 is id 300, outside the "
                       r"vocabulary of 300 pieces: the shard is damaged"):  # fmt: skip
        ShardedPairs(tmp_path, "newstest2013")


def test_a_tiny_model_trains_on_shards_and_is_scored_on_both_test_sets(text: Path) -> None:
    torch.manual_seed(0)
    tokenizer = learn_bpe([text / "train.en", text / "train.de"], vocab_size=320)
    write_shard(tokenizer, text, "train")
    train = ShardedPairs(text / "shards", "train")
    config = ModelConfig(len(tokenizer), len(tokenizer), N=1, d_model=32, d_ff=64, h=2,
                         share_embeddings=True, max_len=96)  # fmt: skip
    model = build_model(config)
    optimizer = make_optimizer(model.parameters())
    scheduler = noam_scheduler(optimizer, config.d_model, factor=2.0, warmup=50)
    criterion, state, kept = LabelSmoothing(len(tokenizer), PAD_ID, 0.1), TrainState(), []
    for epoch in range(2):
        batches = shard_loader(train, max_tokens=600, epoch=epoch, num_workers=1)
        for group in groups_of(batches, 1):
            train_step(model, group, criterion, optimizer, scheduler, state=state)
        kept.append({k: v.clone() for k, v in model.state_dict().items()})
    assert state.step == 2 * len(batches) and state.sentences == 2 * (TRAIN - 1)
    model.load_state_dict(average_state_dicts(kept[-2:]))
    results = score_newstest(bpe_translate(model, tokenizer, beam_size=2, max_len=96), text)
    assert {form: r["sentences"] for form, r in results.items()} == {"full": 48, "filtered": 40}
    for r in results.values():
        assert r["sacrebleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
        assert 0.0 <= r["sacrebleu"]["score"] <= 100.0


def test_download_refuses_what_does_not_fit(tmp_path: Path) -> None:
    registry = make_mirror(tmp_path / "mirror", misaligned="europarl-v7")
    done = download("--mirror", "mirror", "--test-sources", str(registry), "--data-dir", "out",
                    cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "training/europarl-v7.de-en.en has 240 sentences but" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mirror"]  # no output, no temporary
    done = download("--max-ratio", "0", cwd=tmp_path)
    assert done.returncode == 2 and "--max-ratio 0" in done.stderr
    done = subprocess.run([sys.executable, "-m", "annotated_transformer", "download", "--dedup"],
                          cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "only with --dataset wmt14-en-de" in done.stderr


# --- the command line, as a reader runs it -------------------------------------------------------

TINY = ("--preset", "wmt14-base", "--data-dir", "text", "--device", "cpu", "--no-progress",
        "--max-tokens", "400", "--accumulate", "1", "--set", "N=1", "--set", "d_model=32",
        "--set", "d_ff=64", "--set", "h=2", "--set", "max_len=64", "--set", "vocab_size=320",
        "--set", "warmup=20", "--set", "save_every=2", "--set", "eval_every=4", "--set",
        "bleu_sentences=8", "--set", "average_last=3")  # fmt: skip


def torchrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`annotated-transformer train` in two processes on this machine (gloo on a CPU)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc-per-node", "2", "--max-restarts", "0", "-m", "annotated_transformer",
               "train", *args]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def test_the_paper_pipeline_runs_through_the_command_line(text: Path) -> None:
    work = text.parent
    done = torchrun(*TINY, "--out", "refused", "--max-steps", "4", cwd=work)
    assert done.returncode != 0 and "annotated-transformer prepare --data-dir text" in done.stderr
    assert not (work / "refused").exists()  # many processes only read: prepare first
    done = cli("prepare", "--data-dir", "text", "--vocab-size", "320", cwd=work)
    assert done.returncode == 0, done.stderr
    shards = text / "shards-bpe320-min2"
    assert "320 BPE pieces, 539 training pairs" in done.stdout
    written = {p.name: p.stat().st_mtime_ns for p in shards.iterdir()}
    done = torchrun(*TINY, "--out", "run", "--max-steps", "4", cwd=work)
    assert done.returncode == 0, done.stderr
    assert "539 training and 40 validation pairs" in done.stderr and "2 process(es)" in done.stderr
    done = torchrun(*TINY, "--out", "run", "--max-steps", "6", "--resume", cwd=work)
    assert done.returncode == 0, done.stderr
    assert "(step 4, epoch 1" in done.stderr  # resumed, reading the same shards
    assert {p.name: p.stat().st_mtime_ns for p in shards.iterdir()} == written  # never rewritten
    run = work / "run"
    assert json.loads((run / "config.json").read_text())["pair"] == "en-de"
    assert BPETokenizer.load(run / "bpe.json") == BPETokenizer.load(shards / "bpe.json")
    done = cli("average", "run", "--out", "run/average.pt", cwd=work)
    assert done.returncode == 0 and "steps 2, 4, 6" in done.stdout, done.stderr
    evaluate = ("evaluate", "--checkpoint", "run/average.pt", "--data-dir", "text", "--split",
                "newstest2014-filtered", "newstest2014-full", "--beam", "2", "--results",
                "res")  # fmt: skip
    done = cli(*evaluate, cwd=work)
    assert done.returncode == 0, done.stderr
    for split, count, reference in (("newstest2014-filtered", 40, "newstest2014-filtered.de"),
                                    ("newstest2014-full", 48, "newstest2014-full.de")):  # fmt: skip
        record = json.loads((work / "res" / f"{split}-avg3-beam2.json").read_text())
        assert record["sentences"] == count and record["pair"] == "en-de"
        assert record["references"]["file"] == reference
        assert record["sacrebleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
        hypotheses = (work / "res" / f"{split}-avg3-beam2.de").read_text().splitlines()
        assert len(hypotheses) == count
        again = rescore(work / "res" / f"{split}-avg3-beam2.json", text)  # the record holds
        assert again["sacrebleu"]["score"] == record["sacrebleu"]["score"]
    done = cli("evaluate", "--checkpoint", "run/average.pt", "--split", "test2016", cwd=work)
    assert done.returncode == 2 and "not a split of wmt14-en-de" in done.stderr


def test_one_process_prepares_what_it_trains_from(text: Path, tmp_path: Path) -> None:
    from annotated_transformer.runs.presets import preset
    from annotated_transformer.training.run import train

    config = preset("wmt14-base", N=1, d_model=32, d_ff=64, h=2, max_len=64, vocab_size=300,
                    max_tokens=400, accumulate=1, max_steps=2, eval_every=2,
                    bleu_sentences=4)  # fmt: skip
    said: list[str] = []
    outcome = train(config, tmp_path / "run", data_dir=text, device="cpu", progress=False,
                    log=said.append)  # fmt: skip
    assert outcome.step == 2 and any(line.startswith("prepare: learning") for line in said)
    assert (text / "shards-bpe300-min2" / "train.json").is_file()
    assert not [p for p in text.iterdir() if p.name.startswith(".")]  # no temporary folder


def test_a_wmt_run_reads_bpe_pieces_only() -> None:
    from annotated_transformer.runs.presets import preset
    from annotated_transformer.util.settings import SettingError

    with pytest.raises(SettingError, match="settings dataset and tokenizer"):
        preset("wmt14-base", tokenizer="word", share_embeddings=False)
