"""burnqed summary: trajectory statistics of a search output agree with the rows themselves."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from burnqed.cli import main as cli_main
from burnqed.trajectory import read_nodes, read_summary
from tests.eval.conftest import toy_search
from tests.search.fakes import RandomToyPolicy, toy_theorems


def test_summary_of_a_search_output_matches_its_rows(tmp_path, capsys):
    toy_search(tmp_path / "s", toy_theorems(8, seed=4, low=3, high=14), RandomToyPolicy(seed=2),
               max_nodes=15, attempts=2)  # fmt: skip
    assert cli_main(["summary", str(tmp_path / "s"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    summary = read_summary(tmp_path / "s").table.to_pylist()
    nodes = read_nodes(tmp_path / "s").table.to_pylist()
    expanded = [n for n in nodes if n["expansion_index"] is not None]
    proved = [r for r in summary if r["status"] == "proved" and r["verified"]]
    assert s["overall"]["attempts"] == 16 and s["overall"]["proved"] == len(proved)
    assert s["overall"]["proved_rate"] == pytest.approx(len(proved) / 16)
    assert {r["status"]: r["attempts"] for r in s["statuses"]} == Counter(
        r["status"] for r in summary
    )
    assert s["candidates"]["expansions"] == len(expanded)
    assert s["candidates"]["unique_avg"] == pytest.approx(
        sum(n["unique_candidates"] for n in expanded) / len(expanded)
    )
    assert s["candidates"]["raw_max"] == max(n["num_candidates"] for n in expanded)
    depths = Counter(len(r["proof"]) for r in proved)
    assert {r["depth"]: r["proofs"] for r in s["proof_depth"]} == depths
    classes = Counter(n["error"].split(":")[0] for n in nodes if n["error"])
    assert {r["error_class"]: r["n"] for r in s["errors"]} == dict(classes.most_common(20))
    assert cli_main(["summary", str(tmp_path / "s")]) == 0
    md = capsys.readouterr().out
    assert "unique candidates / expansion" in md and f"proved {len(proved)}" in md
