"""A rerun of the EBM stage with the same inputs writes the same bytes; another seed does not.

The runs share one process, one after another (a stage that drew its init from torch's global
generator without seeding it would differ here), and one of them is killed after its first
checkpoint and resumed: every file but ``run_info.json`` and ``metrics.jsonl`` must match.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import torch

import burnqed.ebm.train
import burnqed.policy.backend
from burnqed.determinism import RUN_SPECIFIC_FILES, reproducible_digests
from burnqed.ebm.stage import run_embed, run_train
from tests.ebm.conftest import EBM
from tests.ebm.fakes import ToyEmbedder


@pytest.fixture(scope="module")
def embeddings(searches, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("iter_1") / "embeddings"
    mp = pytest.MonkeyPatch()

    @contextlib.contextmanager
    def open_generator(cfg, model, *, embeddings=False):
        yield ToyEmbedder(model_id=model)

    mp.setattr(burnqed.policy.backend, "open_generator", open_generator)
    try:
        run_embed(searches=searches, model="toy-model", out=out, cfg=EBM,
                  policy={"backend": "transformers"})  # fmt: skip
    finally:
        mp.undo()
    return out


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Every run here on one torch thread: bit-identity holds for one thread count (recorded)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def runs(searches, embeddings) -> dict[str, Path]:
    out = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        out[name] = embeddings.parent / name / "ebm"
        run_train(searches=searches, embeddings=embeddings, out=out[name], cfg=EBM, seed=seed,
                  device="cpu")  # fmt: skip
    return out


def test_a_rerun_writes_the_same_ebm(runs):
    a, b = reproducible_digests(runs["a"]), reproducible_digests(runs["b"])
    assert a == b and set(a) == {"ebm.safetensors", "ebm.json"}
    assert {p.name for p in runs["a"].iterdir()} == {*a, *RUN_SPECIFIC_FILES}
    meta = json.loads((runs["a"] / "ebm.json").read_text())
    assert meta["determinism"]["deterministic_algorithms"] == "strict"
    assert meta["determinism"]["torch_threads"] == 1
    info = json.loads((runs["a"] / "run_info.json").read_text())
    assert info["groups_per_s"] > 0 and info["resumed_from_step"] is None and info["wall_s"] > 0


def test_another_seed_trains_another_ebm(runs):
    a, c = reproducible_digests(runs["a"]), reproducible_digests(runs["c"])
    assert a["ebm.safetensors"] != c["ebm.safetensors"]


def test_a_killed_and_resumed_run_writes_the_same_ebm(runs, searches, embeddings, monkeypatch):
    save = burnqed.ebm.train.save_checkpoint

    def save_then_die(*args, **kwargs):
        save(*args, **kwargs)
        raise KeyboardInterrupt  # killed right after the first checkpoint (step 20 of 60)

    out = embeddings.parent / "resumed" / "ebm"
    monkeypatch.setattr(burnqed.ebm.train, "save_checkpoint", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        run_train(searches=searches, embeddings=embeddings, out=out, cfg=EBM, seed=0, device="cpu")
    monkeypatch.setattr(burnqed.ebm.train, "save_checkpoint", save)
    assert not out.exists() and out.with_name("ebm.partial").is_dir()
    run_train(searches=searches, embeddings=embeddings, out=out, cfg=EBM, seed=0, device="cpu")
    assert json.loads((out / "run_info.json").read_text())["resumed_from_step"] == 20
    assert reproducible_digests(out) == reproducible_digests(runs["a"])


def test_train_head_alone_seeds_its_init(tmp_path):
    """Called directly (benches, tests) as well as by the stage: the seed decides the init."""
    from burnqed.config import EBMConfig
    from burnqed.ebm.train import train_head
    from tests.ebm.synthetic import planted

    vectors, groups = planted(theorems=12)
    cfg = EBMConfig(hidden_sizes=(16,), negatives=7, steps=2, batch_size=8, log_every=2)
    heads = []
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        torch.rand(7)  # the global generator moves between runs, as other work would move it
        r = train_head(vectors, groups, cfg, work_dir=tmp_path / name, seed=seed, device="cpu")
        heads.append(r.head.state_dict())
    a, b, c = heads
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)
