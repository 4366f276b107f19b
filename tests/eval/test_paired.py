"""The paired test: exact McNemar equals enumeration; pairs only the theorems both evals evaluated,
at the right budget; says undecided (with the reason) whenever the evals are not comparable."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from burnqed.eval.paired import mcnemar_p, paired_test, summary_line
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
    t = paired_test(before, after)
    assert t["budget_before"] == t["budget_after"] == 300  # the largest shared budget
    assert t["theorems"] == 8 and t["left_out"] == {
        "evaluated by before only": 0,
        "evaluated by after only": 2,
    }
    assert (t["gained_theorems"], t["lost_theorems"]) == (["d"], ["b", "c"])  # i is left out
    assert (t["both"], t["neither"]) == (1, 4)
    assert t["verdict"] == "undecided" and t["reasons"] == ["partial eval: before partial 8/10"]
    at_100 = paired_test(before, after, budget=100)
    assert (at_100["gained_theorems"], at_100["lost_theorems"]) == (["d"], [])
    assert "left out: 2 evaluated by after only" in summary_line(t)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"benchmark": {"sha256": "other"}}, "different benchmark"),
        ({"pass_n": 4}, "different attempts (pass_n)"),
        ({"provenance": {"sampling": {"temperature": 1.0}}}, "sampling temperatures differ"),
        ({"budgets": [100], "by_budget": []}, "no budget in common"),
        ({"per_theorem": None}, "no per-theorem rows in after"),
    ],
)
def test_incomparable_evals_are_undecided_with_the_reason(change, reason):
    names = [f"t{i}" for i in range(20)]
    before = synthetic_eval("before", {300: []}, 20, 20, theorems=names)
    after = {**synthetic_eval("after", {300: names[:10]}, 20, 20, theorems=names), **change}
    t = paired_test(before, after)
    assert t["verdict"] == "undecided" and any(r.startswith(reason) for r in t["reasons"]), t
    # The same counts between comparable evals are a clear difference.
    ok = paired_test(before, synthetic_eval("after", {300: names[:10]}, 20, 20, theorems=names))
    assert ok["verdict"] == "better" and ok["p_value"] == pytest.approx(2 / 2**10)


def test_verdicts_follow_the_sign_and_alpha():
    names = [f"t{i}" for i in range(20)]

    def ev(label, solved):
        return synthetic_eval(label, {300: solved}, 20, 20, theorems=names)

    assert paired_test(ev("a", names[:6]), ev("b", []))["verdict"] == "worse"  # p = 0.031
    assert paired_test(ev("a", []), ev("b", names[:5]))["verdict"] == "no measurable effect"
    assert paired_test(ev("a", names[:5]), ev("b", names[:5]))["p_value"] == 1.0
    missing = synthetic_eval("b", {300: []}, 20, 20, theorems=names, temperature=None)
    t = paired_test(ev("a", []), missing)
    assert t["verdict"] == "no measurable effect" and t["notes"] == [
        "sampling temperature not recorded for b"
    ]
