"""``burnqed replay`` refuses, in one line and before it writes anything, a model or search setting
whose digest differs from the recording's; ``--allow-mismatch`` lets it run, and its provenance then
records what it used (the model it loaded) beside what the recording had."""

from __future__ import annotations

import json

import pytest
import yaml

from burnqed.cli import main as cli_main
from burnqed.eval.paired import paired_test
from burnqed.eval.stage import path_digest
from burnqed.eval.stage import run as eval_run
from burnqed.replay.checks import ReplayRefused, check_model, check_search, parse_mismatches
from burnqed.replay.stage import run as replay_run
from tests.eval.conftest import LEAN, SEARCH
from tests.search.fakes import RandomToyPolicy, ToyEnv, ToyValue

SMALL = {"budgets": [3, 8], "num_candidates": 4, "pass_n": 1}


@pytest.fixture()
def recorded(tmp_path, benchmark, fake_backends, repo_root):
    """An eval recorded with the local model directory ``model_a`` (its digest in the eval's
    provenance), and the params/overlay a replay of it runs with (the recording's settings)."""
    params = yaml.safe_load((repo_root / "params.yaml").read_text())
    model = tmp_path / "model_a"
    model.mkdir()
    (model / "config.json").write_text('{"hidden": 32}')
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
        rec = eval_run(model=str(model), benchmark=benchmark, trajectories=tmp_path / "eval",
                       out=tmp_path / "eval.json", cfg={**params["eval"], **SMALL}, search=SEARCH,
                       lean=LEAN, policy=params["policy"], seed=5)  # fmt: skip
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        yaml.safe_dump({"eval": SMALL, "search": {"max_depth": SEARCH["max_depth"]}})
    )
    args = ["--params", str(repo_root / "params.yaml"), "--configfile", str(overlay)]
    return rec, model, args, params


def test_a_mismatched_model_is_refused_and_with_the_override_runs_and_records_both(
    tmp_path, recorded, fake_backends, monkeypatch, capsys
):
    rec, model_a, args, _ = recorded
    monkeypatch.setattr("burnqed.search.value.load_value_model", lambda path, gen: ToyValue())
    ebm = tmp_path / "ebm"
    ebm.mkdir()
    model_b = tmp_path / "model_b"
    model_b.mkdir()
    (model_b / "config.json").write_text('{"hidden": 64}')
    out = tmp_path / "replay.json"
    base = ["replay", str(tmp_path / "eval.json"), "--ebm", str(ebm), "--out", str(out), *args]
    assert rec["provenance"]["model"] == {"path": str(model_a), "sha256": path_digest(model_a)}

    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()) as opened:
        rc = cli_main([*base, "--model", str(model_b)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert f"model {model_b} (sha256 {path_digest(model_b)[:12]}…) is not the recording's " \
        f"{model_a} (sha256 {path_digest(model_a)[:12]}…)" in err  # fmt: skip
    assert "--allow-mismatch model" in err
    assert "model" not in opened  # refused before a model was opened
    assert not out.exists() and not (tmp_path / "replay").exists()  # and before anything written

    # With the override it runs with model_b, and says so: the model it loaded, and the recording's.
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()) as opened:
        rc = cli_main([*base, "--model", str(model_b), "--allow-mismatch", "model"])
    assert rc == 0 and opened["model"] == str(model_b)
    result = json.loads(out.read_text())
    used = {"path": str(model_b), "sha256": path_digest(model_b)}
    prov = result["provenance"]
    assert prov["model"] == prov["model_loaded"] == used
    assert prov["recording"]["model"] == rec["provenance"]["model"]
    assert prov["mismatches"] == {
        "model": {"recording": rec["provenance"]["model"], "replay": used}
    }
    # A replay with another model is no twin of its recording: the paired test says which field.
    test = paired_test(rec, result, varies="value model")
    assert test["verdict"] == "undecided" and any("different model" in r for r in test["reasons"])

    # The recording's own model, unchanged: accepted, recorded as loaded, nothing mismatched.
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()) as opened:
        assert cli_main(base) == 0
    assert opened["model"] == str(model_a)
    prov = json.loads(out.read_text())["provenance"]
    assert prov["model"] == rec["provenance"]["model"] and prov["mismatches"] == {}
    assert paired_test(rec, json.loads(out.read_text()), varies="value model")["reasons"] == []

    # The same path rewritten in place is another model: its digest decides, not its path.
    (model_a / "config.json").write_text('{"hidden": 48}')
    capsys.readouterr()
    with fake_backends(RandomToyPolicy(seed=3), ToyEnv()):
        assert cli_main(base) == 2
    assert f"model {model_a} (sha256 {path_digest(model_a)[:12]}…) is not the recording's" in (
        capsys.readouterr().err
    )


def test_a_search_setting_other_than_the_recordings_is_refused_unless_allowed(
    tmp_path, recorded, repo_root, capsys
):
    """The settings that decide which states a search pops (here the depth limit: params.yaml's,
    not the recording's) are compared by digest; allowed, both sides are recorded."""
    _, _, args, params = recorded
    out = tmp_path / "replay.json"
    overlay = tmp_path / "depth.yaml"
    overlay.write_text(yaml.safe_dump({"eval": SMALL}))  # search.max_depth: params.yaml's 50
    base = ["replay", str(tmp_path / "eval.json"), "--out", str(out), "--params",
            str(repo_root / "params.yaml"), "--configfile", str(overlay)]  # fmt: skip
    assert params["search"]["max_depth"] != SEARCH["max_depth"]
    assert cli_main(base) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"search.max_depth is 50, the recording searched with {SEARCH['max_depth']}" in err
    assert "--allow-mismatch search" in err and not out.exists()

    assert cli_main([*base, "--allow-mismatch", "search,model"]) == 0
    prov = json.loads(out.read_text())["provenance"]
    mismatch = prov["mismatches"]["search"]
    assert (mismatch["recording"]["max_depth"], mismatch["replay"]["max_depth"]) == (30, 50)
    assert mismatch["recording"]["digest"] != mismatch["replay"]["digest"]
    assert prov["config"]["search"]["max_depth"] == 50  # what it used
    assert prov["recording"]["search"]["max_depth"] == 30  # what the recording had
    assert "model" not in prov["mismatches"]  # allowed, not needed: none loaded, none differs

    # With the recording's settings (the overlay of the fixture) nothing is refused or recorded.
    assert cli_main(["replay", str(tmp_path / "eval.json"), "--out", str(out), *args]) == 0
    assert json.loads(out.read_text())["provenance"]["mismatches"] == {}


def test_each_check_names_what_differs():
    a = {"path": "models/a", "sha256": "a" * 64}
    assert check_model(a, dict(a), what="r", allow=False) is None
    with pytest.raises(ReplayRefused, match=r"model models/a .* is not the recording's models/a"):
        check_model(a, {"path": "models/a", "sha256": "b" * 64}, what="r", allow=False)
    # Without a recorded digest (a search's directory, a served model) the path decides.
    assert check_model({"path": "m", "sha256": None}, {"path": "m", "sha256": None}, what="r",
                       allow=False) is None  # fmt: skip
    with pytest.raises(ReplayRefused, match="no digest"):
        check_model({"path": "m", "sha256": None}, {"path": "n", "sha256": None}, what="r",
                    allow=False)  # fmt: skip
    cfg = {"max_nodes": 8, "max_depth": 30, "expansions_per_step": 1, "attempts": 2}
    fields = tuple(cfg)
    for field in fields:
        with pytest.raises(ReplayRefused, match=rf"search\.{field} is "):
            check_search(cfg, {**cfg, field: 99}, fields, what="r", allow=False)
    assert check_search(cfg, {**cfg, "max_nodes": 8.0}, fields, what="r", allow=False) is None
    with pytest.raises(Exception, match="--allow-mismatch seed: expected"):
        parse_mismatches("model,seed")


def test_the_recorded_priority_also_checks_the_recordings_own_priority_settings(tmp_path, recorded):
    """Replaying a recording as its own priority with another depth normalisation would be another
    search: refused, naming it."""
    _, _, _, params = recorded
    with pytest.raises(ReplayRefused, match=r"search\.depth_normalisation is 1\.0"):
        replay_run(recording=tmp_path / "eval.json", out=tmp_path / "r.json",
                   cfg={**params["eval"], **SMALL}, search={**SEARCH, "depth_normalisation": 1.0},
                   lean=LEAN, policy=params["policy"])  # fmt: skip
    replay_run(
        recording=tmp_path / "eval.json",
        out=tmp_path / "r.json",
        cfg={**params["eval"], **SMALL},
        search={**SEARCH, "depth_normalisation": 1.0},
        lean=LEAN,
        policy=params["policy"],
        priority_name="logprob",
    )  # another priority: fine
