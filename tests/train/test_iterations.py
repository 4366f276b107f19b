"""SFT of iterations > 0: label masks, warm start, data mix, selection, QLoRA merge, decontamination."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from burnqed.config import SFTConfig, SplitConfig
from burnqed.data.decontam import ContaminationError
from burnqed.data.prompt import format_example, format_prompt
from burnqed.split import TheoremSplit
from burnqed.theorems import Theorem, write_theorems
from burnqed.train.examples import read_examples
from burnqed.train.positives import read_positive_steps, split_steps_by_theorem
from burnqed.train.sft import (
    adapter_difference,
    build_mix,
    build_trainer,
    check_prompt_boundaries,
    load_base_model,
    plan_sft,
    select_step,
    train_sft,
)
from tests.train.conftest import SFT
from tests.train.pairs import make_pair_rows
from tests.train.trajectories import Proof, proofs_from_pairs, write_search

# Iteration 2 (learning rate × 0.25), constant schedule, no warm-up: the rate at step 1 is the
# decayed one exactly.  Three steps, evaluated at 2 and 3 (the last step is always evaluated).
LATER = {**SFT, "lr_scheduler": "constant", "warmup_steps": 0, "later_max_steps": 3,
         "eval_steps": 2, "base_pair_subsample": 120, "positive_upsample": 3}  # fmt: skip
SPLIT = {"val_fraction": 0.25, "test_fraction": 0.25}


def read_json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def searches(tmp_path_factory) -> dict[str, Path]:
    """iter_0/search (16 proofs + one that failed verification) and iter_0/search_noise."""
    root = tmp_path_factory.mktemp("results")
    proofs = proofs_from_pairs(make_pair_rows(20, seed=11, prefix="s"))
    rejected = Proof("s_rejected", [("a b : Prop\nh : a\n⊢ b", "exact h")], verified=False)
    s0 = write_search(root / "iter_0" / "search", [*proofs[:16], rejected])
    noise = write_search(root / "iter_0" / "search_noise", proofs[12:])
    return {"iter_0/search": s0, "iter_0/search_noise": noise}


@pytest.fixture(scope="module")
def iteration_2(tmp_path_factory, tiny_base, pairs, lora_adapter, searches) -> Path:
    out = tmp_path_factory.mktemp("iter_2") / "adapter"
    train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=out, cfg=LATER,
              iteration=2, previous_adapter=lora_adapter, trajectories=searches, seed=0,
              split=SPLIT)  # fmt: skip
    return out


def test_labels_are_minus_100_exactly_on_prompt_and_padding_in_a_real_batch(
    tiny_base, pairs, tmp_path
):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    examples = read_examples(pairs["train"])[:8]
    sft = SFTConfig.from_dict(SFT)
    model = load_base_model(tiny_base, quantization="none", cuda=False)
    trainer = build_trainer(model, tokenizer, examples, examples[:2], sft, plan_sft(sft, 0, None),
                            output_dir=tmp_path / "ck", cuda=False, seed=0)  # fmt: skip
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(examples))])
    lengths = {int(m.sum()) for m in batch["attention_mask"]}
    assert len(lengths) > 1, "the batch must be padded for the test to mean anything"
    for ex, ids, labels, mask in zip(examples, batch["input_ids"], batch["labels"],
                                     batch["attention_mask"], strict=True):  # fmt: skip
        n_prompt = len(tokenizer(ex["prompt"], add_special_tokens=False)["input_ids"])
        n_real = int(mask.sum())
        expected = [-100] * n_prompt + ids[n_prompt:n_real].tolist() + [-100] * (len(ids) - n_real)
        assert mask[:n_real].all() and labels.tolist() == expected
        assert tokenizer.decode(labels[n_prompt:n_real]) == ex["completion"] + tokenizer.eos_token


def test_a_prompt_that_does_not_end_at_a_token_boundary_is_reported(tiny_base, caplog):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    state = "p q : Prop\nh : p ∧ q\n⊢ q ∧ p"
    good = format_example(state, "exact ⟨h.2, h.1⟩")
    # The prompt stops inside a word: BPE merges "intro" across the prompt/completion seam.
    bad = {"prompt": format_prompt(state) + "intr", "completion": "o h"}
    assert check_prompt_boundaries(tokenizer, [good, good]) == 0
    assert "token boundary" not in caplog.text
    assert check_prompt_boundaries(tokenizer, [good, bad, bad]) == 1
    assert "1 of 2 examples: the prompt does not end at a token boundary" in caplog.text


def test_warm_start_is_adapter_i_minus_1_and_step_1_uses_the_decayed_rate(
    iteration_2, lora_adapter, tiny_base, pairs, tmp_path
):
    summary = read_json(iteration_2 / "training_summary.json")
    assert summary["warm_start"] == {
        "adapter": str(lora_adapter),
        "max_abs_diff_before_step_1": 0.0,
    }
    records = [json.loads(x) for x in (iteration_2 / "metrics.jsonl").read_text().splitlines()]
    step1 = next(r for r in records if r["step"] == 1 and "learning_rate" in r)
    assert step1["learning_rate"] == pytest.approx(SFT["learning_rate"] * SFT["lr_decay"] ** 2)

    # The check itself, on a trainer about to start: equal to adapter i-1, and able to differ.
    from transformers import AutoTokenizer

    sft = SFTConfig.from_dict(LATER)
    model = load_base_model(tiny_base, quantization="none", cuda=False)
    trainer = build_trainer(model, AutoTokenizer.from_pretrained(tiny_base),
                            read_examples(pairs["train"])[:8], read_examples(pairs["val"]), sft,
                            plan_sft(sft, 1, lora_adapter), output_dir=tmp_path / "ck", cuda=False,
                            seed=0)  # fmt: skip
    assert adapter_difference(trainer.model, lora_adapter) == 0.0
    assert adapter_difference(trainer.model, iteration_2) > 0  # iteration 2 trained on from it


def test_the_mix_is_the_subsample_plus_the_upsampled_verified_steps(iteration_2, searches):
    data = read_json(iteration_2 / "training_summary.json")["data"]
    steps = read_positive_steps(searches).table
    assert "s_rejected" not in set(steps.column("theorem").to_pylist())  # failed verification
    train_steps, val_steps, test_steps = split_steps_by_theorem(steps, TheoremSplit.of(SPLIT, 0))
    assert data["base_pairs"] == LATER["base_pair_subsample"]
    assert data["positive_steps"] == train_steps.num_rows > 0
    assert data["positive_examples"] == train_steps.num_rows * LATER["positive_upsample"]
    assert data["train_examples"] == data["base_pairs"] + data["positive_examples"]
    assert data["trajectory_val_steps"] == val_steps.num_rows > 0
    assert data["trajectory_test_steps"] == test_steps.num_rows > 0
    assert data["trajectory_test_theorems"] == len(set(test_steps.column("theorem").to_pylist()))
    assert data["prompt_boundary_mismatches"] == 0
    per_source = data["trajectories"]["per_source"]
    assert per_source["iter_0/search"]["proved_verified"] == 16
    assert per_source["iter_0/search"]["proved_unverified"] == 1
    noise = per_source["iter_0/search_noise"]
    assert noise["unique_steps"] < noise["steps"]  # proofs 12–15 were found by both searches


def test_both_validation_losses_before_and_after_and_the_selected_step(iteration_2):
    summary = read_json(iteration_2 / "training_summary.json")
    assert [s for s, _ in summary["eval_loss"]] == [2, 3]
    assert [s for s, _ in summary["eval_trajectory_loss"]] == [2, 3]
    sel = summary["selection"]
    assert sel["criterion"] == "plateau" and sel["step"] == summary["best_step"] in (2, 3)
    for name, curve in (("pairs", "eval_loss"), ("trajectory", "eval_trajectory_loss")):
        v = summary["validation"][name]
        assert v["after"] == dict(summary[curve])[sel["step"]]
        assert v["before"] > 0 and v["before"] != v["after"]
    assert summary["validation"]["used_for"].startswith("checkpoint selection")
    # The test split's loss of the same two models: step 0 and the selected step (no "best": it
    # is never searched over), measured at the same evaluations as the validation losses.
    test = summary["test"]["trajectory"]
    assert (
        set(test) == {"before", "after"} and test["before"] > 0 and test["before"] != test["after"]
    )
    assert "never used" in summary["test"]["used_for"]
    records = [json.loads(x) for x in (iteration_2 / "metrics.jsonl").read_text().splitlines()]
    test_loss = {r["step"]: r["eval_test_loss"] for r in records if "eval_test_loss" in r}
    assert test_loss[0] == test["before"] and test_loss[sel["step"]] == test["after"]
    hp = read_json(iteration_2 / "hyperparameters.json")
    assert hp["effective"]["select_by"] == "plateau" and hp["effective"]["positive_upsample"] == 3


def test_select_step_criteria():
    h = {
        0: {"pairs": 1.00, "trajectory": 2.0},
        1: {"pairs": 0.95, "trajectory": 1.5},
        2: {"pairs": 0.955, "trajectory": 1.2},  # within 1 % of the lowest so far: holding
        3: {"pairs": 1.05, "trajectory": 0.9},  # base pairs rising: overfitting trajectories
        4: {"pairs": 0.96, "trajectory": 1.1},
    }  # back within 1.1 % … not 1 %
    assert select_step(h, "plateau", 0.01).step == 2
    assert select_step(h, "plateau", 0.02).step == 4
    assert select_step(h, "pairs_loss", 0.01).step == 1
    assert select_step(h, "trajectory_loss", 0.01).step == 3
    no_traj = {0: {"pairs": 1.0}, 2: {"pairs": 0.8}, 4: {"pairs": 0.9}}
    chosen = select_step(no_traj, "plateau", 0.01)
    assert (chosen.step, chosen.criterion) == (2, "pairs_loss")
    with pytest.raises(ValueError, match="nothing to select"):
        select_step({0: {"pairs": 1.0}}, "plateau", 0.01)
    # The test loss never chooses: whatever it says, every criterion picks the same step.
    for tested in ({s: {**v, "test": -s} for s, v in h.items()},
                   {s: {**v, "test": s} for s, v in h.items()}):  # fmt: skip
        for criterion, tolerance in (("plateau", 0.01), ("plateau", 0.02), ("pairs_loss", 0.01),
                                     ("trajectory_loss", 0.01)):  # fmt: skip
            assert select_step(tested, criterion, tolerance) == select_step(h, criterion, tolerance)
    # The warm start has the lowest base-pair loss and every step rises above it: no plateau, so
    # the step that hurt the base pairs least (measured on the demo: 0.353 at step 0, ≥ 0.357 after).
    rising = {
        0: {"pairs": 0.353, "trajectory": 0.58},
        50: {"pairs": 0.361, "trajectory": 0.56},
        100: {"pairs": 0.357, "trajectory": 0.55},
        150: {"pairs": 0.365, "trajectory": 0.52},
    }
    chosen = select_step(rising, "plateau", 0.01)
    assert chosen.step == 100 and chosen.criterion.startswith("plateau (none held")


def test_trajectory_steps_stating_a_benchmark_theorem_are_refused_or_dropped(searches, tmp_path):
    steps = read_positive_steps(searches).table
    root = next(r for r in steps.to_pylist() if r["depth"] == 0)
    bench = tmp_path / "bench.jsonl"
    write_theorems(bench, [Theorem(name="b1", formal_statement="theorem b1 : True := by\n",
                                   goal=root["state_before"])])  # fmt: skip
    sft = SFTConfig.from_dict(LATER)
    split = TheoremSplit.of(SPLIT, 0)
    base = [format_example("p : Prop\n⊢ p → p", "intro h")]
    with pytest.raises(ContaminationError, match=root["theorem"]):
        build_mix(base, searches, sft, iteration=1, split=split, eval_benchmarks=[bench])
    mix = build_mix(base, searches, sft, iteration=1, split=split, eval_benchmarks=[bench],
                    decontamination="drop")  # fmt: skip
    check = mix.decontamination
    assert check["contaminated"] == {root["theorem"]: "bench:b1"} and check["rows_dropped"] > 0
    clean = build_mix(base, searches, sft, iteration=1, split=split)

    def steps(m):
        return m.positive_steps + len(m.trajectory_val) + len(m.trajectory_test)

    assert steps(mix) == steps(clean) - check["rows_dropped"]


def test_qlora_iteration_warm_starts_and_merges_into_an_unquantized_base(
    tiny_base, pairs, searches, tmp_path
):
    """4-bit NF4 on CPU (bitsandbytes' CPU path): iteration 0, then a warm-started iteration 1,
    merged into the full-precision base; merged logits = base + adapter logits."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from burnqed.train.export import merge_adapter

    pytest.importorskip("bitsandbytes")
    cfg = {**LATER, "quantization": "nf4", "max_steps": 2, "later_max_steps": 2}
    a0, a1 = tmp_path / "iter_0", tmp_path / "iter_1"
    train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=a0, cfg=cfg, seed=0)
    train_sft(base=tiny_base, train=pairs["train"], val=pairs["val"], out=a1, cfg=cfg,
              iteration=1, previous_adapter=a0, trajectories=searches, seed=0,
              split=SPLIT)  # fmt: skip
    summary = read_json(a1 / "training_summary.json")
    assert summary["warm_start"]["max_abs_diff_before_step_1"] == 0.0
    assert summary["data"]["positive_examples"] > 0
    assert adapter_difference_from_files(a0, a1) > 0  # it trained

    merged = tmp_path / "merged"
    merge_adapter(base=tiny_base, adapter=a1, out=merged)
    tokenizer = AutoTokenizer.from_pretrained(tiny_base)
    enc = tokenizer([format_prompt("p q : Prop\nh : p ∧ q\n⊢ q ∧ p")], return_tensors="pt")
    base = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    with torch.no_grad():
        reference = PeftModel.from_pretrained(base, str(a1)).eval()(**enc).logits
        model = AutoModelForCausalLM.from_pretrained(merged).eval()
        logits = model(**enc).logits
    assert type(model.model.layers[0].self_attn.q_proj).__name__ == "Linear"
    assert model.dtype == torch.float32
    assert (logits - reference).abs().max() < 1e-4


def adapter_difference_from_files(a: Path, b: Path) -> float:
    from safetensors.torch import load_file

    wa, wb = load_file(a / "adapter_model.safetensors"), load_file(b / "adapter_model.safetensors")
    return max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)


def test_validation_and_test_fractions_leave_theorems_to_train_on():
    from burnqed.config import ConfigError

    with pytest.raises(ConfigError, match=r"split\.test_fraction: .* must be < 1"):
        SplitConfig.from_dict({"val_fraction": 0.6, "test_fraction": 0.4})
    assert SplitConfig.from_dict({**SPLIT, "test_fraction": 0}).test_fraction == 0
