"""In-process Hugging Face transformers backend (CPU dev, tests, the demo, small GPUs).

Batched sampling: ``B`` prompts are left-padded into one batch and ``model.generate`` draws
``num_return_sequences=n`` per prompt, so ``B × n`` sequences decode together.  A candidate's logprob
is the sum of the **raw model** log-probabilities of its tokens (``output_logits=True``, then
``log_softmax``), not of the temperature/top-p processed scores that sampling used — the same
quantity a teacher-forced forward pass gives, and the one SGLang and vLLM report.

What a candidate's tokens are (``num_tokens`` and the logprob sum cover exactly these): the
generated tokens up to *and including* the one that ended it — the EOS token, or the token that
completed a stop string (the text is cut before the stop string, as servers do).  A candidate that
hit ``max_new_tokens`` has all of them.  Servers count the same way, so scores are comparable.

Embeddings: ``pooling="last"`` is the last token's final-layer hidden state, L2-normalised (what
SGLang ``/encode`` and vLLM's pooling runner return, so an energy model sees the same inputs);
``pooling="mean"`` is the attention-mask-aware mean of the final layer (not normalised).

Example::

    from burnqed.policy import SamplingParams
    from burnqed.policy.transformers_backend import TransformersGenerator

    gen = TransformersGenerator("models/base")
    groups = gen.generate(["p1", "p2"], SamplingParams(n=4, temperature=1.0, stop=("```",), seed=0))
    vectors = gen.embed(["⊢ p → p", "⊢ q"])       # (2, hidden_size) float32
    gen.close()
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, StoppingCriteria, StoppingCriteriaList

from burnqed.policy import (
    Candidate,
    Generation,
    SamplingParams,
    dedup_candidates,
    trim_completion,
)
from burnqed.policy.model_files import check_model_dir, is_path_like

log = logging.getLogger(__name__)

POOLINGS = ("last", "mean")


@dataclass(frozen=True)
class Sample:
    """One raw sampled continuation, before trimming and de-duplication (what a server sees)."""

    token_ids: tuple[int, ...]  # generated tokens, up to and including the one that ended it
    token_logprobs: tuple[float, ...]  # raw model logprob of each of token_ids
    text: str  # decoded (special tokens skipped), cut before the first stop string
    finish_reason: str  # "stop" (EOS or stop string) | "length"
    matched: int | str | None  # the EOS id or stop string that ended it; None for "length"


class _StopOnText(StoppingCriteria):
    """Marks a sequence done once its generated text contains a stop string.

    The same rule :meth:`TransformersGenerator._cut` applies afterwards, so generation stops exactly
    where the candidate is cut.  (transformers' own ``stop_strings`` only matches at the end of the
    text, which misses a token like "```\\n" that carries the stop string plus more.)
    """

    def __init__(self, tokenizer, prompt_len: int, stop: Sequence[str]) -> None:
        self.tokenizer, self.prompt_len, self.stop = tokenizer, prompt_len, tuple(stop)

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        texts = self.tokenizer.batch_decode(
            input_ids[:, self.prompt_len :], skip_special_tokens=True
        )
        done = [any(s in t for s in self.stop) for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class TransformersGenerator:
    """:class:`~burnqed.policy.TacticGenerator` over an HF causal LM loaded in this process."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        device: str = "auto",
        dtype: str = "auto",
        pooling: str = "last",
        max_batch: int = 64,
        model_id: str | None = None,
    ) -> None:
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        self.model_id = model_id or str(model_dir)
        self.pooling = pooling
        self.max_batch = max_batch  # sequences per forward batch (prompts × n, or texts)
        self.device = torch.device(_resolve_device(device))
        torch_dtype = _resolve_dtype(dtype, self.device)
        # Never a hub lookup: a path-like argument must be a valid directory (checked here, naming
        # the broken file), and a hub id resolves from the local cache only.
        if is_path_like(model_dir):
            check_model_dir(model_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        # Left padding: every prompt then ends at the same position, where generation starts and
        # where last-token pooling reads.
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch_dtype, local_files_only=True
        )
        self.model.to(self.device).eval()
        eos = self.model.generation_config.eos_token_id
        if eos is None:
            eos = self.tokenizer.eos_token_id
        self.eos_ids = frozenset([eos] if isinstance(eos, int) else eos)
        self.hidden_size = self.model.config.hidden_size
        log.info("loaded %s on %s (%s)", self.model_id, self.device, torch_dtype)

    # ----------------------------------------------------------------------------------------
    # Generation

    def generate(self, prompts: Sequence[str], params: SamplingParams) -> list[Generation]:
        groups = self.sample(prompts, params)
        out = []
        for samples in groups:
            raw = [
                Candidate(
                    text=trim_completion(s.text, params.stop),
                    logprob=sum(s.token_logprobs),
                    num_tokens=len(s.token_ids),
                    finish_reason=s.finish_reason,
                )
                for s in samples
            ]
            out.append(dedup_candidates(raw))
        return out

    def sample(self, prompts: Sequence[str], params: SamplingParams) -> list[list[Sample]]:
        """``n`` raw samples per prompt, grouped per prompt in prompt order (no de-duplication)."""
        prompts = list(prompts)
        per_chunk = max(1, self.max_batch // params.n)
        out: list[list[Sample]] = []
        # A fixed seed reproduces the candidates without disturbing the caller's global RNG.
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices, enabled=params.seed is not None):
            if params.seed is not None:
                torch.manual_seed(params.seed)
            for start in range(0, len(prompts), per_chunk):
                out.extend(self._sample_chunk(prompts[start : start + per_chunk], params))
        return out

    @torch.inference_mode()
    def _sample_chunk(self, prompts: list[str], params: SamplingParams) -> list[list[Sample]]:
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True).to(self.device)
        prompt_len = enc.input_ids.shape[1]
        greedy = params.temperature == 0
        stopping = StoppingCriteriaList()
        if params.stop:
            stopping.append(_StopOnText(self.tokenizer, prompt_len, params.stop))
        out = self.model.generate(
            **enc,
            do_sample=not greedy,
            temperature=None if greedy else params.temperature,
            top_p=None if greedy else params.top_p,
            top_k=None,  # the model's generation_config must not add a hidden top-k
            max_new_tokens=params.max_new_tokens,
            # Greedy decoding draws one sequence (transformers refuses n > 1 without sampling); the
            # n identical samples a server would return are copies of it.
            num_return_sequences=1 if greedy else params.n,
            stopping_criteria=stopping,
            eos_token_id=sorted(self.eos_ids),
            pad_token_id=self.tokenizer.pad_token_id,
            output_logits=True,
            return_dict_in_generate=True,
        )
        generated = out.sequences[:, prompt_len:]  # (B·n, T), B·n prompt-major
        # Raw logprob of each generated token, one step at a time so a large vocabulary never
        # materialises a (T, B·n, V) tensor.
        token_lp = torch.stack(
            [
                torch.log_softmax(step.float(), dim=-1)
                .gather(1, generated[:, t : t + 1])
                .squeeze(1)
                for t, step in enumerate(out.logits)
            ],
            dim=1,
        )  # (B·n, T)
        ids, lps = generated.tolist(), token_lp.tolist()
        samples = [self._cut(i, lp, params.stop) for i, lp in zip(ids, lps, strict=True)]
        if greedy:
            return [[s] * params.n for s in samples]
        n = params.n
        return [samples[i * n : (i + 1) * n] for i in range(len(prompts))]

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
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.hidden_size), dtype=np.float32)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        chunks = []
        for start in range(0, len(texts), self.max_batch):
            enc = self.tokenizer(
                texts[start : start + self.max_batch],
                return_tensors="pt",
                padding=True,
                truncation=limit is not None,
                max_length=limit,
            ).to(self.device)
            # The decoder stack without the LM head: its output is the final (normed) layer.
            hidden = self.model.base_model(**enc).last_hidden_state.float()  # (b, T, d)
            if self.pooling == "last":
                pooled = torch.nn.functional.normalize(hidden[:, -1], dim=-1)  # left padded
            else:
                mask = enc.attention_mask.unsqueeze(-1).to(hidden.dtype)  # (b, T, 1)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
            chunks.append(pooled.cpu().numpy())
        return np.concatenate(chunks).astype(np.float32, copy=False)

    def close(self) -> None:
        self.model = None  # type: ignore[assignment]
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
