"""Layer 0, plumbing every layer may use, with nothing of the Transformer in it.

- `atomic`: write a file completely or not at all ("Multi30k").
- `settings`: settings checked by type and range, with one clear line when one is wrong ("The
  full model"; `TrainConfig` uses it too).
- `device`: how records name a device ("A real-world example").
"""
