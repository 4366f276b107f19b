"""Report test set-up: gate inputs built by the real writers — evals by the eval stage over toy
searches, embedding metrics by the EBM stage (embed → train → metrics) over a toy search whose states
are distinct per theorem, with embeddings built here: healthy or collapsed, under the default
pooling (last token, L2-normalised)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

import burnqed.policy.backend
from burnqed.config import SearchConfig
from burnqed.data.prompt import embedding_text
from burnqed.ebm.groups import load_states
from burnqed.ebm.stage import run_embed, run_metrics, run_train
from burnqed.eval.stage import run as eval_run
from burnqed.search.engine import search_all
from burnqed.theorems import read_theorems
from burnqed.trajectory import TrajectoryWriter
from tests.ebm.conftest import EBM
from tests.ebm.fakes import DIM, ToyEmbedder
from tests.eval.conftest import LEAN, POLICY, SEARCH, toy_search
from tests.search.fakes import RandomToyPolicy, ToyEnv, ToySession, ToySuccess, toy_theorems


def make_eval(
    root: Path, benchmark: Path, label: str, policy, *, searched=None, budgets=(4, 12), env=None,
    temperature: float = 0.8,
):  # fmt: skip
    """A toy search of ``searched`` (default: the whole benchmark) scored by the eval stage."""
    theorems = list(read_theorems(benchmark))
    traj = root / label / "eval"
    if searched == 0:
        TrajectoryWriter(traj).close()  # an empty run: the directory, no attempts
    else:
        toy_search(traj, theorems[:searched], policy, max_nodes=max(budgets), env=env,
                   temperature=temperature)  # fmt: skip
    cfg = {"budgets": list(budgets), "pass_n": 1, "num_candidates": 4, "benchmark": "toy"}
    eval_run(model="m", benchmark=benchmark, trajectories=traj, out=root / label / "eval.json",
             cfg=cfg, search=SEARCH, lean=LEAN, policy=POLICY, run_search=False)  # fmt: skip
    return root / label / "eval.json"


class _NamedSession(ToySession):
    """A toy session whose state texts start with the theorem's name: every state is its own."""

    def __init__(self, env, theorem) -> None:
        super().__init__(env, theorem)
        self.root = dataclasses.replace(self.root, text=f"{theorem.name}\n{self.root.text}")

    async def apply(self, state, tactic):
        r = await super().apply(state, tactic)
        if isinstance(r, ToySuccess):
            text = f"{self.theorem.name}\n{r.state.text}"
            r = dataclasses.replace(r, state=dataclasses.replace(r.state, text=text))
        return r


class _NamedEnv(ToyEnv):
    async def start(self, theorem):
        await super().start(theorem)
        return _NamedSession(self, theorem)


# name → (label offset, noise): raw state = common + ±offset/2 · u by label + noise · N(0, I),
# then L2-normalised.  healthy: centroids as far apart as a state from its own (separation ≈ 1);
# collapse80: the reproduced system's collapse, the offset cut by 80 % (6.40 → 1.33); collapsed:
# every state near one point; identical: every state the same vector (all energies tie).
EMBEDDINGS = {
    "healthy": (2.0, 0.5),
    "collapse80": (0.4, 0.5),
    "collapsed": (0.0, 0.01),
    "identical": (0.0, 0.0),
}


def _embedder(positives: set[str], offset: float, noise: float):
    rng = np.random.default_rng(0)
    u = rng.standard_normal(DIM)
    u /= np.linalg.norm(u)
    common = rng.standard_normal(DIM)
    common *= 3.0 / np.linalg.norm(common)  # what every state shares: cosine ≈ 0.9 between states

    def vector(text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
        sign = 1.0 if text in positives else -1.0
        v = (
            common
            + sign * offset / 2 * u
            + noise * np.random.default_rng(seed).standard_normal(DIM)
        )
        return (v / np.linalg.norm(v)).astype(np.float32)  # policy.pooling: last

    class Embedder(ToyEmbedder):
        def embed(self, texts):
            return np.stack([vector(t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)

    return Embedder


@pytest.fixture(scope="package")
def embedding_runs(tmp_path_factory) -> dict[str, dict]:
    """``{scenario: {"metrics": ebm_metrics.json, "ebm": EBM dir}}`` written by the EBM stage."""
    root = tmp_path_factory.mktemp("ebm_gates")
    search = root / "iter_0" / "search"
    cfg = SearchConfig(max_nodes=16, num_candidates=4, concurrency=8, checkpoint_every=10)

    async def go():
        with TrajectoryWriter(search, checkpoint_every=10) as w:
            await search_all(toy_theorems(40, seed=0, low=3, high=9),
                             RandomToyPolicy(seed=0, allow_cheat=False), _NamedEnv(), cfg, writer=w)  # fmt: skip

    asyncio.run(go())
    data = load_states([search])
    # The EBM stage embeds each state as the policy's prompt for it (issue 30 §5).
    positives = {embedding_text(data.texts[h]) for hs in data.positives().values() for h in hs}
    runs, before = {}, torch.get_num_threads()
    torch.set_num_threads(1)
    mp = pytest.MonkeyPatch()
    try:
        for name, (offset, noise) in EMBEDDINGS.items():
            embedder = _embedder(positives, offset, noise)

            @contextlib.contextmanager
            def open_generator(cfg, model, *, embeddings=False, embedder=embedder):
                yield embedder(model_id=model)

            mp.setattr(burnqed.policy.backend, "open_generator", open_generator)
            out = root / name
            run_embed(searches=[search], model=name, out=out / "embeddings", cfg=EBM,
                      policy={"backend": "transformers"})  # fmt: skip
            run_train(searches=[search], embeddings=out / "embeddings", out=out / "ebm", cfg=EBM,
                      seed=0, device="cpu")  # fmt: skip
            run_metrics(searches=[search], embeddings=out / "embeddings",
                        out=out / "ebm_metrics.json", plots=out / "plots", cfg=EBM,
                        ebm=out / "ebm", seed=0)  # fmt: skip
            runs[name] = {"metrics": out / "ebm_metrics.json", "ebm": out / "ebm"}
    finally:
        mp.undo()
        torch.set_num_threads(before)
    return runs
