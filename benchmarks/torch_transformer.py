"""`torch.nn.Transformer` configured like the book's model: the training benchmark's baseline."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from annotated_transformer.model.encoder_decoder import Generator
from annotated_transformer.model.layers import LAYER_NORM_EPS
from annotated_transformer.model.positional import PositionalEncoding
from annotated_transformer.model.transformer import ModelConfig


class TorchTransformer(nn.Module):
    """`torch.nn.Transformer` configured like `build_model(config)`, with our model's interface.

    Same embeddings (× √d_model), sinusoidal positions with dropout, post-norm layers with
    P_drop on each sub-layer's output, layer-norm ε 1e-6 and generator. `nn.Transformer` also
    drops out attention weights and the feed-forward activations with the same rate; both are
    set to 0 here, as our model (and the paper) has neither. Its stacks are built without the
    final layer norm that `nn.Transformer` adds by default, which post-norm stacks do not have.
    Its projections keep their biases (the paper's have none): a negligible cost.

    Shape: like `EncoderDecoder.forward`: src (B, S), tgt (B, T), src_mask (B, 1, S) and
    tgt_mask (B, T, T) bool, True = may attend -> (B, T, d_model).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, h, d_ff, p = config.d_model, config.h, config.d_ff, config.dropout
        options = {"dropout": p, "batch_first": True, "layer_norm_eps": LAYER_NORM_EPS}
        encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, h, d_ff, **options), config.N, enable_nested_tensor=False
        )
        decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(d, h, d_ff, **options), config.N)
        for layer in [*encoder.layers, *decoder.layers]:
            layer.dropout = nn.Identity()  # the dropout between the two feed-forward linears
            for attention in (layer.self_attn, getattr(layer, "multihead_attn", None)):
                if attention is not None:
                    attention.dropout = 0.0  # dropout on attention weights
        self.transformer = nn.Transformer(
            d, h, custom_encoder=encoder, custom_decoder=decoder, batch_first=True
        )
        self.src_embed = nn.Embedding(config.src_vocab, d)
        self.tgt_embed = nn.Embedding(config.tgt_vocab, d)
        self.position = PositionalEncoding(d, p, config.max_len)
        self.generator = Generator(d, config.tgt_vocab)
        self.scale = math.sqrt(d)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor, tgt_mask: Tensor) -> Tensor:
        src_pad = ~src_mask[:, 0, :]  # (B, S), True = padding: nn.Transformer's convention
        tgt_pad = ~tgt_mask[:, -1, :]  # (B, T): the last row sees every real target token
        T = tgt.size(1)
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).triu(1)  # True = blocked
        return self.transformer(
            self.position(self.src_embed(src) * self.scale),
            self.position(self.tgt_embed(tgt) * self.scale),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )
