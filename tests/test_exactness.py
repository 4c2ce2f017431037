"""Issue 61: the fast path keeps its agreement with the simple decoders in float64.

`results/decoding-exactness-cpu.json` (benchmarks/decoding_exactness.py) counts, on every split,
the sentences that `translate_ids` (float32, batched, cached: what `translate` and the
`Translator` run) translates exactly as `simple_greedy_decode` and `simple_beam_search` do in
float64 on the same weights, and keeps test2016's float64 translations. A faster path may change
the last bits of a float and so, rarely, a token, but it must keep at least the recorded
agreement less 0.5 % of the sentences: here on all of test2016, greedy and beam 4, against the
kept translations. The benchmark itself runs end to end on a few sentences.
"""

import json
from pathlib import Path

import decoding_exactness
import pytest

from annotated_transformer.data.multi30k import read_split
from annotated_transformer.decoding.batched import translate_ids
from annotated_transformer.translator import Translator

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / "results" / "decoding-exactness-cpu.json"
MARGIN = 0.005  # the share of sentences a faster path may change


@pytest.fixture(scope="module")
def record() -> dict:
    return json.loads(RECORD.read_text(encoding="utf-8"))


def test_the_record_counts_every_split_and_search(record):
    assert record["limit"] is None  # every sentence of every split
    assert set(record["results"]) == {"val", "test2016", "test2017", "test2018", "mscoco"}
    for split, by_search in record["results"].items():
        assert list(by_search) == list(decoding_exactness.SEARCHES)
        for found in by_search.values():
            assert found["sentences"] >= 461  # mscoco, the smallest split
            assert found["share"] == round(found["agree"] / found["sentences"], 4)
            assert len(found["first_differing"]) == min(10, found["sentences"] - found["agree"])
            assert ("references" in found) == (split == "test2016")


@pytest.mark.parametrize("search", list(decoding_exactness.SEARCHES))
def test_the_fast_path_agrees_with_the_float64_translations(record, data_dir, search):
    kept = record["results"]["test2016"][search]
    shipped = Translator.pretrained(device="cpu")
    german = [de for de, _ in read_split("test2016", data_dir)]
    found = translate_ids(shipped.model, shipped.encode(german), shipped.tgt_vocab,
                          max_len=shipped.config.model.max_len,
                          beam_size=decoding_exactness.SEARCHES[search])  # fmt: skip
    agree = sum(
        " ".join(tokens) == ref for tokens, ref in zip(found, kept["references"], strict=True)
    )
    assert len(found) == kept["sentences"] == 1000
    assert agree >= (kept["share"] - MARGIN) * len(found), (search, agree, kept["agree"])


def test_the_benchmark_counts_and_keeps_the_float64_translations(data_dir, tmp_path, capfd):
    output = tmp_path / "exactness.json"
    argv = ["--splits", "test2016,mscoco", "--limit", "3", "--data-dir", str(data_dir),
            "--output", str(output)]  # fmt: skip
    assert decoding_exactness.main(argv) == 0
    results = json.loads(output.read_text(encoding="utf-8"))["results"]
    assert list(results) == ["test2016", "mscoco"]
    for split, by_search in results.items():
        for found in by_search.values():
            assert found["sentences"] == 3 and 0 <= found["agree"] <= 3
            assert len(found.get("references", [])) == (3 if split == "test2016" else 0)
    assert "test2016, beam 4:" in capfd.readouterr().err  # (from its pool processes)


def test_a_split_that_does_not_exist_is_one_line(tmp_path, capsys):
    output = tmp_path / "exactness.json"
    assert decoding_exactness.main(["--splits", "test2016,test2099", "--output", str(output)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown Multi30k split 'test2099'" in err
    assert not output.exists()
