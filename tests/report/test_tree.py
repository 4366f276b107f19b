"""``burnqed tree``: the page of one attempt, from trajectories written by the real search stage —
every node and the proof path in the embedded JSON, nothing fetched from a network, a one-line error
for an unknown directory, theorem or attempt, and the iteration report's links."""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest

from burnqed.cli import main as cli_main
from burnqed.config import SearchConfig
from burnqed.outcomes import END_REASONS
from burnqed.policy import SamplingParams
from burnqed.report.tree import (
    _embed_json,
    load_trajectories,
    render_html,
    tree_file_name,
    tree_payload,
    write_tree,
    write_trees,
)
from burnqed.search.stage import search_to_dir
from burnqed.trajectory import read_nodes, read_summary
from tests.search.fakes import RandomToyPolicy, ToyEnv, ToyValue, toy_theorems

CFG = SearchConfig(
    max_nodes=24, max_depth=12, num_candidates=4, concurrency=3, attempts=2, checkpoint_every=3
)


def search(
    out: Path, cfg: SearchConfig = CFG, n: int = 6, low: int = 2, high: int = 14, cheat: bool = True
) -> Path:
    """A toy search with energies (ToyValue) written by the search stage: some attempts proved,
    some not, with rejected tactics (error edges) and duplicate states."""
    asyncio.run(
        search_to_dir(
            toy_theorems(n, seed=3, low=low, high=high),
            RandomToyPolicy(seed=1, allow_cheat=cheat),
            ToyEnv(),
            cfg,
            out,
            sampling=SamplingParams(n=cfg.num_candidates),
            value_model=ToyValue(),
        )
    )
    return out


@pytest.fixture(scope="module")
def traj(tmp_path_factory) -> Path:
    return search(tmp_path_factory.mktemp("tree") / "search")


def _rows(traj: Path):
    summary = read_summary(traj).table.to_pylist()
    nodes = read_nodes(traj).table.to_pylist()
    return summary, nodes


def _embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="tree-data">(.*?)</script>', page, re.S)
    assert m, "no embedded tree data"
    return json.loads(m.group(1))


def test_the_page_embeds_every_node_of_the_attempt_and_its_proof_path(traj, tmp_path):
    summary, nodes = _rows(traj)
    proved = next(r for r in summary if r["status"] == "proved")
    mine = [
        n for n in nodes if (n["theorem"], n["attempt"]) == (proved["theorem"], proved["attempt"])
    ]
    out = tmp_path / "t.html"
    row = write_tree(traj, theorem=proved["theorem"], attempt=proved["attempt"], out=out)
    assert row["status"] == "proved" and row["ended_by"] == "proof"
    data = _embedded(out.read_text(encoding="utf-8"))
    assert [n["id"] for n in data["nodes"]] == sorted(n["node_id"] for n in mine)
    assert len(data["nodes"]) == proved["nodes_total"]
    by_id = {n["node_id"]: n for n in mine}
    for n in data["nodes"]:  # tactics, errors, energies, logprobs, expansion order as written
        src = by_id[n["id"]]
        assert (n["t"], n["err"], n["x"], n["st"], n["pp"]) == (
            src["tactic"],
            src["error"],
            src["expansion_index"],
            src["status"],
            src["on_proof_path"],
        )
        assert n["lp"] == pytest.approx(src["llm_logprob"])
        assert n["e"] == (None if src["ebm_energy"] is None else pytest.approx(src["ebm_energy"]))
    assert any(n["err"] for n in data["nodes"]), "the toy search rejects some tactics"
    assert any(n["e"] is not None for n in data["nodes"])
    path = [n for n in data["nodes"] if n["pp"]]
    # The proof path runs from the root to the solved node, and its tactics are the proof.
    assert path[0]["p"] is None and path[-1]["ok"] and data["end_node"] == path[-1]["id"]
    assert [n["t"] for n in path[1:]] == proved["proof"]
    assert data["summary"]["ended_by"] == "proof" and data["ended_by_text"]


def test_an_unsolved_attempt_says_why_the_search_ended(traj):
    summary, _ = _rows(traj)
    failed = next(r for r in summary if r["status"] != "proved")
    data = tree_payload(load_trajectories(traj), failed["theorem"], failed["attempt"])
    assert data["summary"]["ended_by"] in END_REASONS and data["summary"]["ended_by"] != "proof"
    assert not any(n["pp"] for n in data["nodes"])
    last = max((n for n in data["nodes"] if n["x"] is not None), key=lambda n: n["x"])
    assert data["end_node"] == data["last_expanded"] == last["id"]
    assert data["summary"]["nodes_expanded"] == last["x"] + 1


def test_the_default_attempt_is_the_first_proof(traj):
    summary, _ = _rows(traj)
    by_theorem: dict[str, list] = {}
    for r in summary:
        by_theorem.setdefault(r["theorem"], []).append(r)
    data = load_trajectories(traj)
    for theorem, rows in by_theorem.items():
        proved = [r for r in rows if r["status"] == "proved"]
        expected = (
            min(proved, key=lambda r: (r["proof_expansion"], r["attempt"]))["attempt"]
            if proved
            else 0
        )
        assert tree_payload(data, theorem)["summary"]["attempt"] == expected


def test_the_page_is_self_contained(traj, tmp_path):
    summary, _ = _rows(traj)
    out = tmp_path / "t.html"
    write_tree(traj, theorem=summary[0]["theorem"], out=out)
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "a network reference"
    assert "<script src" not in page and "<link" not in page and "@import" not in page
    assert "fetch(" not in page and "XMLHttpRequest" not in page


def test_state_text_cannot_break_out_of_the_embedded_json():
    nasty = "</script><script>alert(1)</script> & <!-- x"
    text = _embed_json({"s": nasty})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"s": nasty}
    page = render_html(
        {"summary": {"theorem": "<b>", "attempt": 0, "status": "failed"}, "nodes": [], "s": nasty}
    )
    assert "<title>&lt;b&gt; · attempt 0 · failed</title>" in page
    assert page.count("</script>") == 2  # the data element's and the program's


def test_cli_writes_the_page_from_an_eval_json_beside_its_directory(traj, tmp_path, capsys):
    # An eval's trajectories lie beside its JSON: eval.json stands for eval/.
    (traj.parent / "search.json").write_text("{}", encoding="utf-8")
    summary, _ = _rows(traj)
    out = tmp_path / "page.html"
    rc = cli_main(
        [
            "tree",
            str(traj.parent / "search.json"),
            "--theorem",
            summary[0]["theorem"],
            "--attempt",
            "1",
            "--out",
            str(out),
        ]
    )
    assert rc == 0 and _embedded(out.read_text())["summary"]["attempt"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{missing}", "--theorem", "toy0000"], "no such search or eval directory"),
        (["{empty}", "--theorem", "toy0000"], "holds no trajectory parts"),
        (["{traj}", "--theorem", "nope"], "no theorem 'nope' (6 theorems: toy0000, toy0001,"),
        (["{traj}", "--theorem", "toy0000", "--attempt", "7"], "has no attempt 7 (attempts: 0, 1)"),
    ],
)
def test_cli_names_an_unknown_directory_theorem_or_attempt_in_one_line(
    traj, tmp_path, capsys, args, message
):
    (tmp_path / "empty").mkdir()
    paths = {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "traj": traj}
    argv = ["tree", *(a.format(**paths) for a in args), "--out", str(tmp_path / "x.html")]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("burnqed tree: ") and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "x.html").exists()


def test_a_tree_of_thousands_of_nodes_renders_quickly(tmp_path):
    cfg = SearchConfig(max_nodes=600, max_depth=60, num_candidates=8, concurrency=1, attempts=1)
    traj = search(
        tmp_path / "big", cfg, n=1, low=400, high=400, cheat=False
    )  # a goal too far to reach: all budget
    summary, nodes = _rows(traj)
    assert summary[0]["ended_by"] == "budget" and len(nodes) >= 2000, len(nodes)
    start = time.perf_counter()
    write_tree(traj, theorem=summary[0]["theorem"], out=tmp_path / "big.html")
    assert time.perf_counter() - start < 10
    data = _embedded((tmp_path / "big.html").read_text())
    assert len(data["nodes"]) == len(nodes) and data["open_frontier"] > 0


def test_write_trees_bounds_the_pages_and_names_the_rest(traj, tmp_path):
    summary, _ = _rows(traj)
    theorems = sorted({r["theorem"] for r in summary})
    entries = write_trees(traj, tmp_path / "trees", ["absent", *theorems], limit=2)
    assert [e["theorem"] for e in entries] == theorems  # a theorem it does not hold is left out
    files = [e["file"] for e in entries if e["file"]]
    assert len(files) == 2 and sorted(p.name for p in (tmp_path / "trees").iterdir()) == sorted(
        files
    )
    assert all(_embedded((tmp_path / "trees" / f).read_text())["nodes"] for f in files)


def test_tree_file_names_are_safe_and_distinct():
    a, b = tree_file_name("a/b c", 0), tree_file_name("a_b_c", 0)
    assert a != b and "/" not in a and a.endswith(".a0.html") and b == "a_b_c.a0.html"


def test_the_iteration_report_links_the_trees_of_newly_solved_and_unsolved_theorems(tmp_path):
    from burnqed.config import ReportConfig
    from burnqed.eval.stage import run as eval_run
    from burnqed.report.stage import run_iteration
    from tests.eval.conftest import LEAN, POLICY, SEARCH, toy_search, write_benchmark

    bench = write_benchmark(tmp_path, toy_theorems(8, seed=5, low=3, high=12), name="toy")
    theorems = toy_theorems(8, seed=5, low=3, high=12)
    cfg = {"budgets": [4, 12], "pass_n": 1, "num_candidates": 4, "benchmark": "toy"}
    evals = {}
    for label, seed, previous in (("iter_0", 1, None), ("iter_1", 2, "iter_0")):
        traj = tmp_path / label / "eval"
        toy_search(traj, theorems, RandomToyPolicy(seed=seed), max_nodes=12)
        evals[label] = tmp_path / label / "eval.json"
        eval_run(model="m", benchmark=bench, trajectories=traj, out=evals[label], cfg=cfg,
                 search=SEARCH, lean=LEAN, policy=POLICY, run_search=False,
                 previous=evals[previous] if previous else None, label=label)  # fmt: skip
    current = json.loads(evals["iter_1"].read_text())
    newly = current["previous"]["newly_solved"]
    unsolved = [r["theorem"] for r in current["per_theorem"] if not r["proved_attempts"]]
    assert newly and len(unsolved) >= 2, (newly, unsolved)
    out = tmp_path / "iter_1" / "report"
    rcfg = ReportConfig(tree_files=1).to_dict()
    result = run_iteration(eval_json=evals["iter_1"], trajectories=tmp_path / "iter_1" / "eval",
                           out_dir=out, cfg=rcfg, previous=evals["iter_0"])  # fmt: skip
    md = (out / "report.md").read_text(encoding="utf-8")
    trees = result["search_trees"]
    assert [e["theorem"] for e in trees["newly solved"]] == newly
    assert [e["theorem"] for e in trees["unsolved"]] == unsolved
    assert "## Search trees" in md
    for kind, entries in trees.items():
        first = entries[0]
        assert first["file"] and f"[{first['theorem']}](trees/{first['file']})" in md
        page = _embedded((out / "trees" / first["file"]).read_text())
        assert page["summary"]["theorem"] == first["theorem"]
        assert page["summary"]["status"] == (
            "proved" if kind == "newly solved" else first["status"]
        )
        assert all(e["file"] is None for e in entries[1:])  # tree_files = 1 per list
    assert f"{len(unsolved) - 1} more without a page" in md
    assert f"burnqed tree {tmp_path / 'iter_1' / 'eval'} --theorem KEY --out tree.html" in md
    assert len(list((out / "trees").iterdir())) == 2
