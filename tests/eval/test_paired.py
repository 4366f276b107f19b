"""The paired test: exact McNemar equals enumeration; pairs only the theorems both evals evaluated,
at the right budget; says undecided (with the reason) whenever the evals are not comparable — among
them, evals that differ in any field but the factor the comparison declares it varies."""

from __future__ import annotations

import copy
import itertools
from fractions import Fraction

import pytest

from burnqed.eval.paired import COMPARED_FIELDS, FACTORS, mcnemar_p, paired_test, summary_line
from tests.eval.test_compare import synthetic_eval


@pytest.mark.parametrize("n", range(0, 13))
def test_mcnemar_p_equals_the_enumerated_two_sided_binomial_test(n):
    # Every sequence of n discordant pairs is equally likely under "no difference": the p-value is
    # the share of sequences at least as far from n/2 as the one observed.
    for gained in range(n + 1):
        lost = n - gained
        far = abs(gained - n / 2)
        seqs = list(itertools.product((0, 1), repeat=n))
        enumerated = Fraction(sum(abs(sum(s) - n / 2) >= far for s in seqs), len(seqs))
        assert mcnemar_p(gained, lost) == pytest.approx(float(enumerated), abs=1e-15)
        assert mcnemar_p(gained, lost) == mcnemar_p(lost, gained)


def test_mcnemar_p_on_the_reviews_numbers():
    assert mcnemar_p(30, 27) == pytest.approx(0.7914, abs=1e-4)  # iter_0 vs baseline: a coin toss
    assert mcnemar_p(33, 26) == pytest.approx(0.4350, abs=1e-4)  # the EBM vs its no-EBM twin
    assert mcnemar_p(63, 13) == pytest.approx(5.045e-9, rel=1e-3)  # iter_1 vs the control
    assert mcnemar_p(0, 0) == 1.0 and mcnemar_p(5, 0) == 0.0625 and mcnemar_p(6, 0) == 0.03125
    assert mcnemar_p(2000, 1900) > 0  # large counts stay exact (no float overflow)
    with pytest.raises(ValueError):
        mcnemar_p(-1, 2)


def test_pairs_only_theorems_both_evaluated_and_counts_each_way():
    # a..j; before evaluated a..h, after all ten.  Solved at 300: before {a, b, c}, after {a, d, i}.
    before = synthetic_eval("before", {100: ["a"], 300: ["a", "b", "c"]}, 8)
    after = synthetic_eval("after", {100: ["a", "d"], 300: ["a", "d", "i"]}, 10)
    t = paired_test(before, after, varies="model")
    assert t["budget_before"] == t["budget_after"] == 300  # the largest shared budget
    assert t["theorems"] == 8 and t["left_out"] == {
        "evaluated by before only": 0,
        "evaluated by after only": 2,
    }
    assert (t["gained_theorems"], t["lost_theorems"]) == (["d"], ["b", "c"])  # i is left out
    assert (t["both"], t["neither"]) == (1, 4)
    assert t["verdict"] == "undecided" and t["reasons"] == ["partial eval: before partial 8/10"]
    at_100 = paired_test(before, after, varies="model", budget=100)
    assert (at_100["gained_theorems"], at_100["lost_theorems"]) == (["d"], [])
    assert "left out: 2 evaluated by after only" in summary_line(t)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"benchmark": {"sha256": "other"}}, "different benchmark"),
        ({"pass_n": 4}, "different attempts (pass_n)"),
        ({"provenance": {"sampling": {"temperature": 1.0}}}, "different temperature"),
        ({"budgets": [100], "by_budget": []}, "no budget in common"),
        ({"per_theorem": None}, "no per-theorem rows in after"),
    ],
)
def test_incomparable_evals_are_undecided_with_the_reason(change, reason):
    names = [f"t{i}" for i in range(20)]
    before = synthetic_eval("before", {300: []}, 20, 20, theorems=names)
    after = {**synthetic_eval("after", {300: names[:10]}, 20, 20, theorems=names), **change}
    t = paired_test(before, after, varies="model")
    assert t["verdict"] == "undecided" and any(r.startswith(reason) for r in t["reasons"]), t
    # The same counts between comparable evals are a clear difference.
    ok = paired_test(before, synthetic_eval("after", {300: names[:10]}, 20, 20, theorems=names),
                     varies="model")  # fmt: skip
    assert ok["verdict"] == "better" and ok["p_value"] == pytest.approx(2 / 2**10)


def test_verdicts_follow_the_sign_and_alpha():
    names = [f"t{i}" for i in range(20)]

    def ev(label, solved):
        return synthetic_eval(label, {300: solved}, 20, 20, theorems=names)

    def test(a, b):
        return paired_test(a, b, varies="model")

    assert test(ev("a", names[:6]), ev("b", []))["verdict"] == "worse"  # p = 0.031
    assert test(ev("a", []), ev("b", names[:5]))["verdict"] == "no measurable effect"
    assert test(ev("a", names[:5]), ev("b", names[:5]))["p_value"] == 1.0
    # A temperature recorded by one eval only is a difference (unrecorded in both is equal).
    missing = synthetic_eval("b", {300: []}, 20, 20, theorems=names, temperature=None)
    t = test(ev("a", []), missing)
    assert t["verdict"] == "undecided" and t["reasons"] == [
        "different temperature: a 0.8, b not recorded — only the model may differ"
    ]
    assert test(missing, {**missing, "label": "c"})["verdict"] == "no measurable effect"


# Every field a pair must share (burnqed.eval.paired.COMPARED_FIELDS): where an eval JSON records
# it (burnqed.eval.stage; the `machine` block of burnqed.determinism), its value in `recorded`, and
# another value.
FIELDS = {
    "benchmark": (("benchmark", "sha256"), "abcdef0123456789", "other"),
    "attempts (pass_n)": (("pass_n",), 1, 4),
    "seed": (("provenance", "seeds", "seed"), 0, 1),
    "candidates": (("provenance", "sampling", "n"), 16, 8),
    "temperature": (("provenance", "sampling", "temperature"), 0.8, 1.2),
    "top_p": (("provenance", "sampling", "top_p"), 1.0, 0.95),
    "max_new_tokens": (("provenance", "sampling", "max_new_tokens"), 64, 128),
    "nodes per step": (("provenance", "config", "search", "expansions_per_step"), 1, 2),
    "torch threads": (("machine", "torch_threads"), 1, 2),
    "instruction set": (("machine", "cpu_capability"), "AVX2", "AVX512"),
    "model": (("provenance", "model", "sha256"), "m0", "m1"),
    "value model": (("provenance", "ebm", "sha256"), "e0", "e1"),
    "budget factor": (("budget_factor",), 1, 2),
}
NAMES = [f"t{i}" for i in range(20)]


def _set(e: dict, keys: tuple[str, ...], value) -> dict:
    e = copy.deepcopy(e)
    d = e
    for k in keys[:-1]:
        d = d.setdefault(k, {})
    d[keys[-1]] = value
    return e


def recorded(label: str, solved: list[str]) -> dict:
    """A synthetic eval recording every compared field (its first value in FIELDS)."""
    e = synthetic_eval(label, {300: solved}, 20, 20, theorems=NAMES)
    for keys, value, _ in FIELDS.values():
        e = _set(e, keys, value)
    return e


def test_the_fields_tested_are_the_fields_compared():
    assert list(FIELDS) == [name for name, _ in COMPARED_FIELDS]
    assert set(FACTORS) == {"model", "value model", "budget", "training"}


@pytest.mark.parametrize("varies", ["model", "value model", "budget", "training"])
@pytest.mark.parametrize("field", list(FIELDS))
def test_a_pair_differing_beyond_its_factor_is_undecided_naming_the_field(field, varies):
    keys, mine, other = FIELDS[field]
    before = recorded("before", [])
    after = _set(recorded("after", NAMES[:10]), keys, other)
    t = paired_test(before, after, varies=varies)
    assert t["varies"] == varies and (t["gained"], t["lost"]) == (10, 0)  # counted all the same
    if field in FACTORS[varies]:  # what the comparison varies: decided as before
        assert t["verdict"] == "better" and t["reasons"] == [], t
        assert t["p_value"] == pytest.approx(2 / 2**10)
    else:
        shown = {0.8: "0.8", 1.2: "1.2", 1.0: "1", 0.95: "0.95"}
        a, b = (shown.get(x, str(x)) for x in (mine, other))
        assert t["verdict"] == "undecided", t
        assert t["reasons"] == [
            f"different {field}: before {a}, after {b} — only the {varies} may differ"
        ]
        assert f"different {field}" in summary_line(t)


def test_a_machine_block_in_one_eval_only_is_a_difference():
    """Evals from before the `machine` block existed compare equal to each other (None vs None),
    not to one that records it."""
    old_a, old_b = recorded("a", []), recorded("b", NAMES[:10])
    del old_a["machine"], old_b["machine"]
    assert paired_test(old_a, old_b, varies="model")["verdict"] == "better"
    t = paired_test(old_a, recorded("b", NAMES[:10]), varies="value model")
    assert t["verdict"] == "undecided" and t["reasons"] == [
        "different torch threads: a not recorded, b 1 — only the value model may differ",
        "different instruction set: a not recorded, b AVX2 — only the value model may differ",
    ]
    with pytest.raises(ValueError, match="varies='seed'"):
        paired_test(old_a, old_b, varies="seed")  # not a factor a comparison may vary
