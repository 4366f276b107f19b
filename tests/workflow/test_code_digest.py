"""The code digest each rule passes as a param (and the search puts in its resume fingerprint):
every file the job runs, found from its shim's imports, package data and the modules its config
launches; an edit of any of them changes it, an edit of anything else does not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from burnqed.provenance import code_digest, code_files, launched_modules

REPO = Path(__file__).resolve().parents[2]


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


@pytest.fixture
def tree(tmp_path) -> Path:
    """A toy checkout: a shim, a package with a lazy import, a TYPE_CHECKING-only import, package
    data, a subpackage run with -m, and a module nothing imports."""
    _write(tmp_path, {
        "workflow/scripts/step.py": "from burnqed.a import run\nrun()\n",
        "burnqed/__init__.py": "",
        "burnqed/schema.yaml": "key: 1\n",
        "burnqed/a.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from burnqed.typing_only import T\n"
            "else:\n    from . import runtime\n"
            "def run():\n    from .lazy import go\n    go()\n"
        ),
        "burnqed/lazy.py": "import json\nfrom burnqed import helpers\n",
        "burnqed/helpers.py": "",
        "burnqed/runtime.py": "",
        "burnqed/typing_only.py": "",
        "burnqed/unused.py": "",
        "burnqed/repl/__init__.py": "",
        "burnqed/repl/__main__.py": "from .core import main\n",
        "burnqed/repl/core.py": "",
        "burnqed/repl/notes.txt": "data of the repl package\n",
    })  # fmt: skip
    return tmp_path


def _names(files, root) -> set[str]:
    return {f.relative_to(root).as_posix() for f in files}


def test_the_closure_of_a_shim(tree):
    assert _names(code_files("workflow/scripts/step.py", root=tree), tree) == {
        "workflow/scripts/step.py",
        "burnqed/__init__.py",
        "burnqed/schema.yaml",  # package data beside burnqed/__init__.py
        "burnqed/a.py",
        "burnqed/runtime.py",  # relative import in the else of `if TYPE_CHECKING`
        "burnqed/lazy.py",  # imported inside a function
        "burnqed/helpers.py",  # `from burnqed import helpers`: a module
    }
    with_repl = code_files("workflow/scripts/step.py", "burnqed.repl", root=tree)
    assert _names(with_repl, tree) - _names(
        code_files("workflow/scripts/step.py", root=tree), tree
    ) == {
        "burnqed/repl/__init__.py",
        "burnqed/repl/__main__.py",  # what `python -m burnqed.repl` runs
        "burnqed/repl/core.py",
        "burnqed/repl/notes.txt",
    }
    with pytest.raises(ModuleNotFoundError, match=r"burnqed\.nothing"):
        code_files("burnqed.nothing", root=tree)


@pytest.mark.parametrize(
    ("edited", "changes"),
    [
        ("workflow/scripts/step.py", True),  # the shim
        ("burnqed/lazy.py", True),
        ("burnqed/schema.yaml", True),  # not Python
        ("burnqed/typing_only.py", False),  # never runs
        ("burnqed/unused.py", False),
        ("burnqed/repl/core.py", False),  # not launched by this job
    ],
)
def test_an_edit_changes_the_digest_of_the_jobs_that_run_it(tree, edited, changes):
    before = code_digest("workflow/scripts/step.py", root=tree)
    with (tree / edited).open("a", encoding="utf-8") as f:
        f.write("\n# edited\n")
    assert (code_digest("workflow/scripts/step.py", root=tree) != before) is changes


def test_launched_modules_are_the_burnqed_modules_commands_run():
    lean = {"repl_command": ["python", "-m", "burnqed.proplogic"], "imports": ["-m"]}
    policy = {"server_command": ["python", "-m", "sglang.launch_server"], "nested": {
        "cmd": ("x", "-m", "burnqed.policy.standin")}}  # fmt: skip
    assert launched_modules(lean, policy) == ("burnqed.policy.standin", "burnqed.proplogic")
    assert launched_modules({"repl_command": ["repl"]}) == ()


def test_the_shipped_rules_cover_search_and_proplogic():
    demo = yaml.safe_load((REPO / "config/demo.yaml").read_text(encoding="utf-8"))
    launched = launched_modules(demo["lean"])
    shard = _names(code_files("workflow/scripts/search_shard.py", *launched, root=REPO), REPO)
    assert {
        "workflow/scripts/search_shard.py",
        "burnqed/search/engine.py",
        "burnqed/search/stage.py",
        "burnqed/lean/pool.py",
        "burnqed/params.schema.yaml",
        "burnqed/proplogic/__main__.py",
        "burnqed/proplogic/tactics.py",
    } <= shard
    fetch = _names(code_files("workflow/scripts/data_fetch.py", root=REPO), REPO)
    assert "burnqed/data/benchmarks.py" in fetch and not any(
        f.startswith("burnqed/search/") for f in fetch
    )


def _rules() -> list[tuple[str, str, str]]:
    """(rule name, its script's name, its params text) for every rule that runs a script."""
    found = []
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for block in re.split(r"(?m)^(?=rule \w+:)", smk.read_text(encoding="utf-8")):
            rule = re.match(r"rule (\w+):", block)
            script = re.search(r'script:\n\s+"\.\./workflow/scripts/(\w+)\.py"', block)
            if rule and script:
                params = re.search(r"(?ms)^    params:\n(.*?)(?=^    \w+:|\Z)", block)
                found.append((rule.group(1), script.group(1), params.group(1) if params else ""))
    return found


def test_every_rule_digests_its_own_shim_and_what_its_config_launches():
    rules = _rules()
    assert len(rules) > 20
    for rule, script, params in rules:
        call = re.search(r"^        code=code_digest\(([^)]*)\),$", params, re.M)
        assert call, f"rule {rule}: no code=code_digest(...) param"
        args = [a.strip().strip('"') for a in call.group(1).split(",")]
        assert args[0] == script, f"rule {rule} runs {script}.py but digests {args[0]}.py"
        # The sections with commands (lean.repl_command, policy.server_command) it passes.
        passed = {s for s in ("lean", "policy") if re.search(rf"^        {s}=", params, re.M)}
        assert set(args[1:]) == passed, f"rule {rule}: code_digest sections {args[1:]}"


def test_parsed_imports_are_kept_on_disk_by_content(tree, tmp_path, monkeypatch):
    """A fresh process (the in-process cache cleared) reads a file's imports from the disk cache
    without parsing it; an edited file, or an entry that is not a list of names, is parsed again."""
    from burnqed import provenance

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    provenance._imports.cache_clear()
    first = code_files("workflow/scripts/step.py", root=tree)
    entries = sorted((tmp_path / "cache" / "burnqed" / "imports").glob("*.json"))
    assert len(entries) == len([f for f in first if f.suffix == ".py"])  # one per parsed file

    parsed: list[str] = []
    real = provenance._parse_imports
    monkeypatch.setattr(
        provenance,
        "_parse_imports",
        lambda path, name, data: parsed.append(name) or real(path, name, data),
    )
    provenance._imports.cache_clear()
    assert code_files("workflow/scripts/step.py", root=tree) == first
    assert parsed == []  # every file answered from disk

    (tree / "burnqed/helpers.py").write_text("from burnqed import unused\n", encoding="utf-8")
    entries[0].write_text('{"not": "a list"}', encoding="utf-8")
    provenance._imports.cache_clear()
    assert "burnqed/unused.py" in _names(code_files("workflow/scripts/step.py", root=tree), tree)
    # Parsed: the edited file, the file it now imports, and the one whose entry was spoilt.
    assert {"burnqed.helpers", "burnqed.unused"} < set(parsed) and len(parsed) == 3
    provenance._imports.cache_clear()
