"""A random batch with padding, shared by the test files of the fast paths and the benchmarks."""

import torch

from annotated_transformer.data.batch import Batch

PAD = 0


def a_batch(seed: int = 0, B: int = 6, S: int = 9, T: int = 8, V: int = 40) -> Batch:
    """Random ids with right padding of different lengths on both sides."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, V, (B, S), generator=g)
    tgt = torch.randint(1, V, (B, T + 1), generator=g)
    for i in range(1, B):  # sentence i ends i positions early (sentence 0 is full)
        src[i, S - i :] = PAD
        tgt[i, T + 1 - i :] = PAD
    return Batch.from_tensors(src, tgt, PAD)
