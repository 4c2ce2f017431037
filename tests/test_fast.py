"""Part V, "Making it fast": every fast path equals the reference code it replaces.

The fused attention and projections, `accelerate`, the loss from logits, fused Adam, bfloat16
autocast and `torch.compile` against the book's reference code; training with the fast paths
against the reference. (The benchmarks' tests are in test_benchmarks.py.) Tests that read
Multi30k are skipped where it is not available.
"""

import copy
import math

import pytest
import torch
from random_batches import PAD, a_batch

from annotated_transformer.model.attention import MultiHeadedAttention
from annotated_transformer.model.transformer import make_model
from annotated_transformer.runs.presets import preset
from annotated_transformer.training.fused import (
    FastMultiHeadedAttention,
    LabelSmoothingFromLogits,
    accelerate,
)
from annotated_transformer.training.label_smoothing import LabelSmoothing
from annotated_transformer.training.loop import batch_loss, train_step
from annotated_transformer.training.run import train
from annotated_transformer.training.schedule import make_optimizer, noam_scheduler


def check_attention(reference: MultiHeadedAttention, query, key, value, mask, fused=True):
    fast = FastMultiHeadedAttention.from_reference(reference, fused_qkv=fused)
    same_input = query is key  # keep the identity: it decides which fused product is used
    for module in (reference, fast):
        q = query.detach().clone().requires_grad_()
        k = q if same_input else key.detach().clone().requires_grad_()
        v = k if key is value else value.detach().clone().requires_grad_()
        out = module(q, k, v, mask)
        out.backward(torch.linspace(-1, 1, out.numel()).view_as(out))
        grads = [t.grad for t in dict.fromkeys([q, k, v])] + [
            p.grad.clone() for p in module.parameters()
        ]
        module.zero_grad(set_to_none=True)
        if module is reference:
            expected = (out.detach(), grads)
    torch.testing.assert_close(out.detach(), expected[0], rtol=1e-5, atol=1e-5)
    for got, want in zip(grads, expected[1], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


# --- fused attention ---------------------------------------------------------------------------


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize(
    "options", [{}, {"bias": True}, {"d_k": 4, "d_v": 12}, {"d_k": 6, "d_v": 2, "bias": True}]
)
def test_fast_attention_equals_the_reference_for_every_use(options, fused):
    torch.manual_seed(0)
    b = a_batch()
    mha = MultiHeadedAttention(4, 16, dropout=0.0, **options)
    x = torch.randn(b.size, b.src.size(1), 16)  # (B, S, d_model)
    y = torch.randn(b.size, b.tgt_in.size(1), 16)  # (B, T, d_model)
    check_attention(mha, x, x, x, b.src_mask, fused)  # encoder self-attention, (B, 1, S)
    check_attention(mha, y, y, y, b.tgt_mask, fused)  # decoder self-attention, (B, T, T)
    check_attention(mha, y, x, x, b.src_mask, fused)  # encoder-decoder attention
    check_attention(mha, y, x, x.flip(1), b.src_mask, fused)  # key is not value
    check_attention(mha, y, y, y, None, fused)  # no mask
    causal = torch.ones(1, y.size(1), y.size(1), dtype=torch.bool).tril()
    check_attention(mha, y, y, y, causal, fused)  # (1, T, T), broadcast over the batch
    per_head = b.tgt_mask.unsqueeze(1).expand(-1, 4, -1, -1).clone()  # (B, h, T, T)
    per_head[:, 1] = True
    check_attention(mha, y, y, y, per_head, fused)


def test_a_query_that_may_attend_to_nothing_gets_zeros_like_the_reference():
    torch.manual_seed(1)
    b = a_batch()
    mha = MultiHeadedAttention(2, 8, dropout=0.0)
    y = torch.randn(b.size, b.tgt_in.size(1), 8)
    mask = b.tgt_mask.clone()
    mask[0, 3] = False
    mask[2] = False  # a whole sentence
    check_attention(mha, y, y, y, mask)
    fast = FastMultiHeadedAttention.from_reference(mha)
    out = fast(y, y, y, mask)
    assert out[0, 3].abs().max() == 0 and out[2].abs().max() == 0
    assert torch.isfinite(out).all()


def test_from_reference_shares_the_parameters_and_draws_no_random_numbers():
    mha = MultiHeadedAttention(4, 16, dropout=0.3, d_k=8, d_v=2)
    state = torch.get_rng_state()
    fast = FastMultiHeadedAttention.from_reference(mha)
    assert torch.equal(torch.get_rng_state(), state)
    assert [id(p) for p in fast.parameters()] == [id(p) for p in mha.parameters()]
    assert list(fast.state_dict()) == list(mha.state_dict())
    assert (fast.h, fast.d_k, fast.d_v, fast.dropout.p) == (4, 8, 2, 0.3)
    assert fast.training and not FastMultiHeadedAttention.from_reference(mha.eval()).training
    assert "fused_qkv=True" in repr(fast)


def test_attention_dropout_is_applied_in_training_only():
    torch.manual_seed(2)
    mha = MultiHeadedAttention(2, 8, dropout=0.5)
    fast = FastMultiHeadedAttention.from_reference(mha)
    y = torch.randn(3, 5, 8)
    assert not torch.allclose(fast(y, y, y), fast(y, y, y))  # two different dropout draws
    mha.eval(), fast.eval()
    expected = mha(y, y, y)
    torch.testing.assert_close(fast(y, y, y), expected)
    # In expectation, dropout leaves the output unchanged (weights are rescaled by 1/(1-p)).
    fast.train()
    mean = torch.stack([fast(y, y, y) for _ in range(3000)]).mean(0)
    torch.testing.assert_close(mean, expected, rtol=0, atol=0.05)


@pytest.mark.parametrize(
    "query, key, mask, message",
    [
        (torch.randn(2, 5, 7), torch.randn(2, 5, 8), None, "query of shape"),
        (torch.randn(2, 5, 8), torch.randn(3, 5, 8), None, "key and value of shape"),
        (torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.ones(2, 5, 5), "bool"),
        (
            torch.randn(2, 5, 8),
            torch.randn(2, 5, 8),
            torch.ones(2, 4, 5).bool(),
            "cannot broadcast",
        ),
        (torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.ones(2, 3, 5, 5).bool(), "(B, h, T_q"),
    ],
)
def test_fast_attention_refuses_bad_input_like_the_reference(query, key, mask, message):
    mha = MultiHeadedAttention(2, 8, dropout=0.0)
    for module in (mha, FastMultiHeadedAttention.from_reference(mha)):
        with pytest.raises((ValueError, TypeError), match=message.replace("(", r"\(")):
            module(query, key, key, mask)


# --- whole models ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options", [{}, {"norm_first": True}, {"positional": "learned", "d_k": 4, "d_v": 12}]
)
def test_an_accelerated_model_has_the_same_loss_gradients_and_state_dict(options):
    torch.manual_seed(3)
    model = make_model(40, 40, N=2, d_model=16, d_ff=32, h=4, dropout=0.0, **options)
    fast = accelerate(copy.deepcopy(model))
    assert accelerate(fast) is fast  # idempotent: nothing left to replace
    kinds = [type(m) for m in fast.modules() if isinstance(m, MultiHeadedAttention)]
    assert kinds == [FastMultiHeadedAttention] * 6
    assert list(fast.state_dict()) == list(model.state_dict())
    b, criterion = a_batch(V=40), LabelSmoothing(40, PAD, 0.1)
    losses = []
    for m in (model, fast):
        loss = batch_loss(m, b, criterion)
        loss.backward()
        losses.append(loss.item())
    assert math.isclose(losses[0], losses[1], rel_tol=1e-6)
    for (name, p), q in zip(model.named_parameters(), fast.parameters(), strict=True):
        torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-6, msg=name)
    reference = make_model(40, 40, N=2, d_model=16, d_ff=32, h=4, dropout=0.0, **options)
    reference.load_state_dict(fast.state_dict())  # a checkpoint of one loads into the other


def test_a_checkpoint_of_an_accelerated_model_translates_with_the_cached_decoder():
    from annotated_transformer.decoding.search import greedy_decode

    torch.manual_seed(4)
    model = make_model(40, 40, N=2, d_model=16, d_ff=32, h=4, dropout=0.0).eval()
    fast = accelerate(copy.deepcopy(model)).eval()
    b = a_batch(V=40)
    with torch.no_grad():
        ys = [greedy_decode(m, b.src, b.src_mask, 10, 1, 2) for m in (model, fast)]
    assert torch.equal(ys[0], ys[1])


# --- the loss from logits ----------------------------------------------------------------------


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.4])
@pytest.mark.parametrize("pad", [0, 2, 9])
def test_the_loss_from_logits_equals_label_smoothing_and_its_gradient(smoothing, pad):
    torch.manual_seed(5)
    logits = torch.randn(4, 6, 10, dtype=torch.float64) * 3
    target = torch.randint(0, 10, (4, 6))
    target[0] = pad  # a sentence of padding only
    target[1, 3:] = pad
    z1, z2 = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    ours = LabelSmoothingFromLogits(10, pad, smoothing)(z1, target)
    theirs = LabelSmoothing(10, pad, smoothing)(z2.log_softmax(-1), target)
    ours.backward(torch.tensor(2.5, dtype=torch.float64))
    theirs.backward(torch.tensor(2.5, dtype=torch.float64))
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(z1.grad, z2.grad, rtol=1e-10, atol=1e-12)
    assert (z1.grad[0] == 0).all()  # padded positions get no gradient
    small, small_target = logits[:2, :3].clone().requires_grad_(), target[:2, :3]
    loss = LabelSmoothingFromLogits(10, pad, smoothing)
    assert torch.autograd.gradcheck(lambda z: loss(z, small_target), (small,))


def test_the_loss_from_logits_sums_in_float32_for_half_logits():
    torch.manual_seed(6)
    logits = torch.randn(3, 5, 50)
    target = torch.randint(1, 50, (3, 5))
    z = logits.bfloat16().requires_grad_()
    loss = LabelSmoothingFromLogits(50, PAD, 0.1)(z, target)
    loss.backward()
    assert loss.dtype == torch.float32 and z.grad.dtype == torch.bfloat16
    exact = LabelSmoothing(50, PAD, 0.1)(z.detach().float().log_softmax(-1), target)
    torch.testing.assert_close(loss, exact, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("smoothing", [0.1, 0.0])
def test_the_loss_in_chunks_is_the_loss_whole_bit_for_bit(dtype, smoothing):
    """Issue 49: each row's arithmetic is the same whatever the chunk, so any chunk gives the
    same loss and gradient, exactly, and (B, T) positions are chunked as B·T rows."""
    torch.manual_seed(0)
    logits = torch.randn(3, 37, 50, dtype=torch.float64).to(dtype)  # (B, T, V)
    target = torch.randint(0, 50, (3, 37))
    target[0, -5:] = 1  # padding

    def loss_and_grad(chunk):
        z = logits.clone().requires_grad_()
        loss = LabelSmoothingFromLogits(50, 1, smoothing, chunk=chunk)(z, target)
        loss.backward()
        return loss, z.grad

    whole = loss_and_grad(None)
    for chunk in (1, 7, 37, 110, 111, 4096):
        loss, grad = loss_and_grad(chunk)
        assert torch.equal(loss, whole[0]) and torch.equal(grad, whole[1]), chunk
        assert grad.dtype == dtype and grad.shape == (3, 37, 50)
    with pytest.raises(ValueError, match="chunk must be a positive number of positions"):
        LabelSmoothingFromLogits(50, 1, 0.1, chunk=0)


@pytest.mark.parametrize(
    "logits, target, message",
    [
        (torch.randn(2, 3, 9), torch.zeros(2, 3, dtype=torch.long), "size=10 classes"),
        (torch.randn(2, 3, 10), torch.zeros(2, 4, dtype=torch.long), "shape of the scores"),
        (torch.randn(2, 3, 10), torch.zeros(2, 3), "integer tensor"),
        (torch.randn(2, 3, 10), torch.full((2, 3), 10), r"\[0, size=10\)"),
    ],
)
def test_the_loss_from_logits_refuses_bad_input(logits, target, message):
    with pytest.raises(ValueError, match=message):
        LabelSmoothingFromLogits(10, PAD, 0.1)(logits, target)


def test_the_training_loop_gives_logits_to_a_loss_that_takes_them():
    torch.manual_seed(7)
    model = make_model(40, 40, N=1, d_model=16, d_ff=32, h=4, dropout=0.0)
    b = a_batch(V=40)
    a = batch_loss(model, b, LabelSmoothingFromLogits(40, PAD, 0.1))
    c = batch_loss(model, b, LabelSmoothing(40, PAD, 0.1))
    torch.testing.assert_close(a, c, rtol=1e-6, atol=1e-6)


# --- optimizer, bfloat16, torch.compile --------------------------------------------------------


def test_fused_adam_takes_the_same_steps():
    torch.manual_seed(8)
    one = make_model(30, 30, N=1, d_model=16, d_ff=32, h=4, dropout=0.0)
    two = copy.deepcopy(one)
    b = a_batch(V=30)
    for model, fused in ((one, False), (two, True)):
        optimizer = make_optimizer(model.parameters(), fused=fused)
        assert bool(optimizer.defaults["fused"]) is fused
        scheduler = noam_scheduler(optimizer, 16, 1.0, warmup=3)
        for _ in range(6):
            train_step(model, [b], LabelSmoothing(30, PAD, 0.1), optimizer, scheduler)
    for p, q in zip(one.parameters(), two.parameters(), strict=True):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)  # float rounding only


def test_bfloat16_autocast_stays_close_to_float32():
    torch.manual_seed(9)
    model = make_model(40, 40, N=2, d_model=32, d_ff=64, h=4, dropout=0.0).eval()
    b = a_batch(V=40)
    for criterion in (LabelSmoothing(40, PAD, 0.1), LabelSmoothingFromLogits(40, PAD, 0.1)):
        with torch.no_grad():
            exact = batch_loss(model, b, criterion)
            rounded = batch_loss(model, b, criterion, autocast=torch.bfloat16)
        assert rounded.dtype == torch.float32
        assert abs(rounded.item() - exact.item()) / exact.item() < 0.01


def test_torch_compile_gives_the_same_loss_and_gradients():
    torch.manual_seed(10)
    model = accelerate(make_model(30, 30, N=1, d_model=16, d_ff=32, h=4, dropout=0.0))
    compiled = torch.compile(copy.deepcopy(model), dynamic=True)
    criterion = LabelSmoothingFromLogits(30, PAD, 0.1)
    for seed, T in ((0, 8), (1, 5)):  # two shapes: one compiled graph for both
        b = a_batch(seed, T=T, V=30)
        results = []
        for m in (model, compiled):
            loss = batch_loss(m, b, criterion)
            loss.backward()
            results.append((loss.detach(), [p.grad.clone() for p in m.parameters()]))
            m.zero_grad(set_to_none=True)
        torch.testing.assert_close(results[1][0], results[0][0], rtol=1e-5, atol=1e-5)
        for got, want in zip(results[1][1], results[0][1], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


# --- the trainer -------------------------------------------------------------------------------


def test_training_with_the_fast_paths_follows_the_reference(data_dir, tmp_path):
    finals = []
    for fast in (False, True):
        config = preset("tiny", epochs=None, max_steps=4, dropout=0.0, eval_every=1000, fast=fast)
        outcome = train(
            config,
            tmp_path / str(fast),
            data_dir=data_dir,
            progress=False,
            log=lambda message: None,
        )
        finals.append(outcome.model.state_dict())
    for name, weight in finals[0].items():
        torch.testing.assert_close(finals[1][name], weight, rtol=1e-3, atol=1e-4, msg=name)
