"""Packed attention and the fused loss on CUDA, checked against their references, then timed.

Training on CUDA packs each joint micro-batch padding-free and runs compiled ``flex_attention``
with the block mask :func:`burnqed.train.packing.block_mask` builds from the sequences' boundaries,
and takes the SFT loss through Liger Kernel's fused linear cross-entropy
(:mod:`burnqed.train.fused_loss`).  The CPU tests check both against SDPA with the dense
block-diagonal mask and the whole-logits loss; this bench checks the CUDA kernels the same way, at
the joint micro-batch's shape (``config/a100-7b.yaml``: 8 SFT rows of 1,024 tokens and 4 groups
of 8 states + a goal at 512, packed into 26,624 positions; 32 heads of 128), in bf16, forward and
backward, on fresh random inputs:

- **attention**: flex attention (the block mask) and SDPA with the dense block-diagonal mask, both
  in bf16, against SDPA with the dense mask in float32 (the reference): ‖x − ref‖ / ‖ref‖ over
  the output and the gradients of q, k and v (the largest of the four) — on the full-length layout
  (every boundary on a 128-block boundary) and on an **unaligned** one (:func:`unaligned`: every
  sequence 1–127 tokens shorter, so boundaries fall inside blocks and a padding tail of several
  blocks follows, each padding position a sequence of its own); the packed flex attention is also
  timed against SDPA over the same sequences right-padded to 1,024 (the layout before packing: 44
  rows, causal, padding masked);
- **no recompile**: the unaligned layout (other boundaries, the same width) must run without
  compiling again (its first call timed);
- **loss**: the fused loss (Liger where installed, else the chunked loss) against float32
  cross-entropy over the whole logits, at 4,096 scored tokens (half of the SFT rows') × the
  102,400-token vocabulary: the loss's and the hidden states' gradient's relative errors, time
  and peak memory of each.

- **layouts**: a packed bf16 joint step against the padded float32 step (:func:`layout_step_errors`):
  a small random Llama (2 layers, hidden 512, 4 heads of 128, vocabulary 4,096) saved in bf16 and
  loaded as each ``sft.gpu_layout`` loads it (NF4 on CUDA: the same 4-bit weights), the same LoRA
  (seeded random A and B, no dropout) and head, one micro-batch of unaligned lengths through
  :func:`burnqed.train.joint.joint_forward`: packed (flex attention, the fused loss, bf16 autocast)
  and right-padded (SDPA, whole float32 logits, no autocast).  Bounds (:data:`LAYOUT_BOUNDS`), three
  times what bf16 against float32 gives on the CPU for this model and batch (``torch.autocast``
  on the CPU, bf16 embeddings and ``lm_head``: losses 2e-5, pooled rows 1.7e-2, LoRA gradients
  2.4e-2 and cosine 0.9997 at worst): the SFT and InfoNCE losses within 1 % (at random weights
  the losses are near ln V and ln K whatever the attention: the gradients and embeddings are the
  check), each pooled embedding within 5 %, each LoRA and head gradient tensor within 8 % in norm
  and at cosine ≥ 0.995 — a wrong mask, shift or pool moves them by tens of percent;
- **determinism**: a packed joint step of a small random Llama loaded as training loads it (NF4 on
  CUDA, LoRA with dropout, the head), twice under the strict deterministic mode ``train_joint``
  runs in (:func:`check_determinism`): the gradients must be bit-identical.

Exit status 1 when an error is over its bound (attention 2× SDPA-bf16's own error plus 1e-3, on
both layouts; loss 1e-3; gradient 2e-2; the layouts' step, :data:`LAYOUT_BOUNDS`), the second
layout compiled again (over 2 s) or the deterministic step failed or differed.  ``--smoke`` runs the
same checks on the CPU at a tiny size (eager flex attention, the chunked loss; the times mean
nothing there).

Prints (parameters first; these figures last, one ``name=value`` a line):

- ``flex_rel_err``: flex attention's relative error against the float32 reference
- ``sdpa_mask_rel_err``: SDPA's with the dense mask in bf16, the same measure
- ``flex_first_call_s``: the first packed call, forward and backward (compilation included)
- ``flex_new_layout_s``: the first call on the unaligned layout (no compilation: well under a second)
- ``flex_unaligned_rel_err``: flex attention's relative error on the unaligned layout
- ``sdpa_unaligned_rel_err``: SDPA-bf16's on the unaligned layout
- ``flex_ms``: packed flex attention, forward + backward, median (ms)
- ``sdpa_padded_ms``: SDPA over the same sequences right-padded, forward + backward, median (ms)
- ``loss_rel_err``: the fused loss's relative error against whole-logits float32 cross-entropy
- ``loss_grad_rel_err``: its hidden-state gradient's
- ``fused_loss_ms``: the fused loss, forward + backward, median (ms)
- ``full_loss_ms``: whole bf16 logits and float32 cross-entropy, forward + backward, median (ms)
- ``fused_loss_peak_gib``: peak memory above the inputs of the fused loss (GiB; CPU: 0)
- ``full_loss_peak_gib``: the same for the whole logits (GiB; CPU: 0)
- ``layout_loss_rel_err``: the packed bf16 step's SFT and InfoNCE losses against the padded
  float32 step's, the larger relative difference
- ``layout_pooled_rel_err``: its pooled embeddings', the largest row's relative difference
- ``layout_grad_rel_err``: its LoRA and head gradients', the largest tensor's relative difference
- ``layout_grad_cos_min``: the smallest cosine between a gradient tensor of the two steps
- ``deterministic_step_identical``: 1 when a packed joint step run twice under
  ``deterministic_training`` gave bit-identical gradients

Example::

    python bench/packed_attention.py            # on a CUDA machine (bench/gpu-device.sh compare)
    python bench/packed_attention.py --smoke    # the CPU, tiny: that it runs (CI)
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from burnqed.train import packing
from burnqed.train.fused_loss import kernel, linear_cross_entropy

GIB = 2**30
# The packed bf16 step against the padded float32 step (module docstring, "layouts").
LAYOUT_BOUNDS = {"loss_rel": 1e-2, "pooled_rel": 5e-2, "grad_rel": 8e-2, "grad_cos": 0.995}


def out(name: str, value: object) -> None:
    if isinstance(value, float):
        value = f"{value:.4g}"
    print(f"{name}={value}", flush=True)


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double(), ref.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return float((x - ref).norm() / ref.norm())


def sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize()


def median_s(fn: Callable[[], object], dev: torch.device, repeat: int) -> float:
    """Median wall time of ``fn`` after one warm-up call (synchronised around each)."""
    fn()
    times = []
    for _ in range(repeat):
        sync(dev)
        t0 = time.perf_counter()
        fn()
        sync(dev)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def layout(lengths: list[int], width: int, dev: torch.device) -> torch.Tensor:
    """Each position's sequence index (``packing``'s ``doc``), each padding position a sequence of
    its own after the last (as :func:`burnqed.train.joint.collate_packed` lays them)."""
    doc = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    pad = len(lengths) + torch.arange(width - len(doc))
    return torch.cat([doc, pad]).to(dev)


def unaligned(lengths: list[int], seed: int) -> list[int]:
    """``lengths`` each 1–127 tokens shorter (seeded; at least 1): no boundary on a block boundary,
    and at the same width a padding tail of several blocks."""
    rng = random.Random(seed)
    return [max(1, n - rng.randrange(1, 128)) for n in lengths]


def attention_pass(fn, q, k, v, grad, backward: bool = True) -> list[torch.Tensor]:
    """Forward and backward of ``fn(q, k, v)``: the output and q's, k's and v's gradients (the
    output alone without ``backward``: eager flex attention on the CPU has none)."""
    if not backward:
        with torch.no_grad():
            return [fn(q, k, v)]
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    o = fn(q, k, v)
    o.backward(grad)
    return [o.detach(), q.grad, k.grad, v.grad]


def attention_errors(dev: torch.device, doc: torch.Tensor, heads: int, dim: int,
                     seed: int = 0) -> dict[str, Any]:  # fmt: skip
    """Flex attention with ``doc``'s block mask and SDPA with its dense mask, both in bf16 (float32
    on the CPU), against SDPA with the dense mask in float32, forward and (on CUDA: the CPU's eager
    flex attention has no backward) backward, on random q, k, v of ``heads`` × ``dim``: the largest
    relative error over the output and q's, k's and v's gradients of each (``flex``, ``sdpa``), the
    first flex call's seconds (``first_call_s``: compilation included) and a call to time
    (``call``)."""
    width = doc.shape[0]
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    gen = torch.Generator(device=dev).manual_seed(seed)
    q, k, v, g = (torch.randn(1, heads, width, dim, device=dev, generator=gen) for _ in range(4))
    dense = packing.dense_mask(doc)

    def sdpa_mask(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense)

    block = packing.block_mask(doc)
    flex_fn = packing._flex() if dev.type == "cuda" else _eager_flex()

    def flex(q, k, v):
        return flex_fn(q, k, v, block_mask=block)

    bwd = dev.type == "cuda"
    ref = attention_pass(sdpa_mask, q, k, v, g, bwd)  # float32
    low = [t.to(dtype) for t in (q, k, v, g)]
    sync(dev)
    t0 = time.perf_counter()
    got = attention_pass(flex, *low, bwd)
    sync(dev)
    first = time.perf_counter() - t0
    sdpa = attention_pass(sdpa_mask, *low, bwd)
    return {
        "flex": max(rel(a, b) for a, b in zip(got, ref, strict=True)),
        "sdpa": max(rel(a, b) for a, b in zip(sdpa, ref, strict=True)),
        "first_call_s": first,
        "call": lambda: attention_pass(flex, *low, bwd),
    }


def attention_within_bound(errors: dict[str, Any]) -> bool:
    """Flex attention's error at most twice SDPA-bf16's own with the same mask, plus 1e-3."""
    return errors["flex"] <= 2 * errors["sdpa"] + 1e-3


def check_attention(dev: torch.device, lengths: list[int], heads: int, dim: int,
                    repeat: int) -> bool:  # fmt: skip
    width = packing.round_width(sum(lengths))
    full = attention_errors(dev, layout(lengths, width, dev), heads, dim)
    out("flex_first_call_s", full["first_call_s"])
    out("flex_rel_err", full["flex"])
    out("sdpa_mask_rel_err", full["sdpa"])
    # The unaligned layout (other boundaries, the same width): checked, and the same kernel.
    other = attention_errors(dev, layout(unaligned(lengths, 1), width, dev), heads, dim, seed=1)
    new_layout = other["first_call_s"]
    out("flex_new_layout_s", new_layout)
    out("flex_unaligned_rel_err", other["flex"])
    out("sdpa_unaligned_rel_err", other["sdpa"])
    ok = attention_within_bound(full) and attention_within_bound(other) and new_layout < 2.0
    if not ok:
        logging.error("flex attention: error %.3g (SDPA bf16 %.3g), unaligned %.3g (%.3g), new "
                      "layout %.2f s", full["flex"], full["sdpa"], other["flex"], other["sdpa"],
                      new_layout)  # fmt: skip
    del other
    out("flex_ms", 1e3 * median_s(full["call"], dev, repeat))
    # Before packing: the same sequences right-padded to the longest, causal with padding masked.
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    gen = torch.Generator(device=dev).manual_seed(2)
    rows, longest = len(lengths), max(lengths)
    keep = torch.arange(longest, device=dev)[None, :] < torch.tensor(lengths, device=dev)[:, None]
    causal = torch.ones(longest, longest, dtype=torch.bool, device=dev).tril()
    padded_mask = (causal[None] & keep[:, None, :])[:, None]  # (rows, 1, T, T)
    pq, pk, pv, pg = (torch.randn(rows, heads, longest, dim, device=dev, dtype=dtype,
                                  generator=gen) for _ in range(4))  # fmt: skip

    def padded(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=padded_mask)

    bwd = dev.type == "cuda"
    out("sdpa_padded_ms", 1e3 * median_s(lambda: attention_pass(padded, pq, pk, pv, pg, bwd),
                                          dev, repeat))  # fmt: skip
    return ok


def _eager_flex():
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention


def peak_gib(fn: Callable[[], object], dev: torch.device) -> float:
    """Peak memory ``fn`` adds above what is allocated before it (CUDA; 0 on the CPU)."""
    if dev.type != "cuda":
        fn()
        return 0.0
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / GIB


def check_loss(dev: torch.device, tokens: int, hidden: int, vocab: int, repeat: int) -> bool:
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    gen = torch.Generator(device=dev).manual_seed(2)
    h = (torch.randn(tokens, hidden, device=dev, generator=gen) / 4).to(dtype)
    w = (torch.randn(vocab, hidden, device=dev, generator=gen) / hidden**0.5).to(dtype)
    t = torch.randint(0, vocab, (tokens,), device=dev, generator=gen)

    def full():
        x = h.detach().requires_grad_()
        loss = torch.nn.functional.cross_entropy((x @ w.T).float(), t)
        loss.backward()
        return loss.detach(), x.grad

    def fused():
        x = h.detach().requires_grad_()
        loss = linear_cross_entropy(x, w, t)
        loss.backward()
        return loss.detach(), x.grad

    x = h.double().requires_grad_()
    ref = torch.nn.functional.cross_entropy(x @ w.double().T, t)
    ref.backward()
    loss, grad = fused()
    loss_err, grad_err = rel(loss, ref.detach()), rel(grad, x.grad)
    out("loss_rel_err", loss_err)
    out("loss_grad_rel_err", grad_err)
    out("fused_loss_ms", 1e3 * median_s(fused, dev, repeat))
    out("full_loss_ms", 1e3 * median_s(full, dev, repeat))
    out("fused_loss_peak_gib", peak_gib(fused, dev))
    out("full_loss_peak_gib", peak_gib(full, dev))
    ok = loss_err < 1e-3 and grad_err < 2e-2
    if not ok:
        logging.error("fused loss: loss error %.3g, gradient error %.3g", loss_err, grad_err)
    return ok


def small_sizes(dev: torch.device) -> tuple[int, int, int]:
    """:func:`small_model`'s hidden size, heads and vocabulary: head dim 128 on CUDA."""
    return (512, 4, 4096) if dev.type == "cuda" else (64, 2, 300)


def small_model(dev: torch.device, *, bf16_stream: bool = True, lora_dropout: float = 0.05,
                random_lora: bool = False) -> tuple[Any, Any, int]:  # fmt: skip
    """A small random Llama (2 layers; on CUDA hidden 512, 4 heads of 128, vocabulary 4,096 saved
    in bf16; on the CPU hidden 64, 2 heads, 300) loaded 4-bit as training loads it
    (:func:`burnqed.train.loop.load_base_model`, the residual stream bf16 or float32 as
    ``bf16_stream`` says: the two ``sft.gpu_layout``), LoRA r 16 on every linear layer (seeded: the
    same adapter every call; ``random_lora``: A and B both random, so both get gradients), made
    ready for packed batches as ``train_joint`` does where the stream is bf16, and the energy head
    (seeded, eval mode): ``(model, head, vocab)``."""
    import tempfile
    from pathlib import Path

    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from burnqed.config import EBMConfig
    from burnqed.ebm.train import build_head
    from burnqed.train.loop import keep_lora_inputs_bf16, load_base_model
    from burnqed.train.memory import TARGET_MODULES

    cuda = dev.type == "cuda"
    hidden, heads, vocab = small_sizes(dev)
    config = LlamaConfig(num_hidden_layers=2, hidden_size=hidden, intermediate_size=3 * hidden,
                         num_attention_heads=heads, num_key_value_heads=heads, vocab_size=vocab)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        LlamaForCausalLM(config).to(torch.bfloat16 if cuda else torch.float32).save_pretrained(tmp)
        model = load_base_model(Path(tmp), quantization="nf4", cuda=cuda, bf16_stream=bf16_stream)
    torch.manual_seed(1)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=lora_dropout,
                                             target_modules=list(TARGET_MODULES),
                                             init_lora_weights=not random_lora,
                                             task_type="CAUSAL_LM"))  # fmt: skip
    if bf16_stream:
        packing.enable(model)
        if cuda:
            keep_lora_inputs_bf16(model)
    torch.manual_seed(2)
    head = build_head(hidden, EBMConfig(hidden_sizes=(64, 32))).to(dev).eval()  # no power steps
    return model, head, vocab


def layout_step_errors(dev: torch.device) -> dict[str, float]:
    """The packed bf16 joint step against the padded float32 one (module docstring, "layouts"): one
    micro-batch of unaligned lengths (3 SFT examples, 2 groups of 4 states and a goal) through
    :func:`burnqed.train.joint.joint_forward` on :func:`small_model` loaded each way, loss ``sft +
    0.1 · value`` backward; the relative differences of the losses (the larger), the pooled rows
    (the largest), the LoRA and head gradient tensors (the largest) and their smallest cosine."""
    from burnqed.train.joint import _to, collate, collate_packed, joint_forward

    rng = random.Random(62)
    vocab = small_sizes(dev)[2]

    def ids(n: int) -> list[int]:
        return [rng.randrange(3, vocab) for _ in range(n)]

    long, short = (250, 60) if dev.type == "cuda" else (40, 14)
    rows = [(x := ids(long - 13 * i), [-100] * (len(x) // 2) + x[len(x) // 2 :])
            for i in range(3)]  # fmt: skip
    args = (_Pad, rows, [ids(short - i) for i in range(8)], [ids(short - 5), ids(short - 7)], 4)
    total = sum(len(r) for r in [*(x for x, _ in rows), *args[2], *args[3]])
    runs = []
    for packed in (True, False):
        model, head, _ = small_model(dev, bf16_stream=packed, lora_dropout=0.0, random_lora=True)
        # packed: a padding tail of about 100 positions, each a sequence of its own
        batch = collate_packed(*args, width=packing.round_width(total + 100)) if packed else (
            collate(*args))  # fmt: skip
        model.eval()  # no dropout, both sides
        res = joint_forward(model, head, _to(batch, dev), "last")
        (res["sft"] + 0.1 * res["value"]).backward()
        grads = {n: p.grad.detach().float() for n, p in model.named_parameters()
                 if p.grad is not None}  # fmt: skip
        grads |= {f"head.{n}": p.grad.detach().float() for n, p in head.named_parameters()
                  if p.grad is not None}  # fmt: skip
        runs.append((res, grads))
        del model, head
    (got, g_got), (want, g_want) = runs
    if g_got.keys() != g_want.keys() or not g_want:
        raise RuntimeError(f"the two steps' gradients differ in their tensors: {len(g_got)} vs "
                           f"{len(g_want)}")  # fmt: skip
    pooled = float(
        ((got["pooled"] - want["pooled"]).norm(dim=1) / want["pooled"].norm(dim=1)).max()
    )
    # Gradients that are zero but for rounding are left out: the head's last bias (InfoNCE does not
    # change when every energy moves alike) and its remaining-steps bias (no such term here).
    top = max(float(g.norm()) for g in g_want.values())
    live = [n for n, g in g_want.items() if float(g.norm()) > 1e-6 * top]
    cos = torch.nn.functional.cosine_similarity
    return {
        "loss_rel": max(rel(got[k].detach(), want[k].detach()) for k in ("sft", "nce")),
        "pooled_rel": pooled,
        "grad_rel": max(rel(g_got[n], g_want[n]) for n in live),
        "grad_cos": min(float(cos(g_got[n].flatten(), g_want[n].flatten(), dim=0)) for n in live),
        "gradients": float(len(live)),
    }


def layout_within_bounds(errors: dict[str, float]) -> bool:
    """:func:`layout_step_errors` within :data:`LAYOUT_BOUNDS`."""
    b = LAYOUT_BOUNDS
    return (errors["loss_rel"] <= b["loss_rel"] and errors["pooled_rel"] <= b["pooled_rel"]
            and errors["grad_rel"] <= b["grad_rel"] and errors["grad_cos"] >= b["grad_cos"])  # fmt: skip


def check_layouts(dev: torch.device) -> bool:
    errors = layout_step_errors(dev)
    out("layout_loss_rel_err", errors["loss_rel"])
    out("layout_pooled_rel_err", errors["pooled_rel"])
    out("layout_grad_rel_err", errors["grad_rel"])
    out("layout_grad_cos_min", errors["grad_cos"])
    out("layout_gradients_compared", int(errors["gradients"]))
    ok = layout_within_bounds(errors)
    if not ok:
        logging.error("the packed bf16 step is not the padded float32 one within %s: %s",
                      LAYOUT_BOUNDS, errors)  # fmt: skip
    return ok


class _Pad:
    pad_token_id = 0


def check_determinism(dev: torch.device) -> bool:
    """A packed joint step as ``train_joint`` takes it — :func:`small_model` (4-bit as training
    loads it, LoRA with dropout on every linear layer, the energy head), two packed micro-batches
    through :func:`burnqed.train.joint.accumulate` (flex attention and the fused loss on CUDA) —
    twice under :func:`burnqed.determinism.deterministic_training`, as training runs (strict: an op
    without a deterministic implementation raises); every gradient must be bit-identical."""
    from burnqed.config import SFTConfig
    from burnqed.determinism import deterministic_training
    from burnqed.train.joint import LossScales, _to, accumulate, collate_packed, packed_width

    cuda = dev.type == "cuda"
    sft = SFTConfig(batch_size=2, max_length=256 if cuda else 48, joint_groups_per_step=2,
                    joint_state_max_length=64 if cuda else 16)  # fmt: skip
    k1 = 4
    model, head, vocab = small_model(dev)
    rng = random.Random(0)

    def ids(n: int) -> list[int]:
        return [rng.randrange(3, vocab) for _ in range(n)]

    n, m = sft.max_length, sft.joint_state_max_length
    rows = [(x := ids(n - 7 * i), [-100] * (n // 2) + x[n // 2 :]) for i in range(2)]
    batch = collate_packed(_Pad, rows, [ids(m - i) for i in range(2 * k1)],
                           [ids(m) for _ in range(2)], k1, width=packed_width(sft, k1))  # fmt: skip
    batch = _to(batch, dev)

    def step() -> list[torch.Tensor]:
        with deterministic_training(seed=0, device=dev.type):
            model.zero_grad(set_to_none=True)
            head.zero_grad(set_to_none=True)
            model.train()
            accumulate(model, head, [batch, batch], LossScales(), lam=0.1, pooling="last",
                       grad_accum=2, remaining_weight=0.0)  # fmt: skip
            sync(dev)
        params = [*model.parameters(), *head.parameters()]
        return [p.grad.detach().clone() for p in params if p.grad is not None]

    try:
        first, second = step(), step()
    except RuntimeError as e:  # strict determinism refused an op
        logging.error("a packed joint step under deterministic_training failed: %s", e)
        out("deterministic_step_identical", 0)
        return False
    same = len(first) == len(second) > 0 and all(
        torch.equal(a, b) for a, b in zip(first, second, strict=True)
    )
    out("deterministic_step_gradients", len(first))
    out("deterministic_step_identical", int(same))
    return same


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="the CPU, tiny sizes: that it runs (CI)")
    p.add_argument("--repeat", type=int, default=10, help="timed calls per figure (median)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if not args.smoke and not torch.cuda.is_available():
        print("bench/packed_attention.py: no CUDA device (--smoke runs the checks on the CPU at "
              "a tiny size)", file=sys.stderr)  # fmt: skip
        return 2
    dev = torch.device("cpu" if args.smoke else "cuda")
    if args.smoke:
        lengths, heads, dim, repeat = [64] * 2 + [32] * 6, 2, 16, 2
        tokens, hidden, vocab = 64, 32, 500
    else:
        lengths, heads, dim, repeat = [1024] * 8 + [512] * 36, 32, 128, args.repeat
        tokens, hidden, vocab = 4096, 4096, 102400
    out("device", torch.cuda.get_device_name(0).replace(" ", "_") if dev.type == "cuda" else "cpu")
    out("torch", torch.__version__)
    width = packing.round_width(sum(lengths))
    out("sequences", f"{len(lengths)} ({sum(lengths)} tokens packed in {width} positions)")
    out("heads", f"{heads}x{dim}")
    out("loss_shape", f"{tokens}x{vocab}x{hidden}")
    out("loss_kernel", kernel(dev))
    out("repeat", repeat)
    ok = check_attention(dev, lengths, heads, dim, repeat)
    ok = check_loss(dev, tokens, hidden, vocab, repeat) and ok
    ok = check_layouts(dev) and ok
    ok = check_determinism(dev) and ok
    out("checks_passed", int(ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
