"""The theorem generator and the tracer: provable by construction, depth-controlled, traced pairs
that validate against the data stage's schema."""

from __future__ import annotations

import collections
import itertools
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from burnqed.data.proplogic import generate_theorems
from burnqed.data.proplogic_trace import TraceError, trace_theorem, trace_theorems
from burnqed.data.schema import validate_tactic_pairs
from burnqed.proplogic.repl import Repl
from burnqed.theorems import Theorem, read_theorems, write_theorems


def check_whole_file(repl: Repl, t: Theorem) -> None:
    """The assembled file (statement + proof) is accepted: no errors, no sorry, no axioms."""
    text = t.lean_file(t.proof) + f"#print axioms {t.name}\n"
    payload = {
        "file": text,
        "readHeader": False,
        "inheritEnv": False,
        "sorrys": False,
        "typeErrorsAsGoals": False,
        "newConstants": False,
    }
    units = json.loads(repl.handle_line("frontend.process " + json.dumps(payload)))["units"]
    assert len(units) == 2, (t, units)
    assert units[0]["messages"] == [], (t.formal_statement, t.proof, units[0]["messages"])
    assert units[1]["messages"][0]["data"] == f"'{t.name}' does not depend on any axioms"


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    lo=st.integers(1, 6),
    span=st.integers(0, 4),
    nvars=st.integers(1, 5),
)
def test_every_generated_theorem_is_proved_by_its_recorded_proof(
    seed: int, lo: int, span: int, nvars: int
) -> None:
    theorems = generate_theorems(6, seed=seed, min_depth=lo, max_depth=lo + span, variables=nvars)
    repl = Repl()
    for t in theorems:
        assert lo <= len(t.proof) <= lo + span
        repl.handle_line("reset")
        steps = trace_theorem(repl, t)  # step by step through goal.tactic: closes every goal
        assert steps[-1][2] == "no goals"
        check_whole_file(repl, t)


def test_many_seeds_all_provable() -> None:
    theorems = generate_theorems(1500, seed=12345, min_depth=1, max_depth=8, variables=4)
    table = trace_theorems(theorems)  # raises TraceError on any proof that does not replay
    assert table.num_rows == sum(len(t.proof) for t in theorems)


def test_depths_names_determinism_and_variety() -> None:
    a = generate_theorems(600, seed=7, min_depth=2, max_depth=6, variables=4)
    b = generate_theorems(600, seed=7, min_depth=2, max_depth=6, variables=4)
    assert a == b
    assert a != generate_theorems(600, seed=8, min_depth=2, max_depth=6, variables=4)
    assert [t.name for t in a] == [f"prop_{i:05d}" for i in range(600)]
    assert len({t.formal_statement.split(" ", 2)[2] for t in a}) == 600  # distinct statements
    depths = collections.Counter(len(t.proof) for t in a)
    assert set(depths) == {2, 3, 4, 5, 6} and min(depths.values()) > 60  # uniform-ish
    first_words = collections.Counter(tac.split()[0] for t in a for tac in t.proof)
    for tactic in [
        "intro",
        "exact",
        "apply",
        "constructor",
        "obtain",
        "rcases",
        "cases",
        "assumption",
        "left",
        "right",
        "exfalso",
        "contradiction",
    ]:
        assert first_words[tactic] > 0, tactic
    text = " ".join(t.formal_statement for t in a)
    for connective in ["∧", "∨", "→", "¬", "↔", "True", "False"]:
        assert connective in text, connective
    assert any(t.formal_statement.startswith(f"theorem {t.name} : ∀ (") for t in a)
    assert any(t.formal_statement.startswith(f"theorem {t.name} (") for t in a)
    assert all(t.formal_statement.endswith(":= by\n") and t.header == "" for t in a)
    c = generate_theorems(3, seed=7, min_depth=1, max_depth=1, variables=2, prefix="held")
    assert [t.name for t in c] == ["held_00000", "held_00001", "held_00002"]
    assert all(len(t.proof) == 1 for t in c)


def test_generator_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="min_depth"):
        generate_theorems(1, seed=0, min_depth=3, max_depth=2)
    with pytest.raises(ValueError, match="variables"):
        generate_theorems(1, seed=0, variables=0)


def test_theorems_roundtrip_through_jsonl(tmp_path) -> None:
    theorems = generate_theorems(20, seed=1)
    path = tmp_path / "theorems.jsonl"
    assert write_theorems(path, theorems) == 20
    assert list(read_theorems(path)) == theorems


def test_traced_pairs_validate_and_describe_each_step() -> None:
    theorems = generate_theorems(200, seed=3, min_depth=1, max_depth=5)
    table = trace_theorems(theorems, source="proplogic")
    validate_tactic_pairs(table, where="traced proplogic pairs")
    rows = table.to_pylist()
    by_theorem = collections.defaultdict(list)
    for row in rows:
        by_theorem[row["theorem"]].append(row)
    assert set(by_theorem) == {f"proplogic:{t.name}" for t in theorems}
    for t in theorems:
        steps = by_theorem[f"proplogic:{t.name}"]
        assert [r["depth"] for r in steps] == list(range(len(t.proof)))
        assert [r["tactic"] for r in steps] == list(t.proof)
        assert steps[-1]["state_after"] == "no goals"
        for prev, nxt in itertools.pairwise(steps):
            assert prev["state_after"] == nxt["state_before"]
        assert "⊢" in steps[0]["state_before"] and "_uniq" not in steps[0]["state_before"]
    # States are Lean-printed: grouped hypotheses, case tags, blank line between goals.
    assert any(re.search(r"^p q( r)? : Prop$", r["state_before"], re.M) for r in rows)
    assert any(
        "\n\ncase " in r["state_after"] or r["state_after"].startswith("case ") for r in rows
    )


def test_tracer_names_the_theorem_and_step_of_a_broken_proof() -> None:
    good = generate_theorems(1, seed=5, min_depth=3, max_depth=3)[0]
    broken = Theorem(
        name="bad",
        formal_statement=good.formal_statement.replace(good.name, "bad"),
        proof=(*good.proof[:1], "exact nonsense", *good.proof[2:]),
    )
    with pytest.raises(
        TraceError, match=r"bad: step 1 `exact nonsense` failed: unknown identifier"
    ):
        trace_theorems([good, broken])
    short = Theorem(name="short", formal_statement=good.formal_statement, proof=good.proof[:-1])
    with pytest.raises(TraceError, match="short: the recorded proof leaves goals"):
        trace_theorems([short])
    nonsense = Theorem(name="typo", formal_statement="theorem typo : p ∧ := by\n", proof=("rfl",))
    with pytest.raises(TraceError, match="typo: statement does not elaborate"):
        trace_theorems([nonsense])
