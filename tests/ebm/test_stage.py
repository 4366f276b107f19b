"""The EBM stage end to end on toy trajectories: embed → train → metrics, and the EBM in search."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import burnqed.policy.backend
from burnqed.cli import main as cli_main
from burnqed.config import SearchConfig
from burnqed.data.prompt import embedding_text
from burnqed.ebm.embeddings import embedding_model_digest
from burnqed.ebm.scorer import IncompatibleEmbeddings, load_ebm
from burnqed.ebm.stage import run_embed, run_metrics, run_train
from burnqed.search.engine import search_all
from burnqed.search.value import ValueModel, load_value_model
from burnqed.trajectory import TrajectoryWriter, read_nodes
from burnqed.value.fit import priority_weights
from tests.checkout import edited_checkout
from tests.ebm.conftest import EBM
from tests.ebm.fakes import ToyEmbedder
from tests.search.fakes import ToyEnv, toy_theorems


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def fake_backend(monkeypatch):
    """``open_generator`` yields a ToyEmbedder named after the model; records what was asked."""
    opened = []

    @contextlib.contextmanager
    def open_generator(cfg, model, *, embeddings=False):
        gen = ToyEmbedder(model_id=model)
        opened.append((model, embeddings, gen))
        yield gen

    monkeypatch.setattr(burnqed.policy.backend, "open_generator", open_generator)
    return opened


@pytest.fixture(scope="module")
def trained(searches, tmp_path_factory):
    """embeddings + EBM + metrics of the toy searches, produced by the stage functions."""
    root = tmp_path_factory.mktemp("iter_1")
    mp = pytest.MonkeyPatch()
    gens = []

    @contextlib.contextmanager
    def open_generator(cfg, model, *, embeddings=False):
        gens.append(ToyEmbedder(model_id=model))
        yield gens[-1]

    mp.setattr(burnqed.policy.backend, "open_generator", open_generator)
    try:
        emb = run_embed(searches=searches, model="toy-model", out=root / "embeddings", cfg=EBM,
                        policy={"backend": "transformers"})  # fmt: skip
        meta = run_train(searches=searches, embeddings=root / "embeddings", out=root / "ebm",
                         cfg=EBM, seed=0, device="cpu")  # fmt: skip
        metrics = run_metrics(searches=searches, embeddings=root / "embeddings",
                              out=root / "ebm_metrics.json", plots=root / "ebm_plots", cfg=EBM,
                              ebm=root / "ebm", seed=0)  # fmt: skip
    finally:
        mp.undo()
    return {"root": root, "emb": emb, "meta": meta, "metrics": metrics, "gens": gens}


def test_embed_writes_every_state_once_with_the_model_digest(trained, searches):
    emb, gen = trained["emb"], trained["gens"][0]
    assert emb["embedding_model_digest"] == embedding_model_digest(
        ToyEmbedder(model_id="toy-model")
    )
    assert emb["states"] == emb["embedded_this_run"] == len(gen.embedded) == len(set(gen.embedded))
    on_disk = json.loads((trained["root"] / "embeddings" / "manifest.json").read_text())
    assert on_disk == json.loads(json.dumps(emb))
    assert len(on_disk["trajectories"]) == 2 and on_disk["dim"] == 16


def test_rerunning_embed_embeds_nothing(trained, searches, fake_backend):
    out = trained["root"] / "embeddings"
    m = run_embed(searches=searches, model="toy-model", out=out, cfg=EBM,
                  policy={"backend": "transformers"})  # fmt: skip
    assert m["embedded_this_run"] == 0 and m["cached_before"] == m["states"]
    assert fake_backend[0][1] is True  # HTTP backends must start their embedding server


def _embed(searches, out: Path, **policy) -> dict:
    return run_embed(searches=searches, model="toy-model", out=out, cfg=EBM,
                     policy={"backend": "transformers", **policy})  # fmt: skip


def test_editing_the_pooling_function_embeds_every_state_again(
    searches, fake_backend, tmp_path, monkeypatch
):
    """The cache is keyed by the code that embeds: run from a checkout whose ``pool_hidden``
    differs, no row is reused; from a verbatim copy of this checkout, every row is (the copy alone
    changes nothing: the edit does)."""
    import burnqed.provenance

    first = _embed(searches, tmp_path / "emb")
    assert first["embedded_this_run"] == first["states"] > 0
    backend = "burnqed/policy/embedding.py"
    pooled = "return torch.nn.functional.normalize(hidden[-1], dim=-1)"  # in pool_hidden
    same = edited_checkout(tmp_path / "copy", backend, pooled, pooled)
    monkeypatch.setattr(burnqed.provenance, "SOURCE_ROOT", same)
    assert _embed(searches, tmp_path / "emb")["embedded_this_run"] == 0
    edited = edited_checkout(tmp_path / "edited", backend, pooled, pooled[:-1] + ", eps=1e-6)")
    monkeypatch.setattr(burnqed.provenance, "SOURCE_ROOT", edited)
    again = _embed(searches, tmp_path / "emb")
    assert again["embedded_this_run"] == again["states"] and again["cached_before"] == 0
    assert again["embedding_key"] != first["embedding_key"]
    assert again["embedding_settings"]["code"] != first["embedding_settings"]["code"]


def test_another_dtype_or_instruction_set_embeds_again_and_back_reuses(
    searches, fake_backend, tmp_path, monkeypatch
):
    out = tmp_path / "emb"
    first = _embed(searches, out, dtype="float32")
    assert _embed(searches, out, dtype="bfloat16")["embedded_this_run"] == first["states"]
    before = os.environ.get("MKL_CBWR")
    # Another instruction set asked of MKL (whatever the caller's setting was).
    monkeypatch.setenv("MKL_CBWR", "SSE4_2" if before != "SSE4_2" else "AVX2")
    assert _embed(searches, out, dtype="float32")["embedded_this_run"] == first["states"]
    if before is None:
        monkeypatch.delenv("MKL_CBWR")
    else:
        monkeypatch.setenv("MKL_CBWR", before)
    # The first settings again: their rows are still there.
    assert _embed(searches, out, dtype="float32")["embedded_this_run"] == 0
    assert first["embedding_settings"]["dtype"] == "float32"
    assert first["embedding_settings"]["hardware"]["cpu_capability"] == (
        torch.backends.cpu.get_cpu_capability()
    )


def test_train_writes_weights_hyperparameters_hashes_and_curve(trained):
    ebm = trained["root"] / "ebm"
    assert sorted(p.name for p in ebm.iterdir()) == [
        "ebm.json", "ebm.safetensors", "metrics.jsonl", "run_info.json",
    ]  # fmt: skip
    assert not ebm.with_name("ebm.partial").exists()
    meta = json.loads((ebm / "ebm.json").read_text())
    assert meta["config"] == EBM and meta["seed"] == 0
    # search.energy_weight: fitted — out-of-fold energies on the toy searches' decisions.
    fit = meta["energy_weight"]
    assert fit["folds"] == 5 and fit["decisions"] == fit["fit"]["decisions"] > 20
    assert fit["fit"]["log_likelihood"] < 0
    # Within a priority's bounds, and the search's weights follow from them.
    w = fit["fit"]["weights"]
    assert w["logprob"] >= 0 and w["energy"] <= 0
    assert fit["priority"] == priority_weights(w["logprob"], -w["energy"])
    assert set(fit["heldout_frontier_top1"]) == {"logprob", "energy", "sum"}
    same = fit["heldout_frontier_top1_same_depth"]
    assert set(same) == {"logprob", "energy", "sum"}
    assert 0 < same["logprob"]["decisions"] <= fit["heldout_frontier_top1"]["logprob"]["decisions"]
    # Held-out figures: the split's held-out theorems' decisions, each under weights fitted without
    # its fold (no better per decision than the fit on every decision, which saw it).
    held = fit["heldout"]
    assert 0 < held["decisions"] == fit["heldout_frontier_top1"]["logprob"]["decisions"]
    assert held["decisions"] < fit["decisions"]
    assert fit["heldout_log_likelihood_per_decision"] <= (
        fit["fit"]["log_likelihood_per_decision"] + 0.5
    )
    assert meta["embedding_model_digest"] == trained["emb"]["embedding_model_digest"]
    assert len(meta["data"]["groups_sha256"]) == 16 and len(meta["data"]["trajectories"]) == 2
    assert sum(meta["data"]["negatives_by_kind"].values()) == 3 * meta["data"]["groups"]
    assert meta["data"]["dropped"] >= 0
    assert meta["data"]["negatives_by_kind"]["other_theorem"] <= meta["data"]["groups"]
    assert meta["chance"] == 0.25 and meta["heldout"]["groups"] == meta["data"]["heldout_groups"]
    assert meta["heldout"]["tie_rate"] == 0.0 and meta["heldout"]["rank1_by_depth"]
    assert all("tie_rate" in v for v in meta["heldout"]["rank1_by_depth"].values())
    steps = [json.loads(x)["step"] for x in (ebm / "metrics.jsonl").read_text().splitlines()]
    assert steps == [20, 40, 60]
    head, _ = load_ebm(ebm)
    assert head.dim == 16 and not head.training
    assert -1 <= meta["heldout"]["remaining_corr"] <= 1  # the groups carry remaining steps


def test_a_head_written_before_the_remaining_steps_term_still_loads(trained, tmp_path):
    """Its energies are the same (the level only trains); any other missing weight is an error."""
    from safetensors.torch import load_file, save_file

    old = tmp_path / "old"
    shutil.copytree(trained["root"] / "ebm", old)
    weights = load_file(str(old / "ebm.safetensors"))
    del weights["remaining_bias"]
    save_file(weights, str(old / "ebm.safetensors"))
    head, _ = load_ebm(old)
    new, _ = load_ebm(trained["root"] / "ebm")
    z, g = torch.randn(5, 16), torch.randn(1, 16)
    torch.testing.assert_close(head(z, g), new(z, g))
    assert float(head.remaining_bias) == 0.0
    del weights["log_temperature"]
    save_file(weights, str(old / "ebm.safetensors"))
    with pytest.raises(RuntimeError, match="log_temperature"):
        load_ebm(old)


def test_metrics_json_and_plots(trained):
    m = json.loads((trained["root"] / "ebm_metrics.json").read_text())
    assert m == json.loads(json.dumps(trained["metrics"], default=str))
    assert m["centroid_l2"] > 0.5  # the toy embedder puts the remaining total in coordinate 0
    assert 0 < m["centroid_separation"] < 10  # scale-free: distance / within-class spread
    assert 0 <= m["linear_probe"]["balanced_accuracy"] <= 1
    assert m["sibling_distance"]["pairs"] > 0 and m["sibling_distance"]["ratio"] > 0
    assert 1 <= m["variance_spectrum"]["effective_rank"] <= 16
    assert m["ebm"]["chance"] == 0.25 and m["ebm"]["heldout_groups"] > 0
    assert m["ebm"]["heldout_tie_rate"] == 0.0  # distinct toy embeddings: no energy ties
    by_depth = m["ebm"]["heldout_rank1_by_depth"]
    assert sum(b["groups"] for b in by_depth.values()) == m["ebm"]["heldout_groups"]
    counted = [(b["groups"], b["rank1"]) for b in by_depth.values() if b["groups"]]
    overall = sum(n * r for n, r in counted) / m["ebm"]["heldout_groups"]
    assert abs(overall - m["ebm"]["heldout_rank1"]) < 1e-9  # the buckets partition the groups
    deep = m["ebm"]["heldout_rank1_depth_ge4"]
    assert deep["groups"] <= by_depth["3-4"]["groups"] + by_depth["5+"]["groups"]
    pngs = sorted(p.name for p in (trained["root"] / "ebm_plots").iterdir())
    assert pngs == ["energy_hist.png", "pca_by_depth.png", "pca_by_label.png"]
    for p in (trained["root"] / "ebm_plots").iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_value_model_refuses_another_models_embeddings(trained):
    with pytest.raises(IncompatibleEmbeddings) as exc:
        load_value_model(trained["root"] / "ebm", ToyEmbedder(model_id="a-new-lora"))
    msg = str(exc.value)
    assert trained["emb"]["embedding_model_digest"] in msg
    assert embedding_model_digest(ToyEmbedder(model_id="a-new-lora")) in msg


def test_value_model_scores_batches_and_caches_goal_embeddings(trained):
    gen = ToyEmbedder(model_id="toy-model")
    value = load_value_model(trained["root"] / "ebm", gen)
    assert isinstance(value, ValueModel)
    states = ["x : Nat\n⊢ reach 1", "x : Nat\n⊢ reach 7", "x : Nat\n⊢ reach 1"]
    goal = "x : Nat\n⊢ reach 9"
    e = value.energies(states, [goal] * 3)
    assert e.shape == (3,) and e.dtype == np.float32 and e[0] == e[2]
    # States and goals are embedded as the policy's prompt for them (issue 30 §5).
    goal_text = embedding_text(goal)
    assert gen.embedded.count(goal_text) == 1 and len(gen.embedded) == 3  # 2 states + the goal
    value.energies(states[:1], [goal])
    assert gen.embedded.count(goal_text) == 1  # cached per goal
    head, _ = load_ebm(trained["root"] / "ebm")
    from tests.ebm.fakes import toy_vector

    with torch.no_grad():
        want = head(torch.from_numpy(toy_vector(embedding_text(states[1]))),
                    torch.from_numpy(toy_vector(goal_text)))  # fmt: skip
    assert e[1] == pytest.approx(want.item(), rel=1e-5)


def test_search_with_the_ebm_records_energies_and_its_temperature(trained, tmp_path):
    gen = ToyEmbedder(model_id="toy-model", allow_cheat=False)
    value = load_value_model(trained["root"] / "ebm", gen)
    cfg = SearchConfig(max_nodes=8, num_candidates=4, concurrency=4, batch_encode_size=8,
                       temperature=0.8, temperature_with_ebm=1.3)  # fmt: skip

    async def go():
        with TrajectoryWriter(tmp_path, checkpoint_every=4) as w:
            return await search_all(toy_theorems(6, seed=5), gen, ToyEnv(), cfg, writer=w,
                                    value_model=value)  # fmt: skip

    results = asyncio.run(go())
    assert len(results) == 6
    assert {p.temperature for p in gen.calls} == {1.3}
    nodes = read_nodes(tmp_path).table.to_pydict()
    scored = [e for e, d in zip(nodes["ebm_energy"], nodes["depth"], strict=True)
              if e is not None and d > 0]  # fmt: skip
    assert scored and value.embedded > 0


def test_cli_runs_the_three_subcommands(searches, tmp_path, repo_root, fake_backend):
    params = tmp_path / "params.yaml"
    import yaml

    p = yaml.safe_load((repo_root / "params.yaml").read_text())
    p["ebm"] = EBM
    p["policy"]["backend"] = "transformers"
    params.write_text(yaml.safe_dump(p))
    base = ["ebm", "--params", str(params)]
    where = ["--search", str(searches[0]), "--search", str(searches[1]),
             "--embeddings", str(tmp_path / "emb")]  # fmt: skip
    assert cli_main([*base, "embed", *where, "--model", "toy-model"]) == 0
    assert fake_backend[0][0] == "toy-model"
    bench = tmp_path / "bench.jsonl"  # decontamination needs the benchmark; an empty one here
    bench.write_text("")
    assert cli_main([*base, "train", *where, "--out", str(tmp_path / "ebm"), "--device", "cpu",
                     "--eval-benchmark", str(bench)]) == 0  # fmt: skip
    assert cli_main([*base, "metrics", *where, "--ebm", str(tmp_path / "ebm"),
                     "--out", str(tmp_path / "m.json"), "--plots", str(tmp_path / "plots")]) == 0  # fmt: skip
    assert json.loads((tmp_path / "m.json").read_text())["ebm"]["path"] == str(tmp_path / "ebm")
    assert Path(tmp_path / "ebm" / "ebm.safetensors").stat().st_size > 0


def test_a_head_without_fold_heads_is_fitted_on_the_theorems_it_never_trained_on(
    trained, searches, tmp_path
):
    """The joint head's energy weight (configuration C): only the decisions of theorems held out
    of its training and of its warm start's are scored and fitted."""
    from burnqed.ebm.fit import pool_decisions
    from burnqed.ebm.groups import load_states
    from burnqed.ebm.stage import _dirs, joint_energy_weight

    head, meta = load_ebm(trained["root"] / "ebm")
    dirs = _dirs(searches)
    sets, _ = pool_decisions(dirs, set(load_states(dirs).goal))
    theorems = sorted({c.theorem for c in sets})
    assert len(theorems) >= 8
    joint_held, warm_held = [*theorems[:7], "never-searched"], theorems[1:8]
    (tmp_path / "A").mkdir()
    (tmp_path / "A" / "ebm.json").write_text(json.dumps({"data": {"heldout_theorems": warm_held}}))
    digest = trained["emb"]["embedding_model_digest"]

    def fit(held, warm=tmp_path / "A", model_digest=digest):
        return joint_energy_weight(
            head, {"config": meta["config"], "heldout_theorems": held}, searches=searches,
            embeddings=trained["root"] / "embeddings", embedding_model_digest=model_digest,
            warm_head=warm, seed=0, split=None,
        )  # fmt: skip

    block = fit(joint_held)
    both = theorems[1:7]  # held out of both: the only theorems scored
    assert block["heldout_theorems"] == both and block["theorems"] == 6
    assert block["decisions"] == sum(c.theorem in both for c in sets)
    assert block["heldout_sets"] == {"joint_training": 8, "warm_start": 7, "both": 6}
    assert block["priority"] is not None and block["folds"] == 5
    assert set(block["heldout_frontier_top1"]) == {"logprob", "energy", "sum"}
    assert fit(joint_held, warm=None)["heldout_theorems"] == theorems[:7]
    # Too few theorems for the folds, a head without the list, another model's embeddings: no fit.
    assert "fewer than ebm.fit_folds" in fit(theorems[:4])["reason"]
    assert fit(None)["priority"] is None
    assert "model digest" in fit(joint_held, model_digest="0" * 16)["reason"]


def test_the_value_is_fitted_on_the_random_order_searches_decisions_when_there_are_any(
    searches, tmp_path
):
    """A search that popped by log-prob favours log-prob on its own decisions; where the pool has
    random-order searches (the noise search's manifest ``order: random``) only theirs are used."""
    from burnqed.ebm.fit import EVERY_SEARCH, RANDOM_ORDER, pool_decisions
    from burnqed.ebm.groups import load_states
    from burnqed.ebm.stage import _dirs

    copies = [tmp_path / "iter_0" / s.name for s in searches]
    for s, c in zip(searches, copies, strict=True):
        shutil.copytree(s, c)
    dirs = _dirs(copies)
    goals = set(load_states(dirs).goal)
    every, settings = pool_decisions(dirs, goals)
    assert settings["decisions_from"] == EVERY_SEARCH
    noise_dirs = _dirs([copies[1]])
    noise_only, _ = pool_decisions(noise_dirs, goals)
    assert 0 < len(noise_only) < len(every)

    (copies[1] / "manifest.json").write_text(json.dumps({"order": "random"}))  # the gather's
    chosen, settings = pool_decisions(dirs, goals)
    assert settings["decisions_from"] == RANDOM_ORDER
    assert [(c.theorem, c.expansion, c.popped) for c in chosen] == [
        (c.theorem, c.expansion, c.popped) for c in noise_only
    ]
    # ... and says at which temperature they were sampled (a shard manifest's `sampling`; none
    # recorded: unknown, an empty list)
    assert settings["decisions_temperature"] == []
    (copies[1] / "manifest.json").write_text(
        json.dumps({"order": "random", "sampling": {"temperature": 1.5}})
    )
    assert pool_decisions(dirs, goals)[1]["decisions_temperature"] == [1.5]
