"""The package's architecture is checked, not just described: import-linter's layers hold, a lower
layer importing a higher one is caught, and no two burnqed modules import each other in a cycle."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(project: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(project)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(
        ROOT / "burnqed", project / "burnqed", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    return project


def test_contracts_hold_and_catch_an_upward_import(tmp_path):
    project = _copy_project(tmp_path)
    ok = _lint_imports(project)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "2 kept, 0 broken" in ok.stdout

    config = project / "burnqed" / "config.py"
    config.write_text(config.read_text() + "\nimport burnqed.cli  # an upward import\n")
    bad = _lint_imports(project)
    assert bad.returncode != 0
    assert "burnqed.config is not allowed to import burnqed.cli" in bad.stdout


def test_the_stand_in_prover_imports_nothing_else_from_burnqed(tmp_path):
    project = _copy_project(tmp_path)
    repl = project / "burnqed" / "proplogic" / "repl.py"
    repl.write_text(repl.read_text() + "\nimport burnqed.lean.goals\n")
    bad = _lint_imports(project)
    assert bad.returncode != 0
    assert "burnqed.proplogic.repl" in bad.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycle_between_burnqed_modules():
    graph = grimp.build_graph("burnqed")  # annotation-only imports included: stricter
    assert len(graph.modules) > 50
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_planted_cycle(tmp_path):
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyc import b\n")
    (pkg / "b.py").write_text("from cyc import c\n")
    (pkg / "c.py").write_text("from cyc import a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert _cycles(grimp.build_graph("cyc", cache_dir=None)) == [["cyc.a", "cyc.b", "cyc.c"]]
    finally:
        sys.path.remove(str(tmp_path))
