"""The EBM's training data is decontaminated: eval trajectories are refused as input, and theorems
whose states are evaluation-benchmark goals (up to renaming) are dropped or refused."""

from __future__ import annotations

import json
import re

import pytest

from burnqed.cli import main as cli_main
from burnqed.data.decontam import BenchmarkIndex, ContaminationError
from burnqed.ebm.groups import (
    EvalTrajectoriesError,
    StateData,
    decontaminate_states,
    trajectory_dirs,
)
from burnqed.theorems import Theorem
from tests.ebm.conftest import toy_search


@pytest.fixture(scope="module")
def eval_dir(tmp_path_factory):
    """An eval's trajectories as the eval stage leaves them: results/iter_1/eval/ (+ eval.json)."""
    root = tmp_path_factory.mktemp("results") / "iter_1"
    toy_search(root / "eval", theorems=3, seed=0)
    return root / "eval"


def test_eval_trajectories_are_refused_by_their_manifest(eval_dir):
    (eval_dir / "manifest.json").write_text(json.dumps({"kind": "eval", "attempts": 3}))
    with pytest.raises(EvalTrajectoriesError, match=r"kind: eval.*never from a benchmark"):
        trajectory_dirs(eval_dir)
    with pytest.raises(EvalTrajectoriesError, match=re.escape(str(eval_dir))):
        trajectory_dirs(eval_dir / "manifest.json")
    # A training search's manifest (kind: search) is accepted.
    (eval_dir / "manifest.json").write_text(json.dumps({"kind": "search"}))
    assert trajectory_dirs(eval_dir) == [eval_dir]


def test_eval_trajectories_are_refused_by_the_eval_json_beside_them(eval_dir, capsys):
    (eval_dir / "manifest.json").write_text("{}")  # an eval written before manifests had a kind
    (eval_dir.parent / "eval.json").write_text(json.dumps({"kind": "burnqed eval"}))
    try:
        with pytest.raises(EvalTrajectoriesError, match=r"eval\.json is its eval result"):
            trajectory_dirs(eval_dir)
        # `burnqed ebm … --search DIR`: one line naming the path, exit 2, before any work.
        argv = ["ebm", "train", "--search", str(eval_dir), "--embeddings", str(eval_dir / "x")]
        assert cli_main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and str(eval_dir) in err and "eval trajectories" in err
    finally:
        (eval_dir.parent / "eval.json").unlink()


def _states(rows: list[tuple[str, str, int]]) -> StateData:
    """(theorem, state text, depth) rows → StateData (roots at depth 0)."""
    data = StateData({}, {}, [], [], [], [], [], [], [])
    for k, (th, text, depth) in enumerate(rows):
        h = f"h{abs(hash(text))}"
        data.texts.setdefault(h, text)
        if depth == 0:
            data.goal.setdefault(th, h)
        data.theorem.append(th)
        data.state_hash.append(h)
        data.depth.append(depth)
        data.on_path.append(True)
        data.failed.append(False)
        data.parent_key.append(None if depth == 0 else (0, th, 0, k - 1))
        data.node_key.append((0, th, 0, k))
    return data


def test_a_theorem_with_a_benchmark_goal_among_its_states_is_dropped_or_refused():
    index = BenchmarkIndex.from_theorems(
        [Theorem(name="b", formal_statement="theorem b (p q : Prop) (h : p ∧ q) : q ∨ p := by")],
        source="bench",
    )
    data = _states([("leak", "⊢ True ∧ True", 0),
                    ("leak", "a b : Prop\nhab : a ∧ b\n⊢ b ∨ a", 1),  # the benchmark, renamed
                    ("clean", "⊢ True", 0), ("clean", "p : Prop\n⊢ p ∨ p", 1)])  # fmt: skip
    with pytest.raises(ContaminationError, match="leak"):
        decontaminate_states(data, index, mode="refuse")
    kept, check = decontaminate_states(data, index, mode="drop")
    assert check.contaminated == {"leak": "b"} and check.rows_dropped == 2
    assert set(kept.theorem) == {"clean"} and set(kept.goal) == {"clean"}
    assert set(kept.texts) == set(kept.state_hash) and len(kept.node_key) == 2
    assert check.states_checked == 4 and check.theorems_checked == 2
