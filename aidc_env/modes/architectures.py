"""Architectures of the LLaMA models (decoder-only transformers) and their parameter and FLOP counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from aidc_env.errors import require
from aidc_env.modes.common import FLOPS_PER_MAC, is_int


@dataclass(frozen=True)
class ModelSpec:
    """Architecture of a decoder-only LLaMA model (pre-norm, RMSNorm, SwiGLU, RoPE, untied head).

    ``nominal_params_b`` is the size the paper quotes (billions); :attr:`params` is counted from the architecture and
    agrees with it to within about 1%.
    """

    name: str
    n_layers: int
    hidden_size: int
    n_heads: int
    ffn_hidden_size: int
    vocab_size: int
    nominal_params_b: float
    n_kv_heads: int | None = None  # grouped-query attention (Llama 2 70B); None = n_heads
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("n_layers", "hidden_size", "n_heads", "ffn_hidden_size", "vocab_size"):
            value = getattr(self, name)
            require(is_int(value) and value > 0, f"model.{name}", f"must be a positive integer, got {value!r}")
        require(self.hidden_size % self.n_heads == 0, "model.n_heads", "must divide hidden_size")
        if self.n_kv_heads is not None:
            require(is_int(self.n_kv_heads) and self.n_kv_heads > 0 and self.n_heads % self.n_kv_heads == 0,
                    "model.n_kv_heads", "must be a positive divisor of n_heads")

    @property
    def kv_heads(self) -> int:
        return self.n_heads if self.n_kv_heads is None else self.n_kv_heads

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.n_heads

    @property
    def params_per_layer(self) -> int:
        """Weights of one block: Q, O (h x h), K, V (h x kv_dim), SwiGLU (3 x h x ffn), 2 RMSNorms."""
        h = self.hidden_size
        kv_dim = self.kv_heads * self.head_dim
        attention = 2 * h * h + 2 * h * kv_dim
        mlp = 3 * h * self.ffn_hidden_size
        norms = 2 * h
        return attention + mlp + norms

    @property
    def embedding_params(self) -> int:
        """Input embedding table (the output head has the same size; LLaMA does not tie them)."""
        return self.vocab_size * self.hidden_size

    @property
    def params(self) -> int:
        """All weights: blocks + input embedding + final RMSNorm + output head."""
        return self.n_layers * self.params_per_layer + 2 * self.embedding_params + self.hidden_size

    def forward_flops_per_token(self, seq_len_tokens: int) -> float:
        """Forward FLOPs per token: 2 x matmul weights + attention scores and values (Megatron count, full s x s, no
        causal saving: 2 x 2 x s x h per layer) + the output head."""
        matmul_weights = self.n_layers * (self.params_per_layer - 2 * self.hidden_size)
        attention = self.n_layers * 2 * FLOPS_PER_MAC * seq_len_tokens * self.hidden_size
        head = FLOPS_PER_MAC * self.embedding_params
        return FLOPS_PER_MAC * matmul_weights + attention + head


_LLAMA1 = ("Touvron et al. 2023, LLaMA: Open and Efficient Foundation Language Models, Table 2 "
           "(ffn and vocab from the released configs)")
_LLAMA2 = ("Touvron et al. 2023, Llama 2: Open Foundation and Fine-Tuned Chat Models, Table 1 and §2.2 "
           "(ffn, vocab, KV heads from the released config)")

#: Read-only registry of the models, lowercase keys. LLM-A of the reference case is ``llama-13b``,
#: LLM-B is ``llama-33b``.
LLAMA_MODELS: Mapping[str, ModelSpec] = MappingProxyType({spec.name: spec for spec in (
    ModelSpec("llama-7b", 32, 4096, 32, 11008, 32000, 6.7, source=_LLAMA1),
    ModelSpec("llama-13b", 40, 5120, 40, 13824, 32000, 13.0, source=_LLAMA1),
    ModelSpec("llama-33b", 60, 6656, 52, 17920, 32000, 32.5, source=_LLAMA1),
    ModelSpec("llama-65b", 80, 8192, 64, 22016, 32000, 65.2, source=_LLAMA1),
    ModelSpec("llama2-70b", 80, 8192, 64, 28672, 32000, 70.0, n_kv_heads=8, source=_LLAMA2),
)})


def get_model(model: str | ModelSpec) -> ModelSpec:
    """Look a model up by name (case-insensitive) or pass a :class:`ModelSpec` through."""
    if isinstance(model, ModelSpec):
        return model
    require(isinstance(model, str), "model", f"must be a model name, got {model!r}")
    key = model.strip().lower()
    require(key in LLAMA_MODELS, "model", f"unknown model {model!r}; known: {', '.join(LLAMA_MODELS)}")
    return LLAMA_MODELS[key]
