"""Benches cannot rot: every ``bench/*.py`` runs at its ``--smoke`` size and prints, as a finite
``name=value`` line, every figure its module docstring's "Prints" list documents.

The smoke runs are marked ``bench`` (deselected by default; ``python -m pytest -m bench``, a step of
``.ci/run``, under two minutes on 2 cores in all); that each bench documents its figures is checked
by the default suite.
"""

from __future__ import annotations

import ast
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import REPO

BENCHES = sorted((REPO / "bench").glob("*.py"))
_LINE = re.compile(r"^([A-Za-z_]\w*)=(.*)$")
_ITEM = re.compile(r"^- ``([A-Za-z_]\w*)``")


def documented(bench: Path) -> list[str]:
    """The names of the docstring's "Prints …:" list: its ``- ``name``: …`` items, up to the
    first blank line after them."""
    doc = ast.get_docstring(ast.parse(bench.read_text(encoding="utf-8"))) or ""
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"^Prints\b.*:$", line)), None)
    if start is None:
        return []
    names, seen_item = [], False
    for line in lines[start + 1 :]:
        if not line.strip():
            if seen_item:
                break
            continue
        if m := _ITEM.match(line):
            names.append(m.group(1))
            seen_item = True
    return names


def test_documented_reads_a_prints_list(tmp_path):
    doc = (
        '"""Bench.\n\nPrints (last):\n\n- ``a_s``: one\n  more\n- ``b``: two\n\n- ``c``: not\n"""\n'
    )
    (tmp_path / "probe.py").write_text(doc, encoding="utf-8")
    assert documented(tmp_path / "probe.py") == ["a_s", "b"]
    (tmp_path / "none.py").write_text('"""Bench.\n\n- ``a``: not a Prints list\n"""\n')
    assert documented(tmp_path / "none.py") == []


@pytest.mark.parametrize("bench", BENCHES, ids=lambda p: p.stem)
def test_every_bench_documents_what_it_prints(bench):
    names = documented(bench)
    assert names, f"{bench.name}: no 'Prints …:' list of ``name`` items in its module docstring"
    assert len(names) == len(set(names)), names


def _printed(stdout: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in map(_LINE.match, stdout.splitlines()) if m]


SMOKE_TIMEOUT_S = 240  # one bench's --smoke run


def _smoke(bench: Path) -> tuple[subprocess.CompletedProcess, float]:
    bin_dir = Path(sys.executable).parent  # the REPL commands run `python`: this interpreter
    env = dict(os.environ, PYTHONPATH=str(REPO), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, str(bench), "--smoke"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S)  # fmt: skip
    return r, time.perf_counter() - t0


@pytest.fixture(scope="module")
def smoke_runs() -> dict[Path, tuple[subprocess.CompletedProcess, float]]:
    """Every bench's ``--smoke`` run, two at a time (each is mostly one core: imports, a tiny
    model), the longest first."""
    order = sorted(BENCHES, key=lambda p: p.stem not in ("ebm_iter0", "search"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(order, pool.map(_smoke, order), strict=True))


# The first test to ask for smoke_runs waits for every bench's run: its budget is theirs (each
# run's own 240 s, two at a time), not one test's 300 s — a loaded machine ran over that with
# every run within its own (2026-12-02, the 11th of 20 runs in a row, load 7–8 on 2 cores).
SMOKE_BUDGET_S = -(-len(BENCHES) // 2) * SMOKE_TIMEOUT_S + 60


@pytest.mark.bench
@pytest.mark.timeout(SMOKE_BUDGET_S)
@pytest.mark.parametrize("bench", BENCHES, ids=lambda p: p.stem)
def test_bench_smoke_prints_every_documented_figure(bench, smoke_runs):
    r, seconds = smoke_runs[bench]
    assert r.returncode == 0, f"{bench.name} --smoke:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    printed = dict(_printed(r.stdout))
    for name in documented(bench):
        assert name in printed, f"{bench.name} --smoke did not print {name}=…:\n{r.stdout[-3000:]}"
        value = printed[name].split()[0] if printed[name].split() else ""
        try:
            number = float(value)
        except ValueError:
            pytest.fail(f"{bench.name}: {name}={printed[name]!r} is not a number")
        assert math.isfinite(number), f"{bench.name}: {name}={printed[name]}"
    # Figures last: from the first documented figure on, every line is a name=value line.
    lines = r.stdout.splitlines()
    first = min(i for i, line in enumerate(lines) if _LINE.match(line)
                and _LINE.match(line).group(1) in documented(bench))  # fmt: skip
    assert all(_LINE.match(line) for line in lines[first:]), lines[first:]
    assert seconds < 120, f"{bench.name} --smoke took {seconds:.0f} s: a smoke size must be tiny"


def test_same_numbers_refuses_a_run_on_the_test_benchmark(tmp_path):
    """A "nothing moved" check on the confirmation benchmark is refused, naming the file (issue
    59: identity checks run on the development split)."""
    import json

    for side in ("before", "after"):
        e = tmp_path / side / "results/iter_0/eval.json"
        e.parent.mkdir(parents=True)
        e.write_text(json.dumps({"budgets": [1], "per_theorem": [],
                                 "benchmark": {"name": "proplogic", "split": "test"}}))  # fmt: skip
    r = subprocess.run([sys.executable, str(REPO / "bench/same_numbers.py"), "--before",
                        str(tmp_path / "before"), "--after", str(tmp_path / "after")],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode != 0 and "proplogic_test, a confirmation benchmark" in r.stderr
    assert "config/dev.yaml" in r.stderr and "tests=" not in r.stdout
