"""The two stopping rules of beam search (issue 43): the default "k-finished" (fairseq,
CTranslate2, the page) and tensor2tensor's bound ("t2t"), which the paper's authors' code used.

The bound is exact: with it, the search returns what the same search run to the length limit
returns. And it keeps what the k-finished rule can lose: a hypothesis that ends among the 2k
candidates but not among the k best.
"""

from __future__ import annotations

import pytest
import torch
from test_decoding import END, PAD, START, peaked, sources

import annotated_transformer.decoding.search as search_module
from annotated_transformer.decoding.decoding_checks import SEARCHES
from annotated_transformer.decoding.search import beam_search
from annotated_transformer.decoding.simple import simple_beam_search
from annotated_transformer.model.masks import padding_mask


class Steps:
    """`decode_step` that counts the decoder steps it runs."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, model, last, cache):
        self.count += 1
        return search_module.decode_step(model, last, cache)


def run(model, src, src_mask, max_len, rule, k, alpha, to_the_limit=False, monkeypatch=None):
    steps = Steps()
    if to_the_limit:  # the bound never met: the search goes on to every sentence's limit
        monkeypatch.setattr(
            search_module,
            "_bound_met",
            lambda beams, limits: torch.zeros_like(beams.active, dtype=torch.bool),
        )
    found = beam_search(
        model, src, src_mask, max_len, START, END, beam_size=k, alpha=alpha, search=rule, step=steps
    )
    monkeypatch and monkeypatch.undo()
    return [hypotheses[0] for hypotheses in found], steps.count


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("k", "alpha"), [(4, 0.6), (2, 0.0), (3, 1.0)])
def test_the_bound_returns_what_the_search_run_to_the_limit_returns(seed, k, alpha, monkeypatch):
    vocab = 9
    model = peaked(vocab, seed)
    src, src_mask = sources(6, seed=100 + seed, longest=6, vocab=vocab)
    lengths = src_mask.sum(dim=(1, 2))
    max_len = (lengths + 4).tolist()  # a limit per sentence, as translate gives
    early, early_steps = run(model, src, src_mask, max_len, "t2t", k, alpha)
    full, full_steps = run(model, src, src_mask, max_len, "t2t", k, alpha, True, monkeypatch)
    assert [ids for ids, _ in early] == [ids for ids, _ in full]
    assert [s for _, s in early] == pytest.approx([s for _, s in full], abs=1e-6)
    assert early_steps <= full_steps == max(max_len) - 1


def test_the_bound_stops_before_the_limit():
    vocab = 9
    model = peaked(vocab, 1)
    src, src_mask = sources(8, seed=5, longest=6, vocab=vocab)
    max_len = (src_mask.sum(dim=(1, 2)) + 50).tolist()  # the paper's: input length + 50
    counts = {rule: run(model, src, src_mask, max_len, rule, 4, 0.6)[1] for rule in SEARCHES}
    print(f"\ndecoder steps: {counts}")
    assert counts["t2t"] < max(max_len) - 1  # (k-finished may go on: a sentence whose k best
    # continuations rarely end never finishes k hypotheses)


class PrefixCache:
    """A stand-in for the decoder's cache: each row's tokens so far."""

    def __init__(self, prefixes: torch.Tensor) -> None:
        self.prefixes = prefixes  # (rows, t)

    def follow(self, rows):
        return PrefixCache(self.prefixes[rows])

    def select(self, rows, width):
        return PrefixCache(self.prefixes[rows])


A, B = 3, 4  # two words; END ends a hypothesis
FIRST = {A: 0.40, B: 0.35, END: 0.25}  # after <s>: </s> ranks third
LATER = {A: 0.80, END: 0.20}  # after a word: on it goes


def constructed_step(model, last, cache):
    """Log-probabilities that depend on the last token only: FIRST after <s>, LATER after a word."""
    rows = last.numel()
    probs = torch.full((rows, 5), 1e-9)
    for row in range(rows):
        for token, p in (FIRST if int(last[row]) == START else LATER).items():
            probs[row, token] = p
    return probs.log(), PrefixCache(torch.cat([cache.prefixes, last[:, None]], dim=1))


def test_k_finished_loses_a_better_hypothesis_that_the_bound_keeps():
    """With k = 2, `<s> </s>` is the third of the first step's candidates: the k-finished rule
    never finishes it and ends on `<s> A A … ` at the limit; tensor2tensor finishes it from the
    2k candidates, and its score, log 0.25, beats every hypothesis that goes on."""
    model = peaked(5, 0)
    src = torch.tensor([[A, B, END]])
    src_mask = padding_mask(src, PAD)
    found = {}
    for rule in SEARCHES:
        (best,), = beam_search(
            model, src, src_mask, 10, START, END, beam_size=2, alpha=0.6, search=rule,
            start=lambda model, memory, mask: PrefixCache(torch.zeros(1, 0, dtype=torch.long)),
            step=constructed_step,
        )  # fmt: skip
        found[rule] = best
    assert found["t2t"][0] == [START, END]
    assert found["t2t"][1] == pytest.approx(torch.tensor(0.25).log().item(), abs=1e-6)
    assert found["k-finished"][0][:3] == [START, A, A] and found["k-finished"][1] < found["t2t"][1]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(search="t3t"), "search must be one of k-finished, t2t, got 't3t'"),
        (dict(search="t2t", keep_greedy=True), "keep_greedy goes with the k-finished search"),
    ],
)
def test_a_wrong_search_is_refused(options, message):
    model = peaked(9, 0)
    src, src_mask = sources(2, seed=0, longest=3, vocab=9)
    with pytest.raises(ValueError, match=message):
        beam_search(model, src, src_mask, 8, START, END, **options)


@pytest.mark.parametrize("seed", range(3))
def test_the_simple_search_stops_as_the_batched_one(seed):
    """Both rules, one sentence at a time (`simple_beam_search`) and batched: the same best."""
    vocab = 9
    model = peaked(vocab, seed)
    src, src_mask = sources(5, seed=200 + seed, longest=6, vocab=vocab)
    max_len = (src_mask.sum(dim=(1, 2)) + 6).tolist()
    for rule in SEARCHES:
        batched = beam_search(model, src, src_mask, max_len, START, END, search=rule)
        for i, limit in enumerate(max_len):
            alone = src[i : i + 1, : int(src_mask[i].sum())]
            (simple,) = simple_beam_search(
                model, alone, padding_mask(alone, PAD), limit, START, END, search=rule
            )
            assert simple[0] == batched[i][0][0], (rule, i)
            assert simple[1] == pytest.approx(batched[i][0][1], abs=1e-5)
