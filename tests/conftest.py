"""Shared test set-up: offline, CPU-only, hermetic."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from burnqed.isa import apply_pin, setting_from

# Tests run under the project's instruction-set pin, applied before anything imports torch, as the
# workflow and the CLI run (burnqed/isa.py); BURNQED_CPU_ISA=native runs them unpinned.
apply_pin(setting_from(None))

# No hub, no analytics, no network: everything a test needs is built in tmp_path.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MINIF2F = SHARED / "data" / "minif2f" / "minif2f.jsonl"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def minif2f_path() -> Path:
    """The pinned real miniF2F file beside the repo (present in CI); never copied into the repo."""
    if not MINIF2F.exists():
        pytest.fail(f"shared miniF2F file not found at {MINIF2F} (it must lie beside the repo)")
    return MINIF2F
