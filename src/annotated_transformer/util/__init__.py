"""Layer 0, plumbing every layer may use, with nothing of the Transformer in it.

- `atomic`: write a file completely or not at all, a folder by one writer at a time and never
  into the package unless told, and the package's one SHA-256 helper (appendix "How the package
  is built: files, downloads and records").
- `locks`: the package's one lock (an flock naming its holder's pid) and files opened never
  through a symbolic link (the same appendix).
- `downloads`: partial downloads that a killed process left, removed by the next (the same).
- `settings`: settings checked by type and range, with one clear line when one is wrong
  (appendix "How the package is built: settings, profiles and errors"; `ModelConfig` and
  `TrainConfig` use it).
- `errors`: the errors the package raises on purpose, by type (`UsageError`, `InputError`,
  `ModelFolderError`, `SentenceError`, ...), which the command line catches by class (appendix
  "How the package is built: settings, profiles and errors").
- `cores`: the cores this process may run on, without torch ("Serving the model").
- `device`: the default device (a CUDA GPU where PyTorch sees one) and how records name a device
  ("Engineering a training run").
"""
