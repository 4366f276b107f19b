"""A tiny copy of the workflow to run for real: the demo overlay shrunk to seconds per job."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Shrinks config/demo.yaml to a few seconds per job: 4 theorems searched, a 32-wide model (one head: head_dim 32).
TINY = {
    "data": {
        "proplogic": {"theorems": 60, "max_depth": 3, "test_theorems": 4},
        "val_fraction": 0.1,
    },
    "lean": {"workers": 1},
    "model": {
        "tiny": {
            "hidden_size": 32,
            "heads": 1,
            "intermediate_size": 64,
            "steps": 4,
            "max_seconds": 30,
            "warmup_steps": 1,
            "log_every": 2,
            "eval_pairs": 0,
        },
    },
    "sft": {"max_steps": 1, "eval_steps": 1, "batch_size": 4, "warmup_steps": 0},
    "search": {"max_nodes": 3, "timeout_s": 30, "concurrency": 1, "checkpoint_every": 2},
}


def tiny_env(**extra: str) -> dict[str, str]:
    return dict(
        os.environ,
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        DVC_NO_ANALYTICS="1",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
        **extra,
    )


@pytest.fixture(scope="module")
def make_tiny_repo() -> Callable[..., Path]:
    """``make_tiny_repo(dest, **overrides)``: the workflow's files, a tiny overlay ``tiny.yaml``
    (TINY updated section by section with ``overrides``), as a git repository with one commit."""

    def make(dest: Path, **overrides: dict) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("Snakefile", "params.yaml", ".dvcignore"):
            shutil.copy(REPO / name, dest / name)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "tmp", "cache", "config.local")
        for name in ("rules", "workflow", "config", "burnqed", ".dvc"):
            shutil.copytree(REPO / name, dest / name, ignore=ignore)
        shutil.copy(REPO / ".gitignore", dest / ".gitignore")
        tiny = {k: dict(v) for k, v in TINY.items()}
        for section, values in overrides.items():
            tiny.setdefault(section, {}).update(values)
        (dest / "tiny.yaml").write_text(yaml.safe_dump(tiny), encoding="utf-8")
        for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "tiny"]):
            subprocess.run(cmd, cwd=dest, env=tiny_env(), check=True, capture_output=True)
        return dest

    return make


def snakemake(workdir: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """Snakemake on the tiny overlay (``--configfile`` goes last: it takes several values)."""
    exe = shutil.which("snakemake", path=str(BIN)) or "snakemake"
    return subprocess.run(
        [exe, *args, "--configfile", "config/demo.yaml", "tiny.yaml"],
        cwd=workdir,
        env=env or tiny_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def run_snakemake() -> Callable[..., subprocess.CompletedProcess]:
    return snakemake
