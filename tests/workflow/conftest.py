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

from burnqed import isa
from tests import snakemake_cli

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# Shrinks config/demo.yaml to a few seconds per job: 4 theorems searched, a 32-wide model (one head:
# head_dim 32), two iterations — the demo's third (design P4) repeats its second's jobs, so a test
# that needs it asks for it (``make_tiny_repo(..., iterations=3)``).
TINY = {
    "iterations": 2,
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


def make_repo(
    dest: Path, *, profiles: bool = False, link_code: bool = False, **overrides: dict
) -> Path:
    """The workflow's files in ``dest``, a tiny overlay ``tiny.yaml`` (TINY updated section by
    section with ``overrides``), as a git repository with one commit.  ``profiles``: with the
    repository's workflow profile (profiles/default: a killed run resumes by the same command).
    ``link_code``: ``burnqed/`` a link to this checkout's, not a copy, so the artifacts record
    this checkout's commit (two runs that must match to the bit — tests/workflow/loops.py — are
    two repositories with two commits, as a user's two runs of one checkout are not)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "params.yaml", ".dvcignore", "constraints.txt"):
        shutil.copy(REPO / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "tmp", "cache", "config.local")
    names = ("rules", "workflow", "config", ".dvc", *(("profiles",) if profiles else ()))
    for name in names:
        shutil.copytree(REPO / name, dest / name, ignore=ignore)
    if link_code:
        (dest / "burnqed").symlink_to(REPO / "burnqed")
    else:
        shutil.copytree(REPO / "burnqed", dest / "burnqed", ignore=ignore)
    shutil.copy(REPO / ".gitignore", dest / ".gitignore")
    tiny = {k: dict(v) if isinstance(v, dict) else v for k, v in TINY.items()}
    for section, values in overrides.items():
        if isinstance(values, dict):
            tiny.setdefault(section, {}).update(values)
        else:  # a top-level value (iterations, cache)
            tiny[section] = values
    (dest / "tiny.yaml").write_text(yaml.safe_dump(tiny), encoding="utf-8")
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "tiny"]):
        subprocess.run(cmd, cwd=dest, env=tiny_env(), check=True, capture_output=True)
    return dest


@pytest.fixture(scope="module")
def make_tiny_repo() -> Callable[..., Path]:
    """``make_tiny_repo(dest, **overrides)``: :func:`make_repo`."""
    return make_repo


def snakemake_argv(*args: str) -> list[str]:
    """Snakemake's command line on the tiny overlay (``--configfile`` goes last: it takes several
    values)."""
    return [snakemake_cli.SNAKEMAKE, *args, "--configfile", "config/demo.yaml", "tiny.yaml"]


def snakemake(
    workdir: Path, *args: str, env: dict | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Snakemake on the tiny overlay, to the end (forked from a process that imported it:
    tests/snakemake_cli.py)."""
    return snakemake_cli.run(
        snakemake_argv(*args), cwd=workdir, env=env or tiny_env(), timeout=timeout
    )


@pytest.fixture(scope="module")
def run_snakemake() -> Callable[..., subprocess.CompletedProcess]:
    return snakemake


# Iteration 0's search and noise search: what the demo's artifact tests (the clean loop of
# tests/workflow/loops.py) and the DVC round trip look at first.
DEMO_TARGETS = ("results/iter_0/search/manifest.json", "results/iter_0/search_noise/manifest.json")
# What a user may have exported: every variable of the instruction-set pin set below the
# machine's level (tests/workflow/test_demo_workflow.py checks that the Snakefile's pin wins).
LOWERED = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
}


def demo_env() -> dict[str, str]:
    """The demo's Snakemake environment: :func:`tiny_env` without this test process's pin
    (tests/conftest.py applies it) and with :data:`LOWERED`."""
    env = {k: v for k, v in tiny_env().items()
           if k not in isa.VARIABLES and not k.startswith("BURNQED_")}  # fmt: skip
    return {**env, **LOWERED}


@pytest.fixture(scope="session")
def loops(tmp_path_factory):
    """The shrunken loop's two runs, started together (tests/workflow/loops.py): minutes on 2
    cores, so built once for test_loop.py, test_demo_workflow.py and test_dvc.py (one xdist
    group, tests/conftest.py; all marked slow)."""
    from tests.workflow.loops import Loops

    loops = Loops.start(tmp_path_factory.mktemp("loops"))
    try:
        yield loops
    finally:
        loops.stop()


@pytest.fixture(scope="session")
def loop(loops) -> Path:
    """The clean run of the whole loop, finished.  A test that edits it puts it back."""
    return loops.clean()


@pytest.fixture(scope="session")
def resumed(loops):
    """The killed run, resumed and finished (tests/workflow/loops.py: Resumed)."""
    return loops.resumed()
