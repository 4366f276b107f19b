"""Shared test set-up: offline, CPU-only, hermetic; and how the suite shares the 2 cores.

``python -m pytest`` runs on three pytest-xdist workers (pyproject's ``addopts``: ``-n 3 --dist
loadscope``; the third fills the time the others wait on the processes their tests start).  Three
things here make that pay:

- **One torch thread per worker, and no spinning.**  Two workers each running torch on both
  cores spin against each other (the 2-thread default lost 5–10x per step on a shared 2-core
  machine, see tests/train/conftest.py); each worker and what it starts without a thread count
  of its own (``burnqed`` commands) runs torch on one thread.  Snakemake jobs still get their
  rule's ``threads`` (the shims call ``torch.set_num_threads``), so OpenMP's idle threads sleep
  rather than spin (``OMP_WAIT_POLICY``); the tests that pin a thread count for their bytes
  (tests/train, tests/ebm, tests/report) set it themselves.
- **Tests that share an expensive fixture run on one worker**, so it is built once:
  :data:`SHARED_FIXTURE_GROUPS` (package- or session-scoped fixtures; xdist's ``loadscope``
  alone groups by module and would build them on several workers).
- **The longest groups start first** (:data:`LONG_FIRST`), so no worker is left with one
  at the end.
"""

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

# Set before any test module imports torch, which reads them once (see the module docstring).
# Threads waiting at OpenMP barriers sleep instead of spinning: the tests' Snakemake jobs run torch
# on their rules' 2 threads beside the other worker, and a spinning thread takes the core its
# partner needs (a 2-thread training step on a loaded 2-core machine: 2.3 s passive, 4.5–18 s
# spinning, 2.4 s on one thread).  How threads wait changes no result.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if XDIST_WORKER:
    os.environ["OMP_NUM_THREADS"] = "1"

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


# Path prefix -> the group (one xdist work unit) of every test under it: the package-scoped
# fixtures of tests/train (the tactic pairs, the tiny base, the LoRA adapter), tests/ebm (the toy
# searches) and tests/report (the EBM runs), the session-scoped tiny model of tests/policy, and
# the shrunken loop's two runs (tests/workflow/loops.py; slow) that the demo's artifact tests
# read and the DVC tests push and pull.
SHARED_FIXTURE_GROUPS = (
    ("tests/train/", "tests/train"),
    ("tests/ebm/", "tests/ebm"),
    ("tests/report/", "tests/report"),
    ("tests/policy/", "tests/policy"),
    ("tests/workflow/test_demo_workflow.py", "demo workflow"),
    ("tests/workflow/test_dvc.py", "demo workflow"),
    ("tests/workflow/test_loop.py", "demo workflow"),
)
# Groups by their length on one worker, longest first (measured with --durations on 2 cores);
# every other module follows in collection order.
LONG_FIRST = ("demo workflow", "tests/policy", "tests/train", "tests/workflow/test_readme.py",
              "tests/workflow/test_workflow.py", "tests/lean/test_pool.py")  # fmt: skip


def xdist_group_of(nodeid: str) -> str:
    """The xdist work unit of a test: its fixture-sharing group, else its module.

    >>> xdist_group_of("tests/train/test_sft.py::test_x"), xdist_group_of("tests/lean/test_pool.py::t[1]")
    ('tests/train', 'tests/lean/test_pool.py')
    """
    path = nodeid.split("::", 1)[0]
    return next((group for prefix, group in SHARED_FIXTURE_GROUPS if path.startswith(prefix)), path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long groups first (a stable sort: the order inside a group is kept).  Every worker sorts
    its own collection the same way, as xdist requires."""

    def rank(item: pytest.Item) -> int:
        group = xdist_group_of(item.nodeid)
        return LONG_FIRST.index(group) if group in LONG_FIRST else len(LONG_FIRST)

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadscope`` with :func:`xdist_group_of` as the scope; other ``--dist`` modes as xdist
    has them."""
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return SharedFixtureScheduling(config, log)
