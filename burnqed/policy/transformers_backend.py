"""In-process Hugging Face transformers backend (CPU dev, tests, the demo, small GPUs).

**Batch-invariant, per-candidate-seeded sampling.**  A prompt's candidates must be the same whether
it is sampled alone or in a call with any other prompts (``burnqed.policy``: a search must not depend
on how its prompts were batched).  Floating-point results on a CPU change with the batch's shape — a
batch of one runs another matrix kernel than a batch of eight, a row's result depends on where the
kernel's row tiles fall, and left padding moves where attention's reductions split — so "equal within
a tolerance" is the best a padded batch can give, and one flipped token changes a search tree.  This
backend makes the equality hold *by construction*: every prompt gets its own forward passes, with
its ``n`` candidates as the batch (shape ``(n, prompt length)``, then ``(n, 1)`` per decoded token:
nothing in it depends on the other prompts), and every candidate draws its tokens from its own
``torch.Generator`` seeded with its own seed (one uniform per decoding step, inverse-CDF sampling
over the temperature/top-p distribution), so candidate ``j`` is a function of (model, prompt,
``n``, ``seeds[j]``) alone.  A finished candidate keeps its row (fed its last token, output ignored)
so the others' shapes never change.  The cost against one padded batch of all prompts is measured
by ``bench/policy.py``.

A candidate's logprob is the sum of the **raw model** log-probabilities of its tokens (``log_softmax``
of the logits, not of the temperature/top-p processed distribution that sampling used) — the same
quantity a teacher-forced forward pass gives, and the one SGLang and vLLM report.

What a candidate's tokens are (``num_tokens`` and the logprob sum cover exactly these): the
generated tokens up to *and including* the one that ended it — the EOS token, or the token that
completed a stop string (the text is cut before the stop string, as servers do).  A candidate that
hit ``max_new_tokens`` has all of them.  Servers count the same way, so scores are comparable.

Embeddings: one forward per text (the same by-construction rule: an energy must not depend on the
batch it was scored in), tokenised and pooled by :mod:`burnqed.policy.embedding` (which also says
which text a state is embedded as: its prompt).  ``pooling="last"`` is the last token's final-layer hidden state,
L2-normalised (what SGLang ``/encode`` and vLLM's pooling runner return, so an energy model sees the
same inputs); ``pooling="mean"`` is the mean of the final layer over the text's tokens (not
normalised).

Example::

    from burnqed.policy import SamplingParams, candidate_seeds
    from burnqed.policy.transformers_backend import TransformersGenerator

    gen = TransformersGenerator("models/base")
    seeds = [candidate_seeds(0, "t", 0, node, 4) for node in ("a", "b")]
    groups = gen.generate(["p1", "p2"], SamplingParams(n=4, temperature=1.0, stop=("```",)), seeds)
    vectors = embed_states(gen, ["⊢ p → p", "⊢ q"])  # (2, hidden_size): burnqed.policy.embedding
    gen.close()
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from burnqed.policy import (
    SEED_BITS,
    Candidate,
    Generation,
    SamplingParams,
    check_seeds,
    generation_of,
    lean_load,
    trim_completion,
)
from burnqed.policy.decoder import LlamaDecoder
from burnqed.policy.embedding import POOLINGS, context_limit, embedding_ids, pool_hidden
from burnqed.policy.model_files import check_model_dir, is_path_like

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Sample:
    """One raw sampled continuation, before trimming and de-duplication (what a server sees)."""

    token_ids: tuple[int, ...]  # generated tokens, up to and including the one that ended it
    token_logprobs: tuple[float, ...]  # raw model logprob of each of token_ids
    text: str  # decoded (special tokens skipped), cut before the first stop string
    finish_reason: str  # "stop" (EOS or stop string) | "length"
    matched: int | str | None  # the EOS id or stop string that ended it; None for "length"


def _draw(logits: torch.Tensor, temperature: float, top_p: float, u: torch.Tensor) -> torch.Tensor:
    """One token per row of ``logits`` ``(rows, V)`` by inverse-CDF sampling with the row's uniform
    ``u`` ``(rows,)`` from the temperature-scaled, top-p-truncated distribution.  Row-wise only:
    a row's token depends on its own logits and uniform, never on the other rows."""
    probs = torch.softmax(logits / temperature, -1)  # (rows, V)
    order = None  # the vocabulary in its own order: a position is its token
    if top_p < 1.0:
        # Nucleus: the most probable tokens whose mass reaches top_p (at least one).
        probs, order = torch.sort(probs, stable=True, dim=-1, descending=True)
        before = probs.cumsum(-1) - probs  # mass of the tokens ranked above each one
        probs = probs.masked_fill(before >= top_p, 0.0)
    cdf = probs.double().cumsum(-1)  # (rows, V)
    target = (u.double() * cdf[:, -1]).unsqueeze(1)  # (rows, 1); u.double() is u when u is double
    index = torch.searchsorted(cdf, target, right=True).clamp(max=cdf.shape[-1] - 1)
    return index[:, 0] if order is None else order.gather(1, index)[:, 0]


# The prefills kept for reuse, in bytes of keys, values and logits: the demo's prompts (~60 tokens,
# 8 or 16 rows) take ~1-2 MB each, so ~30-60 of them — the states of the searches in flight.
PREFILL_CACHE_BYTES = 64 * 2**20


class PrefillCache:
    """Least-recently-used prefills ``key -> (logits, cache)``, at most ``max_bytes`` of tensors.
    The tensors are never written to (a decode step makes new ones), so a kept prefill is continued
    by any number of samples."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = self.misses = 0
        self._items: OrderedDict[Any, tuple[Any, int]] = OrderedDict()

    @staticmethod
    def _size(value: Any) -> int:
        logits, cache = value
        return logits.nbytes + sum(k.nbytes + v.nbytes for k, v in cache)

    def get(self, key: Any) -> Any:
        item = self._items.get(key)
        if item is None:
            self.misses += 1
            return None
        self.hits += 1
        self._items.move_to_end(key)
        return item[0]

    def put(self, key: Any, value: Any) -> None:
        size = self._size(value)
        if size > self.max_bytes:
            return
        if key in self._items:
            self.bytes -= self._items.pop(key)[1]
        self._items[key] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes:
            _, (_, dropped) = self._items.popitem(last=False)
            self.bytes -= dropped

    def clear(self) -> None:
        self._items.clear()
        self.bytes = 0


class TransformersGenerator:
    """:class:`~burnqed.policy.TacticGenerator` over an HF causal LM loaded in this process."""

    # A prompt's n candidates are one batch (n, T): n decides the kernels, so candidate j depends
    # on n as well as on its seed (an expansion cache keys it with n).
    candidates_independent_of_n = False

    def __init__(
        self,
        model_dir: str | Path,
        *,
        device: str = "auto",
        dtype: str = "auto",
        pooling: str = "last",
        model_id: str | None = None,
        shared_prefill: bool = False,
    ) -> None:
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.model_id = model_id or str(model_dir)
        self.pooling = pooling
        self.device = torch.device(_resolve_device(device))
        # "auto" resolved: with the device, part of what decides an embedding (its cache key)
        self.dtype = torch_dtype = _resolve_dtype(dtype, self.device)
        # Never a hub lookup: a path-like argument must be a valid directory (checked here, naming
        # the broken file), and a hub id resolves from the local cache only.
        if is_path_like(model_dir):
            check_model_dir(model_dir)
        self._model_dir = model_dir
        self._model: Any = None
        self._closed = False
        # A plain Llama on the CPU loads from its three files without transformers' imports
        # (burnqed.policy.lean_load: ~3 s a job, the same bits); anything else through transformers.
        why = (
            lean_load.why_not(model_dir, device=self.device, dtype=torch_dtype)
            if is_path_like(model_dir)
            else "a hub id"
        )
        # A FastTokenizer where the directory's tokenizer allows, else transformers' (one rule).
        self.tokenizer = lean_load.load_tokenizer(model_dir)
        if why is None:
            weights = lean_load.load_weights(model_dir)
            eos = weights.eos_token_id
            self.hidden_size = weights.config["hidden_size"]
            self._context_limit = weights.max_position_embeddings
            # The model's own operations without transformers' per-call cost (decoder module).
            self.decoder: LlamaDecoder | None = LlamaDecoder.from_weights(weights)
        else:
            log.debug("%s: loaded through transformers (%s)", model_dir, why)
            eos = self.model.generation_config.eos_token_id
            self.hidden_size = self.model.config.hidden_size
            self._context_limit = context_limit(self.model.config)
            # The model's own operations without transformers' per-call cost, where they reproduce
            # it bitwise (burnqed.policy.decoder); None: every forward goes through the model.
            self.decoder = LlamaDecoder.for_model(self.model)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = frozenset([eos] if isinstance(eos, int) else eos)
        # One prefill row for a prompt's candidates (policy.shared_prefill), where the lean forward
        # runs: a (1, T) product instead of (n, T), other last bits, so other samples than n rows.
        self.shared_prefill = bool(shared_prefill) and self.decoder is not None
        if shared_prefill and self.decoder is None:
            log.warning("policy.shared_prefill: not used, the model's own forward runs (n rows)")
        self.prefills = PrefillCache(PREFILL_CACHE_BYTES)
        self._triggers: dict[tuple[str, ...], frozenset[int] | None] = {}  # _stop_triggers
        log.info("loaded %s on %s (%s)", self.model_id, self.device, torch_dtype)

    @property
    def model(self) -> Any:
        """The transformers model, loaded on first use where the lean path needs none (None once
        closed)."""
        if self._model is None and not self._closed:
            from transformers import AutoModelForCausalLM

            self._model = AutoModelForCausalLM.from_pretrained(
                self._model_dir, dtype=self.dtype, local_files_only=True
            )
            self._model.to(self.device).eval()
        return self._model

    # ----------------------------------------------------------------------------------------
    # Generation

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[Generation]:
        return [generation_of(raw) for raw in self.raw_candidates(prompts, params, seeds)]

    def raw_candidates(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[list[Candidate | None]]:
        """Per prompt, its ``n`` candidates in seed order before de-duplication (``generate`` is
        their :func:`~burnqed.policy.generation_of`; nothing is ever aborted in process)."""
        return [
            [
                Candidate(
                    text=trim_completion(s.text, params.stop),
                    logprob=sum(s.token_logprobs),
                    num_tokens=len(s.token_ids),
                    finish_reason=s.finish_reason,
                )
                for s in samples
            ]
            for samples in self.sample(prompts, params, seeds)
        ]

    def sample(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        seeds: Sequence[Sequence[int]] | None = None,
    ) -> list[list[Sample]]:
        """``n`` raw samples per prompt, grouped per prompt in prompt order (no de-duplication).

        ``seeds[i][j]`` seeds candidate ``j`` of prompt ``i``; without seeds, fresh ones are drawn
        from torch's global generator (reproducible under ``torch.manual_seed``)."""
        prompts = list(prompts)
        check_seeds(seeds, len(prompts), params.n)
        if seeds is None:
            seeds = torch.randint(0, 2**SEED_BITS - 1, (len(prompts), params.n)).tolist()
        return [self._sample_one(p, params, s) for p, s in zip(prompts, seeds, strict=True)]

    @torch.inference_mode()
    def _sample_one(
        self, prompt: str, params: SamplingParams, seeds: Sequence[int]
    ) -> list[Sample]:
        """The ``n`` candidates of one prompt: one forward per step over the candidates alone."""
        n = params.n
        greedy = params.temperature == 0
        rows = 1 if greedy else n  # greedy: one sequence; the n identical samples are copies
        # One uniform per candidate per step, from the candidate's own stream.
        uniforms = torch.stack(
            [
                torch.rand(params.max_new_tokens, generator=torch.Generator().manual_seed(int(s)))
                for s in seeds[:rows]
            ]
        ).to(self.device)  # (rows, max_new_tokens), float32
        uniforms = uniforms.double()  # what _draw scales the CDF by (the same cast, once)
        logits, step = self._start(prompt, rows, params.max_new_tokens)  # (rows, V)
        logprobs: list[torch.Tensor] = []
        generated: list[list[int]] = [[] for _ in range(rows)]  # the tokens so far, per row
        done = [False] * rows  # ended by EOS or a stop string (it is fed its last token on)
        # ``done`` only decides when the loop stops: a row's tokens do not depend on it (finished
        # rows keep their place) and ``_cut`` finds where each ended.  So a stop string is looked
        # for only after a token that can complete one (``_stop_triggers``).
        triggers = self._stop_triggers(params.stop)
        for t in range(params.max_new_tokens):
            if greedy:
                nxt = logits.argmax(-1)  # (rows,)
            else:
                nxt = _draw(logits, params.temperature, params.top_p, uniforms[:, t])
            logprobs.append(torch.log_softmax(logits, -1).gather(1, nxt[:, None])[:, 0])
            for r, token in enumerate(nxt.tolist()):
                generated[r].append(token)
                if done[r]:
                    continue
                if token in self.eos_ids:
                    done[r] = True
                elif params.stop and (triggers is None or token in triggers):
                    # a stop string can only end where its last token was generated
                    text = self.tokenizer.decode(generated[r], skip_special_tokens=True)
                    done[r] = any(s in text for s in params.stop)
            if all(done) or t + 1 == params.max_new_tokens:
                break
            # Finished rows are fed their last token too: the batch keeps its shape.
            logits = step(nxt[:, None])
        token_lp = torch.stack(logprobs, 1).tolist()  # (rows, steps)
        samples = [self._cut(i, lp, params.stop) for i, lp in zip(generated, token_lp, strict=True)]
        return samples * n if greedy else samples

    def _stop_triggers(self, stop: Sequence[str]) -> frozenset[int] | None:
        """The token ids after which a row's text can newly contain one of ``stop``: those whose
        own text holds a character of a stop string, cannot be decoded alone (a piece of a
        multi-byte character) or is empty.  Any other token adds only characters no stop string
        has, so a text without a stop string keeps not having one.  ``None`` (look after every
        token) when a stop string has whitespace: tokenizers that drop or add spaces at a token's
        edges decode a token alone otherwise than inside a text."""
        key = tuple(stop)
        got = self._triggers.get(key)
        if got is None and key not in self._triggers:
            if any(ch.isspace() for s in key for ch in s):
                got = None
            else:
                chars = {ch for s in key for ch in s}
                texts = self.tokenizer.batch_decode(
                    [[i] for i in range(len(self.tokenizer))], skip_special_tokens=True
                )
                got = frozenset(
                    i
                    for i, text in enumerate(texts)
                    if not text or "\ufffd" in text or any(ch in chars for ch in text)
                )
            self._triggers[key] = got
        return got

    def _start(
        self, prompt: str, rows: int, max_new_tokens: int
    ) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
        """The last position's logits ``(rows, V)`` of ``prompt`` repeated in ``rows`` rows, and
        ``step(ids (rows, 1)) -> logits (rows, V)`` that continues the sequences by one token.

        Through the lean forward (:mod:`burnqed.policy.decoder`: bitwise the model's own) a prompt's
        prefill is kept (:class:`PrefillCache`): it depends on the model, the prompt and ``rows``
        alone, and a search asks again for the same prompts — a theorem's root in each attempt, a
        state its attempts share — so a kept one gives the same samples for less."""
        ids = self.tokenizer(prompt, return_tensors="pt").input_ids.to(self.device)  # (1, T)
        if self.decoder is None:
            out = self.model(input_ids=ids.expand(rows, -1).contiguous(), use_cache=True)
            cache = out.past_key_values

            def step(nxt: torch.Tensor) -> torch.Tensor:
                nonlocal cache
                out = self.model(input_ids=nxt, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                return out.logits[:, -1].float()

            return out.logits[:, -1].float(), step
        decoder = self.decoder
        prefill_rows = 1 if self.shared_prefill else rows
        key = (tuple(ids[0].tolist()), prefill_rows)
        kept = self.prefills.get(key)
        if kept is None:
            full, prefix = decoder.forward(ids.expand(prefill_rows, -1).contiguous())
            # A copy of the last position: the kept prefill must not pin the (rows, T, V) block.
            kept = (full[:, -1].float().clone(), prefix)
            self.prefills.put(key, kept)
        logits, prefix = kept
        if prefill_rows != rows:  # the one row, every candidate's
            logits = logits.expand(rows, -1).contiguous()
        state = decoder.begin(prefix, ids.shape[1] + max_new_tokens, rows=rows)

        def lean_step(nxt: torch.Tensor) -> torch.Tensor:
            return decoder.step(nxt, state)[:, -1].float()

        return logits, lean_step

    def _cut(self, ids: list[int], lps: list[float], stop: Sequence[str]) -> Sample:
        """Cut one generated row where it ended: first EOS, or the token completing a stop string."""
        end, finish, matched = len(ids), "length", None
        for k, tok in enumerate(ids):
            if tok in self.eos_ids:
                end, finish, matched = k + 1, "stop", tok
                break
        text = self.tokenizer.decode(ids[:end], skip_special_tokens=True)
        hits = [(text.find(s), s) for s in stop if s and s in text]
        if hits:
            pos, s = min(hits)
            # The first prefix whose text contains the stop string: containment only grows with
            # the prefix, so bisect instead of decoding every prefix.
            lo, hi = 1, end
            while lo < hi:
                mid = (lo + hi) // 2
                if s in self.tokenizer.decode(ids[:mid], skip_special_tokens=True):
                    hi = mid
                else:
                    lo = mid + 1
            end, finish, matched = lo, "stop", s
            text = text[:pos]
        return Sample(tuple(ids[:end]), tuple(lps[:end]), text, finish, matched)

    # ----------------------------------------------------------------------------------------
    # Embeddings

    @torch.inference_mode()
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), hidden_size)`` float32, one forward per text (module docstring)."""
        limit = self._context_limit
        out = np.zeros((len(texts), self.hidden_size), dtype=np.float32)
        for i, text in enumerate(texts):
            ids = embedding_ids(self.tokenizer, text, limit)
            ids = torch.tensor([ids], device=self.device)  # (1, T)
            # The decoder stack without the LM head: its output is the final (normed) layer.
            if self.decoder is not None:
                hidden = self.decoder.hidden(ids).float()  # (1, T, d), bitwise the model's
            else:
                hidden = self.model.base_model(input_ids=ids).last_hidden_state.float()
            pooled = pool_hidden(hidden[0], self.pooling)  # (d,)
            out[i] = pooled.cpu().numpy()
        return out

    def close(self) -> None:
        self._model = None
        self._closed = True
        self.decoder = None
        self.prefills.clear()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def _resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def _resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    if dtype == "auto":
        if device.type != "cuda":
            return torch.float32  # CPU half precision is slow and lossy
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    try:
        return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[
            dtype
        ]
    except KeyError:
        raise ValueError(
            f"policy.dtype: unknown dtype {dtype!r} (auto, float32, float16, bfloat16)"
        ) from None
