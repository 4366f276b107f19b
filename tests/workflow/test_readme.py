"""The commands of the README and of every docs/*.md page work as a user copies them: a command
that fails for a user fails here (``PAGES``; "the README" below means each of them).

What is covered, and how:

- **Every command of a ```bash block**, one per ``&&``, its ``# comment`` dropped, taken
  literally (a block is copied whole: no placeholders there).  ``snakemake …`` must plan as
  written (``-n --quiet=rules`` put right after ``snakemake``), in a copy of the workflow (nothing
  is written into the repository) — ``snakemake --report FILE …`` without ``--report FILE``, since
  a report needs a finished run (``tests/workflow/test_loop.py`` builds one after the loop); ``burnqed …`` must parse with the real parser
  (:func:`burnqed.cli.build_parser`, nothing executed), and runs for real where that is cheap:
  ``burnqed --help``, ``burnqed data --configfile config/demo.yaml pairs`` on a shrunken demo,
  ``burnqed data fetch minif2f --from PATH`` with the local copy, ``burnqed doctor --configfile
  config/demo.yaml`` in a user's checkout (the others need models, searches,
  a network or a DVC remote; their stages are tested in their packages).  Any other command must
  be one CI runs itself — the install command and ``python -m pytest``, checked to be in
  ``.ci/run`` (``CI_RUNS``) — or git's (``NOT_OURS``); a new kind of command fails the test until
  it is covered here.
- **Every inline code span that is a complete ``snakemake …`` or ``burnqed …`` command** (prose,
  lists, the Commands table), the same way.  Synopses are expanded into concrete commands: an
  optional ``[…]`` group with and without it, ``a|b`` one alternative at a time, each UPPER-CASE
  placeholder (``N``, ``NAME``, ``JSON…``) replaced by a sample value (``SAMPLES``; an unknown
  placeholder fails the test rather than being skipped).

Not covered here: ``python bench/…`` (``tests/bench/test_smoke.py`` runs every bench),
``workflow/slurm/single-node.sh …`` and ``python -m pytest -m …`` (steps of ``.ci/run``),
``dvc …`` (``tests/workflow/test_dvc.py``), a bare ``snakemake`` naming the tool, and the
commands of :data:`EXCEPTIONS` (docs/cloud.md's set-up of a rented GPU machine: each with why).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from burnqed.cli import build_parser
from burnqed.report.docs import doc_files
from tests import snakemake_cli
from tests.snakemake_cli import SNAKEMAKE
from tests.workflow.conftest import REPO, TINY

README = REPO / "README.md"
PAGES = doc_files(REPO)  # README.md and docs/*.md
BIN = Path(sys.executable).parent

# A sample value for each placeholder the README's synopses use.
SAMPLES = {
    "N": "2",
    "TARGET": "results/iter_0/eval.json",
    "NAME": "minif2f",
    "PATH": "minif2f.jsonl",
    "F": "data/benchmarks/proplogic_test.jsonl",
    "M": "models/iter_0/merged",
    "DIR": "results/check",
    "JSON": "results/iter_0/eval.json",
    "I": "1",
    "R": "store",
    "KEY": "toy0000",
    "TOOLCHAIN": "leanprover/lean4:v4.9.0",
    "FRACTION": "0.1",
    "SEED": "3",
    "FILE": "results/iter_0/eval.json",
    "RUN_DIR": ".",
    "TIME": "2026-11-27T21:12:06Z",
}
_PLACEHOLDER = re.compile(r"^([A-Z][A-Z_]*)(?:\.\.\.|…)?$")

# Commands of the bash blocks that are not snakemake/burnqed, each with the command that .ci/run runs
# in its place (the same but for the virtualenv's name); git's commands are not ours to test.
CI_RUNS = {
    "python3 -m venv .venv": "python3 -m venv .venv-ci",
    ". .venv/bin/activate": ". .venv-ci/bin/activate",
    "pip install -c constraints.txt -e .[dev] torch==2.13.0": (
        "pip install -c constraints.txt -e .[dev] torch==2.13.0"
    ),
    "python -m pytest": "python -m pytest",
}
NOT_OURS = ("git",)
# Bash-block commands of a page that no test runs, by the start of the command, with why.
_CLOUD = (
    "setting up a rented GPU machine by hand: it needs a network, a GPU, Lean's toolchain or a "
    "storage account's credentials (the Lean pins are checked by `burnqed doctor`, DVC by "
    "tests/workflow/test_dvc.py against a local remote)"
)
EXCEPTIONS = {
    "docs/cloud.md": dict.fromkeys(
        ("cd ", "mkdir ", "cat ", "printf ", "curl ", "(cd ", "lake ", ". ~/.elan/env",
         "lean/pantograph/", "LEAN_PATH=", "python3.11 -m venv ", "pip install ", "sglang-env/",
         "dvc "),
        _CLOUD,
    ),
    "docs/statistics.md": {
        "BURNQED_SCREENSHOTS=docs python -m pytest -m browser tests/browser": (
            "the browser tests, which .ci/run's browser step runs; the variable only copies their "
            "screenshots into docs/ (tests/browser/conftest.py keep_screenshot)"
        ),
    },
}  # fmt: skip


@dataclass(frozen=True)
class Command:
    page: str  # the page (README.md, docs/….md) the command is on
    line: int  # line of the page the command (or its synopsis) starts on
    written: str  # as the README writes it
    argv: tuple[str, ...]  # one concrete command

    @property
    def id(self) -> str:
        return f"{self.page}:L{self.line}:{' '.join(self.argv)}"


def _bash_blocks(text: str) -> tuple[list[tuple[int, str]], str]:
    """``(line, command)`` of every ```bash block, and the text with every fenced block blanked
    (line numbers kept) for the inline spans."""
    commands, prose = [], []
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            prose.append("")
            continue
        prose.append("" if fence is not None else line)
        if fence == "bash" and line.strip():
            tokens = shlex.split(line, comments=True)
            while tokens:
                cut = tokens.index("&&") if "&&" in tokens else len(tokens)
                if tokens[:cut]:
                    commands.append((n, shlex.join(tokens[:cut])))
                tokens = tokens[cut + 1 :]
    return commands, "\n".join(prose)


def _inline_commands(prose: str) -> list[tuple[int, str]]:
    """``(line, span)`` of every inline code span that starts with ``snakemake``/``burnqed``."""
    out = []
    for m in re.finditer(r"`([^`]+)`", prose):
        span = " ".join(m.group(1).replace("\\|", "|").split())
        # A bare `snakemake` names the tool ("the same `snakemake` command"): not a command.
        if span.split()[0] in ("snakemake", "burnqed") and len(span.split()) > 1:
            out.append((prose.count("\n", 0, m.start()) + 1, span))
    return out


def expand(synopsis: str) -> list[tuple[str, ...]]:
    """The concrete commands a synopsis stands for (module docstring)."""
    m = re.search(r"\[([^\[\]]*)\]", synopsis)
    if m:
        without = synopsis[: m.start()] + synopsis[m.end() :]
        with_ = synopsis[: m.start()] + m.group(1) + synopsis[m.end() :]
        return list(dict.fromkeys(expand(without) + expand(with_)))
    variants: list[tuple[str, ...]] = [()]
    for token in shlex.split(synopsis):
        alternatives = token.split("|") if "|" in token and not token.startswith("|") else [token]
        concrete = []
        for alt in alternatives:
            p = _PLACEHOLDER.match(alt)
            if p:
                assert p.group(1) in SAMPLES, (
                    f"README placeholder {alt!r} in `{synopsis}`: add a sample value"
                )
                alt = SAMPLES[p.group(1)]
            concrete.append(alt)
        variants = [(*v, alt) for v in variants for alt in concrete]
    return variants


def readme_commands() -> tuple[list[Command], list[tuple[str, int, str]]]:
    """(snakemake/burnqed commands, other bash-block commands as (page, line, command)) of every
    page.  A bash block is copied as it is, so its commands are taken literally; inline spans may
    be synopses."""
    ours, others, seen = [], [], set()
    for path in PAGES:
        page = path.relative_to(REPO).as_posix()
        blocks, prose = _bash_blocks(path.read_text(encoding="utf-8"))
        found = [(line, written, [tuple(shlex.split(written))]) for line, written in blocks]
        found += [(line, written, expand(written)) for line, written in _inline_commands(prose)]
        for line, written, argvs in found:
            if written.split()[0] not in ("snakemake", "burnqed"):
                others.append((page, line, written))
                continue
            for argv in argvs:
                if argv not in seen:
                    seen.add(argv)
                    ours.append(Command(page, line, written, argv))
    return ours, others


COMMANDS, OTHERS = readme_commands()
SNAKEMAKE_COMMANDS = [c for c in COMMANDS if c.argv[0] == "snakemake"]
BURNQED_COMMANDS = [c for c in COMMANDS if c.argv[0] == "burnqed"]


def test_the_readme_has_the_commands_this_test_is_about():
    """The extraction itself: the demo's commands and the synopses are found and expanded."""
    argvs = {" ".join(c.argv) for c in COMMANDS}
    assert "snakemake --cores 2 --configfile config/demo.yaml" in argvs
    assert "snakemake --cores 2 results/iter_1/eval.json --configfile config/demo.yaml" in argvs
    assert "burnqed data fetch minif2f --from minif2f.jsonl" in argvs  # `[--from PATH]` expanded
    assert {"burnqed artifacts push", "burnqed artifacts restore --remote store"} <= argvs
    assert len(SNAKEMAKE_COMMANDS) >= 5 and len(BURNQED_COMMANDS) >= 20
    j = SAMPLES["JSON"]
    assert set(expand("x [a|b] c [--d JSON...]")) == {
        ("x", "c"), ("x", "c", "--d", j), ("x", "a", "c"), ("x", "a", "c", "--d", j),
        ("x", "b", "c"), ("x", "b", "c", "--d", j),
    }  # fmt: skip
    with pytest.raises(AssertionError, match="placeholder 'WHAT'"):
        expand("burnqed eval WHAT")


def _ci_commands() -> set[str]:
    """Every command of .ci/run (one per ``&&``), tokens joined by single spaces."""
    out = set()
    for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines():
        tokens = shlex.split(line, comments=True)
        while tokens:
            cut = tokens.index("&&") if "&&" in tokens else len(tokens)
            out.add(" ".join(tokens[:cut]))
            tokens = tokens[cut + 1 :]
    return out


@pytest.mark.parametrize(("page", "line", "command"), OTHERS,
                         ids=[f"{p}:L{n}:{c}" for p, n, c in OTHERS])  # fmt: skip
def test_every_other_bash_command_is_run_by_ci_or_not_ours(page, line, command):
    words = " ".join(shlex.split(command))
    if words.split()[0] in NOT_OURS:
        return
    if any(words.startswith(start) for start in EXCEPTIONS.get(page, {})):
        return
    assert words in CI_RUNS, (
        f"{page} line {line}: `{command}` is neither tested here nor run by CI nor an exception: "
        "cover it in tests/workflow/test_readme.py"
    )
    assert CI_RUNS[words] in _ci_commands(), (
        f"{page} line {line}: .ci/run no longer runs `{command}`"
    )


def test_the_exceptions_are_the_cloud_pages_set_up_only():
    """Only docs/cloud.md's machine set-up and the screenshot command are excused, and each excused
    start still covers a command of its page (a stale exception is removed, not kept)."""
    assert set(EXCEPTIONS) == {"docs/cloud.md", "docs/statistics.md"}
    for page, starts in EXCEPTIONS.items():
        commands = [" ".join(shlex.split(c)) for p, _, c in OTHERS if p == page]
        for start in starts:
            assert any(c.startswith(start) for c in commands), f"{page}: stale exception {start!r}"


# --------------------------------------------------------------------------------------------
# snakemake: every command plans with -n exactly as written


def _copy_workflow(dest: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "tmp", "cache", "config.local")
    dest.mkdir(parents=True)
    for name in ("Snakefile", "params.yaml"):
        shutil.copy(REPO / name, dest / name)
    for name in ("rules", "workflow", "config", "burnqed"):
        shutil.copytree(REPO / name, dest / name, ignore=ignore)
    return dest


@pytest.fixture(scope="module")
def workflow_copy(tmp_path_factory) -> Path:
    """One copy of the workflow that every README snakemake command plans in."""
    return _copy_workflow(tmp_path_factory.mktemp("readme") / "repo")


def _needs_slurm_plugin(c: Command) -> bool:
    """The SLURM profile's commands: Snakemake needs snakemake-executor-plugin-slurm to plan them
    (``.[slurm]``, not in ``dev``; .ci/run's SLURM step installs it and runs them)."""
    return "workflow/profiles/slurm" in c.argv or "slurm" in c.argv


@pytest.mark.parametrize("command", [
    pytest.param(c, id=c.id, marks=[pytest.mark.slurm] if _needs_slurm_plugin(c) else [])
    for c in SNAKEMAKE_COMMANDS
])  # fmt: skip
def test_snakemake_command_plans_as_written(command, workflow_copy):
    """``-n --quiet=rules`` put right after ``snakemake``, the rest as written."""
    args = list(command.argv[1:])
    if "--report" in args:  # the report of a finished run: plan that run
        at = args.index("--report")
        del args[at : at + 2]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    r = snakemake_cli.run([SNAKEMAKE, "-n", "--quiet=rules", *args], cwd=workflow_copy, env=env,
                          timeout=300)  # fmt: skip
    assert r.returncode == 0, (
        f"{command.page} line {command.line}: `{command.written}` does not plan "
        f"(`snakemake -n {' '.join(command.argv[1:])}`):\n{r.stdout[-2000:]}{r.stderr[-4000:]}"
    )
    if "--unlock" in command.argv:  # removes a stale lock: runs for real, nothing to plan
        assert "Unlocked working directory" in r.stdout + r.stderr
    elif "--lint" not in command.argv:
        assert (
            "This was a dry-run" in r.stdout + r.stderr
            or "Nothing to be done" in r.stdout + r.stderr
        )


# --------------------------------------------------------------------------------------------
# burnqed: every command parses; the cheap ones run


@pytest.mark.parametrize("command", BURNQED_COMMANDS, ids=lambda c: c.id)
def test_burnqed_command_parses(command):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            args = build_parser().parse_args(command.argv[1:])
    except SystemExit as e:
        assert e.code == 0 and "--help" in command.argv, (
            f"{command.page} line {command.line}: `{command.written}` does not parse as "
            f"`{' '.join(command.argv)}`: {err.getvalue().strip().splitlines()[-1:]}"
        )
        return
    assert callable(args.func)  # it would run a stage, not fall through to usage


def _run_burnqed(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "burnqed.cli", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(REPO)))  # fmt: skip


@pytest.fixture
def user_dir(tmp_path) -> Path:
    """A user's checkout as the burnqed CLI sees it: params.yaml, config/ and a shrink overlay."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(REPO / "config", tmp_path / "config")
    (tmp_path / "tiny.yaml").write_text(yaml.safe_dump({"data": TINY["data"]}), encoding="utf-8")
    return tmp_path


def _shrunk(argv: tuple[str, ...]) -> list[str]:
    """``argv`` with ``--configfile tiny.yaml`` after its last ``--configfile`` (same command)."""
    at = max(i for i, a in enumerate(argv) if a == "--configfile") + 2
    return [*argv[1:at], "--configfile", "tiny.yaml", *argv[at:]]


def test_burnqed_help_runs():
    (c,) = [c for c in BURNQED_COMMANDS if c.argv == ("burnqed", "--help")]
    r = _run_burnqed(list(c.argv[1:]), REPO)
    assert r.returncode == 0 and "artifacts" in r.stdout and "search" in r.stdout, r.stderr


def test_burnqed_data_pairs_runs_on_a_shrunken_demo(user_dir):
    """`burnqed data --configfile config/demo.yaml pairs` after `… benchmarks` (the eval benchmark
    the pairs are decontaminated against), with the demo's theorem counts shrunk."""
    (c,) = [
        c
        for c in BURNQED_COMMANDS
        if c.argv[1:3] == ("data", "--configfile") and c.argv[-1] == "pairs"
    ]
    setup = _run_burnqed(_shrunk((*c.argv[:-1], "benchmarks")), user_dir)
    assert setup.returncode == 0, setup.stderr[-3000:]
    r = _run_burnqed(_shrunk(c.argv), user_dir)
    assert r.returncode == 0, f"{c.page} line {c.line}: `{c.written}`:\n{r.stderr[-3000:]}"
    pairs = user_dir / "data" / "tactic_pairs"
    assert (pairs / "train.parquet").stat().st_size > 0 and (pairs / "filter_report.json").is_file()


def test_burnqed_data_fetch_from_a_local_copy_runs(user_dir, minif2f_path):
    """`burnqed data fetch NAME [--from PATH]` with the local copy (the download is not run)."""
    (c,) = [c for c in BURNQED_COMMANDS if c.argv[1:3] == ("data", "fetch") and "--from" in c.argv]
    shutil.copy(minif2f_path, user_dir / SAMPLES["PATH"])
    r = _run_burnqed(list(c.argv[1:]), user_dir)
    assert r.returncode == 0, f"{c.page} line {c.line}: `{c.written}`:\n{r.stderr[-3000:]}"
    fetched = user_dir / "data" / "raw" / "benchmarks" / "minif2f.jsonl"
    assert fetched.read_bytes() == minif2f_path.read_bytes()


def test_burnqed_doctor_passes_on_the_demo_config(user_dir):
    """`burnqed doctor --configfile config/demo.yaml` in a checkout with nothing built: exit 0."""
    (c,) = [
        c
        for c in BURNQED_COMMANDS
        if c.argv == ("burnqed", "doctor", "--configfile", "config/demo.yaml")
    ]
    path = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])  # `python` of lean.repl_command
    r = subprocess.run([sys.executable, "-m", "burnqed.cli", *c.argv[1:]], cwd=user_dir, capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO), PATH=path))  # fmt: skip
    assert r.returncode == 0, (
        f"{c.page} line {c.line}: `{c.written}`:\n{r.stdout}{r.stderr[-3000:]}"
    )
    assert "ok   proof:" in r.stdout and "\nfail " not in r.stdout
