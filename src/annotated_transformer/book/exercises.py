"""The chapters' exercises, and the check that tells a reader whether an answer is right.

Hand-written, not generated from a chapter. Eight chapters end with a section "Exercises": a cell
where the reader writes a function, then

    run_exercise("batching.padding_mask", pad_mask)

which prints one line, once: "not attempted" while the function still raises
`NotImplementedError` (or the answer is None), "correct" when it agrees with the package's own
implementation on every input the check tries, or "not yet: ..." naming the input that failed,
what was expected and what came back. It never raises: an error inside the reader's answer is
reported in that line. It also returns the line (a `Status`, a `str` that a notebook does not
show a second time as the cell's value), so that a solution can `assert run_exercise(...) ==
"correct"`.

Each check compares the answer with the code the chapter exported, on a few inputs drawn from a
`torch.Generator` of its own. A check runs inside `torch.random.fork_rng`, so running an exercise
leaves the global random state as it found it. `EXERCISES` maps each exercise's id,
"chapter.name", to an `Exercise`; importing this module prints, downloads and seeds nothing.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from annotated_transformer.data.batch import Batch, collate
from annotated_transformer.data.corpus import TokenizedSplit, encode_split
from annotated_transformer.data.vocab import SPECIALS, Vocab
from annotated_transformer.model.attention import MultiHeadedAttention
from annotated_transformer.model.embeddings import Embeddings
from annotated_transformer.model.feed_forward import PositionwiseFeedForward
from annotated_transformer.model.layers import EncoderLayer, SublayerConnection
from annotated_transformer.model.masks import padding_mask, subsequent_mask, target_mask
from annotated_transformer.model.positional import sinusoidal_table
from annotated_transformer.model.transformer import count_parameters, make_model
from annotated_transformer.training.label_smoothing import LabelSmoothing, smoothed_targets
from annotated_transformer.training.loop import evaluate
from annotated_transformer.training.schedule import make_optimizer, noam_scheduler, rate
from annotated_transformer.training.simple_loop import simple_train_epoch

NOT_ATTEMPTED = "not attempted"
CORRECT = "correct"
MAX_MESSAGE = 240  # characters of one "not yet: ..." line

Check = Callable[[Callable[..., Any]], "str | None"]


@dataclass(frozen=True)
class Exercise:
    """One exercise: `check(answer)` returns None when the answer is right, else what failed."""

    id: str  # "chapter.name"
    chapter: str  # the notebook in book/ that asks it
    title: str
    check: Check


class _AnswerRaised(Exception):
    """The reader's answer raised `error` on the input called `label`."""

    def __init__(self, label: str, error: Exception) -> None:
        super().__init__(label)
        self.label = label
        self.error = error


# ---- comparing an answer with the package ---------------------------------------------------


def _fresh(value: Any) -> Any:
    """A copy of an argument, so an answer that writes into its inputs spoils nothing."""
    if isinstance(value, Tensor) and not isinstance(value, nn.Parameter):
        return value.clone()
    if isinstance(value, list | tuple):
        return type(value)(_fresh(v) for v in value)
    return value


def _call(answer: Callable[..., Any], label: str, *args: Any) -> Any:
    """answer(*args); NotImplementedError passes through, other errors name the input."""
    try:
        return answer(*(_fresh(a) for a in args))
    except NotImplementedError:
        raise
    except Exception as error:
        raise _AnswerRaised(label, error) from error


def _short(value: Any) -> str:
    """A few words about a value: a tensor's shape and dtype, or a short repr."""
    if isinstance(value, Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _tensor_mismatch(expected: Tensor, got: Any, atol: float) -> str | None:
    """None when `got` is a tensor equal to `expected` (to `atol` for floats), else the first
    difference."""
    if not isinstance(got, Tensor):
        return f"expected {_short(expected)}, got {_short(got)}"
    if got.shape != expected.shape:
        return f"expected shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    if expected.dtype.is_floating_point:
        if not got.dtype.is_floating_point:
            return f"expected a floating-point tensor, got {got.dtype}"
        same = torch.isclose(got.detach().double(), expected.double(), rtol=1e-4, atol=atol)
    else:
        if got.dtype != expected.dtype:
            return f"expected dtype {expected.dtype}, got {got.dtype}"
        same = got == expected
    if bool(same.all()):
        return None
    index = tuple(torch.nonzero(~same)[0].tolist())
    want, have = expected[index].item(), got[index].item()
    return f"at index {index}: expected {want:.6g}, got {have:.6g}"


def _mismatch(expected: Any, got: Any, atol: float = 1e-5) -> str | None:
    """None when `got` equals `expected`: tensors to `atol`, floats to 1e-6 relative, tuples and
    lists element by element, anything else with ==."""
    if isinstance(expected, Tensor):
        return _tensor_mismatch(expected, got, atol)
    if isinstance(expected, float):
        if isinstance(got, bool) or not isinstance(got, int | float | Tensor):
            return f"expected a number {expected:.6g}, got {_short(got)}"
        if math.isclose(float(got), expected, rel_tol=1e-6, abs_tol=atol):
            return None
        return f"expected {expected:.6g}, got {float(got):.6g}"
    if isinstance(expected, tuple) and isinstance(got, tuple | list):
        if len(got) != len(expected):
            return f"expected {len(expected)} values, got {len(got)}"
        for i, (want, have) in enumerate(zip(expected, got, strict=True)):
            if (failure := _mismatch(want, have, atol)) is not None:
                return f"value {i}: {failure}"
        return None
    return None if got == expected else f"expected {_short(expected)}, got {_short(got)}"


def _compare(
    answer: Callable[..., Any],
    reference: Callable[..., Any],
    cases: Sequence[tuple[str, tuple[Any, ...]]],
    atol: float = 1e-5,
) -> str | None:
    """Run the answer and the package's reference on each (label, args); name the first input
    where they differ."""
    for label, args in cases:
        expected = reference(*_fresh(args))
        got = _call(answer, label, *args)
        if (failure := _mismatch(expected, got, atol)) is not None:
            return f"{label}: {failure}"
    return None


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _randomize(module: nn.Module, g: torch.Generator, scale: float = 0.5) -> nn.Module:
    """Give every parameter of `module` values drawn from `g` (not from the global generator)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return module


# ---- "The model architecture" (§3.1) --------------------------------------------------------


def _sublayer_cases(seed: int) -> list[tuple[str, tuple[Any, ...]]]:
    """(x, sublayer, norm) triples: a linear layer and a non-linear function, random LayerNorms."""
    g = _generator(seed)
    cases = []
    for shape, kind in [((2, 3, 8), "linear"), ((1, 5, 4), "tanh"), ((3, 1, 6), "linear")]:
        d_model = shape[-1]
        x = torch.randn(shape, generator=g)
        norm = _randomize(nn.LayerNorm(d_model), g)
        if kind == "linear":
            sublayer: Callable[[Tensor], Tensor] = _randomize(nn.Linear(d_model, d_model), g)
        else:
            sublayer = torch.tanh
        cases.append((f"x of shape {shape} with a {kind} sub-layer", (x, sublayer, norm)))
    return cases


def _sublayer_reference(norm_first: bool) -> Callable[[Tensor, Any, nn.LayerNorm], Tensor]:
    def reference(x: Tensor, sublayer: Any, norm: nn.LayerNorm) -> Tensor:
        connection = SublayerConnection(x.size(-1), dropout=0.0, norm_first=norm_first)
        connection.norm = norm
        with torch.no_grad():
            return connection(x, sublayer)

    return reference


def check_residual_sublayer(answer: Callable[..., Any]) -> str | None:
    """LayerNorm(x + Sublayer(x)), §3.1 (post-norm), without dropout."""
    with torch.no_grad():
        return _compare(answer, _sublayer_reference(False), _sublayer_cases(0))


def check_pre_norm_sublayer(answer: Callable[..., Any]) -> str | None:
    """x + Sublayer(LayerNorm(x)), the pre-norm variant, without dropout."""
    with torch.no_grad():
        return _compare(answer, _sublayer_reference(True), _sublayer_cases(1))


# ---- "Feed-forward, embeddings and positions" (§3.3-§3.5) -----------------------------------


def check_positional_encoding(answer: Callable[..., Any]) -> str | None:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...), §3.5."""
    cases = [(f"max_len={n}, d_model={d}", (n, d)) for n, d in [(4, 2), (50, 16), (100, 512)]]
    return _compare(answer, sinusoidal_table, cases, atol=1e-4)


def check_feed_forward(answer: Callable[..., Any]) -> str | None:
    """FFN(x) = max(0, xW₁ + b₁)W₂ + b₂, §3.3 Eq. (2), with W₁ (d_model, d_ff)."""
    g = _generator(2)

    def reference(x: Tensor, W1: Tensor, b1: Tensor, W2: Tensor, b2: Tensor) -> Tensor:
        ffn = PositionwiseFeedForward(W1.size(0), W1.size(1), dropout=0.0)
        with torch.no_grad():
            ffn.w_1.weight.copy_(W1.T)  # nn.Linear keeps W as (out, in)
            ffn.w_1.bias.copy_(b1)
            ffn.w_2.weight.copy_(W2.T)
            ffn.w_2.bias.copy_(b2)
            return ffn(x)

    cases = []
    for B, T, d_model, d_ff in [(1, 1, 2, 3), (2, 5, 8, 32), (3, 4, 16, 64)]:
        x = torch.randn(B, T, d_model, generator=g)
        W1, b1 = torch.randn(d_model, d_ff, generator=g), torch.randn(d_ff, generator=g)
        W2, b2 = torch.randn(d_ff, d_model, generator=g), torch.randn(d_model, generator=g)
        cases.append((f"x ({B}, {T}, {d_model}), d_ff={d_ff}", (x, W1, b1, W2, b2)))
    return _compare(answer, reference, cases, atol=1e-4)


def check_scaled_embedding(answer: Callable[..., Any]) -> str | None:
    """Look up each id's row of the table and multiply it by √d_model, §3.4."""
    g = _generator(3)

    def reference(ids: Tensor, table: Tensor) -> Tensor:
        embeddings = Embeddings(table.size(1), table.size(0))
        with torch.no_grad():
            embeddings.embedding.weight.copy_(table)
            return embeddings(ids)

    cases = []
    for B, T, vocab, d_model in [(1, 3, 5, 4), (2, 6, 11, 16), (4, 2, 7, 64)]:
        ids = torch.randint(vocab, (B, T), generator=g)
        table = torch.randn(vocab, d_model, generator=g)
        cases.append((f"ids ({B}, {T}), table ({vocab}, {d_model})", (ids, table)))
    return _compare(answer, reference, cases)


# ---- "The full model" (§3.1, §3.2.3, Table 3) -----------------------------------------------


def check_subsequent_mask(answer: Callable[..., Any]) -> str | None:
    """(1, size, size) bool, True where position i may attend to position j (j <= i)."""
    cases = [(f"size={n}", (n,)) for n in (1, 2, 5)]
    return _compare(answer, subsequent_mask, cases)


def check_target_mask(answer: Callable[..., Any]) -> str | None:
    """(B, T, T) bool: no padding and no future, for the decoder's self-attention."""
    cases = [
        ("tgt [[1, 5, 6, 0]], pad 0", (torch.tensor([[1, 5, 6, 0]]), 0)),
        ("tgt [[1, 4], [1, 2]], pad 2", (torch.tensor([[1, 4], [1, 2]]), 2)),
        ("tgt [[1, 7, 8], [1, 9, 0]], pad 0", (torch.tensor([[1, 7, 8], [1, 9, 0]]), 0)),
    ]
    return _compare(answer, target_mask, cases)


def check_encoder_layer_parameters(answer: Callable[..., Any]) -> str | None:
    """The number of parameters of one encoder layer, from d_model and d_ff (§3.1-§3.3)."""

    def reference(d_model: int, d_ff: int) -> int:
        layer = EncoderLayer(
            d_model,
            MultiHeadedAttention(8, d_model, 0.0),
            PositionwiseFeedForward(d_model, d_ff, 0.0),
            dropout=0.0,
        )
        return count_parameters(layer)

    cases = [(f"d_model={d}, d_ff={f}", (d, f)) for d, f in [(512, 2048), (1024, 4096), (8, 3)]]
    return _compare(answer, reference, cases)


# ---- "Batches and masks" --------------------------------------------------------------------


def check_padding_mask(answer: Callable[..., Any]) -> str | None:
    """(B, 1, S) bool, True at every real (non-padding) token."""
    cases = [
        ("tokens [[5, 6, 0]], pad 0", (torch.tensor([[5, 6, 0]]), 0)),
        ("tokens [[4, 2, 2], [3, 3, 3]], pad 2", (torch.tensor([[4, 2, 2], [3, 3, 3]]), 2)),
        ("tokens [[0, 1], [1, 1]], pad 1", (torch.tensor([[0, 1], [1, 1]]), 1)),
    ]
    return _compare(answer, padding_mask, cases)


def check_pad_batch(answer: Callable[..., Any]) -> str | None:
    """Sentences of different lengths (1-D ids) padded at the end into one (B, S) tensor."""

    def reference(sentences: list[Tensor], pad: int) -> Tensor:
        target = torch.tensor([1, 2])  # any target: only the padded sources are compared
        return collate([(s, target) for s in sentences], pad).src

    cases = [
        ("sentences [5, 6, 7], [8], pad 0", ([torch.tensor([5, 6, 7]), torch.tensor([8])], 0)),
        ("sentences [4], [4, 5], pad 3", ([torch.tensor([4]), torch.tensor([4, 5])], 3)),
        ("one sentence [9, 9], pad 0", ([torch.tensor([9, 9])], 0)),
    ]
    return _compare(answer, reference, cases)


def check_shift_target(answer: Callable[..., Any]) -> str | None:
    """(tgt_in, tgt_out): the decoder's input `<s> y₁ … yₙ` and what it predicts `y₁ … yₙ </s>`."""

    def reference(tgt: Tensor) -> tuple[Tensor, Tensor]:
        batch = Batch.from_tensors(torch.ones(tgt.size(0), 1, dtype=torch.long), tgt, pad=0)
        return batch.tgt_in, batch.tgt_out

    cases = [
        ("tgt [[1, 5, 6, 2]]", (torch.tensor([[1, 5, 6, 2]]),)),
        ("tgt [[1, 4, 2, 0], [1, 7, 8, 2]]", (torch.tensor([[1, 4, 2, 0], [1, 7, 8, 2]]),)),
        ("tgt [[1, 2]]", (torch.tensor([[1, 2]]),)),
    ]
    return _compare(answer, reference, cases)


# ---- "Optimizer and learning-rate schedule" (§5.3) ------------------------------------------


def check_rate(answer: Callable[..., Any]) -> str | None:
    """Eq. (3): d_model^-0.5 · min(step^-0.5, step · warmup^-1.5), for step >= 1."""
    settings = [(1, 512, 4000), (100, 512, 4000), (4000, 512, 4000), (4001, 512, 4000)]
    settings += [(100_000, 512, 4000), (3, 16, 2)]
    cases = [(f"step={s}, d_model={d}, warmup={w}", (s, d, w)) for s, d, w in settings]
    return _compare(answer, lambda s, d, w: rate(s, d, 1.0, w), cases, atol=0.0)


def check_peak_rate(answer: Callable[..., Any]) -> str | None:
    """The highest learning rate Eq. (3) ever reaches, from d_model and warmup_steps."""

    def reference(d_model: int, warmup: int) -> float:
        return max(rate(step, d_model, 1.0, warmup) for step in range(1, 3 * warmup))

    cases = [(f"d_model={d}, warmup={w}", (d, w)) for d, w in [(512, 4000), (256, 1000), (16, 3)]]
    return _compare(answer, reference, cases, atol=0.0)


def check_adam(answer: Callable[..., Any]) -> str | None:
    """Adam with β₁ = 0.9, β₂ = 0.98, ε = 1e-9 (§5.3) and base rate 1.0 for `noam_scheduler`."""
    expected = make_optimizer([nn.Parameter(torch.zeros(1))])
    optimizer = _call(answer, "params [one parameter]", [nn.Parameter(torch.zeros(1))])
    if not isinstance(optimizer, torch.optim.Adam):
        return f"expected a torch.optim.Adam, got {_short(optimizer)}"
    group, want = optimizer.param_groups[0], expected.param_groups[0]
    for key in ("lr", "betas", "eps", "weight_decay", "amsgrad"):
        if group[key] != want[key]:
            return f"{key}: expected {want[key]!r}, got {group[key]!r}"
    return None


# ---- "Regularization: dropout and label smoothing" (§5.4) -----------------------------------


def _smoothing_cases(seed: int) -> list[tuple[str, tuple[Any, ...]]]:
    """(target, V, padding_idx, ε) with some targets on the padding class."""
    g = _generator(seed)
    cases = [("target [2, 0, 1], V=4, pad 0, ε=0.1", (torch.tensor([2, 0, 1]), 4, 0, 0.1))]
    for shape, V, pad, eps in [((2, 5), 9, 0, 0.1), ((6,), 7, 3, 0.3), ((3, 2), 5, 1, 0.0)]:
        target = torch.randint(V, shape, generator=g)
        target.view(-1)[0] = pad  # at least one padded position
        cases.append((f"target of shape {shape}, V={V}, pad {pad}, ε={eps}", (target, V, pad, eps)))
    return cases


def check_smoothed_targets(answer: Callable[..., Any]) -> str | None:
    """q: 1 − ε on the target, nothing on padding, ε/(V − 2) elsewhere; padded rows all zero."""
    return _compare(answer, smoothed_targets, _smoothing_cases(4))


def check_label_smoothing_loss(answer: Callable[..., Any]) -> str | None:
    """Σ over non-padding positions of KL(q ‖ p), the loss `LabelSmoothing` computes."""
    g = _generator(5)

    def reference(log_probs: Tensor, target: Tensor, padding_idx: int, eps: float) -> float:
        loss = LabelSmoothing(log_probs.size(-1), padding_idx, eps)(log_probs, target)
        return loss.item()

    cases = []
    for label, (target, V, pad, eps) in _smoothing_cases(6):
        log_probs = torch.randn(*target.shape, V, generator=g).log_softmax(-1)
        cases.append((label, (log_probs, target, pad, eps)))
    return _compare(answer, reference, cases, atol=1e-4)


# ---- "The training loop" (§5) ---------------------------------------------------------------


def _tiny_model_and_batches(
    seed: int, dropout: float, sizes: Sequence[int]
) -> tuple[nn.Module, list[Batch]]:
    """A one-layer model on 11 tokens and batches of `sizes` sentences (pad = 0, some padded)."""
    g = _generator(seed)
    model = make_model(11, 11, N=1, d_model=16, d_ff=32, h=2, dropout=dropout)
    _randomize(model, g, scale=0.3)
    batches = []
    for B in sizes:
        src = torch.randint(3, 11, (B, 5), generator=g)
        tgt = torch.randint(3, 11, (B, 6), generator=g)
        tgt[:, 0] = 1  # <s>
        src[0, -2:], tgt[0, -3:] = 0, 0  # the first sentence of each batch is padded
        batches.append(Batch.from_tensors(src, tgt, pad=0))
    return model, batches


def check_train_step(answer: Callable[..., Any]) -> str | None:
    """One step: loss per target token, backward, optimizer and scheduler step (§5.3)."""
    reference, batches = _tiny_model_and_batches(7, dropout=0.0, sizes=(2, 3, 2))
    model = copy.deepcopy(reference)
    criterion = LabelSmoothing(11, padding_idx=0, smoothing=0.1)
    runs = []
    for m in (reference, model):
        optimizer = make_optimizer(m.parameters())
        runs.append((optimizer, noam_scheduler(optimizer, model_size=16, warmup=2)))
    expected = simple_train_epoch(reference, batches, criterion, *runs[0])
    for step, batch in enumerate(batches, start=1):
        got = _call(answer, f"step {step}", model, batch, criterion, *runs[1])
        if (failure := _mismatch(expected[step - 1], got, atol=1e-5)) is not None:
            return f"step {step}, the loss per target token: {failure}"
    for (name, want), have in zip(reference.named_parameters(), model.parameters(), strict=True):
        if not torch.allclose(want, have, atol=1e-5):
            return f"after {len(batches)} steps, parameter {name} differs from the paper's loop"
    return None


def check_evaluate(answer: Callable[..., Any]) -> str | None:
    """The loss per target token over all batches, with dropout off and no gradients."""
    model, batches = _tiny_model_and_batches(8, dropout=0.5, sizes=(1, 4, 2))
    criterion = LabelSmoothing(11, padding_idx=0, smoothing=0.0)
    with torch.no_grad():
        expected = evaluate(copy.deepcopy(model), batches, criterion)
    model.train()
    got = _call(answer, "three batches of 1, 4 and 2 sentences", model, batches, criterion)
    if (failure := _mismatch(expected, got, atol=1e-5)) is not None:
        return f"three batches of 1, 4 and 2 sentences: {failure}"
    if any(p.grad is not None for p in model.parameters()):
        return "evaluation should compute no gradients, but the parameters have .grad"
    return None


# ---- "Multi30k: words, tokens and vocabularies" ---------------------------------------------


_SENTENCES = [
    ["a", "dog", "runs", "."],
    ["a", "cat", "sleeps", "."],
    ["the", "dog", "sleeps", "."],
    ["a", "dog", "and", "a", "cat", "."],
]


def check_build_vocab(answer: Callable[..., Any]) -> str | None:
    """The specials, then every token seen at least min_freq times, most frequent first, ties in
    alphabetical order: `Vocab.build(...).itos`."""
    cases = [
        ("four sentences, min_freq=2", (_SENTENCES, 2)),
        ("four sentences, min_freq=1", (_SENTENCES, 1)),
        ("four sentences, min_freq=9", (_SENTENCES, 9)),
        ("[['b', 'a', 'b', 'a', 'c']], min_freq=1", ([["b", "a", "b", "a", "c"]], 1)),
    ]
    return _compare(answer, lambda s, n: list(Vocab.build(s, min_freq=n).itos), cases)


def check_encode_pair(answer: Callable[..., Any]) -> str | None:
    """(source ids + </s>, <s> + target ids + </s>), unknown tokens as <unk>: `encode_split`."""

    def reference(src: list[str], tgt: list[str], src_itos: list[str], tgt_itos: list[str]):
        split = TokenizedSplit("exercise", [(" ".join(src), " ".join(tgt))], [src], [tgt], 0)
        encoded = encode_split(split, Vocab(src_itos), Vocab(tgt_itos))
        return encoded.src[0].tolist(), encoded.tgt[0].tolist()

    de = [*SPECIALS, "ein", "hund", "."]
    en = [*SPECIALS, "a", "dog", "cat", "."]
    cases = [
        ("ein hund . -> a dog .", (["ein", "hund", "."], ["a", "dog", "."], de, en)),
        ("ein pferd -> a horse", (["ein", "pferd"], ["a", "horse"], de, en)),
        ("eine katze . -> a cat .", (["eine", "katze", "."], ["a", "cat", "."], de, en)),
    ]
    return _compare(answer, reference, cases)


# ---- the registry and the runner ------------------------------------------------------------


def _exercise(exercise_id: str, title: str, check: Check) -> Exercise:
    return Exercise(exercise_id, exercise_id.split(".")[0], title, check)


EXERCISES: dict[str, Exercise] = {
    exercise.id: exercise
    for exercise in (
        _exercise(
            "architecture.residual_sublayer", "The residual sub-layer", check_residual_sublayer
        ),
        _exercise("architecture.pre_norm_sublayer", "Pre-norm", check_pre_norm_sublayer),
        _exercise(
            "embeddings.positional_encoding", "Sinusoidal positions", check_positional_encoding
        ),
        _exercise("embeddings.feed_forward", "The feed-forward network", check_feed_forward),
        _exercise("embeddings.scaled_embedding", "Scaled embeddings", check_scaled_embedding),
        _exercise("full_model.causal_mask", "The subsequent mask", check_subsequent_mask),
        _exercise("full_model.decoder_mask", "The decoder's mask", check_target_mask),
        _exercise(
            "full_model.encoder_layer_parameters",
            "Parameters of a layer",
            check_encoder_layer_parameters,
        ),
        _exercise("batching.padding_mask", "The padding mask", check_padding_mask),
        _exercise("batching.pad_batch", "Padding a batch", check_pad_batch),
        _exercise("batching.shift_target", "Shifting the target", check_shift_target),
        _exercise("optimizer.learning_rate", "Eq. (3)", check_rate),
        _exercise("optimizer.peak_rate", "The peak rate", check_peak_rate),
        _exercise("optimizer.paper_adam", "The paper's Adam", check_adam),
        _exercise("regularization.target_distribution", "Smoothed targets", check_smoothed_targets),
        _exercise(
            "regularization.label_smoothing_loss", "The smoothed loss", check_label_smoothing_loss
        ),
        _exercise("training_loop.paper_step", "One training step", check_train_step),
        _exercise("training_loop.loss_per_token", "Evaluation", check_evaluate),
        _exercise("multi30k.build_vocab", "A vocabulary", check_build_vocab),
        _exercise("multi30k.encode_pair", "Ids of a pair", check_encode_pair),
    )
}


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def check_answer(exercise_id: str, answer: Callable[..., Any] | None) -> str:
    """What `run_exercise` prints, without printing it. Never raises."""
    exercise = EXERCISES.get(exercise_id)
    if exercise is None:
        return _one_line(f"not yet: there is no exercise {exercise_id!r}; see EXERCISES")
    if answer is None:
        return NOT_ATTEMPTED
    if not callable(answer):
        return _one_line(f"not yet: the answer should be a function, got {_short(answer)}")
    try:
        with torch.random.fork_rng(devices=[]):
            failure = exercise.check(answer)
    except NotImplementedError:
        return NOT_ATTEMPTED
    except _AnswerRaised as raised:
        error = raised.error
        return _one_line(f"not yet: {raised.label}: raised {type(error).__name__}: {error}")
    except Exception as error:  # the answer returned something the check could not compare
        return _one_line(f"not yet: checking the answer failed: {type(error).__name__}: {error}")
    return CORRECT if failure is None else _one_line(f"not yet: {failure}")


class Status(str):
    """The line `run_exercise` printed, returned as well.

    It is that line as a `str` (`run_exercise(...) == "correct"`), and it displays nothing: as the
    last expression of a notebook cell it would otherwise show the printed line a second time, in
    quotes.
    """

    def _ipython_display_(self) -> None:
        pass  # IPython shows an object with this method by calling it: here, nothing


def run_exercise(exercise_id: str, answer: Callable[..., Any] | None) -> Status:
    """Check a reader's answer to exercise `exercise_id`; print one line and return it.

    "not attempted" (the answer is None or raises NotImplementedError), "correct", or
    "not yet: <the input that failed>: expected ..., got ...". Never raises. The returned
    `Status` equals the printed line and does not display again in a notebook.
    """
    result = Status(check_answer(exercise_id, answer))
    print(result)
    return result
