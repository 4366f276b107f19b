"""``models/iter_{i}/adapter/``: supervised fine-tuning of the base policy with LoRA / QLoRA (SPEC §4.7).

trl's ``SFTTrainer`` on a prompt/completion dataset (loss on the completion only — the prompt's labels
are -100; ``reference/training-stack.md`` §2), a peft LoRA adapter on ``sft.target_modules``, either on
the full-precision base (``sft.quantization: none``) or on a 4-bit NF4 base (``nf4``: QLoRA with
bitsandbytes).  Cosine schedule with linear warm-up; validation loss every ``eval_steps``; the
checkpoint with the lowest validation loss is the one saved.  Beside the adapter:

- ``training_summary.json`` — steps, train / eval loss history, best step and its loss, wall time,
  trainable parameters, data hashes, versions, git commit;
- ``hyperparameters.json`` — the ``sft`` section, the base model, the effective values of this
  iteration (learning rate, steps, warm start), the seed;
- ``metrics.jsonl`` — every logged step as it happened.

Iteration 0 trains a fresh adapter.  Iterations > 0 (a later issue) slot in through :func:`plan_sft`:
warm start from the previous adapter, learning rate × ``lr_decay``^i, ``later_max_steps``, a seeded
subsample of the base pairs (positive trajectory steps are to be mixed in by the caller's data).

Example::

    from pathlib import Path
    from burnqed.train.sft import train_sft
    train_sft(base=Path("models/base"), train=Path("data/tactic_pairs/train.parquet"),
              val=Path("data/tactic_pairs/val.parquet"), out=Path("models/iter_0/adapter"),
              cfg={...the sft section...}, seed=0)
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed.config import ConfigError, SFTConfig
from burnqed.data.benchmarks import sha256_file
from burnqed.policy.model_files import check_model_dir
from burnqed.train.artifacts import (
    MetricsLog,
    provenance,
    quiet_progress_bars,
    staged_dir,
    write_json,
)
from burnqed.train.examples import TrainingDataError, read_examples

if TYPE_CHECKING:
    from transformers import PreTrainedModel, TrainerCallback

log = logging.getLogger(__name__)

SUMMARY_FILE = "training_summary.json"
HYPERPARAMETERS_FILE = "hyperparameters.json"
METRICS_FILE = "metrics.jsonl"


@dataclass(frozen=True)
class SFTPlan:
    """The effective settings of one iteration's SFT, derived from the ``sft`` section."""

    iteration: int
    learning_rate: float  # sft.learning_rate × lr_decay^iteration
    max_steps: int  # max_steps at iteration 0, later_max_steps after
    warm_start: Path | None  # adapter to continue training (iterations > 0)
    base_pair_limit: int | None  # base pairs kept (None: all; iterations > 0 subsample)


def plan_sft(cfg: SFTConfig, iteration: int, previous_adapter: Path | None) -> SFTPlan:
    """Iteration 0: a fresh adapter on all pairs.  Later: warm start, decayed rate, fewer steps."""
    if iteration < 0:
        raise ValueError(f"iteration must be >= 0, got {iteration}")
    if iteration == 0:
        if previous_adapter is not None:
            raise ValueError("iteration 0 trains a fresh adapter: previous_adapter must be None")
        return SFTPlan(0, cfg.learning_rate, cfg.max_steps, None, None)
    if previous_adapter is None:
        raise ValueError(f"iteration {iteration} warm-starts: previous_adapter is required")
    return SFTPlan(
        iteration=iteration,
        learning_rate=cfg.learning_rate * cfg.lr_decay**iteration,
        max_steps=cfg.later_max_steps,
        warm_start=Path(previous_adapter),
        base_pair_limit=cfg.base_pair_subsample,
    )


def train_sft(
    *,
    base: Path,
    train: Path,
    val: Path,
    out: Path,
    cfg: Mapping[str, Any],
    iteration: int = 0,
    previous_adapter: Path | None = None,
    seed: int,
) -> None:
    """Fine-tune ``base`` on ``train`` (tactic pairs), keep the best adapter by ``val`` loss, in ``out``."""
    import torch

    base, out = Path(base), Path(out)
    sft = SFTConfig.from_dict(cfg)
    plan = plan_sft(sft, iteration, previous_adapter)
    if not (base / "config.json").exists():
        raise TrainingDataError(
            f"{base}: not a model directory (no config.json); build models/base first"
        )
    check_model_dir(base)  # bad config.json, truncated weights, no tokenizer: named here
    if plan.warm_start is not None and not (plan.warm_start / "adapter_config.json").exists():
        raise TrainingDataError(
            f"{plan.warm_start}: not an adapter directory (no adapter_config.json)"
        )
    train_examples = read_examples(
        train, limit=plan.base_pair_limit, seed=seed, what="SFT train pairs"
    )
    val_examples = read_examples(val, what="SFT validation pairs")
    cuda = torch.cuda.is_available()
    started = time.time()
    quiet_progress_bars(datasets=True)

    model = load_base_model(base, quantization=sft.quantization, cuda=cuda)
    tokenizer = _load_tokenizer(base)
    check_target_modules(model, sft.target_modules)
    with staged_dir(out) as staging, MetricsLog(staging / METRICS_FILE) as metrics:
        trainer = build_trainer(
            model, tokenizer, train_examples, val_examples, sft, plan,
            output_dir=staging / "checkpoints", cuda=cuda, seed=seed, metrics=metrics,
        )  # fmt: skip
        trainer.train()
        # load_best_model_at_end has put the best checkpoint's adapter back into the model.
        trainer.save_model(str(staging))
        shutil.rmtree(staging / "checkpoints", ignore_errors=True)
        # A pickle of the TrainingArguments: opaque and version-bound; hyperparameters.json
        # below is the readable record of the same settings.
        (staging / "training_args.bin").unlink(missing_ok=True)
        summary = _summary(trainer, started)
        summary["data"] = {
            "train": str(train), "train_sha256": sha256_file(train),
            "train_examples": len(train_examples),
            "val": str(val), "val_sha256": sha256_file(val), "val_examples": len(val_examples),
        }  # fmt: skip
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
                    "effective_batch": sft.batch_size * sft.grad_accum,
                    "device": "cuda" if cuda else "cpu",
                    "activation_checkpointing": trainer.args.activation_checkpointing,
                    "bf16": trainer.args.bf16,
                },
                "seed": seed,
            },
        )
    log.info(
        "adapter in %s: %d steps, best eval loss %.4f at step %s, %.0f s",
        out, summary["steps"], summary["best_eval_loss"], summary["best_step"], summary["wall_seconds"],
    )  # fmt: skip


# --------------------------------------------------------------------------------------------
# Model, tokenizer, trainer


def load_base_model(base: Path, *, quantization: str, cuda: bool) -> PreTrainedModel:
    """The base for training: full precision (``none``) or 4-bit NF4 for QLoRA (``nf4``).

    On CPU everything computes in float32 (bf16 training is not supported there by the trainer);
    on a GPU the checkpoint's own dtype (bf16 for the real models) and bf16 compute for NF4.
    """
    import torch
    from transformers import AutoModelForCausalLM

    if quantization == "none":
        return AutoModelForCausalLM.from_pretrained(
            base,
            dtype="auto" if cuda else torch.float32,
            device_map={"": 0} if cuda else None,
            local_files_only=True,  # a path never falls back to a hub lookup
        )
    if quantization != "nf4":
        raise ConfigError(f"sft.quantization: expected nf4 or none, got {quantization!r}")
    from peft import prepare_model_for_kbit_training
    from transformers import BitsAndBytesConfig

    compute = torch.bfloat16 if cuda else torch.float32
    model = AutoModelForCausalLM.from_pretrained(
        base,
        quantization_config=BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_compute_dtype=compute,
            bnb_4bit_use_double_quant=True,  # quantizes the quantization constants too: ~0.4 bit/param
        ),
        dtype=compute,
        device_map={"": 0} if cuda else {"": "cpu"},
        local_files_only=True,
    )
    # Casts the non-quantized layers (norms, embeddings) to float32 for stable training and,
    # with checkpointing, makes the inputs require grad so the adapter still gets gradients.
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=cuda)


def _load_tokenizer(base: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    if tokenizer.pad_token is None:
        # Padding is masked out of the loss; EOS as pad is the usual choice for decoder-only models.
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def check_target_modules(model: PreTrainedModel, targets: tuple[str, ...]) -> None:
    """Fail naming ``sft.target_modules`` when a configured module name matches no layer."""
    names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    missing = [t for t in targets if t not in names and t != "all-linear"]
    if missing:
        linear = sorted(
            {
                n.rsplit(".", 1)[-1]
                for n, m in model.named_modules()
                if type(m).__name__.startswith("Linear")
            }
        )
        raise ConfigError(
            f"sft.target_modules: {missing} match no module of {type(model).__name__}; "
            f"its linear layers are {linear}"
        )


def build_trainer(
    model: PreTrainedModel,
    tokenizer: Any,
    train_examples: list[dict[str, str]],
    val_examples: list[dict[str, str]],
    sft: SFTConfig,
    plan: SFTPlan,
    *,
    output_dir: Path,
    cuda: bool,
    seed: int,
    metrics: MetricsLog | None = None,
):
    """The configured ``trl.SFTTrainer``: a fresh LoRA (or the warm-start adapter) on ``model``.

    Its ``train_dataset`` is already tokenized, with ``labels`` -100 on the prompt (what a test
    inspects to see that the loss is on the completion only).
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
        save_strategy="steps",
        save_steps=eval_steps,  # a checkpoint at every evaluation, so the best one exists
        save_total_limit=2,  # the best and the latest
        load_best_model_at_end=True,
        metric_for_best_model="eval_loss",
        greater_is_better=False,
        logging_steps=max(1, min(25, plan.max_steps // 20)),
        # Checkpointing trades compute for memory: needed for 7B on one GPU, only a slowdown on CPU.
        activation_checkpointing=cuda,  # (transformers 5 name of gradient_checkpointing)
        use_cpu=not cuda,
        bf16=cuda and torch.cuda.is_bf16_supported(),
        report_to="none",
        disable_tqdm=not sys.stderr.isatty(),
        seed=seed,
        data_seed=seed,
    )
    trainer = trl.SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(train_examples),
        eval_dataset=Dataset.from_list(val_examples),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[_metrics_callback(metrics)] if metrics is not None else None,
    )
    # Without a progress bar the trainer print()s every log dict to stdout; the JSONL callback
    # already logs them through `logging` (to the rule's log file).
    trainer.remove_callback(PrinterCallback)
    return trainer


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
                        "seconds": round(time.monotonic() - self.start, 3),
                        **logs,
                    }
                )
                log.info("step %d: %s", state.global_step, _format_logs(logs))

    return JsonlMetrics()


def _format_logs(logs: Mapping[str, Any]) -> str:
    return ", ".join(
        f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in logs.items()
    )


def _summary(trainer: Any, started: float) -> dict[str, Any]:
    state = trainer.state
    train_loss = [[h["step"], h["loss"]] for h in state.log_history if "loss" in h]
    eval_loss = [[h["step"], h["eval_loss"]] for h in state.log_history if "eval_loss" in h]
    best_step = None
    if state.best_model_checkpoint:
        best_step = int(Path(state.best_model_checkpoint).name.rsplit("-", 1)[-1])
    model = trainer.model
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return {
        "steps": state.global_step,
        "train_loss": train_loss,
        "eval_loss": eval_loss,
        "best_step": best_step,
        "best_eval_loss": state.best_metric,
        "trainable_parameters": trainable,
        "total_parameters": total,
        "wall_seconds": round(time.time() - started, 2),
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
