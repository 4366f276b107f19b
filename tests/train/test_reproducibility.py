"""A rerun of the model stage with the same inputs writes the same bytes; another seed does not.

Each run works in a clean directory of its own with the pipeline's relative paths — tactic pairs,
proofs of an earlier search, ``models/base``, ``models/iter_0/{adapter,merged}`` and
``models/iter_1/adapter`` — as Snakemake runs it in two checkouts.  Runs ``a`` and ``b`` use seed 0;
the runs are in one process, one after the other, so a stage that drew from a global generator
without seeding it would differ here.  Run ``c`` (seed 1) must change the weights, or the
comparison could not fail.  Every file but ``run_info.json`` and ``metrics.jsonl`` is compared.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest

from burnqed.determinism import RUN_SPECIFIC_FILES, reproducible_digests
from burnqed.train.base import build_base
from burnqed.train.export import merge_adapter
from burnqed.train.sft import sort_target_modules, train_sft
from tests.train.conftest import SFT, TINY
from tests.train.pairs import make_pair_rows, write_pairs
from tests.train.trajectories import proofs_from_pairs, write_search

# Small budgets: the point is the bytes, not the quality.
BASE = {**TINY, "steps": 12, "log_every": 4, "eval_pairs": 8}
SFT_SMALL = {**SFT, "max_steps": 4, "eval_steps": 2, "later_max_steps": 2,
             "base_pair_subsample": 100, "positive_upsample": 2}  # fmt: skip
SPLIT = {"val_fraction": 0.25, "test_fraction": 0.25}
PAIRS = Path("data/tactic_pairs")
MODELS = Path("models")


def run_model_stage(root: Path, pairs: dict[str, Path], *, seed: int, later: bool) -> Path:
    """The model stage in ``root`` with relative paths; iteration 1 only when ``later``."""
    root.mkdir(parents=True)
    with contextlib.chdir(root):
        PAIRS.mkdir(parents=True)
        for name, src in pairs.items():
            shutil.copyfile(src, PAIRS / f"{name}.parquet")
        train, val = PAIRS / "train.parquet", PAIRS / "val.parquet"
        build_base(out=MODELS / "base", cfg={"base": "tiny"}, pairs=train, val=val, seed=seed,
                   tiny=BASE)  # fmt: skip
        train_sft(base=MODELS / "base", train=train, val=val, out=MODELS / "iter_0/adapter",
                  cfg=SFT_SMALL, seed=seed, split=SPLIT)  # fmt: skip
        merge_adapter(base=MODELS / "base", adapter=MODELS / "iter_0/adapter",
                      out=MODELS / "iter_0/merged")  # fmt: skip
        if later:
            search = Path("results/iter_0/search")
            write_search(search, proofs_from_pairs(make_pair_rows(16, seed=11, prefix="s")))
            train_sft(base=MODELS / "base", train=train, val=val,
                      out=MODELS / "iter_1/adapter", cfg=SFT_SMALL, iteration=1,
                      previous_adapter=MODELS / "iter_0/adapter", trajectories=[search],
                      seed=seed, split=SPLIT)  # fmt: skip
    return root / MODELS


@pytest.fixture(scope="module")
def runs(tmp_path_factory, one_torch_thread) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("reruns")
    pairs = {  # fewer than the package's pairs: a quarter of the tokenizing
        "train": write_pairs(root / "train.parquet", 80, seed=0, prefix="t"),
        "val": write_pairs(root / "val.parquet", 6, seed=1, prefix="v"),
    }
    return {
        "a": run_model_stage(root / "a", pairs, seed=0, later=True),
        "b": run_model_stage(root / "b", pairs, seed=0, later=True),
        "c": run_model_stage(root / "c", pairs, seed=1, later=False),
    }


@pytest.mark.parametrize("artifact", ["base", "iter_0/adapter", "iter_0/merged", "iter_1/adapter"])
def test_a_rerun_writes_the_same_bytes(runs, artifact):
    a, b = (reproducible_digests(runs[r] / artifact) for r in "ab")
    assert a == b
    # What is compared: the weights and every record but the run-specific files.
    weights = "adapter_model.safetensors" if "adapter" in artifact else "model.safetensors"
    assert weights in a and len(a) >= 5
    assert not set(a) & set(RUN_SPECIFIC_FILES)
    for name in RUN_SPECIFIC_FILES:
        if name != "metrics.jsonl" or artifact != "iter_0/merged":
            assert (runs["a"] / artifact / name).is_file(), name


@pytest.mark.parametrize(
    ("artifact", "weights"),
    [("base", "model.safetensors"), ("iter_0/adapter", "adapter_model.safetensors"),
     ("iter_0/merged", "model.safetensors")],
)  # fmt: skip
def test_another_seed_trains_other_weights(runs, artifact, weights):
    a, c = (reproducible_digests(runs[r] / artifact) for r in "ac")
    assert a[weights] != c[weights]
    # The tokenizer is learned from the data alone: the seed does not touch it.
    if artifact == "base":
        assert a["tokenizer.json"] == c["tokenizer.json"]


def test_the_records_name_the_settings_a_rerun_needs(runs):
    for artifact, summary in (("base", "burnqed_model.json"),
                              ("iter_0/adapter", "training_summary.json"),
                              ("iter_0/merged", "burnqed_merge.json")):  # fmt: skip
        record = json.loads((runs["a"] / artifact / summary).read_text(encoding="utf-8"))
        det = record["determinism"]
        assert det["torch_threads"] == 1 and det["deterministic_algorithms"] == "strict"
        assert det["device"] == "cpu" and det["cpu_capability"]
        assert "wall_seconds" not in record and "argv" not in record
        info = json.loads((runs["a"] / artifact / "run_info.json").read_text(encoding="utf-8"))
        assert info["wall_s"] > 0 and info["created_at"] >= info["started_at"]
        # The machine block: what made the bytes, the caller's own pin variables included; the
        # summary keeps only what decides them (the same for every caller).
        machine = info["machine"]
        assert machine["torch_threads"] == 1 and machine["cpu_capability"] == det["cpu_capability"]
        assert set(machine["isa_pin"]) == {"setting", "applied", "caller", "held"}
        assert det["isa_pin"] == {k: machine["isa_pin"][k] for k in ("setting", "applied", "held")}
        assert machine["isa_pin"]["setting"] == os.environ["BURNQED_CPU_ISA"]
    assert (
        json.loads((runs["c"] / "base/burnqed_model.json").read_text())["determinism"]["seed"] == 1
    )


def test_adapter_config_lists_its_modules_sorted(runs, tmp_path):
    # peft writes target_modules in a Python set's order, which changes with the process's string
    # hashing; runs in one process share it, so the rewrite is checked on its own too.
    config = json.loads((runs["a"] / "iter_0/adapter/adapter_config.json").read_text())
    assert config["target_modules"] == sorted(SFT["target_modules"])
    path = tmp_path / "adapter_config.json"
    path.write_text(json.dumps({"target_modules": ["v_proj", "q_proj", "k_proj"], "r": 4,
                                "exclude_modules": ["b", "a"]}))  # fmt: skip
    sort_target_modules(path)
    rewritten = json.loads(path.read_text())
    assert rewritten == {"target_modules": ["k_proj", "q_proj", "v_proj"], "r": 4,
                         "exclude_modules": ["a", "b"]}  # fmt: skip
    assert path.read_text() == json.dumps(rewritten, indent=2, sort_keys=True)  # peft's format
