"""Layer 0, plumbing every layer may use, with nothing of the Transformer in it.

- `atomic`: write a file completely or not at all (appendix "How the package is built: files,
  downloads and records").
- `settings`: settings checked by type and range, with one clear line when one is wrong
  (appendix "How the package is built: settings, profiles and errors"; `ModelConfig` and
  `TrainConfig` use it).
- `device`: how records name a device ("Engineering a training run").
"""
