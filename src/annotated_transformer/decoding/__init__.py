"""Layer 4, decoding (§6.1): from a trained model to output sequences.

- `simple`: greedy decoding over the whole prefix, the first version a reader meets
  ("A first example").
- `cache`: the decoder's keys and values kept between steps ("Fast decoding").
- `search`: cached batched greedy decoding and beam search with the length penalty, proven
  equal to the simple searches ("Fast decoding").
- `batched`: many encoded sentences translated in length-sorted batches ("A real-world example").
- `decoding_checks`: beam search's settings and stopping rules, greedy decoding's arguments
  (appendix "How the package is built: settings, profiles and errors"); the modules above
  import it.

It imports `model`, `data`, `util`, and from `runs` the largest length penalty (`MAX_ALPHA`).
"""
