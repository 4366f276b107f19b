"""Shared artifacts for the model-stage tests: pairs, a tiny base, a LoRA adapter.

Built once for the package (``tests/train``) in a temporary directory, with budgets of a few dozen
steps, so the whole run stays in the tens of seconds on 2 CPU cores.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.train.pairs import write_pairs

# The smallest model the servers would accept (head_dim 32), trained just long enough to learn.
TINY = {
    "vocab_size": 400,
    "hidden_size": 64,
    "layers": 2,
    "heads": 2,
    "intermediate_size": 128,
    "max_length": 256,
    "steps": 80,
    "batch_size": 32,
    "learning_rate": 3e-3,
    "warmup_steps": 10,
    "log_every": 10,
    "eval_pairs": 24,
}

# An SFT small enough for seconds: 6 steps, evaluated at 3 and 6.
SFT = {
    "quantization": "none",
    "lora_r": 4,
    "lora_alpha": 8,
    "lora_dropout": 0.0,
    "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    "learning_rate": 2e-3,
    "lr_scheduler": "cosine",
    "warmup_steps": 2,
    "batch_size": 8,
    "grad_accum": 1,
    "max_length": 256,
    "max_steps": 6,
    "lr_decay": 0.5,
    "later_max_steps": 3,
    "base_pair_subsample": 200,
    "positive_upsample": 10,
    "eval_steps": 3,
}


@pytest.fixture(scope="package", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """Run torch on one thread here, restoring the setting after the package.

    Models this small gain little from a second thread, and lose 5–10× per step when the cores are
    shared with other work (measured on a busy 2-core machine: 113 ms vs 700+ ms per step).
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="package")
def pairs(tmp_path_factory, one_torch_thread) -> dict[str, Path]:
    """``train`` (~1.4k pairs of 300 theorems) and ``val`` (~40 pairs of other theorems)."""
    root = tmp_path_factory.mktemp("tactic_pairs")
    return {
        "train": write_pairs(root / "train.parquet", 300, seed=0, prefix="t"),
        "val": write_pairs(root / "val.parquet", 8, seed=1, prefix="v"),
    }


@pytest.fixture(scope="package")
def tiny_base(tmp_path_factory, pairs) -> Path:
    from burnqed.train.base import build_base

    out = tmp_path_factory.mktemp("models") / "base"
    build_base(out=out, cfg={"base": "tiny"}, pairs=pairs["train"], seed=0, tiny=TINY,
               val=pairs["val"])  # fmt: skip
    return out


@pytest.fixture(scope="package")
def lora_adapter(tmp_path_factory, tiny_base, pairs) -> Path:
    from burnqed.train.sft import train_sft

    out = tmp_path_factory.mktemp("iter_0") / "adapter"
    train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out, cfg=SFT, seed=0)
    return out
