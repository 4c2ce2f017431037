"""Layer 0, plumbing every layer may use, with nothing of the Transformer in it.

- `atomic`: write a file completely or not at all ("Multi30k").
"""
