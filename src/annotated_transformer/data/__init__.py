"""Layer 2, the data (§5.1): from sentences on disk to batches of token ids.

- `batch`: `Batch` and `collate`, a batch with its masks ("Batches and masks").
- `sampler`: batches by a token budget, `fill_batches` and `TokenBudgetBatchSampler`
  ("Batches and masks").
- `copy_task`: the synthetic copy task ("A first example").
- `multi30k`: the Multi30k files, downloaded and checked (appendix "How the package is built:
  files, downloads and records").
- `vocab`: tokenizers and word vocabularies ("Multi30k").
- `corpus`: a split tokenized and encoded ("Multi30k").
- `bpe`: one shared byte-pair-encoding vocabulary ("Subwords: byte-pair encoding").
- `wmt14`: WMT 2014 English–German, archives checked and extracted as text ("At the paper's
  scale").
- `shards`: a BPE learned from files on disk, token ids on disk as memory maps, a `Dataset`
  over them ("At the paper's scale").
- `data_checks`: what a byte-pair vocabulary's size, the copy task's sizes and a vocabulary's
  tokens must be (appendix "How the package is built: settings, profiles and errors"); the
  modules above import it.

It imports only `model` (for the masks) and `util`.
"""
