"""``bench/lengths.json``: the real sequence lengths the GPU bench draws from are what burnqed's
readers make of the shared data (``bench/lengths.py --write``), not numbers typed in."""

from __future__ import annotations

import importlib.util
import json
import random

import pytest

from burnqed.config import SFTConfig
from tests.conftest import REPO, SHARED

LENGTHS = REPO / "bench" / "lengths.json"


def _bench():
    spec = importlib.util.spec_from_file_location("bench_lengths", REPO / "bench" / "lengths.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_length_table_is_what_the_readers_make_of_the_shared_data():
    assert LENGTHS.is_file(), "no bench/lengths.json: python bench/lengths.py --write"
    table = json.loads(LENGTHS.read_text(encoding="utf-8"))
    bench = _bench()
    if not (SHARED / "data" / bench.LEANDOJO).is_file():
        pytest.skip("no ../shared/data beside the checkout")
    assert table == bench.read_lengths(SHARED / "data", table["chars_per_token"]), (
        "bench/lengths.json is stale: python bench/lengths.py --write"
    )
    assert table["chars_per_token"] == bench.CHARS_PER_TOKEN == 3.0
    assert len(table["sft"]) == 16 and len(table["states"]) == 488
    assert table["sources"]["states"]["sha256"] == (
        "d6654c88476ff14db19d57dea25bd955a240525fb52171e460f89d98f83d7dd5"  # the registry's pin
    )


def test_draws_keep_to_the_configured_bounds_and_shape():
    assert LENGTHS.is_file(), "no bench/lengths.json: python bench/lengths.py --write"
    bench = _bench()
    table = json.loads(LENGTHS.read_text(encoding="utf-8"))
    sft = SFTConfig(batch_size=8, max_length=90, joint_groups_per_step=4,
                    joint_state_max_length=45)  # fmt: skip
    rng = random.Random(0)
    for _ in range(50):
        examples, states, goals = bench.draw(table, sft, 8, rng)
        assert len(examples) == 8 and len(states) == 32 and len(goals) == 4
        assert all(p + c <= 90 for p, c in examples) and max(states + goals) <= 45
    assert bench.draw(table, sft, 8, rng, groups=False)[1:] == ([], [])
    with pytest.raises(ValueError, match="fits the configured bounds"):
        bench.draw(table, SFTConfig(max_length=16, joint_state_max_length=8), 8, rng)
