"""Joint training: both losses reach LoRA, the training embedding is the scorer's, InfoNCE has no
temperature of its own, a temperature at its ceiling stops it (at its floor goes on), resume is exact,
the head becomes an EBM."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from burnqed.config import ConfigError, EBMConfig
from burnqed.ebm.train import build_head
from burnqed.split import TheoremSplit
from burnqed.train import joint
from burnqed.train.joint import (
    JointTrainingError,
    LossScales,
    collate,
    export_joint_ebm,
    joint_forward,
    take,
    tokenize_example,
    train_joint,
)
from tests.train.conftest import SFT
from tests.train.pairs import make_pair_rows
from tests.train.trajectories import proofs_from_pairs, write_search

JOINT = {**SFT, "mode": "joint", "later_max_steps": 4, "eval_steps": 2, "batch_size": 4,
         "base_pair_subsample": 60, "positive_upsample": 2,
         "joint_lambda": 0.5, "joint_head_learning_rate": 1e-3, "joint_groups_per_step": 2,
         "joint_state_max_length": 96, "joint_monitor_every": 2, "joint_save_every": 2,
         "joint_min_separation": None, "joint_min_probe_accuracy": None,
         "joint_sft_loss_ceiling": None}  # fmt: skip
EBM = {"hidden_sizes": [32, 16], "negatives": 3, "dropout": 0.0}
# The one theorem split (burnqed.split): SFT's validation and test theorems, the head's held-out ones.
SPLIT = {"val_fraction": 0.25, "test_fraction": 0.1}


@pytest.fixture(scope="module")
def searches(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("results")
    proofs = proofs_from_pairs(make_pair_rows(24, seed=21, prefix="j"))
    return [write_search(root / "iter_0" / "search", proofs)]


@pytest.fixture(scope="module")
def peft_model(tiny_base, lora_adapter):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, str(lora_adapter), is_trainable=True)
    tok = AutoTokenizer.from_pretrained(tiny_base)
    tok.pad_token = tok.pad_token or tok.eos_token
    return model, tok


def _batch(tok, states: list[str], goal: str, k1: int):
    ex = {"prompt": "```lean4\n/- tactic state:\n  ⊢ p → p\n-/\n```\n", "completion": "intro h"}
    sft = [tokenize_example(tok, ex, 128)]
    ids = [tok(s).input_ids for s in states]
    return collate(tok, sft, ids, [tok(goal).input_ids], k1)


STATES = [
    "p q : Prop\n⊢ p ∧ q → q",
    "p q : Prop\nh : p ∧ q\n⊢ q",
    "p : Prop\n⊢ p",
    "q : Prop\n⊢ q ∨ p",
]
GOAL = "p q : Prop\n⊢ p ∧ q → q ∧ p"


def test_both_losses_send_gradients_into_the_lora_weights(peft_model):
    model, tok = peft_model
    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    batch = _batch(tok, STATES, GOAL, len(STATES))
    lora = [p for n, p in model.named_parameters() if "lora_" in n and p.requires_grad]
    for which in ("sft", "nce"):
        model.zero_grad(set_to_none=True)
        head.zero_grad(set_to_none=True)
        out = joint_forward(model, head, batch, "last")
        out[which].backward()
        lora_grad = sum(float(p.grad.abs().sum()) for p in lora if p.grad is not None)
        assert lora_grad > 0, f"the {which} loss does not reach the LoRA weights"
        head_grad = sum(float(p.grad.abs().sum()) for p in head.parameters() if p.grad is not None)
        assert (head_grad > 0) == (which == "nce")  # only InfoNCE trains the head


def test_the_heads_loss_adds_the_remaining_steps_term_of_the_decoupled_head(peft_model):
    """A batch carrying its groups' remaining proof steps trains the head on
    :func:`burnqed.ebm.train.value_loss` (InfoNCE + weight × the Huber error of the steps read
    from the positives' energies), the same function the decoupled head trains on; the error's
    gradient reaches the LoRA weights and the head's remaining-steps level."""
    from burnqed.ebm.train import value_loss

    model, tok = peft_model
    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    head.eval()
    ex = {"prompt": "```lean4\n/- tactic state:\n  ⊢ p → p\n-/\n```\n", "completion": "intro h"}
    ids = [tok(s).input_ids for s in STATES]
    goal = tok(GOAL).input_ids
    batch = collate(tok, [tokenize_example(tok, ex, 128)], ids + ids, [goal, goal], 4, [3.0, 1.0])
    assert batch.remaining.tolist() == [3.0, 1.0]
    out = joint_forward(model, head, batch, "last", remaining_weight=0.5)
    e = out["energies"]
    assert e.shape == (2, 4)
    want = value_loss(head, e, torch.tensor([3.0, 1.0]), 0.5)[0]
    assert float(out["value"]) == pytest.approx(float(want))
    assert float(out["value"]) > float(out["nce"])  # the error is not zero at the start
    no_term = joint_forward(model, head, batch, "last", remaining_weight=0.0)
    assert float(no_term["value"]) == pytest.approx(float(no_term["nce"]))
    model.zero_grad(set_to_none=True)
    out["remaining_error"].backward()
    lora = [p for n, p in model.named_parameters() if "lora_" in n and p.requires_grad]
    assert sum(float(p.grad.abs().sum()) for p in lora if p.grad is not None) > 0
    assert head.remaining_bias.grad is not None and float(head.remaining_bias.grad) != 0


def test_the_pooled_embedding_in_training_is_the_scorers(
    peft_model, tiny_base, lora_adapter, tmp_path
):
    """The state rows of a mixed, padded batch pool to what search's scorer embeds for the same
    state: the merged model through the in-process backend's ``embed`` (one function, tested equal)."""
    from burnqed.policy.transformers_backend import TransformersGenerator
    from burnqed.train.export import merge_adapter

    model, tok = peft_model
    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    model.eval()
    with torch.no_grad():
        pooled = joint_forward(model, head, _batch(tok, STATES, GOAL, len(STATES)), "last")[
            "pooled"
        ]
    merged = tmp_path / "merged"
    merge_adapter(base=tiny_base, adapter=lora_adapter, out=merged)
    scorer = TransformersGenerator(merged, pooling="last").embed([*STATES, GOAL])
    np.testing.assert_allclose(pooled.numpy(), scorer, atol=2e-5)
    assert not np.allclose(scorer[0], scorer[1])  # different states, different embeddings


def test_infonce_has_no_temperature_of_its_own(peft_model):
    """The loss is cross-entropy over -energies as the head returns them (the head's temperature
    divides the energy once); scaling the head's temperature changes the loss exactly so."""
    model, tok = peft_model
    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    head.eval()  # no dropout, no power iteration between the two forwards
    batch = _batch(tok, STATES, GOAL, len(STATES))
    with torch.no_grad():
        out = joint_forward(model, head, batch, "last")
        e = out["energies"]
        assert float(out["nce"]) == pytest.approx(
            float(torch.nn.functional.cross_entropy(-e, torch.zeros(1, dtype=torch.long))), abs=1e-6
        )
        head.log_temperature += math.log(2.0)  # T × 2: energies halve, nothing else divides them
        again = joint_forward(model, head, batch, "last")
        torch.testing.assert_close(again["energies"], e / 2, atol=1e-6, rtol=1e-5)


def test_loss_scales_rescale_infonce_to_the_sft_loss():
    s = LossScales()
    assert s.weight(0.1) == 0.1  # nothing measured yet: λ as is
    s.update(0.3, 2.1)
    assert s.weight(0.1) == pytest.approx(0.1 * 0.3 / 2.1)


def test_data_order_is_a_function_of_seed_and_position():
    assert take(10, 4, 0, 0) + take(10, 4, 4, 0) == take(10, 8, 0, 0)
    assert sorted(take(10, 10, 0, 3)) == list(range(10))
    assert take(10, 4, 0, 0) != take(10, 4, 0, 1)


def test_a_pinned_temperature_stops_training_and_keeps_the_previous_adapter(
    tiny_base, lora_adapter, pairs, searches, tmp_path
):
    """A temperature at its ceiling (the guard's sign of a collapsing head) stops training at the
    first check; since issue 61 the run goes on with the previous iteration's adapter as this
    iteration's, and the summary says why (tests/train/test_joint_stop.py follows it through every
    figure). The temperature is planted there, not driven: which bound a head trained at a violent
    learning rate reaches first turns on the sign of one tiny gradient, and that differs between
    CPUs (it reached the floor on CI's machine once)."""
    ebm = {**EBM, "temperature_init": 1.0, "temperature_min": 0.9, "temperature_max": 1.0005}
    cfg = {**JOINT, "joint_scale_learning_rate": 0.0}  # within 1e-3 of its ceiling, held there
    try:
        summary = train_joint(base=tiny_base, train=pairs["train"], val=pairs["val"],
                              out=tmp_path / "a", cfg=cfg, ebm=ebm, pooling="last", iteration=1,
                              previous_adapter=lora_adapter, trajectories=searches, seed=0,
                              split=SPLIT)  # fmt: skip
    except JointTrainingError as e:
        raise AssertionError(f"the guard stopped the run, not the training: {e}") from None
    stopped = summary["stopped"]
    assert "temperature pinned to its ceiling" in stopped["reason"]
    assert stopped["error"] == "burnqed.train.joint.JointTrainingError"
    kept = (tmp_path / "a" / "adapter_model.safetensors").read_bytes()
    assert kept == (lora_adapter / "adapter_model.safetensors").read_bytes()


def test_a_head_at_its_temperature_floor_goes_on_and_one_at_its_ceiling_stops():
    """A head warm-started from configuration A's EBM sits at its floor from step 0 (a decoupled
    head that ranks drives it there): joint training goes on; at the ceiling (a collapse) it stops."""
    from burnqed.ebm.head import GoalConditionedEnergyHead

    cfg = EBMConfig()
    head = GoalConditionedEnergyHead(8, hidden_sizes=(4,), temperature_min=cfg.temperature_min,
                                     temperature_max=cfg.temperature_max)  # fmt: skip
    with torch.no_grad():
        head.log_temperature.fill_(math.log(cfg.temperature_min))
    assert head.pinned() == "floor"
    joint._check_temperature(head, cfg, 1)  # no stop
    with torch.no_grad():
        head.log_temperature.fill_(math.log(cfg.temperature_max))
    with pytest.raises(
        JointTrainingError, match=r"step 7: the head's temperature pinned to its ceiling"
    ):
        joint._check_temperature(head, cfg, 7)


def test_a_probe_fall_within_its_noise_warns_and_one_beyond_it_aborts(caplog):
    """The demo's held-out probe runs on ~100 states (standard error ~0.05): 0.615 → 0.590 across
    a 0.6 red line is noise and training goes on; 0.615 → 0.45 is collapse and stops it."""
    cfg = joint.SFTConfig(**{k: v for k, v in JOINT.items() if k != "joint_min_probe_accuracy"},
                          joint_min_probe_accuracy=0.6)  # fmt: skip
    start = {"probe_accuracy": 0.615, "probe_heldout_states": 106}
    with caplog.at_level("WARNING", logger=joint.__name__):
        joint._check_embeddings({**start, "probe_accuracy": 0.590}, start, cfg, 50)
    assert "within twice its standard error" in caplog.text
    with pytest.raises(JointTrainingError, match=r"probe_accuracy fell to 0\.450"):
        joint._check_embeddings({**start, "probe_accuracy": 0.45}, start, cfg, 100)
    # the margin is twice the binomial standard error; with no count every fall counts
    assert joint.probe_noise_margin(0.5, 100) == pytest.approx(0.1)
    assert joint.probe_noise_margin(0.9, None) == 0.0
    # a value that started below its line is never a reason to stop
    joint._check_embeddings({"probe_accuracy": 0.3}, {"probe_accuracy": 0.55}, cfg, 50)


def _reading(correct: list[bool], separation: float = 0.5) -> dict:
    return {"probe_accuracy": sum(correct) / len(correct), "probe_heldout_states": len(correct),
            "centroid_separation": separation, "probe_correct": list(correct)}  # fmt: skip


def test_the_paired_guard_stops_on_a_real_fall_found_twice_and_never_on_noise(caplog):
    """``sft.joint_guard: paired`` (issue 61: learning-d3's stops were the threshold's noise and its
    twelve looks): the probe's verdicts on the same held-out states are compared with the start's
    (one-sided exact McNemar at 0.05 over the run's checks), and a fall stops training only when
    the next check finds it too."""
    cfg = joint.SFTConfig(**{**JOINT, "joint_min_probe_accuracy": 0.6, "joint_min_separation": None,
                             "joint_monitor_every": 50, "joint_guard": "paired"})  # fmt: skip
    start = [True] * 40 + [False] * 20  # 0.667 on 60 states
    noise = [True] * 33 + [False] * 7 + [True] * 2 + [False] * 18  # 7 lost, 2 gained: 0.583
    fall = [True] * 28 + [False] * 32  # 12 lost, none gained: 0.467
    guard = joint.Guard(cfg, 600, start=_reading(start))  # 12 checks: α 0.05 / 12
    assert guard.checks == 12 and "probe_correct" not in guard.start
    with caplog.at_level("WARNING", logger=joint.__name__):
        for step in (50, 100, 150):  # below the line on every check, never significantly
            reading = _reading(noise)
            guard.check(reading, step)
            assert "probe_correct" not in reading  # taken out before anything records it
    assert "7 held-out states lost and 2 gained" in caplog.text
    assert "not a significant fall" in caplog.text
    guard.check(_reading(fall), 200)  # a real fall, once: training goes on
    guard.check(_reading(noise), 250)  # ... and the next check does not confirm it
    guard.check(_reading(fall), 300)
    with pytest.raises(
        JointTrainingError,
        match=r"step 350: held-out probe_accuracy fell to "
        r"0\.467, below its red line 0\.6, 12 held-out states lost and 0 gained",
    ):
        guard.check(_reading(fall), 350)  # fmt: skip
    assert joint.one_sided_mcnemar(12, 0) == pytest.approx(2**-12)


def test_the_paired_guard_stops_a_separation_below_its_line_on_two_checks_in_a_row():
    cfg = joint.SFTConfig(**{**JOINT, "joint_min_probe_accuracy": None, "joint_min_separation": 0.3,
                             "joint_guard": "paired"})  # fmt: skip
    guard = joint.Guard(cfg, 4, start=_reading([True, False], separation=0.35))
    guard.check(_reading([True, False], separation=0.2), 2)
    guard.check(_reading([True, False], separation=0.32), 4)
    guard.check(_reading([True, False], separation=0.2), 6)
    with pytest.raises(JointTrainingError, match=r"centroid_separation fell to 0\.250"):
        guard.check(_reading([True, False], separation=0.25), 8)


def test_the_threshold_guard_is_the_default_and_an_unknown_one_is_refused():
    assert joint.SFTConfig().joint_guard == "threshold"
    with pytest.raises(
        ConfigError, match=r"sft\.joint_guard: must be one of threshold, paired \(got 'strict'\)"
    ):
        joint.SFTConfig(joint_guard="strict")


def _digest(path: Path) -> dict[str, str]:
    return {
        f.name: hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(path.iterdir())
        if f.suffix == ".safetensors"
    }


@pytest.fixture(scope="module")
def joint_run(tmp_path_factory, tiny_base, lora_adapter, pairs, searches) -> Path:
    out = tmp_path_factory.mktemp("joint") / "adapter"
    train_joint(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out, cfg=JOINT,
                ebm=EBM, pooling="last", iteration=1, previous_adapter=lora_adapter,
                trajectories=searches, seed=0, split=SPLIT)  # fmt: skip
    return out


def test_joint_training_writes_the_adapter_the_head_and_what_it_measured(joint_run):
    summary = json.loads((joint_run / "training_summary.json").read_text())
    j = summary["joint"]
    assert summary["mode"] == "joint" and j["lambda"] == 0.5 and j["goal_embedding_gradients"]
    # warm-started from iteration 0's adapter, loaded as saved
    assert summary["warm_start"]["max_abs_diff_before_step_1"] == 0.0
    # peft writes target_modules in a set's order (per-process string hashing): sorted, as SFT's
    config = json.loads((joint_run / "adapter_config.json").read_text())
    assert config["target_modules"] == sorted(config["target_modules"])
    assert j["scales"]["sft"] > 0 and j["scales"]["nce"] > 0
    assert j["last"]["grad_norm_lora"] > 0 and j["last"]["grad_norm_head"] > 0
    for key in ("centroid_separation", "probe_accuracy", "rank1", "temperature"):
        assert key in j["heldout_end"]
    records = [json.loads(x) for x in (joint_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    assert all(r["sft_loss"] > 0 and r["nce_loss"] > 0 for r in records)
    # the probe's per-state verdicts feed the guard and are recorded nowhere
    readings = [j["heldout_start"], j["heldout_end"], *(r["heldout"] for r in records
                                                        if "heldout" in r)]  # fmt: skip
    assert len(readings) > 2 and not any("probe_correct" in x for x in readings)
    assert (joint_run / "joint_head.safetensors").is_file()
    assert not joint_run.with_name(joint_run.name + ".work").exists()  # removed when done


def test_the_summary_records_the_step_its_layout_dtypes_and_loss_kernel(joint_run):
    """Every training summary says how its step ran (issue 62): the CPU trains right-padded in
    float32 whatever sft.gpu_layout says (the demo's bytes), with whole logits; the versions block
    tracks the GPU step's kernels (None here: not installed)."""
    summary = json.loads((joint_run / "training_summary.json").read_text())
    assert "training_step" in summary, sorted(summary)
    assert summary["training_step"] == {
        "gpu_layout": "packed_bf16", "device": "cpu", "layout": "padded", "attention": "sdpa",
        "residual_stream": "float32", "trainable_dtypes": ["float32"], "autocast": None,
        "loss_kernel": {"kernel": "materialised", "why": "padded: whole float32 logits"},
    }  # fmt: skip
    versions = summary["versions"]
    assert "liger-kernel" in versions and "triton" in versions, sorted(versions)
    assert versions["liger-kernel"] is None and versions["torch"]


def test_the_joint_head_lists_the_theorems_it_never_trained_on(joint_run, searches, tmp_path):
    """What its energy weight is fitted on (burnqed.ebm.stage.joint_energy_weight)."""
    split = TheoremSplit.of(SPLIT, 0)
    _, groups = joint.read_groups(searches, EBMConfig.from_dict(EBM), iteration=1, seed=0,
                                  split=split, eval_benchmarks=(),
                                  decontamination="refuse")  # fmt: skip
    held = {t for t, h in zip(groups.theorem, groups.heldout, strict=True) if h}
    trained = {t for t, h in zip(groups.theorem, groups.heldout, strict=True) if not h}
    meta = json.loads((joint_run / joint.HEAD_META).read_text())
    assert held and set(meta["heldout_theorems"]) == held and not held & trained
    assert held == split.held_out(groups.theorem)  # the one split: SFT's validation and test
    assert json.loads((joint_run / "hyperparameters.json").read_text())["split"] == SPLIT


def test_a_killed_run_resumes_to_the_same_weights(
    joint_run, tiny_base, lora_adapter, pairs, searches, tmp_path, monkeypatch
):
    """Killed after the step-2 checkpoint, the same job rerun ends with byte-identical weights."""
    out = tmp_path / "adapter"
    real_save = joint._save

    def save_then_die(work, job, step, *a, **kw):
        real_save(work, job, step, *a, **kw)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(joint, "_save", save_then_die)
    args = dict(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out, cfg=JOINT,
                ebm=EBM, pooling="last", iteration=1, previous_adapter=lora_adapter,
                trajectories=searches, seed=0, split=SPLIT)  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        train_joint(**args)
    assert (out.with_name("adapter.work") / "resume" / "job.json").is_file()
    monkeypatch.setattr(joint, "_save", real_save)
    summary = train_joint(**args)
    assert summary["resumed_from"] == 2
    assert _digest(out) == _digest(joint_run)


def test_a_killed_run_resumed_with_other_data_of_the_same_size_starts_over(
    tiny_base, lora_adapter, pairs, searches, tmp_path, monkeypatch, caplog
):
    """Killed after its step-2 checkpoint, rerun on training pairs of the same count but another
    content (every ``exact`` an ``apply``), the job starts over: the checkpoint is another job's."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out = tmp_path / "adapter"
    real_save = joint._save

    def save_then_die(work, job, step, *a, **kw):
        real_save(work, job, step, *a, **kw)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(joint, "_save", save_then_die)
    args = dict(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out, cfg=JOINT,
                ebm=EBM, pooling="last", iteration=1, previous_adapter=lora_adapter,
                trajectories=searches, seed=0, split=SPLIT)  # fmt: skip
    with pytest.raises(KeyboardInterrupt):
        train_joint(**args)
    monkeypatch.setattr(joint, "_save", real_save)
    table = pq.read_table(pairs["train"])
    tactic = table.schema.get_field_index("tactic")
    other = table.set_column(
        tactic, "tactic", pc.replace_substring(table.column("tactic"), "exact", "apply")
    )
    assert other.num_rows == table.num_rows and other != table
    pq.write_table(other, tmp_path / "other.parquet")
    with caplog.at_level("WARNING", logger=joint.__name__):
        summary = train_joint(**{**args, "train": tmp_path / "other.parquet"})
    assert summary["resumed_from"] is None
    assert "examples differ" in caplog.text  # the counts are the same: the content is not


def test_the_joint_head_becomes_the_iterations_ebm(joint_run, tiny_base, tmp_path):
    from burnqed.ebm.scorer import load_value_model
    from burnqed.policy.transformers_backend import TransformersGenerator
    from burnqed.train.export import merge_adapter

    merged = tmp_path / "merged"
    merge_adapter(base=tiny_base, adapter=joint_run, out=merged)
    meta = export_joint_ebm(adapter=joint_run, merged=merged, out=tmp_path / "ebm", pooling="last")
    assert meta["kind"] == "joint"
    assert meta["energy_weight"] == {"priority": None,
                                     "reason": "exported without the pool searches"}  # fmt: skip
    value = load_value_model(tmp_path / "ebm", TransformersGenerator(merged), device="cpu")
    e = value.energies(STATES[:2], [GOAL] * 2)
    assert e.shape == (2,) and np.isfinite(e).all()
    with pytest.raises(ValueError, match="pooled embeddings"):
        export_joint_ebm(adapter=joint_run, merged=merged, out=tmp_path / "x", pooling="mean")


def test_a_head_fitted_to_weight_0_ships_the_depth_twin_where_the_fallback_is_set(
    joint_run, tiny_base, tmp_path, monkeypatch
):
    """``ebm.fallback: depth_twin`` (issue 61): where the head's fitted energy weight is 0, the
    iteration's EBM directory carries its depth twin's feature value, which the search loads in the
    head's place (its weights and fitted depth normalisation); ``ebm.json`` says what it ships."""
    from burnqed.ebm import stage
    from burnqed.eval.stage import fallback_of
    from burnqed.policy.transformers_backend import TransformersGenerator
    from burnqed.search.value import load_value_model, resolve_energy_weight, value_meta
    from burnqed.train.export import merge_adapter
    from burnqed.value.features import FeatureValue, write_feature_value

    merged = tmp_path / "merged"
    merge_adapter(base=tiny_base, adapter=joint_run, out=merged)
    twin = tmp_path / "depth_twin"
    write_feature_value(twin, {"weights": {"goals": -1.5}, "features": ["goals"], "energy_weight": {
        "priority": {"logprob": 1.0, "energy": 6.0}, "depth_normalisation": 2.0,
        "depth_normalisation_fitted": True}}, model=merged)  # fmt: skip
    fitted = {"priority": {"logprob": 1.0, "energy": 0.0}, "decisions": 37}

    def export(out, weight, fallback=twin):
        monkeypatch.setattr(stage, "joint_energy_weight", lambda *a, **k: dict(weight))
        return export_joint_ebm(adapter=joint_run, merged=merged, out=out, pooling="last",
                                searches=[tmp_path], embeddings=tmp_path, fallback=fallback)  # fmt: skip

    meta = export(tmp_path / "ebm", fitted)
    assert meta["shipped"]["value"] == "depth twin" and meta["shipped"]["from"] == str(twin)
    assert "energy weight is 0 (on 37 decisions" in meta["shipped"]["why"]
    on_disk = json.loads((tmp_path / "ebm" / "features.json").read_text())
    assert on_disk["weights"] == {"goals": -1.5} and on_disk["fallback_for"] == meta["shipped"]
    assert (tmp_path / "ebm" / "ebm.safetensors").is_file()  # the head is kept, for the record
    value = load_value_model(tmp_path / "ebm", TransformersGenerator(merged))
    assert isinstance(value, FeatureValue)
    resolved = resolve_energy_weight("fitted", value_meta(value), logprob_weight=1.0)
    assert resolved["depth_normalisation"] == 2.0 and resolved["value"] == 6.0
    # an eval with this value directory records what it ships (compare.md says it)
    assert fallback_of(tmp_path / "ebm") == meta["shipped"] and fallback_of(twin) is None
    # a head the fit keeps, or no fallback set: the head is what the directory ships
    kept = export(tmp_path / "kept", {**fitted, "priority": {"logprob": 0.0, "energy": 1.0}})
    unset = export(tmp_path / "unset", fitted, fallback=None)
    for out, m in ((tmp_path / "kept", kept), (tmp_path / "unset", unset)):
        assert m["shipped"] == {"value": "energy head"} and not (out / "features.json").exists()
        assert fallback_of(out) is None


def test_batched_sft_rows_are_one_tokenizer_call_per_example(tiny_base, pairs):
    """tokenize_examples (batched, each text once) gives each example's ids and labels as two
    tokenizer calls per example do: prompt + completion + EOS, cut, labels on the completion."""
    from transformers import AutoTokenizer

    from burnqed.train.examples import read_examples
    from burnqed.train.joint import tokenize_examples

    tok = AutoTokenizer.from_pretrained(tiny_base)
    examples = read_examples(pairs["train"])[:20]
    examples += [*examples[:5], {"prompt": examples[0]["prompt"] * 6, "completion": "intro h"}]
    for max_length in (40, 256):
        expected = []
        for e in examples:
            prompt = tok(e["prompt"]).input_ids
            full = [*tok(e["prompt"] + e["completion"]).input_ids, tok.eos_token_id][:max_length]
            expected.append((full, [-100] * min(len(prompt), len(full)) + full[len(prompt) :]))
        assert tokenize_examples(tok, examples, max_length) == expected
        assert [tokenize_example(tok, e, max_length) for e in examples] == expected
    assert any(len(f) == 40 for f, _ in tokenize_examples(tok, examples, 40))  # some were cut
