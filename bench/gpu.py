"""GPU figures for the 7B plan: a joint and an SFT step, state embedding, the EBM, generation.

Everything burnqed says about a real run's GPU (``docs/cloud.md`` §8–§9) was planned on paper
(:mod:`burnqed.train.memory`); this bench measures it.  It builds **DeepSeek-Prover-V2-7B's
architecture** (:data:`burnqed.train.memory.DEEPSEEK_PROVER_V2_7B`, unverified against the model's
``config.json``) with random bf16 weights created on the GPU and a synthetic word-level tokenizer of
its vocabulary size (nothing is downloaded), saves that checkpoint, and runs burnqed's own code on it
at the settings of ``params.yaml`` + ``config/a100-7b.yaml`` (``--configfile``), in this order, each
section under its own time cap (``--cap-<section>``) and printed as soon as it ends:

1. **checkpoint**: the random checkpoint saved (safetensors, bf16) and loaded back as training loads
   it (:func:`burnqed.train.loop.load_base_model`: NF4 with double quantisation, bf16 compute,
   the other weights bf16 and gradient checkpointing on CUDA; the branch point upcast them to
   float32 with ``prepare_model_for_kbit_training``);
2. **joint**: optimizer steps of joint training as :func:`burnqed.train.joint.train_joint` takes
   them — LoRA (``sft.lora_r`` on ``sft.target_modules``) and the energy head, one
   :func:`~burnqed.train.joint.joint_forward` per micro-batch of ``sft.batch_size`` SFT sequences
   of ``sft.max_length`` tokens and ``sft.joint_groups_per_step`` groups of ``1 + ebm.negatives``
   states and a goal of ``sft.joint_state_max_length`` tokens (every sequence full length: the
   worst case for the step, packing's best: no padding tail), packed padding-free into one row as
   training on CUDA packs it (``sft.gpu_layout: packed_bf16``,
   :func:`~burnqed.train.joint.collate_packed`: flex attention on CUDA, the fused SFT loss, a bf16
   residual stream; ``layout=packed``) — or, run with the branch point of issue 47 on the path
   (``bench/gpu-device.sh compare``), right-padded into one batch by
   :func:`~burnqed.train.joint.collate` (``layout=padded``) — ``sft.grad_accum``
   micro-batches per step (:func:`~burnqed.train.joint.accumulate`), AdamW over three groups
   (:func:`~burnqed.train.joint.optimizer`: the LoRA, the head's layers, its scale) with its
   schedule; one warm-up step (it allocates the optimizer's moments and compiles flex attention),
   then ``--steps`` timed steps (3), their median; ``--profile-joint FILE``: then one more
   optimizer step over one micro-batch of the ``--profile-section`` (``joint``) under
   ``torch.profiler``, its top-20 kernels by device time to FILE
   (``<section>_profiled_micro_step_s``);
3. **joint_real**: the same step at **real lengths**: ``sft.grad_accum`` micro-batches of the same
   shape whose sequences' lengths are drawn (seeded) from ``bench/lengths.json`` — real tactic
   pairs and miniF2F goals in tokens at an assumed 3.0 characters a token (:mod:`bench.lengths`
   says what was read and why) — each packed into a row of its own tokens rounded up to a bucket
   (:func:`burnqed.train.packing.bucket_width`; with a ``burnqed`` that packs into one fixed
   width, that width); the same micro-batches every step (the warm-up step compiles each row
   width once, so no timed step compiles);
4. **sft**: the joint loop without the groups and the head — SFT's loss through the joint loop's
   forward, not through trl's ``SFTTrainer``, which the SFT stage runs (trl is not in the GPU
   image: that stage's own step is not measured here);
5. **padded**: the base loaded again as ``sft.gpu_layout: padded_fp32`` loads it (the layout before
   issue 47: peft's ``prepare_model_for_kbit_training``, a float32 residual stream, no autocast)
   and joint_real's micro-batches right-padded (:func:`~burnqed.train.joint.collate`, SDPA, whole
   float32 logits): the step packing is measured against at the same lengths
   (``joint_real_speedup``);
6. **embed**: the value model's state embedding (``policy.pooling``) of the bf16 policy loaded by the
   in-process backend (:class:`~burnqed.policy.transformers_backend.TransformersGenerator`): at batch
   1 its own ``embed`` (one state per forward, what burnqed scores with today), at 8, 32 and 128 one
   right-padded forward per batch, pooled at each state's last token;
7. **ebm**: the energy head's training on the GPU (:func:`burnqed.ebm.train.train_head` on
   synthetic embeddings of the policy's width, the ``ebm`` section's sizes) and search's scoring
   (:class:`~burnqed.ebm.scorer.EBMValueModel`, embedding included, ``search.batch_encode_size``
   states a call);
8. **generation**: ``search.num_candidates`` candidates of ``policy.max_new_tokens`` tokens for
   each of ``--gen-states`` states through the in-process backend (per-candidate seeds,
   ``search.temperature``, ``policy.top_p``).  Random weights never emit the stop fence, so every
   candidate runs to ``max_new_tokens``: the worst case, and the in-process backend's figure, not
   SGLang's.

``--sections`` runs some of them (``checkpoint,joint,joint_real,padded``: issue 62's, what
``bench/gpu-device.sh lengths`` runs; ``checkpoint,joint,sft``: issue 47's); ``--checkpoint DIR``
keeps the random checkpoint in DIR and reuses it when a later run finds it there.

MFU: model FLOPs per step over the step time and ``--peak-tflops`` (989: the H100/H200 SXM
datasheet's dense bf16 rate; 790 measured for a bf16 product on this workplace's H200s): per micro-
batch ``4·P`` a real token (``P`` the decoder's linear weights, 6.07 B: forward ``2·P``, the
activations' gradient ``2·P``; the frozen weights get none), ``12·h`` per (query, key) pair of each
sequence's causal triangle per layer, and ``4·h·V`` per scored SFT token through ``lm_head``
(:func:`model_flops`); HFU adds what checkpointing recomputes (``2·P`` a token, ``4·h`` a pair).
Padding is not model work: the padded layout's MFU counts the real tokens too (and so does a
packed row's padding tail).

Before the sections: the device, its driver and CUDA, the versions in use, and which of
``constraints.txt``'s pins did not hold (``pins_not_held``).  A section that runs past its cap or out
of memory prints ``<section>_status=timeout|oom`` and the next one runs.  Peak memory is CUDA's
``max_memory_allocated`` / ``max_memory_reserved`` since the section began (the resident weights
included, as the plan's total includes them); the joint section prints the plan's figure for the
same shape beside it (:func:`burnqed.train.memory.joint_step_plan`).  ``--smoke`` runs every section
on the CPU at a tiny size (the bench test step; peaks are then the process's peak resident memory,
``memory_source=cpu_rss``); the full size without CUDA exits non-zero with one line.

Prints (every line ``name=value``: device, versions and each section's parameters, then its figures):

- ``checkpoint_save_s``: seconds to save the random bf16 checkpoint
- ``load_nf4_s``: seconds to load it quantised to NF4 as training does
- ``joint_peak_allocated_gib``: peak allocated memory of the joint steps (GiB)
- ``joint_peak_reserved_gib``: peak reserved memory of the joint steps (GiB)
- ``joint_plan_gib``: the memory plan's figure for the same shape (GiB)
- ``joint_step_s``: seconds per joint optimizer step
- ``joint_tokens_per_s``: real (non-padding) tokens per second of joint training
- ``joint_model_tflop``: model FLOPs of one joint step (TFLOP; :func:`model_flops`)
- ``joint_mfu``: the joint step's model FLOPs per second over ``--peak-tflops``
- ``joint_hfu``: the same with the recomputed forward counted
- ``joint_real_tokens_per_step``: real tokens of one real-length joint step (4 micro-batches)
- ``joint_real_positions_per_step``: positions of its packed rows (tokens rounded up to buckets)
- ``joint_real_peak_reserved_gib``: peak reserved memory of the real-length joint steps (GiB)
- ``joint_real_step_s``: seconds per real-length joint optimizer step (median)
- ``joint_real_tokens_per_s``: real tokens per second at real lengths, packed
- ``joint_real_mfu``: the real-length step's model FLOPs per second over ``--peak-tflops``
- ``sft_peak_allocated_gib``: peak allocated memory of the SFT-only steps (GiB)
- ``sft_peak_reserved_gib``: peak reserved memory of the SFT-only steps (GiB)
- ``sft_step_s``: seconds per SFT-only optimizer step
- ``sft_tokens_per_s``: tokens per second of SFT-only training
- ``sft_mfu``: the SFT-only step's model FLOPs per second over ``--peak-tflops``
- ``load_padded_s``: seconds to load the base as ``padded_fp32`` does (float32 residual stream)
- ``joint_real_padded_positions_per_step``: positions of the same micro-batches right-padded
- ``joint_real_padded_peak_reserved_gib``: peak reserved memory of the padded float32 steps (GiB)
- ``joint_real_padded_step_s``: seconds per padded float32 joint step at the same lengths (median)
- ``joint_real_padded_tokens_per_s``: real tokens per second of the padded float32 step
- ``joint_real_speedup``: packed bf16 tokens/s over padded float32 tokens/s at real lengths
- ``load_bf16_s``: seconds for the in-process backend to load the bf16 policy
- ``embed_batch1_states_per_s``: states per second embedded one per forward
- ``embed_batch8_states_per_s``: states per second at 8 per forward
- ``embed_batch32_states_per_s``: states per second at 32 per forward
- ``embed_batch128_states_per_s``: states per second at 128 per forward
- ``ebm_train_groups_per_s``: InfoNCE groups per second of head training
- ``ebm_score_states_per_s``: states per second through the value model, embedding included
- ``gen_candidates_per_s``: candidates per second generated
- ``gen_tokens_per_s``: generated tokens per second

Example::

    python bench/gpu.py --configfile config/a100-7b.yaml   # on a CUDA machine: the 7B figures
    python bench/gpu.py --smoke                            # CPU, tiny sizes: that it runs (CI)
    bench/gpu-device.sh run                                # the prepared run on a lent GPU machine
    bench/gpu-device.sh lengths                            # issue 62's: checks, real lengths
    bench/gpu-device.sh compare before/                    # issue 47's: before, after, a profile
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.metadata
import json
import logging
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from burnqed.config import EBMConfig, SearchConfig, SFTConfig, load_params
from burnqed.train.memory import DEEPSEEK_PROVER_V2_7B, GIB, Architecture, joint_step_plan

REPO = Path(__file__).resolve().parents[1]
EOS, PAD, UNK = "<eos>", "<pad>", "<unk>"
# The packages whose versions decide a figure here, against constraints.txt's pins.
PACKAGES = ("torch", "transformers", "tokenizers", "peft", "accelerate", "bitsandbytes",
            "safetensors", "numpy", "liger-kernel", "triton", "trl")  # fmt: skip
SMOKE_ARCH = Architecture(layers=2, hidden=64, ffn=128, heads=1, kv_heads=1, vocab=512)
# Seconds per section (H200, 2026-11-27: checkpoint 17 s, joint 18 s of warm-up + 11 s a step).
# Issue 62's sections (bench/gpu-device.sh lengths) take 240 s at most; all of them 430.
CAPS = {"checkpoint": 45, "joint": 80, "joint_real": 55, "sft": 40, "padded": 60, "embed": 45,
        "ebm": 15, "generation": 30}  # fmt: skip
LENGTHS = REPO / "bench" / "lengths.json"  # bench/lengths.py --write


class SectionTimeout(Exception):
    """A section ran past its cap (raised by SIGALRM in the main thread)."""


def out(name: str, value: object) -> None:
    """One ``name=value`` line, flushed at once (a section's figures survive a later crash)."""
    if isinstance(value, float):
        value = f"{value:.4g}"
    print(f"{name}={value}", flush=True)


@contextlib.contextmanager
def capped(seconds: int) -> Iterator[None]:
    """Raise :class:`SectionTimeout` in the block after ``seconds`` of wall time."""

    def fire(signum, frame):
        raise SectionTimeout(f"past its cap of {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Bench:
    """What every section needs: the device, the configuration, the synthetic vocabulary."""

    dev: torch.device
    arch: Architecture
    sft: SFTConfig
    ebm: EBMConfig
    search: SearchConfig
    policy: dict
    ckpt: Path
    steps: int
    gen_states: int
    state_tokens: int
    embed_states: int
    rng: np.random.Generator
    peak_tflops: float = 989.0
    profile: Path | None = None
    profile_section: str = "joint"
    lengths: dict | None = None  # bench/lengths.json: the real-length sections' draws
    tokens_per_s: dict[str, float] = field(default_factory=dict)  # by section, for the ratio

    @property
    def cuda(self) -> bool:
        return self.dev.type == "cuda"

    def ids(self, n: int) -> list[int]:
        """``n`` random ids of ordinary words (never EOS, PAD or UNK)."""
        return self.rng.integers(3, self.arch.vocab, n).tolist()

    def text(self, n: int) -> str:
        """A text of exactly ``n`` tokens under the synthetic tokenizer."""
        return " ".join(f"w{i}" for i in self.ids(n))

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()

    def reset_peak(self) -> None:
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def peaks(self) -> tuple[float, float]:
        """(allocated, reserved) peak in GiB since :meth:`reset_peak`; on CPU the process's peak
        resident memory for both (``memory_source=cpu_rss``)."""
        if self.cuda:
            return (torch.cuda.max_memory_allocated() / GIB, torch.cuda.max_memory_reserved() / GIB)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
        return rss, rss


# --------------------------------------------------------------------------------------------
# Device, versions, the synthetic model


def versions() -> None:
    """The device, driver and CUDA, each package's version, and the pins that did not hold."""
    if torch.cuda.is_available():
        out("device", torch.cuda.get_device_name(0).replace(" ", "_"))
        props = torch.cuda.get_device_properties(0)
        out("device_memory_gib", props.total_memory / GIB)
        out("cuda", torch.version.cuda)
        try:
            driver = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=30, check=True,
            ).stdout.strip().splitlines()[0]  # fmt: skip
        except (OSError, subprocess.SubprocessError, IndexError):
            driver = "unknown"
        out("driver", driver)
    else:
        out("device", "cpu")
    pins = {}
    for line in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines():
        spec = line.split("#", 1)[0].strip()
        if "==" in spec:
            name, version = spec.split("==", 1)
            pins[name.strip()] = version.strip()
    missed = []
    for name in PACKAGES:
        try:
            have = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            have = "absent"
        out(f"version_{name}", have)
        if name in pins and have.split("+")[0] != pins[name]:
            missed.append(f"{name}:{have}!={pins[name]}")
    out("pins_not_held", ",".join(missed) or "none")


def synthetic_tokenizer(vocab: int):
    """A word-level tokenizer of ``vocab`` entries: ``<eos>``, ``<pad>``, ``<unk>``, then ``w3`` …
    (a text of ``n`` such words is exactly ``n`` tokens; decoding joins them with spaces)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {EOS: 0, PAD: 1, UNK: 2} | {f"w{i}": i for i in range(3, vocab)}
    tok = Tokenizer(models.WordLevel(vocab=words, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, pad_token=PAD, unk_token=UNK
    )


def build_checkpoint(b: Bench) -> None:
    """Random bf16 weights of the architecture, created on the device, saved with the tokenizer
    (``--checkpoint``: kept there, and reused when a run finds it)."""
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    if (b.ckpt / "config.json").is_file() and (b.ckpt / "tokenizer.json").is_file():
        out("checkpoint_reused", 1)
        return
    a = b.arch
    config = LlamaConfig(
        num_hidden_layers=a.layers, hidden_size=a.hidden, intermediate_size=a.ffn,
        num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, vocab_size=a.vocab,
        tie_word_embeddings=a.tied_embeddings, max_position_embeddings=4096,
        bos_token_id=0, eos_token_id=0, pad_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)
    dtype = torch.bfloat16 if b.cuda else torch.float32
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with b.dev:
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    model.generation_config = GenerationConfig(bos_token_id=0, eos_token_id=0, pad_token_id=1)
    b.sync()
    out("params_b", sum(p.numel() for p in model.parameters()) / 1e9)
    t0 = time.perf_counter()
    model.save_pretrained(b.ckpt, max_shard_size="4GB")
    synthetic_tokenizer(a.vocab).save_pretrained(b.ckpt)
    out("checkpoint_save_s", time.perf_counter() - t0)
    del model


def free() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------------------------
# Training steps


def packs() -> bool:
    """Whether the burnqed in use packs micro-batches (``collate_packed``; the branch point of
    issue 47, which ``bench/gpu-device.sh compare`` measures first, pads them)."""
    from burnqed.train import joint

    return hasattr(joint, "collate_packed")


@dataclass(frozen=True)
class Micro:
    """One micro-batch on the device, with what the FLOP count needs: each sequence's length and
    the scored (completion) tokens."""

    batch: object  # burnqed.train.joint.Batch or PackedBatch
    lengths: list[int]
    scored: int


def training_batches(b: Bench, tokenizer, *, groups: bool, real: bool = False,
                     packed: bool = True) -> list[Micro]:  # fmt: skip
    """The ``sft.grad_accum`` micro-batches of one step at the configured shape: every sequence full
    length (one micro-batch, taken ``grad_accum`` times), or (``real``) lengths drawn from
    ``bench/lengths.json`` — a prompt of the drawn length and the completion after it, states and
    goals of theirs — ``grad_accum`` different ones (lengths and token ids seeded: the same
    micro-batches in every section that draws them).  Packed
    (``layout=packed``, as training on CUDA packs it: a row of the micro-batch's tokens rounded up
    to a bucket, or the burnqed in use's fixed width) where ``packed`` and the burnqed in use packs,
    else right-padded."""
    import random

    from burnqed.train import joint

    k1 = b.ebm.negatives + 1
    g = b.sft.joint_groups_per_step if groups else 0
    if real:
        import lengths as length_table  # bench/lengths.py, beside this script

        rng = random.Random(62)
        draws = [length_table.draw(b.lengths, b.sft, k1, rng, groups=groups)
                 for _ in range(b.sft.grad_accum)]  # fmt: skip
    else:
        n, half = b.sft.max_length, b.sft.max_length // 2
        m = b.sft.joint_state_max_length
        draws = [([(half, n - half)] * b.sft.batch_size, [m] * (g * k1), [m] * g)]
    made = []
    id_rng = np.random.default_rng(62) if real else b.rng

    def ids(n: int) -> list[int]:  # ordinary words, as Bench.ids
        return id_rng.integers(3, b.arch.vocab, n).tolist()

    for sft_rows, state_lengths, goal_lengths in draws:
        rows = [(x := ids(p + c), [-100] * p + x[p:]) for p, c in sft_rows]
        states, goals = [ids(n) for n in state_lengths], [ids(n) for n in goal_lengths]
        lengths = [p + c for p, c in sft_rows] + state_lengths + goal_lengths
        args = (tokenizer, rows, states, goals, k1)
        if packed and packs():
            from burnqed.train import packing

            most = joint.packed_width(b.sft, k1, groups=groups)
            bucket = getattr(packing, "bucket_width", None)  # None: one fixed width (cb4cd23)
            width = bucket(sum(lengths), most) if bucket else most
            batch = joint.collate_packed(*args, width=width)
        else:
            batch = joint.collate(*args)
        made.append(Micro(joint._to(batch, b.dev), lengths, sum(c for _, c in sft_rows)))
    return made if real else made * b.sft.grad_accum


def model_flops(a: Architecture, lengths: list[int], scored: int) -> tuple[float, float]:
    """(model, hardware) FLOPs of one micro-batch's forward and backward with a frozen base: per
    real token ``4·P`` through the decoder's linear layers (``P`` their weights: forward ``2·P``,
    the backward's gradient of the activations ``2·P``; the frozen weights get none, LoRA's own
    are < 3 % and not counted), attention ``12·h`` per visible (query, key) pair per layer
    (``QKᵀ`` and ``AV`` forward ``4·h``, backward twice that) over each sequence's causal triangle
    ``L·(L+1)/2``, and ``lm_head`` ``4·h·V`` per scored token.  Hardware FLOPs add what activation
    checkpointing recomputes: a second decoder forward, ``2·P`` per token and ``4·h`` per pair.
    Padding is not counted: it is no model work."""
    h = a.hidden
    # per layer: q and o (h·h each), k and v (h·h·kv_heads/heads each), the MLP (3·h·ffn)
    p = a.layers * (2 * h * h + 2 * h * h * a.kv_heads // a.heads + 3 * h * a.ffn)
    tokens = sum(lengths)
    pairs = sum(n * (n + 1) // 2 for n in lengths) * a.layers
    model = 4 * p * tokens + 12 * h * pairs + 4 * h * a.vocab * scored
    return model, model + 2 * p * tokens + 4 * h * pairs


def train_steps(b: Bench, name: str, model, tokenizer, head, *, groups: bool, real: bool = False,
                packed: bool = True) -> None:  # fmt: skip
    """One warm-up optimizer step, then ``b.steps`` timed ones (their median), each as joint
    training takes it (:func:`burnqed.train.joint.accumulate` over ``sft.grad_accum`` micro-batches,
    :func:`training_batches`, then the optimiser and schedule of
    :func:`burnqed.train.joint.optimizer`: the LoRA, the head's layers and its scale, or the LoRA
    alone without a head); peaks over all of them."""
    from burnqed.train.joint import LossScales, accumulate, optimizer

    micros = training_batches(b, tokenizer, groups=groups, real=real, packed=packed)
    tokens = sum(sum(m.lengths) for m in micros)
    out(f"{name}_tokens_per_step", tokens)
    out(f"{name}_positions_per_step", sum(m.batch.input_ids.numel() for m in micros))
    if real:
        out(f"{name}_row_widths", ",".join(str(m.batch.input_ids.shape[1]) for m in micros))
    scales = LossScales()
    opt, schedule = optimizer(
        model, head, b.sft, learning_rate=b.sft.learning_rate, max_steps=b.steps + 1
    )
    model.train()
    if head is not None:
        head.train()

    def step(micro: int = b.sft.grad_accum) -> None:
        opt.zero_grad(set_to_none=True)
        accumulate(
            model, head, [m.batch for m in micros[:micro]], scales, lam=b.sft.joint_lambda,
            pooling=b.policy["pooling"], grad_accum=b.sft.grad_accum,
        )  # fmt: skip
        opt.step()
        schedule.step()
        b.sync()

    try:
        b.reset_peak()
        t0 = time.perf_counter()
        step()  # warm-up: the optimizer's moments are allocated here
        out(f"{name}_warmup_step_s", time.perf_counter() - t0)
        times = []
        try:
            for _ in range(b.steps):
                t0 = time.perf_counter()
                step()
                times.append(time.perf_counter() - t0)
        finally:  # the peak matters most: printed even when a step ran past the cap
            allocated, reserved = b.peaks()
            out(f"{name}_peak_allocated_gib", allocated)
            out(f"{name}_peak_reserved_gib", reserved)
    finally:
        opt.zero_grad(set_to_none=True)  # the gradients go now, the moments with this frame
    out(f"{name}_step_times_s", ",".join(f"{t:.4g}" for t in times))
    seconds = statistics.median(times)
    out(f"{name}_step_s", seconds)
    out(f"{name}_tokens_per_s", tokens / seconds)
    b.tokens_per_s[name] = tokens / seconds
    flops, hardware = (sum(f) for f in zip(*(model_flops(b.arch, m.lengths, m.scored)
                                             for m in micros), strict=True))  # fmt: skip
    out(f"{name}_model_tflop", flops / 1e12)
    out(f"{name}_mfu", flops / seconds / (b.peak_tflops * 1e12))
    out(f"{name}_hfu", hardware / seconds / (b.peak_tflops * 1e12))
    if name == b.profile_section and b.profile is not None:
        profile_step(b, name, step)


def profile_step(b: Bench, name: str, step: Callable[[int], None]) -> None:
    """One more optimizer step of section ``name`` over one micro-batch (a quarter of the step at
    grad_accum 4) under ``torch.profiler``: its kernels, top 20 by their own device time, to
    ``b.profile``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if b.cuda else [])
    t0 = time.perf_counter()
    with profile(activities=activities) as prof:
        step(1)
    out(f"{name}_profiled_micro_step_s", time.perf_counter() - t0)
    events = prof.key_averages()
    key = "self_device_time_total" if b.cuda else "self_cpu_time_total"
    try:
        table = events.table(sort_by=key, row_limit=20, max_name_column_width=90)
    except (AttributeError, KeyError, ValueError):  # older torch: the CUDA name
        table = events.table(sort_by="self_cuda_time_total", row_limit=20)
    b.profile.write_text(f"# one {name} micro-batch + optimizer step, {b.dev}\n{table}\n")


def lora_config(b: Bench):
    """The LoRA of ``sft``: rank, scale and dropout on its target modules."""
    from peft import LoraConfig

    return LoraConfig(r=b.sft.lora_r, lora_alpha=b.sft.lora_alpha, lora_dropout=b.sft.lora_dropout,
                      target_modules=list(b.sft.target_modules), task_type="CAUSAL_LM")  # fmt: skip


def section_training(b: Bench, state: dict) -> None:
    """checkpoint → joint → joint_real → sft (module docstring, 1–4)."""
    from peft import get_peft_model

    from burnqed.train.loop import load_base_model, load_tokenizer

    quantization = b.sft.quantization
    t0 = time.perf_counter()
    model = load_base_model(b.ckpt, quantization=quantization, cuda=b.cuda)
    b.sync()
    out("load_nf4_s", time.perf_counter() - t0)
    model = get_peft_model(model, lora_config(b))
    state["model"], state["tokenizer"] = model, load_tokenizer(b.ckpt)
    out("layout", "packed" if packs() else "padded")
    if packs():
        from burnqed.train import packing
        from burnqed.train.fused_loss import kernel

        packing.enable(model)  # as train_joint does on CUDA
        if b.cuda:
            from burnqed.train.loop import keep_lora_inputs_bf16

            keep_lora_inputs_bf16(model)
        out("attention", "flex" if b.cuda else "sdpa_block_mask")
        out("sft_loss_kernel", kernel(b.dev))
    else:
        out("attention", "sdpa_padded")
        out("sft_loss_kernel", "materialised")
    base = model.get_base_model()
    checkpointing = getattr(base, "is_activation_checkpointing", None)  # transformers >= 5.23
    if checkpointing is None:
        checkpointing = base.is_gradient_checkpointing
    out("gradient_checkpointing", bool(checkpointing))
    if b.cuda:
        out("resident_weights_gib", torch.cuda.memory_allocated() / GIB)


def energy_head(b: Bench):
    """The energy head as joint training builds it, its input statistics from random embeddings."""
    from burnqed.ebm.train import build_head

    torch.manual_seed(0)
    head = build_head(b.arch.hidden, b.ebm).to(b.dev)
    head.set_input_stats(torch.randn(64, b.arch.hidden, device=b.dev))
    return head


def section_joint(b: Bench, state: dict) -> None:
    model, tokenizer = state["model"], state["tokenizer"]
    head = energy_head(b)
    from burnqed.train import memory

    # The plan of the layout in use: packed, bf16 and the fused loss where burnqed packs (the
    # branch point's plan, which knows neither, otherwise).
    layout = {**memory.PACKED_BF16, "lora_dropout": b.sft.lora_dropout} if packs() else {}
    plan = joint_step_plan(
        b.arch, lora_r=b.sft.lora_r, lora_alpha=b.sft.lora_alpha, head_sizes=b.ebm.hidden_sizes,
        sft_batch=b.sft.batch_size, sft_length=b.sft.max_length,
        groups=b.sft.joint_groups_per_step, group_size=b.ebm.negatives + 1,
        state_length=b.sft.joint_state_max_length, **layout,
    )  # fmt: skip
    out("joint_plan_gib", plan["total_gib"])
    try:
        train_steps(b, "joint", model, tokenizer, head, groups=True)
    finally:
        del head
        free()


def section_joint_real(b: Bench, state: dict) -> None:
    """The joint step at real lengths, packed (module docstring, 3)."""
    model, tokenizer = state["model"], state["tokenizer"]
    head = energy_head(b)
    out("lengths_chars_per_token", b.lengths["chars_per_token"])
    try:
        train_steps(b, "joint_real", model, tokenizer, head, groups=True, real=True)
    finally:
        del head
        free()


def section_padded(b: Bench, state: dict) -> None:
    """joint_real's micro-batches in the layout before issue 47 (module docstring, 5): the base
    loaded as ``sft.gpu_layout: padded_fp32`` loads it, right-padded, float32 residual stream."""
    from peft import get_peft_model

    from burnqed.train.loop import load_base_model, load_tokenizer

    state.pop("model", None)  # one 4-bit base on the device at a time
    free()
    t0 = time.perf_counter()
    model = load_base_model(b.ckpt, quantization=b.sft.quantization, cuda=b.cuda,
                            bf16_stream=False)  # fmt: skip
    b.sync()
    out("load_padded_s", time.perf_counter() - t0)
    model = get_peft_model(model, lora_config(b))
    head = energy_head(b)
    try:
        train_steps(b, "joint_real_padded", model, load_tokenizer(b.ckpt), head, groups=True,
                    real=True, packed=False)  # fmt: skip
        if "joint_real" in b.tokens_per_s:
            speedup = b.tokens_per_s["joint_real"] / b.tokens_per_s["joint_real_padded"]
            out("joint_real_speedup", speedup)
    finally:
        del model, head
        free()


def section_sft(b: Bench, state: dict) -> None:
    model, tokenizer = state["model"], state["tokenizer"]
    try:
        train_steps(b, "sft", model, tokenizer, None, groups=False)
    finally:
        state.clear()
        free()


# --------------------------------------------------------------------------------------------
# Inference: embedding, the EBM, generation


def section_load_policy(b: Bench, state: dict) -> None:
    from burnqed.policy.transformers_backend import TransformersGenerator

    t0 = time.perf_counter()
    gen = TransformersGenerator(
        b.ckpt, device=str(b.dev), dtype="bfloat16" if b.cuda else "float32",
        pooling=b.policy["pooling"],
    )  # fmt: skip
    b.sync()
    out("load_bf16_s", time.perf_counter() - t0)
    state["gen"] = gen


@torch.inference_mode()
def embed_batched(gen, tok, texts: list[str], batch: int) -> np.ndarray:
    """One right-padded forward per ``batch`` texts, each pooled at its own last token; ``tok`` is
    transformers' tokenizer (it pads a batch)."""
    from burnqed.policy.transformers_backend import pool_hidden

    vectors = []
    for i in range(0, len(texts), batch):
        enc = tok(texts[i : i + batch], return_tensors="pt", padding=True).to(gen.device)
        hidden = gen.model.base_model(**enc).last_hidden_state  # (B, T, d)
        lengths = enc["attention_mask"].sum(1).tolist()
        pooled = torch.stack(
            [pool_hidden(hidden[r, :n].float(), gen.pooling) for r, n in enumerate(lengths)]
        )  # (B, d)
        vectors.append(pooled.cpu().numpy())
    return np.concatenate(vectors)


def section_embed(b: Bench, state: dict) -> None:
    from burnqed.train.loop import load_tokenizer

    gen, tok = state["gen"], load_tokenizer(b.ckpt)
    out("embed_state_tokens", b.state_tokens)
    for batch in (1, 8, 32, 128):
        count = b.embed_states if batch > 1 else max(8, b.embed_states // 8)
        count = max(count, batch)
        texts = [b.text(b.state_tokens) for _ in range(count)]
        run: Callable[[list[str]], np.ndarray] = (
            gen.embed if batch == 1 else lambda t, n=batch: embed_batched(gen, tok, t, n)
        )
        run(texts[: max(batch, 2)])  # warm-up at this shape
        b.sync()
        t0 = time.perf_counter()
        run(texts)
        b.sync()
        out(f"embed_batch{batch}_states_per_s", count / (time.perf_counter() - t0))


def section_ebm(b: Bench, state: dict) -> None:
    from burnqed.ebm.groups import KINDS, Groups
    from burnqed.ebm.scorer import EBMValueModel
    from burnqed.ebm.train import build_head, train_head

    d, k = b.arch.hidden, b.ebm.negatives
    n_groups = 2000 if b.cuda else 64
    rng = np.random.default_rng(0)
    vectors = {
        f"s{i}": rng.standard_normal(d).astype(np.float32) for i in range(n_groups * (k + 1))
    }
    vectors |= {f"g{i}": rng.standard_normal(d).astype(np.float32) for i in range(50)}
    groups = Groups(
        states=[[f"s{g * (k + 1) + j}" for j in range(k + 1)] for g in range(n_groups)],
        goals=[f"g{g % 50}" for g in range(n_groups)],
        depth=np.arange(n_groups) % 6,
        theorem=[f"t{g % 50}" for g in range(n_groups)],
        heldout=np.arange(n_groups) % 50 >= 45,
        kind_counts={x: 0 for x in KINDS},
    )
    steps = 30 if b.cuda else 2
    cfg = replace(b.ebm, steps=steps, log_every=steps, save_every=steps + 1)
    out("ebm_train_steps", steps)
    with tempfile.TemporaryDirectory() as tmp:  # warm-up
        train_head(vectors, groups, replace(cfg, steps=2, log_every=2, save_every=3),
                   work_dir=Path(tmp), device=str(b.dev))  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        r = train_head(vectors, groups, cfg, work_dir=Path(tmp), device=str(b.dev))
    out("ebm_train_groups_per_s", r.groups_per_s)
    head = build_head(d, b.ebm).to(b.dev).eval()
    value = EBMValueModel(head, state["gen"], batch_size=b.ebm.embed_batch_size)
    per_call = b.search.batch_encode_size
    goals = [b.text(b.state_tokens) for _ in range(4)]
    todo = [b.text(b.state_tokens) for _ in range(8 * per_call if b.cuda else per_call)]
    value.energies(todo[:per_call], goals[:1] * per_call)  # warm-up; caches the first goal
    t0 = time.perf_counter()
    for i in range(0, len(todo), per_call):
        part = todo[i : i + per_call]
        value.energies(part, [goals[j % len(goals)] for j in range(len(part))])
    b.sync()
    out("ebm_score_states_per_s", len(todo) / (time.perf_counter() - t0))


def section_generation(b: Bench, state: dict) -> None:
    from burnqed.data.prompt import STOP, format_prompt
    from burnqed.policy import SamplingParams, candidate_seeds

    gen = state["gen"]
    params = SamplingParams(
        n=b.search.num_candidates, temperature=b.search.temperature,
        top_p=float(b.policy["top_p"]), max_new_tokens=int(b.policy["max_new_tokens"]), stop=STOP,
    )  # fmt: skip
    prompts = [format_prompt(b.text(b.state_tokens)) for _ in range(b.gen_states)]
    out("gen_states", b.gen_states)
    out("gen_prompt_tokens", len(gen.tokenizer(prompts[0]).input_ids))
    gen.generate(prompts[:1], replace(params, max_new_tokens=4), [[0] * params.n])  # warm-up
    candidates = tokens = done = 0
    t0 = time.perf_counter()
    try:
        for i, prompt in enumerate(prompts):
            seeds = [candidate_seeds(0, "bench", 0, str(i), params.n)]
            (samples,) = gen.sample([prompt], params, seeds)
            candidates += len(samples)
            tokens += sum(len(s.token_ids) for s in samples)
            done += 1
    except SectionTimeout:
        if not done:
            raise
        out("gen_status", f"capped after {done} of {b.gen_states} states")
    seconds = time.perf_counter() - t0
    b.sync()
    out("gen_states_done", done)
    out("gen_candidates_per_s", candidates / seconds)
    out("gen_tokens_per_s", tokens / seconds)


# --------------------------------------------------------------------------------------------


SECTIONS = (
    ("checkpoint", lambda b, s: (build_checkpoint(b), free(), section_training(b, s))),
    ("joint", section_joint),
    ("joint_real", section_joint_real),
    ("sft", section_sft),
    ("padded", section_padded),
    ("embed", lambda b, s: (section_load_policy(b, s), section_embed(b, s))),
    ("ebm", section_ebm),
    ("generation", section_generation),
)


# What a section needs from an earlier one: without it, it is skipped (and counted as failed).
NEEDS = {"joint": "model", "joint_real": "model", "sft": "model", "ebm": "gen", "generation": "gen"}


def run_sections(b: Bench, caps: dict[str, int], only: set[str] | None = None) -> int:
    """Each section (of ``only``, when given) under its cap; a timeout, OOM or error is printed and
    the next section runs.  Returns the number of sections that did not finish."""
    state: dict = {}
    failed = 0
    for name, section in SECTIONS:
        if only is not None and name not in only:
            continue
        t0 = time.perf_counter()
        out(f"{name}_cap_s", caps[name])
        need = NEEDS.get(name)
        try:
            if need and need not in state:
                raise LookupError(f"skipped: no {need} (an earlier section failed)")
            with capped(caps[name]):
                section(b, state)
            status = "ok"
        except SectionTimeout as e:
            status = f"timeout ({e})"
        except torch.cuda.OutOfMemoryError as e:
            status = f"oom ({str(e).splitlines()[0][:160]})"
        except Exception as e:  # one broken section must not cost the others' figures
            logging.getLogger("bench.gpu").exception("section %s failed", name)
            status = f"error ({type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]})"
        if status != "ok":
            failed += 1
            if name == "sft":
                state.pop("model", None)
            free()
        out(f"{name}_status", status)
        out(f"{name}_wall_s", time.perf_counter() - t0)
    return failed


def real_lengths(path: Path, *, smoke: bool) -> dict:
    """The real-length table (``bench/lengths.json``); at ``--smoke`` every length a quarter (at
    least 1), so that the tiny sizes' bounds (32 and 16 tokens) admit most sequences."""
    table = json.loads(path.read_text(encoding="utf-8"))
    if smoke:
        quarter = [[max(1, p // 4), max(1, c // 4)] for p, c in table["sft"]]
        table = {**table, "sft": quarter, "states": [max(1, n // 4) for n in table["states"]]}
    return table


def _shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (no machine's paths in output)."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", default=str(REPO / "params.yaml"))
    p.add_argument("--configfile", action="append", default=None,
                   help="overlays (default: config/a100-7b.yaml)")  # fmt: skip
    p.add_argument("--steps", type=int, default=None, help="timed optimizer steps after the "
                   "warm-up, their median the figure (default 3; 1 with --smoke)")  # fmt: skip
    p.add_argument("--gen-states", type=int, default=32, help="states generated for")
    p.add_argument("--state-tokens", type=int, default=256, help="tokens of a synthetic state")
    p.add_argument("--embed-states", type=int, default=256, help="states embedded per batch size")
    p.add_argument("--workdir", default=None, help="where the random checkpoint goes "
                   "(default: a temporary directory in /dev/shm when it has room, else /tmp)")  # fmt: skip
    for name, cap in CAPS.items():
        p.add_argument(f"--cap-{name}", type=int, default=cap, help=f"seconds (default {cap})")
    p.add_argument("--sections", default=",".join(CAPS),
                   help="the sections to run, comma-separated (joint and sft need checkpoint)")  # fmt: skip
    p.add_argument("--checkpoint", default=None, help="where the random checkpoint is kept and "
                   "reused by later runs (default: a temporary directory, removed)")  # fmt: skip
    p.add_argument("--profile-joint", default=None, help="a file for the kernel table (top 20 by "
                   "device time) of one profiled joint micro-batch after the timed steps")  # fmt: skip
    p.add_argument("--profile-section", default="joint", choices=("joint", "joint_real"),
                   help="whose micro-batch --profile-joint profiles (default joint)")  # fmt: skip
    p.add_argument("--lengths", default=str(LENGTHS), help="the real-length table "
                   "(bench/lengths.py --write)")  # fmt: skip
    p.add_argument("--peak-tflops", type=float, default=989.0, help="the device's dense bf16 "
                   "TFLOP/s that MFU divides by (default: the H100/H200 SXM datasheet's 989)")  # fmt: skip
    p.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU: that it runs (CI)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="auto: CUDA at full size, the CPU with --smoke; `--smoke --device cuda` "
                   "checks the CUDA code paths in a minute before a full run")  # fmt: skip
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if (not args.smoke or args.device == "cuda") and not torch.cuda.is_available():
        print("bench/gpu.py: no CUDA device; the 7B figures need a GPU (--smoke runs the "
              "sections on the CPU at a tiny size)", file=sys.stderr)  # fmt: skip
        return 2
    overlays = args.configfile if args.configfile is not None else [REPO / "config/a100-7b.yaml"]
    params = load_params(args.params, overlays)
    sft = SFTConfig.from_dict(params["sft"])
    ebm = EBMConfig.from_dict(params["ebm"])
    search = SearchConfig.from_dict(params["search"])
    arch = DEEPSEEK_PROVER_V2_7B
    cuda = args.device == "cuda" or (args.device == "auto" and not args.smoke)
    if args.device == "cpu" and not args.smoke:
        print("bench/gpu.py: the full size runs on a GPU only (--device cpu needs --smoke)",
              file=sys.stderr)  # fmt: skip
        return 2
    dev = torch.device("cuda" if cuda else "cpu")
    if args.smoke:
        arch = SMOKE_ARCH
        sft = replace(sft, batch_size=2, max_length=32, grad_accum=2, joint_groups_per_step=2,
                      joint_state_max_length=16, lora_r=4, lora_alpha=8)  # fmt: skip
        ebm = replace(ebm, hidden_sizes=(32, 16), batch_size=16)
        args.gen_states, args.state_tokens, args.embed_states = 2, 16, 16
        args.steps = 1 if args.steps is None else args.steps
        params["policy"] = {**params["policy"], "max_new_tokens": 8}
    out("architecture", "DeepSeek-Prover-V2-7B (unverified shape)" if not args.smoke else "smoke")
    out("arch", ",".join(f"{k}:{v}" for k, v in vars(arch).items()))
    out("configfiles", ",".join(_shown(Path(o)) for o in overlays) or "none")
    out("sft_mode", sft.mode)
    out("quantization", sft.quantization)
    out("lora_r", sft.lora_r)
    out("micro_batch", f"{sft.batch_size}x{sft.max_length}+{sft.joint_groups_per_step}x"
        f"({ebm.negatives + 1}+1)x{sft.joint_state_max_length}")  # fmt: skip
    out("grad_accum", sft.grad_accum)
    args.steps = 3 if args.steps is None else args.steps
    out("timed_steps", args.steps)
    out("head", "x".join(map(str, ebm.hidden_sizes)))
    out("pooling", params["policy"]["pooling"])
    versions()
    root = args.workdir
    if root is None and Path("/dev/shm").is_dir():
        with contextlib.suppress(OSError):
            import shutil

            if shutil.disk_usage("/dev/shm").free > 40 * GIB or args.smoke:
                root = "/dev/shm"
    only = {x.strip() for x in args.sections.split(",") if x.strip()}
    if unknown := only - set(CAPS):
        print(f"bench/gpu.py: --sections: no section {sorted(unknown)} (sections: "
              f"{','.join(CAPS)})", file=sys.stderr)  # fmt: skip
        return 2
    out("sections", ",".join(n for n in CAPS if n in only))
    with tempfile.TemporaryDirectory(dir=root, prefix="burnqed-gpu-bench-") as tmp:
        ckpt = Path(args.checkpoint) if args.checkpoint else Path(tmp) / "policy"
        b = Bench(dev=dev, arch=arch, sft=sft, ebm=ebm, search=search, policy=params["policy"],
                  ckpt=ckpt, steps=args.steps, gen_states=args.gen_states,
                  state_tokens=args.state_tokens, embed_states=args.embed_states,
                  rng=np.random.default_rng(0), peak_tflops=args.peak_tflops,
                  profile=Path(args.profile_joint) if args.profile_joint else None,
                  profile_section=args.profile_section,
                  lengths=real_lengths(Path(args.lengths), smoke=args.smoke))  # fmt: skip
        out("memory_source", "cuda" if b.cuda else "cpu_rss")
        caps = {name: getattr(args, f"cap_{name}") for name in CAPS}
        failed = run_sections(b, caps, only)
    out("sections_failed", failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
