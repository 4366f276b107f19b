"""The ``burnqed tree`` page in headless Chromium, with the network blocked: it renders (the
screenshot is not blank), its script ran (rows built from the embedded JSON) and the proof path's
nodes are in the DOM, marked."""

from __future__ import annotations

import re

import pytest

from burnqed.report.tree import write_tree
from burnqed.trajectory import read_nodes, read_summary
from tests.browser.conftest import dump_dom, keep_screenshot, screenshot
from tests.report.test_tree import search

pytestmark = pytest.mark.browser


def test_the_tree_page_renders_with_its_proof_path(tmp_path, chromium):
    traj = search(tmp_path / "search")
    proved = next(r for r in read_summary(traj).table.to_pylist() if r["status"] == "proved")
    key = (proved["theorem"], proved["attempt"])
    nodes = [n for n in read_nodes(traj).table.to_pylist() if (n["theorem"], n["attempt"]) == key]
    path_ids = {n["node_id"] for n in nodes if n["on_proof_path"]}
    page = tmp_path / "tree.html"
    write_tree(traj, theorem=proved["theorem"], attempt=proved["attempt"], out=page)
    url = page.as_uri()

    pixels = screenshot(chromium, url, tmp_path / "shot.png")
    assert pixels.shape == (900, 1200, 3)
    assert float(pixels.std()) > 0.05, "blank screenshot"
    assert (pixels < 0.5).any(axis=-1).mean() > 0.005  # dark pixels: text was drawn
    keep_screenshot(tmp_path / "shot.png", "tree.png")  # docs/statistics.md shows it

    dom = dump_dom(chromium, url)
    shown = {int(m) for m in re.findall(r'class="node proof-path[^"]*" id="node-(\d+)"', dom)}
    assert shown == path_ids, (shown, path_ids)
    assert 'class="end-mark">ended: proof<' in dom
    for tactic in proved["proof"]:
        assert f'<span class="tac">{tactic}</span>' in dom
    # The header says why the search ended; the side list walks the expansions in order.
    assert "Search ended by proof: a verified proof was found." in dom
    assert re.search(r"<div>x0\s+#0\s+\(root\)\s+→ \d+ children</div>", dom)
