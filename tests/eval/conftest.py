"""Eval test set-up: a pinned toy benchmark, the search stage's backends replaced by fakes, and a
deterministic toy search written as an eval's trajectory directory."""

from __future__ import annotations

import asyncio
import json
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from burnqed.config import SearchConfig
from burnqed.data.benchmarks import sha256_file
from burnqed.policy import SamplingParams
from burnqed.search.stage import search_to_dir
from burnqed.theorems import Theorem, write_theorems
from tests.search.fakes import ToyEnv, toy_theorems

SEARCH = {
    **SearchConfig().to_dict(),
    "max_depth": 30,
    "num_candidates": 4,
    "concurrency": 3,
    "checkpoint_every": 5,
}
LEAN = {"repl_command": ["unused"], "imports": []}
POLICY = {"backend": "transformers", "server_command": None, "embedding_server_command": None}


def write_benchmark(directory: Path, theorems: Sequence[Theorem], name: str = "toy_test") -> Path:
    """``<name>.jsonl`` + ``.meta.json`` the way the data stage writes a generated benchmark."""
    jsonl = directory / f"{name}.jsonl"
    write_theorems(jsonl, theorems)
    meta = {
        "benchmark": "proplogic",  # a generated benchmark: pinned by the hash of the file written
        "split": "test",
        "rows": len(theorems),
        "sha256": sha256_file(jsonl),
        "source_sha256": None,
        "lean": "toy",
        "mathlib": None,
        "known_defects": [],
    }
    (directory / f"{name}.meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return jsonl


@pytest.fixture()
def benchmark(tmp_path) -> Path:
    return write_benchmark(tmp_path, toy_theorems(10, seed=7, low=4, high=16))


def toy_search(
    out: Path,
    theorems: Sequence[Theorem],
    policy,
    *,
    max_nodes: int,
    attempts: int = 1,
    env: ToyEnv | None = None,
    k: int = 1,
    depth_normalisation: float = 0.0,
    temperature: float = 0.8,
) -> dict:
    """One search into ``out`` popping ``k`` nodes per step (a smaller budget is a prefix), sampling
    at ``temperature`` (recorded in its manifest, which the eval copies into its provenance)."""
    # Errors are what some tests plant: the search must not fail on them (the eval reports them).
    cfg = SearchConfig.from_dict(
        {
            **SEARCH,
            "max_nodes": max_nodes,
            "attempts": attempts,
            "max_error_fraction": 1.0,
            "expansions_per_step": k,
            "depth_normalisation": depth_normalisation,
        }
    )
    return asyncio.run(
        search_to_dir(
            theorems, policy, env or ToyEnv(), cfg, out,
            sampling=SamplingParams(n=cfg.num_candidates, temperature=temperature),
        )
    )  # fmt: skip


@pytest.fixture()
def fake_backends(monkeypatch) -> Callable:
    """``with fake_backends(policy, env) as opened:`` — ``run`` opens these instead of a model and
    Lean workers; ``opened`` records what it asked for."""

    @contextmanager
    def install(policy, env) -> Iterator[dict]:
        backend = types.ModuleType("burnqed.policy.backend")
        opened: dict = {}

        @contextmanager
        def open_generator(cfg, model, *, embeddings=False):
            opened["model"] = model
            yield policy

        backend.open_generator = open_generator

        class Pool:
            def __init__(self, cfg, *, log_dir=None):
                pass

            async def __aenter__(self):
                return env

            async def __aexit__(self, *exc):
                return None

        pool = types.ModuleType("burnqed.lean.pool")
        pool.LeanPool = Pool
        monkeypatch.setitem(sys.modules, "burnqed.policy.backend", backend)
        monkeypatch.setitem(sys.modules, "burnqed.lean.pool", pool)
        monkeypatch.setattr("burnqed.search.stage.check_repl", lambda cfg: "fake")  # no REPL at all
        yield opened

    return install
