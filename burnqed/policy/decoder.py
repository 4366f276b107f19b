"""A lean forward pass for plain Llama models: transformers' own operations, without its per-call cost.

The in-process backend samples one token per forward pass (``burnqed.policy.transformers_backend``),
and on the demo's tiny model (~0.44M parameters, two layers) most of a forward's time in
``LlamaForCausalLM.__call__`` is not arithmetic: module dispatch, the mask and cache objects, output
dataclasses, config look-ups.  :class:`LlamaDecoder` runs the **same torch operations on the same
shapes, in the same order** as transformers' Llama forward with its default ``sdpa`` attention and
``DynamicCache`` — embedding, RMSNorm in float32, the q/k/v projections viewed and transposed as
there, rotary embeddings from the model's own rotary module, the cache's ``cat`` on the sequence
axis, ``scaled_dot_product_attention`` (causal in the prefill, no mask), the SiLU MLP, the final
norm and the LM head over every position — so its logits, hidden states and cache are **bitwise**
the model's (``tests/policy/test_decoder.py`` compares them on prefills and decode steps, with and
without a cache).  Nothing is fused or reshaped: a matrix product of another shape rounds
differently on a CPU, and one flipped bit changes a search tree.

Two things it adds, both exact:

- the rotary ``(cos, sin)`` of a (start, length) pair is computed once by the model's rotary module
  and kept (a pure function of the positions);
- its cache is a tuple of immutable ``(keys, values)`` pairs (every update is a new ``cat``, as in
  ``DynamicCache``), so a prefill's result can be kept and continued by several decodes — the
  backend's prefill cache (the same prompt, e.g. a theorem's root in each of its attempts, is
  prefilled once);
- a decoding (:meth:`LlamaDecoder.begin`, :meth:`LlamaDecoder.step`) copies the prefill's keys and
  values once into buffers with room for the new tokens and writes each token's in place, instead
  of copying the whole sequence again at every token; attention reads the filled part as a view.

:func:`LlamaDecoder.for_model` returns ``None`` (and the backend keeps the model's own forward) for
anything it does not reproduce: another architecture, attention implementation or rotary type,
grouped-query attention, biases, another activation, a model on a GPU (not verified there), or
training mode.

Example::

    model = AutoModelForCausalLM.from_pretrained("models/base").eval()
    dec = LlamaDecoder.for_model(model)           # None: use model(...) instead
    logits, cache = dec.forward(ids)              # ids (rows, T): logits (rows, T, V)
    logits, cache = dec.forward(next_ids, cache)  # next_ids (rows, 1)
    state = dec.begin(cache, capacity=T + 32)     # then one token at a time, in place:
    logits = dec.step(next_ids, state)            # (rows, 1, V)
"""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.nn.functional as F

log = logging.getLogger(__name__)

# One (keys, values) pair per layer, each (rows, heads, seq, head_dim).
Cache = tuple[tuple[torch.Tensor, torch.Tensor], ...]


def unsupported(model: Any) -> str | None:
    """Why :class:`LlamaDecoder` would not reproduce ``model``'s forward, or None when it does."""
    from transformers import LlamaForCausalLM

    if type(model) is not LlamaForCausalLM:
        return f"{type(model).__name__} is not a plain LlamaForCausalLM"
    cfg = model.config
    if model.training:
        return "the model is in training mode"
    if model.device.type != "cpu":
        return f"verified on CPU only, the model is on {model.device.type}"
    if getattr(cfg, "_attn_implementation", None) != "sdpa":
        return f"attention implementation {getattr(cfg, '_attn_implementation', None)!r}, not sdpa"
    if cfg.num_key_value_heads != cfg.num_attention_heads:
        return "grouped-query attention"
    if cfg.attention_bias or cfg.mlp_bias:
        return "biases in attention or MLP"
    if cfg.hidden_act != "silu":
        return f"activation {cfg.hidden_act!r}, not silu"
    if getattr(cfg, "pretraining_tp", 1) != 1:
        return "pretraining_tp != 1"
    rotary = model.model.rotary_emb
    if rotary.rope_type != "default" or rotary.attention_scaling != 1.0:
        return f"rotary type {rotary.rope_type!r}"
    if len(model.model.layers) != cfg.num_hidden_layers:
        return "layers beyond num_hidden_layers"
    if any(m._forward_hooks or m._forward_pre_hooks for m in model.modules()):
        return "forward hooks on the model"
    return None


class Decoding:
    """One sample's decoding after a prefill (:meth:`LlamaDecoder.begin`): per layer a keys and a
    values buffer ``(rows, heads, capacity, head_dim)``, filled up to ``length``."""

    __slots__ = ("layers", "length")

    def __init__(self, layers: list[tuple[torch.Tensor, torch.Tensor]], length: int) -> None:
        self.layers = layers
        self.length = length


class LlamaDecoder:
    """The forward pass of one ``LlamaForCausalLM`` (module docstring), from a loaded model
    (:meth:`for_model`) or from its files (:meth:`from_weights`)."""

    def __init__(
        self,
        *,
        embed: torch.Tensor,
        layers: list[tuple[Any, ...]],
        norm: Any,
        lm_head: torch.Tensor,
        rotary: Any,
        head_dim: int,
        use_cache: bool,
    ) -> None:
        """From the parameters themselves (:meth:`for_model` reads them off a model,
        :meth:`from_weights` off its files): per layer ``(norm1, q, k, v, o, scaling, norm2,
        gate, up, down)`` — a norm is anything with ``weight`` and ``variance_epsilon``, the
        rotary a callable ``(h, position_ids) -> (cos, sin)`` as ``LlamaRotaryEmbedding``."""
        self.head_dim = head_dim
        self.embed = embed  # (V, d)
        self.layers = layers
        self.norm = norm
        self.lm_head = lm_head  # (V, d); tied to embed in the tiny model
        # A decode step's projections as the matrix products ``F.linear`` runs on a (rows, 1, d)
        # input (``matmul`` folds it to (rows, d) and calls ``mm`` with the transposed weight): the
        # same kernel on the same operands, without the two wrappers' per-call cost.
        self._step_layers = [
            (norm1, wq.t(), wk.t(), wv.t(), wo.t(), scaling, norm2, wg.t(), wu.t(), wd.t())
            for (norm1, wq, wk, wv, wo, scaling, norm2, wg, wu, wd) in self.layers
        ]
        self._lm_head_t = self.lm_head.t()
        self.rotary = rotary
        # What a forward without past_key_values does by default (it builds a DynamicCache or not).
        self.use_cache = use_cache
        self._rope: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def for_model(cls, model: Any) -> LlamaDecoder | None:
        """The decoder of a loaded ``LlamaForCausalLM`` (reading its weights in place, so it
        follows the model as long as the model object lives); None, with the reason logged, for
        anything :func:`unsupported` names."""
        why = unsupported(model)
        if why is not None:
            log.info("lean Llama forward not used (%s): the model's own forward runs", why)
            return None
        cfg = model.config
        inner = model.model
        return cls(
            embed=inner.embed_tokens.weight,
            layers=[
                (
                    layer.input_layernorm,
                    layer.self_attn.q_proj.weight,
                    layer.self_attn.k_proj.weight,
                    layer.self_attn.v_proj.weight,
                    layer.self_attn.o_proj.weight,
                    layer.self_attn.scaling,
                    layer.post_attention_layernorm,
                    layer.mlp.gate_proj.weight,
                    layer.mlp.up_proj.weight,
                    layer.mlp.down_proj.weight,
                )
                for layer in inner.layers
            ],
            norm=inner.norm,
            lm_head=model.lm_head.weight,
            rotary=inner.rotary_emb,
            head_dim=getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
            use_cache=bool(getattr(cfg, "use_cache", False)),
        )

    @classmethod
    def from_weights(cls, weights: Any) -> LlamaDecoder:
        """The decoder of a plain Llama read from its files without transformers
        (:func:`burnqed.policy.lean_load.load_weights`): the same forward, bitwise
        (``tests/policy/test_lean_load.py``)."""
        return cls(
            embed=weights.embed,
            layers=weights.layers,
            norm=weights.norm,
            lm_head=weights.lm_head,
            rotary=weights.rotary,
            head_dim=weights.head_dim,
            use_cache=bool(weights.config.get("use_cache", True)),  # LlamaConfig's default
        )

    # ----------------------------------------------------------------------------------------

    @staticmethod
    def _rms(norm: Any, h: torch.Tensor) -> torch.Tensor:
        """``LlamaRMSNorm.forward``, operation for operation."""
        dtype = h.dtype
        if dtype is torch.float32:  # the two casts return their input: skip the calls
            variance = h.pow(2).mean(-1, keepdim=True)
            return norm.weight * (h * torch.rsqrt(variance + norm.variance_epsilon))
        h = h.to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + norm.variance_epsilon)
        return norm.weight * h.to(dtype)

    def _rotary(
        self, start: int, length: int, h: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The model's rotary ``(cos, sin)`` ``(1, length, head_dim)`` for positions start.., as
        ``LlamaModel.forward`` computes them (``arange(length) + start``, unsqueezed), kept."""
        key = (start, length)
        got = self._rope.get(key)
        if got is None:
            positions = (torch.arange(length, device=h.device) + start).unsqueeze(0)  # (1, T)
            got = self._rope[key] = self.rotary(h, position_ids=positions)
        return got

    @staticmethod
    def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """``apply_rotary_pos_emb`` for one tensor (``rotate_half`` inlined)."""
        half = x.shape[-1] // 2
        return (x * cos) + (torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin)

    def _layers(
        self, ids: torch.Tensor, cache: Cache | None, *, store: bool = True
    ) -> tuple[torch.Tensor, Cache]:
        """The final normed hidden states and the extended cache.  ``store=False`` is a forward
        without a cache object (``use_cache=False``): keys and values go to attention as computed."""
        rows, length = ids.shape
        h = F.embedding(ids, self.embed)  # (rows, T, d)
        start = 0 if cache is None else cache[0][0].shape[-2]
        cos, sin = self._rotary(start, length, h)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)  # (1, 1, T, head_dim)
        shape = (rows, length, -1, self.head_dim)
        new: list[tuple[torch.Tensor, torch.Tensor]] = []
        for i, (norm1, wq, wk, wv, wo, scaling, norm2, wg, wu, wd) in enumerate(self.layers):
            residual = h
            x = self._rms(norm1, h)
            q = F.linear(x, wq).view(shape).transpose(1, 2)  # (rows, heads, T, head_dim)
            k = F.linear(x, wk).view(shape).transpose(1, 2)
            v = F.linear(x, wv).view(shape).transpose(1, 2)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            if not store:
                keys, values = k, v
            elif cache is None:  # DynamicCache's lazy start: an empty tensor, then cat
                empty = torch.tensor([], dtype=k.dtype, device=k.device)
                keys, values = torch.cat([empty, k], dim=-2), torch.cat([empty, v], dim=-2)
            else:
                keys = torch.cat([cache[i][0], k], dim=-2)
                values = torch.cat([cache[i][1], v], dim=-2)
            if store:
                new.append((keys, values))
            attn = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=None, dropout_p=0.0, scale=scaling, is_causal=length > 1
            )  # (rows, heads, T, head_dim)
            attn = attn.reshape(attn.shape[0], -1, length, values.shape[-1])
            attn = attn.transpose(1, 2).contiguous()
            attn = attn.reshape(rows, length, -1).contiguous()  # (rows, T, d)
            h = residual + F.linear(attn, wo)
            residual = h
            x = self._rms(norm2, h)
            h = residual + F.linear(F.silu(F.linear(x, wg)) * F.linear(x, wu), wd)
        return self._rms(self.norm, h), tuple(new)

    def forward(self, ids: torch.Tensor, cache: Cache | None = None) -> tuple[torch.Tensor, Cache]:
        """Logits ``(rows, T, V)`` of token ids ``(rows, T)`` after ``cache`` (None: a prefill),
        and the cache extended by them: ``model(input_ids=ids, past_key_values=…, use_cache=True)``'s
        ``logits`` and keys/values, bitwise."""
        hidden, new = self._layers(ids, cache)
        return F.linear(hidden, self.lm_head), new

    def begin(self, cache: Cache, capacity: int, rows: int | None = None) -> Decoding:
        """A decoding that continues ``cache`` (left untouched, so a kept prefill serves again)
        for up to ``capacity - length`` tokens: the keys and values are copied once into buffers
        of ``capacity`` positions and each :meth:`step` writes its own in place, where the model's
        cache concatenates the whole sequence again at every token.  Attention reads a view of the
        buffer's filled part: the same numbers, in other strides, and ``scaled_dot_product_attention``
        gives the same bits for them (``tests/policy/test_decoder.py``).  ``rows`` continues a
        one-row cache in that many rows (each a copy of it)."""
        cached_rows, heads, length, head_dim = cache[0][0].shape
        rows = cached_rows if rows is None else rows
        layers = []
        for keys, values in cache:
            k = keys.new_empty((rows, heads, capacity, head_dim))
            v = values.new_empty((rows, heads, capacity, head_dim))
            k[:, :, :length] = keys
            v[:, :, :length] = values
            layers.append((k, v))
        return Decoding(layers, length)

    def step(self, ids: torch.Tensor, state: Decoding) -> torch.Tensor:
        """Logits ``(rows, 1, V)`` of one token per row ``ids`` ``(rows, 1)`` after ``state``,
        which takes the token's keys and values: :meth:`forward` with the cache, bitwise.  Every
        projection is ``torch.mm`` on the (rows, d) view, as ``F.linear`` computes it (the
        ``_step_layers`` comment)."""
        mm = torch.mm
        rows = ids.shape[0]
        h = F.embedding(ids, self.embed)  # (rows, 1, d)
        d = h.shape[-1]
        start = state.length
        cos, sin = self._rotary(start, 1, h)
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        shape = (rows, 1, -1, self.head_dim)
        flat = (rows, d)
        end = start + 1
        for (norm1, wq, wk, wv, wo, scaling, norm2, wg, wu, wd), (kb, vb) in zip(
            self._step_layers, state.layers, strict=True
        ):
            residual = h
            x = self._rms(norm1, h).view(flat)
            q = mm(x, wq).view(shape).transpose(1, 2)  # (rows, heads, 1, head_dim)
            k = mm(x, wk).view(shape).transpose(1, 2)
            v = mm(x, wv).view(shape).transpose(1, 2)
            q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
            kb[:, :, start:end] = k
            vb[:, :, start:end] = v
            keys, values = kb[:, :, :end], vb[:, :, :end]
            attn = F.scaled_dot_product_attention(
                q, keys, values, attn_mask=None, dropout_p=0.0, scale=scaling, is_causal=False
            )  # (rows, heads, 1, head_dim)
            attn = attn.reshape(attn.shape[0], -1, 1, values.shape[-1])
            attn = attn.transpose(1, 2).contiguous()
            attn = attn.reshape(rows, -1).contiguous()  # (rows, d)
            h = residual + mm(attn, wo).view(rows, 1, -1)
            residual = h
            x = self._rms(norm2, h).view(flat)
            h = residual + mm(F.silu(mm(x, wg)) * mm(x, wu), wd).view(rows, 1, -1)
        state.length = end
        return mm(self._rms(self.norm, h).view(flat), self._lm_head_t).view(rows, 1, -1)

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """The final (normed) layer ``(rows, T, d)`` of ``ids``: ``model.base_model(input_ids=ids)
        .last_hidden_state``, bitwise (the cache the model builds there by default included)."""
        return self._layers(ids, None, store=self.use_cache)[0]


__all__ = ["Cache", "Decoding", "LlamaDecoder", "unsupported"]
