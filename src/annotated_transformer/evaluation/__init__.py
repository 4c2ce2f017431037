"""Layer 5, evaluation (§6): scoring translations and looking inside the model.

- `scores`: sacreBLEU's BLEU, chrF and lowercased BLEU, with signatures, recorded with their
  provenance ("A real-world example", "Results"; the records: "Engineering a training run").
- `attention_maps`: the attention weights of every layer and head ("Results").
- `newstest`: sacreBLEU on both forms of newstest2014 ("At the paper's scale").

It imports `model`, `data`, `decoding` and `util`.
"""
