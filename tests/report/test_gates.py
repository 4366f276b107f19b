"""Every gate can show GO, NO-GO and n/a, on inputs the real writers produced: evals from the eval
stage over toy searches, embedding metrics from the EBM stage (tests/report/conftest.py).  The
embedding thresholds in params.yaml are the ones these healthy and collapsed embeddings reach."""

from __future__ import annotations

import copy
import json

import pytest

from burnqed.config import PolicyConfig, ReportConfig
from burnqed.report.gates import evaluate_gates, load_ebm_metrics, overall
from burnqed.report.stage import run_cross, run_iteration
from tests.eval.conftest import write_benchmark
from tests.report.conftest import make_eval
from tests.search.fakes import FixedPolicy, RandomToyPolicy, toy_theorems

CFG = ReportConfig()  # the shipped thresholds (test_config: params.yaml mirrors the defaults)
STRONG = FixedPolicy({"step 3": -0.1, "step 2": -0.5, "step 1": -1.0})  # proves every countdown
WEAK = FixedPolicy({"bogus": -0.1})  # one tactic, always rejected: proves nothing


def by_gate(gates):
    return {g["gate"]: g for g in gates}


@pytest.fixture(scope="module")
def evals(tmp_path_factory):
    """Evals of one 8-theorem benchmark: a strong and a weak policy, each at T 0.8, the strong one
    also at T 1.0, and an empty run."""
    root = tmp_path_factory.mktemp("gates")
    bench = write_benchmark(root, toy_theorems(8, seed=5, low=3, high=12), name="toy")
    paths = {
        "strong": make_eval(root, bench, "strong", STRONG),
        "weak": make_eval(root, bench, "weak", WEAK),
        "strong_t1": make_eval(root, bench, "strong_t1", STRONG, temperature=1.0),
        "random": make_eval(root, bench, "random", RandomToyPolicy(seed=2)),
        "empty": make_eval(root, bench, "empty", WEAK, searched=0),
        "strong_partial": make_eval(root, bench, "strong_partial", STRONG, searched=6),
        "weak_partial": make_eval(root, bench, "weak_partial", WEAK, searched=6),
    }
    loaded = {k: json.loads(p.read_text()) for k, p in paths.items()}
    assert (
        loaded["strong"]["cumulative"]["solved"] == 8
        and loaded["weak"]["cumulative"]["solved"] == 0
    )
    return {"paths": paths, **loaded}


def test_embedding_gates_go_on_healthy_and_no_go_on_collapsed_embeddings(embedding_runs, evals):
    assert PolicyConfig().pooling == "last"  # the default: L2-normalised, as the embedder here
    got = {}
    for name, run in embedding_runs.items():
        ebm = load_ebm_metrics(run["metrics"], run["ebm"])
        written = json.loads(run["metrics"].read_text())
        # The gates read the keys the writer writes (the probe gate read a key nobody wrote).
        assert ebm["probe_balanced_accuracy"] == written["linear_probe"]["balanced_accuracy"]
        assert ebm["centroid_separation"] == written["centroid_separation"]
        assert ebm["ebm_rank1"] == written["ebm"]["heldout_rank1"]
        got[name] = by_gate(evaluate_gates(CFG, current=evals["strong"], ebm=ebm))
    gated = ("centroid_separation", "probe_balanced_accuracy", "ebm_rank1")
    values = {n: {g: round(got[n][g]["value"], 3) for g in gated} for n in got}
    healthy, c80, collapsed, identical = (got[n] for n in
                                          ("healthy", "collapse80", "collapsed", "identical"))  # fmt: skip
    assert {g: healthy[g]["verdict"] for g in gated} == dict.fromkeys(gated, "go"), values
    assert healthy["centroid_separation"]["value"] > 0.8, values  # ≈ 1 by construction
    # The reproduced system's collapse (label offset −80 %) is a no-go on the separation alone.
    assert c80["centroid_separation"]["verdict"] == "no-go", values
    assert 0.1 < c80["centroid_separation"]["value"] < CFG.centroid_separation_red_line, values
    assert {g: collapsed[g]["verdict"] for g in gated} == dict.fromkeys(gated, "no-go"), values
    assert collapsed["centroid_separation"]["value"] < 0.1, values
    # Every state the same vector: every energy ties; rank-1 scores chance (1/4), not 100 %.
    assert identical["ebm_rank1"]["value"] == pytest.approx(0.25)
    assert identical["ebm_rank1"]["note"].startswith("tie rate 100.0%")
    # Groups of 1 + 3 over a few held-out groups: rank-1 must clear chance by two standard errors
    # (collapsed embeddings score 1/3 here, above the configured red line 0.3 but not chance's).
    assert "red line: chance + 2 SE" in collapsed["ebm_rank1"]["note"], values
    assert {g: identical[g]["verdict"] for g in gated} == dict.fromkeys(gated, "no-go"), values
    assert healthy["ebm_rank1"]["note"].startswith("tie rate 0.0%")
    # No embedding metrics (iteration 0, no EBM yet): n/a, not a verdict.
    none = by_gate(evaluate_gates(CFG, current=evals["strong"], ebm=None))
    assert {g: none[g]["verdict"] for g in gated} == dict.fromkeys(gated, "n/a")


def test_ebm_gain_is_judged_by_the_paired_test(evals):
    def ebm_gain(with_ebm, without):
        return by_gate(evaluate_gates(CFG, current=with_ebm, no_ebm=without))["ebm_gain"]

    go = ebm_gain(evals["strong"], evals["weak"])
    assert go["verdict"] == "go" and go["value"] == 1.0
    assert (go["paired"]["gained"], go["paired"]["lost"]) == (8, 0)
    assert go["paired"]["p_value"] == pytest.approx(2 / 2**8)
    no_go = ebm_gain(evals["weak"], evals["strong"])
    assert no_go["verdict"] == "no-go" and no_go["paired"]["lost"] == 8
    # An EBM that changes nothing is not a go (the old gate: target 0 → go).
    same = ebm_gain(evals["weak"], evals["weak"])
    assert same["verdict"] == "no measurable effect" and same["value"] == 0.0
    assert same["paired"]["p_value"] == 1.0
    assert overall([same]) == "no measurable effect"
    across = ebm_gain(evals["strong_t1"], evals["weak"])  # not the same sampling temperature
    assert across["verdict"] == "undecided" and "different temperature" in across["note"]
    assert ebm_gain(evals["strong"], None)["verdict"] == "n/a"


def test_gain_gates_show_go_no_go_na_and_their_paired_test(evals):
    up = by_gate(evaluate_gates(CFG, current=evals["strong"], baseline=evals["weak"],
                                previous=evals["weak"]))  # fmt: skip
    down = by_gate(evaluate_gates(CFG, current=evals["weak"], baseline=evals["strong"],
                                  previous=evals["strong"]))  # fmt: skip
    none = by_gate(evaluate_gates(CFG, current=evals["strong"]))
    across = by_gate(evaluate_gates(CFG, current=evals["strong_t1"], baseline=evals["weak"]))
    for gate in ("gain_vs_baseline", "gain_vs_previous"):
        assert up[gate]["verdict"] == "go" and up[gate]["paired"]["gained"] == 8
        assert down[gate]["verdict"] == "no-go" and down[gate]["paired"]["lost"] == 8
        assert none[gate]["verdict"] == "n/a" and none[gate]["paired"] is None
    assert across["gain_vs_baseline"]["verdict"] == "undecided"


def test_unique_candidates_gate_in_the_iteration_and_the_cross_report(evals, tmp_path):
    p = evals["paths"]
    verdicts = {}
    for name in ("random", "weak", "empty"):
        r = run_iteration(eval_json=p[name], trajectories=p[name].with_suffix(""),
                          out_dir=tmp_path / name, cfg=CFG.to_dict())  # fmt: skip
        verdicts[name] = by_gate(r["gates"])["unique_candidates"]["verdict"]
    # 4 random tactics per expansion vs one repeated tactic vs no expansion at all.
    assert verdicts == {"random": "go", "weak": "no-go", "empty": "n/a"}
    # The cross report reads each iteration's trajectories beside its eval JSON.
    js = run_cross(evals=[p["weak"], p["random"]], out_dir=tmp_path / "cross", cfg=CFG.to_dict())
    cross = {it["label"]: by_gate(it["gates"])["unique_candidates"] for it in js["iterations"]}
    assert {k: g["verdict"] for k, g in cross.items()} == {"weak": "no-go", "random": "go"}
    assert cross["random"]["value"] > CFG.unique_candidates_target


def _few(strong):
    """The strong eval with only 3 of its 8 proofs."""
    few = copy.deepcopy(strong)
    for row in few["per_theorem"][3:]:
        row["budget_at_proof"] = None
    for b in few["by_budget"]:
        b["solved"], b["rate"] = 3, 3 / 8
    return few


def test_a_gain_at_its_target_that_chance_explains_is_not_a_go(evals):
    # +37.5 points over the weak one, far above the target, but 3 theorems gained and none lost is
    # p = 0.25 under the paired test.
    few = _few(evals["strong"])
    gates = by_gate(evaluate_gates(CFG, current=few, baseline=evals["weak"]))
    g = gates["gain_vs_baseline"]
    assert g["value"] == pytest.approx(3 / 8) and g["value"] >= CFG.gain_vs_baseline_target
    assert (g["paired"]["gained"], g["paired"]["lost"]) == (3, 0)
    assert g["paired"]["p_value"] == pytest.approx(0.25)
    assert g["verdict"] == "no measurable effect"


def test_a_loss_below_the_red_line_that_chance_explains_is_not_a_no_go(evals):
    # −37.5 points against the 3-proof eval, far below the red line, but 3 theorems lost and none
    # gained is p = 0.25: no measurable effect, as for a gain.
    g = by_gate(evaluate_gates(CFG, current=evals["weak"], baseline=_few(evals["strong"]),
                               previous=_few(evals["strong"])))  # fmt: skip
    for gate in ("gain_vs_baseline", "gain_vs_previous"):
        assert g[gate]["value"] == pytest.approx(-3 / 8)
        assert g[gate]["value"] < getattr(CFG, f"{gate}_red_line")
        assert (g[gate]["paired"]["lost"], g[gate]["paired"]["p_value"]) == (3, pytest.approx(0.25))
        assert g[gate]["verdict"] == "no measurable effect", g[gate]


def test_a_partial_eval_is_neither_go_nor_no_go(evals):
    """6 of 8 theorems evaluated: every rate gap is far past its line and the counts alone would be
    significant, but a partial eval cannot show a gain or a loss."""
    up = by_gate(evaluate_gates(CFG, current=evals["strong_partial"], baseline=evals["weak"],
                                previous=evals["weak"], no_ebm=evals["weak"]))  # fmt: skip
    down = by_gate(evaluate_gates(CFG, current=evals["weak_partial"], baseline=evals["strong"],
                                  previous=evals["strong"], no_ebm=evals["strong"]))  # fmt: skip
    for g, value in ((up, 1.0), (down, -1.0)):
        for gate in ("gain_vs_baseline", "gain_vs_previous", "ebm_gain"):
            assert g[gate]["value"] == pytest.approx(value), g[gate]
            assert g[gate]["paired"]["complete"] is False
            assert g[gate]["verdict"] == "undecided", g[gate]
            assert "partial 6/8" in g[gate]["note"]
    assert up["gain_vs_baseline"]["paired"]["gained"] == 6  # p = 0.03 were it complete
    assert overall(list(up.values())) == "undecided"


def test_a_gate_whose_evals_differ_beyond_its_factor_is_undecided_naming_the_field(evals):
    """A gain gate varies the model, the EBM ablation the value model: another thread count or seed
    leaves either undecided, the field named in its note."""
    other = copy.deepcopy(evals["weak"])
    mine = evals["strong"].get("machine") or {}  # the eval stage records this process's
    threads, isa = mine.get("torch_threads"), mine.get("cpu_capability")
    shown = lambda x: "not recorded" if x is None else x  # noqa: E731
    other["machine"] = {"torch_threads": (threads or 1) + 1, "cpu_capability": f"not {isa}"}
    other["provenance"]["seeds"]["seed"] = 1
    g = by_gate(evaluate_gates(CFG, current=evals["strong"], baseline=other, no_ebm=other))
    for gate, varies in (("gain_vs_baseline", "model"), ("ebm_gain", "value model")):
        assert g[gate]["verdict"] == "undecided", g[gate]
        assert f"different seed: weak 1, strong 0 — only the {varies} may differ" in g[gate]["note"]
        assert (
            f"different torch threads: weak {(threads or 1) + 1}, strong {shown(threads)}"
            in g[gate]["note"]
        )
        assert f"different instruction set: weak not {isa}, strong {shown(isa)}" in g[gate]["note"]
