"""``models/iter_{i}/adapter/``: supervised fine-tuning of the base policy with LoRA / QLoRA (SPEC §4.7).

trl's ``SFTTrainer`` on a prompt/completion dataset (loss on the completion only — the prompt's labels
are -100; ``reference/training-stack.md`` §2), a peft LoRA adapter on ``sft.target_modules``, either on
the full-precision base (``sft.quantization: none``) or on a 4-bit NF4 base (``nf4``: QLoRA with
bitsandbytes).  Cosine schedule with linear warm-up.

Iteration 0 trains a fresh adapter on the tactic pairs.  Iteration ``i > 0``
(:func:`~.loop.plan_sft`, :func:`~.loop.build_mix`; the plan, data, model and checkpoint selection
are :mod:`.loop`'s, shared with joint training) warm-starts from adapter ``i-1`` (checked equal to
it before the first step), with learning rate × ``lr_decay``^i and ``later_max_steps``, on a seeded
subsample of the base pairs (``base_pair_subsample``) plus the positive steps of the earlier
searches' verified proofs (:mod:`.positives`) × ``positive_upsample``, all decontaminated against
the evaluation benchmark (:mod:`burnqed.data.decontam`).  The run's one theorem split
(:mod:`burnqed.split`, params.yaml ``split``) holds two shares of those steps out: a second
validation set (``split.val_fraction``) and a test set (``split.test_fraction``) — the theorems
the value model holds out too.

Both validation losses (base pairs, trajectory steps) are measured before training (step 0) and
every ``eval_steps``; the adapter of every evaluated step is kept and the one ``sft.select_by``
chooses (:func:`~.loop.select_step`) is saved.  The chosen step's validation loss is optimistic — it
is the lowest of several looks at the same steps — so the held-out proof-step loss to report is the
test set's, measured alongside and never looked at by the selection (``test`` in the summary).

Training runs under :func:`burnqed.determinism.deterministic_training` with trl's ``seed`` and
``data_seed`` set and no data-loader workers: on the same CPU type, thread count and library
versions a rerun writes the same adapter bytes (``adapter_config.json`` lists ``target_modules``
sorted: peft writes them in the order of a Python set, which changes from process to process).
Beside the adapter:

- ``training_summary.json`` — steps, train loss, both validation-loss curves, the selected step and
  why, both validation losses before and after (``validation``: what chose the checkpoint), the
  test loss before and after (``test``: never used to choose), the warm-start check, the data mix
  (base pairs, positive steps per source iteration, skipped trajectory parts, decontamination),
  trainable parameters, ``tokens`` (what the optimizer steps saw: prompt and completion apart,
  :class:`~.artifacts.TrainedTokens`), data hashes, determinism settings, versions, git commit, and
  ``training_step`` (:func:`~.loop.step_record`): trl's step is always right-padded with the
  model's own loss over whole logits; on CUDA the residual stream follows ``sft.gpu_layout`` and
  the trainer's bf16 autocast is on — and trl casts a 4-bit model's adapter to bf16 (the QLoRA
  paper's recipe), so there the LoRA weights, their gradients and AdamW's moments are bf16, which
  the record measures (``trainable_dtypes``) rather than assumes;
- ``hyperparameters.json`` — the ``sft`` section, the base model, the effective values of this
  iteration (learning rate, steps, warm start, upsampling, criterion), the seed;
- ``metrics.jsonl`` — every logged step as it happened (with wall times);
- ``run_info.json`` — when, how long (``wall_s``), the command line.

Example::

    from pathlib import Path
    from burnqed.train.sft import train_sft
    train_sft(base=Path("models/base"), train=Path("data/tactic_pairs/train.parquet"),
              val=Path("data/tactic_pairs/val.parquet"), out=Path("models/iter_1/adapter"),
              cfg={...the sft section...}, iteration=1,
              previous_adapter=Path("models/iter_0/adapter"),
              trajectories=[Path("results/iter_0/search"), Path("results/iter_0/search_noise")],
              eval_benchmarks=[Path("data/benchmarks/minif2f_test.jsonl")], seed=0)
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed.config import SFTConfig, SplitConfig
from burnqed.data.benchmarks import sha256_file
from burnqed.determinism import deterministic_training, write_run_info
from burnqed.progress import Progress
from burnqed.split import TheoremSplit
from burnqed.train.artifacts import (
    MetricsLog,
    TrainedTokens,
    provenance,
    quiet_progress_bars,
    staged_dir,
    write_json,
)
from burnqed.train.loop import (
    CheckpointSelection,
    Chosen,
    SFTMix,
    SFTPlan,
    TokenIds,
    adapter_difference,
    build_mix,
    check_inputs,
    load_base_model,
    load_training_model,
    plan_sft,
    publish_chosen,
    read_training_data,
    select_step,
    sort_target_modules,
    step_record,
    validation_sets,
    warm_start_record,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel, TrainerCallback

log = logging.getLogger(__name__)

# The plan, data, model and checkpoint pieces live in .loop (joint training runs them too); they
# are importable from here as before.
__all__ = [
    "CheckpointSelection",
    "Chosen",
    "SFTMix",
    "SFTPlan",
    "adapter_difference",
    "build_mix",
    "build_trainer",
    "check_prompt_boundaries",
    "completion_only_rows",
    "load_base_model",
    "plan_sft",
    "read_training_data",
    "select_step",
    "sort_target_modules",
    "train_sft",
]

SUMMARY_FILE = "training_summary.json"
HYPERPARAMETERS_FILE = "hyperparameters.json"
METRICS_FILE = "metrics.jsonl"


def train_sft(
    *,
    base: Path,
    train: Path,
    val: Path,
    out: Path,
    cfg: Mapping[str, Any],
    iteration: int = 0,
    previous_adapter: Path | None = None,
    trajectories: Mapping[str, Path] | Sequence[Path] = (),
    eval_benchmarks: Sequence[Path] = (),
    decontamination: str = "refuse",
    seed: int,
    split: Mapping[str, Any] | None = None,
) -> None:
    """Fine-tune ``base`` on ``train`` (tactic pairs) plus, at iterations > 0, the positive steps of
    ``trajectories``; keep the checkpoint ``sft.select_by`` chooses, in ``out``.  ``split``: the
    run's theorem split (params.yaml ``split``; None: its defaults), which holds trajectory
    validation and test theorems out.

    ``eval_benchmarks``: benchmark files whose statements must not be in the trajectory steps
    (``decontamination``: ``refuse`` or ``drop``; the tactic pairs were checked by the data stage).
    """
    import torch

    base, out = Path(base), Path(out)
    sft = SFTConfig.from_dict(cfg)
    plan = plan_sft(sft, iteration, previous_adapter)
    check_inputs(base, plan)
    base_examples, val_examples, mix = read_training_data(
        train, val, plan, trajectories, sft, iteration=iteration, seed=seed,
        split=TheoremSplit.of(split, seed),
        eval_benchmarks=eval_benchmarks, decontamination=decontamination,
    )  # fmt: skip
    cuda = torch.cuda.is_available()
    started = time.time()
    quiet_progress_bars(datasets=True)

    model, tokenizer = load_training_model(base, sft, cuda=cuda)
    # One cache of token ids for the check and the trainer's rows (the same texts, tokenised once
    # when the tokenizer adds no special tokens).
    ids = TokenIds(tokenizer, add_special_tokens=False)
    boundary = check_prompt_boundaries(
        tokenizer,
        [*mix.train, *val_examples, *mix.trajectory_val, *mix.trajectory_test],
        add_eos=True,
        ids=ids,
    )
    eval_sets = validation_sets(val_examples, mix)  # every set at every evaluation
    with (
        deterministic_training(seed=seed, device="cuda" if cuda else "cpu") as determinism,
        staged_dir(out) as staging,
        MetricsLog(staging / METRICS_FILE) as metrics,
    ):
        selection = CheckpointSelection(staging / "checkpoints")
        trainer = build_trainer(
            model, tokenizer, mix.train, eval_sets, sft, plan,
            output_dir=staging / "checkpoints", cuda=cuda, seed=seed, metrics=metrics,
            selection=selection, ids=ids.with_special_tokens(True),
        )  # fmt: skip
        del ids  # the rows are in the trainer's datasets now
        warm_start = warm_start_record(trainer.model, plan)
        # Measured on the trainer's model: trl has cast a 4-bit model's adapter by now.
        training_step = step_record(
            trainer.model, setting=sft.gpu_layout, device="cuda" if cuda else "cpu", packed=False,
            autocast="bfloat16" if trainer.args.bf16 else None,
            loss_kernel={"kernel": "materialised", "why": "trl's SFTTrainer: the model's own "
                         "loss over whole logits"},
        )  # fmt: skip
        log.info("SFT training step: %s", training_step)
        trainer.evaluate()  # step 0: the losses before training (the previous iteration's model)
        trainer.train()
        if selection.last_step() != trainer.state.global_step:
            trainer.evaluate()  # the last step is always a candidate
        chosen = select_step(selection.history, sft.select_by, sft.plateau_tolerance)
        trainer.save_model(str(staging))  # the tokenizer, and the last step's adapter …
        publish_chosen(selection, chosen, staging)  # … replaced by the chosen step's
        shutil.rmtree(staging / "checkpoints", ignore_errors=True)
        # A pickle of the TrainingArguments: opaque and version-bound; hyperparameters.json
        # below is the readable record of the same settings.
        (staging / "training_args.bin").unlink(missing_ok=True)
        summary = _summary(trainer, selection.history, chosen)
        summary["warm_start"] = warm_start
        summary["data"] = {
            "train": str(train), "train_sha256": sha256_file(train),
            "train_examples": len(mix.train),
            "base_pairs": len(base_examples),
            "val": str(val), "val_sha256": sha256_file(val), "val_examples": len(val_examples),
            "prompt_boundary_mismatches": boundary,
            **mix.to_json(),
        }  # fmt: skip
        summary["determinism"] = determinism
        summary["training_step"] = training_step
        # What training spent (stated beside the searches' compute, burnqed.eval.compute).
        trainer.tokens.steps = summary["steps"]
        summary["tokens"] = trainer.tokens.to_json()
        write_json(staging / SUMMARY_FILE, {**summary, **provenance()})
        write_json(
            staging / HYPERPARAMETERS_FILE,
            {
                "base_model": _base_model_id(base),
                "base_path": str(base),
                "sft": sft.to_dict(),
                "iteration": plan.iteration,
                "effective": {
                    "learning_rate": plan.learning_rate,
                    "max_steps": plan.max_steps,
                    "warm_start": str(plan.warm_start) if plan.warm_start else None,
                    "base_pair_limit": plan.base_pair_limit,
                    "positive_upsample": sft.positive_upsample if iteration > 0 else None,
                    "select_by": chosen.criterion,
                    "effective_batch": sft.batch_size * sft.grad_accum,
                    "device": "cuda" if cuda else "cpu",
                    "activation_checkpointing": trainer.args.activation_checkpointing,
                    "bf16": trainer.args.bf16,
                },
                "decontamination": decontamination,
                "seed": seed,
                "split": SplitConfig.from_dict(split).to_dict(),
            },
        )
        run = write_run_info(staging, started=started)
    v, t = summary["validation"], summary["test"]["trajectory"]
    log.info(
        "adapter in %s: %d steps, step %s kept (%s), %.0f s; val loss before → after (chose the "
        "step): base pairs %.4f → %.4f, trajectory %s; held-out proof steps (test, never used to "
        "choose): %s",
        out, summary["steps"], chosen.step, chosen.criterion, run["wall_s"],
        v["pairs"]["before"], v["pairs"]["after"],
        "n/a" if v["trajectory"] is None
        else f"{v['trajectory']['before']:.4f} → {v['trajectory']['after']:.4f}",
        "n/a" if t is None else f"{t['before']:.4f} → {t['after']:.4f}",
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Tokenizer check, trainer


def check_prompt_boundaries(
    tokenizer: Any,
    examples: Sequence[Mapping[str, str]],
    *,
    add_eos: bool = True,
    ids: TokenIds | None = None,
) -> int:
    """Count (and report) the examples whose prompt does not end at a token boundary.

    trl tokenizes the prompt and prompt + completion separately and masks as many leading labels
    as the prompt has tokens; when the prompt's last token merges with the completion's first, the
    two tokenizations disagree and the mask is off (trl only warns, once).  The one prompt format
    ends with a newline to avoid this (:mod:`burnqed.data.prompt`); this check says when a
    tokenizer or a hand-made example breaks it: a warning naming the first such example.
    ``ids``: a cache of the texts' ids without special tokens, to share with the trainer's rows.
    """
    unique = list({(e["prompt"], e["completion"]): e for e in examples}.values())
    if not unique:
        return 0
    ids = (ids or TokenIds(tokenizer, add_special_tokens=False)).with_special_tokens(False)
    eos = tokenizer.eos_token if add_eos and tokenizer.eos_token else ""
    prompts = ids([e["prompt"] for e in unique])
    full = ids([e["prompt"] + e["completion"] + eos for e in unique])
    bad = [e for e, p, f in zip(unique, prompts, full, strict=True) if f[: len(p)] != p]
    if bad:
        log.warning(
            "%d of %d examples: the prompt does not end at a token boundary (its last token "
            "merges with the completion), so the completion-only loss mask is off there; first: "
            "prompt ending %r, completion %r",
            len(bad), len(unique), bad[0]["prompt"][-30:], bad[0]["completion"][:30],
        )  # fmt: skip
    return len(bad)


def completion_only_rows(
    tokenizer: Any,
    examples: Sequence[Mapping[str, str]],
    *,
    max_length: int | None,
    truncation_mode: str = "keep_start",
    ids: TokenIds | None = None,
) -> dict[str, list[list[int]]]:
    """The ``input_ids`` and ``labels`` columns trl's ``SFTTrainer`` makes of prompt/completion
    ``examples`` (trl 1.16 ``SFTTrainer._prepare_dataset``, plain text, no packing): EOS appended
    to each completion that does not end with it; the prompt and prompt + completion tokenised as
    ``tokenizer(text)`` does (special tokens included); the completion from where the two diverge,
    labels -100 before it; both cut to ``max_length`` (``truncation_mode``: keep the start or the
    end); rows left with no label dropped.

    trl built them with datasets' ``map``, one example at a time through five passes, and
    tokenised the texts :func:`check_prompt_boundaries` had tokenised already; here the ids come
    from ``ids`` (a :class:`~.loop.TokenIds` with special tokens; a new one when None) in batched
    calls, the check's own when the tokenizer adds no special tokens.  Iteration 0's SFT of the
    demo spent ~13 s preparing its data, ~4 s with these rows.  ``tests/train/test_sft.py``
    checks them against trl's own preparation.
    """
    ids = (ids or TokenIds(tokenizer)).with_special_tokens(True)
    if max_length is None:
        cut = slice(None)
    elif truncation_mode == "keep_start":
        cut = slice(None, max_length)
    elif truncation_mode == "keep_end":
        cut = slice(-max_length, None)
    else:
        raise ValueError(
            f"truncation_mode: expected keep_start or keep_end, got {truncation_mode!r}"
        )
    eos = tokenizer.eos_token

    def with_eos(completion: str) -> str:
        return completion if completion.endswith(eos) else completion + eos

    prompts = ids([e["prompt"] for e in examples])
    full = ids([e["prompt"] + with_eos(e["completion"]) for e in examples])
    columns: dict[str, list[list[int]]] = {"input_ids": [], "labels": []}
    for p, f in zip(prompts, full, strict=True):
        n = _common_prefix_length(p, f)
        labels = ([-100] * n + f[n:])[cut]
        if any(t != -100 for t in labels):  # a row the cut left without a label teaches nothing
            columns["input_ids"].append(f[cut])
            columns["labels"].append(labels)
    return columns


def _common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def build_trainer(
    model: PreTrainedModel,
    tokenizer: Any,
    train_examples: list[dict[str, str]],
    val_examples: list[dict[str, str]] | Mapping[str, list[dict[str, str]]],
    sft: SFTConfig,
    plan: SFTPlan,
    *,
    output_dir: Path,
    cuda: bool,
    seed: int,
    metrics: MetricsLog | None = None,
    selection: CheckpointSelection | None = None,
    ids: TokenIds | None = None,
):
    """The configured ``trl.SFTTrainer``: a fresh LoRA (or the warm-start adapter) on ``model``.

    ``val_examples``: one validation set, or several by name (``pairs``, ``trajectory``), each
    evaluated every ``eval_steps`` as ``eval_<name>_loss``; a plain list is named ``pairs``.
    ``selection`` records each evaluation and keeps the adapter of each evaluated step.
    Its ``train_dataset`` is already tokenized, with ``labels`` -100 on the prompt (what a test
    inspects to see that the loss is on the completion only): the rows trl would prepare, made by
    :func:`completion_only_rows` (from ``ids``, a cache of token ids with special tokens, when
    given) and handed over with trl's preparation skipped.
    """
    import torch
    import trl
    from datasets import Dataset
    from peft import LoraConfig, PeftModel
    from transformers import PrinterCallback

    peft_config = None
    if plan.warm_start is not None:
        model = PeftModel.from_pretrained(model, str(plan.warm_start), is_trainable=True)
    else:
        peft_config = LoraConfig(
            r=sft.lora_r,
            lora_alpha=sft.lora_alpha,
            lora_dropout=sft.lora_dropout,
            target_modules=list(sft.target_modules),
            task_type="CAUSAL_LM",
        )
    eval_steps = min(sft.eval_steps, plan.max_steps)
    args = trl.SFTConfig(
        output_dir=str(output_dir),
        max_steps=plan.max_steps,
        per_device_train_batch_size=sft.batch_size,
        per_device_eval_batch_size=sft.batch_size,
        gradient_accumulation_steps=sft.grad_accum,
        learning_rate=plan.learning_rate,
        lr_scheduler_type=sft.lr_scheduler,
        warmup_steps=sft.warmup_steps,
        optim="adamw_torch",  # bitsandbytes' 8-bit optimisers do not run on CPU
        max_length=sft.max_length,
        completion_only_loss=True,  # prompt tokens get label -100
        packing=False,  # packing without FlashAttention lets examples attend to each other
        eval_strategy="steps",
        eval_steps=eval_steps,
        # No trainer checkpoints: CheckpointSelection keeps the adapter of every evaluated step
        # and train_sft publishes the one sft.select_by chooses.
        save_strategy="no",
        logging_steps=max(1, min(25, plan.max_steps // 20)),
        # Checkpointing trades compute for memory: needed for 7B on one GPU, only a slowdown on CPU.
        activation_checkpointing=cuda,  # (transformers 5 name of gradient_checkpointing)
        use_cpu=not cuda,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        report_to="none",
        disable_tqdm=not sys.stderr.isatty(),
        # Reproducibility: the LoRA init and dropout (seed), the shuffling (data_seed), batches
        # built in this process in order (no workers).  Not full_determinism: it would force
        # CUDA_LAUNCH_BLOCKING=1 and override CUBLAS_WORKSPACE_CONFIG; train_sft's
        # deterministic_training sets the rest.
        seed=seed,
        data_seed=seed,
        dataloader_num_workers=0,
        # The rows are completion_only_rows' (trl's preparation, batched): trl's own is skipped.
        dataset_kwargs={"skip_prepare_dataset": True},
    )
    if not isinstance(val_examples, Mapping):
        val_examples = {"pairs": val_examples}
    ids = (ids or TokenIds(tokenizer)).with_special_tokens(True)

    def dataset(examples: list[dict[str, str]]) -> Dataset:
        return Dataset.from_dict(
            completion_only_rows(tokenizer, examples, max_length=args.max_length,
                                 truncation_mode=args.truncation_mode, ids=ids)
        )  # fmt: skip

    callbacks = [_progress_callback()]
    if metrics is not None:
        callbacks.append(_metrics_callback(metrics))
    if selection is not None:
        callbacks.append(_selection_callback(selection))
    trainer = _counting_trainer(trl.SFTTrainer)(
        model=model,
        args=args,
        train_dataset=dataset(train_examples),
        eval_dataset={name: dataset(ex) for name, ex in val_examples.items()},
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks or None,
    )
    # Without a progress bar the trainer print()s every log dict to stdout; the JSONL callback
    # already logs them through `logging` (to the rule's log file).
    trainer.remove_callback(PrinterCallback)
    return trainer


def _counting_trainer(base: type) -> type:
    """``base`` (trl's ``SFTTrainer``) that counts the tokens of every micro-batch it trains on
    (:class:`~.artifacts.TrainedTokens`, ``trainer.tokens``) — read from the batch the step gets,
    nothing of the step changed; evaluation batches are not counted."""

    class CountingTrainer(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.tokens = TrainedTokens()

        def training_step(self, model, inputs, num_items_in_batch=None):  # type: ignore[no-untyped-def]
            self.tokens.add_rows(inputs["attention_mask"], inputs["labels"])
            return super().training_step(model, inputs, num_items_in_batch)

    return CountingTrainer


def _metrics_callback(metrics: MetricsLog) -> TrainerCallback:
    from transformers import TrainerCallback

    class JsonlMetrics(TrainerCallback):
        """Every trainer log record (train loss, lr, eval loss) as one JSONL line, as it happens."""

        def __init__(self) -> None:
            self.start = time.monotonic()

        def on_log(self, args, state, control, logs=None, **kwargs):  # type: ignore[no-untyped-def]
            if logs:
                metrics.write(
                    {
                        "step": state.global_step,
                        "wall_s": round(time.monotonic() - self.start, 3),
                        **logs,
                    }
                )
                log.info("step %d: %s", state.global_step, _format_logs(logs))

    return JsonlMetrics()


def _progress_callback() -> TrainerCallback:
    from transformers import TrainerCallback

    class StepProgress(TrainerCallback):
        """Progress lines with a rate and an ETA in the rule's log (the trainer's own tqdm bar is
        the terminal's, so this one draws none)."""

        progress: Progress | None = None

        def on_train_begin(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            self.progress = Progress(log, "sft", total=state.max_steps, unit="steps",
                                     initial=state.global_step, bar=False)  # fmt: skip

        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if self.progress is not None:
                self.progress.set(state.global_step)

        def on_train_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if self.progress is not None:
                self.progress.close()

    return StepProgress()


def _selection_callback(selection: CheckpointSelection) -> TrainerCallback:
    from transformers import TrainerCallback

    class Selection(TrainerCallback):
        def on_evaluate(self, args, state, control, metrics=None, model=None, **kwargs):  # type: ignore[no-untyped-def]
            selection.record(state.global_step, metrics or {}, model)

    return Selection()


def _format_logs(logs: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in logs.items()
    )


def _summary(
    trainer: Any, history: Mapping[int, Mapping[str, float]], chosen: Chosen
) -> dict[str, Any]:
    state = trainer.state
    train_loss = [[h["step"], h["loss"]] for h in state.log_history if "loss" in h]
    steps = sorted(history)

    def curve(name: str) -> list[list[float]]:
        return [[s, history[s][name]] for s in steps if s > 0 and name in history[s]]

    def before_after(name: str, *, best: bool = True) -> dict[str, Any] | None:
        if name not in history.get(0, {}):
            return None
        out = {
            "before": history[0][name],  # step 0: the model training started from
            "after": history[chosen.step][name],  # the saved (chosen) step
        }
        if best:  # the lowest of the curve: for validation sets only (a test set has no "best")
            out["best"] = min(v for _, v in curve(name))
        return out

    model = trainer.model
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {
        "steps": state.global_step,
        "train_loss": train_loss,
        "eval_loss": curve("pairs"),  # base-pair validation loss per evaluated step
        "eval_trajectory_loss": curve("trajectory"),  # trajectory validation loss (iterations > 0)
        "best_step": chosen.step,  # the step saved
        "best_eval_loss": history[chosen.step]["pairs"],
        "selection": {"criterion": chosen.criterion, "step": chosen.step, "reason": chosen.reason},
        # The losses that chose the checkpoint: the chosen step's are biased low by that choice.
        "validation": {
            "used_for": "checkpoint selection (sft.select_by)",
            "pairs": before_after("pairs"),
            "trajectory": before_after("trajectory"),
        },
        # Held-out proof steps of theorems neither trained on nor used for selection: the
        # held-out proof-step loss to report (None without trajectory data).
        "test": {
            "used_for": "reporting only (never used to choose the checkpoint)",
            "trajectory": before_after("test", best=False),
        },
        "trainable_parameters": trainable,
        "total_parameters": total,
    }


def _base_model_id(base: Path) -> str:
    """What the base *is* (hub id or "tiny"), from its ``burnqed_model.json``; else the path."""
    info = base / "burnqed_model.json"
    if info.exists():
        try:
            return str(json.loads(info.read_text(encoding="utf-8")).get("base", base))
        except json.JSONDecodeError:
            log.warning("%s: not valid JSON; recording the base by its path", info)
    return str(base)
