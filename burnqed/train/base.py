"""``models/base/``: the base policy — a hub model made local, or the demo's tiny Llama trained from scratch.

For a hub id or local directory in ``model.base`` (real runs) the stage makes a local Hugging Face
directory of it: a local directory is copied, a hub id is fetched once with
``huggingface_hub.snapshot_download`` (the only hub access in the pipeline; it runs on the GPU
machine).  For ``model.base == "tiny"`` (the CPU demo) it builds the tiny Llama of
:func:`burnqed.policy.tiny.build_tiny_model` — a byte-level BPE tokenizer trained on the tactic
pairs' text plus a seeded random init — and trains *all* its parameters from scratch on the pairs
with completion-only loss for a step / wall-clock budget (SPEC §4.4: ~0.4M parameters for 2–3
minutes on ~20k pairs; bigger was slower and worse).

Measured on the demo data (``config/demo.yaml``: 20,251 traced pairs, 68.7 tokens each on average;
the 0.44M-parameter default model, vocabulary 425; batch 32, lr 3e-3; 2-core CPU, 83 ms/step with
2 idle threads):

=======  ================  ==========================  ===============================
steps    held-out loss     exact tactic: best / any    proplogic_test proved (64 nodes,
                           of 4 sampled at T=0.8       4 candidates, 100 theorems)
=======  ================  ==========================  ===============================
500      0.65              21% / 31%                   —
1000     0.52              24% / 34%                   —
2000     0.48              25% / 42%                   31%
4000     0.47              29% / 43%                   45%
=======  ================  ==========================  ===============================

Tactics were sampled through the search's own backend (``burnqed.policy``, top-p 0.95) for 300
random validation pairs; "best" is the highest-logprob candidate.  (lr 6e-3 was worse at 2000
steps: 24% / 39%.)  Exact match is a lower bound — ``exact h3`` for ``assumption`` counts as wrong.
Solving keeps improving with steps, hence the default budget: 3000 steps (~4 min).  Steps, not the
clock, end training: ``model.tiny.max_seconds`` (null by default) is a cap for a machine too slow for
the budget, and a cap that fires makes the model depend on that machine's speed (a warning, and
``stopped_by: time`` in the record).

The directory gets ``burnqed_model.json`` (how it was built: sizes, steps, loss curve, seed, data
hash, held-out accuracy, the tokens its steps saw — ``training.tokens``, prompt and completion apart
— versions, the determinism settings — the same on every rerun),
``run_info.json`` (when, how long, the command line: :mod:`burnqed.determinism`) and, for the tiny
model, ``metrics.jsonl`` (loss every ``log_every`` steps).  Training runs under
:func:`burnqed.determinism.deterministic_training`: on the same CPU type, thread count and library
versions a rerun writes the same bytes.  The knobs of the tiny model are :class:`TinyBaseConfig`
(the ``model.tiny`` section).

Example::

    from pathlib import Path
    from burnqed.train.base import build_base
    build_base(out=Path("models/base"), cfg={"base": "tiny", "tiny": {"steps": 2000}},
               pairs=Path("data/tactic_pairs/train.parquet"), seed=0,
               val=Path("data/tactic_pairs/val.parquet"))
    # AutoModelForCausalLM.from_pretrained("models/base") loads it
"""

from __future__ import annotations

import dataclasses
import logging
import math
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed.config import ConfigError, ModelConfig, TinyBaseConfig
from burnqed.data.benchmarks import sha256_file
from burnqed.data.prompt import parse_completion
from burnqed.determinism import deterministic_training, write_run_info
from burnqed.policy import normalise_tactic
from burnqed.train.artifacts import (
    MetricsLog,
    TrainedTokens,
    provenance,
    quiet_progress_bars,
    staged_dir,
    write_json,
)
from burnqed.train.examples import TrainingDataError, read_examples

if TYPE_CHECKING:
    import numpy as np
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

TINY = "tiny"  # the model.base value that builds the demo model locally
SUMMARY_FILE = "burnqed_model.json"
METRICS_FILE = "metrics.jsonl"
# What a hub snapshot needs to load and serve; skips e.g. duplicate *.bin / *.pth / GGUF weights.
HUB_PATTERNS = ("*.json", "*.safetensors", "*.model", "*.txt", "*.py", "*.tiktoken")


@dataclass(frozen=True)
class ScratchTrainingResult:
    """What :func:`train_from_scratch` did."""

    steps: int  # optimiser steps taken
    seconds: float  # wall time of the loop
    stopped_by: str  # "steps" | "time"
    examples: int  # training examples used (after the length filter)
    skipped_too_long: int  # examples longer than max_length, not trained on
    tokens: int  # supervised (completion) tokens seen
    trained: TrainedTokens = field(default_factory=TrainedTokens)  # every token the steps saw
    curve: tuple[tuple[int, float], ...] = field(default=())  # (step, mean loss since last point)

    @property
    def initial_loss(self) -> float:
        return self.curve[0][1]

    @property
    def final_loss(self) -> float:
        return self.curve[-1][1]


# --------------------------------------------------------------------------------------------
# Stage entry point


def build_base(
    *,
    out: Path,
    cfg: Mapping[str, Any],
    pairs: Path | None,
    seed: int,
    tiny: Mapping[str, Any] | None = None,
    val: Path | None = None,
) -> None:
    """Write ``out`` (``models/base/``) for the ``model`` section ``cfg``.

    ``pairs`` (train tactic pairs) is required for ``base: tiny`` and ignored otherwise; ``val``
    (optional) measures the tiny model's held-out loss and tactic accuracy.  The tiny model's knobs
    come from ``tiny`` or, when the schema has it, ``cfg["tiny"]``.
    """
    out = Path(out)
    model_cfg = ModelConfig.from_dict(cfg)
    if model_cfg.base == TINY:
        if pairs is None:
            raise TrainingDataError(
                "model.base is 'tiny': the tactic pairs to train it on are needed"
            )
        tiny_cfg = model_cfg.tiny if tiny is None else TinyBaseConfig.from_dict(tiny)
        _build_tiny(out, tiny_cfg, Path(pairs), val, seed)
    else:
        if pairs is not None:
            log.info(
                "model.base %r is a pretrained model: %s is not used here", model_cfg.base, pairs
            )
        _fetch_pretrained(out, model_cfg.base)


def _build_tiny(out: Path, cfg: TinyBaseConfig, pairs: Path, val: Path | None, seed: int) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from burnqed.policy.tiny import build_tiny_model

    quiet_progress_bars()
    examples = read_examples(
        pairs, what="tiny base training pairs", max_proof_steps=cfg.max_proof_steps
    )
    val_examples = []
    if val is not None and cfg.eval_pairs:
        # A seeded sample across theorems (the file is ordered by theorem, its head is a few).
        val_examples = read_examples(
            val, limit=cfg.eval_pairs, seed=seed, what="held-out check pairs"
        )
    started = time.time()
    with (
        deterministic_training(seed=seed, device="cpu") as determinism,
        staged_dir(out) as staging,
    ):
        # The tokenizer learns the text the model will see: prompts (states) and completions.
        corpus = [e["prompt"] + e["completion"] for e in examples]
        build_tiny_model(
            staging, corpus, vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size,
            layers=cfg.layers, heads=cfg.heads, intermediate_size=cfg.intermediate_size,
            max_position_embeddings=cfg.max_length, seed=seed,
        )  # fmt: skip
        model = AutoModelForCausalLM.from_pretrained(
            staging, dtype=torch.float32, local_files_only=True
        )
        tokenizer = AutoTokenizer.from_pretrained(staging, local_files_only=True)
        with MetricsLog(staging / METRICS_FILE) as metrics:
            result = train_from_scratch(model, tokenizer, examples, cfg, seed=seed, metrics=metrics)
            held_out = None
            if val_examples:
                held_out = evaluate_tactics(
                    model, tokenizer, val_examples, seed=seed,
                    max_length=cfg.max_length,
                )  # fmt: skip
                metrics.write(
                    {"step": result.steps, **{f"val_{k}": v for k, v in held_out.items()}}
                )
                log.info(
                    "held-out: loss %.3f, greedy top-1 %.1f%%, any-of-4 %.1f%% (%d pairs)",
                    held_out["loss"], 100 * held_out["top1"], 100 * held_out["any_of_4"],
                    held_out["pairs"],
                )  # fmt: skip
        model.save_pretrained(staging)
        n_params = sum(p.numel() for p in model.parameters())
        # Everything here is the same on a rerun (determinism: what that needs); wall times and
        # the command line are in run_info.json.
        write_json(
            staging / SUMMARY_FILE,
            {
                "base": TINY,
                "kind": "tiny Llama trained from scratch (full-parameter, completion-only loss)",
                "parameters": n_params,
                "sizes": {
                    "vocab_size": model.config.vocab_size,
                    "hidden_size": model.config.hidden_size,
                    "layers": model.config.num_hidden_layers,
                    "heads": model.config.num_attention_heads,
                    "head_dim": model.config.head_dim,
                    "intermediate_size": model.config.intermediate_size,
                },
                "tiny": dataclasses.asdict(cfg),
                "seed": seed,
                "training": {
                    "steps": result.steps,
                    # "time": the wall-clock cap ended training, so the model is not reproducible.
                    "stopped_by": result.stopped_by,
                    "examples": result.examples,
                    "skipped_too_long": result.skipped_too_long,
                    "supervised_tokens": result.tokens,
                    # what training spent (burnqed.eval.compute states it beside search compute)
                    "tokens": result.trained.to_json(),
                    "loss": _curve_summary(result.curve),
                },
                "held_out": held_out,
                "data": {
                    "pairs": str(pairs),
                    "pairs_sha256": sha256_file(pairs),
                    "val": str(val) if val is not None else None,
                    "val_sha256": sha256_file(val) if val is not None else None,
                },
                "determinism": determinism,
                **provenance(),
            },
        )
        write_run_info(staging, started=started, training_wall_s=round(result.seconds, 2))


def _curve_summary(curve: Sequence[tuple[int, float]], points: int = 20) -> dict[str, Any]:
    """First/final/min loss and the curve thinned to about ``points`` (step, loss) pairs."""
    losses = [loss for _, loss in curve]
    stride = max(1, math.ceil(len(curve) / points))
    thinned = list(curve[::stride])
    if thinned[-1] != curve[-1]:
        thinned.append(curve[-1])
    return {
        "initial": round(losses[0], 4),
        "final": round(losses[-1], 4),
        "min": round(min(losses), 4),
        "curve": [[step, round(loss, 4)] for step, loss in thinned],
    }


def _fetch_pretrained(out: Path, base: str) -> None:
    """A local HF directory of ``base``: copied when it is a directory, else downloaded once."""
    source = Path(base)
    started = time.time()
    with staged_dir(out) as staging:
        record: dict[str, Any] = {"base": base}
        if source.is_dir():
            if not (source / "config.json").exists():
                raise ConfigError(f"model.base: {source} is a directory without config.json")
            shutil.copytree(source, staging, dirs_exist_ok=True)
            record.update(kind="local directory", source=str(source.resolve()))
        else:
            from huggingface_hub import snapshot_download

            # Pin the revision that was current when the base was fetched (None when offline:
            # the local cache's snapshot is used and recorded as unknown).
            revision = _hub_revision(base)
            log.info("downloading %s (revision %s) to %s", base, revision or "cached", out)
            snapshot_download(
                repo_id=base,
                revision=revision,
                local_dir=staging,
                allow_patterns=list(HUB_PATTERNS),
            )
            shutil.rmtree(staging / ".cache", ignore_errors=True)  # hub bookkeeping, not model
            record.update(kind="hub snapshot", revision=revision)
        if not (staging / "config.json").exists():
            raise ConfigError(f"model.base: {base} has no config.json: not a Hugging Face model")
        record["files"] = sorted(p.name for p in staging.iterdir())
        write_json(staging / SUMMARY_FILE, {**record, **provenance()})
        write_run_info(staging, started=started)


def _hub_revision(repo_id: str) -> str | None:
    try:
        from huggingface_hub import model_info

        return model_info(repo_id).sha
    except Exception as e:  # offline, gated, or no such repo: snapshot_download reports it
        log.warning("could not resolve the hub revision of %s: %s", repo_id, e)
        return None


# --------------------------------------------------------------------------------------------
# From-scratch training


def encode_examples(
    tokenizer: PreTrainedTokenizerBase, examples: Sequence[Mapping[str, str]], max_length: int
) -> tuple[list[list[int]], list[int], int]:
    """``(token ids, prompt lengths, skipped)``: prompt ids + completion ids + EOS per example.

    Prompt and completion are tokenized apart, exactly as at inference (the prompt is tokenized,
    the tactic generated after it); the prompt ends with ``"\\n"``, so this equals tokenizing the
    joined text (what trl does for the SFT).  Examples longer than ``max_length`` are skipped.
    """
    eos = tokenizer.eos_token_id
    prompts = tokenizer([e["prompt"] for e in examples], add_special_tokens=False)["input_ids"]
    comps = tokenizer([e["completion"] for e in examples], add_special_tokens=False)["input_ids"]
    seqs, prompt_lens, skipped = [], [], 0
    for p, c in zip(prompts, comps, strict=True):
        ids = [*p, *c, eos]
        if len(ids) > max_length:
            skipped += 1
            continue
        seqs.append(ids)
        prompt_lens.append(len(p))
    return seqs, prompt_lens, skipped


def collate(
    seqs: Sequence[Sequence[int]], prompt_lens: Sequence[int], pad_id: int
) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``/``attention_mask``/``labels``; labels are -100 on prompt and pad."""
    import torch

    width = max(len(s) for s in seqs)
    input_ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)  # (B, T)
    labels = torch.full((len(seqs), width), -100, dtype=torch.long)  # (B, T)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)  # (B, T)
    for i, (s, p) in enumerate(zip(seqs, prompt_lens, strict=True)):
        input_ids[i, : len(s)] = torch.tensor(s)
        labels[i, p : len(s)] = torch.tensor(s[p:])
        mask[i, : len(s)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def length_grouped_batches(
    lengths: Sequence[int], batch_size: int, rng: np.random.Generator
) -> Iterator[list[int]]:
    """Endless shuffled batches of indices of similar length (little padding, still random).

    Each epoch is a fresh permutation, cut into windows of 64 batches; within a window examples
    are sorted by length and cut into batches, whose order is shuffled again.
    """
    import numpy as np

    lengths = np.asarray(lengths)
    window = batch_size * 64
    while True:
        order = rng.permutation(len(lengths))
        batches = []
        for start in range(0, len(order), window):
            chunk = order[start : start + window]
            chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
            batches += [
                chunk[i : i + batch_size].tolist() for i in range(0, len(chunk), batch_size)
            ]
        for b in rng.permutation(len(batches)):
            yield batches[b]


def train_from_scratch(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[Mapping[str, str]],
    cfg: TinyBaseConfig,
    *,
    seed: int,
    metrics: MetricsLog | None = None,
) -> ScratchTrainingResult:
    """Train every parameter of ``model`` in place on ``examples`` (loss on completions only).

    A plain loop rather than a ``Trainer``: at 0.4M parameters one step takes milliseconds, so the
    trainer's per-step overhead would be a large part of the 2–3 minute demo budget, and a
    wall-clock cap is one comparison here.
    """
    import numpy as np
    import torch
    from transformers import get_cosine_schedule_with_warmup

    from burnqed.progress import Progress

    seqs, prompt_lens, skipped = encode_examples(tokenizer, examples, cfg.max_length)
    if skipped:
        log.warning(
            "skipped %d of %d pairs longer than %d tokens", skipped, len(examples), cfg.max_length
        )
    if not seqs:
        raise TrainingDataError(f"no training pair fits in model.tiny.max_length={cfg.max_length}")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model.train()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.learning_rate, betas=(0.9, 0.95), weight_decay=cfg.weight_decay
    )
    schedule = get_cosine_schedule_with_warmup(optimizer, cfg.warmup_steps, cfg.steps)
    batches = length_grouped_batches([len(s) for s in seqs], cfg.batch_size, rng)
    log.info(
        "training %d parameters from scratch: %d examples, %d steps x batch %d, lr %g, cap %s s",
        sum(p.numel() for p in model.parameters()), len(seqs), cfg.steps, cfg.batch_size,
        cfg.learning_rate, cfg.max_seconds,
    )  # fmt: skip
    curve: list[tuple[int, float]] = []
    window_loss, window_steps, tokens, step = 0.0, 0, 0, 0
    trained = TrainedTokens()
    stopped_by = "steps"
    start = time.monotonic()
    bar = Progress(log, "base", total=cfg.steps, unit="steps")
    while step < cfg.steps:
        # Checked before every step but the first: a run always takes at least one step.
        if step and cfg.max_seconds is not None and time.monotonic() - start >= cfg.max_seconds:
            stopped_by = "time"
            log.warning(
                "model.tiny.max_seconds: the wall-clock cap of %s s stopped training after %d of "
                "%d steps; the model depends on this machine's speed and a rerun will differ "
                "(set max_seconds to null for a reproducible model)",
                cfg.max_seconds, step, cfg.steps,
            )  # fmt: skip
            break
        idx = next(batches)
        batch = collate(
            [seqs[i] for i in idx], [prompt_lens[i] for i in idx], tokenizer.pad_token_id
        )
        loss = model(**batch).loss  # mean over the batch's completion tokens
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        step += 1
        tokens += int((batch["labels"] != -100).sum())
        trained.add_rows(batch["attention_mask"], batch["labels"])
        trained.step()
        window_loss += loss.item()
        window_steps += 1
        bar.update(1)
        # Record the very first step alone: it is the untrained model's loss, the curve's origin.
        if step == 1 or step % cfg.log_every == 0 or step == cfg.steps:
            mean = window_loss / window_steps
            curve.append((step, mean))
            record = {"step": step, "loss": mean, "lr": schedule.get_last_lr()[0],
                      "wall_s": round(time.monotonic() - start, 3), "tokens": tokens}  # fmt: skip
            if metrics is not None:
                metrics.write(record)
            bar.set_postfix(loss=f"{mean:.3f}")  # shown on the bar and in the progress lines
            # Progress in the rule's log (tqdm is silent there): every tenth metrics record.
            level = logging.INFO if step % (10 * cfg.log_every) == 0 else logging.DEBUG
            log.log(level, "step %d/%d: loss %.4f", step, cfg.steps, mean)
            window_loss, window_steps = 0.0, 0
    if window_steps:  # a time stop between log points: keep the last partial window
        curve.append((step, window_loss / window_steps))
    bar.close()
    model.eval()
    seconds = time.monotonic() - start
    log.info(
        "trained %d steps in %.1f s: loss %.3f -> %.3f", step, seconds, curve[0][1], curve[-1][1]
    )
    return ScratchTrainingResult(
        steps=step, seconds=seconds, stopped_by=stopped_by, examples=len(seqs),
        skipped_too_long=skipped, tokens=tokens, curve=tuple(curve), trained=trained,
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Held-out check


def evaluate_tactics(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[Mapping[str, str]],
    *,
    seed: int = 0,
    max_length: int = 512,
    candidates: int = 4,
    temperature: float = 0.8,
    max_new_tokens: int = 32,
    batch_size: int = 32,
) -> dict[str, float]:
    """Held-out completion loss and tactic accuracy of ``model`` on ``examples``.

    ``top1``: the greedy tactic equals the recorded one (whitespace-normalised); ``any_of_4``: one of
    ``candidates`` sampled tactics (the demo search's setting) does.  Exact match is a lower bound:
    another tactic (a different hypothesis name) may prove the goal too.
    """
    import torch

    seqs, prompt_lens, _ = encode_examples(tokenizer, examples, max_length)
    total_loss, total_tokens = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(seqs), batch_size):
            batch = collate(seqs[i : i + batch_size], prompt_lens[i : i + batch_size],
                            tokenizer.pad_token_id)  # fmt: skip
            n = int((batch["labels"][:, 1:] != -100).sum())
            total_loss += model(**batch).loss.item() * n
            total_tokens += n
    wanted = [normalise_tactic(e["completion"]) for e in examples]
    prompts = [e["prompt"] for e in examples]
    greedy = _generate(model, tokenizer, prompts, n=1, temperature=0.0, seed=seed,
                       max_new_tokens=max_new_tokens, batch_size=batch_size)  # fmt: skip
    sampled = _generate(model, tokenizer, prompts, n=candidates, temperature=temperature, seed=seed,
                        max_new_tokens=max_new_tokens, batch_size=batch_size)  # fmt: skip
    top1 = sum(g[0] == w for g, w in zip(greedy, wanted, strict=True))
    any_k = sum(w in s for s, w in zip(sampled, wanted, strict=True))
    return {
        "pairs": len(examples),
        "loss": total_loss / max(total_tokens, 1),
        "top1": top1 / len(examples),
        "any_of_4": any_k / len(examples),
    }


def _generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[str],
    *,
    n: int,
    temperature: float,
    seed: int,
    max_new_tokens: int,
    batch_size: int,
) -> list[list[str]]:
    """``n`` whitespace-normalised tactics per prompt (greedy when ``temperature`` is 0)."""
    import torch

    torch.manual_seed(seed)
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # generation continues from the last prompt token
    out: list[list[str]] = []
    try:
        for i in range(0, len(prompts), batch_size):
            enc = tokenizer(list(prompts[i : i + batch_size]), return_tensors="pt", padding=True,
                            add_special_tokens=False)  # fmt: skip
            sampling = {"do_sample": True, "temperature": temperature, "top_p": 0.95,
                        "num_return_sequences": n} if temperature > 0 else {"do_sample": False}  # fmt: skip
            with torch.no_grad():
                gen = model.generate(
                    **enc, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                    eos_token_id=tokenizer.eos_token_id, **sampling,
                )  # fmt: skip
            texts = tokenizer.batch_decode(
                gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True
            )
            tactics = [normalise_tactic(parse_completion(t)) for t in texts]
            out += [tactics[j : j + n] for j in range(0, len(tactics), n)]
    finally:
        tokenizer.padding_side = side
    return out
