"""Part I, the model: held to the paper and to PyTorch's own kernels.

Each check of the chapters "The model architecture", "Attention", "Feed-forward, embeddings and
positions" and "The full model" is repeated here on other sizes and seeds, with the bad inputs that
must be refused.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from annotated_transformer.model.attention import MultiHeadedAttention, attention
from annotated_transformer.model.embeddings import Embeddings
from annotated_transformer.model.encoder_decoder import Generator
from annotated_transformer.model.feed_forward import PositionwiseFeedForward
from annotated_transformer.model.layers import Encoder, EncoderLayer, SublayerConnection
from annotated_transformer.model.masks import padding_mask, subsequent_mask, target_mask
from annotated_transformer.model.positional import (
    LearnedPositionalEncoding,
    PositionalEncoding,
    sinusoidal_table,
)
from annotated_transformer.model.transformer import (
    ModelConfig,
    build_model,
    count_parameters,
    make_model,
)

PAD = 0


def meta_count(config: ModelConfig) -> int:
    with torch.device("meta"):
        return count_parameters(build_model(config))


# --- masks -------------------------------------------------------------------------------------


def test_subsequent_mask_is_bool_lower_triangle() -> None:
    mask = subsequent_mask(5)
    assert mask.shape == (1, 5, 5) and mask.dtype == torch.bool
    assert torch.equal(mask[0], torch.ones(5, 5, dtype=torch.bool).tril())
    assert mask[0, 2, 2] and mask[0, 2, 0] and not mask[0, 2, 3]
    with pytest.raises(ValueError, match="positive size"):
        subsequent_mask(0)


def test_padding_and_target_masks() -> None:
    tgt = torch.tensor([[5, 6, 7], [5, 6, PAD]])
    assert padding_mask(tgt, PAD).tolist() == [[[True, True, True]], [[True, True, False]]]
    mask = target_mask(tgt, PAD)
    assert mask.shape == (2, 3, 3)
    assert torch.equal(mask[0], subsequent_mask(3)[0])
    assert not mask[1, :, 2].any()
    with pytest.raises(ValueError, match=r"\(B, S\), got \(3,\)"):
        padding_mask(torch.tensor([1, 2, 3]), PAD)


# --- scaled dot-product attention ---------------------------------------------------------------


@pytest.mark.parametrize("masking", ["none", "padding", "causal", "both"])
@pytest.mark.parametrize("T_q", [1, 6])
def test_attention_equals_scaled_dot_product_attention(masking: str, T_q: int) -> None:
    g = torch.Generator().manual_seed(T_q)
    B, h, T_k, d_k, d_v = 3, 4, 6, 16, 8
    q = torch.randn(B, h, T_q, d_k, generator=g, dtype=torch.float64)
    k = torch.randn(B, h, T_k, d_k, generator=g, dtype=torch.float64)
    v = torch.randn(B, h, T_k, d_v, generator=g, dtype=torch.float64)
    lengths = torch.tensor([6, 4, 2])
    padding = (torch.arange(T_k) < lengths[:, None])[:, None, None, :]  # (B, 1, 1, T_k)
    causal = torch.ones(T_q, T_k, dtype=torch.bool).tril(diagonal=T_k - T_q)  # (T_q, T_k)
    mask = {"none": None, "padding": padding, "causal": causal, "both": padding & causal}[masking]
    ours, weights = attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-6)
    assert weights.shape == (B, h, T_q, T_k)
    if mask is not None:
        assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()


def test_attention_row_with_no_allowed_key_is_zero_not_nan() -> None:
    x = torch.randn(1, 3, 4, dtype=torch.float64)
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    out, weights = attention(x, x, x, mask)
    assert not out.isnan().any() and (out[0, 1] == 0).all() and (weights[0, 1] == 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(x, x, x, attn_mask=mask))


def test_attention_dropout_acts_on_weights_but_returns_undropped_weights() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    out, weights = attention(x, x, x, dropout=nn.Dropout(0.5))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 5))
    assert not torch.allclose(out, weights @ x)


@pytest.mark.parametrize(
    ("mask", "error", "message"),
    [
        (torch.ones(3, 1, 1, 5, dtype=torch.bool), ValueError, r"\(3, 1, 1, 5\) cannot broadcast"),
        (torch.ones(5, 4, dtype=torch.bool), ValueError, r"\(2, 4, 5, 5\)"),
        (torch.ones(2, 1, 1, 5), TypeError, "must be a bool tensor"),
    ],
)
def test_attention_rejects_bad_masks(mask: torch.Tensor, error: type, message: str) -> None:
    q = torch.randn(2, 4, 5, 8)
    with pytest.raises(error, match=message):
        attention(q, q, q, mask)


def test_attention_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match=r"query \(2, 5, 8\), key \(2, 5, 4\)"):
        attention(torch.randn(2, 5, 8), torch.randn(2, 5, 4), torch.randn(2, 5, 4))


# --- multi-head attention ---------------------------------------------------------------------


def copy_from_torch(theirs: nn.MultiheadAttention, ours: MultiHeadedAttention) -> None:
    d = theirs.embed_dim
    with torch.no_grad():
        for i, linear in enumerate((ours.w_q, ours.w_k, ours.w_v)):
            linear.weight.copy_(theirs.in_proj_weight[i * d : (i + 1) * d])
            if theirs.in_proj_bias is not None:
                linear.bias.copy_(theirs.in_proj_bias[i * d : (i + 1) * d])
        ours.w_o.weight.copy_(theirs.out_proj.weight)
        if theirs.out_proj.bias is not None:
            ours.w_o.bias.copy_(theirs.out_proj.bias)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(("h", "d_model"), [(1, 16), (4, 32), (8, 64)])
def test_multi_head_attention_equals_torch_multihead_attention(
    bias: bool, h: int, d_model: int
) -> None:
    torch.manual_seed(h)
    B, T, S = 3, 5, 7
    theirs = nn.MultiheadAttention(d_model, h, bias=bias, batch_first=True, dtype=torch.float64)
    theirs.eval()
    ours = MultiHeadedAttention(h, d_model, dropout=0.0, bias=bias).double()
    copy_from_torch(theirs, ours)
    x = torch.randn(B, T, d_model, dtype=torch.float64)
    memory = torch.randn(B, S, d_model, dtype=torch.float64)
    # decoder self-attention: our mask is True = attend, theirs True = blocked
    tgt_keep = torch.arange(T) < torch.tensor([5, 3, 1])[:, None]  # (B, T)
    causal = subsequent_mask(T)[0]
    expected, expected_weights = theirs(x, x, x, key_padding_mask=~tgt_keep, attn_mask=~causal)
    got, weights = ours.attend(x, x, x, tgt_keep[:, None, :] & causal)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)
    torch.testing.assert_close(weights.mean(1), expected_weights, rtol=0, atol=1e-10)
    # encoder-decoder attention with source padding
    src_keep = torch.arange(S) < torch.tensor([7, 2, 5])[:, None]  # (B, S)
    expected, _ = theirs(x, memory, memory, key_padding_mask=~src_keep)
    got = ours(x, memory, memory, src_keep[:, None, :])
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-10)


def test_multi_head_attention_accepts_a_four_dimensional_mask() -> None:
    layer = MultiHeadedAttention(2, 8, dropout=0.0)
    x = torch.randn(1, 4, 8)
    per_head = torch.ones(1, 2, 4, 4, dtype=torch.bool)
    per_head[0, 1] = subsequent_mask(4)[0]  # only head 1 is causal
    _, weights = layer.attend(x, x, x, per_head)
    assert (weights[0, 1].triu(1) == 0).all() and (weights[0, 0].triu(1) > 0).any()


def test_multi_head_attention_with_table3_row_b_widths() -> None:
    layer = MultiHeadedAttention(8, 512, d_k=16)
    assert layer.w_q.weight.shape == (8 * 16, 512) and layer.w_v.weight.shape == (512, 512)
    x = torch.randn(2, 3, 512)
    assert layer(x, x, x).shape == (2, 3, 512)


def test_multi_head_attention_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="d_model=512 is not divisible by h=6"):
        MultiHeadedAttention(6, 512)
    layer = MultiHeadedAttention(8, 512)
    with pytest.raises(
        ValueError, match=r"query of shape \(B, positions, d_model=512\), got \(2, 5, 256\)"
    ):
        x = torch.randn(2, 5, 256)
        layer(x, x, x)
    x = torch.randn(2, 5, 512)
    with pytest.raises(ValueError, match=r"key \(1, 5, 512\) and value \(1, 5, 512\)"):
        layer(x, x[:1], x[:1])  # a memory of batch 1 for a query of batch 2
    with pytest.raises(ValueError, match=r"key \(2, 5, 512\) and value \(2, 4, 512\)"):
        layer(x, x, x[:, :4])
    with pytest.raises(
        ValueError, match=r"\(2, 1, 4\) cannot broadcast to \(B, T_q, T_k\) = \(2, 5, 5\)"
    ):
        layer(x, x, x, torch.ones(2, 1, 4, dtype=torch.bool))


# --- layers ---------------------------------------------------------------------------------


def test_sublayer_connection_post_norm_and_pre_norm() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)
    sublayer = nn.Linear(8, 8)
    post = SublayerConnection(8, dropout=0.0)
    pre = SublayerConnection(8, dropout=0.0, norm_first=True)
    torch.testing.assert_close(post(x, sublayer), F.layer_norm(x + sublayer(x), (8,), eps=1e-6))
    torch.testing.assert_close(pre(x, sublayer), x + sublayer(F.layer_norm(x, (8,), eps=1e-6)))


def test_residual_dropout_is_on_the_sublayer_output_only() -> None:
    block = SublayerConnection(8, dropout=1.0)  # drops every value of the sub-layer's output
    x = torch.randn(4, 3, 8)
    torch.testing.assert_close(block(x, lambda x: 100 + x), F.layer_norm(x, (8,), eps=1e-6))


def test_pre_norm_stacks_end_in_a_layer_norm_and_post_norm_stacks_do_not() -> None:
    ffn = PositionwiseFeedForward(8, 16)
    attn = MultiHeadedAttention(2, 8)
    assert Encoder(EncoderLayer(8, attn, ffn, 0.1, norm_first=True), 2).norm is not None
    assert Encoder(EncoderLayer(8, attn, ffn, 0.1), 2).norm is None


def test_feed_forward_is_two_kernel_size_one_convolutions() -> None:
    ffn = PositionwiseFeedForward(8, 32, dropout=0.0).double()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    hidden = F.conv1d(x.transpose(1, 2), ffn.w_1.weight[:, :, None], ffn.w_1.bias).relu()
    expected = F.conv1d(hidden, ffn.w_2.weight[:, :, None], ffn.w_2.bias).transpose(1, 2)
    torch.testing.assert_close(ffn(x), expected)


def test_generator_gives_log_probabilities() -> None:
    log_probs = Generator(8, 11)(torch.randn(2, 3, 8))
    assert log_probs.shape == (2, 3, 11)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2, 3))


# --- embeddings and positions -----------------------------------------------------------------


def test_embeddings_are_scaled_by_sqrt_d_model() -> None:
    embed = Embeddings(64, 100)
    tokens = torch.tensor([[3, 7]])
    torch.testing.assert_close(embed(tokens), embed.embedding.weight[tokens] * 8.0)


def test_positional_encoding_matches_the_formula() -> None:
    d_model = 64
    table = sinusoidal_table(200, d_model)
    for pos in (0, 1, 17, 199):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    module = PositionalEncoding(d_model, dropout=0.0, max_len=200)
    x = torch.randn(2, 30, d_model)
    torch.testing.assert_close(module(x), x + table[:30])
    assert "pe" not in module.state_dict()


@pytest.mark.parametrize("k", [1, 3, 64, 999, -7])
def test_offset_k_is_a_linear_map_for_every_position(k: int) -> None:
    d_model, max_len = 128, 5000
    table = sinusoidal_table(max_len, d_model)
    omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(omega * k), torch.sin(omega * k)
    M = torch.zeros(d_model, d_model, dtype=torch.float64)
    M[0::2, 0::2], M[0::2, 1::2] = torch.diag(c), torch.diag(s)
    M[1::2, 0::2], M[1::2, 1::2] = torch.diag(-s), torch.diag(c)
    start, stop = max(0, -k), max_len - max(0, k)
    predicted = table[start:stop] @ M.float().T
    assert (predicted - table[start + k : stop + k]).abs().max() < 1e-5


@pytest.mark.parametrize("cls", [PositionalEncoding, LearnedPositionalEncoding])
def test_a_sequence_longer_than_max_len_is_refused(cls: type) -> None:
    module = cls(16, 0.0, max_len=10)
    assert module(torch.zeros(1, 10, 16)).shape == (1, 10, 16)
    with pytest.raises(ValueError, match=r"11 positions is longer than max_len=10"):
        module(torch.zeros(1, 11, 16))


def test_sinusoidal_table_needs_an_even_width() -> None:
    with pytest.raises(ValueError, match="even d_model, got 7"):
        sinusoidal_table(10, 7)


# --- the full model -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_model() -> nn.Module:
    torch.manual_seed(0)
    return make_model(30, 30, N=2, d_model=32, d_ff=64, h=4, dropout=0.0).double().eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_is_causal(norm_first: bool) -> None:
    torch.manual_seed(1)
    model = make_model(30, 30, N=2, d_model=32, d_ff=64, h=4, dropout=0.0, norm_first=norm_first)
    model = model.double().eval()
    src = torch.randint(1, 30, (2, 6))
    tgt = torch.randint(1, 30, (2, 8))
    src_mask = padding_mask(src, PAD)
    reference = model(src, tgt, src_mask, target_mask(tgt, PAD))
    for j in range(8):
        changed = tgt.clone()
        changed[:, j] = changed[:, j] % 29 + 1  # another real token
        out = model(src, changed, src_mask, target_mask(changed, PAD))
        torch.testing.assert_close(out[:, :j], reference[:, :j], rtol=0, atol=1e-12)
        assert (out[:, j] - reference[:, j]).abs().max() > 1e-6  # the check can fail


def test_appended_padding_changes_no_output(small_model: nn.Module) -> None:
    src = torch.randint(1, 30, (2, 6))
    tgt = torch.randint(1, 30, (2, 8))
    reference = small_model(src, tgt, padding_mask(src, PAD), target_mask(tgt, PAD))
    memory = small_model.encode(src, padding_mask(src, PAD))
    padded_src = torch.cat([src, torch.zeros(2, 4, dtype=torch.long)], dim=1)
    padded_memory = small_model.encode(padded_src, padding_mask(padded_src, PAD))
    torch.testing.assert_close(padded_memory[:, :6], memory, rtol=0, atol=1e-12)
    out = small_model(padded_src, tgt, padding_mask(padded_src, PAD), target_mask(tgt, PAD))
    torch.testing.assert_close(out, reference, rtol=0, atol=1e-12)
    padded_tgt = torch.cat([tgt, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    out = small_model(src, padded_tgt, padding_mask(src, PAD), target_mask(padded_tgt, PAD))
    torch.testing.assert_close(out[:, :8], reference, rtol=0, atol=1e-12)


def test_model_runs_end_to_end_with_shapes(small_model: nn.Module) -> None:
    src = torch.randint(1, 30, (3, 7))
    tgt = torch.randint(1, 30, (3, 5))
    out = small_model(src, tgt, padding_mask(src, PAD), target_mask(tgt, PAD))
    assert out.shape == (3, 5, 32)
    log_probs = small_model.generator(out)
    assert log_probs.shape == (3, 5, 30)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(3, 5, dtype=torch.float64))


def test_model_backpropagates_to_every_parameter() -> None:
    torch.manual_seed(0)
    model = make_model(20, 20, N=1, d_model=16, d_ff=32, h=2, share_embeddings=True)
    src = torch.randint(1, 20, (2, 5))
    tgt = torch.randint(1, 20, (2, 4))
    out = model(src, tgt, padding_mask(src, PAD), target_mask(tgt, PAD))
    model.generator(out).sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_share_embeddings_ties_one_tensor_three_ways() -> None:
    model = make_model(50, 50, N=1, d_model=16, d_ff=32, h=2, share_embeddings=True)
    shared = model.src_embed[0].embedding.weight
    assert model.tgt_embed[0].embedding.weight is shared
    assert model.generator.proj.weight is shared
    untied = make_model(50, 50, N=1, d_model=16, d_ff=32, h=2)
    assert count_parameters(untied) - count_parameters(model) == 2 * 50 * 16


def test_share_embeddings_needs_one_vocabulary() -> None:
    with pytest.raises(ValueError, match="src_vocab=100 and tgt_vocab=120"):
        make_model(100, 120, share_embeddings=True)


def test_table3_parameter_counts_with_tying() -> None:
    base = meta_count(ModelConfig.base(37_000, 37_000, share_embeddings=True))
    big = meta_count(ModelConfig.big(37_000, 37_000, share_embeddings=True))
    assert abs(base / 65e6 - 1) < 0.05, base
    assert abs(big / 213e6 - 1) < 0.05, big
    assert big == 214_208_648  # the README quotes this count
    untied = meta_count(ModelConfig.base(37_000, 37_000))
    assert untied - base == 2 * 37_000 * 512  # two more (V, d_model) matrices
    assert untied / 65e6 > 1.5


def test_make_model_defaults_are_the_base_model() -> None:
    with torch.device("meta"):
        model = make_model(1000, 1000)
    assert len(model.encoder.layers) == 6 and len(model.decoder.layers) == 6
    attn = model.encoder.layers[0].self_attn
    assert (attn.h, attn.d_k, attn.d_v, attn.d_model) == (8, 64, 64, 512)
    assert attn.dropout.p == 0.0  # attention dropout is not in the paper
    assert model.encoder.layers[0].feed_forward.w_1.out_features == 2048
    assert model.encoder.layers[0].sublayer[0].dropout.p == 0.1
    assert not model.encoder.layers[0].norm_first and model.encoder.norm is None
    assert isinstance(model.src_embed[1], PositionalEncoding)
    assert meta_count(ModelConfig.base(1000, 1000)) == count_parameters(model)


def test_presets_and_options() -> None:
    big = ModelConfig.big(10, 10)
    assert (big.N, big.d_model, big.d_ff, big.h, big.dropout) == (6, 1024, 4096, 16, 0.3)
    assert ModelConfig.big(10, 10, dropout=0.1).dropout == 0.1
    learned = ModelConfig.base(100, 100, positional="learned", max_len=64)
    extra = meta_count(learned) - meta_count(ModelConfig.base(100, 100))
    assert extra == 2 * 64 * 512  # one table per stack
    with pytest.raises(Exception, match="cannot assign"):
        big.N = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"h": 6}, "d_model=512 is not divisible by h=6"),
        ({"positional": "rotary"}, "setting positional: expected one of"),
        ({"dropout": 1.0}, r"setting dropout: expected a number in \[0, 1\), got 1.0"),
        ({"N": 0}, "setting N: expected a positive integer, got 0"),
        ({"d_model": 511, "h": 7}, "even d_model, got 511"),
    ],
)
def test_config_rejects_bad_values(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ModelConfig.base(100, 100).replace(**changes)
    with pytest.raises(ValueError, match=message):
        ModelConfig.base(100, 100, **changes)


def test_model_with_too_long_input_names_max_len() -> None:
    model = make_model(10, 10, N=1, d_model=16, d_ff=32, h=2, max_len=20)
    src = torch.ones(1, 21, dtype=torch.long)
    with pytest.raises(ValueError, match="21 positions is longer than max_len=20"):
        model.encode(src, padding_mask(src, PAD))
