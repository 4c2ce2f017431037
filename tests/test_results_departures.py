"""The 2022 version's checkpoint-averaging helper, run as published, fails twice.

`book/departures_2022.md` says so; the chapter "Results" showed it in a collapsed cell before
issue 42 took the demonstration off the reading path.
"""

import pytest
import torch

from annotated_transformer.model.transformer import make_model


def average(model, models):
    "Average models into model"
    for ps in zip(*[m.params() for m in [model] + models]):  # noqa: B905, RUF005 (as published)
        ps[0].copy_(torch.sum(*ps[1:]) / len(ps[1:]))


def test_the_2022_averaging_helper_cannot_run() -> None:
    models = [make_model(11, 11, N=1, d_model=16, d_ff=32, h=2) for _ in range(3)]
    with pytest.raises(AttributeError, match="params"):  # nn.Module has no params()
        average(models[0], models[1:])
    ps = next(zip(*[m.parameters() for m in models[1:]], strict=True))  # with .parameters()
    with pytest.raises(TypeError):  # torch.sum(p1, p2) reads p2 as the dimension
        torch.sum(*ps)
