"""A plain Llama and its tokenizer from their files, without importing transformers.

The demo's jobs each load a tiny model (~1.8 MB) and spend ~3 s before the first forward: not in
reading it, in transformers' imports (``AutoTokenizer.from_pretrained`` alone pulls its modelling,
kernel-hub and distributed modules: ~2 s) — about twenty jobs a demo.  For what the in-process
backend runs on a CPU — a plain ``LlamaForCausalLM`` (:func:`burnqed.policy.decoder.unsupported`'s
list, read from ``config.json``) with a fast tokenizer saved as ``tokenizer.json`` by the generic
``PreTrainedTokenizerFast`` — everything a job needs is in three files, and this module builds it
from them with ``safetensors`` and ``tokenizers`` (the libraries transformers itself reads them
with):

- :func:`load_weights` — the tensors :class:`~burnqed.policy.decoder.LlamaDecoder` reads, as
  ``from_pretrained`` leaves them (float32 as stored, the tied LM head the embedding itself), and
  the rotary and norm parameters ``LlamaRotaryEmbedding``/``LlamaRMSNorm`` compute from the config;
- :class:`FastTokenizer` — the calls burnqed makes of a Hugging Face tokenizer (``tok(text)``,
  ``decode``, ``batch_decode``, ``len``, the special tokens) on the same ``tokenizers.Tokenizer``
  transformers wraps, with transformers' own truncation and decoding rules.

Both answer ``None`` (:func:`why_not`) for anything else — another architecture or tokenizer class,
biases, grouped-query attention, a rotary scaling, half precision, sharded or missing weights — and
the caller loads through transformers as before.  "The same" is tested bit for bit:
``tests/policy/test_lean_load.py`` compares logits, caches, hidden states, token ids and decoded
texts with transformers' own on the tiny model.

Example::

    why = why_not("models/base")            # None: loadable here
    tok = FastTokenizer.from_dir("models/base")
    tok("p ∧ q").input_ids                  # what AutoTokenizer gives
    dec = LlamaDecoder.from_weights(load_weights("models/base"))
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

# What LlamaForCausalLM keeps per layer, under "model.layers.{i}." in the safetensors file.
LAYER_WEIGHTS = (
    "input_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "post_attention_layernorm.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def config_unsupported(cfg: dict[str, Any]) -> str | None:
    """Why a ``config.json`` is not a plain Llama the lean decoder reproduces (None when it is):
    :func:`burnqed.policy.decoder.unsupported`'s checks, made on the file."""
    if cfg.get("architectures") != ["LlamaForCausalLM"] or cfg.get("model_type") != "llama":
        return f"architectures {cfg.get('architectures')!r}, not LlamaForCausalLM"
    heads = cfg.get("num_attention_heads")
    if cfg.get("num_key_value_heads", heads) != heads:
        return "grouped-query attention"
    if cfg.get("attention_bias", False) or cfg.get("mlp_bias", False):
        return "biases in attention or MLP"
    if cfg.get("hidden_act", "silu") != "silu":
        return f"activation {cfg.get('hidden_act')!r}, not silu"
    if cfg.get("pretraining_tp", 1) != 1:
        return "pretraining_tp != 1"
    if cfg.get("dtype", cfg.get("torch_dtype", "float32")) != "float32":
        return f"stored as {cfg.get('dtype', cfg.get('torch_dtype'))}, not float32"
    rope = cfg.get("rope_parameters")
    if (
        not isinstance(rope, dict)
        or rope.get("rope_type") != "default"
        or set(rope)
        - {
            "rope_theta",
            "rope_type",
        }
    ):
        return f"rotary parameters {rope!r}, not the default"
    if cfg.get("rope_scaling") not in (None, {}, rope):
        return "a rotary scaling"
    for key in ("hidden_size", "num_hidden_layers", "max_position_embeddings"):
        if not isinstance(cfg.get(key), int):
            return f"no integer {key}"
    if "_attn_implementation" in cfg or "attn_implementation" in cfg:
        return "an attention implementation named in the config"
    return None


def tokenizer_unsupported(model_dir: Path) -> str | None:
    """Why the directory's tokenizer is not a generic fast tokenizer :class:`FastTokenizer` reads."""
    tok_cfg = _read_json(model_dir / "tokenizer_config.json")
    if tok_cfg is None or not (model_dir / "tokenizer.json").is_file():
        return "no tokenizer.json with a tokenizer_config.json"
    if tok_cfg.get("tokenizer_class") != "PreTrainedTokenizerFast":
        return f"tokenizer class {tok_cfg.get('tokenizer_class')!r}"
    if set(tok_cfg) - {
        "backend",
        "bos_token",
        "eos_token",
        "pad_token",
        "unk_token",
        "model_max_length",
        "tokenizer_class",
        "clean_up_tokenization_spaces",
    }:
        return "tokenizer settings beyond the special tokens"
    if tok_cfg.get("backend", "tokenizers") != "tokenizers":
        return f"tokenizer backend {tok_cfg.get('backend')!r}"
    if (model_dir / "special_tokens_map.json").exists() or (
        model_dir / "added_tokens.json"
    ).exists():
        return "special tokens outside tokenizer_config.json"
    return None


def why_not(model_dir: str | Path, *, device: torch.device, dtype: torch.dtype) -> str | None:
    """Why ``model_dir`` is not loaded by this module for ``device``/``dtype`` (None: it is)."""
    path = Path(model_dir)
    if device.type != "cpu":
        return f"verified on CPU only, not {device.type}"
    if dtype != torch.float32:
        return f"dtype {dtype}, not float32"
    if not path.is_dir():
        return "not a local directory"
    cfg = _read_json(path / "config.json")
    if cfg is None:
        return "no readable config.json"
    if (
        not (path / "model.safetensors").is_file()
        or (path / "model.safetensors.index.json").exists()
    ):
        return "not one model.safetensors file"
    return config_unsupported(cfg) or tokenizer_unsupported(path)


@dataclass(frozen=True)
class Norm:
    """The two things ``LlamaRMSNorm.forward`` reads."""

    weight: torch.Tensor
    variance_epsilon: float


class Rotary:
    """``LlamaRotaryEmbedding`` for ``rope_type: default``: its ``inv_freq`` as
    ``compute_default_rope_parameters`` computes it and its forward, operation for operation."""

    attention_scaling = 1.0

    def __init__(self, theta: float, head_dim: int) -> None:
        self.inv_freq = 1.0 / (
            theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim)
        )

    @torch.no_grad()
    def __call__(
        self, x: torch.Tensor, position_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = position_ids[..., None].float() * self.inv_freq.to(
            device=x.device, dtype=torch.float
        )
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


@dataclass(frozen=True)
class Weights:
    """A plain Llama's parameters, as :class:`~burnqed.policy.decoder.LlamaDecoder` reads them."""

    config: dict[str, Any]
    embed: torch.Tensor  # (V, d)
    layers: list[tuple[Any, ...]]  # per layer: norm1, q, k, v, o, scaling, norm2, gate, up, down
    norm: Norm
    lm_head: torch.Tensor  # (V, d): the embedding itself when tied
    rotary: Rotary
    head_dim: int
    eos_token_id: int | list[int] | None

    @property
    def max_position_embeddings(self) -> int | None:
        return self.config.get("max_position_embeddings")


def load_weights(model_dir: str | Path) -> Weights:
    """The parameters of the plain Llama in ``model_dir`` (check :func:`why_not` first).  Raises
    ``ValueError`` naming the tensor when the file does not hold exactly what the config says."""
    from safetensors.torch import load_file

    path = Path(model_dir)
    cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
    tensors = load_file(path / "model.safetensors")
    heads, d = cfg["num_attention_heads"], cfg["hidden_size"]
    head_dim = cfg.get("head_dim") or d // heads
    eps = float(cfg.get("rms_norm_eps", 1e-6))
    wanted = {"model.embed_tokens.weight", "model.norm.weight"}
    wanted |= {
        f"model.layers.{i}.{n}" for i in range(cfg["num_hidden_layers"]) for n in LAYER_WEIGHTS
    }
    tied = bool(cfg.get("tie_word_embeddings", False))
    if not tied:
        wanted.add("lm_head.weight")
    extra = set(tensors) - wanted - ({"lm_head.weight"} if tied else set())
    missing = wanted - set(tensors)
    if missing:
        raise ValueError(f"{path / 'model.safetensors'}: no tensor {sorted(missing)[0]}")
    if extra:
        raise ValueError(f"{path / 'model.safetensors'}: unexpected tensor {sorted(extra)[0]}")
    if any(t.dtype != torch.float32 for t in tensors.values()):
        raise ValueError(f"{path / 'model.safetensors'}: not all float32")
    embed = tensors["model.embed_tokens.weight"]
    layers = []
    for i in range(cfg["num_hidden_layers"]):
        w = {n: tensors[f"model.layers.{i}.{n}"] for n in LAYER_WEIGHTS}
        layers.append(
            (
                Norm(w["input_layernorm.weight"], eps),
                w["self_attn.q_proj.weight"],
                w["self_attn.k_proj.weight"],
                w["self_attn.v_proj.weight"],
                w["self_attn.o_proj.weight"],
                head_dim**-0.5,  # LlamaAttention.scaling
                Norm(w["post_attention_layernorm.weight"], eps),
                w["mlp.gate_proj.weight"],
                w["mlp.up_proj.weight"],
                w["mlp.down_proj.weight"],
            )
        )
    gen_cfg = _read_json(path / "generation_config.json") or {}
    return Weights(
        config=cfg,
        embed=embed,
        layers=layers,
        norm=Norm(tensors["model.norm.weight"], eps),
        lm_head=embed if tied else tensors["lm_head.weight"],
        rotary=Rotary(float(cfg["rope_parameters"]["rope_theta"]), head_dim),
        head_dim=head_dim,
        eos_token_id=gen_cfg.get("eos_token_id", cfg.get("eos_token_id")),
    )


class Encoded(dict):
    """What a Hugging Face tokenizer's call returns, as far as burnqed reads it: ``["input_ids"]``
    and ``.input_ids``."""

    @property
    def input_ids(self) -> Any:
        return self["input_ids"]


class FastTokenizer:
    """The Hugging Face calls burnqed makes, on the ``tokenizers.Tokenizer`` of ``tokenizer.json``
    (what ``PreTrainedTokenizerFast`` wraps): encoding with the special tokens its post-processor
    adds, right truncation at ``max_length`` (transformers' ``longest_first`` on one sequence),
    decoding with or without special tokens (no clean-up: transformers skips it for BPE)."""

    def __init__(self, tokenizer: Any, special: dict[str, str | None]) -> None:
        self._tok = tokenizer
        self._truncating: dict[int, Any] = {}
        self.bos_token = special.get("bos_token")
        self.eos_token = special.get("eos_token")
        self.pad_token = special.get("pad_token")
        self.unk_token = special.get("unk_token")

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> FastTokenizer:
        from tokenizers import Tokenizer

        path = Path(model_dir)
        cfg = _read_json(path / "tokenizer_config.json") or {}
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        model_type = type(tokenizer.model).__name__
        if cfg.get("clean_up_tokenization_spaces") and model_type != "BPE":
            raise ValueError(f"{path}: clean_up_tokenization_spaces on a {model_type} tokenizer")
        special = {k: cfg.get(k) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
        for value in special.values():
            if value is not None and not isinstance(value, str):
                raise ValueError(
                    f"{path / 'tokenizer_config.json'}: a special token that is not a string"
                )
        return cls(tokenizer, special)

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self._tok.token_to_id(token)

    @property
    def bos_token_id(self) -> int | None:
        return self._id(self.bos_token)

    @property
    def eos_token_id(self) -> int | None:
        return self._id(self.eos_token)

    @property
    def pad_token_id(self) -> int | None:
        return self._id(self.pad_token)

    def __len__(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def _encoder(self, max_length: int | None) -> Any:
        if max_length is None:
            return self._tok
        got = self._truncating.get(max_length)
        if got is None:  # a copy per length: the call never changes a shared tokenizer's state
            from tokenizers import Tokenizer

            got = Tokenizer.from_str(self._tok.to_str())
            got.enable_truncation(max_length, stride=0, strategy="longest_first", direction="right")
            self._truncating[max_length] = got
        return got

    def __call__(
        self,
        text: str,
        *,
        add_special_tokens: bool = True,
        truncation: bool = False,
        max_length: int | None = None,
        return_tensors: str | None = None,
        **unsupported: Any,
    ) -> Encoded:
        if unsupported or not isinstance(text, str):
            what = f"{', '.join(sorted(unsupported))}: unsupported" if unsupported else "a batch"
            raise TypeError(
                f"FastTokenizer encodes one text at a time, unpadded ({what}); for batches and "
                "padding load transformers' tokenizer (burnqed.train.loop.load_tokenizer)"
            )
        encoder = self._encoder(max_length if truncation else None)
        ids = encoder.encode(text, add_special_tokens=add_special_tokens).ids
        if return_tensors == "pt":
            return Encoded(input_ids=torch.tensor([ids], dtype=torch.long))
        if return_tensors is not None:
            raise ValueError(f"return_tensors={return_tensors!r}: only 'pt' or None")
        return Encoded(input_ids=ids)

    def decode(self, ids: Sequence[int] | int, skip_special_tokens: bool = False) -> str:
        ids = [ids] if isinstance(ids, int) else list(ids)
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def batch_decode(
        self, seqs: Sequence[Sequence[int]], skip_special_tokens: bool = False
    ) -> list[str]:
        return self._tok.decode_batch(
            [list(s) for s in seqs], skip_special_tokens=skip_special_tokens
        )


def load_tokenizer(model_dir: str | Path) -> Any:
    """The tokenizer of ``model_dir``: a :class:`FastTokenizer` where it applies, else
    ``AutoTokenizer.from_pretrained`` from local files (never a hub download)."""
    path = Path(model_dir)
    if path.is_dir() and tokenizer_unsupported(path) is None:
        return FastTokenizer.from_dir(path)
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)


__all__ = [
    "Encoded",
    "FastTokenizer",
    "Norm",
    "Rotary",
    "Weights",
    "config_unsupported",
    "load_tokenizer",
    "load_weights",
    "tokenizer_unsupported",
    "why_not",
]
