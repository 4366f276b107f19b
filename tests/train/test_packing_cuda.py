"""The packed step on CUDA (issue 62): checks the CPU cannot make, marked ``gpu`` (deselected by
default; ``python -m pytest -m gpu``) and skipped without CUDA.

The CPU tests (``test_packing.py``) hold packing to the padded layout in float32 with eager flex
attention forward only; here the compiled kernels, in bf16, forward and backward:

- flex attention with the block mask of an **unaligned** layout — boundaries inside 128-blocks and
  a padding tail of several blocks, at the joint micro-batch's shape (44 sequences, 26,624
  positions, 32 heads of 128) — against SDPA with the dense mask in float32, forward and backward:
  within twice SDPA-bf16's own error plus 1e-3 (``bench/packed_attention.py``'s bound);
- a small model's packed bf16 step (NF4, flex attention, the fused loss, bf16 autocast) against its
  padded float32 step (the same 4-bit weights, SDPA, whole logits): losses, pooled embeddings and
  every LoRA and head gradient within ``bench/packed_attention.py``'s ``LAYOUT_BOUNDS`` (three
  times what bf16 against float32 gives on the CPU for that model; a wrong mask, shift or pool is
  tens of percent off).

Both call the functions ``bench/packed_attention.py`` runs on the GPU machine, so the bench and the
tests check one thing.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from tests.conftest import REPO

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "bench_packed_attention", REPO / "bench" / "packed_attention.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flex_attention_on_an_unaligned_layout_is_dense_sdpa_forward_and_backward(bench):
    from burnqed.train import packing

    dev = torch.device("cuda")
    full = [1024] * 8 + [512] * 36
    width = packing.round_width(sum(full))
    lengths = bench.unaligned(full, seed=1)
    assert all(n % packing.BLOCK for n in lengths) and width - sum(lengths) > 4 * packing.BLOCK
    errors = bench.attention_errors(dev, bench.layout(lengths, width, dev), 32, 128, seed=1)
    assert errors["sdpa"] > 0  # bf16 against float32: a real comparison
    assert bench.attention_within_bound(errors), errors


def test_a_packed_bf16_step_is_the_padded_float32_step_within_bf16_tolerances(bench):
    errors = bench.layout_step_errors(torch.device("cuda"))
    bounds = bench.LAYOUT_BOUNDS
    assert errors["gradients"] >= 28, errors  # every LoRA tensor of the 2 layers, and the head's
    assert errors["loss_rel"] <= bounds["loss_rel"], errors
    assert errors["pooled_rel"] <= bounds["pooled_rel"], errors
    assert errors["grad_rel"] <= bounds["grad_rel"], errors
    assert errors["grad_cos"] >= bounds["grad_cos"], errors
