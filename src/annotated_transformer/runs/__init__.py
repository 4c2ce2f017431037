"""Layer 3, runs: what a training run leaves on disk, read back without the trainer.

- `presets`: `TrainConfig` (a run's `config.json`) and the named presets ("Engineering a training
  run").
- `checkpoints`: checkpoint files, written atomically, read with `weights_only=True`
  ("Engineering a training run").
- `saved_run`: a run read back from its checkpoint, with every check, in one place
  ("Engineering a training run").
- `averaging`: one model from the last checkpoints of a run, §6.1 ("Results", "Engineering a
  training run"; the checks of an average: appendix "How the package is built: settings,
  profiles and errors").

Translating, scoring and exporting a model read its run through this layer, so that none of them
imports `training`; the trainer writes through it. It imports `model`, `data` and `util`.
"""
