"""The input checks that left the chapter "Attention" for the appendix on settings still refuse.

The appendix shows most of these errors once; this file holds the one it does not show
(`padding_mask` on token ids that are not (B, S)) and checks that the chapter's definitions call
the checks the appendix writes.
"""

from __future__ import annotations

import pytest
import torch

from annotated_transformer.model import attention, masks, positional


def test_padding_mask_refuses_token_ids_that_are_not_a_batch_of_sequences() -> None:
    with pytest.raises(ValueError, match=r"padding_mask expects token ids of shape \(B, S\)"):
        masks.padding_mask(torch.ones(2, 3, 4, dtype=torch.long), pad=0)


def test_subsequent_mask_refuses_a_size_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="subsequent_mask needs a positive size, got 0"):
        masks.subsequent_mask(0)


@pytest.mark.parametrize(
    ("module", "names"),
    [
        (attention, ["check_shapes", "check_mask", "check_heads"]),
        (masks, ["check_size", "check_ids"]),
    ],
)
def test_the_checks_written_in_the_appendix_are_in_their_modules(module, names) -> None:
    assert all(callable(getattr(module, name, None)) for name in names)
    assert callable(attention.MultiHeadedAttention._check_inputs)
    assert callable(positional.PositionalBase._check_length)
