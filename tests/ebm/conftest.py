"""Toy search trajectories for the EBM tests (a real search engine over the toy logic)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from burnqed.config import SearchConfig
from burnqed.search.engine import search_all
from burnqed.trajectory import TrajectoryWriter
from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems

# Small and quick (a fraction of a second per search), with ~half the theorems proved.
SEARCH = SearchConfig(max_nodes=12, num_candidates=4, concurrency=8, checkpoint_every=10)

EBM = {
    "hidden_sizes": [32, 16],
    "dropout": 0.1,
    "negatives": 3,
    "remaining_steps_weight": 1.0,
    "steps": 60,
    "batch_size": 16,
    "learning_rate": 3e-3,
    "temperature_learning_rate": 0.05,
    "temperature_init": 1.0,
    "temperature_min": 0.05,
    "temperature_max": 20.0,
    "checkpoint_every": 40,
    "embed_batch_size": 16,
    "log_every": 20,
    "save_every": 20,
    "fit_folds": 5,
    "fit_depth": False,
    "fallback": "none",
}


def toy_search(out: Path, *, theorems: int, seed: int) -> Path:
    async def go():
        with TrajectoryWriter(out, checkpoint_every=SEARCH.checkpoint_every) as w:
            await search_all(
                toy_theorems(theorems, seed=0, low=3, high=9),
                RandomToyPolicy(seed=seed, allow_cheat=False),
                ToyEnv(),
                SEARCH,
                writer=w,
            )

    asyncio.run(go())
    return out


@pytest.fixture(scope="package")
def searches(tmp_path_factory) -> list[Path]:
    """An iteration-0 search (2 shards) and a noise search over the same 24 toy theorems."""
    root = tmp_path_factory.mktemp("results") / "iter_0"
    toy_search(root / "search" / "shard_0", theorems=24, seed=0)
    toy_search(root / "search_noise" / "shard_0", theorems=24, seed=1)
    (root / "search" / "manifest.json").write_text("{}")
    (root / "search_noise" / "manifest.json").write_text("{}")
    return [root / "search", root / "search_noise"]
