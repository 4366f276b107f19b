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
  the output and the gradients of q, k and v (the largest of the four); the packed flex attention
  is also timed against SDPA over the same sequences right-padded to 1,024 (the layout before
  packing: 44 rows, causal, padding masked);
- **no recompile**: a second packed layout (other boundaries, the same width) must run without
  compiling again (its first call timed);
- **loss**: the fused loss (Liger where installed, else the chunked loss) against float32
  cross-entropy over the whole logits, at 4,096 scored tokens (half of the SFT rows') × the
  102,400-token vocabulary: the loss's and the hidden states' gradient's relative errors, time
  and peak memory of each.

- **determinism**: a packed joint step of a small random Llama loaded as training loads it (NF4 on
  CUDA, LoRA with dropout, the head), twice under the strict deterministic mode ``train_joint``
  runs in (:func:`check_determinism`): the gradients must be bit-identical.

Exit status 1 when an error is over its bound (attention 2× SDPA-bf16's own error plus 1e-3;
loss 1e-3; gradient 2e-2), the second layout compiled again (over 2 s) or the deterministic step
failed or differed.  ``--smoke`` runs the
same checks on the CPU at a tiny size (eager flex attention, the chunked loss; the times mean
nothing there).

Prints (parameters first; these figures last, one ``name=value`` a line):

- ``flex_rel_err``: flex attention's relative error against the float32 reference
- ``sdpa_mask_rel_err``: SDPA's with the dense mask in bf16, the same measure
- ``flex_first_call_s``: the first packed call, forward and backward (compilation included)
- ``flex_new_layout_s``: the first call on a second layout (no compilation: well under a second)
- ``flex_ms``: packed flex attention, forward + backward, median (ms)
- ``sdpa_padded_ms``: SDPA over the same sequences right-padded, forward + backward, median (ms)
- ``loss_rel_err``: the fused loss's relative error against whole-logits float32 cross-entropy
- ``loss_grad_rel_err``: its hidden-state gradient's
- ``fused_loss_ms``: the fused loss, forward + backward, median (ms)
- ``full_loss_ms``: whole bf16 logits and float32 cross-entropy, forward + backward, median (ms)
- ``fused_loss_peak_gib``: peak memory above the inputs of the fused loss (GiB; CPU: 0)
- ``full_loss_peak_gib``: the same for the whole logits (GiB; CPU: 0)
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

import torch

from burnqed.train import packing
from burnqed.train.fused_loss import kernel, linear_cross_entropy

GIB = 2**30


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
    """Each position's sequence index (``packing``'s ``doc``), the padding one past the last."""
    doc = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    return torch.cat([doc, torch.full((width - len(doc),), len(lengths))]).to(dev)


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


def check_attention(dev: torch.device, lengths: list[int], heads: int, dim: int,
                    repeat: int) -> bool:  # fmt: skip
    width = packing.round_width(sum(lengths))
    doc = layout(lengths, width, dev)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    gen = torch.Generator(device=dev).manual_seed(0)
    q, k, v, g = (torch.randn(1, heads, width, dim, device=dev, generator=gen) for _ in range(4))
    dense = packing.dense_mask(doc)

    def sdpa_mask(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense)

    block = packing.block_mask(doc)
    flex_fn = packing._flex() if dev.type == "cuda" else _eager_flex()

    def flex(q, k, v):
        return flex_fn(q, k, v, block_mask=block)

    bwd = dev.type == "cuda"  # the CPU's eager flex attention has no backward: forward only
    ref = attention_pass(sdpa_mask, q, k, v, g, bwd)  # float32
    low = [t.to(dtype) for t in (q, k, v, g)]
    sync(dev)
    t0 = time.perf_counter()
    got = attention_pass(flex, *low, bwd)
    sync(dev)
    out("flex_first_call_s", time.perf_counter() - t0)
    flex_err = max(rel(a, b) for a, b in zip(got, ref, strict=True))
    sdpa = attention_pass(sdpa_mask, *low, bwd)
    sdpa_err = max(rel(a, b) for a, b in zip(sdpa, ref, strict=True))
    out("flex_rel_err", flex_err)
    out("sdpa_mask_rel_err", sdpa_err)
    # A second layout (other boundaries, the same width): the same compiled kernel.
    rng = random.Random(1)
    other = list(lengths)
    rng.shuffle(other)
    other[0] -= 1
    block = packing.block_mask(layout(other, width, dev))
    sync(dev)
    t0 = time.perf_counter()
    attention_pass(flex, *low, bwd)
    sync(dev)
    new_layout = time.perf_counter() - t0
    out("flex_new_layout_s", new_layout)
    out("flex_ms", 1e3 * median_s(lambda: attention_pass(flex, *low, bwd), dev, repeat))
    # Before packing: the same sequences right-padded to the longest, causal with padding masked.
    rows, longest = len(lengths), max(lengths)
    keep = torch.arange(longest, device=dev)[None, :] < torch.tensor(lengths, device=dev)[:, None]
    causal = torch.ones(longest, longest, dtype=torch.bool, device=dev).tril()
    padded_mask = (causal[None] & keep[:, None, :])[:, None]  # (rows, 1, T, T)
    pq, pk, pv, pg = (torch.randn(rows, heads, longest, dim, device=dev, dtype=dtype,
                                  generator=gen) for _ in range(4))  # fmt: skip

    def padded(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=padded_mask)

    out("sdpa_padded_ms", 1e3 * median_s(lambda: attention_pass(padded, pq, pk, pv, pg, bwd),
                                          dev, repeat))  # fmt: skip
    ok = flex_err <= 2 * sdpa_err + 1e-3 and new_layout < 2.0
    if not ok:
        logging.error("flex attention: error %.3g (SDPA bf16 %.3g), new layout %.2f s", flex_err,
                      sdpa_err, new_layout)  # fmt: skip
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


def check_determinism(dev: torch.device) -> bool:
    """A packed joint step as ``train_joint`` takes it — a small random Llama loaded 4-bit as
    training loads it (:func:`burnqed.train.loop.load_base_model`), LoRA with dropout on every
    linear layer, the energy head, two packed micro-batches through
    :func:`burnqed.train.joint.accumulate` (flex attention and the fused loss on CUDA) — twice under
    :func:`burnqed.determinism.deterministic_training`, as training runs (strict: an op without a
    deterministic implementation raises); every gradient must be bit-identical."""
    import tempfile
    from pathlib import Path

    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from burnqed.config import EBMConfig, SFTConfig
    from burnqed.determinism import deterministic_training
    from burnqed.ebm.train import build_head
    from burnqed.train.joint import LossScales, _to, accumulate, collate_packed, packed_width
    from burnqed.train.loop import keep_lora_inputs_bf16, load_base_model
    from burnqed.train.memory import TARGET_MODULES

    cuda = dev.type == "cuda"
    hidden, heads, vocab = (512, 4, 4096) if cuda else (64, 2, 300)  # head dim 128 on CUDA
    sft = SFTConfig(batch_size=2, max_length=256 if cuda else 48, joint_groups_per_step=2,
                    joint_state_max_length=64 if cuda else 16)  # fmt: skip
    k1 = 4
    config = LlamaConfig(num_hidden_layers=2, hidden_size=hidden, intermediate_size=3 * hidden,
                         num_attention_heads=heads, num_key_value_heads=heads, vocab_size=vocab)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        torch.manual_seed(0)
        LlamaForCausalLM(config).to(torch.bfloat16 if cuda else torch.float32).save_pretrained(tmp)
        model = load_base_model(Path(tmp), quantization="nf4", cuda=cuda)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05,
                                             target_modules=list(TARGET_MODULES),
                                             task_type="CAUSAL_LM"))  # fmt: skip
    packing.enable(model)
    if cuda:
        keep_lora_inputs_bf16(model)
    head = build_head(hidden, EBMConfig(hidden_sizes=(64, 32))).to(dev).eval()  # no power steps
    rng = random.Random(0)

    def ids(n: int) -> list[int]:
        return [rng.randrange(3, vocab) for _ in range(n)]

    n, m = sft.max_length, sft.joint_state_max_length
    rows = [(x := ids(n - 7 * i), [-100] * (n // 2) + x[n // 2 :]) for i in range(2)]

    class Pad:
        pad_token_id = 0

    batch = collate_packed(Pad, rows, [ids(m - i) for i in range(2 * k1)],
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
    ok = check_determinism(dev) and ok
    out("checks_passed", int(ok))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
