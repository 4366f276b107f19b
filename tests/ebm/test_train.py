"""EBM training: a planted signal is learned, shuffled labels are not, a collapse aborts, resume is exact;
rank-1 counts a tie among t candidates as 1/t and reports the tie rate."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from burnqed.config import EBMConfig
from burnqed.ebm.head import GoalConditionedEnergyHead
from burnqed.ebm.train import (
    CHECKPOINT,
    EBMTrainingError,
    evaluate,
    index_groups,
    load_checkpoint,
    rank1_credit,
    train_head,
)
from tests.checkout import edited_checkout
from tests.ebm.synthetic import planted

CFG = EBMConfig(hidden_sizes=(64, 32), dropout=0.1, negatives=7, steps=150, batch_size=32,
                learning_rate=3e-3, log_every=25, save_every=50)  # fmt: skip


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_planted_linear_signal_is_learned(tmp_path):
    vectors, groups = planted(margin=4.0)
    r = train_head(vectors, groups, CFG, work_dir=tmp_path, seed=0, device="cpu")
    assert r.chance == pytest.approx(1 / 8)
    assert r.heldout["groups"] == int(groups.heldout.sum()) > 50
    assert r.heldout["rank1"] >= 0.9
    assert r.heldout["energy_gap"] > 0
    records = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in records] == [25, 50, 75, 100, 125, 150]
    for key in ("loss", "energy_gap", "rank1", "rank1_by_depth", "temperature", "heldout_rank1"):
        assert all(key in x for x in records), key
    assert records[-1]["loss"] < records[0]["loss"]
    assert set(records[-1]["rank1_by_depth"]) == {"0", "1", "2", "3-4", "5+"}


def test_the_remaining_steps_term_orders_proof_path_states_by_their_distance_to_the_proof(
    tmp_path,
):
    """Each positive's remaining proof steps are planted in its embedding (along a direction that
    tells nothing of positive or negative).  InfoNCE alone has no reason to read them; with
    ``remaining_steps_weight`` the held-out positives' energies follow them (rising with the
    steps) while the groups stay ranked far above chance."""
    from dataclasses import replace

    vectors, groups = planted(margin=2.0, remaining=True)
    runs = {
        w: train_head(vectors, groups, replace(CFG, steps=300, remaining_steps_weight=w),
                      work_dir=tmp_path / str(w), seed=0, device="cpu")
        for w in (0.0, 1.0)
    }  # fmt: skip
    alone, both = (runs[w].heldout["remaining_corr"] for w in (0.0, 1.0))
    assert abs(alone) < 0.4 and both > 0.7, (alone, both)
    assert runs[1.0].heldout["rank1"] > 2.5 * runs[1.0].chance
    held = index_groups(groups.subset(groups.heldout), {h: i for i, h in enumerate(vectors)})
    emb = torch.from_numpy(np.stack(list(vectors.values())))
    with torch.no_grad():
        e = runs[1.0].head.eval()(emb[held.states[:, 0]], emb[held.goals]).numpy()
    assert np.polyfit(held.remaining.numpy(), e, 1)[0] > 0.3  # energy units per step
    records = [
        json.loads(ln) for ln in (tmp_path / "1.0" / "metrics.jsonl").read_text().splitlines()
    ]
    assert all(x["heldout_remaining_corr"] is not None for x in records)


def test_shuffled_labels_stay_at_chance(tmp_path):
    vectors, groups = planted(margin=4.0, shuffled=True)
    r = train_head(vectors, groups, CFG, work_dir=tmp_path, seed=0, device="cpu")
    assert abs(r.heldout["rank1"] - 1 / 8) < 0.1  # 96 held-out groups: chance ± ~3 σ
    assert abs(r.heldout["energy_gap"]) < 0.1


def test_a_temperature_at_its_floor_over_shuffled_labels_is_a_warning_and_held_out_says_chance(
    tmp_path,
):
    """No signal (shuffled labels): the head over-fits the training groups and the temperature
    falls to its floor.  Bounded there, nothing blows up: training goes on, the pin is recorded,
    and the held-out rank-1 (what the report's gates judge) stays at chance."""
    vectors, groups = planted(margin=4.0, shuffled=True)
    cfg = EBMConfig(hidden_sizes=(64, 32), dropout=0.1, negatives=7, steps=200, batch_size=32,
                    learning_rate=1e-2, log_every=10, save_every=50, temperature_init=1.0,
                    temperature_min=0.6, temperature_max=20.0)  # fmt: skip
    r = train_head(vectors, groups, cfg, work_dir=tmp_path, seed=0, device="cpu")
    records = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == cfg.steps
    assert any(x["temperature_pinned"] == "floor" for x in records)
    assert abs(r.heldout["rank1"] - 1 / 8) < 0.1  # 96 held-out groups: chance ± ~3 σ


def test_a_temperature_at_its_ceiling_without_learning_aborts_naming_the_step_and_the_checkpoint(
    tmp_path,
):
    """Shuffled labels under heavy dropout: the energies are noise, the temperature rises to its
    ceiling to flatten them (a collapse) and the held-out loss does not fall: training stops."""
    vectors, groups = planted(margin=4.0, shuffled=True)
    cfg = EBMConfig(hidden_sizes=(64, 32), dropout=0.5, negatives=7, steps=200, batch_size=32,
                    learning_rate=1e-2, log_every=10, save_every=10, temperature_init=1.0,
                    temperature_min=0.6, temperature_max=1.1,
                    temperature_learning_rate=0.1)  # fmt: skip
    with pytest.raises(EBMTrainingError) as exc:
        train_head(vectors, groups, cfg, work_dir=tmp_path, seed=0, device="cpu")
    msg = str(exc.value)
    step = int(msg.split("EBM step ")[1].split(":")[0])
    assert "ceiling" in msg and "did not fall" in msg and str(tmp_path / CHECKPOINT) in msg
    meta, _state, opt = load_checkpoint(tmp_path)
    assert 0 < meta["step"] < step and f"step {meta['step']})" in msg
    assert opt  # AdamW state saved beside the weights


def demo_ebm_config() -> EBMConfig:
    """The demo's EBM settings: params.yaml's ebm section under config/demo.yaml's."""
    root = Path(__file__).resolve().parents[2]
    base = yaml.safe_load((root / "params.yaml").read_text())["ebm"]
    demo = yaml.safe_load((root / "config" / "demo.yaml").read_text()).get("ebm", {})
    return EBMConfig.from_dict({**base, **demo})


def test_separable_groups_reach_a_one_nat_sibling_span_in_the_demo_steps(tmp_path):
    """Issue 30 §3: the energy reaches the log-prob's scale (nats).  On perfectly separable groups
    the demo's settings used to leave a sibling span of ~0.1 (the temperature moved by one
    learning rate per step); with its own rate the temperature reaches its floor while the
    held-out loss still falls — a warning, not an abort — and the span passes 1 nat."""
    cfg = demo_ebm_config()
    vectors, groups = planted(margin=6.0, dim=32)
    r = train_head(vectors, groups, cfg, work_dir=tmp_path, seed=0, device="cpu")
    assert r.heldout["rank1"] == 1.0  # separable
    assert r.train["sibling_span"] >= 1.0 and r.heldout["sibling_span"] >= 1.0
    records = [json.loads(ln) for ln in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == cfg.steps
    assert any(x["temperature_pinned"] == "floor" for x in records)  # warned, went on


def test_resume_from_a_checkpoint_equals_the_uninterrupted_run(tmp_path):
    vectors, groups = planted(theorems=20)
    cfg = EBMConfig(hidden_sizes=(32,), dropout=0.1, negatives=7, steps=40, batch_size=16,
                    learning_rate=3e-3, log_every=10, save_every=10)  # fmt: skip
    full = train_head(vectors, groups, cfg, work_dir=tmp_path / "a", seed=3, device="cpu")
    # The run leaves its last checkpoint (step 30) behind: continue a copy of it from there.
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert load_checkpoint(tmp_path / "b")[0]["step"] == 30
    resumed = train_head(vectors, groups, cfg, work_dir=tmp_path / "b", seed=3, device="cpu")
    assert resumed.resumed_from == 30 and full.resumed_from is None
    for (k, a), b in zip(full.head.state_dict().items(), resumed.head.state_dict().values(),
                         strict=True):  # fmt: skip
        torch.testing.assert_close(a, b, msg=k)
    steps = [
        json.loads(x)["step"] for x in (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [10, 20, 30, 40]  # nothing replayed twice


def test_a_checkpoint_of_other_training_code_is_not_resumed(tmp_path, monkeypatch):
    """The resume key holds the code digest: the checkpoint a run left behind is continued by the
    same code (a verbatim copy of the checkout) and started over by an edited one."""
    import burnqed.provenance

    vectors, groups = planted(theorems=20)
    cfg = EBMConfig(hidden_sizes=(32,), dropout=0.1, negatives=7, steps=40, batch_size=16,
                    learning_rate=3e-3, log_every=10, save_every=10)  # fmt: skip
    train_head(vectors, groups, cfg, work_dir=tmp_path / "a", seed=3, device="cpu")
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    shutil.copytree(tmp_path / "a", tmp_path / "c")
    loss = "nce = F.cross_entropy(-energies.float(), torch.zeros(len(energies), dtype=torch.long,"
    monkeypatch.setattr(burnqed.provenance, "SOURCE_ROOT",
                        edited_checkout(tmp_path / "same", "burnqed/ebm/train.py", loss, loss))  # fmt: skip
    same = train_head(vectors, groups, cfg, work_dir=tmp_path / "b", seed=3, device="cpu")
    assert same.resumed_from == 30
    smoothed = "nce = F.cross_entropy(-energies.float(), label_smoothing=0.1, target=torch.zeros(len(energies), dtype=torch.long,"
    monkeypatch.setattr(burnqed.provenance, "SOURCE_ROOT",
                        edited_checkout(tmp_path / "edit", "burnqed/ebm/train.py", loss, smoothed))  # fmt: skip
    assert train_head(vectors, groups, cfg, work_dir=tmp_path / "c", seed=3,
                      device="cpu").resumed_from is None  # fmt: skip


def test_rank1_counts_a_tie_among_t_candidates_as_1_over_t(tmp_path):
    # Collapsed embeddings (every state the same vector) give every candidate the same energy:
    # argmin picked the positive at index 0 and scored 100 %; a random tie-break scores 1/8.
    vectors, groups = planted(theorems=10)
    same = {h: np.ones(16, np.float32) for h in vectors}
    hashes = sorted(same)
    emb = torch.from_numpy(np.stack([same[h] for h in hashes]))
    ig = index_groups(groups, {h: i for i, h in enumerate(hashes)})
    head = GoalConditionedEnergyHead(16, hidden_sizes=(8,))
    r = evaluate(head, emb, ig)
    assert r["rank1"] == pytest.approx(1 / 8) and r["tie_rate"] == 1.0
    assert all(v["rank1"] == pytest.approx(1 / 8) and v["tie_rate"] == 1.0
               for v in r["rank1_by_depth"].values())  # fmt: skip
    # Truncated embeddings: the positive identical to one negative, the rest far worse.
    credit, tied = rank1_credit(np.array([[0.0, 0.0, 3.0, 3.0], [0.0, 1.0, 1.0, 1.0],
                                          [2.0, 0.0, 0.0, 5.0]]))  # fmt: skip
    assert credit.tolist() == [0.5, 1.0, 0.0] and tied.tolist() == [True, False, True]


def test_training_records_the_tie_rate_beside_rank1(tmp_path):
    vectors, groups = planted(theorems=20)
    cfg = EBMConfig(hidden_sizes=(32,), dropout=0.1, negatives=7, steps=20, batch_size=16,
                    learning_rate=3e-3, log_every=10, save_every=10)  # fmt: skip
    r = train_head(vectors, groups, cfg, work_dir=tmp_path, seed=0, device="cpu")
    assert r.heldout["tie_rate"] == 0.0 and r.train["tie_rate"] == 0.0  # distinct embeddings
    rec = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[-1])
    assert rec["tie_rate"] == 0.0 and rec["heldout_tie_rate"] == 0.0
    assert set(rec["tie_rate_by_depth"]) == set(rec["rank1_by_depth"])
