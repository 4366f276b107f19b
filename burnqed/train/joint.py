"""Joint training (``sft.mode: joint``): the policy and its value head trained in one forward pass.

SFT alone optimises next-token prediction and can destroy the structure of the embeddings the
energy-based value model reads (the reproduced system's iteration 5: ``centroid_l2`` 6.40 → 1.33,
``reference/value-model-v2.md`` §1).  Joint training adds the value model's own loss to the
policy's, so the contrastive signal keeps the embeddings apart while SFT teaches the tactics:

- **one forward pass** of the LoRA-adapted backbone over a mixed batch: ``sft.batch_size`` SFT
  examples (prompt + completion, as :mod:`.sft` trains them) and ``sft.joint_groups_per_step``
  InfoNCE groups (1 positive + ``ebm.negatives`` negatives, and the group's theorem goal): on the
  CPU every sequence right-padded into one batch (:func:`collate`), on CUDA (``sft.gpu_layout:
  packed_bf16``) all of them packed end to end into one row sized to their tokens with
  per-sequence causal attention (:func:`collate_packed`, :mod:`.packing`: flex attention, the
  padding a ninth of the row at most and attending to itself only), under bf16 autocast with the
  SFT loss fused (:mod:`.fused_loss`) — the same losses, embeddings and gradients
  (``tests/train/test_packing.py``); ``padded_fp32`` keeps CUDA on the padded float32 step;
- **two losses**: the SFT cross-entropy on the completion tokens only (``lm_head`` runs on the SFT
  rows alone: the group sequences need hidden states, not logits), plus λ·InfoNCE of the
  goal-conditioned energy head over the groups' embeddings, pooled from that same forward pass by
  the function search's scorer uses (:func:`burnqed.policy.embedding.pool_hidden`, at each
  sequence's own last token — padding never enters a real token's attention), from the token ids
  the scorer embeds (:func:`burnqed.data.prompt.state_ids`: the state's prompt, the tokenizer's
  BOS, cut at the model's context), so the embedding is the scorer's up to floating-point rounding;
  a group with a sequence longer than ``sft.joint_state_max_length`` tokens is left out of the
  stream (counted) rather than cut shorter than the scorer would cut it;
- InfoNCE has **no temperature of its own**: ``-energies`` are the logits, and the head's learnable
  temperature (which divides the energy) is the only one (the reproduced system's "temperature
  double-dip" gotcha);
- the head's loss is the decoupled head's (:func:`burnqed.ebm.train.value_loss`): InfoNCE plus
  ``ebm.remaining_steps_weight`` × the Huber error of the remaining proof steps the head reads
  from the positives' energies; the scale below is InfoNCE's alone and multiplies both;
- the two losses have very different scales (an InfoNCE over 8 candidates starts near ln 8 ≈ 2.1,
  a trained SFT loss can be 0.3): each scale is tracked as a detached moving average and the
  InfoNCE term is rescaled to the SFT term's before λ applies —
  ``loss = sft + λ · nce · (avg_sft / avg_nce)`` — so λ is the share of the contrastive term
  whatever the raw scales; both raw losses and both scales are logged;
- **gradients from both losses reach the LoRA weights** (the head's gradients flow back through
  the pooled embeddings into the backbone); separate learning rates for the LoRA weights
  (``sft.learning_rate`` × ``lr_decay``^i, as SFT) and the head (``sft.joint_head_learning_rate``);
- **the goal embedding takes gradients too**: it is the theorem's root state, embedded by the same
  function as every other state at search time, and the head reads it beside the state — holding
  it fixed would let the backbone move states away from a frozen goal representation that the
  scorer then recomputes with the new weights;
- **monitoring** every ``sft.joint_monitor_every`` steps on held-out theorems' states: the head's
  temperature (abort when pinned at ``ebm.temperature_min``/``max``), the scale-free centroid
  separation of positive vs negative states and a linear probe's accuracy
  (:mod:`burnqed.ebm.quality`; abort when one falls below its red line, ``sft.joint_min_separation``
  / ``joint_min_probe_accuracy``, from above it — embeddings that were never separated are
  reported, not aborted on, and a probe fall within twice its standard error is noise, logged as a
  warning), and the SFT loss ceiling (``sft.joint_sft_loss_ceiling`` after
  ``joint_sft_loss_ceiling_after`` steps);
- **a guard that stops the training does not stop the run** (:class:`JointTrainingError`, caught
  in :func:`train_joint`): the iteration keeps the previous iteration's model — its adapter's
  files as they are and the value head as training started it (configuration A's EBM, the warm
  start) — and ``training_summary.json`` says so (``stopped``: the error, its message, the step,
  :func:`stop_record`); the merge carries it into ``burnqed_merge.json`` and every eval, report,
  comparison and summary of the iteration says that its model is the previous one
  (:func:`burnqed.eval.stage.model_stopped`);
- **exact resume**: every ``sft.joint_save_every`` steps the adapter, the head, the optimiser,
  the schedule, the loss scales and the step go to ``<out>.work/``; a rerun of the same job continues
  from there and ends with the weights an uninterrupted run ends with (data order and dropout are
  functions of the seed and the step).  The same job (:func:`resume_key`): the same config and
  seed, starting weights, data by content and code; any other is started over.

Data: the SFT stream is SFT's, :func:`burnqed.train.loop.build_mix`'s (a seeded subsample of the
base pairs plus the earlier searches' verified proof steps, upsampled; decontaminated), and the
contrastive stream is :func:`burnqed.ebm.groups.build_groups` over the same searches' trees —
positives on verified proof paths against open siblings, the rest of the frontier, dead ends and
off-path states of the same theorem (at most one other theorem's); split by theorem (the held-out
theorems' groups are monitored, never trained on).

Checkpoint selection is SFT's, from :mod:`.loop` (``sft.select_by`` over the base-pair and
trajectory validation losses, measured every ``sft.eval_steps``); the head of the chosen step is
kept with its adapter; the held-out proof steps of a third, theorem-disjoint split (``test``) are
measured beside them and never used to choose.  Training runs under
:func:`burnqed.determinism.deterministic_training` (a rerun on the same CPU type, thread count and
versions is byte-identical).  Beside the adapter: ``training_summary.json`` (both losses, their
scales, λ, the monitored metrics, the validation and test losses before and after, ``tokens``: what
the steps saw, the SFT rows' prompt and completion and the value head's rows apart,
:class:`~.artifacts.TrainedTokens`, and
``training_step``: the layout, dtypes and loss kernel the step ran, :func:`~.loop.step_record`),
``hyperparameters.json``, ``metrics.jsonl``, ``run_info.json`` (the run's wall times) and the head
(``joint_head.safetensors`` + ``joint_head.json``), which :func:`export_joint_ebm` turns into the
iteration's EBM directory once the merged model (and so its embedding digest) exists.

The module reads as a recipe (torchtune's single-device LoRA recipe is the model):
:func:`train_joint` first — setup, the step loop, publishing — then its parts, one section each:
**data** (the two streams tokenised, :class:`JointData`, and one step's :func:`micro_batches`),
**step** (:func:`joint_forward`, :func:`accumulate`, :func:`train_step`, :func:`optimizer` — the
last two also what ``bench/gpu.py`` times), **monitor** (:func:`monitor`, the health checks,
:func:`_evaluate`) and **checkpoint** (:func:`resume_key`, :func:`_save`, :func:`_resume`,
:func:`_publish`).  What it shares with SFT — the plan, the data mix, the model, checkpoint
selection — is :mod:`.loop`'s.

Example::

    train_joint(base=Path("models/base"), train=Path("data/tactic_pairs/train.parquet"),
                val=Path("data/tactic_pairs/val.parquet"), out=Path("models/iter_1/adapter"),
                cfg=params["sft"], ebm=params["ebm"], pooling=params["policy"]["pooling"],
                iteration=1, previous_adapter=Path("models/iter_0/adapter"),
                trajectories=[Path("results/iter_0/search"), Path("results/iter_0/search_noise")],
                eval_benchmarks=[Path("data/benchmarks/proplogic_test.jsonl")], seed=0)
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import shutil
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from burnqed.config import EBMConfig, SFTConfig
from burnqed.determinism import deterministic_training, write_run_info
from burnqed.progress import Progress
from burnqed.provenance import code_digest
from burnqed.split import TheoremSplit
from burnqed.train.artifacts import (
    MetricsLog,
    TrainedTokens,
    provenance,
    staged_dir,
    write_json,
)
from burnqed.train.examples import TrainingDataError
from burnqed.train.loop import (
    CheckpointSelection,
    Chosen,
    SFTMix,
    SFTPlan,
    TokenIds,
    check_inputs,
    keep_lora_inputs_bf16,
    load_training_model,
    plan_sft,
    publish_chosen,
    read_training_data,
    select_step,
    step_record,
    validation_sets,
    warm_start_record,
)
from burnqed.value.features import META as FEATURES_META

log = logging.getLogger(__name__)

HEAD_WEIGHTS = "joint_head.safetensors"
HEAD_META = "joint_head.json"
WORK_SUFFIX = ".work"  # <out>.work/: the exact-resume checkpoint, removed when the run finishes
SCALE_MOMENTUM = 0.9  # moving average of each loss's scale


class JointTrainingError(RuntimeError):
    """Joint training stopped on a health check (the message says which, and where it stopped).
    :func:`train_joint` catches it: the iteration keeps the previous iteration's model
    (:func:`stop_record`) and the run goes on."""


# --------------------------------------------------------------------------------------------
# The recipe


def train_joint(
    *,
    base: Path,
    train: Path,
    val: Path,
    out: Path,
    cfg: Mapping[str, Any],
    ebm: Mapping[str, Any],
    pooling: str,
    iteration: int,
    previous_adapter: Path | None,
    trajectories: Mapping[str, Path] | Sequence[Path],
    eval_benchmarks: Sequence[Path] = (),
    decontamination: str = "refuse",
    seed: int,
    split: Mapping[str, Any] | None = None,
    warm_head: Path | None = None,
) -> dict:
    """Train the adapter of iteration ``iteration`` jointly with an energy head (module docstring),
    the head warm-started from ``warm_head`` (configuration A's EBM) when given; return the
    training summary.

    The recipe: set up (the plan, data, model and checkpoint selection of :mod:`.loop`, shared with
    SFT; the groups, :func:`read_groups` and :func:`tokenise`; the head and its optimiser,
    :func:`optimizer`; a resumed checkpoint, :func:`_resume`), then per step :func:`train_step`,
    the health checks and the held-out :func:`monitor`, :func:`_evaluate` every ``sft.eval_steps``
    and :func:`_save` every ``sft.joint_save_every``; finally the chosen step, :func:`_publish`.
    """
    import torch

    from burnqed.ebm.train import build_head

    base, out = Path(base), Path(out)
    sft = SFTConfig.from_dict(cfg)
    ebm_cfg = EBMConfig.from_dict(ebm)
    if iteration < 1:
        raise ValueError("joint training needs earlier searches: iteration must be >= 1")
    plan = plan_sft(sft, iteration, previous_adapter)
    check_inputs(base, plan)
    if not trajectories:
        raise TrainingDataError(f"iteration {iteration}: joint training needs trajectories")
    theorem_split = TheoremSplit.of(split, seed)
    _, val_examples, mix = read_training_data(
        train, val, plan, trajectories, sft, iteration=iteration, seed=seed, split=theorem_split,
        eval_benchmarks=eval_benchmarks, decontamination=decontamination,
    )  # fmt: skip
    states, groups = read_groups(
        trajectories, ebm_cfg, iteration=iteration, seed=seed, split=theorem_split,
        eval_benchmarks=eval_benchmarks, decontamination=decontamination,
    )  # fmt: skip
    cuda = torch.cuda.is_available()
    dev = torch.device("cuda" if cuda else "cpu")
    model, tokenizer = load_training_model(base, sft, cuda=cuda)
    model = _with_adapter(model, plan)
    warm_start = warm_start_record(model, plan)  # the previous iteration's adapter, loaded as is
    hidden_size = model.get_base_model().config.hidden_size
    data = tokenise(tokenizer, model, mix, val_examples, states, groups, sft, ebm_cfg)
    # On CUDA (sft.gpu_layout: packed_bf16) each micro-batch is packed padding-free (flex
    # attention) into a row of at most `most` positions; the CPU keeps the padded layout (the
    # demo's bytes), which the equivalence tests compare packing against, and so does padded_fp32.
    packed = cuda and sft.gpu_layout == "packed_bf16"
    most = packed_width(sft, data.group_size) if packed else None
    if packed:
        from burnqed.train.packing import enable

        enable(model)
        keep_lora_inputs_bf16(model)  # the bf16 residual stream (loop.prepare_bf16_training)
    training_step = _step_record(model, sft, dev, packed)

    torch.manual_seed(seed)  # the head's initial weights (and spectral-norm vectors): seeded
    head = build_head(hidden_size, ebm_cfg).to(dev)
    # The head as training starts it (configuration A's EBM when given), before a resumed
    # checkpoint replaces it: what a training a guard stops keeps (_publish_stopped).
    _start_head(head, warm_head, ebm_cfg, model, tokenizer, data, pooling, dev)
    head_start = {k: v.detach().clone() for k, v in head.state_dict().items()}
    work = out.with_name(out.name + WORK_SUFFIX)
    job = resume_key(
        sft=sft, ebm=ebm_cfg, pooling=pooling, iteration=iteration, seed=seed, base=base,
        warm_start=plan.warm_start, sft_rows=data.sft_rows, val_rows=data.val_rows,
        groups=data.groups, gt=data.gt, warm_head=warm_head,
    )  # fmt: skip
    opt, schedule = optimizer(
        model, head, sft, learning_rate=plan.learning_rate, max_steps=plan.max_steps
    )
    scales = LossScales()
    tokens = TrainedTokens()  # what the steps saw: the training's compute (summary "tokens")
    start = _resume(work, job, model, head, opt, schedule, scales, tokens)
    monitor0 = monitor(model, head, tokenizer, data, pooling, dev, verdicts=True)
    guard = Guard(sft, plan.max_steps, start=monitor0)
    log.info(
        "joint training: %d SFT examples, %d groups (%d held out) of %d, λ %g, LoRA lr %g, head "
        "lr %g, %d steps from step %d; held-out start: %s",
        len(data.sft_rows), len(data.train_groups), len(data.held), data.group_size,
        sft.joint_lambda, plan.learning_rate, sft.joint_head_learning_rate, plan.max_steps, start,
        monitor0,
    )  # fmt: skip
    metrics_path, selection = _restart_records(work, start)
    history_path = work / "history.json"
    started = time.time()
    last: dict[str, Any] = {}
    stopped: dict[str, Any] | None = None
    with (
        deterministic_training(seed=seed, device="cuda" if cuda else "cpu") as determinism,
        MetricsLog(metrics_path) as metrics,
    ):
        if start == 0:
            _evaluate(model, tokenizer, data.val_rows, selection, 0, head, sft, dev)
        progress = Progress(log, "joint", total=plan.max_steps, unit="steps", initial=start)
        done = start
        try:
            for step in progress.iter(range(start, plan.max_steps)):
                done = step + 1
                batches = counted(
                    micro_batches(data, tokenizer, step, sft, seed, dev, most), tokens
                )
                last = train_step(model, head, opt, schedule, scales, batches, sft=sft,
                                  pooling=pooling, step=step, seed=seed,
                                  remaining_weight=ebm_cfg.remaining_steps_weight)  # fmt: skip
                tokens.step()
                _check_temperature(head, ebm_cfg, done)
                _check_sft_loss(scales, sft, done)
                if done % sft.joint_monitor_every == 0 or done == plan.max_steps:
                    m = monitor(model, head, tokenizer, data, pooling, dev, verdicts=True)
                    guard.check(m, done)
                    last["heldout"] = m
                    if head.pinned() == "floor":
                        log.warning("joint step %d: the head's temperature sits at its floor "
                                    "(%g): going on (held-out rank-1 %s)", done,
                                    ebm_cfg.temperature_min, m.get("rank1"))  # fmt: skip
                    log.info("joint step %d: sft %.4f nce %.4f T %.3f held-out %s", done,
                             last["sft_loss"], last["nce_loss"], last["temperature"], m)  # fmt: skip
                metrics.write({**last, "elapsed_s": round(time.time() - started, 3)})
                if done % min(sft.eval_steps, plan.max_steps) == 0 or done == plan.max_steps:
                    _evaluate(model, tokenizer, data.val_rows, selection, done, head, sft, dev)
                    history_path.write_text(json.dumps(selection.history))
                if done % sft.joint_save_every == 0 and done < plan.max_steps:
                    _save(work, job, done, model, head, opt, schedule, scales, tokens)
        except JointTrainingError as e:
            # A guard stopped the training: the iteration keeps the previous iteration's model
            # and the run goes on (issue 61); the summary says so, and every figure of the
            # iteration after it (burnqed.eval.stage.model_stopped).
            stopped = stop_record(e, step=done, previous=plan.warm_start, warm_head=warm_head)
            if last.get("step") == done:  # the step ran: its record, with why it was the last
                metrics.write({**last, "elapsed_s": round(time.time() - started, 3),
                               "stopped": str(e)})  # fmt: skip
            log.warning("joint training stopped at step %d of %d (%s): iteration %d keeps %s",
                        done, plan.max_steps, e, iteration, stopped["result"])  # fmt: skip
        progress.close()

    def summary_of(steps: int, selection_record: Any, validation: Any, joint: dict) -> dict:
        return {
            "mode": "joint",
            "steps": steps,
            "resumed_from": start or None,
            "warm_start": warm_start,
            "selection": selection_record,
            "validation": validation,
            "joint": joint,
            "data": {"train_examples": len(data.sft_rows), **mix.to_json()},
            # what the steps saw: the training's compute, stated beside the searches'
            "tokens": tokens.to_json(),
            "determinism": determinism,
            "training_step": training_step,
        }

    joint_record = {
        "lambda": sft.joint_lambda,
        "loss_normalisation": "nce × λ · avg_sft / avg_nce (detached moving averages)",
        "last": last,
        "scales": scales.to_json(),
        "heldout_start": monitor0,
        "groups": {"train": len(data.train_groups), "heldout": len(data.held)},
        "goal_embedding_gradients": True,
        "pooling": pooling,
    }
    hyperparameters = {
        "sft": sft.to_dict(), "ebm": ebm_cfg.to_dict(), "iteration": iteration,
        "effective": {"learning_rate": plan.learning_rate, "max_steps": plan.max_steps,
                      "warm_start": str(plan.warm_start) if plan.warm_start else None,
                      "head_learning_rate": sft.joint_head_learning_rate,
                      "scale_learning_rate": sft.joint_scale_learning_rate,
                      "warm_head": str(warm_head) if warm_head else None},
        "pooling": pooling, "seed": seed,
        "split": {"val_fraction": theorem_split.val_fraction,
                  "test_fraction": theorem_split.test_fraction},
    }  # fmt: skip
    # The theorems the head never trained on: its energy weight is fitted on their decisions alone
    # (burnqed.ebm.stage.joint_energy_weight).
    held_theorems = sorted({t for t, h in zip(groups.theorem, groups.heldout, strict=True) if h})
    if stopped is not None:
        summary = {**summary_of(done, None, None, joint_record), "planned_steps": plan.max_steps,
                   "stopped": stopped}  # fmt: skip
        head_meta = {"config": ebm_cfg.to_dict(), "dim": hidden_size, "pooling": pooling,
                     "step": 0, "heldout": monitor0 if start == 0 else None, "seed": seed,
                     "heldout_theorems": held_theorems, "stopped": stopped}  # fmt: skip
        _publish_stopped(out, Path(plan.warm_start), tokenizer, head_start, metrics_path,
                         summary=summary, hyperparameters=hyperparameters, head_meta=head_meta,
                         started=started)  # fmt: skip
        shutil.rmtree(work, ignore_errors=True)
        return summary
    chosen = select_step(selection.history, sft.select_by, sft.plateau_tolerance)
    final = monitor(model, head, tokenizer, data, pooling, dev)
    summary = summary_of(
        plan.max_steps,
        {"criterion": chosen.criterion, "step": chosen.step, "reason": chosen.reason},
        _before_after(selection.history, chosen.step),
        {**joint_record, "heldout_end": final},
    )
    head_meta = {"config": ebm_cfg.to_dict(), "dim": hidden_size, "pooling": pooling,
                 "step": chosen.step, "heldout": final, "seed": seed,
                 "heldout_theorems": held_theorems}  # fmt: skip
    _publish(out, model, tokenizer, selection, chosen, metrics_path, summary=summary,
             hyperparameters=hyperparameters, head_meta=head_meta, started=started)  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    log.info("joint adapter in %s: step %d kept (%s)", out, chosen.step, chosen.reason)
    return summary


# --------------------------------------------------------------------------------------------
# Data: the SFT stream and the contrastive stream, as token ids


@dataclass(frozen=True)
class Batch:
    """One micro-batch: token ids of every sequence, and what each row is."""

    input_ids: Any  # (B, T) long, right-padded
    attention_mask: Any  # (B, T)
    labels: Any  # (n_sft, T) long, -100 outside completions
    lengths: Any  # (B,) real length of each row
    n_sft: int  # rows [0, n_sft) are SFT examples
    groups: int  # then groups × (1 + K) state rows, then one goal row per group
    group_size: int  # 1 + K
    remaining: Any = None  # (groups,) float: each positive's remaining proof steps, or None


def tokenize_example(tokenizer: Any, example: Mapping[str, str], max_length: int) -> tuple:
    """``(ids, labels)`` of one SFT example: prompt + completion + EOS, labels on the completion
    only (what trl's completion-only loss trains)."""
    return tokenize_examples(tokenizer, [example], max_length)[0]


def tokenize_examples(
    tokenizer: Any,
    examples: Sequence[Mapping[str, str]],
    max_length: int,
    ids: TokenIds | None = None,
) -> list[tuple]:
    """:func:`tokenize_example` of each example, the texts tokenised in batched calls through
    ``ids`` (a :class:`~.loop.TokenIds` with special tokens, as ``tokenizer(text)``)."""
    ids = (ids or TokenIds(tokenizer)).with_special_tokens(True)
    prompts = ids([e["prompt"] for e in examples])
    texts = ids([e["prompt"] + e["completion"] for e in examples])
    rows = []
    for prompt, text in zip(prompts, texts, strict=True):
        full = [*text, tokenizer.eos_token_id][:max_length]
        labels = [-100] * min(len(prompt), len(full)) + full[len(prompt) :]
        rows.append((full, labels))
    return rows


def collate(
    tokenizer: Any,
    sft: Sequence[tuple[list[int], list[int]]],
    states: Sequence[list[int]],
    goals: Sequence[list[int]],
    group_size: int,
    remaining: Sequence[float] | None = None,
) -> Batch:
    """One right-padded batch: SFT rows, then the groups' state rows, then one goal row per group
    (and, when given, each group's remaining proof steps)."""
    import torch

    rows = [ids for ids, _ in sft] + list(states) + list(goals)
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    labels = torch.full((len(sft), width), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    for i, (_, lab) in enumerate(sft):
        labels[i, : len(lab)] = torch.tensor(lab)
    return Batch(
        input_ids=ids,
        attention_mask=mask,
        labels=labels,
        lengths=mask.sum(1),
        n_sft=len(sft),
        groups=len(goals),
        group_size=group_size,
        remaining=None if remaining is None else torch.tensor(list(remaining), dtype=torch.float32),
    )


@dataclass(frozen=True)
class PackedBatch:
    """One micro-batch packed padding-free (:mod:`.packing`): the rows of :func:`collate`, in its
    order, end to end in one row of ``width`` positions, each sequence with its own positions and a
    per-sequence causal mask; the positions after the last sequence are padding that nothing reads
    and that reads nothing but itself."""

    input_ids: Any  # (1, W) long: the sequences, then padding
    position_ids: Any  # (1, W) long: 0, 1, … from each sequence's start; 0 at each padding one
    doc: Any  # (W,) long: each position's sequence; a padding position one of its own after them
    scored: Any  # (M,) long: the positions whose next token is an SFT label (a completion token)
    targets: Any  # (M,) long: that label at each scored position
    spans: tuple[tuple[int, int], ...]  # (start, end) of each sequence in the row
    n_sft: int  # sequences [0, n_sft) are SFT examples
    groups: int  # then groups × (1 + K) states, then one goal per group
    group_size: int  # 1 + K
    remaining: Any = None  # (groups,) float: each positive's remaining proof steps, or None


def packed_width(sft: SFTConfig, group_size: int, *, groups: bool = True) -> int:
    """The most positions a packed micro-batch can fill — ``sft.batch_size`` examples of
    ``sft.max_length`` tokens and ``sft.joint_groups_per_step`` groups of ``group_size`` states and
    a goal of ``sft.joint_state_max_length`` (longer ones are left out of the stream) — rounded up to
    flex attention's block: the widest row; each micro-batch's row is its own tokens rounded up to
    a bucket no wider (:func:`micro_batches`, :func:`burnqed.train.packing.bucket_width`).

    >>> packed_width(SFTConfig(batch_size=8, max_length=1024, joint_groups_per_step=4,
    ...                        joint_state_max_length=512), 8)
    26624
    """
    from burnqed.train.packing import round_width

    rows = sft.joint_groups_per_step * (group_size + 1) if groups else 0
    return round_width(sft.batch_size * sft.max_length + rows * sft.joint_state_max_length)


def collate_packed(
    tokenizer: Any,
    sft: Sequence[tuple[list[int], list[int]]],
    states: Sequence[list[int]],
    goals: Sequence[list[int]],
    group_size: int,
    remaining: Sequence[float] | None = None,
    *,
    width: int,
) -> PackedBatch:
    """:func:`collate`'s micro-batch packed into one row of ``width`` positions (at least its tokens:
    :func:`micro_batches` sizes it by :func:`~burnqed.train.packing.bucket_width`): the same
    sequences in the same order, the same scored tokens (each SFT label after a position of its own
    sequence), pooled at each state's and goal's own last token; each padding position after them a
    sequence of its own at position 0 (it attends to itself alone, :mod:`.packing`)."""
    import torch

    rows = [ids for ids, _ in sft] + list(states) + list(goals)
    total = sum(len(r) for r in rows)
    if total > width:
        raise ValueError(f"a packed micro-batch of {total} tokens does not fit its width {width}")
    ids = torch.full((width,), tokenizer.pad_token_id, dtype=torch.long)
    pos = torch.empty(width, dtype=torch.long)
    doc = torch.full((width,), len(rows), dtype=torch.long)
    spans, start = [], 0
    for i, r in enumerate(rows):
        end = start + len(r)
        ids[start:end] = torch.tensor(r, dtype=torch.long)
        pos[start:end] = torch.arange(len(r))
        doc[start:end] = i
        spans.append((start, end))
        start = end
    # The padding: a sequence a position, at position 0 — it sees itself only, and nothing sees it.
    doc[start:] = len(rows) + torch.arange(width - start)
    pos[start:] = 0
    scored, targets = [], []
    for (s, _), (_, lab) in zip(spans, sft, strict=False):
        for t in range(len(lab) - 1):
            if lab[t + 1] != -100:  # the label of token t + 1, predicted at position t
                scored.append(s + t)
                targets.append(lab[t + 1])
    return PackedBatch(
        input_ids=ids[None],
        position_ids=pos[None],
        doc=doc,
        scored=torch.tensor(scored, dtype=torch.long),
        targets=torch.tensor(targets, dtype=torch.long),
        spans=tuple(spans),
        n_sft=len(sft),
        groups=len(goals),
        group_size=group_size,
        remaining=None if remaining is None else torch.tensor(list(remaining), dtype=torch.float32),
    )


def _to(batch: Batch | PackedBatch, dev: Any) -> Batch | PackedBatch:
    """``batch`` with its tensors on ``dev``; ``lengths`` and ``spans`` stay on the host (read row
    by row)."""
    remaining = None if batch.remaining is None else batch.remaining.to(dev)
    if isinstance(batch, PackedBatch):
        return replace(
            batch,
            input_ids=batch.input_ids.to(dev),
            position_ids=batch.position_ids.to(dev),
            doc=batch.doc.to(dev),
            scored=batch.scored.to(dev),
            targets=batch.targets.to(dev),
            remaining=remaining,
        )
    return replace(
        batch,
        input_ids=batch.input_ids.to(dev),
        attention_mask=batch.attention_mask.to(dev),
        labels=batch.labels.to(dev),
        remaining=remaining,
    )


@dataclass(frozen=True)
class GroupTexts:
    """Contrastive groups as token ids: ``states[i]`` the 1 + K state sequences of group i, positive
    first, ``goals[i]`` its theorem's root goal; ``ids`` maps each state hash to its token ids."""

    states: list[list[list[int]]]
    goals: list[list[int]]
    state_hashes: list[list[str]]
    goal_hashes: list[str]
    ids: dict[str, list[int]]


def group_texts(
    groups: Any, texts: Mapping[str, str], tokenizer: Any, limit: int | None
) -> GroupTexts:
    """Tokenise the states and goals of ``groups`` as the scorer embeds them — each state's prompt,
    cut at the model's context ``limit`` (:func:`burnqed.data.prompt.state_ids`) — each once."""
    from burnqed.data.prompt import state_ids

    cache: dict[str, list[int]] = {}

    def ids(h: str) -> list[int]:
        if h not in cache:
            cache[h] = state_ids(tokenizer, texts[h], limit)
        return cache[h]

    return GroupTexts(
        states=[[ids(h) for h in g] for g in groups.states],
        goals=[ids(h) for h in groups.goals],
        state_hashes=[list(g) for g in groups.states],
        goal_hashes=list(groups.goals),
        ids=cache,
    )


def _short_groups(
    groups: Any, texts: Mapping[str, str], tokenizer: Any, model: Any, max_length: int
) -> tuple[GroupTexts, Any]:
    """The groups whose every sequence fits ``max_length`` tokens (a memory bound on one batch),
    tokenised as the scorer embeds them; the others are left out and counted."""
    from burnqed.policy.embedding import context_limit

    limit = context_limit(model.get_base_model().config)
    gt = group_texts(groups, texts, tokenizer, limit)
    fits = [
        max(len(r) for r in (*rows, goal)) <= max_length
        for rows, goal in zip(gt.states, gt.goals, strict=True)
    ]
    if all(fits):
        return gt, groups
    import numpy as np

    log.warning(
        "joint training: %d of %d groups left out, a state or goal longer than "
        "sft.joint_state_max_length (%d tokens)", fits.count(False), len(fits), max_length,
    )  # fmt: skip
    groups = groups.subset(np.asarray(fits, dtype=bool))
    return group_texts(groups, texts, tokenizer, limit), groups


def order(n: int, seed: int, epoch: int) -> list[int]:
    """A seeded permutation of ``range(n)`` for one pass over the data (a function of the seed and
    the epoch, so a resumed run draws the same batches)."""
    idx = list(range(n))
    random.Random(f"{seed}:{epoch}").shuffle(idx)
    return idx


def take(n: int, count: int, position: int, seed: int) -> list[int]:
    """``count`` indices of ``range(n)`` starting at stream ``position`` (passes of seeded
    permutations one after another)."""
    out = []
    while len(out) < count:
        epoch, offset = divmod(position + len(out), n)
        perm = order(n, seed, epoch)
        out.extend(perm[offset : offset + count - len(out)])
    return out


@dataclass(frozen=True)
class JointData:
    """Both streams of one joint training, tokenised: what every step draws its micro-batches from
    (:func:`micro_batches`), what is validated and what is monitored."""

    sft_rows: list[tuple]  # (ids, labels) of each SFT training example
    val_rows: dict[str, list[tuple]]  # pairs / trajectory / test: (ids, labels) of each example
    groups: Any  # burnqed.ebm.groups.Groups: the contrastive groups that fit the length bound
    gt: GroupTexts  # their token ids, as the scorer embeds them
    train_groups: list[int]  # indices into groups: trained on
    held: list[int]  # indices into groups: held-out theorems', monitored only
    held_states: dict[str, bool]  # the held-out groups' states, positive or not
    group_size: int  # 1 + ebm.negatives


def read_groups(
    trajectories: Mapping[str, Path] | Sequence[Path], ebm: EBMConfig, *, iteration: int,
    seed: int, split: TheoremSplit, eval_benchmarks: Sequence[Path], decontamination: str,
) -> tuple[Any, Any]:  # fmt: skip
    """The searches' states (decontaminated: the energy head learns from every state, none may be a
    benchmark goal) and the contrastive groups over them (:func:`burnqed.ebm.groups.build_groups`),
    held out by the run's one ``split`` (SFT's validation and test theorems); no group at all is
    an error."""
    from burnqed.ebm.groups import build_groups, load_states, trajectory_dirs
    from burnqed.ebm.stage import decontaminated

    dirs = [
        d
        for t in (trajectories.values() if isinstance(trajectories, Mapping) else trajectories)
        for d in trajectory_dirs(t)
    ]
    states, _ = decontaminated(load_states(dirs), eval_benchmarks, decontamination, dirs)
    groups = build_groups(states, negatives=ebm.negatives, split=split, seed=seed)
    if len(groups.states) == 0:
        raise TrainingDataError(
            f"iteration {iteration}: no contrastive groups in {[str(d) for d in dirs]} (no proved "
            "theorem with a state to rank): joint training has nothing to learn the value from"
        )
    return states, groups


def tokenise(
    tokenizer: Any, model: Any, mix: SFTMix, val_examples: list[dict[str, str]], states: Any,
    groups: Any, sft: SFTConfig, ebm: EBMConfig,
) -> JointData:  # fmt: skip
    """Both streams as token ids: the SFT mix and the validation sets (:func:`tokenize_example`),
    the groups as the scorer embeds them (those too long for ``sft.joint_state_max_length`` left
    out and counted); the held-out groups apart."""
    gt, groups = _short_groups(groups, states.texts, tokenizer, model, sft.joint_state_max_length)
    held = [i for i, h in enumerate(groups.heldout) if h]
    train_groups = [i for i, h in enumerate(groups.heldout) if not h]
    if not train_groups:
        raise TrainingDataError("every contrastive group belongs to a held-out theorem")
    ids = TokenIds(tokenizer)  # the validation sets share texts with the mix
    return JointData(
        sft_rows=tokenize_examples(tokenizer, mix.train, sft.max_length, ids),
        val_rows={
            name: tokenize_examples(tokenizer, ex, sft.max_length, ids)
            for name, ex in validation_sets(val_examples, mix).items()
        },
        groups=groups,
        gt=gt,
        train_groups=train_groups,
        held=held,
        held_states=_labelled_states(groups, held, gt),
        group_size=ebm.negatives + 1,
    )


def micro_batches(
    data: JointData, tokenizer: Any, step: int, sft: SFTConfig, seed: int, dev: Any,
    width: int | None = None,
) -> Iterator[Batch | PackedBatch]:  # fmt: skip
    """The ``sft.grad_accum`` micro-batches of optimizer step ``step``: ``sft.batch_size`` SFT rows
    and ``sft.joint_groups_per_step`` training groups each, drawn at their stream positions (a
    function of the seed and the step: a resumed run draws the same); right-padded
    (:func:`collate`), or, given ``width`` (the most positions, :func:`packed_width`), packed into a
    row of its own tokens rounded up to a bucket (:func:`collate_packed`,
    :func:`~burnqed.train.packing.bucket_width`)."""
    for micro in range(sft.grad_accum):
        pos = step * sft.grad_accum + micro
        rows = [
            data.sft_rows[i]
            for i in take(len(data.sft_rows), sft.batch_size, pos * sft.batch_size, seed)
        ]
        gi = [
            data.train_groups[i]
            for i in take(
                len(data.train_groups), sft.joint_groups_per_step,
                pos * sft.joint_groups_per_step, seed + 1,
            )
        ]  # fmt: skip
        args = (
            tokenizer, rows,
            [s for i in gi for s in data.gt.states[i]], [data.gt.goals[i] for i in gi],
            data.group_size,
            [float(data.groups.remaining[i]) for i in gi] if len(data.groups.remaining) else None,
        )  # fmt: skip
        if width is None:
            batch = collate(*args)
        else:
            from burnqed.train.packing import bucket_width

            tokens = sum(len(r) for r in [*(ids for ids, _ in rows), *args[2], *args[3]])
            batch = collate_packed(*args, width=bucket_width(tokens, width))
        yield _to(batch, dev)


def batch_tokens(batch: Batch | PackedBatch) -> dict[str, int]:
    """The tokens of one micro-batch at their real lengths (:class:`~.artifacts.TrainedTokens`'s
    fields): the SFT rows' prompt and completion (the tokens with a label) apart, then the value
    head's state and goal rows."""
    if isinstance(batch, PackedBatch):
        lengths = [end - begin for begin, end in batch.spans]
        completion = int(batch.targets.numel())
    else:
        lengths = [int(n) for n in batch.lengths.tolist()]
        completion = int((batch.labels != -100).sum())
    sft = sum(lengths[: batch.n_sft])
    return {"prompt": sft - completion, "completion": completion,
            "value": sum(lengths[batch.n_sft :]), "sequences": len(lengths)}  # fmt: skip


def counted(
    batches: Iterable[Batch | PackedBatch], tokens: TrainedTokens
) -> Iterator[Batch | PackedBatch]:
    """``batches`` as they are, each one's tokens added to ``tokens`` as the step takes it."""
    for batch in batches:
        tokens.add(**batch_tokens(batch))
        yield batch


def _labelled_states(groups: Any, held: Sequence[int], gt: GroupTexts) -> dict[str, bool]:
    """The held-out groups' states, each once, with their label (positive = on a proof path)."""
    label: dict[str, bool] = {}
    for i in held:
        for j, h in enumerate(gt.state_hashes[i]):
            label[h] = label.get(h, False) or j == 0
    return label


# --------------------------------------------------------------------------------------------
# Setup: the adapter and the head


def _with_adapter(model: Any, plan: SFTPlan) -> Any:
    """``model`` with the warm-start adapter (iteration > 0: the previous one, trainable)."""
    from peft import PeftModel

    if plan.warm_start is None:
        raise ValueError("joint training warm-starts from the previous iteration's adapter")
    return PeftModel.from_pretrained(model, str(plan.warm_start), is_trainable=True)


def _step_record(model: Any, sft: SFTConfig, dev: Any, packed: bool) -> dict[str, Any]:
    """:func:`~.loop.step_record` of this training's step: packed (the fused loss's kernel,
    :func:`~.fused_loss.kernel_record`) or padded (whole float32 logits)."""
    import torch

    from burnqed.train.fused_loss import kernel_record
    from burnqed.train.loop import training_precision

    autocast = isinstance(training_precision(model, dev), torch.autocast)
    record = step_record(
        model, setting=sft.gpu_layout, device=dev.type, packed=packed,
        autocast="bfloat16" if autocast else None,
        loss_kernel=kernel_record(dev) if packed else {"kernel": "materialised",
                                                       "why": "padded: whole float32 logits"},
    )  # fmt: skip
    log.info("joint training step: %s", record)
    return record


def _start_head(
    head: Any, warm_head: Path | None, ebm: EBMConfig, model: Any, tokenizer: Any,
    data: JointData, pooling: str, dev: Any,
) -> None:  # fmt: skip
    """A fresh run's head: configuration A's EBM at ``warm_head`` when given, else ``head`` as built
    with its input standardisation measured on the starting embeddings of the training states (and
    its energies started at the training positives' mean remaining steps, when that term trains)."""
    if warm_head is not None:
        # Configuration A's EBM, trained on the embeddings of the model this training starts from:
        # its weights and its input standardisation (the scorer's) both carry over.
        dim = model.get_base_model().config.hidden_size
        head.load_state_dict(_load_warm_head(warm_head, ebm, dim).state_dict())
        log.info("joint head warm-started from %s", warm_head)
        return
    # Standardise the head's inputs with the starting embeddings of the training states (kept
    # fixed, in the head's buffers: the scorer applies the same).
    first = data.train_groups[:64]
    sample = [s for i in first for s in data.gt.states[i]] + [data.gt.goals[i] for i in first]
    head.set_input_stats(embed_rows(model, tokenizer, sample, pooling, dev))
    if len(data.groups.remaining):
        import torch

        head.set_remaining_level(torch.from_numpy(data.groups.remaining[data.train_groups]))


def _load_warm_head(path: Path, ebm: EBMConfig, dim: int) -> Any:
    """The EBM at ``path`` (configuration A's) as the joint head's start; its architecture must be
    the one ``ebm`` builds at width ``dim``."""
    from burnqed.ebm.scorer import load_ebm

    head, meta = load_ebm(Path(path), device="cpu")
    theirs = EBMConfig.from_dict(meta["config"])
    if int(meta["dim"]) != dim or theirs.hidden_sizes != ebm.hidden_sizes:
        raise ValueError(
            f"{path}: an EBM of width {meta['dim']} and layers {list(theirs.hidden_sizes)} cannot "
            f"warm-start a joint head of width {dim} and layers {list(ebm.hidden_sizes)}"
        )
    return head


# --------------------------------------------------------------------------------------------
# Step: one forward pass, both losses, the optimiser


def joint_forward(
    model: Any, head: Any, batch: Batch | PackedBatch, pooling: str, remaining_weight: float = 0.0
) -> dict[str, Any]:
    """One forward pass of ``model`` (a peft-wrapped causal LM) over ``batch``; the SFT loss and
    the head's: ``nce`` (InfoNCE) and ``value`` (InfoNCE plus ``remaining_weight`` × the Huber
    error of the remaining steps the head reads from the positives' energies, ``remaining_error``,
    when the batch carries their remaining proof steps: :func:`burnqed.ebm.train.value_loss`), with
    the pooled embeddings (module docstring).

    A right-padded :class:`Batch` (the CPU's training, evaluation) takes ``lm_head`` over its SFT
    rows and float32 cross-entropy over their logits; a :class:`PackedBatch` (training on CUDA)
    runs padding-free attention (:mod:`.packing`, :func:`burnqed.train.packing.enable` first) and
    the fused loss over its scored positions only (:mod:`.fused_loss`).  Either way the decoder runs
    in :func:`~burnqed.train.loop.training_precision` (bf16 autocast on CUDA with a bf16 residual
    stream), the losses and the head in float32; ``scored_hidden`` / ``scored_targets`` are the hidden state before each
    completion token and that token (what the SFT loss averages over)."""
    import torch
    import torch.nn.functional as F

    from burnqed.ebm.train import value_loss
    from burnqed.policy.embedding import pool_hidden
    from burnqed.train.fused_loss import linear_cross_entropy
    from burnqed.train.loop import training_precision
    from burnqed.train.packing import attention_mask

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder, lm_head = base.model, base.lm_head
    n = batch.n_sft
    if isinstance(batch, PackedBatch):
        with training_precision(base, batch.input_ids.device):
            hidden = decoder(
                input_ids=batch.input_ids, position_ids=batch.position_ids,
                attention_mask=attention_mask(batch.doc), use_cache=False,
            ).last_hidden_state[0]  # (W, d)  # fmt: skip
        scored, targets = hidden[batch.scored], batch.targets  # (M, d), (M,)
        sft_loss = linear_cross_entropy(scored, lm_head.weight, targets)
        rows = [hidden[s:e] for s, e in batch.spans[n:]]
    else:
        with training_precision(base, batch.input_ids.device):
            hidden = decoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
            hidden = hidden.last_hidden_state  # (B, T, d)
            logits = lm_head(hidden[:n]).float()  # (n, T, V): SFT rows only
        sft_loss = F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]),
            batch.labels[:, 1:].reshape(-1),
            ignore_index=-100,
        )
        keep = batch.labels[:, 1:] != -100  # (n, T-1)
        scored, targets = hidden[:n, :-1][keep], batch.labels[:, 1:][keep]
        rows = [hidden[r, : int(batch.lengths[r])] for r in range(n, hidden.shape[0])]
    out: dict[str, Any] = {"sft": sft_loss, "nce": None, "value": None, "energies": None,
                           "pooled": None, "remaining_error": None, "scored_hidden": scored,
                           "scored_targets": targets}  # fmt: skip
    if batch.groups:
        pooled = torch.stack([pool_hidden(h.float(), pooling) for h in rows])  # (G·(1+K) + G, d)
        g, k1 = batch.groups, batch.group_size
        z_states = pooled[: g * k1].view(g, k1, -1)  # (G, 1+K, d)
        z_goal = pooled[g * k1 :].view(g, 1, -1)  # (G, 1, d)
        energies = head(z_states, z_goal)  # (G, 1+K); the head's temperature divides them
        # No temperature of its own: -energy is the logit, the positive is index 0.
        value, nce, err = value_loss(head, energies, batch.remaining, remaining_weight)
        out.update(nce=nce, value=value, energies=energies, pooled=pooled, remaining_error=err)
    return out


class LossScales:
    """Detached moving averages of the two losses' scales; the InfoNCE term is rescaled to the
    SFT term's before λ applies."""

    def __init__(self, sft: float | None = None, nce: float | None = None) -> None:
        self.sft, self.nce = sft, nce

    def update(self, sft: float, nce: float) -> None:
        m = SCALE_MOMENTUM
        self.sft = sft if self.sft is None else m * self.sft + (1 - m) * sft
        self.nce = nce if self.nce is None else m * self.nce + (1 - m) * nce

    def weight(self, lam: float) -> float:
        """The factor on the raw InfoNCE loss: ``λ · avg_sft / avg_nce``."""
        if not self.sft or not self.nce:
            return lam
        return lam * self.sft / self.nce

    def to_json(self) -> dict:
        return {"sft": self.sft, "nce": self.nce}


def train_step(
    model: Any, head: Any, opt: Any, schedule: Any, scales: LossScales, batches: Iterable[Batch],
    *, sft: SFTConfig, pooling: str, step: int, seed: int, remaining_weight: float = 0.0,
) -> dict[str, Any]:  # fmt: skip
    """Optimizer step ``step`` (0-based) over ``batches``: its record for ``metrics.jsonl`` — both
    raw losses (means over the micro-batches), the scales and the InfoNCE weight, the gradient
    norms, the temperature and the learning rates after it."""
    import torch

    done = step + 1
    model.train()
    head.train()
    torch.manual_seed(seed * 1_000_003 + step)  # dropout: a function of the step
    opt.zero_grad(set_to_none=True)
    sft_v, nce_v, err_v = accumulate(
        model, head, batches, scales, lam=sft.joint_lambda, pooling=pooling,
        grad_accum=sft.grad_accum, remaining_weight=remaining_weight,
    )  # fmt: skip
    if not (math.isfinite(sft_v) and nce_v is not None and math.isfinite(nce_v)):
        raise JointTrainingError(
            f"joint step {done}: loss is not finite (sft {sft_v}, nce {nce_v})"
        )
    grad_lora = _grad_norm(opt.param_groups[0]["params"])
    grad_head = _grad_norm(list(head.parameters()))
    opt.step()
    schedule.step()
    lr = schedule.get_last_lr()
    return {
        "step": done, "sft_loss": sft_v, "nce_loss": nce_v, "remaining_error": err_v,
        "nce_weight": scales.weight(sft.joint_lambda), "scale_sft": scales.sft,
        "scale_nce": scales.nce, "grad_norm_lora": grad_lora, "grad_norm_head": grad_head,
        "temperature": float(head.temperature.detach()), "lr_lora": lr[0], "lr_head": lr[1],
        "lr_head_scale": lr[2],
    }  # fmt: skip


def accumulate(
    model: Any, head: Any, batches: Iterable[Batch], scales: LossScales, *, lam: float,
    pooling: str, grad_accum: int, remaining_weight: float = 0.0,
) -> tuple[float, float | None, float | None]:  # fmt: skip
    """Forward and backward over one optimizer step's micro-batches, the gradients adding up:
    ``(sft + λ · value · avg_sft / avg_nce) / grad_accum`` each (``value`` the head's loss,
    :func:`joint_forward`; the scales updated first, with the micro-batch's detached SFT and
    InfoNCE losses); the raw SFT and InfoNCE losses' and the remaining-steps error's means over the
    micro-batches (nce None when no batch held a group — the SFT-only step :mod:`bench.gpu` times;
    the error None without its term)."""
    sft_v, nce_v, err_v = 0.0, None, None
    for batch in batches:
        res = joint_forward(model, head, batch, pooling, remaining_weight)
        sft = float(res["sft"].detach())
        loss = res["sft"]
        if res["nce"] is not None:
            nce = float(res["nce"].detach())
            scales.update(sft, nce)
            loss = loss + scales.weight(lam) * res["value"]
            nce_v = (nce_v or 0.0) + nce / grad_accum
            if res["remaining_error"] is not None:
                err_v = (err_v or 0.0) + float(res["remaining_error"].detach()) / grad_accum
        (loss / grad_accum).backward()
        sft_v += sft / grad_accum
    return sft_v, nce_v, err_v


def _grad_norm(params: Sequence[Any]) -> float:
    import torch

    grads = [p.grad.detach().float().norm() for p in params if p.grad is not None]
    return float(torch.stack(grads).norm()) if grads else 0.0


def cosine_with_warmup(step: int, warmup: int, total: int) -> float:
    """The LoRA's and the head layers' learning-rate factor at ``step`` (transformers'
    ``get_cosine_schedule_with_warmup``: linear warm-up, then half a cosine to 0).

    >>> [round(cosine_with_warmup(s, 2, 10), 3) for s in (0, 1, 2, 6, 10)]
    [0.0, 0.5, 1.0, 0.5, 0.0]
    """
    if step < warmup:
        return step / max(1, warmup)
    progress = (step - warmup) / max(1, total - warmup)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def optimizer(
    model: Any, head: Any | None, sft: SFTConfig, *, learning_rate: float, max_steps: int
) -> tuple[Any, Any]:
    """AdamW over three groups — the LoRA weights (``learning_rate``: the plan's, decayed by
    iteration), the head's layers (``sft.joint_head_learning_rate``), both on the cosine schedule
    over ``max_steps``, and the head's scale (``sft.joint_scale_learning_rate``, constant: under the
    cosine at the head's rate the temperature could not move, issue 30 §3) — and its schedule.
    Without a head (``None``: SFT's step alone), the LoRA group only.

    >>> import torch
    >>> from burnqed.config import EBMConfig
    >>> from burnqed.ebm.train import build_head
    >>> lora = torch.nn.Linear(2, 2)
    >>> opt, _ = optimizer(lora, build_head(4, EBMConfig(hidden_sizes=(3,))), SFTConfig(),
    ...                    learning_rate=1e-4, max_steps=10)
    >>> [g["name"] for g in opt.param_groups]
    ['lora', 'head', 'head_scale']
    """
    import functools

    import torch

    trainable = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": trainable, "lr": learning_rate, "name": "lora"}]
    cosine = functools.partial(cosine_with_warmup, warmup=sft.warmup_steps, total=max_steps)
    factors: list[Callable[[int], float]] = [cosine]
    if head is not None:
        layers, scale = head.parameter_groups()
        groups += [
            {"params": layers, "lr": sft.joint_head_learning_rate, "name": "head"},
            {"params": scale, "lr": sft.joint_scale_learning_rate, "name": "head_scale"},
        ]
        factors += [cosine, _constant]
    opt = torch.optim.AdamW(groups)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, factors)


def _constant(step: int) -> float:
    return 1.0


# --------------------------------------------------------------------------------------------
# Monitor: held-out health, validation, health checks


def embed_rows(
    model: Any, tokenizer: Any, rows: Sequence[list[int]], pooling: str, dev: Any
) -> Any:
    """``(N, d)`` embeddings of token-id rows, one forward per row (the scorer's rule), no grad."""
    import torch

    from burnqed.policy.embedding import pool_hidden
    from burnqed.train.loop import training_precision

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    was = base.training
    base.eval()
    try:
        with torch.no_grad(), training_precision(base, dev):
            out = [
                pool_hidden(
                    base.model(input_ids=torch.tensor([r], device=dev))
                    .last_hidden_state[0]
                    .float(),
                    pooling,
                )
                for r in rows
            ]
    finally:
        base.train(was)
    return torch.stack(out)


def monitor(
    model: Any,
    head: Any,
    tokenizer: Any,
    data: JointData,
    pooling: str,
    dev: Any,
    *,
    verdicts: bool = False,
) -> dict:
    """Held-out health: the centroid separation and a linear probe on the held-out states'
    embeddings (positive vs not), and the head on the held-out groups as the EBM's own evaluation
    scores them (:func:`burnqed.ebm.train.evaluate`: rank-1 with a tie among t counting 1/t, the
    median energy span, the correlation of the positives' energies with their remaining proof
    steps), beside the head's temperature.  ``verdicts``: also the probe's right or wrong on each
    probed state (``probe_correct``, for :class:`Guard`, which takes it out before the reading is
    recorded)."""
    import numpy as np

    from burnqed.ebm.quality import centroid_separation, linear_probe
    from burnqed.ebm.train import evaluate, index_groups

    held_states, gt, held = data.held_states, data.gt, data.held
    if not held_states:
        return {"states": 0}
    keys = sorted(held_states)
    goals = sorted({gt.goal_hashes[i] for i in held} - set(keys))
    x = embed_rows(model, tokenizer, [gt.ids[h] for h in keys + goals], pooling, dev)
    row = {h: i for i, h in enumerate(keys + goals)}
    y = np.array([held_states[k] for k in keys])
    xs = x[: len(keys)].cpu().numpy().astype(np.float64)
    l2, separation = centroid_separation(xs, y)
    probe = linear_probe(xs, y, seed=0, verdicts=verdicts)
    ev = evaluate(head, x, index_groups(data.groups.subset(data.groups.heldout), row))
    reading = {
        "states": len(keys),
        "centroid_l2": l2,
        "centroid_separation": separation,
        "probe_accuracy": probe.get("accuracy"),
        "probe_heldout_states": probe.get("heldout_states"),
        "probe_majority_baseline": probe.get("majority_baseline"),
        "rank1": ev["rank1"],
        "tie_rate": ev["tie_rate"],
        # median spread of a group's energies (in nats: -energy is InfoNCE's logit), beside the
        # log-prob's span it must reach to change the search's choice (issue 30 §3)
        "energy_span": ev["sibling_span"],
        "groups": ev["groups"],
        "remaining_corr": ev["remaining_corr"],
        "temperature": float(head.temperature.detach()),
    }
    if verdicts:
        reading["probe_correct"] = probe.get("correct")
    return reading


def _check_temperature(head: Any, ebm: EBMConfig, step: int) -> None:
    """Stop when the head's temperature sits at its ceiling (the energies collapsed: nothing
    ranked).  At its floor it is the state of a head that ranks (a warm start from A's EBM starts
    there, :mod:`burnqed.ebm.train`), bounded: the monitor's held-out figures judge it."""
    if head.pinned() == "ceiling":
        raise JointTrainingError(
            f"joint step {step}: the head's temperature pinned to its ceiling "
            f"({ebm.temperature_max:g}; healthy 0.5–3.0): the energies collapsed. Lower "
            "sft.joint_head_learning_rate or sft.joint_lambda"
        )


def _check_sft_loss(scales: LossScales, sft: SFTConfig, step: int) -> None:
    """Stop when the SFT loss's moving average is above ``sft.joint_sft_loss_ceiling`` after
    ``joint_sft_loss_ceiling_after`` steps: the contrastive term is crowding out the policy."""
    ceiling = sft.joint_sft_loss_ceiling
    if (
        ceiling is not None
        and step >= sft.joint_sft_loss_ceiling_after
        and scales.sft is not None
        and scales.sft > ceiling
    ):
        raise JointTrainingError(
            f"joint step {step}: the SFT loss ({scales.sft:.4f}, moving average) is above "
            f"sft.joint_sft_loss_ceiling {ceiling} after "
            f"{sft.joint_sft_loss_ceiling_after} steps: the contrastive term is crowding "
            "out the policy; lower sft.joint_lambda"
        )


class Guard:
    """The held-out health checks of one joint training (``sft.joint_guard``): each monitor reading
    against the start's (:func:`_check_embeddings` for ``threshold``, :func:`_check_paired` for
    ``paired``).  Takes each reading's per-state probe verdicts out of it (``probe_correct``: the
    paired test's data, not a figure to record)."""

    def __init__(self, sft: SFTConfig, max_steps: int, *, start: dict[str, Any]) -> None:
        self.sft = sft
        self.start_correct = start.pop("probe_correct", None)
        self.start = start
        # the checks a run plans: the paired test's Bonferroni divides α among them
        self.checks = max(1, -(-max_steps // sft.joint_monitor_every))
        self.fell: dict[str, bool] = {}  # red line → did the previous check find a fall

    def check(self, m: dict[str, Any], step: int) -> None:
        correct = m.pop("probe_correct", None)
        if self.sft.joint_guard == "paired":
            self.fell = _check_paired(m, self.start, self.sft, step, now_correct=correct,
                                      start_correct=self.start_correct, checks=self.checks,
                                      fell=self.fell)  # fmt: skip
        else:
            _check_embeddings(m, self.start, self.sft, step)


GUARD_ALPHA = 0.05  # the paired guard's family-wise false-stop rate over one run's checks


def _check_paired(
    m: Mapping[str, Any], start: Mapping[str, Any], sft: SFTConfig, step: int, *,
    now_correct: Sequence[bool] | None, start_correct: Sequence[bool] | None, checks: int,
    fell: Mapping[str, bool],
) -> dict[str, bool]:  # fmt: skip
    """``sft.joint_guard: paired``: a red line is crossed from above and the fall is real — for the
    probe, its verdicts on the same held-out states fall from the start's by a one-sided exact
    McNemar test at ``GUARD_ALPHA / checks``; for the separation (one number, no per-state
    verdicts), the crossing itself — and was at the previous check too: training stops.  A single
    check's fall is logged and training goes on.  Returns which red lines fell at this check."""
    now_fell: dict[str, bool] = {}
    for key, red in (
        ("centroid_separation", sft.joint_min_separation),
        ("probe_accuracy", sft.joint_min_probe_accuracy),
    ):
        now, before = m.get(key), start.get(key)
        if red is None or now is None or before is None or not now < red <= before:
            now_fell[key] = False
            continue
        why = f"below its red line {red}"
        if key == "probe_accuracy" and now_correct is not None and start_correct is not None:
            lost = sum(a and not b for a, b in zip(start_correct, now_correct, strict=True))
            gained = sum(b and not a for a, b in zip(start_correct, now_correct, strict=True))
            p = one_sided_mcnemar(lost, gained)
            now_fell[key] = p < GUARD_ALPHA / checks
            why += (f", {lost} held-out states lost and {gained} gained against the start "
                    f"(one-sided exact p {p:.3g}, α {GUARD_ALPHA}/{checks} checks)")  # fmt: skip
        else:
            now_fell[key] = True
        if now_fell[key] and fell.get(key):
            raise JointTrainingError(
                f"joint step {step}: held-out {key} fell to {now:.3f}, {why}, at this check and "
                f"the one before (it started at {before:.3f}): the embeddings are collapsing; "
                "raise sft.joint_lambda or lower the learning rates"
            )
        log.warning("joint step %d: held-out %s %.3f is %s (started at %.3f): %s; training goes "
                    "on", step, key, now, why, before,
                    "a fall, stopping if the next check finds it too" if now_fell[key]
                    else "not a significant fall")  # fmt: skip
    return now_fell


def one_sided_mcnemar(lost: int, gained: int) -> float:
    """The exact one-sided McNemar p-value that the discordant pairs lean toward ``lost``:
    P(X >= lost) for X ~ Binomial(lost + gained, 1/2) (1.0 with no discordant pair).

    >>> one_sided_mcnemar(0, 0), one_sided_mcnemar(5, 0), round(one_sided_mcnemar(8, 2), 4)
    (1.0, 0.03125, 0.0547)
    """
    n = lost + gained
    if n == 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(lost, n + 1)) / 2**n


def _check_embeddings(
    m: Mapping[str, Any], start: Mapping[str, Any], sft: SFTConfig, step: int
) -> None:
    """Stop when the held-out separation or probe falls below its red line from above it; a value
    that started below is a finding about the previous model, reported, not a reason to stop.

    The probe's accuracy is measured on a few hundred held-out states at most (the demo: ~100), so
    its standard error there is ~0.05: a fall across the red line counts only when it is larger
    than twice the standard error of the starting accuracy (a binomial proportion over the probe's
    held-out states).  A smaller fall across the line is logged as a warning and training goes on —
    sampling noise is not a collapse.
    """
    for key, red in (
        ("centroid_separation", sft.joint_min_separation),
        ("probe_accuracy", sft.joint_min_probe_accuracy),
    ):
        now, before = m.get(key), start.get(key)
        if red is None or now is None or before is None:
            continue
        if not now < red <= before:
            continue
        margin = (
            probe_noise_margin(before, m.get("probe_heldout_states"))
            if key == "probe_accuracy"
            else 0.0
        )
        if before - now <= margin:
            log.warning(
                "joint step %d: held-out %s %.3f is below its red line %s but within twice its "
                "standard error (%.3f) of its start %.3f: noise, not collapse; training goes on",
                step, key, now, red, margin / 2, before,
            )  # fmt: skip
            continue
        raise JointTrainingError(
            f"joint step {step}: held-out {key} fell to {now:.3f}, below its red line {red} "
            f"(it started at {before:.3f}): the embeddings are collapsing; raise "
            "sft.joint_lambda or lower the learning rates"
        )


def probe_noise_margin(accuracy: float, states: int | None) -> float:
    """Twice the binomial standard error of a probe ``accuracy`` measured on ``states`` held-out
    states (0 when the count is unknown: every fall counts)."""
    if not states:
        return 0.0
    return 2.0 * math.sqrt(max(accuracy * (1.0 - accuracy), 0.0) / states)


def _evaluate(
    model: Any,
    tokenizer: Any,
    val_rows: Mapping[str, list[tuple]],
    selection: Any,
    step: int,
    head: Any,
    sft: SFTConfig,
    dev: Any,
) -> None:
    """The SFT validation losses at ``step`` (recorded for checkpoint selection), and the adapter and
    head of that step kept beside it."""
    import torch
    from safetensors.torch import save_file

    model.eval()
    losses = {}
    with torch.no_grad():
        for name, rows in val_rows.items():
            total, count = 0.0, 0
            for k in range(0, len(rows), sft.batch_size):
                chunk = rows[k : k + sft.batch_size]
                batch = _to(collate(tokenizer, chunk, [], [], 1), dev)
                loss = joint_forward(model, head, batch, "last")["sft"]
                n = int((batch.labels[:, 1:] != -100).sum())
                total += float(loss) * n
                count += n
            losses[f"eval_{name}_loss"] = total / max(count, 1)
    selection.record(step, losses, model)
    path = selection.directory / f"step-{step}"
    if step > 0:
        save_file(
            {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()},
            str(path / HEAD_WEIGHTS),
        )
    log.info("joint step %d: validation %s", step, {k: round(v, 4) for k, v in losses.items()})


def _before_after(history: Mapping[int, Mapping[str, float]], chosen: int) -> dict:
    out = {}
    for name in ("pairs", "trajectory", "test"):
        if name in history.get(0, {}):
            out[name] = {"before": history[0][name], "after": history[chosen][name]}
        else:
            out[name] = None
    return out


# --------------------------------------------------------------------------------------------
# Checkpoint: exact resume, and the published adapter


def _content_digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def resume_key(
    *, sft: SFTConfig, ebm: EBMConfig, pooling: str, iteration: int, seed: int, base: Path,
    warm_start: Path | None, sft_rows: Sequence, val_rows: Mapping[str, Sequence], groups: Any,
    gt: GroupTexts, warm_head: Path | None = None,
) -> dict[str, Any]:  # fmt: skip
    """What a resume checkpoint must have been made by to be continued: the config and seed, the
    weights it starts from (base model and warm-start adapter, :func:`weights_digest`), the data by
    content — the tokenised SFT and validation rows, the groups' token ids and held-out split (two
    data sets of one size are two jobs) — and the :func:`~burnqed.provenance.code_digest` of this
    module and everything it imports (the step, the losses, the data mix)."""
    from burnqed.ebm.embeddings import weights_digest

    return {
        "sft": sft.to_dict(), "ebm": ebm.to_dict(), "pooling": pooling,
        "iteration": iteration, "seed": seed,
        "base": weights_digest(base),
        "warm_start": weights_digest(warm_start) if warm_start is not None else None,
        "warm_head": weights_digest(warm_head) if warm_head is not None else None,
        "examples": _content_digest(list(sft_rows)), "validation": _content_digest(val_rows),
        "groups": _content_digest(
            [gt.states, gt.goals, [bool(h) for h in groups.heldout], list(groups.theorem)]
        ),
        "code": code_digest(__name__),
    }  # fmt: skip


def _save(
    work: Path, job: Mapping, step: int, model: Any, head: Any, opt: Any, schedule: Any,
    scales: LossScales, tokens: TrainedTokens,
) -> None:  # fmt: skip
    """The exact-resume checkpoint: adapter, head, optimiser, schedule, loss scales, the tokens
    counted so far, step."""
    import torch

    tmp = work / ".resume.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    model.save_pretrained(str(tmp / "adapter"))
    torch.save(
        {
            "head": head.state_dict(),
            "optimizer": opt.state_dict(),
            "schedule": schedule.state_dict(),
            "scales": scales.to_json(),
            "tokens": tokens.to_json(),
        },
        tmp / "state.pt",
    )
    (tmp / "job.json").write_text(json.dumps({"job": job, "step": step}, sort_keys=True))
    final = work / "resume"
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    log.info("joint step %d: resumable checkpoint in %s", step, final)


def _resume(
    work: Path, job: Mapping, model: Any, head: Any, opt: Any, schedule: Any, scales: LossScales,
    tokens: TrainedTokens,
) -> int:  # fmt: skip
    """The step to continue from: the checkpoint's when ``work`` holds one of this same job (its
    state, the tokens counted to it too, loaded), else 0 (a checkpoint of another job is
    removed)."""
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    ckpt = work / "resume"
    if not (ckpt / "job.json").is_file():
        if work.exists():
            shutil.rmtree(work)
        return 0
    saved = json.loads((ckpt / "job.json").read_text())
    if saved["job"] != json.loads(json.dumps(job, sort_keys=True)):
        differ = sorted(
            k for k in set(job) | set(saved["job"]) if saved["job"].get(k) != job.get(k)
        )
        log.warning("%s: a checkpoint of another job (%s differ): starting over", work,
                    ", ".join(differ))  # fmt: skip
        shutil.rmtree(work)
        return 0
    set_peft_model_state_dict(model, load_file(str(ckpt / "adapter" / "adapter_model.safetensors")))
    state = torch.load(ckpt / "state.pt", weights_only=False)
    head.load_state_dict(state["head"])
    opt.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    scales.sft, scales.nce = state["scales"]["sft"], state["scales"]["nce"]
    for k, v in vars(TrainedTokens.from_json(state.get("tokens"))).items():
        setattr(tokens, k, v)
    log.info("joint training: resuming at step %d from %s", saved["step"], ckpt)
    return int(saved["step"])


def _restart_records(work: Path, start: int) -> tuple[Path, CheckpointSelection]:
    """The run's metrics file and checkpoint selection in ``work``: a resumed run's, its records up
    to step ``start`` kept (the ones after it are replayed by this run), else fresh ones."""
    metrics_path = work / "metrics.jsonl"
    work.mkdir(parents=True, exist_ok=True)
    if metrics_path.exists():  # records after the resumed step are replayed by this run
        kept = [ln for ln in metrics_path.read_text().splitlines()
                if ln.strip() and json.loads(ln).get("step", 0) <= start]  # fmt: skip
        metrics_path.write_text("".join(ln + "\n" for ln in kept))
    selection = CheckpointSelection(work / "checkpoints")
    history_path = work / "history.json"
    if start and history_path.is_file():
        selection.history = {int(k): v for k, v in json.loads(history_path.read_text()).items()}
    return metrics_path, selection


def _publish(
    out: Path, model: Any, tokenizer: Any, selection: CheckpointSelection, chosen: Chosen,
    metrics_path: Path, *, summary: Mapping[str, Any], hyperparameters: Mapping[str, Any],
    head_meta: Mapping[str, Any], started: float,
) -> None:  # fmt: skip
    """``out``: the chosen step's adapter and head (:func:`~.loop.publish_chosen`), the tokenizer,
    ``metrics.jsonl``, ``training_summary.json`` (with provenance), ``hyperparameters.json``,
    ``joint_head.json`` and ``run_info.json`` — written whole or not at all."""
    with staged_dir(out) as staging:
        model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        publish_chosen(selection, chosen, staging)  # the chosen step's adapter and head
        shutil.copy(metrics_path, staging / "metrics.jsonl")
        write_json(staging / "training_summary.json", {**summary, **provenance()})
        write_json(staging / "hyperparameters.json", hyperparameters)
        (staging / HEAD_META).write_text(json.dumps(head_meta, indent=2, sort_keys=True) + "\n")
        write_run_info(staging, started=started)


def stop_record(
    error: JointTrainingError, *, step: int, previous: Path | None, warm_head: Path | None
) -> dict[str, Any]:
    """What ``training_summary.json``'s ``stopped`` says of a training a guard stopped: the error,
    its message, the step, and what the iteration keeps instead — the previous iteration's adapter
    and the value head as training started it (configuration A's EBM ``warm_head`` when given).

    >>> r = stop_record(JointTrainingError("joint step 5: the SFT loss …"), step=5,
    ...                 previous=Path("models/iter_0/adapter"), warm_head=None)
    >>> r["error"], r["step"], r["previous_adapter"]
    ('burnqed.train.joint.JointTrainingError', 5, 'models/iter_0/adapter')
    """
    head = f"configuration A's EBM ({warm_head})" if warm_head else "its initial weights"
    return {
        "error": f"{__name__}.{type(error).__name__}",
        "reason": str(error),
        "step": step,
        "previous_adapter": str(previous) if previous else None,
        "head": str(warm_head) if warm_head else None,
        "result": f"the previous iteration's adapter ({previous}) and the value head as training "
        f"started it, {head}: the iteration's model is the previous iteration's",
    }


def _publish_stopped(
    out: Path, previous: Path, tokenizer: Any, head_state: Mapping[str, Any], metrics_path: Path,
    *, summary: Mapping[str, Any], hyperparameters: Mapping[str, Any],
    head_meta: Mapping[str, Any], started: float,
) -> None:  # fmt: skip
    """``out`` for a training a guard stopped: the previous iteration's adapter files as they are
    (``previous``'s ``adapter_*``), the tokenizer, the head as training started it, the metrics up
    to the stop, the summary (its ``stopped``), hyperparameters, ``joint_head.json`` and
    ``run_info.json`` — the files a finished training writes, so the merge, the value model's
    export and the next iteration read it as they read any adapter."""
    from safetensors.torch import save_file

    with staged_dir(out) as staging:
        for f in sorted(Path(previous).glob("adapter_*")):
            shutil.copy(f, staging / f.name)
        tokenizer.save_pretrained(str(staging))
        save_file({k: v.detach().cpu().contiguous() for k, v in head_state.items()},
                  str(staging / HEAD_WEIGHTS))  # fmt: skip
        shutil.copy(metrics_path, staging / "metrics.jsonl")
        write_json(staging / "training_summary.json", {**summary, **provenance()})
        write_json(staging / "hyperparameters.json", hyperparameters)
        (staging / HEAD_META).write_text(json.dumps(head_meta, indent=2, sort_keys=True) + "\n")
        write_run_info(staging, started=started)


# --------------------------------------------------------------------------------------------
# After training: the adapter of an iteration, the head as an EBM


def train_adapter(
    *,
    base: Path,
    train: Path,
    val: Path,
    out: Path,
    cfg: Mapping[str, Any],
    ebm: Mapping[str, Any],
    pooling: str,
    iteration: int,
    previous_adapter: Path | None = None,
    trajectories: Mapping[str, Path] | Sequence[Path] = (),
    eval_benchmarks: Sequence[Path] = (),
    decontamination: str = "refuse",
    seed: int,
    split: Mapping[str, Any] | None = None,
    warm_head: Path | None = None,
) -> None:
    """The adapter of iteration ``iteration`` as ``sft.mode`` says: joint training from iteration 1
    on (there are trees to learn the value from), SFT at iteration 0 and with ``mode: sft``."""
    from burnqed.train.sft import train_sft

    if SFTConfig.from_dict(cfg).mode == "joint" and iteration >= 1:
        train_joint(
            base=base, train=train, val=val, out=out, cfg=cfg, ebm=ebm, pooling=pooling,
            iteration=iteration, previous_adapter=previous_adapter, trajectories=trajectories,
            eval_benchmarks=eval_benchmarks, decontamination=decontamination, seed=seed,
            split=split, warm_head=warm_head,
        )  # fmt: skip
        return
    train_sft(
        base=base, train=train, val=val, out=out, cfg=cfg, iteration=iteration,
        previous_adapter=previous_adapter, trajectories=trajectories,
        eval_benchmarks=eval_benchmarks, decontamination=decontamination, seed=seed, split=split,
    )  # fmt: skip


def export_joint_ebm(
    *, adapter: Path, merged: Path, out: Path, pooling: str,
    searches: Sequence[Path] = (), embeddings: Path | None = None, warm_head: Path | None = None,
    eval_benchmarks: Sequence[Path] = (), decontamination: str = "refuse", seed: int = 0,
    split: Mapping[str, Any] | None = None, fallback: Path | None = None,
) -> dict:  # fmt: skip
    """The joint head of ``adapter`` as an EBM directory (``burnqed.ebm.scorer`` format) for the
    merged model ``merged``: its weights, its config, the merged model's embedding digest (what
    :func:`burnqed.ebm.scorer.load_value_model` checks against the policy in use) and, given the
    pool ``searches`` and their ``embeddings`` by the merged model, its fitted energy weight
    (:func:`burnqed.ebm.stage.joint_energy_weight`: on the theorems neither it nor its warm start
    ``warm_head`` trained on).

    ``fallback`` (``ebm.fallback: depth_twin``: the iteration's depth twin directory): where that
    weight is 0 — the head ranks the held-out decisions no better than the log-prob without it —
    the twin's ``features.json`` is written beside the head, so the search loads the twin in its
    place (:func:`burnqed.search.value.load_value_model` prefers a feature value); ``ebm.json``'s
    ``shipped`` says which value the directory ships, and why."""
    from safetensors.torch import load_file

    from burnqed.ebm.embeddings import model_digest
    from burnqed.ebm.scorer import save_ebm
    from burnqed.ebm.train import build_head

    adapter, merged, out = Path(adapter), Path(merged), Path(out)
    meta_path = adapter / HEAD_META
    if not meta_path.is_file():
        raise FileNotFoundError(f"{adapter}: no {HEAD_META} (not a jointly trained adapter)")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if meta.get("pooling") != pooling:
        raise ValueError(
            f"{meta_path}: the head was trained on {meta.get('pooling')!r}-pooled embeddings, "
            f"but policy.pooling is {pooling!r}"
        )
    cfg = EBMConfig.from_dict(meta["config"])
    head = build_head(int(meta["dim"]), cfg)
    head.load_state_dict(load_file(str(adapter / HEAD_WEIGHTS)))
    digest = model_digest(merged, pooling)
    if searches and embeddings is not None:
        from burnqed.ebm.stage import joint_energy_weight

        weight = joint_energy_weight(
            head, meta, searches=searches, embeddings=embeddings, embedding_model_digest=digest,
            warm_head=warm_head, seed=seed, split=split or {}, eval_benchmarks=eval_benchmarks,
            decontamination=decontamination,
        )  # fmt: skip
    else:
        weight = {"priority": None, "reason": "exported without the pool searches"}
    ebm_meta = {
        **meta,
        "kind": "joint",
        "embedding_model": str(merged),
        "embedding_model_digest": digest,
        "adapter": str(adapter),
        "energy_weight": weight,
    }
    twin = None
    if fallback is not None and (weight.get("priority") or {}).get("energy") == 0:
        twin = json.loads((Path(fallback) / FEATURES_META).read_text(encoding="utf-8"))
        why = (f"the head's fitted energy weight is 0 (on {weight.get('decisions')} decisions of "
               f"its held-out theorems): this iteration ships its depth twin, {fallback}")  # fmt: skip
        ebm_meta["shipped"] = {"value": "depth twin", "from": str(fallback), "why": why}
        log.warning("%s: %s (ebm.fallback)", out, why)
    else:
        ebm_meta["shipped"] = {"value": "energy head"}
    with staged_dir(out) as staging:
        save_ebm(staging, head, ebm_meta)
        if twin is not None:
            (staging / FEATURES_META).write_text(
                json.dumps({**twin, "fallback_for": ebm_meta["shipped"]}, indent=2, sort_keys=True)
                + "\n", encoding="utf-8",
            )  # fmt: skip
    return ebm_meta
