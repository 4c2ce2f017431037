"""Label smoothing (§5.4): held to the textbook formula, to autograd and to the 2022 version.

The chapter "Regularization: dropout and label smoothing" checks these on one example; here they
are repeated on other sizes, seeds and padding ids, for smoothing 0, 0.1, 0.4 and 0.9:

- `smoothed_targets` is the 2022 Annotated Transformer's target distribution: 1 − ε at the target,
  0 at padding, ε/(V − 2) elsewhere, rows summing to 1, padded positions all zeros;
- `LabelSmoothing`, computed in closed form, equals the explicit KL Σ q·(log q − log p)
  (`F.kl_div`) and its gradient equals autograd's on that formula (float64, atol 1e-10), for
  (N, V) and (B, T, V) inputs;
- padded positions contribute nothing, even when their log-probabilities are −inf or NaN; an
  all-padding batch gives 0 and zero gradients; log p_pad = −inf at real positions is fine;
- smoothing 0 is the summed negative log-likelihood (`F.nll_loss`);
- it differs from soft-target cross-entropy by H(q) per token, and from PyTorch's
  `label_smoothing` exactly by PyTorch's different target;
- every bad argument is refused with a ValueError naming it.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from annotated_transformer.training.label_smoothing import (
    LabelSmoothing,
    smoothed_targets,
    smoothing_entropy,
)

SMOOTHINGS = [0.0, 0.1, 0.4, 0.9]


def true_dist_2022(x, target, size, padding_idx, smoothing):
    """The target built by the 2022 Annotated Transformer's LabelSmoothing.forward (x: (N, V))."""
    true_dist = x.clone()
    true_dist.fill_(smoothing / (size - 2))
    true_dist.scatter_(1, target.unsqueeze(1), 1.0 - smoothing)
    true_dist[:, padding_idx] = 0
    mask = torch.nonzero(target == padding_idx)
    if mask.dim() > 0:
        true_dist.index_fill_(0, mask.squeeze(), 0.0)
    return true_dist


def random_batch(shape, V, pad, seed):
    """float64 log-probabilities (*shape, V) and targets (*shape) with about a quarter padding."""
    gen = torch.Generator().manual_seed(seed)
    log_probs = torch.randn(*shape, V, dtype=torch.float64, generator=gen).log_softmax(-1)
    target = torch.randint(V, shape, generator=gen)
    target[torch.rand(shape, generator=gen) < 0.25] = pad
    target.view(-1)[0] = pad  # at least one padded position
    target.view(-1)[-1] = (pad + 1) % V  # and at least one real one
    return log_probs, target


def closed_and_explicit(log_probs, target, V, pad, eps):
    """(loss, grad) of LabelSmoothing and of F.kl_div with the explicit q."""
    ours_in = log_probs.clone().requires_grad_()
    ours = LabelSmoothing(V, pad, eps)(ours_in, target)
    (ours_grad,) = torch.autograd.grad(ours, ours_in)
    explicit_in = log_probs.clone().requires_grad_()
    q = smoothed_targets(target, V, pad, eps, dtype=torch.float64)
    explicit = F.kl_div(explicit_in, q, reduction="sum")
    (explicit_grad,) = torch.autograd.grad(explicit, explicit_in)
    return ours, ours_grad, explicit, explicit_grad


# --- the target distribution ---------------------------------------------------------------------


@pytest.mark.parametrize("eps", SMOOTHINGS)
@pytest.mark.parametrize(("V", "pad", "seed"), [(5, 0, 0), (17, 2, 1), (50, 49, 2)])
def test_smoothed_targets_is_the_2022_distribution(eps, V, pad, seed) -> None:
    log_probs, target = random_batch((30,), V, pad, seed)
    q = smoothed_targets(target, V, pad, eps, dtype=torch.float64)
    assert q.shape == (30, V) and q.dtype == torch.float64
    assert torch.equal(q, true_dist_2022(log_probs, target, V, pad, eps))
    keep = target != pad
    torch.testing.assert_close(q[keep].sum(-1), torch.ones(int(keep.sum()), dtype=torch.float64))
    assert (q[keep, target[keep]] == 1 - eps).all()
    assert (q[:, pad] == 0).all() and (q[~keep] == 0).all()
    others = q[keep].clone()
    others[torch.arange(len(others)), target[keep]] = -1  # hide the target
    others[:, pad] = -1  # and padding
    assert torch.allclose(others[others >= 0], torch.tensor(eps / (V - 2), dtype=torch.float64))


def test_smoothed_targets_any_shape_and_default_dtype() -> None:
    target = torch.tensor([[1, 2, 0], [3, 0, 0]])  # (B, T)
    q = smoothed_targets(target, 4, 0, 0.2)
    assert q.shape == (2, 3, 4) and q.dtype == torch.get_default_dtype()
    assert torch.equal(q.view(-1, 4), smoothed_targets(target.view(-1), 4, 0, 0.2))
    q0 = smoothed_targets(torch.tensor([1, 0]), 2, 0, 0.0)  # V = 2 is fine without smoothing
    assert q0.tolist() == [[0.0, 1.0], [0.0, 0.0]]


def test_smoothing_entropy_is_the_entropy_of_q() -> None:
    for V, eps in [(5, 0.1), (37000, 0.1), (10, 0.9), (3, 0.5)]:
        q = smoothed_targets(torch.tensor([1]), V, 0, eps, dtype=torch.float64)[0]
        h = -(q[q > 0] * q[q > 0].log()).sum().item()
        assert math.isclose(smoothing_entropy(V, eps), h, rel_tol=1e-12)
    assert smoothing_entropy(2, 0.0) == 0.0


# --- the loss: closed form against the explicit KL ------------------------------------------------


@pytest.mark.parametrize("eps", SMOOTHINGS)
@pytest.mark.parametrize(
    ("shape", "V", "pad", "seed"),
    [((40,), 7, 0, 0), ((64,), 23, 5, 1), ((3, 11), 13, 12, 2), ((2, 4, 6), 9, 1, 3)],
)
def test_closed_form_equals_explicit_kl_and_its_gradient(eps, shape, V, pad, seed) -> None:
    log_probs, target = random_batch(shape, V, pad, seed)
    ours, ours_grad, explicit, explicit_grad = closed_and_explicit(log_probs, target, V, pad, eps)
    assert ours.dim() == 0 and ours.dtype == torch.float64
    assert abs(ours.item() - explicit.item()) < 1e-10
    torch.testing.assert_close(ours_grad, explicit_grad, rtol=0, atol=1e-10)
    assert (ours_grad[target == pad] == 0).all()


@pytest.mark.parametrize("eps", SMOOTHINGS)
def test_three_dimensional_input_equals_flattened(eps) -> None:
    V, pad = 11, 3
    log_probs, target = random_batch((4, 7), V, pad, seed=7)  # (B, T, V), (B, T)
    criterion = LabelSmoothing(V, pad, eps)
    flat = criterion(log_probs.view(-1, V), target.view(-1))  # (B·T, V), (B·T,)
    assert abs(criterion(log_probs, target).item() - flat.item()) < 1e-12


@pytest.mark.parametrize("eps", SMOOTHINGS)
def test_padded_positions_contribute_nothing(eps) -> None:
    V, pad = 10, 0
    log_probs, target = random_batch((50,), V, pad, seed=11)
    criterion = LabelSmoothing(V, pad, eps)
    reference = criterion(log_probs, target).item()
    padded = target == pad
    changed = log_probs.clone()
    changed[padded] = torch.randn(int(padded.sum()), V, dtype=torch.float64)
    assert criterion(changed, target).item() == reference
    changed[padded] = -torch.inf
    assert criterion(changed, target).item() == reference
    changed[padded] = torch.nan
    changed.requires_grad_()
    loss = criterion(changed, target)
    loss.backward()
    assert loss.item() == reference
    assert (changed.grad[padded] == 0).all() and not changed.grad.isnan().any()
    only_real = criterion(log_probs[~padded], target[~padded]).item()
    assert abs(only_real - reference) < 1e-12


@pytest.mark.parametrize("eps", SMOOTHINGS)
def test_all_padding_gives_zero_and_zero_gradient(eps) -> None:
    V, pad = 8, 2
    log_probs = torch.randn(3, 4, V).log_softmax(-1)
    log_probs[..., pad] = -torch.inf  # even a model that never predicts padding
    log_probs.requires_grad_()
    loss = LabelSmoothing(V, pad, eps)(log_probs, torch.full((3, 4), pad))
    loss.backward()
    assert loss.item() == 0.0 and not loss.isnan()
    assert torch.equal(log_probs.grad, torch.zeros_like(log_probs))
    empty = LabelSmoothing(V, pad, eps)(torch.zeros(0, V), torch.zeros(0, dtype=torch.long))
    assert empty.item() == 0.0


@pytest.mark.parametrize("eps", SMOOTHINGS)
def test_zero_probability_on_padding_is_fine(eps) -> None:
    """A model that gives padding probability 0 (log p = −inf) gets a finite loss and gradient.

    The dense F.kl_div computes 0 · (−inf) = NaN in the padding column; the closed form never reads
    that column, and equals the explicit KL over the other columns.
    """
    V, pad = 12, 4
    logits = torch.randn(20, V, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    logits[:, pad] = -torch.inf
    log_probs = logits.log_softmax(-1).requires_grad_()
    target = torch.randint(V - 1, (20,), generator=torch.Generator().manual_seed(4))
    target[target >= pad] += 1  # never padding: every position is real
    ours = LabelSmoothing(V, pad, eps)(log_probs, target)
    (ours_grad,) = torch.autograd.grad(ours, log_probs)
    q = smoothed_targets(target, V, pad, eps, dtype=torch.float64)
    assert F.kl_div(log_probs.detach(), q, reduction="sum").isnan()  # the dense form fails
    cols = [j for j in range(V) if j != pad]
    explicit_in = log_probs.detach()[:, cols].requires_grad_()
    explicit = F.kl_div(explicit_in, q[:, cols], reduction="sum")
    (explicit_grad,) = torch.autograd.grad(explicit, explicit_in)
    assert math.isfinite(ours.item()) and abs(ours.item() - explicit.item()) < 1e-10
    torch.testing.assert_close(ours_grad[:, cols], explicit_grad, rtol=0, atol=1e-10)
    assert (ours_grad[:, pad] == 0).all()


@pytest.mark.parametrize(("V", "pad", "seed"), [(6, 0, 0), (31, 4, 1), (100, 99, 2)])
def test_no_smoothing_is_the_summed_nll(V, pad, seed) -> None:
    log_probs, target = random_batch((25,), V, pad, seed)
    nll = F.nll_loss(log_probs, target, ignore_index=pad, reduction="sum")
    ours = LabelSmoothing(V, pad)(log_probs, target)
    assert abs(ours.item() - nll.item()) < 1e-12


@pytest.mark.parametrize("eps", [0.1, 0.4, 0.9])
def test_cross_entropy_forms_ours_and_pytorchs(eps) -> None:
    V, pad = 15, 1
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(30, V, dtype=torch.float64, generator=gen)
    target = torch.randint(V, (30,), generator=gen)
    target[:4] = pad
    keep = target != pad
    n = int(keep.sum())

    ours = LabelSmoothing(V, pad, eps)(logits.log_softmax(-1), target)
    q = smoothed_targets(target, V, pad, eps, dtype=torch.float64)
    soft = F.cross_entropy(logits[keep], q[keep], reduction="sum")
    assert abs(ours.item() - (soft.item() - n * smoothing_entropy(V, eps))) < 1e-10

    torch_loss = F.cross_entropy(
        logits, target, ignore_index=pad, label_smoothing=eps, reduction="sum"
    )
    q_torch = (1 - eps) * F.one_hot(target, V).double() + eps / V  # mass on padding too
    soft_torch = F.cross_entropy(logits[keep], q_torch[keep], reduction="sum")
    assert abs(torch_loss.item() - soft_torch.item()) < 1e-10
    assert abs(torch_loss.item() - soft.item()) > 1e-3  # a different target, a different loss


def test_low_precision_inputs_are_summed_in_float32() -> None:
    V, pad = 1000, 0
    log_probs = torch.randn(16, V).log_softmax(-1)
    target = torch.randint(1, V, (16,))
    criterion = LabelSmoothing(V, pad, 0.1)
    reference = criterion(log_probs, target)
    for dtype in (torch.float16, torch.bfloat16):
        low = log_probs.to(dtype)
        loss = criterion(low, target)
        assert loss.dtype == torch.float32
        exact = criterion(low.float(), target)  # the same rounded inputs, in float32
        assert abs(loss.item() - exact.item()) < 1e-3 * abs(exact.item())
        assert abs(loss.item() - reference.item()) < 0.05 * abs(reference.item())


def test_extra_repr() -> None:
    assert repr(LabelSmoothing(37000, 2, 0.1)) == (
        "LabelSmoothing(size=37000, padding_idx=2, smoothing=0.1)"
    )


# --- bad arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 10, "padding_idx": 0, "smoothing": 1.0}, r"smoothing .* \[0, 1\), got 1\.0"),
        ({"size": 10, "padding_idx": 0, "smoothing": -0.1}, r"smoothing .* \[0, 1\), got -0\.1"),
        ({"size": 2, "padding_idx": 0, "smoothing": 0.1}, r"needs size >= 3.*size=2"),
        ({"size": 1, "padding_idx": 0, "smoothing": 0.0}, r"size .* >= 2, got 1"),
        (
            {"size": 10, "padding_idx": 10, "smoothing": 0.1},
            r"padding_idx .* \[0, size=10\), got 10",
        ),
        (
            {"size": 10, "padding_idx": -1, "smoothing": 0.1},
            r"padding_idx .* \[0, size=10\), got -1",
        ),
        ({"size": 10.0, "padding_idx": 0, "smoothing": 0.1}, r"size .* integer"),
    ],
)
def test_bad_settings_are_refused(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        LabelSmoothing(**kwargs)
    with pytest.raises(ValueError, match=message):
        smoothed_targets(torch.tensor([1]), **kwargs)


def test_bad_inputs_are_refused() -> None:
    V, pad = 10, 0
    criterion = LabelSmoothing(V, pad, 0.1)
    log_probs = torch.randn(6, V).log_softmax(-1)
    target = torch.tensor([1, 2, 3, 0, 5, 9])
    with pytest.raises(ValueError, match=r"size=10 classes .* got shape \(6, 9\)"):
        criterion(log_probs[:, :9], target)
    with pytest.raises(ValueError, match=r"size=10 classes .* got shape \(\)"):
        criterion(torch.tensor(0.0), target)
    with pytest.raises(ValueError, match=r"without their last dimension, \(6,\), got \(2, 3\)"):
        criterion(log_probs, target.view(2, 3))
    with pytest.raises(ValueError, match=r"without their last dimension, \(6,\), got \(5,\)"):
        criterion(log_probs, target[:5])
    with pytest.raises(ValueError, match=r"integer tensor .* got dtype torch.float32"):
        criterion(log_probs, target.float())
    with pytest.raises(ValueError, match=r"integer tensor .* got dtype torch.bool"):
        criterion(log_probs, target > 2)
    with pytest.raises(ValueError, match=r"\[0, size=10\), got values in \[0, 10\]"):
        criterion(log_probs, torch.tensor([1, 2, 3, 0, 5, 10]))
    with pytest.raises(ValueError, match=r"\[0, size=10\), got values in \[-1, 9\]"):
        criterion(log_probs, torch.tensor([1, 2, -1, 0, 5, 9]))
    with pytest.raises(ValueError, match=r"\[0, size=10\), got values in \[10, 10\]"):
        smoothed_targets(torch.tensor([10]), V, pad, 0.1)
    with pytest.raises(ValueError, match=r"integer tensor"):
        smoothed_targets(torch.tensor([1.0]), V, pad, 0.1)
