"""Snakemake's HTML report of this workflow in headless Chromium, with the network blocked.

The marked outputs of ``results/iter_0/report``'s DAG (the baseline and iteration-0 eval JSONs, the
iteration report) are written by the real eval and report stages over toy searches — the rules
themselves run in ``tests/workflow/test_loop.py`` (slow), which builds the report after the loop —
then ``snakemake --report`` builds the file and Chromium opens it: the workflow description renders,
and walking the menu (iteration 0 → report) lists every plot, each embedded as a real PNG."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from burnqed.config import ReportConfig
from burnqed.report.stage import run_iteration
from tests.browser.conftest import WALK, dump_dom, keep_screenshot, screenshot
from tests.eval.conftest import write_benchmark
from tests.report.conftest import make_eval
from tests.search.fakes import RandomToyPolicy, toy_theorems

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PLOTS = ("anytime.png", "budget_curve.png", "energy_hist.png", "nodes_hist.png", "proof_depth.png")


@pytest.fixture(scope="module")
def built_report(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("snakemake_report")
    for name in ("Snakefile", "params.yaml"):
        shutil.copy(REPO / name, work / name)
    for name in ("rules", "workflow", "config"):
        shutil.copytree(REPO / name, work / name)
    (work / "burnqed").symlink_to(REPO / "burnqed")
    results = work / "results"
    bench = write_benchmark(work, toy_theorems(8, seed=5, low=3, high=12), name="toy")
    base = make_eval(results, bench, "baseline", RandomToyPolicy(seed=1))
    cur = make_eval(results, bench, "iter_0", RandomToyPolicy(seed=2))
    run_iteration(eval_json=cur, trajectories=results / "iter_0" / "eval",
                  out_dir=results / "iter_0" / "report", cfg=ReportConfig().to_dict(),
                  baseline=base, previous=base)  # fmt: skip
    exe = shutil.which("snakemake", path=str(BIN)) or "snakemake"
    r = subprocess.run([exe, "--report", "report.html", "results/iter_0/report",
                        "--configfile", "config/demo.yaml"], cwd=work, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    return work / "report.html"


def test_the_report_embeds_every_plot_as_a_real_png(built_report):
    page = built_report.read_text(encoding="utf-8")
    for name in PLOTS:
        m = re.search(
            rf"data:image/png;charset=\w+;filename={re.escape(name)};base64,([A-Za-z0-9+/=]+)", page
        )
        assert m, f"{name} is not embedded"
        img = np.asarray(Image.open(io.BytesIO(base64.b64decode(m.group(1)))).convert("RGB"))
        assert img.std() > 5, f"{name} is blank"


def test_the_report_opens_in_chromium_with_its_plots(built_report, chromium, tmp_path):
    pixels = screenshot(chromium, built_report.as_uri(), tmp_path / "report.png")
    assert float(pixels.std()) > 0.05, "blank screenshot"
    keep_screenshot(tmp_path / "report.png", "snakemake-report.png")  # docs/statistics.md shows it
    dom = dump_dom(chromium, built_report.as_uri())
    assert "burnqed: Lean 4 theorem proving by expert iteration." in dom  # workflow.rst rendered
    assert "iteration 0" in dom and "baseline" in dom  # the categories
    page = built_report.read_text(encoding="utf-8")
    at = page.rfind("</body>")
    walk = tmp_path / "walk.html"
    walk.write_text(page[:at] + WALK % '["iteration 0", "report"]' + page[at:], encoding="utf-8")
    dom = dump_dom(chromium, walk.as_uri())
    for name in (*PLOTS, "report.md"):
        assert f">results/iter_0/report/{name}<" in dom, name
