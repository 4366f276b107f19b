"""A replay without ``--live`` is a prediction from the recording alone: it reports which attempts it
could replay exactly (its coverage), its effect on the covered theorems only — there it is exactly
the live eval of its priority — the uncovered counted apart (never as failures), and the bound of
what it can say (over the recording's trees it cannot gain at the recording's budget).  A ``--live``
replay is an equality check, named so."""

from __future__ import annotations

from burnqed.eval.configs import replay_prediction
from burnqed.eval.paired import paired_test, solved_at
from burnqed.eval.stage import run as eval_run
from burnqed.eval.stage import without_run_specific
from burnqed.replay.coverage import BOUND, LIVE
from burnqed.replay.stage import replay_markdown
from burnqed.replay.stage import run as replay_run
from burnqed.trajectory import read_summary
from tests.eval.conftest import LEAN, POLICY, SEARCH
from tests.replay.test_replay import EVAL
from tests.search.fakes import RandomToyPolicy, ToyEnv, ToyValue


def _evals(tmp_path, benchmark, fake_backends, monkeypatch):
    """A log-prob eval (the recording, the twin) and the live eval of the same policy with a value."""
    monkeypatch.setattr("burnqed.search.value.load_value_model", lambda path, gen: ToyValue())
    ebm = tmp_path / "ebm"
    ebm.mkdir()
    common = dict(benchmark=benchmark, cfg=EVAL, search=SEARCH, lean=LEAN, policy=POLICY, seed=5)
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
        rec = eval_run(model="m", trajectories=tmp_path / "eval", out=tmp_path / "eval.json",
                       **common)  # fmt: skip
        live = eval_run(model="m", trajectories=tmp_path / "ebm_eval", ebm=ebm,
                        out=tmp_path / "ebm_eval.json", **common)  # fmt: skip
    return rec, live, ebm


def test_a_recording_only_prediction_reports_its_coverage_and_its_effect_where_it_covers(
    tmp_path, benchmark, fake_backends, monkeypatch
):
    rec, live, ebm = _evals(tmp_path, benchmark, fake_backends, monkeypatch)
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
        result = replay_run(recording=tmp_path / "eval.json", out=tmp_path / "replay.json",
                            cfg=EVAL, search=SEARCH, lean=LEAN, policy=POLICY, ebm=ebm)  # fmt: skip
    block = result["replay"]
    assert (block["role"], block["says"], block["live"]) == ("prediction", BOUND, False)
    first = {(x["theorem"], x["attempt"]): x["from_expansion"] for x in block["inexact_attempts"]}
    proved = {(r["theorem"], r["attempt"]): r["proof_expansion"]
              for r in read_summary(tmp_path / "replay").table.to_pylist()}  # fmt: skip
    theorems = [r["theorem"] for r in rec["per_theorem"]]
    attempts = len(theorems) * EVAL["pass_n"]
    top_budget = max(EVAL["budgets"])

    def uncovered_at(b: int) -> set[str]:
        """Theorems with an attempt uncovered at b that no covered attempt proved within b."""
        known = {t for (t, a), pe in proved.items() if pe is not None and pe < b
                 and first.get((t, a), b) >= b}  # fmt: skip
        return {t for (t, _), i in first.items() if i < b} - known

    for row in block["by_budget"]:
        b = row["budget"]
        uncovered = uncovered_at(b)
        covered = attempts - sum(i < b for i in first.values())
        assert row["coverage"] == {"attempts": attempts, "covered": covered,
                                   "coverage": covered / attempts}  # fmt: skip
        assert row["covered_theorems"] == len(theorems) - len(uncovered)
        assert row["uncovered"]["theorems"] == len(uncovered)
        # Where it covers, the prediction is exactly the live eval with the value: the effect
        # against the recording is the live effect on those theorems.
        before, after = solved_at(rec, b), solved_at(live, b)
        kept = [t for t in theorems if t not in uncovered]
        assert row["recorded_solved"] == sum(before[t] for t in kept)
        assert row["solved"] == sum(after[t] for t in kept)
        p = row["prediction"]
        assert p["gained"] == sum(after[t] and not before[t] for t in kept)
        assert p["lost"] == sum(before[t] and not after[t] for t in kept)
        assert row["uncovered"]["recorded_solved"] == sum(before[t] for t in uncovered)
        # The bound: only what the recording proved within its own budget can be gained.
        ceiling = solved_at(rec, top_budget)
        assert p["max_gain"] == sum(ceiling[t] and not before[t] for t in kept)
        assert p["gained"] <= p["max_gain"]
    top = block["by_budget"][-1]
    assert 0 < top["coverage"]["covered"] < attempts  # the test can tell: some attempts uncovered
    assert top["prediction"]["max_gain"] == top["prediction"]["gained"] == 0  # cannot gain at N
    assert block["by_budget"][0]["prediction"]["max_gain"] > 0  # but can at a smaller budget

    # Its eval-shaped figures are the covered theorems: the uncovered are not failures, they are
    # absent, and the paired test with the recording leaves them out, counted.
    uncovered = uncovered_at(top_budget)
    assert uncovered and {r["theorem"] for r in result["per_theorem"]} == set(theorems) - uncovered
    assert result["status"]["complete"]
    rows = {r["theorem"]: r for r in without_run_specific(live["per_theorem"])}
    for r in without_run_specific(result["per_theorem"]):
        assert r == rows[r["theorem"]]  # covered: the live eval's rows exactly
    test = paired_test(rec, result, varies="value model")
    assert test["reasons"] == [] and test["theorems"] == len(theorems) - len(uncovered)
    assert (test["gained"], test["lost"]) == (0, top["prediction"]["lost"])
    assert test["left_out"][f"evaluated by {rec['label']} only"] == len(uncovered)
    p = replay_prediction(result, rec)
    assert (p["coverage"], p["max_gain"], p["live"]) == (top["coverage"], 0, False)

    md = replay_markdown(result)
    assert "What it can say: a replay without --live answers only from the recording's trees" in md
    assert f"| {top_budget} | {top['coverage']['covered']}/{attempts} | " in md


def test_a_live_replay_is_an_equality_check_named_so(tmp_path, benchmark, fake_backends,
                                                      monkeypatch):  # fmt: skip
    rec, live, ebm = _evals(tmp_path, benchmark, fake_backends, monkeypatch)
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
        result = replay_run(recording=tmp_path / "eval.json", out=tmp_path / "replay.json",
                            cfg=EVAL, search=SEARCH, lean=LEAN, policy=POLICY, ebm=ebm,
                            live=True)  # fmt: skip
    block = result["replay"]
    assert (block["role"], block["says"]) == ("equality check", LIVE)
    assert result["label"].endswith("live replay (value)")
    top = block["by_budget"][-1]
    assert (
        top["coverage"]["covered"] == top["coverage"]["attempts"]
        and top["uncovered"]["theorems"] == 0
    )
    assert top["prediction"]["max_gain"] is None  # no bound: it can find anything live can
    p = replay_prediction(result, rec, live=live)
    assert p["live"] and p["equality"]["agree"] == p["equality"]["exact"] == len(rec["per_theorem"])
    assert "What it can say: a --live replay expands live" in replay_markdown(result)
