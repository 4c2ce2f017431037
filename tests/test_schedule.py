"""The optimizer and learning-rate schedule of §5.3, held to Eq. (3) and to PyTorch's step counting.

`rate` must equal Eq. (3) (written here as the two branches the paper describes in words) for
several model sizes, warmups and factors, peak exactly at step == warmup, give 0 at step 0, and
refuse each bad argument with an error naming it. `make_optimizer` must carry the paper's Adam
hyperparameters, not PyTorch's defaults. `noam_scheduler` must give the n-th optimizer step
(1-based, the paper's step_num) the rate `rate(n)`, and refuse an optimizer whose base rate would
silently scale the schedule.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch import nn

from annotated_transformer.training.schedule import make_optimizer, noam_scheduler, rate

CONFIGS = [  # (d_model, warmup, factor)
    (512, 4000, 1.0),
    (1024, 4000, 1.0),
    (256, 8000, 2.0),
    (64, 400, 0.5),
]


def eq3(step: int, d_model: int, warmup: int, factor: float) -> float:
    """Eq. (3) without a min: linear up to the peak (d_model·warmup)^-0.5, then ∝ step^-0.5."""
    peak = factor / math.sqrt(d_model * warmup)
    return peak * step / warmup if step <= warmup else peak * math.sqrt(warmup / step)


@pytest.mark.parametrize(("d_model", "warmup", "factor"), CONFIGS)
def test_rate_is_eq3(d_model: int, warmup: int, factor: float) -> None:
    for step in (1, 2, 100, warmup - 1, warmup, warmup + 1, 10 * warmup, 100_000, 300_000):
        assert rate(step, d_model, factor, warmup) == pytest.approx(
            eq3(step, d_model, warmup, factor), rel=1e-12
        )
    # the min form, literally
    step = 1234
    direct = factor * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
    assert rate(step, d_model, factor, warmup) == pytest.approx(direct, rel=1e-15)


@pytest.mark.parametrize(("d_model", "warmup", "factor"), CONFIGS)
def test_peak_is_at_warmup(d_model: int, warmup: int, factor: float) -> None:
    rates = [rate(step, d_model, factor, warmup) for step in range(1, 3 * warmup)]
    assert rates.index(max(rates)) + 1 == warmup
    assert max(rates) == pytest.approx(factor * (d_model * warmup) ** -0.5, rel=1e-12)


def test_base_model_numbers() -> None:
    assert rate(4000, 512) == pytest.approx(6.9877e-4, rel=1e-4)
    assert rate(4000, 512) / rate(100_000, 512) == pytest.approx(5.0, rel=1e-12)
    assert rate(2000, 512) == pytest.approx(rate(4000, 512) / 2, rel=1e-12)  # linear warmup


def test_step_zero_is_zero() -> None:
    assert rate(0, 512) == 0.0
    assert isinstance(rate(0, 512), float)
    assert rate(0, 64, factor=3.0, warmup=10) == 0.0


def test_defaults_are_the_papers() -> None:
    assert rate(10, 512) == rate(10, 512, 1.0, 4000)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(step=-1, model_size=512), "step=-1"),
        (dict(step=1, model_size=0), "model_size=0"),
        (dict(step=1, model_size=-512), "model_size=-512"),
        (dict(step=1, model_size=512, warmup=0), "warmup=0"),
        (dict(step=1, model_size=512, warmup=-5), "warmup=-5"),
        (dict(step=1, model_size=512, factor=0.0), "factor=0.0"),
        (dict(step=1, model_size=512, factor=-1.0), "factor=-1.0"),
        (dict(step=1, model_size=512, factor=math.inf), "factor=inf"),
        (dict(step=1, model_size=512, factor=math.nan), "factor=nan"),
    ],
)
def test_bad_values_are_refused_by_name(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match)):
        rate(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(step=True, model_size=512), "step must be an integer"),
        (dict(step=1.0, model_size=512), "step must be an integer"),
        (dict(step=1, model_size=512.0), "model_size must be an integer"),
        (dict(step=1, model_size=512, warmup=4000.0), "warmup must be an integer"),
        (dict(step=1, model_size=512, factor="1"), "factor must be a real number"),
    ],
)
def test_non_integers_are_refused_by_name(kwargs: dict, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        rate(**kwargs)


def test_make_optimizer_has_the_papers_hyperparameters() -> None:
    optimizer = make_optimizer(nn.Linear(3, 2).parameters())
    assert isinstance(optimizer, torch.optim.Adam)
    group = optimizer.param_groups[0]
    assert group["lr"] == 1.0
    assert group["betas"] == (0.9, 0.98)
    assert group["eps"] == 1e-9
    assert group["weight_decay"] == 0
    other = make_optimizer(nn.Linear(3, 2).parameters(), betas=(0.8, 0.99), eps=1e-6)
    assert (other.param_groups[0]["betas"], other.param_groups[0]["eps"]) == ((0.8, 0.99), 1e-6)


@pytest.mark.parametrize(("d_model", "warmup", "factor"), [(512, 4000, 1.0), (64, 4, 2.0)])
def test_nth_optimizer_step_runs_at_rate_n(d_model: int, warmup: int, factor: float) -> None:
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    optimizer = make_optimizer(model.parameters())
    scheduler = noam_scheduler(optimizer, d_model, factor=factor, warmup=warmup)
    x, y = torch.randn(8, 4), torch.randn(8, 3)
    for n in range(1, 11):
        assert optimizer.param_groups[0]["lr"] == rate(n, d_model, factor, warmup)
        before = model.weight.detach().clone()
        optimizer.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        assert not torch.equal(before, model.weight)  # a real update happened at that rate
        scheduler.step()
        assert optimizer.param_groups[0]["lr"] == rate(n + 1, d_model, factor, warmup)
        assert scheduler.get_last_lr() == [rate(n + 1, d_model, factor, warmup)]


def test_scheduler_drives_every_param_group() -> None:
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    optimizer = make_optimizer([{"params": a.parameters()}, {"params": b.parameters()}])
    scheduler = noam_scheduler(optimizer, 128, warmup=10)
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    assert [group["lr"] for group in optimizer.param_groups] == [rate(4, 128, warmup=10)] * 2


def test_scheduler_state_round_trips() -> None:
    model = nn.Linear(2, 2)
    optimizer = make_optimizer(model.parameters())
    scheduler = noam_scheduler(optimizer, 512)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    resumed_optimizer = make_optimizer(model.parameters())
    resumed = noam_scheduler(resumed_optimizer, 512)
    resumed_optimizer.load_state_dict(optimizer.state_dict())
    resumed.load_state_dict(scheduler.state_dict())
    resumed_optimizer.step()
    resumed.step()
    assert resumed_optimizer.param_groups[0]["lr"] == rate(7, 512)


def test_noam_scheduler_refuses_a_base_rate_other_than_one() -> None:
    params = list(nn.Linear(2, 2).parameters())
    with pytest.raises(ValueError, match=r"lr=1\.0.*param group 0 has lr=0\.5"):
        noam_scheduler(torch.optim.Adam(params, lr=0.5), 512)
    two_groups = torch.optim.Adam([{"params": params[:1]}, {"params": params[1:], "lr": 2.0}], lr=1)
    with pytest.raises(ValueError, match=r"param group 1 has lr=2\.0"):
        noam_scheduler(two_groups, 512)
    driven = make_optimizer(params)
    noam_scheduler(driven, 512)  # its lr is now rate(1): a second scheduler would rescale it
    with pytest.raises(ValueError, match="param group 0 has lr="):
        noam_scheduler(driven, 512)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(model_size=0), "model_size=0"),
        (dict(model_size=512, warmup=0), "warmup=0"),
        (dict(model_size=512, factor=0.0), "factor=0.0"),
    ],
)
def test_noam_scheduler_checks_its_arguments_at_once(kwargs: dict, match: str) -> None:
    optimizer = make_optimizer(nn.Linear(2, 2).parameters())
    with pytest.raises(ValueError, match=re.escape(match)):
        noam_scheduler(optimizer, **kwargs)
    assert optimizer.param_groups[0]["lr"] == 1.0  # nothing was changed
