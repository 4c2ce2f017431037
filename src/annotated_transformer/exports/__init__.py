"""Layer 8, exports (§3, §6.1): the trained model for other engines, each export a folder that
the engine reads with no code of ours, checked against our own decoding.

- `onnx`: two ONNX graphs, the encoder and one decoder step, and `OnnxTransformer`, which runs
  them with onnxruntime; the page of the chapter "Try it" runs them in the browser ("Try it: the
  model in your browser"; "Serving the model" for the rest).
- `ct2`: the model in CTranslate2's format, and `CT2Translator`, whose float32 output is ours
  token for token ("Serving the model: CTranslate2 and `transformers`").
- `hf`: a Hugging Face `transformers` MarianMTModel folder with its tokenizer and Hub card (the
  same chapter).
- `formats`: the one door to every model the package reads, `open_translator`, with its table of
  forms (a checkpoint, a run folder, a save-pretrained folder, a CTranslate2 export; the
  transformers and ONNX exports refused by name) and the protocol its translators share (the
  same chapter).

Each needs an extra: `pip install "annotated-transformer[onnx]"` (onnx) or
`"annotated-transformer[serve]"` (ct2, hf). Every export writes its record, `export.json`,
last, holding every file's SHA-256 (`util.atomic.write_export`); a reader checks it before it
trusts the folder.

It builds on every layer below it and on the modules beside the layers (layer 7: `Translator`,
`pretrained`); the old paths (`ct2_export`, `hf_export` and `onnx_export` beside the layers)
still import, with a `DeprecationWarning`, until 0.4.
"""
