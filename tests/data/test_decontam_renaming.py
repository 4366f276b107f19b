"""Decontamination up to renaming: each way a benchmark statement used to slip through is caught,
and statements that differ in substance are not confused (burnqed.data.canonical)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from burnqed.data.decontam import BenchmarkIndex, check_pairs
from burnqed.data.schema import TACTIC_PAIR_SCHEMA
from burnqed.theorems import Theorem

BENCH = "theorem bench_1 (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) (h₁ : a * b = 1) : a + b ≥ 2 := by\n"
INDEX = BenchmarkIndex.from_theorems([Theorem(name="bench_1", formal_statement=BENCH)], source="b")

# Training-data states that are the benchmark's initial goal, presented differently.
EVADING_STATES = {
    "renamed hypotheses and variables": "x y : ℝ\nhxy : 0 < x ∧ 0 < y\nhprod : x * y = 1\n⊢ x + y ≥ 2",
    "reordered binders": "b : ℝ\na : ℝ\nh₁ : a * b = 1\nh₀ : 0 < a ∧ 0 < b\n⊢ a + b ≥ 2",
    "extra parentheses": "a b : ℝ\nh₀ : (0 < a) ∧ (0 < b)\nh₁ : (a * b) = 1\n⊢ ((a + b) ≥ 2)",
    "∀ form, not yet introduced": "⊢ ∀ (a b : ℝ), 0 < a ∧ 0 < b → a * b = 1 → a + b ≥ 2",
    "half introduced": "a b : ℝ\n⊢ 0 < a ∧ 0 < b → a * b = 1 → a + b ≥ 2",
    "a second goal": "x : ℕ\n⊢ x = x\n\na b : ℝ\nh₀ : 0 < a ∧ 0 < b\nh₁ : a * b = 1\n⊢ a + b ≥ 2",
}

# Training-data statements of the benchmark theorem, presented differently (and named otherwise).
EVADING_STATEMENTS = {
    "no spaces": "theorem t1 (a b:ℝ) (h₀:0<a∧0<b) (h₁:a*b=1):a+b≥2:=by\n",
    "line comment": "theorem t2 (a b : ℝ) -- the reals\n  (h₀ : 0 < a ∧ 0 < b) (h₁ : a * b = 1) :\n"
    "  a + b ≥ 2 := by -- AM-GM\n",
    "block comment": "theorem t3 (a b : ℝ) /- positive /- nested -/ -/ (h₀ : 0 < a ∧ 0 < b)\n"
    "  (h₁ : a * b = 1) : a + b ≥ 2 := by\n",
    "docstring": '/-- AM-GM, "two" -/\ntheorem t4 (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) (h₁ : a * b = 1) '
    ": a + b ≥ 2 := by\n",
    "attribute and modifier": "@[simp] private theorem t5 (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) "
    "(h₁ : a * b = 1) : a + b ≥ 2 := by\n",
    "∀ form of the binders": "lemma t6 : ∀ x y : ℝ, 0 < x ∧ 0 < y → x * y = 1 → x + y ≥ 2 := by\n",
    "regrouped and reordered": "theorem t7 {y : ℝ} (x : ℝ) (hp : x * y = 1) (hpos : 0 < x ∧ 0 < y) "
    ": x + y ≥ 2 := by\n",
    "ASCII notation": "theorem t8 (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) (h₁ : a * b = 1) : "
    "a + b >= 2 := by\n",
}


@pytest.mark.parametrize("state", EVADING_STATES.values(), ids=EVADING_STATES.keys())
def test_a_benchmark_goal_presented_otherwise_in_a_state_is_caught(state):
    assert INDEX.match_state(state) == "bench_1"


@pytest.mark.parametrize("text", EVADING_STATEMENTS.values(), ids=EVADING_STATEMENTS.keys())
def test_a_benchmark_statement_presented_otherwise_is_caught(text):
    assert INDEX.match_theorem(Theorem(name="copy", formal_statement=text)) == "bench_1"


# Over-reach: statements that differ in substance must not match.
DIFFERENT = {
    "variables in other positions": "theorem d (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) (h₁ : a * b = 1) : "
    "a + a ≥ 2 := by",
    "another type": "theorem d (a b : ℚ) (h₀ : 0 < a ∧ 0 < b) (h₁ : a * b = 1) : a + b ≥ 2 := by",
    "another numeral": "theorem d (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) (h₁ : a * b = 2) : a + b ≥ 2 := by",
    "a hypothesis less": "theorem d (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) : a + b ≥ 2 := by",
    "a hypothesis more": "theorem d (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) (h₁ : a * b = 1) (h : a ≠ b) : "
    "a + b ≥ 2 := by",
    "another relation": "theorem d (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) (h₁ : a * b = 1) : a + b > 2 := by",
    "parentheses that matter": "theorem d (a b : ℝ) (h₀ : 0 < a ∧ 0 < b) (h₁ : a * (b = 1)) : "
    "a + b ≥ 2 := by",
}


@pytest.mark.parametrize("text", DIFFERENT.values(), ids=DIFFERENT.keys())
def test_a_different_statement_does_not_match(text):
    assert INDEX.match_theorem(Theorem(name="d", formal_statement=text)) is None


@pytest.mark.parametrize(
    ("bench", "other"),
    [
        # The roles of b and c are fixed by h₀: swapping them in the goal is another statement.
        ("(a b c : ℝ) (h₀ : a < b) : a + b = c", "(a b c : ℝ) (h₀ : a < b) : a + c = b"),
        ("(x y : ℕ) (h : x = 2 * y) : x - y = y", "(x y : ℕ) (h : x = 2 * y) : y - x = y"),
        ("(a b c : ℤ) : a - b - c = 0", "(a b c : ℤ) : a - (b - c) = 0"),
        ("(a b c : ℕ) : (a + b) * c = 0", "(a b c : ℕ) : a + b * c = 0"),
        ("(p q : Prop) : (p → q) → p", "(p q : Prop) : p → q → p"),
        ("(x : ℝ) : x ^ 2 = 4", "(x : ℝ) : x ^ 3 = 4"),
        ("(x : ℝ) : x = 2.5", "(x : ℝ) : x = 25"),
        ("(n : ℕ) (h : ∀ m, m < n) : n = 0", "(n : ℕ) (h : ∀ m, n < m) : n = 0"),
        ("(f : ℕ → ℕ) : ∃ x, f x = x", "(f : ℕ → ℕ) : ∀ x, f x = x"),
    ],
)
def test_over_reach_different_goals_stay_apart(bench, other):
    index = BenchmarkIndex.from_theorems(
        [Theorem(name="b", formal_statement=f"theorem b {bench} := by")], source="b"
    )
    assert (
        index.match_theorem(Theorem(name="b", formal_statement=f"theorem o {other} := by")) is None
    )
    states = {
        "(a b c : ℝ) (h₀ : a < b) : a + c = b": "a b c : ℝ\nh₀ : a < b\n⊢ a + c = b",
        "(a b c : ℤ) : a - (b - c) = 0": "a b c : ℤ\n⊢ a - (b - c) = 0",
    }
    if other in states:
        assert index.match_state(states[other]) is None


# Statements that once had one canonical form though they state different things: (benchmark
# statement, another statement and the state Lean prints for it, a state of the benchmark
# statement itself that must still match).
ONCE_MERGED = {
    # The `:=` of a `let` in the type is not the end of the statement.
    "let values": (
        "theorem b : let x := 1; x = x := rfl",
        ("theorem o : let x := 2; x = x := rfl", "⊢ let x := 2;\n  x = x"),
        "⊢ let x := 1;\n  x = x",
    ),
    # `if c then a else b → s` is `if c then a else (b → s)`, not a premise `if c then a else b`.
    "if then else before an arrow": (
        "theorem b (x s : ℕ) : if x = 0 then s = 1 else s = 2 → s = 3 := by",
        ("theorem o (x s : ℕ) (h : if x = 0 then s = 1 else s = 2) : s = 3 := by",
         "x s : ℕ\nh : if x = 0 then s = 1 else s = 2\n⊢ s = 3"),
        "x s : ℕ\n⊢ if x = 0 then s = 1 else s = 2 → s = 3",
    ),
    # A global constant `v0` is not the variable renamed `v0`.
    "a global named like a renamed variable": (
        "theorem b (x : ℕ) : x = v0 := by",
        ("theorem o (x : ℕ) : x = x := by", "x : ℕ\n⊢ x = x"),
        "y : ℕ\n⊢ y = v0",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", ONCE_MERGED.values(), ids=ONCE_MERGED.keys())
def test_statements_that_once_had_one_canonical_form_stay_apart(case):
    bench, (other, other_state), own_state = case
    index = BenchmarkIndex.from_theorems([Theorem(name="b", formal_statement=bench)], source="b")
    assert index.match_theorem(Theorem(name="o", formal_statement=other)) is None
    assert index.match_state(other_state) is None
    assert index.match_state(own_state) == "b"  # the benchmark's own goal is still caught


def test_a_parenthesised_premise_matches_the_hypothesis_lean_prints_for_it():
    """``(if c then a else b) → s`` introduced is ``h : if c then a else b ⊢ s``: the parentheses
    around a whole premise or hypothesis do not count, whatever is inside them."""
    bench = "theorem b (x s : ℕ) : (if x = 0 then s = 1 else s = 2) → s = 3 := by"
    index = BenchmarkIndex.from_theorems([Theorem(name="b", formal_statement=bench)], source="b")
    assert index.match_state("x s : ℕ\nh : if x = 0 then s = 1 else s = 2\n⊢ s = 3") == "b"
    assert index.match_state("x s : ℕ\n⊢ if x = 0 then s = 1 else s = 2 → s = 3") is None


def _pairs(rows: list[tuple[str, str, str, int]]) -> pa.Table:
    """(source, theorem, state_before, depth) rows → a tactic-pair table."""
    return pa.table(
        {
            "source": [r[0] for r in rows],
            "theorem": [r[1] for r in rows],
            "state_before": [r[2] for r in rows],
            "tactic": ["simp"] * len(rows),
            "state_after": ["no goals"] * len(rows),
            "depth": [r[3] for r in rows],
        },
        schema=TACTIC_PAIR_SCHEMA,
    )


LEAK = EVADING_STATES["renamed hypotheses and variables"]


def test_two_sources_sharing_a_theorem_name_are_two_theorems():
    table = _pairs([("lean_github", "amgm", "x : ℝ\n⊢ x = x", 0),
                    ("lean_github", "amgm", "⊢ True", 1),
                    ("workbook", "amgm", LEAK, 0),
                    ("workbook", "amgm", "⊢ True", 1)])  # fmt: skip
    kept, check = check_pairs(table, INDEX, mode="drop", what="tactic pairs")
    assert check.contaminated == {"workbook:amgm": "bench_1"}
    assert kept.column("source").to_pylist() == ["lean_github", "lean_github"]


def test_a_later_state_that_is_a_benchmark_goal_condemns_its_theorem():
    # A training theorem whose proof passes through the benchmark's goal (after some intros).
    table = _pairs([("s", "s:big", "⊢ ∀ (u : ℕ), u = u ∧ 1 = 1", 0),
                    ("s", "s:big", "u : ℕ\n⊢ u = u ∧ 1 = 1", 1),
                    ("s", "s:big", "u : ℕ\nx y : ℝ\nhxy : 0 < x ∧ 0 < y\nhprod : x * y = 1\n"
                     "⊢ x + y ≥ 2", 2),
                    ("s", "s:clean", "⊢ True", 0)])  # fmt: skip
    kept, check = check_pairs(table, INDEX, mode="drop", what="tactic pairs")
    # The extra hypothesis u : ℕ makes that state another goal: not a match.
    assert check.contaminated == {}
    table = _pairs([("s", "s:big", "⊢ ∀ (u : ℕ), u = u ∧ 1 = 1", 0),
                    ("s", "s:big", LEAK, 2),
                    ("s", "s:clean", "⊢ True", 0)])  # fmt: skip
    kept, check = check_pairs(table, INDEX, mode="drop", what="tactic pairs")
    assert check.contaminated == {"s:big": "bench_1"} and check.matched_depth == {"s:big": 2}
    assert kept.column("theorem").to_pylist() == ["s:clean"] and check.rows_dropped == 2
