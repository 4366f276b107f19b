"""``models/iter_{i}/adapter/``: supervised fine-tuning of the base policy with LoRA / QLoRA (SPEC §4.7).

trl's ``SFTTrainer`` on a prompt/completion dataset (loss on the completion only — the prompt's labels
are -100; ``reference/training-stack.md`` §2), a peft LoRA adapter on ``sft.target_modules``, either on
the full-precision base (``sft.quantization: none``) or on a 4-bit NF4 base (``nf4``: QLoRA with
bitsandbytes).  Cosine schedule with linear warm-up.

Iteration 0 trains a fresh adapter on the tactic pairs.  Iteration ``i > 0`` (:func:`plan_sft`,
:func:`build_mix`) warm-starts from adapter ``i-1`` (checked equal to it before the first step),
with learning rate × ``lr_decay``^i and ``later_max_steps``, on a seeded subsample of the base pairs
(``base_pair_subsample``) plus the positive steps of the earlier searches' verified proofs
(:mod:`.positives`) × ``positive_upsample``, all decontaminated against the evaluation benchmark
(:mod:`burnqed.data.decontam`).  Two theorem-split shares of those steps are held out: a second
validation set (``trajectory_val_fraction``) and a test set (``trajectory_test_fraction``).

Both validation losses (base pairs, trajectory steps) are measured before training (step 0) and
every ``eval_steps``; the adapter of every evaluated step is kept and the one ``sft.select_by``
chooses (:func:`select_step`) is saved.  The chosen step's validation loss is optimistic — it is
the lowest of several looks at the same steps — so the held-out proof-step loss to report is the
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
  trainable parameters, data hashes, determinism settings, versions, git commit;
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed.config import ConfigError, SFTConfig
from burnqed.data.benchmarks import sha256_file
from burnqed.data.decontam import BenchmarkIndex, check_pairs
from burnqed.data.prompt import format_example
from burnqed.determinism import deterministic_training, write_run_info
from burnqed.policy.model_files import check_model_dir
from burnqed.progress import Progress
from burnqed.train.artifacts import (
    MetricsLog,
    provenance,
    quiet_progress_bars,
    staged_dir,
    write_json,
)
from burnqed.train.examples import TrainingDataError, read_examples
from burnqed.train.positives import read_positive_steps, split_steps_by_theorem

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
    trajectories: Mapping[str, Path] | Sequence[Path] = (),
    eval_benchmarks: Sequence[Path] = (),
    decontamination: str = "refuse",
    seed: int,
) -> None:
    """Fine-tune ``base`` on ``train`` (tactic pairs) plus, at iterations > 0, the positive steps of
    ``trajectories``; keep the checkpoint ``sft.select_by`` chooses, in ``out``.

    ``eval_benchmarks``: benchmark files whose statements must not be in the trajectory steps
    (``decontamination``: ``refuse`` or ``drop``; the tactic pairs were checked by the data stage).
    """
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
    base_examples, val_examples, mix = read_training_data(
        train, val, plan, trajectories, sft, iteration=iteration, seed=seed,
        eval_benchmarks=eval_benchmarks, decontamination=decontamination,
    )  # fmt: skip
    cuda = torch.cuda.is_available()
    started = time.time()
    quiet_progress_bars(datasets=True)

    model = load_base_model(base, quantization=sft.quantization, cuda=cuda)
    tokenizer = _load_tokenizer(base)
    check_target_modules(model, sft.target_modules)
    boundary = check_prompt_boundaries(
        tokenizer,
        [*mix.train, *val_examples, *mix.trajectory_val, *mix.trajectory_test],
        add_eos=True,
    )
    # Every set is evaluated at every evaluation; CheckpointSelection chooses by "pairs" and
    # "trajectory" only, "test" is recorded for the report.
    eval_sets = {"pairs": val_examples}
    if mix.trajectory_val:
        eval_sets["trajectory"] = mix.trajectory_val
    if mix.trajectory_test:
        eval_sets["test"] = mix.trajectory_test
    with (
        deterministic_training(seed=seed, device="cuda" if cuda else "cpu") as determinism,
        staged_dir(out) as staging,
        MetricsLog(staging / METRICS_FILE) as metrics,
    ):
        selection = CheckpointSelection(staging / "checkpoints")
        trainer = build_trainer(
            model, tokenizer, mix.train, eval_sets, sft, plan,
            output_dir=staging / "checkpoints", cuda=cuda, seed=seed, metrics=metrics,
            selection=selection,
        )  # fmt: skip
        warm_start = None
        if plan.warm_start is not None:
            warm_start = {
                "adapter": str(plan.warm_start),
                "max_abs_diff_before_step_1": adapter_difference(trainer.model, plan.warm_start),
            }
            log.info("warm start from %s: %s", plan.warm_start, warm_start)
        trainer.evaluate()  # step 0: the losses before training (the previous iteration's model)
        trainer.train()
        if selection.last_step() != trainer.state.global_step:
            trainer.evaluate()  # the last step is always a candidate
        chosen = select_step(selection.history, sft.select_by, sft.plateau_tolerance)
        trainer.save_model(str(staging))  # the tokenizer, and the last step's adapter …
        selection.publish(chosen.step, staging)  # … replaced by the chosen step's
        sort_target_modules(staging / "adapter_config.json")
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
# The data mix of iterations > 0


@dataclass(frozen=True)
class SFTMix:
    """The training examples of one SFT and the trajectory validation set."""

    train: list[dict[str, str]]  # base pairs + positive steps × upsample
    trajectory_val: list[
        dict[str, str]
    ]  # validation theorems' positive steps (empty at iteration 0)
    base_pairs: int
    positive_steps: int  # unique positive steps of the training theorems (before upsampling)
    positive_examples: int  # positive_steps × positive_upsample
    trajectory_val_theorems: int
    positives: dict[str, Any] | None  # PositiveSteps.to_json(): per-source counts, skipped parts
    decontamination: dict[str, Any] | None  # DecontaminationCheck.to_json() of the steps
    trajectory_test: list[dict[str, str]] = field(default_factory=list)  # test theorems'
    trajectory_test_theorems: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "positive_steps": self.positive_steps,
            "positive_examples": self.positive_examples,
            "trajectory_val_steps": len(self.trajectory_val),
            "trajectory_val_theorems": self.trajectory_val_theorems,
            "trajectory_test_steps": len(self.trajectory_test),
            "trajectory_test_theorems": self.trajectory_test_theorems,
            "trajectories": self.positives,
            "decontamination": self.decontamination,
        }


def build_mix(
    base_examples: list[dict[str, str]],
    trajectories: Mapping[str, Path] | Sequence[Path],
    sft: SFTConfig,
    *,
    iteration: int,
    seed: int,
    eval_benchmarks: Sequence[Path] = (),
    decontamination: str = "refuse",
) -> SFTMix:
    """Base examples + the positive steps of ``trajectories`` (iterations > 0) × ``positive_upsample``,
    with theorem-split trajectory validation and test sets; statements of ``eval_benchmarks`` refused
    or dropped from the steps (the base pairs were checked by the data stage)."""
    if iteration == 0 or not trajectories:
        if iteration > 0:
            log.warning(
                "iteration %d: no trajectories given; training on base pairs only", iteration
            )
        return SFTMix(list(base_examples), [], len(base_examples), 0, 0, 0, None, None)
    index = BenchmarkIndex.load(eval_benchmarks) if eval_benchmarks else None
    positives = read_positive_steps(trajectories)
    table, check = positives.table, None
    if index is not None:
        table, c = check_pairs(
            table, index, mode=decontamination, what="trajectory steps",
            where=", ".join(str(d) for d in positives.counts),
            # the searches' theorem keys are pool keys: one theorem across the searches
            by_source=False,
        )  # fmt: skip
        check = c.to_json()
    else:
        log.warning("no evaluation benchmark given: trajectory steps are not decontaminated")
    train_steps, val_steps, test_steps = split_steps_by_theorem(
        table,
        val_fraction=sft.trajectory_val_fraction,
        test_fraction=sft.trajectory_test_fraction,
        seed=seed,
    )

    def examples(t: Any) -> list[dict[str, str]]:
        return [
            format_example(s, a)
            for s, a in zip(
                t.column("state_before").to_pylist(), t.column("tactic").to_pylist(), strict=True
            )
        ]

    train_pos = examples(train_steps)
    mixed = list(base_examples) + train_pos * sft.positive_upsample
    val_theorems = len(set(val_steps.column("theorem").to_pylist()))
    test_theorems = len(set(test_steps.column("theorem").to_pylist()))
    log.info(
        "SFT mix: %d base pairs + %d positive steps × %d = %d examples; trajectory val: %d steps "
        "of %d theorems; trajectory test: %d steps of %d theorems",
        len(base_examples), len(train_pos), sft.positive_upsample, len(mixed), val_steps.num_rows,
        val_theorems, test_steps.num_rows, test_theorems,
    )  # fmt: skip
    return SFTMix(
        train=mixed,
        trajectory_val=examples(val_steps),
        base_pairs=len(base_examples),
        positive_steps=len(train_pos),
        positive_examples=len(train_pos) * sft.positive_upsample,
        trajectory_val_theorems=val_theorems,
        positives=positives.to_json(),
        decontamination=check,
        trajectory_test=examples(test_steps),
        trajectory_test_theorems=test_theorems,
    )


# --------------------------------------------------------------------------------------------
# Checkpoint selection


@dataclass(frozen=True)
class Chosen:
    step: int
    criterion: str  # the criterion applied (select_by, or pairs_loss without trajectory data)
    reason: str


class CheckpointSelection:
    """The validation losses of every evaluation, and the adapter as it was at each one.

    The adapter alone is saved (``<dir>/step-N``; megabytes, not the optimizer state), so any
    evaluated step can be the one published.  Step 0 is the evaluation before training.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        # step → {"pairs": loss, "trajectory": …, "test": …}; select_step never reads "test"
        self.history: dict[int, dict[str, float]] = {}

    def record(self, step: int, metrics: Mapping[str, float], model: Any) -> None:
        entry = self.history.setdefault(step, {})
        for name in ("pairs", "trajectory", "test"):
            if f"eval_{name}_loss" in metrics:
                entry[name] = float(metrics[f"eval_{name}_loss"])
        path = self.directory / f"step-{step}"
        if step > 0 and not path.exists():
            model.save_pretrained(str(path))

    def last_step(self) -> int:
        return max(self.history, default=0)

    def publish(self, step: int, dst: Path) -> None:
        """Copy step ``step``'s adapter files into ``dst`` (over the last step's)."""
        src = self.directory / f"step-{step}"
        for f in src.iterdir():
            if f.is_file():
                shutil.copy2(f, Path(dst) / f.name)


def select_step(
    history: Mapping[int, Mapping[str, float]], criterion: str, tolerance: float
) -> Chosen:
    """The evaluated step (> 0) to keep, by ``criterion`` (see ``sft.select_by`` in params.yaml).

    ``plateau``: the lowest trajectory loss among the steps whose base-pair loss is within
    ``tolerance`` (relative) of the lowest base-pair loss up to and including that step (step 0
    included) — or, when no step holds it there, the step with the lowest base-pair loss;
    ``pairs_loss`` / ``trajectory_loss``: the lowest of that loss.  Ties: the earlier step.
    Without a trajectory loss every criterion is ``pairs_loss``.  The test loss (``"test"``) is
    never read here.
    """
    steps = sorted(s for s in history if s > 0)
    if not steps:
        raise ValueError("no evaluation after training: nothing to select")
    has_traj = all("trajectory" in history[s] for s in steps)
    if criterion not in ("plateau", "pairs_loss", "trajectory_loss"):
        raise ConfigError(f"sft.select_by: unknown criterion {criterion!r}")
    if not has_traj or criterion == "pairs_loss":
        step = min(steps, key=lambda s: (history[s]["pairs"], s))
        return Chosen(step, "pairs_loss", f"lowest base-pair val loss {history[step]['pairs']:.4f}")
    if criterion == "trajectory_loss":
        step = min(steps, key=lambda s: (history[s]["trajectory"], s))
        return Chosen(
            step, "trajectory_loss", f"lowest trajectory val loss {history[step]['trajectory']:.4f}"
        )
    holding = []
    best_pairs = history[0]["pairs"] if 0 in history else float("inf")
    for s in steps:
        best_pairs = min(best_pairs, history[s]["pairs"])
        if history[s]["pairs"] <= best_pairs * (1 + tolerance):
            holding.append(s)
    if not holding:
        # Every trained step moved the base-pair loss more than `tolerance` above the warm start's:
        # no plateau to choose from, so keep the step that hurt the base pairs least.
        step = min(steps, key=lambda s: (history[s]["pairs"], s))
        log.warning(
            "sft.select_by plateau: no evaluated step kept the base-pair val loss within %.1f%% "
            "of its lowest (%.4f at the warm start); keeping step %d, the least above it (%.4f)",
            100 * tolerance, best_pairs, step, history[step]["pairs"],
        )  # fmt: skip
        return Chosen(
            step,
            "plateau (none held: lowest base-pair loss)",
            f"no step held the base-pair val loss within {tolerance:.1%} of its lowest "
            f"({best_pairs:.4f}); lowest after training {history[step]['pairs']:.4f}",
        )
    step = min(holding, key=lambda s: (history[s]["trajectory"], s))
    return Chosen(
        step,
        "plateau",
        f"lowest trajectory val loss {history[step]['trajectory']:.4f} among steps {holding} "
        f"whose base-pair val loss held within {tolerance:.1%} of its lowest so far",
    )


def sort_target_modules(adapter_config: Path) -> None:
    """Rewrite ``adapter_config.json`` with its module lists sorted, formatted as peft does.

    peft's ``LoraConfig`` turns ``target_modules`` and ``exclude_modules`` into Python sets and
    writes them in the set's iteration order, which string hashing randomises per process: two
    identical runs wrote different bytes.
    """
    path = Path(adapter_config)
    config = json.loads(path.read_text(encoding="utf-8"))
    for key in ("target_modules", "exclude_modules"):
        if isinstance(config.get(key), list):
            config[key] = sorted(config[key])
    path.write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")


def read_training_data(
    train: Path,
    val: Path,
    plan: SFTPlan,
    trajectories: Mapping[str, Path] | Sequence[Path],
    sft: SFTConfig,
    *,
    iteration: int,
    seed: int,
    eval_benchmarks: Sequence[Path],
    decontamination: str,
) -> tuple[list, list, SFTMix]:
    """The base pairs, the validation pairs and the training mix (a seeded subsample of the base pairs plus the
    trajectories' proof steps, :func:`build_mix`) — what SFT and joint training both read."""
    base_examples = read_examples(
        train, limit=plan.base_pair_limit, seed=seed, what="SFT train pairs"
    )
    val_examples = read_examples(val, what="SFT validation pairs")
    mix = build_mix(
        base_examples, trajectories, sft, iteration=iteration, seed=seed,
        eval_benchmarks=eval_benchmarks, decontamination=decontamination,
    )  # fmt: skip
    return base_examples, val_examples, mix


def adapter_difference(model: Any, adapter: Path) -> float:
    """Largest absolute difference between ``model``'s LoRA weights and the saved ``adapter``'s."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file

    saved = load_file(str(Path(adapter) / "adapter_model.safetensors"))
    current = get_peft_model_state_dict(model)
    missing = sorted(set(saved) ^ set(current))
    if missing:
        raise TrainingDataError(
            f"{adapter}: its weights do not match the model's adapter ({missing[:3]} …)"
        )
    return max(
        float((current[k].detach().float().cpu() - saved[k].float()).abs().max()) for k in saved
    )


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
    if not cuda:
        keep_cpu_4bit_weights_trainable(model)
    # Casts the non-quantized layers (norms, embeddings) to float32 for stable training and,
    # with checkpointing, makes the inputs require grad so the adapter still gets gradients.
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=cuda)


def keep_cpu_4bit_weights_trainable(model: PreTrainedModel) -> int:
    """Stop bitsandbytes repacking 4-bit weights for CPU inference; return the layers changed.

    bitsandbytes 0.50 on a CPU with AVX512-BF16: the first forward pass in eval mode without
    gradients (an evaluation) repacks each ``Linear4bit`` weight into a CPU inference layout and
    never unpacks it, after which the backward pass through that layer gives the layers below it
    zero gradient (measured: after one evaluation, every ``gate_proj``/``up_proj`` LoRA B stayed
    exactly 0 through training).  Evaluating before or during QLoRA training needs the packing off.
    """
    n = 0
    for module in model.modules():
        if hasattr(module, "support_avx512bf16_for_cpu"):
            module.support_avx512bf16_for_cpu = False
            n += 1
    return n


def _load_tokenizer(base: Path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    if tokenizer.pad_token is None:
        # Padding is masked out of the loss; EOS as pad is the usual choice for decoder-only models.
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def check_prompt_boundaries(
    tokenizer: Any, examples: Sequence[Mapping[str, str]], *, add_eos: bool = True
) -> int:
    """Count (and report) the examples whose prompt does not end at a token boundary.

    trl tokenizes the prompt and prompt + completion separately and masks as many leading labels
    as the prompt has tokens; when the prompt's last token merges with the completion's first, the
    two tokenizations disagree and the mask is off (trl only warns, once).  The one prompt format
    ends with a newline to avoid this (:mod:`burnqed.data.prompt`); this check says when a
    tokenizer or a hand-made example breaks it: a warning naming the first such example.
    """
    unique = list({(e["prompt"], e["completion"]): e for e in examples}.values())
    if not unique:
        return 0
    eos = tokenizer.eos_token if add_eos and tokenizer.eos_token else ""
    prompts = tokenizer([e["prompt"] for e in unique], add_special_tokens=False)["input_ids"]
    full = tokenizer(
        [e["prompt"] + e["completion"] + eos for e in unique], add_special_tokens=False
    )["input_ids"]
    bad = [e for e, p, f in zip(unique, prompts, full, strict=True) if f[: len(p)] != p]
    if bad:
        log.warning(
            "%d of %d examples: the prompt does not end at a token boundary (its last token "
            "merges with the completion), so the completion-only loss mask is off there; first: "
            "prompt ending %r, completion %r",
            len(bad), len(unique), bad[0]["prompt"][-30:], bad[0]["completion"][:30],
        )  # fmt: skip
    return len(bad)


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
    val_examples: list[dict[str, str]] | Mapping[str, list[dict[str, str]]],
    sft: SFTConfig,
    plan: SFTPlan,
    *,
    output_dir: Path,
    cuda: bool,
    seed: int,
    metrics: MetricsLog | None = None,
    selection: CheckpointSelection | None = None,
):
    """The configured ``trl.SFTTrainer``: a fresh LoRA (or the warm-start adapter) on ``model``.

    ``val_examples``: one validation set, or several by name (``pairs``, ``trajectory``), each
    evaluated every ``eval_steps`` as ``eval_<name>_loss``; a plain list is named ``pairs``.
    ``selection`` records each evaluation and keeps the adapter of each evaluated step.
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
    )
    if not isinstance(val_examples, Mapping):
        val_examples = {"pairs": val_examples}
    callbacks = [_progress_callback()]
    if metrics is not None:
        callbacks.append(_metrics_callback(metrics))
    if selection is not None:
        callbacks.append(_selection_callback(selection))
    trainer = trl.SFTTrainer(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(train_examples),
        eval_dataset={name: Dataset.from_list(ex) for name, ex in val_examples.items()},
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=callbacks or None,
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
