"""What SFT and joint training share: one iteration's plan, its data, its model, its checkpoints.

Both :func:`burnqed.train.sft.train_sft` (trl's trainer) and
:func:`burnqed.train.joint.train_joint` (its own loop) train the adapter of iteration ``i`` the same
way around the step itself, and this module is that part, in the order a run uses it:

- **plan** (:func:`plan_sft`): iteration 0 a fresh adapter at ``sft.learning_rate`` for
  ``max_steps``; later ones warm-start from adapter ``i-1`` at the rate × ``lr_decay``^i for
  ``later_max_steps`` on a subsample of the base pairs; :func:`check_inputs` names a missing base
  model or warm-start adapter before anything loads;
- **data** (:func:`read_training_data`, :func:`build_mix`, :func:`validation_sets`): the base
  pairs plus the earlier searches' verified proof steps × ``positive_upsample``, decontaminated,
  with theorem-split trajectory validation and test sets;
- **model** (:func:`load_training_model`): the base (full precision or 4-bit NF4 for QLoRA; on
  CUDA its residual stream bf16 or float32 as ``sft.gpu_layout`` says), its tokenizer, the LoRA
  target modules checked; :func:`warm_start_record` checks the warm-start adapter loaded as saved;
  :func:`step_record` is what both summaries say of the step's layout, precision and loss kernel;
- **checkpoints** (:class:`CheckpointSelection`, :func:`select_step`, :func:`publish_chosen`): the
  adapter of every evaluated step kept, the one ``sft.select_by`` chooses published with its
  ``adapter_config.json`` in a stable order.

Example::

    from pathlib import Path
    from burnqed.config import SFTConfig
    from burnqed.split import TheoremSplit
    from burnqed.train.loop import load_training_model, plan_sft, read_training_data

    sft = SFTConfig(quantization="none")
    plan = plan_sft(sft, 1, Path("models/iter_0/adapter"))  # rate × lr_decay, later_max_steps
    _, val, mix = read_training_data(
        Path("data/tactic_pairs/train.parquet"), Path("data/tactic_pairs/val.parquet"), plan,
        [Path("results/iter_0/search")], sft, iteration=1, seed=0,
        split=TheoremSplit.of(None, 0), eval_benchmarks=(), decontamination="refuse",
    )
    model, tokenizer = load_training_model(Path("models/base"), sft, cuda=False)
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from burnqed.config import ConfigError, SFTConfig
from burnqed.data.decontam import BenchmarkIndex, check_pairs
from burnqed.data.prompt import format_example
from burnqed.policy.model_files import check_model_dir
from burnqed.split import TheoremSplit
from burnqed.train.examples import TrainingDataError, read_examples
from burnqed.train.positives import read_positive_steps, split_steps_by_theorem

if TYPE_CHECKING:
    from transformers import PreTrainedModel

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# Plan


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


def check_inputs(base: Path, plan: SFTPlan) -> None:
    """Fail naming the input when ``base`` is not a model directory or the warm-start adapter is not
    an adapter directory (before any weights load)."""
    if not (base / "config.json").exists():
        raise TrainingDataError(
            f"{base}: not a model directory (no config.json); build models/base first"
        )
    check_model_dir(base)  # bad config.json, truncated weights, no tokenizer: named here
    if plan.warm_start is not None and not (plan.warm_start / "adapter_config.json").exists():
        raise TrainingDataError(
            f"{plan.warm_start}: not an adapter directory (no adapter_config.json)"
        )


# --------------------------------------------------------------------------------------------
# Data


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
    split: TheoremSplit,
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
    train_steps, val_steps, test_steps = split_steps_by_theorem(table, split)

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


def read_training_data(
    train: Path,
    val: Path,
    plan: SFTPlan,
    trajectories: Mapping[str, Path] | Sequence[Path],
    sft: SFTConfig,
    *,
    iteration: int,
    seed: int,
    split: TheoremSplit,
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
        base_examples, trajectories, sft, iteration=iteration, split=split,
        eval_benchmarks=eval_benchmarks, decontamination=decontamination,
    )  # fmt: skip
    return base_examples, val_examples, mix


def validation_sets(
    val_examples: list[dict[str, str]], mix: SFTMix
) -> dict[str, list[dict[str, str]]]:
    """The sets evaluated at every evaluation, by name: ``pairs`` and ``trajectory`` choose the
    checkpoint (:func:`select_step`); ``test`` (held-out proof steps of other theorems) is measured
    and reported, never used to choose."""
    sets = {"pairs": val_examples}
    if mix.trajectory_val:
        sets["trajectory"] = mix.trajectory_val
    if mix.trajectory_test:
        sets["test"] = mix.trajectory_test
    return sets


# --------------------------------------------------------------------------------------------
# Tokens


class TokenIds:
    """Token ids of texts, each distinct text tokenised once, the new ones of a call in one batch.

    The ids are the tokenizer's own (a batch call encodes every text on its own: no padding, no
    truncation), as one call per text gives them, ``add_special_tokens`` as that call takes it.
    SFT and joint training tokenise the prompt and prompt + completion of thousands of examples
    (iteration 0's SFT: 12,337, ~3 s of encoding on the demo's machine); one cache serves the
    trainer's rows and :func:`~.sft.check_prompt_boundaries`, which tokenised them a second time.
    The lists returned are the cache's own: a caller copies before changing one.

    Example::

        ids = TokenIds(tokenizer)                     # add_special_tokens=True, as tokenizer(text)
        prompts = ids([e["prompt"] for e in examples])  # one batched call for the distinct prompts
    """

    def __init__(self, tokenizer: Any, *, add_special_tokens: bool = True) -> None:
        self.tokenizer = tokenizer
        self.add_special_tokens = add_special_tokens
        self.ids: dict[str, list[int]] = {}

    def __call__(self, texts: Sequence[str]) -> list[list[int]]:
        new = [t for t in dict.fromkeys(texts) if t not in self.ids]
        if new:
            encoded = self.tokenizer(new, add_special_tokens=self.add_special_tokens)["input_ids"]
            self.ids.update(zip(new, encoded, strict=True))
        return [self.ids[t] for t in texts]

    def with_special_tokens(self, add_special_tokens: bool) -> TokenIds:
        """The ids tokenised with ``add_special_tokens``: this cache when it already is, or when the
        tokenizer writes no special token into one text's ids (so the two are the same ids), else
        a new one."""
        if add_special_tokens == self.add_special_tokens or adds_no_special_tokens(self.tokenizer):
            return self
        return TokenIds(self.tokenizer, add_special_tokens=add_special_tokens)


def adds_no_special_tokens(tokenizer: Any) -> bool:
    """Whether ``tokenizer``'s ids of a single text are the same with and without
    ``add_special_tokens``: a fast tokenizer whose post-processor writes no special token (the
    Rust tokenizer applies ``add_special_tokens`` in its post-processor alone; transformers asks
    the same question of ``num_special_tokens_to_add``).  The demo's byte-level BPE adds none;
    Llama's adds BOS."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:  # a slow tokenizer: no such guarantee
        return False
    post = backend.post_processor
    return post is None or post.num_special_tokens_to_add(False) == 0


# --------------------------------------------------------------------------------------------
# Model


def load_training_model(base: Path, sft: SFTConfig, *, cuda: bool) -> tuple[Any, Any]:
    """The base model as ``sft.quantization`` loads it for training — on CUDA with the residual
    stream ``sft.gpu_layout`` asks for (``packed_bf16``: bf16; ``padded_fp32``: float32) — its
    tokenizer (padding with EOS when it has no pad token), ``sft.target_modules`` checked against
    its layers."""
    model = load_base_model(base, quantization=sft.quantization, cuda=cuda,
                            bf16_stream=sft.gpu_layout == "packed_bf16")  # fmt: skip
    tokenizer = load_tokenizer(base)
    check_target_modules(model, sft.target_modules)
    return model, tokenizer


def warm_start_record(model: Any, plan: SFTPlan) -> dict[str, Any] | None:
    """The warm start as the summary records it: the adapter ``model`` continues and how far its
    loaded LoRA weights are from the saved ones (0.0: loaded as saved); None at iteration 0."""
    if plan.warm_start is None:
        return None
    record = {
        "adapter": str(plan.warm_start),
        "max_abs_diff_before_step_1": adapter_difference(model, plan.warm_start),
    }
    log.info("warm start from %s: %s", plan.warm_start, record)
    return record


def load_base_model(
    base: Path, *, quantization: str, cuda: bool, bf16_stream: bool = True
) -> PreTrainedModel:
    """The base for training: full precision (``none``) or 4-bit NF4 for QLoRA (``nf4``).

    On CPU everything computes in float32 (bf16 training is not supported there by the trainer);
    on a GPU the checkpoint's own dtype (bf16 for the real models) and bf16 compute for NF4, the
    non-quantized weights left in bf16 (:func:`prepare_bf16_training`) — or, without
    ``bf16_stream`` (``sft.gpu_layout: padded_fp32``, the layout before issue 47), cast to float32
    by peft's ``prepare_model_for_kbit_training``, so the residual stream is float32.
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
    if cuda and bf16_stream:
        return prepare_bf16_training(model)
    if cuda:  # the float32 stream: the non-quantized layers cast up, checkpointing (reentrant)
        return prepare_model_for_kbit_training(model, use_gradient_checkpointing=True)
    keep_cpu_4bit_weights_trainable(model)
    # Freezes the base (its non-quantized layers are float32 here already, as the CPU computes).
    return prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)


def prepare_bf16_training(model: PreTrainedModel) -> PreTrainedModel:
    """The 4-bit base on a GPU, ready for QLoRA with a **bf16 residual stream**: every weight
    frozen, activation checkpointing at every decoder layer (non-reentrant: the adapter gets its
    gradients without the inputs requiring grad, and a packed batch's block mask passes through).

    peft's ``prepare_model_for_kbit_training`` would also cast the non-quantized weights
    (embeddings, norms, ``lm_head``) to float32; that makes the embeddings' output, and so the
    residual stream, every checkpointed layer input, attention and the LoRA matmuls, float32
    (``docs/cloud.md`` §9).  They stay bf16 here — frozen, and saved in bf16, so float32 copies add
    no information.  What stays float32 (:func:`training_precision`): each RMSNorm's normalisation
    (transformers computes it in float32 and rounds its output to bf16), the LoRA weights with
    their gradients and AdamW moments (the trained values), the loss's logits and softmax
    (:mod:`burnqed.train.fused_loss`), the pooled embeddings and the energy head with its loss.
    """
    for param in model.parameters():
        param.requires_grad_(False)
    enable = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5.23
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def keep_lora_inputs_bf16(model: Any) -> int:
    """Stop peft casting each LoRA layer's input to its float32 weights' dtype (return the layers
    changed): under :func:`training_precision`'s autocast the LoRA products run in bf16 anyway, so
    the cast only adds a float32 copy of every LoRA input (and its dropout) and a bf16 one back."""
    n = 0
    for module in model.modules():
        if hasattr(module, "cast_input_dtype_enabled"):
            module.cast_input_dtype_enabled = False
            n += 1
    return n


def residual_dtype(model: Any) -> Any:
    """The dtype of ``model``'s residual stream: its input embeddings' weights' (bf16 after
    :func:`prepare_bf16_training`, float32 after ``prepare_model_for_kbit_training`` or on CPU)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_input_embeddings().weight.dtype


def training_precision(model: Any, device: Any) -> Any:
    """The context a training forward of ``model`` runs in: bf16 autocast on CUDA when its residual
    stream is bf16 (``sft.gpu_layout: packed_bf16``) — the 4-bit layers' matmuls, attention and
    the LoRA matmuls (their float32 weights cast per product) on tensor cores in bf16 — and nothing
    with a float32 stream (``padded_fp32``: the layout before issue 47) or on the CPU (float32
    throughout, the demo's bytes).  Losses and the energy head run outside it, in float32."""
    import contextlib

    import torch

    if torch.device(device).type == "cuda" and residual_dtype(model) == torch.bfloat16:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def step_record(
    model: Any, *, setting: str, device: str, packed: bool, autocast: str | None,
    loss_kernel: Mapping[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """What a training summary says of its step: ``sft.gpu_layout`` (``setting``), the device,
    the layout the step ran (``packed``: one row, flex attention; else right-padded, SDPA), the
    residual stream's and the trainable weights' dtypes as ``model`` holds them (measured, not
    assumed: trl casts a 4-bit model's adapter to bf16), the autocast and the SFT loss's kernel."""
    trainable = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()
                        if p.requires_grad})  # fmt: skip
    return {
        "gpu_layout": setting,
        "device": device,
        "layout": "packed" if packed else "padded",
        "attention": "flex" if packed else "sdpa",
        "residual_stream": str(residual_dtype(model)).removeprefix("torch."),
        "trainable_dtypes": trainable,
        "autocast": autocast,
        "loss_kernel": dict(loss_kernel),
    }


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


def load_tokenizer(base: Path) -> Any:
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
# Checkpoints


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


def publish_chosen(selection: CheckpointSelection, chosen: Chosen, staging: Path) -> None:
    """The chosen step's adapter files over the last step's in ``staging``, its
    ``adapter_config.json`` in a stable order."""
    selection.publish(chosen.step, staging)
    sort_target_modules(staging / "adapter_config.json")  # peft writes them in set order
