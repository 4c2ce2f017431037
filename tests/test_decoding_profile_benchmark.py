"""`benchmarks/decoding_profile.py`: where a decoding step's time goes, per step, in its record."""

import json

import decoding_profile
import pytest
import torch
from torch import nn

from annotated_transformer.decoding import batched
from annotated_transformer.decoding.cache import packed_step
from annotated_transformer.decoding.onednn import onednn_linears


def test_the_record_splits_every_search_into_steps_and_groups(data_dir, tmp_path, capsys):
    out = tmp_path / "profile.json"
    argv = ["--data-dir", str(data_dir), "--limit", "6", "--rounds", "2", "--output", str(out)]
    assert decoding_profile.main(argv) == 0
    record = json.loads(out.read_text())
    assert record["benchmark"] == "decoding_profile" and record["sentences"] == 6
    assert record["rounds"] == 2
    assert record["threads"] == record["workers"] == 1
    assert record["attention"]["attention"].startswith("PyTorch's")  # (the tests turn kernels off)
    assert list(record["results"]) == ["float32, greedy", "float32, beam 4", "int8, greedy",
                                       "int8, beam 4"]  # fmt: skip
    for found in record["results"].values():
        groups, outside = found["groups"], decoding_profile.OUTSIDE
        assert list(groups) == [*decoding_profile.GROUPS, "other operators", outside]
        assert sum(g["share"] for g in groups.values()) == pytest.approx(1, abs=0.01)
        assert found["steps"] > 0 and found["row_steps"] >= found["steps"]
        assert 0 < found["encoder_seconds"] + found["step_seconds"] < found["seconds"]
        assert found["searches"] >= 1 and 0 <= found["continuous_batching_bound"] < 1
        assert len(found["top_operators"]) == 12
        assert len(found["rounds_seconds"]) == 2 and found["seconds"] == min(
            found["rounds_seconds"]
        )
    linear = "linear layers' matrix products"
    assert record["results"]["int8, greedy"]["groups"][linear]["ms_per_step"] > 0  # int8's kernel
    assert batched.packed_step is packed_step  # the watch is taken off
    assert "float32, greedy:" in capsys.readouterr().out


def test_rounds_below_one_are_one_line(data_dir, tmp_path, capsys):
    out = tmp_path / "profile.json"
    argv = ["--data-dir", str(data_dir), "--rounds", "0", "--output", str(out)]
    assert decoding_profile.main(argv) == 1
    assert capsys.readouterr().err == (
        "decoding_profile.py: error: --rounds must be at least 1, got 0\n"
    )
    assert not out.exists()


def test_steps_counts_each_search_and_fits_the_fixed_cost():
    steps = decoding_profile.Steps()
    # two searches: rows 4, 4, 2 then 3, 1; each step 1 ms + 0.5 ms per row
    for rows, length in ((4, 0), (4, 1), (2, 2), (3, 0), (1, 1)):
        steps.calls.append((rows, length, 1e-3 + 0.5e-3 * rows))
    found = steps.summary(seconds=1.0)
    assert found["steps"] == 5 and found["row_steps"] == 14 and found["searches"] == 2
    assert found["mean_width"] == 3.5
    assert found["fixed_ms_per_step"] == pytest.approx(1.0, abs=1e-3)
    assert found["per_row_us"] == pytest.approx(500, abs=0.01)
    # at most 5 - 14 / 3.5 = 1 step saved, of 1 ms, in 1 s
    assert found["continuous_batching_bound"] == pytest.approx(0.001)


class Encoder(nn.Module):
    def encode(self, x):
        return x + 1


def test_steps_times_the_encoder_and_puts_everything_back_after_an_error():
    """The encoder timed is that of the model `translate_ids` decodes with (what
    `onednn_linears` makes of the watched model), and only the watched model's."""
    model, other = Encoder(), Encoder()
    with pytest.raises(RuntimeError), decoding_profile.Steps(model) as steps:
        assert batched.packed_step is not packed_step
        assert batched.onednn_linears is not onednn_linears
        decoding = batched.onednn_linears(model)  # as translate_ids calls it
        assert decoding.encode(1) == 2 and steps.encoder_seconds > 0
        seconds = steps.encoder_seconds
        assert batched.onednn_linears(other).encode(1) == 2 and steps.encoder_seconds == seconds
        raise RuntimeError("a search failed")
    assert batched.packed_step is packed_step and batched.onednn_linears is onednn_linears
    assert "encode" not in vars(decoding) and decoding.encode(1) == 2


def test_the_compiled_kernels_calls_are_one_region_each_counted_with_attention():
    """The profiler sees no operator inside the kernels: each call is a region of its own."""
    calls = []

    def kernels(query, key, value, mask=None, dropout=None):  # as the kernels are called
        calls.append(query)
        return query + 1, None

    attend = decoding_profile.visible(kernels)
    with torch.profiler.profile() as prof:
        out, weights = attend(torch.zeros(2), None, None)
        attend(torch.zeros(2), None, None, None, None)
    assert out.tolist() == [1.0, 1.0] and weights is None and len(calls) == 2
    regions = [e for e in prof.key_averages() if e.key == decoding_profile.KERNELS_EVENT]
    assert len(regions) == 1 and regions[0].count == 2
    assert decoding_profile.KERNELS_EVENT in decoding_profile.GROUPS["attention's matrix products"]
    assert decoding_profile.visible(None) is None  # translate_ids' own attention
