"""A planted collapse (issue 61): a joint training whose guard trips — planted by config, an SFT-loss
ceiling no loss can stay under — leaves the previous iteration's model as the iteration's result and
the run goes on; the training summary says it stopped, why and at which step, and so does every
place the iteration's figures appear after it: the merged model, the value model exported from the
head, the eval's provenance, compare.md, summary.json and the iteration report.  And every trainer
records the tokens its optimizer steps saw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from burnqed.config import EBMConfig
from burnqed.ebm.scorer import save_ebm
from burnqed.ebm.train import build_head
from burnqed.eval import compare
from burnqed.eval.stage import run as run_eval
from burnqed.report.stage import run_iteration
from burnqed.report.summary import build as build_summary
from burnqed.train.export import merge_adapter
from burnqed.train.joint import JointTrainingError, export_joint_ebm, train_joint
from tests.eval.conftest import LEAN, POLICY, SEARCH, toy_search, write_benchmark
from tests.search.fakes import RandomToyPolicy, toy_theorems
from tests.train.test_joint import EBM, JOINT, SPLIT, searches  # noqa: F401  (a fixture)

# The planted collapse: an SFT-loss ceiling no loss stays under, checked from the first step.
COLLAPSE = {**JOINT, "joint_sft_loss_ceiling": 1e-9, "joint_sft_loss_ceiling_after": 1}
HIDDEN = 64  # tests/train/conftest.py TINY's hidden size


@pytest.fixture(scope="module")
def warm_head(tmp_path_factory) -> Path:
    """Configuration A's EBM, joint training's warm start (a seeded head of the right width)."""
    out = tmp_path_factory.mktemp("configs") / "A_ebm"
    cfg = EBMConfig.from_dict(EBM)
    torch.manual_seed(11)
    save_ebm(out, build_head(HIDDEN, cfg), {"config": cfg.to_dict(), "dim": HIDDEN})
    return out


@pytest.fixture(scope="module")
def stopped(tmp_path_factory, tiny_base, lora_adapter, pairs, searches, warm_head) -> dict:  # noqa: F811
    out = tmp_path_factory.mktemp("iter_1") / "adapter"
    try:
        summary = train_joint(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out,
                              cfg=COLLAPSE, ebm=EBM, pooling="last", iteration=1,
                              previous_adapter=lora_adapter, trajectories=searches, seed=0,
                              split=SPLIT, warm_head=warm_head)  # fmt: skip
    except JointTrainingError as e:
        raise AssertionError(f"the guard stopped the run, not the training: {e}") from None
    return {"out": out, "summary": summary}


def test_a_stopped_training_keeps_the_previous_adapter_and_says_why(stopped, lora_adapter):
    out, summary = stopped["out"], stopped["summary"]
    s = summary["stopped"]
    assert s["error"] == "burnqed.train.joint.JointTrainingError" and s["step"] == 1
    assert s["reason"].startswith("joint step 1: the SFT loss") and "ceiling" in s["reason"]
    assert s["previous_adapter"] == str(lora_adapter)
    on_disk = json.loads((out / "training_summary.json").read_text())
    assert on_disk["stopped"] == s and on_disk["steps"] == 1 and on_disk["planned_steps"] == 4
    assert on_disk["selection"] is None and on_disk["tokens"]["steps"] == 1
    # the previous iteration's adapter, byte for byte: the iteration's model is iteration 0's
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        assert (out / name).read_bytes() == (lora_adapter / name).read_bytes(), name
    (record,) = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert record["step"] == 1 and record["stopped"] == s["reason"]  # the step the guard stopped
    assert not out.with_name(out.name + ".work").exists()


def test_the_head_of_a_stopped_training_is_the_one_it_started_from(stopped, warm_head):
    kept = load_file(str(stopped["out"] / "joint_head.safetensors"))
    start = load_file(str(warm_head / "ebm.safetensors"))
    assert kept.keys() == start.keys()
    assert all(torch.equal(kept[k], start[k]) for k in kept)
    meta = json.loads((stopped["out"] / "joint_head.json").read_text())
    assert meta["stopped"] == stopped["summary"]["stopped"] and meta["step"] == 0


def test_the_merge_and_the_exported_value_model_carry_the_stop(
    stopped, tiny_base, lora_adapter, warm_head, tmp_path
):
    merged = tmp_path / "iter_1" / "merged"
    merge_adapter(base=tiny_base, adapter=stopped["out"], out=merged)
    info = json.loads((merged / "burnqed_merge.json").read_text())
    assert info["training_stopped"] == stopped["summary"]["stopped"]
    previous = tmp_path / "iter_0" / "merged"
    merge_adapter(base=tiny_base, adapter=lora_adapter, out=previous)
    assert "training_stopped" not in json.loads((previous / "burnqed_merge.json").read_text())
    weights = sorted(p.name for p in previous.glob("*.safetensors"))
    assert weights and all(
        (merged / w).read_bytes() == (previous / w).read_bytes() for w in weights
    )
    meta = export_joint_ebm(adapter=stopped["out"], merged=merged, out=tmp_path / "ebm",
                            pooling="last")  # fmt: skip
    assert meta["stopped"] == stopped["summary"]["stopped"]


def _eval(tmp_path: Path, benchmark: Path, label: str, model: Path, seed: int) -> Path:
    """An eval of ``model`` scored from a toy search's trajectories (no backend: run_search off)."""
    from burnqed.theorems import read_theorems

    traj = tmp_path / label / "eval"
    toy_search(traj, list(read_theorems(benchmark)), RandomToyPolicy(seed=seed), max_nodes=6)
    out = tmp_path / label / "eval.json"
    run_eval(model=model, benchmark=benchmark, trajectories=traj, out=out,
             cfg={"budgets": [2, 6], "pass_n": 1, "num_candidates": 4, "benchmark": "toy_test"},
             search=SEARCH, lean=LEAN, policy=POLICY, run_search=False)  # fmt: skip
    return out


def test_every_figure_of_the_iteration_says_its_model_is_the_previous_one(stopped, tmp_path):
    model = tmp_path / "models" / "iter_1" / "merged"  # the merged model as the merge wrote it
    model.mkdir(parents=True)
    s = stopped["summary"]["stopped"]
    (model / "burnqed_merge.json").write_text(json.dumps({"training_stopped": s}))
    benchmark = write_benchmark(tmp_path, toy_theorems(8, seed=7, low=4, high=16))
    e0 = _eval(tmp_path, benchmark, "iter_0", tmp_path / "models" / "iter_0", seed=1)
    e1 = _eval(tmp_path, benchmark, "iter_1", model, seed=2)
    one = json.loads(e1.read_text())
    assert one["provenance"]["model"]["training_stopped"] == s
    assert "training_stopped" not in json.loads(e0.read_text())["provenance"]["model"]
    said = "iter_1's model is the previous iteration's"
    c = compare.run(evals=[e0, e1], out_md=tmp_path / "compare.md", out_json=tmp_path / "c.json")
    md = (tmp_path / "compare.md").read_text()
    assert said in md and f"stopped at step {s['step']}" in md and s["reason"] in md
    assert [r["model_stopped"] for r in c["rows"]] == [None, s]
    summary = build_summary(json.loads((tmp_path / "c.json").read_text()))
    assert summary["evals"]["iter_1"]["model_stopped"] == s
    assert "model_stopped" not in summary["evals"]["iter_0"]
    report = run_iteration(eval_json=e1, trajectories=tmp_path / "iter_1" / "eval",
                           out_dir=tmp_path / "report", cfg={}, previous=e0)  # fmt: skip
    assert report["model_stopped"] == s
    assert said in (tmp_path / "report" / "report.md").read_text()


def test_every_trainer_records_the_tokens_its_steps_saw(tiny_base, lora_adapter, stopped):
    base = json.loads((tiny_base / "burnqed_model.json").read_text())["training"]
    t = base["tokens"]
    # the base model's own count of supervised tokens, kept beside, is the completion count
    assert t["completion"] == base["supervised_tokens"] and t["prompt"] > 0 and t["value"] == 0
    # 80 steps of at most 32 examples (length-grouped batches: an epoch's last ones are smaller)
    assert t["steps"] == base["steps"] == 80 and 80 < t["sequences"] <= 80 * 32
    assert t["total"] == t["prompt"] + t["completion"]
    sft = json.loads((lora_adapter / "training_summary.json").read_text())["tokens"]
    assert sft["steps"] == 6 and sft["sequences"] == 6 * 8  # SFT: 6 steps of 8 examples
    assert sft["prompt"] > sft["completion"] >= sft["sequences"] and sft["value"] == 0
    joint = stopped["summary"]["tokens"]  # one step: 4 SFT rows, 2 groups of 4 states + goals
    assert joint["steps"] == 1 and joint["sequences"] == 4 + 2 * 4 + 2
    assert joint["value"] > 0 and joint["completion"] >= 4
