"""Part IV, "Decoding" and "Results": the cache, cached greedy decoding, beam search, averaging.

The chapter "Decoding" claims that the cached decoder computes what the full decoder computes,
that cached greedy decoding gives the tokens of the simple one of "A first example", that beam
search with one beam is greedy decoding, that its length-penalized score is the one
`sequence_scores` gives, that with `keep_greedy` it never does worse than greedy decoding, and
that without it it finds what the simple beam search for one sentence finds. These tests check
those claims on a small copy-task model trained here (trained, so that the most probable token
is rarely a near-tie), on untrained models of other shapes, and against an exhaustive search
over a vocabulary small enough to list every output. The chapter "Results"
averages checkpoints; the last part checks `annotated_transformer.runs.averaging`.
"""

import warnings

import pytest
import torch
from torch import nn

from annotated_transformer.data.batch import collate
from annotated_transformer.data.vocab import SPECIALS, Vocab
from annotated_transformer.decoding import onednn
from annotated_transformer.decoding import simple as decoding
from annotated_transformer.decoding.cache import (
    PackedStep,
    decode_step,
    encode_in_pieces,
    fused_attention,
    fused_step,
    packed_step,
    start_cache,
)
from annotated_transformer.decoding.onednn import (
    OneDNNCopy,
    OneDNNLinear,
    onednn_linears,
    weights_key,
)
from annotated_transformer.decoding.search import (
    _row_top,
    beam_search,
    greedy_decode,
    length_penalty,
    sequence_scores,
)
from annotated_transformer.model.attention import attention
from annotated_transformer.model.masks import padding_mask, subsequent_mask
from annotated_transformer.model.transformer import make_model
from annotated_transformer.runs.averaging import (
    average_checkpoints,
    average_state_dicts,
    check_average_path,
    last_checkpoints,
)
from annotated_transformer.runs.checkpoints import checkpoint_path, save_checkpoint
from annotated_transformer.training.label_smoothing import LabelSmoothing
from annotated_transformer.training.schedule import make_optimizer, noam_scheduler
from annotated_transformer.training.simple_loop import simple_train_epoch
from annotated_transformer.util.errors import InputError

PAD, START, END, V = 0, 1, 2, 11  # the copy task here: words are 3 … V − 1, then END
UNTRAINED = {
    "pre-norm": dict(norm_first=True),
    "learned positions": dict(positional="learned"),
    "d_k != d_v, dropout in eval": dict(d_k=6, d_v=10, dropout=0.3),
}


def copy_pairs(n, seed, longest=8, vocab=V):
    """`w₁ … wₙ </s>` -> `<s> w₁ … wₙ </s>`, n from 1 to `longest`: sources of varied length."""
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        n_words = int(torch.randint(1, longest + 1, (1,), generator=g))
        words = torch.randint(3, vocab, (n_words,), generator=g)
        end, start = torch.tensor([END]), torch.tensor([START])
        pairs.append((torch.cat([words, end]), torch.cat([start, words, end])))
    return pairs


def sources(n, seed, longest=8, vocab=V):
    """A padded batch of copy-task sources: src (n, S) and src_mask (n, 1, S)."""
    batch = collate(copy_pairs(n, seed, longest, vocab), PAD)
    return batch.src, batch.src_mask


def untrained(vocab=V, seed=0, **options):
    torch.manual_seed(seed)
    settings = {"N": 2, "d_model": 32, "d_ff": 64, "h": 4, "dropout": 0.0, **options}
    return make_model(vocab, vocab, **settings).eval()


def peaked(vocab, seed):
    """An untrained model with a 3× sharper output distribution: its outputs often end, and its
    beams compete as a trained model's do (plain beam search loses the greedy output for some
    sentences, which an untrained model's near-uniform choices rarely make happen)."""
    model = untrained(vocab, seed=seed)
    with torch.no_grad():
        model.generator.proj.weight.mul_(3)
    return model


def trim(ids, end=END):
    """A row of output ids up to and including its first end symbol (all of it if none)."""
    ids = [int(i) for i in ids]
    return ids[: ids.index(end) + 1] if end in ids else ids


def padded(rows, pad=PAD):
    """Lists of ids as one (B, L) tensor, padded at the end."""
    width = max(len(row) for row in rows)
    return torch.tensor([row + [pad] * (width - len(row)) for row in rows])


def full_log_probs(model, src, src_mask, prefix):
    """The next-token log-probabilities (B, V) after `prefix` (B, t), from the whole decoder."""
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        out = model.decode(memory, src_mask, prefix, subsequent_mask(prefix.size(1)))
        return model.generator(out[:, -1])


def cached_log_probs(model, src, src_mask, prefix):
    """The same, one `decode_step` per position of `prefix`: a list of (B, V), one per step."""
    with torch.no_grad():
        cache = start_cache(model, model.encode(src, src_mask), src_mask)
        steps = []
        for t in range(prefix.size(1)):
            log_probs, cache = decode_step(model, prefix[:, t], cache)
            assert cache.length == t + 1
            steps.append(log_probs)
        return steps


@pytest.fixture(scope="module")
def copy_model():
    """A copy-task model trained for 400 steps (about 6 s on one core): it copies most sources."""
    torch.manual_seed(0)
    model = make_model(V, V, N=2, d_model=32, d_ff=64, h=4, dropout=0.0)
    optimizer = make_optimizer(model.parameters())
    scheduler = noam_scheduler(optimizer, 32, warmup=100)
    batches = (collate(copy_pairs(32, seed=1000 + i), PAD) for i in range(400))
    simple_train_epoch(model, batches, LabelSmoothing(V, PAD, 0.0), optimizer, scheduler)
    return model.eval()


@pytest.fixture(params=["trained copy model", *UNTRAINED])
def any_model(request):
    if request.param == "trained copy model":
        return request.getfixturevalue("copy_model")
    return untrained(seed=7, **UNTRAINED[request.param])


# --- the cache ---------------------------------------------------------------------------------


def test_the_trained_copy_model_copies(copy_model):
    """The fixture the equality tests rely on: trained, not a model full of near-ties."""
    pairs = copy_pairs(100, seed=5)
    src, src_mask = sources(100, seed=5)
    out = greedy_decode(copy_model, src, src_mask, src.size(1) + 2, START, END)
    copied = sum(trim(row) == tgt.tolist() for row, (_, tgt) in zip(out, pairs, strict=True))
    assert copied >= 60  # 85-99 usually; the numbers of other machines train another model


def test_decode_step_equals_the_full_decoder_at_every_step(any_model):
    src, src_mask = sources(6, seed=11)
    assert not src_mask.all()  # padded sources: the source mask matters
    g = torch.Generator().manual_seed(3)
    prefix = torch.cat([torch.full((6, 1), START), torch.randint(2, V, (6, 9), generator=g)], 1)
    steps = cached_log_probs(any_model, src, src_mask, prefix)
    for t, log_probs in enumerate(steps):
        expected = full_log_probs(any_model, src, src_mask, prefix[:, : t + 1])
        torch.testing.assert_close(log_probs, expected, rtol=0, atol=1e-5)


def through_beams(model, step):
    """Every output of `step` on `model` for 4 sentences through 9 positions, with a widening to
    two beams a sentence at position 2 and each beam continuing the other's prefix at 5."""
    src, src_mask = sources(4, seed=13)
    g = torch.Generator().manual_seed(5)
    prefix = torch.cat([torch.full((4, 1), START), torch.randint(2, V, (4, 8), generator=g)], 1)
    rows = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])  # two beams a sentence
    outputs = []
    with torch.no_grad():
        cache = start_cache(model, model.encode(src, src_mask), src_mask)
        for t in range(prefix.size(1)):
            if t == 2:
                cache = cache.select(rows, 2)
            if t == 5:  # each beam continues the other's prefix
                cache = cache.follow(torch.arange(8).view(4, 2).flip(1).flatten())
            out, cache = step(model, prefix[:, t] if t < 2 else prefix[rows, t], cache)
            outputs.append(out)
    return outputs


def test_the_fused_step_gives_the_reference_steps_log_probabilities(any_model):
    """`fused_step` (attention in one kernel) through a widening and a beam's reordering: the
    reference step's log-probabilities, to rounding."""
    expected = through_beams(any_model, decode_step)
    for found, wanted in zip(through_beams(any_model, fused_step), expected, strict=True):
        torch.testing.assert_close(found, wanted, rtol=0, atol=1e-5)


def packed_against_reference(model):
    """Step `model` with `decode_step` and with `packed_step`'s two steps (log-probabilities,
    logits) through `through_beams`; return the largest difference of the log-probabilities,
    and whether the logits' argmax and log-softmax matched at every step."""
    expected = through_beams(model, decode_step)
    found = through_beams(model, packed_step(model))
    logits = through_beams(model, packed_step(model, log_probs=False))
    worst = max((a - b).abs().max().item() for a, b in zip(found, expected, strict=True))
    same = all(
        torch.equal(z.argmax(-1), lp.argmax(-1))
        and torch.allclose(z.log_softmax(-1), lp, rtol=0, atol=1e-6)
        for z, lp in zip(logits, found, strict=True)
    )
    return worst, same


def test_the_packed_step_gives_the_reference_steps_log_probabilities(any_model):
    """`packed_step` (Q, K, V in one product, rows as a matrix: what `translate_ids` runs):
    the reference step's log-probabilities, to rounding; its logits have their argmax."""
    worst, same = packed_against_reference(any_model)
    assert worst < 1e-5 and same


def test_the_packed_step_stacks_biases_and_leaves_an_int8_models_products_apart():
    model = untrained(seed=4)
    for layer in model.decoder.layers:  # biases in every projection (the paper has none)
        for name in ("w_q", "w_k", "w_v", "w_o"):
            old = getattr(layer.self_attn, name)
            new = nn.Linear(old.in_features, old.out_features, bias=True)
            new.weight = old.weight
            setattr(layer.self_attn, name, new)
    assert packed_step(model).qkv[0].bias.shape == (3 * model.decoder.layers[0].self_attn.d_model,)
    worst, same = packed_against_reference(model)
    assert worst < 1e-5 and same


def int8_model(model: nn.Module, per_row: bool) -> nn.Module:
    """`model` with int8 linear layers (PyTorch's dynamic quantization), a scale per output row as
    `Translator.quantized` makes them or one per matrix; torch.ao's notices of its successor, which
    `Translator.quantized` keeps from users, are kept from the test log as well."""
    qconfig = torch.ao.quantization.per_channel_dynamic_qconfig if per_row else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.filterwarnings("ignore", "torch.quantize_per_tensor", UserWarning)
        return torch.ao.quantization.quantize_dynamic(
            model, {nn.Linear: qconfig} if per_row else {nn.Linear}, torch.qint8
        )


@pytest.mark.parametrize("per_row", [True, False])
def test_the_packed_step_stacks_int8_weights_with_a_scale_per_row_only(per_row):
    """int8 weights with a scale per output row (`Translator.quantized`'s) stack into one product
    with the three's numbers bit for bit; with one scale per matrix they stay three products."""
    int8 = int8_model(untrained(seed=4), per_row)
    with warnings.catch_warnings():  # (int8 tensors announce their successor: not to users)
        warnings.simplefilter("error")
        stacked = packed_step(int8).qkv
    assert all((one is not None) == per_row for one in stacked)
    worst, same = packed_against_reference(int8)
    assert worst < 1e-5 and same
    apart = PackedStep(int8.decoder, (None,) * len(stacked))  # the three products
    one, three = through_beams(int8, packed_step(int8)), through_beams(int8, apart)
    assert all(torch.equal(a, b) for a, b in zip(one, three, strict=True))


def test_onednn_linears_share_the_weights_and_give_the_reference_steps_log_probabilities(any_model):
    """`onednn_linears` (every `nn.Linear` through oneDNN, what `translate_ids` decodes with):
    the model's own weights, not copies; the packed step on it gives the reference step's
    log-probabilities to rounding, and its logits have their argmax; the model is unchanged."""
    fast = onednn_linears(any_model)
    linears = [m for m in any_model.modules() if type(m) is nn.Linear]
    onednn = [m for m in fast.modules() if isinstance(m, OneDNNLinear)]
    assert len(onednn) == len(linears) and not any(type(m) is nn.Linear for m in fast.modules())
    assert {m.weight.data_ptr() for m in onednn} == {m.weight.data_ptr() for m in linears}
    ours = {id(t) for t in [*any_model.parameters(), *any_model.buffers()]}
    assert {id(t) for t in [*fast.parameters(), *fast.buffers()]} <= ours  # nothing copied
    assert all(type(qkv) is OneDNNLinear for qkv in packed_step(fast).qkv)  # stacked as well
    expected = through_beams(any_model, decode_step)
    found = through_beams(fast, packed_step(fast))
    logits = through_beams(fast, packed_step(fast, log_probs=False))
    assert max((a - b).abs().max().item() for a, b in zip(found, expected, strict=True)) < 1e-5
    assert all(
        torch.equal(z.argmax(-1), lp.argmax(-1)) for z, lp in zip(logits, found, strict=True)
    )


def test_onednn_linears_leave_a_model_they_cannot_run_as_it_is(monkeypatch):
    """No oneDNN in the build, operators that fail, float64 weights, or int8 layers (nothing to
    replace): the model itself comes back."""
    int8 = int8_model(untrained(seed=4), per_row=False)
    for model in (untrained(seed=4).double(), int8):
        assert onednn_linears(model) is model
    model = untrained(seed=4)

    class Failing(OneDNNLinear):  # a build whose oneDNN operators fail
        def forward(self, x):
            raise RuntimeError("could not create a primitive")

    with monkeypatch.context() as patch:
        patch.setattr(onednn, "OneDNNLinear", Failing)
        assert onednn_linears(model) is model
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert onednn_linears(model) is model


def test_a_onednn_copy_is_kept_until_the_weights_change():
    """`OneDNNCopy` returns the copy it made while the model and its weights stay the same; a
    change in place (`load_state_dict`), another model or new parameter tensors make a new one."""
    model, keep = untrained(seed=4), OneDNNCopy()
    first = keep(model)
    assert keep(model) is first and first is not model
    x = torch.randn(3, model.generator.proj.in_features)
    model.load_state_dict(untrained(seed=5).state_dict())  # copied into the same tensors
    changed = keep(model)
    assert changed is not first and keep(model) is changed
    with torch.no_grad():
        assert torch.allclose(changed.generator.proj(x), model.generator.proj(x), atol=1e-5)
    other = untrained(seed=4)
    assert keep(other) is not changed
    model.generator.proj.weight = nn.Parameter(model.generator.proj.weight.detach().clone())
    assert keep(model) is not keep(other)


def test_inference_tensors_get_a_new_copy_every_time():
    """Weights made in inference mode keep no count of their changes: no key, no kept copy."""
    with torch.inference_mode():
        model = untrained(seed=4)
    assert weights_key(model) is None
    keep = OneDNNCopy()
    assert keep(model) is not keep(model)


def test_the_encoder_in_pieces_gives_the_whole_batchs_memory():
    """`encode_in_pieces`: pieces of a few rows, each cut after its last real position, joined,
    are `model.encode`'s memory at the real positions, to the last bits (a smaller product may
    sum in another order), and zero where a piece was cut off; a batch no larger than a piece
    is encoded whole, bit for bit."""
    model = onednn_linears(untrained(seed=4).eval())
    src, src_mask = sources(9, seed=3)  # (9, S)
    real = src_mask[:, 0].unsqueeze(-1)  # (9, S, 1)
    assert not real.all()  # (some rows are padded)
    with torch.no_grad():
        whole = model.encode(src, src_mask)
        assert torch.equal(encode_in_pieces(model, src, src_mask, src.numel()), whole)
        for max_tokens in (1, src.size(1) * 2):  # one row a piece, two rows
            pieces = encode_in_pieces(model, src, src_mask, max_tokens)
            assert pieces.shape == whole.shape
            assert torch.allclose(pieces * real, whole * real, atol=1e-5)
        one_row = encode_in_pieces(model, src, src_mask, 1)  # each row cut after its last token
        assert not one_row.masked_select(~real).any()  # zero at the padding


def test_a_packed_step_refuses_another_models_cache_and_tokens_of_the_wrong_shape():
    model, other = untrained(seed=4), untrained(seed=5)
    src, src_mask = sources(2, seed=3)
    step = packed_step(model)
    with torch.no_grad():
        cache = start_cache(model, model.encode(src, src_mask), src_mask)
        with pytest.raises(InputError, match=r"^this step was packed from another model's"):
            step(other, torch.tensor([START, START]), cache)
        with pytest.raises(InputError, match=r"^tokens must be \(B,\) = \(2,\), one per cached"):
            step(model, torch.tensor([START, START, START]), cache)


def test_fused_attention_is_the_reference_attention_without_its_weights():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 6)
    mask = torch.rand(2, 1, 4, 5) > 0.4
    mask[..., 0] = True  # every query may attend to a key
    out, weights = fused_attention(q, k, v, mask)
    torch.testing.assert_close(out, attention(q, k, v, mask)[0], rtol=0, atol=1e-6)
    assert weights is None and fused_attention(q, k, v, None, nn.Dropout(0.5).eval())[1] is None
    with pytest.raises(InputError, match=r"fused_attention has no dropout: call model\.eval"):
        fused_attention(q, k, v, mask, nn.Dropout(0.1).train())


def test_selected_rows_decode_like_their_sources_alone():
    model = untrained(seed=2)
    src, src_mask = sources(4, seed=12)
    lengths = src_mask.sum(-1).flatten().tolist()
    assert len(set(lengths)) > 1
    g = torch.Generator().manual_seed(4)
    prefix = torch.cat([torch.full((4, 1), START), torch.randint(2, V, (4, 6), generator=g)], 1)
    rows = torch.tensor([3, 1, 3])
    with torch.no_grad():
        cache = start_cache(model, model.encode(src, src_mask), src_mask)
        for t in range(3):
            _, cache = decode_step(model, prefix[:, t], cache)
        cache = cache.select(rows)
        assert cache.length == 3 and cache.src_mask.size(0) == 3
        after = []
        for t in range(3, prefix.size(1)):
            log_probs, cache = decode_step(model, prefix[rows, t], cache)
            after.append(log_probs)
    for i, row in enumerate(rows.tolist()):
        alone = src[row : row + 1, : lengths[row]]  # no padding at all
        steps = cached_log_probs(model, alone, padding_mask(alone, PAD), prefix[row : row + 1])
        for t, log_probs in enumerate(after, start=3):
            torch.testing.assert_close(log_probs[i], steps[t][0], rtol=0, atol=1e-5)


def test_follow_reorders_hypotheses_within_each_sentence():
    model = untrained(seed=3)
    src, src_mask = sources(2, seed=13)
    k = 3
    beams = torch.arange(2).repeat_interleave(k)  # (6,): rows 0-2 sentence 0, 3-5 sentence 1
    g = torch.Generator().manual_seed(5)
    history = torch.cat([torch.full((6, 1), START), torch.randint(2, V, (6, 3), generator=g)], 1)
    parents = torch.tensor([2, 2, 0, 4, 3, 3])
    new = torch.randint(2, V, (6,), generator=g)
    with torch.no_grad():
        cache = start_cache(model, model.encode(src, src_mask), src_mask).select(beams)
        for t in range(history.size(1)):
            _, cache = decode_step(model, history[:, t], cache)
        followed, _ = decode_step(model, new, cache.follow(parents))
        selected, _ = decode_step(model, new, cache.select(parents))
    reordered = torch.cat([history[parents], new[:, None]], 1)
    expected = full_log_probs(model, src[beams], src_mask[beams], reordered)
    torch.testing.assert_close(followed, expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(followed, selected, rtol=0, atol=1e-6)
    # and the reordering did something: the rows differ from the unreordered continuation
    unreordered = full_log_probs(
        model, src[beams], src_mask[beams], torch.cat([history, new[:, None]], 1)
    )
    assert not torch.allclose(followed, unreordered, atol=1e-3)


def test_rows_that_share_a_source_side_decode_as_rows_with_copies_of_it():
    """`select(rows, width=k)` keeps one source side per sentence for its k rows (beam search's
    layout); the steps give what k copies of it give, through reorders and a dropped sentence."""
    model = untrained(seed=4)
    src, src_mask = sources(3, seed=14)
    k, g = 2, torch.Generator().manual_seed(6)
    beams = torch.arange(3).repeat_interleave(k)  # (6,): two rows per sentence
    tokens = torch.randint(2, V, (6, 6), generator=g)
    moves = {2: ("follow", torch.tensor([1, 1, 2, 3, 5, 4])),
             3: ("select", torch.tensor([0, 1, 4, 5])),  # sentence 1 ends
             4: ("follow", torch.tensor([1, 0, 3, 3]))}  # fmt: skip
    with torch.no_grad():
        start = start_cache(model, model.encode(src, src_mask), src_mask)
        shared, copies = start.select(beams, width=k), start.select(beams)
        assert shared.src_keys[0].size(0) == 3 and copies.src_keys[0].size(0) == 6
        assert shared.rows == copies.rows == 6
        for t in range(tokens.size(1)):
            if t in moves:
                how, rows = moves[t]
                if how == "follow":
                    shared, copies = shared.follow(rows), copies.follow(rows)
                else:
                    shared, copies = shared.select(rows, width=k), copies.select(rows)
            step = tokens[: copies.rows, t]
            a, shared = decode_step(model, step, shared)
            b, copies = decode_step(model, step, copies)
            torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert shared.src_keys[0].size(0) == 2 and shared.rows == copies.rows == 4
    with pytest.raises(ValueError, match="3 rows do not make groups of width 2"):
        start.select(torch.arange(3), width=2)


@pytest.mark.parametrize("vocab", [11, 64, 8000, 8191, 37000])
def test_row_top_finds_what_topk_finds(vocab):
    """Beam search ranks each row's 2k best tokens with `_row_top`, a `topk` that looks at
    blocks of the vocabulary first (or is `topk` itself, where no block size fits)."""
    x = torch.randn(40, vocab, generator=torch.Generator().manual_seed(vocab)).log_softmax(-1)
    for n in (1, 8):
        values, columns = _row_top(x, n)
        expected = x.topk(n, dim=1)
        assert torch.equal(values, expected.values) and torch.equal(columns, expected.indices)
    assert _row_top(x[:0], 8)[0].shape == (0, 8)


# --- cached greedy decoding --------------------------------------------------------------------


def expected_greedy(reference, limits, pad=PAD):
    """What cached greedy decoding must return, from the uncached reference output."""
    rows = [trim(row[:limit]) for row, limit in zip(reference, limits, strict=True)]
    return padded(rows, pad)


def test_cached_greedy_gives_the_tokens_of_the_uncached_reference(copy_model):
    src, src_mask = sources(64, seed=21)
    max_len = src.size(1) + 3
    reference = decoding.simple_greedy_decode(copy_model, src, src_mask, max_len, START, END)
    cached = greedy_decode(copy_model, src, src_mask, max_len, START, END)
    assert torch.equal(cached, expected_greedy(reference, [max_len] * 64))
    ends = [row.index(END) for row in map(trim, cached) if END in row]
    assert len(set(ends)) > 3  # rows end at many different steps; padding follows each end
    without_end = greedy_decode(copy_model, src, src_mask, max_len, START)
    assert without_end.shape == (64, max_len)
    assert torch.equal(
        without_end, decoding.simple_greedy_decode(copy_model, src, src_mask, max_len, START)
    )


@pytest.mark.parametrize("as_tensor", [False, True])
def test_cached_greedy_honours_a_maximum_length_per_sentence(copy_model, as_tensor):
    src, src_mask = sources(40, seed=22)
    g = torch.Generator().manual_seed(6)
    limits = torch.randint(1, src.size(1) + 3, (40,), generator=g)
    limits[0] = 1  # the start symbol alone
    reference = decoding.simple_greedy_decode(
        copy_model, src, src_mask, int(limits.max()), START, END
    )
    max_len = limits if as_tensor else limits.tolist()
    cached = greedy_decode(copy_model, src, src_mask, max_len, START, END, pad_symbol=-1)
    assert torch.equal(cached, expected_greedy(reference, limits.tolist(), pad=-1))
    assert cached[0, 0] == START and (cached[0, 1:] == -1).all()
    rows = [trim(row) for row in cached]
    cut = [len(row) == n and END not in row for row, n in zip(rows, limits.tolist(), strict=True)]
    assert any(cut)  # some sentences were cut short by their own limit


@pytest.mark.parametrize("variant", UNTRAINED)
def test_cached_greedy_picks_the_full_decoders_best_token_on_other_models(variant):
    """Untrained models have near-ties, so the check is on log-probabilities, not tokens."""
    model = untrained(seed=8, **UNTRAINED[variant])
    src, src_mask = sources(16, seed=23)
    out = greedy_decode(model, src, src_mask, 12, START, END, pad_symbol=PAD)
    for t in range(1, out.size(1)):
        live = [i for i in range(16) if END not in out[i, :t].tolist()]
        log_probs = full_log_probs(model, src[live], src_mask[live], out[live, :t])
        chosen = log_probs.gather(1, out[live, t : t + 1]).squeeze(1)
        torch.testing.assert_close(chosen, log_probs.max(-1).values, rtol=0, atol=1e-5)
        ended = [i for i in range(16) if i not in live]
        assert (out[ended, t] == PAD).all()


# --- beam search -------------------------------------------------------------------------------


def test_length_penalty_is_gnmts():
    assert length_penalty(1, 0.6) == 1.0
    assert length_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert length_penalty(13, 0.0) == 1.0
    assert torch.allclose(length_penalty(torch.tensor([1.0, 7.0]), 1.0), torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_a_beam_of_one_is_greedy_decoding(copy_model, alpha):
    src, src_mask = sources(48, seed=31)
    max_len = src.size(1) + 2
    greedy = [trim(row) for row in greedy_decode(copy_model, src, src_mask, max_len, START, END)]
    beams = beam_search(copy_model, src, src_mask, max_len, START, END, beam_size=1, alpha=alpha)
    assert [[ids for ids, _ in hyps] for hyps in beams] == [[row] for row in greedy]
    scores = sequence_scores(copy_model, src, src_mask, greedy, alpha)
    assert [hyps[0][1] for hyps in beams] == pytest.approx(scores, abs=1e-4)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_a_beam_wider_than_every_output_finds_the_exhaustive_optimum(alpha):
    """The chapter's check, on more sources and both α: `exhaustive_search` lists every output
    (its scores are the teacher-forced ones), and a beam wider than all of them finds them all."""
    vocab, max_len = 5, 4  # up to 3 generated tokens: 1 + 4 + 16 ended, 64 cut: 85 outputs
    model = untrained(vocab, seed=4)
    with torch.no_grad():  # END less likely: the best outputs are not all `<s> </s>`
        model.generator.proj.bias[END] -= 2.5
    src, src_mask = sources(3, seed=32, longest=4, vocab=vocab)
    search = {"beam_size": 128, "alpha": alpha}
    found = beam_search(model, src, src_mask, max_len, START, END, **search, n_best=128)
    top = beam_search(model, src, src_mask, max_len, START, END, **search, n_best=10)
    for i in range(3):
        alone = src[i : i + 1, : int(src_mask[i].sum())]
        simple = decoding.simple_beam_search(
            model, alone, padding_mask(alone, PAD), max_len, START, END, **search, n_best=128
        )
        ranking = decoding.exhaustive_search(
            model, alone, padding_mask(alone, PAD), max_len, START, END, alpha
        )
        outputs = [ids for ids, _ in ranking]
        assert len(outputs) == 85 and len({tuple(o) for o in outputs}) == 85
        assert all(o[0] == START and (o[-1] == END or len(o) == max_len) for o in outputs)
        rescored = sequence_scores(model, src[[i] * 85], src_mask[[i] * 85], outputs, alpha)
        assert [s for _, s in ranking] == pytest.approx(rescored, abs=1e-5)
        exact = {tuple(ids): s for ids, s in ranking}
        assert {tuple(ids): s for ids, s in found[i]} == pytest.approx(exact, abs=1e-5)
        assert {tuple(ids): s for ids, s in simple} == pytest.approx(exact, abs=1e-5)
        assert [ids for ids, _ in top[i]] == outputs[:10]
        assert [s for _, s in top[i]] == pytest.approx([s for _, s in ranking[:10]], abs=1e-5)
    # not one answer for every source, and both ways of finishing among the best
    assert len({tuple(hyps[0][0]) for hyps in top}) > 1
    ten_best = [ids for hyps in top for ids, _ in hyps]
    assert any(ids[-1] == END for ids in ten_best) and any(ids[-1] != END for ids in ten_best)


def test_the_simple_beam_search_traces_its_steps(copy_model):
    """`trace` records what the chapter draws: each step's live prefixes and 2k best extensions."""
    src, src_mask = sources(1, seed=35)
    steps = []
    traced = decoding.simple_beam_search(copy_model, src, src_mask, 12, START, END, trace=steps)
    assert traced == decoding.simple_beam_search(copy_model, src, src_mask, 12, START, END)
    for t, (ys, top, parent, token) in enumerate(steps, start=1):
        assert ys.size(1) == t and top.shape == parent.shape == token.shape == (8,)
        assert (top[:-1] >= top[1:]).all() and int(parent.max()) < ys.size(0)
    best = traced[0][0]  # its every prefix ranked among the k best of its step
    for t, (ys, _, parent, token) in enumerate(steps[: len(best) - 1], start=1):
        ranked = [(*ys[p].tolist(), int(w)) for p, w in zip(parent[:4], token[:4], strict=True)]
        assert tuple(best[: t + 1]) in ranked


def check_hypotheses(model, src, src_mask, limits, found, alpha):
    """Every returned output is well formed, and scored as `sequence_scores` scores it."""
    for i, (hyps, max_len) in enumerate(zip(found, limits, strict=True)):
        for ids, _ in hyps:
            assert ids[0] == START and (ids[-1] == END or len(ids) == max_len)
            assert END not in ids[1:-1] and len(ids) <= max_len
        assert [s for _, s in hyps] == sorted((s for _, s in hyps), reverse=True)
        assert len({tuple(ids) for ids, _ in hyps}) == len(hyps)
        n = len(hyps)
        rescored = sequence_scores(
            model, src[[i] * n], src_mask[[i] * n], [h[0] for h in hyps], alpha
        )
        assert [s for _, s in hyps] == pytest.approx(rescored, abs=1e-4)


def greedy_and_its_scores(model, src, src_mask, max_len, alpha=0.6):
    greedy = [trim(row) for row in greedy_decode(model, src, src_mask, max_len, START, END)]
    return greedy, sequence_scores(model, src, src_mask, greedy, alpha)


@pytest.mark.parametrize("model_kind", ["trained copy model", "untrained, 32 words"])
def test_beam_search_with_the_greedy_lane_never_scores_below_greedy(copy_model, model_kind):
    model, vocab = (copy_model, V) if model_kind == "trained copy model" else (peaked(32, 5), 32)
    src, src_mask = sources(200, seed=33, vocab=vocab)
    max_len = src.size(1) + 4
    _, greedy_scores = greedy_and_its_scores(model, src, src_mask, max_len)
    found = beam_search(
        model, src, src_mask, max_len, START, END, beam_size=4, n_best=4, keep_greedy=True
    )
    check_hypotheses(model, src, src_mask, [max_len] * 200, found, 0.6)
    best = [hyps[0][1] for hyps in found]
    assert all(b >= g - 1e-5 for b, g in zip(best, greedy_scores, strict=True))


def test_keep_greedy_rescues_the_sentences_plain_beam_search_loses():
    model = peaked(32, seed=5)
    src, src_mask = sources(200, seed=33, vocab=32)
    max_len = src.size(1) + 4
    _, greedy_scores = greedy_and_its_scores(model, src, src_mask, max_len)
    search = {"model": model, "src": src, "src_mask": src_mask, "max_len": max_len}
    search.update(start_symbol=START, end_symbol=END, beam_size=4, alpha=0.6)
    plain = [h[0][1] for h in beam_search(**search, keep_greedy=False)]
    kept = [h[0][1] for h in beam_search(**search, keep_greedy=True)]
    assert [h[0][1] for h in beam_search(**search)] == plain  # the default: the paper's search
    lost = [i for i, (p, g) in enumerate(zip(plain, greedy_scores, strict=True)) if p < g - 1e-5]
    assert len(lost) >= 5  # plain beam search drops the greedy output now and then
    # keeping the greedy lane only adds hypotheses: never worse than either
    for p, k, g in zip(plain, kept, greedy_scores, strict=True):
        assert k >= max(p, g) - 1e-5
    assert sum(k > g + 1e-4 for k, g in zip(kept, greedy_scores, strict=True)) >= 20  # often better


def test_a_batch_searches_like_each_sentence_alone(copy_model):
    src, src_mask = sources(12, seed=34)
    g = torch.Generator().manual_seed(7)
    limits = torch.randint(2, src.size(1) + 3, (12,), generator=g).tolist()
    together = beam_search(copy_model, src, src_mask, limits, START, END, beam_size=3, n_best=3)
    check_hypotheses(copy_model, src, src_mask, limits, together, 0.6)
    for i, limit in enumerate(limits):
        length = int(src_mask[i].sum())
        alone = src[i : i + 1, :length]
        (single,) = beam_search(
            copy_model, alone, padding_mask(alone, PAD), limit, START, END, beam_size=3, n_best=3
        )
        assert [ids for ids, _ in together[i]] == [ids for ids, _ in single]
        # the same scores up to float32's rounding, which depends on the batch's shape and on the
        # threads PyTorch runs on (1e-5 apart with one thread)
        assert [s for _, s in together[i]] == pytest.approx([s for _, s in single], abs=1e-4)
        assert all(len(ids) <= limit for ids, _ in together[i])


@pytest.mark.parametrize(("beam_size", "alpha"), [(1, 0.6), (2, 0.0), (3, 1.0), (4, 0.6), (5, 0.6)])
def test_the_simple_beam_search_finds_what_the_batched_one_finds(copy_model, beam_size, alpha):
    """`simple_beam_search`, one sentence at a time over the whole prefix, is the reference for
    the plain batched search: the same hypotheses, in the same order, with the same scores. The
    5-word vocabulary leaves fewer than k going extensions at the first step (dead beams)."""
    models = {"copy": (copy_model, V), "peaked": (peaked(32, seed=9), 32)}
    models["5 words"] = (untrained(5, seed=10), 5)
    for model, vocab in models.values():
        src, src_mask = sources(16, seed=36, longest=6, vocab=vocab)
        g = torch.Generator().manual_seed(9)
        limits = torch.randint(2, src.size(1) + 4, (16,), generator=g).tolist()
        settings = {"beam_size": beam_size, "alpha": alpha, "n_best": beam_size}
        batched = beam_search(model, src, src_mask, limits, START, END, **settings)
        for i, limit in enumerate(limits):
            alone = src[i : i + 1, : int(src_mask[i].sum())]
            simple = decoding.simple_beam_search(
                model, alone, padding_mask(alone, PAD), limit, START, END, **settings
            )
            assert [ids for ids, _ in simple] == [ids for ids, _ in batched[i]]
            assert [s for _, s in simple] == pytest.approx([s for _, s in batched[i]], abs=1e-5)


def test_greedy_lanes_of_their_own_stay_with_their_sentences(monkeypatch):
    """The greedy lanes the beams drop get rows of their own, after every beam row; a sentence
    that is done leaves the batch with its lane's row. A batch of such sentences searches like
    each sentence alone."""
    from annotated_transformer.decoding import search

    model = peaked(32, seed=6)
    src, src_mask = sources(60, seed=33, vocab=32)
    g = torch.Generator().manual_seed(8)
    limits = torch.randint(3, src.size(1) + 5, (60,), generator=g).tolist()
    seen = {"own rows": 0, "drops beside own rows": 0}
    reorder, drop_done = search._reorder, search._drop_done

    def counting_reorder(beams, *args):
        reorder(beams, *args)
        seen["own rows"] += beams.own.numel()

    def counting_drop_done(beams, done):
        seen["drops beside own rows"] += bool(done.any() and beams.own.numel())
        drop_done(beams, done)

    monkeypatch.setattr(search, "_reorder", counting_reorder)
    monkeypatch.setattr(search, "_drop_done", counting_drop_done)
    settings = {"start_symbol": START, "end_symbol": END, "beam_size": 4, "n_best": 4}
    settings["keep_greedy"] = True  # (the lanes exist only with it)
    together = search.beam_search(model, src, src_mask, limits, **settings)
    assert seen["own rows"] > 0 and seen["drops beside own rows"] > 0
    check_hypotheses(model, src, src_mask, limits, together, 0.6)
    for i, limit in enumerate(limits):
        (single,) = search.beam_search(
            model, src[i : i + 1], src_mask[i : i + 1], limit, **settings
        )
        assert [ids for ids, _ in together[i]] == [ids for ids, _ in single]
        assert [s for _, s in together[i]] == pytest.approx([s for _, s in single], abs=1e-5)


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(beam_size=0), "beam_size must be a positive integer, got 0"),
        (dict(beam_size=-1), "beam_size must be a positive integer, got -1"),
        (dict(beam_size=2.5), "beam_size must be a positive integer, got 2.5"),
        (dict(beam_size=2, n_best=3), "n_best must be between 1 and beam_size=2, got 3"),
        (dict(n_best=0), "n_best must be between 1 and beam_size=4, got 0"),
        (dict(alpha=-0.1), "alpha must be >= 0"),
        (dict(max_len=1), "max_len must leave room for a token after the start symbol"),
        (dict(max_len=[5, 1, 5]), "max_len must leave room"),
        (dict(beam_size=True), "beam_size must be a positive integer, got True"),
        (dict(n_best=True), "n_best must be between 1 and beam_size=4, got True"),
        (dict(alpha=float("nan")), "alpha must be >= 0"),
        (dict(max_len=[5, 5]), "max_len has 2 limits for a batch of 3 sentences"),
        (dict(max_len=4.5), "max_len must be an integer or one integer per sentence"),
        (dict(max_len=[[5, 5, 5]]), "max_len must be an integer or one integer per sentence"),
    ],
)
def test_beam_search_refuses_bad_settings(kwargs, message):
    model = untrained(seed=1)
    src, src_mask = sources(3, seed=41)
    settings = {"max_len": 5, "start_symbol": START, "end_symbol": END, **kwargs}
    with pytest.raises(ValueError, match=message):
        beam_search(model, src, src_mask, **settings)


@pytest.mark.parametrize("search", ["greedy", "beam", "scores"])
def test_searches_refuse_a_source_of_only_padding_and_a_bad_mask(search):
    model = untrained(seed=1)
    src, src_mask = sources(3, seed=42)
    run = {
        "greedy": lambda s, m: greedy_decode(model, s, m, 5, START, END),
        "beam": lambda s, m: beam_search(model, s, m, 5, START, END),
        "scores": lambda s, m: sequence_scores(model, s, m, [[START, END]] * s.size(0)),
    }[search]
    empty = src.clone()
    empty[1] = PAD
    with pytest.raises(ValueError, match=r"source sentence\(s\) \[1\] .* only padding"):
        run(empty, padding_mask(empty, PAD))
    with pytest.raises(ValueError, match=r"src_mask must be \(B, 1, S\) = \(3, 1, \d+\)"):
        run(src, src_mask[:, 0])
    with pytest.raises(ValueError, match=r"src_mask must be \(B, 1, S\)"):
        run(src, src_mask[:2])
    with pytest.raises(ValueError, match=r"src must be \(B, S\)"):
        run(src[0], src_mask[0])


def test_greedy_and_the_cache_refuse_bad_lengths_and_shapes():
    model = untrained(seed=1)
    src, src_mask = sources(3, seed=43)
    with pytest.raises(ValueError, match="max_len must be at least 1"):
        greedy_decode(model, src, src_mask, [4, 0, 4], START, END)
    with pytest.raises(ValueError, match="need one sequence per sentence: 2 for 3"):
        sequence_scores(model, src, src_mask, [[START, END]] * 2)
    with pytest.raises(ValueError, match="sequence 1 has no generated token"):
        sequence_scores(model, src, src_mask, [[START, END], [START], [START, END]])
    memory = model.encode(src, src_mask)
    with pytest.raises(ValueError, match=r"src_mask must be \(B, 1, S\)"):
        start_cache(model, memory, src_mask[:, :, :-1])
    cache = start_cache(model, memory, src_mask)
    with pytest.raises(ValueError, match=r"tokens must be \(B,\) = \(3,\)"):
        decode_step(model, torch.tensor([START, START]), cache)
    with pytest.raises(TypeError, match="incremental decoding needs a model built by"):
        start_cache(torch.nn.Linear(2, 2), memory, src_mask)


# --- checkpoint averaging ----------------------------------------------------------------------


def small_state(seed):
    return untrained(4, seed=seed, N=1, d_model=8, d_ff=16, h=2).state_dict()


def test_averaging_identical_states_changes_nothing():
    state = small_state(0)
    averaged = average_state_dicts([state, state, state])
    assert averaged.keys() == state.keys()
    assert all(torch.equal(averaged[k], state[k]) for k in state)


def test_averaging_two_states_gives_their_mean_in_their_dtype():
    a = {"w": torch.tensor([1.0, 2.0, 4.0]), "h": torch.tensor([0.5], dtype=torch.float16)}
    b = {"w": torch.tensor([3.0, -2.0, 5.0]), "h": torch.tensor([1.5], dtype=torch.float16)}
    a["n"] = b["n"] = torch.tensor([7, 8])  # a counter: equal in both, kept
    averaged = average_state_dicts([a, b])
    torch.testing.assert_close(averaged["w"], torch.tensor([2.0, 0.0, 4.5]), rtol=0, atol=1e-7)
    assert averaged["h"].dtype == torch.float16 and float(averaged["h"]) == 1.0
    assert torch.equal(averaged["n"], a["n"]) and averaged["n"].dtype == torch.long
    x, y = small_state(1), small_state(2)
    mean = average_state_dicts([x, y])
    for key in x:
        assert mean[key].dtype == x[key].dtype
        torch.testing.assert_close(mean[key], (x[key] + y[key]) / 2, rtol=0, atol=1e-7)


def test_averaging_refuses_states_of_different_models():
    a = {"w": torch.zeros(3), "b": torch.zeros(2)}
    with pytest.raises(ValueError, match=r"w is \(4,\) torch.float32 in state 2 but \(3,\)"):
        average_state_dicts([a, {"w": torch.zeros(4), "b": torch.zeros(2)}])
    with pytest.raises(ValueError, match=r"w is \(3,\) torch.float64 in b.pt"):
        average_state_dicts([a, {"w": torch.zeros(3).double(), "b": torch.zeros(2)}], ["a", "b.pt"])
    with pytest.raises(ValueError, match=r"hold different tensors: only in state 2: \['c'\]"):
        average_state_dicts([a, {"w": torch.zeros(3), "c": torch.zeros(2)}])
    with pytest.raises(ValueError, match="n differs between state 3 and state 1"):
        average_state_dicts(
            [{"n": torch.tensor(1)}, {"n": torch.tensor(1)}, {"n": torch.tensor(2)}]
        )
    with pytest.raises(ValueError, match="nothing to average"):
        average_state_dicts([])


def write_run(run_dir, steps, config=None):
    """Checkpoints of a tiny run, one per step, each with a different model."""
    run_dir.mkdir(parents=True, exist_ok=True)
    paths, size = [], {"N": 1, "d_model": 8, "d_ff": 16, "h": 2}
    for step in steps:
        payload = {
            "config": config or {"model": size, "seed": 1},
            "src_vocab": Vocab([*SPECIALS, "a"]).to_json(),
            "tgt_vocab": Vocab([*SPECIALS, "b"]).to_json(),
            "model": small_state(step),
            "train_state": {"step": step},
        }
        paths.append(save_checkpoint(checkpoint_path(run_dir, step), payload))
    return paths


def test_average_checkpoints_is_the_mean_of_the_models(tmp_path):
    paths = write_run(tmp_path, [10, 20, 30])
    assert last_checkpoints(tmp_path, 3) == paths
    assert last_checkpoints(tmp_path, 2) == paths[1:]
    averaged = average_checkpoints(paths)  # a SavedRun
    states = [small_state(step) for step in (10, 20, 30)]
    for key, value in averaged.weights.items():
        torch.testing.assert_close(value, sum(s[key] for s in states) / 3, rtol=0, atol=1e-7)
    assert [entry["step"] for entry in averaged.extra["averaged_from"]] == [10, 20, 30]
    assert [entry["path"] for entry in averaged.extra["averaged_from"]] == [str(p) for p in paths]
    assert averaged.step == 30 and averaged.tgt_vocab == Vocab([*SPECIALS, "b"])
    model = make_model(4, 4, N=1, d_model=8, d_ff=16, h=2)
    model.load_state_dict(averaged.weights)  # an averaged model loads into the architecture


def test_average_checkpoints_refuses_other_runs_and_checkpoint_names(tmp_path):
    paths = write_run(tmp_path / "a", [10, 20])
    other = write_run(tmp_path / "b", [30], config={"model": {"d_model": 8, "h": 2}, "seed": 2})
    with pytest.raises(
        ValueError,
        match=r"differ \(N: 6 vs 1; d_ff: 2048 vs 16; seed: 2 vs 1\): .*of different runs",
    ):
        average_checkpoints([*paths, *other])
    with pytest.raises(ValueError, match="nothing to average"):
        average_checkpoints([])
    with pytest.raises(ValueError, match="cannot be named like a training checkpoint"):
        check_average_path("x/checkpoint-00000005.pt")
    assert check_average_path("x/average.pt").name == "average.pt"
    with pytest.raises(ValueError, match=r"2 checkpoint\(s\), fewer than the 5 .*keep"):
        last_checkpoints(tmp_path / "a", 5)
    with pytest.raises(ValueError, match=r"0 checkpoint\(s\), fewer than the 1"):
        last_checkpoints(tmp_path / "empty", 1)
    with pytest.raises(ValueError, match="need at least one checkpoint"):
        last_checkpoints(tmp_path / "a", 0)
