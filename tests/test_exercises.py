"""The chapters' exercises: every solution in the book is "correct", a wrong answer is caught,
an unanswered one is "not attempted", and nothing a reader writes makes `run_exercise` raise."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import nbformat
import pytest
import torch

from annotated_transformer.book.exercises import (
    CORRECT,
    EXERCISES,
    NOT_ATTEMPTED,
    check_answer,
    run_exercise,
)
from annotated_transformer.training.label_smoothing import smoothed_targets

ROOT = Path(__file__).resolve().parent.parent
RUN = re.compile(r'run_exercise\("([\w.]+)"')


def exercise_cells(chapter: str) -> tuple[str, list[str], list[str]]:
    """The code cells of a chapter's "## Exercises" section: imports, stubs, solutions."""
    notebook = nbformat.read(ROOT / "book" / f"{chapter}.ipynb", as_version=4)
    start = next(
        i
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "markdown" and cell.source.startswith("## Exercises")
    )
    code = [cell for cell in notebook.cells[start:] if cell.cell_type == "code"]
    solutions = [c.source for c in code if "hide-cell" in c.metadata.get("tags", [])]
    stubs = [c.source for c in code[1:] if "hide-cell" not in c.metadata.get("tags", [])]
    return code[0].source, stubs, solutions


def chapters_with_exercises() -> list[str]:
    found = []
    for path in sorted((ROOT / "book").glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        if any(c.source.startswith("## Exercises") for c in notebook.cells):
            found.append(path.stem)
    return found


CHAPTERS = chapters_with_exercises()


def run_cells(*sources: str) -> str:
    """Execute cells in one fresh namespace; return what they printed."""
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for source in sources:
            exec(compile(source, "<cell>", "exec"), namespace)
    return out.getvalue()


def test_at_least_eight_chapters_end_with_exercises() -> None:
    assert len(CHAPTERS) >= 8, CHAPTERS
    assert sorted({e.chapter for e in EXERCISES.values()}) == CHAPTERS


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_every_exercise_of_a_chapter_has_a_stub_and_a_solution(chapter: str) -> None:
    _, stubs, solutions = exercise_cells(chapter)
    asked = [e.id for e in EXERCISES.values() if e.chapter == chapter]
    assert 2 <= len(asked) <= 3
    assert [RUN.search(s).group(1) for s in stubs] == asked
    assert [RUN.search(s).group(1) for s in solutions] == asked
    assert all(not s.lstrip().startswith("# export") for s in stubs + solutions)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_book_s_solutions_are_correct(chapter: str) -> None:
    imports, _, solutions = exercise_cells(chapter)
    printed = run_cells(imports, *solutions)  # each solution cell asserts "correct"
    assert printed.split("\n")[:-1] == [CORRECT] * len(solutions)


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_book_s_stubs_are_not_attempted(chapter: str) -> None:
    imports, stubs, _ = exercise_cells(chapter)
    printed = run_cells(imports, *stubs)
    assert printed.split("\n")[:-1] == [NOT_ATTEMPTED] * len(stubs)


# One plausible mistake per exercise: each must get a "not yet".
def _swapped_sin_cos(max_len, d_model):
    pos = torch.arange(max_len).unsqueeze(1)  # (max_len, 1)
    angle = pos / 10000 ** (torch.arange(0, d_model, 2) / d_model)  # (max_len, d_model/2)
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2], pe[:, 1::2] = torch.cos(angle), torch.sin(angle)
    return pe


def _no_zero_grad(model, batch, criterion, optimizer, scheduler):
    out = model(batch.src, batch.tgt_in, batch.src_mask, batch.tgt_mask)  # (B, T, d_model)
    loss = criterion(model.generator(out), batch.tgt_out) / batch.ntokens
    loss.backward()  # gradients pile up across steps
    optimizer.step()
    scheduler.step()
    return loss.item()


def _mean_of_means(model, batches, criterion):
    model.eval()
    with torch.no_grad():
        losses = [
            criterion(
                model.generator(model(b.src, b.tgt_in, b.src_mask, b.tgt_mask)), b.tgt_out
            ).item()
            / b.ntokens
            for b in batches
        ]
    return sum(losses) / len(losses)


def _smoothing_over_v_minus_1(target, size, padding_idx, smoothing):
    q = torch.full((*target.shape, size), smoothing / (size - 1))  # (..., V): pad included
    return q.scatter(-1, target.unsqueeze(-1), 1 - smoothing)


def _cross_entropy(log_probs, target, padding_idx, smoothing):
    q = smoothed_targets(target, log_probs.size(-1), padding_idx, smoothing)
    return -(q * log_probs).sum()  # KL without the entropy of q


def _vocab_in_first_seen_order(sentences, min_freq):
    from collections import Counter

    counts = Counter(t for s in sentences for t in s)
    kept = [t for t, n in counts.most_common() if n >= min_freq]  # ties: first seen
    return ["<pad>", "<s>", "</s>", "<unk>", *kept]


def _no_source_eos(src, tgt, src_itos, tgt_itos):
    def ids(tokens, itos):
        return [itos.index(t) if t in itos else itos.index("<unk>") for t in tokens]

    return ids(src, src_itos), [1, *ids(tgt, tgt_itos), 2]


WRONG = {
    "architecture.residual_sublayer": lambda x, sublayer, norm: x + sublayer(norm(x)),
    "architecture.pre_norm_sublayer": lambda x, sublayer, norm: norm(x + sublayer(x)),
    "embeddings.positional_encoding": _swapped_sin_cos,
    "embeddings.feed_forward": lambda x, W1, b1, W2, b2: (x @ W1 + b1) @ W2 + b2,
    "embeddings.scaled_embedding": lambda ids, table: table[ids] / table.size(1) ** 0.5,
    "full_model.causal_mask": lambda size: torch.ones(1, size, size, dtype=torch.bool).triu(),
    "full_model.decoder_mask": lambda tgt, pad: (
        (tgt != pad).unsqueeze(-1)  # (B, T, 1): padding on the wrong axis
        & torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).tril()
    ),
    "full_model.encoder_layer_parameters": lambda d, f: 4 * d * d + 2 * d * f + d + f,
    "batching.padding_mask": lambda tokens, pad: (tokens == pad).unsqueeze(1),
    "batching.pad_batch": lambda sentences, pad: torch.nn.utils.rnn.pad_sequence(
        sentences, batch_first=True, padding_value=pad, padding_side="left"
    ),
    "batching.shift_target": lambda tgt: (tgt[:, 1:], tgt[:, :-1]),
    "optimizer.learning_rate": lambda step, d, w: min(step**-0.5, step * w**-1.5),
    "optimizer.peak_rate": lambda d, w: d**-0.5 * w**-1.5,
    "optimizer.paper_adam": lambda params: torch.optim.Adam(params, lr=1.0),
    "regularization.target_distribution": _smoothing_over_v_minus_1,
    "regularization.label_smoothing_loss": _cross_entropy,
    "training_loop.paper_step": _no_zero_grad,
    "training_loop.loss_per_token": _mean_of_means,
    "multi30k.build_vocab": _vocab_in_first_seen_order,
    "multi30k.encode_pair": _no_source_eos,
}


def test_every_exercise_has_a_wrong_answer_here() -> None:
    assert sorted(WRONG) == sorted(EXERCISES)


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_a_wrong_answer_is_caught_in_one_line(exercise_id: str, capsys) -> None:
    result = run_exercise(exercise_id, WRONG[exercise_id])
    assert result.startswith("not yet: "), result
    assert "\n" not in result and capsys.readouterr().out == result + "\n"


def test_a_notebook_shows_the_status_once(capsys) -> None:
    """Printed, and returned equal to the printed line, but not displayed again as the value of
    the cell (IPython's formatter gives no output for it, where a plain str shows in quotes)."""
    from IPython.core.formatters import DisplayFormatter

    result = run_exercise("batching.padding_mask", None)
    assert result == NOT_ATTEMPTED and capsys.readouterr().out == NOT_ATTEMPTED + "\n"
    assert DisplayFormatter().format(result) == ({}, {})
    assert DisplayFormatter().format(str(result)) != ({}, {})  # the test can tell


def _not_written(*args):
    raise NotImplementedError  # your answer


def _broken(*args):
    raise ValueError("a bug in the answer")


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_unanswered_and_raising_answers(exercise_id: str) -> None:
    assert check_answer(exercise_id, None) == NOT_ATTEMPTED
    assert check_answer(exercise_id, _not_written) == NOT_ATTEMPTED
    result = check_answer(exercise_id, _broken)  # does not raise
    assert result.startswith("not yet: ") and "ValueError: a bug in the answer" in result


@pytest.mark.parametrize(
    "answer", [42, lambda *args: object()], ids=["not-a-function", "returns-an-object"]
)
def test_no_answer_makes_run_exercise_raise(answer) -> None:
    for exercise_id in EXERCISES:
        assert check_answer(exercise_id, answer).startswith("not yet: ")
    assert check_answer("no.such_exercise", _not_written).startswith("not yet: ")


def test_an_exercise_leaves_the_global_random_state_alone() -> None:
    before = torch.random.get_rng_state()
    check_answer("training_loop.loss_per_token", _mean_of_means)
    assert torch.equal(torch.random.get_rng_state(), before)
