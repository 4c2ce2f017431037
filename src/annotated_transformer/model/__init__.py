"""Layer 1, the model (§3): Part I of the book.

- `masks`: which positions may attend to which (chapters "Attention", "Batches and masks").
- `attention`: scaled dot-product and multi-head attention, §3.2 ("Attention").
- `feed_forward`, `embeddings`, `positional`: §3.3–§3.5 ("Feed-forward, embeddings and positions").
- `layers`: sublayer connections, encoder and decoder stacks, §3.1 ("The architecture").
- `encoder_decoder`: the encoder–decoder and the generator, §3 ("The architecture").
- `transformer`: `ModelConfig`, `build_model`, `make_model`, `count_parameters` ("The full model").
- `complexity`: Table 1 as code ("Why self-attention").
- `model_checks`: what the settings and the layers refuse, and the parameter count by formula
  (appendix "How the package is built"); the modules above import it.

Nothing here imports another layer of the package.
"""
