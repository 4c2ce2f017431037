"""Part II, training: batches, length-bucketed batching, Multi30k files, the loop, greedy decoding.

The checks of the chapters "Batches and masks", "The training loop" and "A first example" on other
sizes and seeds, with the bad inputs that must be refused. (The schedule and label smoothing have
their own test files.)
"""

import copy
import gzip
import itertools
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from annotated_transformer.data import multi30k
from annotated_transformer.data.batch import Batch, collate
from annotated_transformer.data.copy_task import BOS, copy_batch
from annotated_transformer.data.sampler import TokenBudgetBatchSampler
from annotated_transformer.decoding.simple import simple_greedy_decode
from annotated_transformer.model.masks import subsequent_mask
from annotated_transformer.model.transformer import make_model
from annotated_transformer.training.label_smoothing import LabelSmoothing
from annotated_transformer.training.loop import (
    TrainState,
    evaluate,
    groups_of,
    train_step,
)
from annotated_transformer.training.schedule import make_optimizer, noam_scheduler, rate
from annotated_transformer.training.simple_loop import simple_train_epoch

PAD, START, END, V = 0, 1, 2, 13
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


def random_pairs(n, seed, max_len=9):
    g = torch.Generator().manual_seed(seed)
    pairs = []
    for _ in range(n):
        s, t = (int(x) for x in torch.randint(1, max_len + 1, (2,), generator=g))
        src = torch.cat([torch.randint(3, V, (s,), generator=g), torch.tensor([END])])
        tgt = torch.cat(
            [torch.tensor([START]), torch.randint(3, V, (t,), generator=g), torch.tensor([END])]
        )
        pairs.append((src, tgt))
    return pairs


def tiny_model(seed=0, dropout=0.0):
    torch.manual_seed(seed)
    return make_model(V, V, N=2, d_model=16, d_ff=32, h=2, dropout=dropout)


# --- Batch -------------------------------------------------------------------------------------


def test_batch_shifts_the_target_and_masks_padding():
    pairs = random_pairs(7, seed=1)
    batch = collate(pairs, PAD)
    assert batch.size == 7
    assert torch.equal(batch.tgt_in[:, 1:], batch.tgt_out[:, :-1])
    assert (batch.tgt_in[:, 0] == START).all()
    assert batch.ntokens == sum(len(t) - 1 for _, t in pairs)
    assert batch.src_mask.shape == (7, 1, batch.src.size(1))
    assert int(batch.src_mask.sum()) == sum(len(s) for s, _ in pairs)
    expected = subsequent_mask(batch.tgt_in.size(1)) & (batch.tgt_in != PAD)[:, None, :]
    assert torch.equal(batch.tgt_mask, expected)
    moved = batch.to("cpu")
    assert isinstance(moved, Batch) and moved.ntokens == batch.ntokens


@pytest.mark.parametrize(
    ("src", "tgt", "message"),
    [
        (torch.ones(3, dtype=torch.long), torch.ones(1, 3, dtype=torch.long), r"src must be \(B"),
        (torch.ones(1, 3), torch.ones(1, 3, dtype=torch.long), "integer token ids"),
        (torch.ones(2, 3, dtype=torch.long), torch.ones(1, 3, dtype=torch.long), "2 vs 1"),
        (torch.ones(1, 3, dtype=torch.long), torch.ones(1, 1, dtype=torch.long), "at least 2"),
    ],
)
def test_batch_refuses_bad_tensors(src, tgt, message):
    with pytest.raises(ValueError, match=message):
        Batch.from_tensors(src, tgt, PAD)


def test_collate_refuses_empty_and_non_1d_input():
    with pytest.raises(ValueError, match="empty"):
        collate([], PAD)
    with pytest.raises(ValueError, match="pair 1: expected 1-D"):
        collate([(torch.ones(2).long(), torch.ones(3).long()), (torch.ones(1, 2).long(),) * 2], 0)


# --- TokenBudgetBatchSampler -------------------------------------------------------------------


@pytest.fixture(scope="module")
def lengths():
    rng = np.random.default_rng(7)
    src = rng.integers(1, 80, size=3000)
    tgt = np.maximum(1, (src * rng.uniform(0.5, 1.5, size=3000)).astype(int))
    return src, tgt


@pytest.mark.parametrize("max_tokens", [120, 400, 3000])
def test_sampler_keeps_the_budget_and_covers_the_epoch(lengths, max_tokens):
    src, tgt = lengths
    sampler = TokenBudgetBatchSampler(src, tgt, max_tokens, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    for b in batches:
        assert len(b) * src[b].max() <= max_tokens and len(b) * tgt[b].max() <= max_tokens
    assert sorted(i for b in batches for i in b) == list(range(len(src)))


def test_sampler_sorts_by_length_and_reshuffles_per_epoch(lengths):
    src, tgt = lengths
    sampler = TokenBudgetBatchSampler(src, tgt, 400, seed=3)
    # within a batch the target lengths are close: batches come from a sorted order
    spread = np.mean([tgt[b].max() - tgt[b].min() for b in sampler])
    assert spread <= 2
    assert sampler.batches(0) == TokenBudgetBatchSampler(src, tgt, 400, seed=3).batches(0)
    assert sampler.batches(0) != sampler.batches(1)
    sampler.set_epoch(1)
    assert list(sampler) == sampler.batches(1)
    fixed = TokenBudgetBatchSampler(src, tgt, 400, shuffle=False)
    assert fixed.batches(0) == fixed.batches(5)


@pytest.mark.parametrize("world", [2, 3, 8])
def test_sampler_shares_are_disjoint_and_equal(lengths, world):
    src, tgt = lengths
    for epoch in (0, 1):
        shares = []
        for rank in range(world):
            sampler = TokenBudgetBatchSampler(src, tgt, 500, seed=9, num_replicas=world, rank=rank)
            sampler.set_epoch(epoch)
            shares.append(list(sampler))
        assert len({len(s) for s in shares}) == 1
        seen = [i for share in shares for b in share for i in b]
        assert len(seen) == len(set(seen))
        everything = TokenBudgetBatchSampler(src, tgt, 500, seed=9).batches(epoch)
        left_out = everything[len(everything) - len(everything) % world :]
        assert len(seen) + sum(len(b) for b in left_out) == len(src)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(src_lengths=[3, 4], tgt_lengths=[3], max_tokens=10), "same length"),
        (dict(src_lengths=[], tgt_lengths=[], max_tokens=10), "empty"),
        (dict(src_lengths=[3, 0], tgt_lengths=[3, 3], max_tokens=10), "example 1 .* at least 1"),
        (dict(src_lengths=[3, 4], tgt_lengths=[3, 3], max_tokens=0), "max_tokens must be"),
        (dict(src_lengths=[3, 40], tgt_lengths=[3, 3], max_tokens=10), "example 1 .*length 40"),
        (dict(src_lengths=[3], tgt_lengths=[3], max_tokens=10, num_replicas=0), "num_replicas"),
        (dict(src_lengths=[3], tgt_lengths=[3], max_tokens=10, rank=1), "rank=1"),
    ],
)
def test_sampler_refuses_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TokenBudgetBatchSampler(**kwargs)


# --- Multi30k files ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data_dir():
    folder = multi30k.local_dir() or (SHARED if SHARED.is_dir() else None)
    if folder is None:
        pytest.skip(f"no local Multi30k: set {multi30k.DATA_DIR_ENV} or place it at {SHARED}")
    return folder


@pytest.mark.parametrize(("split", "n"), [("train", 29_000), ("val", 1_014), ("test2016", 1_000)])
def test_multi30k_reads_the_splits(data_dir, split, n):
    pairs = multi30k.read_split(split, data_dir)
    assert len(pairs) == n
    assert all(isinstance(de, str) and isinstance(en, str) for de, en in pairs[:10])
    assert not pairs[0][0].endswith("\n")


def test_multi30k_reads_the_folder_named_by_the_environment(data_dir, monkeypatch):
    monkeypatch.setenv(multi30k.DATA_DIR_ENV, str(data_dir))
    assert multi30k.local_dir() == Path(data_dir)
    assert multi30k.fetch("val", "en") == Path(data_dir) / "val.en.gz"


def test_multi30k_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"test_2016_flickr\.de\.gz: missing"):
        multi30k.fetch("test2016", "de", tmp_path)


def test_multi30k_names_a_folder_that_is_not_one_and_who_named_it(tmp_path, monkeypatch):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match=r"notes\.txt: a file, not a folder; give the"):
        multi30k.fetch("val", "de", notes)
    monkeypatch.setenv(multi30k.DATA_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=rf"nowhere \(\${multi30k.DATA_DIR_ENV}\): no such"):
        multi30k.fetch("val", "de")


def test_multi30k_refuses_a_damaged_file(data_dir, tmp_path):
    shutil.copy(Path(data_dir) / "val.de.gz", tmp_path / "val.de.gz")
    with gzip.open(tmp_path / "val.de.gz", "at", encoding="utf-8") as f:
        f.write("ein zusätzlicher Satz\n")
    with pytest.raises(ValueError, match=r"val\.de\.gz: SHA-256 is [0-9a-f]{64}, expected"):
        multi30k.fetch("val", "de", tmp_path)


def test_multi30k_refuses_unknown_split_or_language():
    with pytest.raises(ValueError, match="unknown Multi30k split 'dev'"):
        multi30k.file_name("dev", "de")
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        multi30k.file_name("train", "fr")


# --- the training loop -------------------------------------------------------------------------


@pytest.mark.parametrize("sizes", [(5, 5, 5, 5), (1, 7, 3, 9), (2, 18)])
def test_accumulated_micro_batches_equal_one_batch(sizes):
    pairs = random_pairs(sum(sizes), seed=sum(sizes))
    criterion = LabelSmoothing(V, PAD, 0.1)
    one, many = tiny_model(), tiny_model()
    cuts = np.cumsum((0, *sizes))
    micro = [collate(pairs[a:b], PAD) for a, b in itertools.pairwise(cuts)]
    results = []
    for model, batches in ((one, [collate(pairs, PAD)]), (many, micro)):
        optimizer = make_optimizer(model.parameters())
        scheduler = noam_scheduler(optimizer, 16, warmup=5)
        results.append(train_step(model, batches, criterion, optimizer, scheduler))
    assert results[0].ntokens == results[1].ntokens
    assert results[0].loss == pytest.approx(results[1].loss, abs=1e-5)
    for p, q in zip(one.parameters(), many.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=1e-5)
        torch.testing.assert_close(p, q, rtol=0, atol=1e-5)


def test_schedule_advances_once_per_optimizer_step():
    model = tiny_model()
    optimizer = make_optimizer(model.parameters())
    scheduler = noam_scheduler(optimizer, 16, warmup=4)
    state = TrainState()
    micro = [collate(random_pairs(3, seed=i), PAD) for i in range(10)]
    criterion = LabelSmoothing(V, PAD, 0.1)
    steps = [train_step(model, group, criterion, optimizer, scheduler, state=state)
             for group in groups_of(micro, 3)]  # fmt: skip
    assert [len(g) for g in groups_of(micro, 3)] == [3, 3, 3, 1]
    assert len(steps) == state.step == scheduler.last_epoch == 4
    assert state.micro_batches == 10 and state.sentences == 30
    assert [s.lr for s in steps] == [rate(n, 16, warmup=4) for n in (1, 2, 3, 4)]
    assert all(s.tokens_per_second > 0 for s in steps)


def test_groups_of_takes_an_iterator_without_length():
    batches = (collate(random_pairs(4, seed=i), PAD) for i in range(5))
    groups = list(groups_of(batches, 2))
    assert [len(g) for g in groups] == [2, 2, 1] and all(b.size == 4 for g in groups for b in g)


def test_a_step_without_target_tokens_is_skipped():
    model = tiny_model()
    optimizer = make_optimizer(model.parameters())
    scheduler = noam_scheduler(optimizer, 16, warmup=4)
    empty = Batch.from_tensors(torch.tensor([[5, END]]), torch.tensor([[START, PAD]]), PAD)
    assert empty.ntokens == 0
    before = copy.deepcopy(model.state_dict())
    state = TrainState()
    result = train_step(
        model, [empty, empty], LabelSmoothing(V, PAD, 0.1), optimizer, scheduler, state=state
    )
    assert result.skipped and result.loss == 0.0 and result.ntokens == 0
    assert state.skipped == 1 and state.step == 0 and state.micro_batches == 2
    assert scheduler.last_epoch == 0
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())


def test_a_micro_batch_without_tokens_counts_for_nothing_in_a_step():
    pairs = random_pairs(6, seed=4)
    criterion = LabelSmoothing(V, PAD, 0.1)
    empty = Batch.from_tensors(torch.tensor([[5, END]]), torch.tensor([[START, PAD]]), PAD)
    with_empty, without = tiny_model(), tiny_model()
    for model, batches in (
        (with_empty, [collate(pairs, PAD), empty]),
        (without, [collate(pairs, PAD)]),
    ):
        train_step(model, batches, criterion, make_optimizer(model.parameters()))
    for p, q in zip(with_empty.parameters(), without.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)


def test_clipping_reports_the_norm_before_and_bounds_the_gradient():
    model = tiny_model()
    optimizer = make_optimizer(model.parameters())
    result = train_step(
        model,
        [collate(random_pairs(8, seed=2), PAD)],
        LabelSmoothing(V, PAD),
        optimizer,
        clip_norm=1e-3,
    )
    total = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()]))
    assert result.grad_norm > 1e-3 and float(total) <= 1e-3 * (1 + 1e-4)


def test_training_loop_refuses_bad_arguments():
    model = tiny_model()
    optimizer = make_optimizer(model.parameters())
    batch = collate(random_pairs(2, seed=0), PAD)
    with pytest.raises(ValueError, match="at least one micro-batch"):
        train_step(model, [], LabelSmoothing(V, PAD), optimizer)
    with pytest.raises(ValueError, match="clip_norm must be positive"):
        train_step(model, [batch], LabelSmoothing(V, PAD), optimizer, clip_norm=-1.0)
    with pytest.raises(ValueError, match="accumulate must be at least 1"):
        list(groups_of([batch], 0))
    empty = Batch.from_tensors(torch.tensor([[5]]), torch.tensor([[START, PAD]]), PAD)
    with pytest.raises(ValueError, match="no target tokens"):
        evaluate(model, [empty], LabelSmoothing(V, PAD))


def test_evaluate_is_the_loss_per_token_without_dropout():
    model = tiny_model(dropout=0.5)
    batches = [collate(random_pairs(5, seed=i), PAD) for i in range(3)]
    criterion = LabelSmoothing(V, PAD, 0.1)
    first, second = evaluate(model, batches, criterion), evaluate(model, batches, criterion)
    assert first == second and not model.training
    with torch.no_grad():
        total = sum(
            criterion(model.generator(model(b.src, b.tgt_in, b.src_mask, b.tgt_mask)), b.tgt_out)
            for b in batches
        )
    assert first == pytest.approx(float(total) / sum(b.ntokens for b in batches), rel=1e-6)


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_a_train_step_per_batch_with_every_option_off_is_the_simple_loop(dropout):
    batches = [collate(random_pairs(4, seed=10 + i), PAD) for i in range(5)]
    criterion = LabelSmoothing(V, PAD, 0.1)
    simple, general = tiny_model(seed=3, dropout=dropout), tiny_model(seed=3, dropout=dropout)
    runs = []
    for model, train in (
        (simple, simple_train_epoch),
        (general, lambda net, batches, *rest: [train_step(net, [b], *rest).loss for b in batches]),
    ):
        optimizer = make_optimizer(model.parameters())
        scheduler = noam_scheduler(optimizer, 16, warmup=3)
        torch.manual_seed(7)  # the same dropout masks for both loops
        runs.append(train(model, batches, criterion, optimizer, scheduler))
        assert scheduler.last_epoch == len(batches)
    assert runs[0] == pytest.approx(runs[1], rel=0, abs=1e-6)
    for p, q in zip(simple.parameters(), general.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=1e-6)


# --- greedy decoding and the copy task ---------------------------------------------------------


def test_greedy_decode_equals_argmax_of_the_full_forward():
    model = tiny_model(seed=3).eval()
    batch = collate(random_pairs(4, seed=5), PAD)
    out = simple_greedy_decode(model, batch.src, batch.src_mask, max_len=7, start_symbol=START)
    assert out.shape == (4, 7) and (out[:, 0] == START).all()
    with torch.no_grad():
        for t in range(1, 7):
            prefix = out[:, :t]
            hidden = model(batch.src, prefix, batch.src_mask, subsequent_mask(t))
            expected = model.generator(hidden[:, -1]).argmax(-1)
            assert torch.equal(out[:, t], expected)
    only_start = simple_greedy_decode(
        model, batch.src, batch.src_mask, max_len=1, start_symbol=START
    )
    assert only_start.tolist() == [[START]] * 4


def test_greedy_decode_refuses_bad_input():
    model = tiny_model().eval()
    batch = collate(random_pairs(2, seed=0), PAD)
    with pytest.raises(ValueError, match=r"src must be \(B, S\)"):
        simple_greedy_decode(model, batch.src[0], batch.src_mask, 5, START)
    with pytest.raises(ValueError, match=r"src_mask must be \(B, 1, S\)"):
        simple_greedy_decode(model, batch.src, batch.src_mask[:, 0], 5, START)
    with pytest.raises(ValueError, match="max_len must be at least 1"):
        simple_greedy_decode(model, batch.src, batch.src_mask, 0, START)


def test_copy_batch():
    batch = copy_batch(6, 8, 11, torch.Generator().manual_seed(0))
    assert batch.src.shape == (6, 8) and torch.equal(batch.src[:, 1:], batch.tgt_out)
    assert (batch.src[:, 0] == BOS).all() and batch.src[:, 1:].min() >= 2
    assert batch.src.max() <= 10 and batch.ntokens == 6 * 7
    with pytest.raises(ValueError, match="length >= 2"):
        copy_batch(6, 1, 11)
    with pytest.raises(ValueError, match="vocab >= 3"):
        copy_batch(6, 5, 2)


def test_copy_task_learns_quickly():
    """A short version of the chapter's run: the loss must fall far below its start."""
    torch.manual_seed(0)
    model = make_model(11, 11, N=1, d_model=32, d_ff=64, h=4, dropout=0.0)
    optimizer = make_optimizer(model.parameters())
    scheduler = noam_scheduler(optimizer, 32, warmup=50)
    g = torch.Generator().manual_seed(1)
    batches = [copy_batch(32, 6, 11, g) for _ in range(200)]
    losses = simple_train_epoch(model, batches, LabelSmoothing(11, PAD, 0.0), optimizer, scheduler)
    assert losses[-1] < 0.25 * losses[0]
