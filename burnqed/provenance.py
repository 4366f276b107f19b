"""How an artifact was made: the git commit of the burnqed checkout and the versions of the packages
that decide the numbers.  Every stage's summary, manifest and eval JSON records these.

And the digest of the code a job runs (:func:`code_digest`), which decides whether a finished job
is still valid: each Snakemake rule passes it as a param (``rules/common.smk``: Snakemake reruns a
job whose params changed) and the search stage puts it in its resume fingerprint (attempts made by
other code are redone).  It covers every file that runs, found statically, never a hand-kept list:
the entry (a rule's shim ``workflow/scripts/<name>.py``, or a module), every burnqed module it
imports, transitively (imports inside functions too; ``if TYPE_CHECKING:`` blocks excepted), with
the ``__init__.py`` of each package on the way, the package data of those packages (the files
beside an ``__init__.py`` that are not Python: ``burnqed/params.schema.yaml``), and the modules a
configured command runs as a separate process (:func:`launched_modules`: ``lean.repl_command:
[python, -m, burnqed.proplogic]``) with their ``__main__.py``.  Every file's path and bytes go in,
whatever its suffix.  Static: an import that only runs as a string (``importlib.import_module(f"…")``,
a hard-coded ``-m burnqed.x``) is not seen.

Example::

    >>> sorted(package_versions(("pyyaml",)))[:2]
    ['burnqed', 'python']
    >>> files = code_files("burnqed.search.stage", *launched_modules({"repl_command": ["python", "-m", "burnqed.proplogic"]}))
    >>> {"burnqed/search/engine.py", "burnqed/params.schema.yaml", "burnqed/proplogic/__main__.py"} <= {
    ...     f.relative_to(SOURCE_ROOT).as_posix() for f in files}
    True
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import platform
import re
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

import burnqed

# What decides training, search and evaluation results.  liger-kernel (the gpu extra) and triton
# (its compiler; CUDA torch's dependency) decide a GPU training step's SFT loss and attention
# kernels: None where not installed (every CPU install).
TRACKED_PACKAGES = (
    "torch", "transformers", "tokenizers", "peft", "trl", "accelerate", "datasets",
    "bitsandbytes", "safetensors", "numpy", "pyarrow", "duckdb", "snakemake", "dvc",
    "liger-kernel", "triton",
)  # fmt: skip


def _git(*args: str) -> subprocess.CompletedProcess | None:
    where = Path(burnqed.__file__).resolve().parent
    try:
        return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit() -> str | None:
    """The commit of the checkout burnqed runs from; None outside git."""
    out = _git("rev-parse", "HEAD")
    return (out.stdout.strip() or None) if out is not None and out.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` (dirty: tracked files changed)."""
    commit = git_commit()
    if commit is None:
        return {"commit": None, "dirty": None}
    status = _git("status", "--porcelain", "--untracked-files=no")
    dirty = None if status is None or status.returncode != 0 else bool(status.stdout.strip())
    return {"commit": commit, "dirty": dirty}


def package_versions(packages: Sequence[str] = TRACKED_PACKAGES) -> dict[str, str | None]:
    """Versions of burnqed, Python and ``packages`` (None when not installed)."""
    versions: dict[str, str | None] = {
        "burnqed": burnqed.__version__,
        "python": platform.python_version(),
    }
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


# The checkout whose files run: the parent of the imported burnqed package.
SOURCE_ROOT = Path(burnqed.__file__).resolve().parent.parent
PACKAGE = "burnqed"
_MODULE_NAME = re.compile(rf"{PACKAGE}(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _module_file(root: Path, name: str) -> Path | None:
    """The file of module ``name`` under ``root`` (``__init__.py`` for a package), or None."""
    base = os.path.join(root, *name.split("."))  # os.path: thousands of lookups per parse
    for f in (f"{base}.py", os.path.join(base, "__init__.py")):
        if os.path.isfile(f):
            return Path(f)
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_statements(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of a module at any depth (in functions, classes, ``try``...), except
    in ``if TYPE_CHECKING:`` bodies, which never run.  Statements only: expressions hold none."""
    todo: list[ast.AST] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            todo.extend(node.orelse)
        else:
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                todo.extend(getattr(node, field, ()))


# Parsed imports kept across processes: every Snakemake invocation digests each rule's code, and
# parsing ~100 modules is most of a dry run's cost (1.3 of 2.3 s).  Keyed by the file's bytes, its
# module name and the Python version (the parser's), so an entry can never describe another file;
# a cache that cannot be read or written is ignored (it only saves time).
_IMPORTS_CACHE_VERSION = "1"


def _imports_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "burnqed" / "imports"


@cache
def _imports(path: Path, name: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The burnqed modules the file of module ``name`` (``""`` for a script) may import: absolute
    and relative imports, every ``from m import x`` listed as ``m`` and ``m.x`` (a module when
    such a file exists).  Cached per file version (``mtime_ns``, ``size``) in the process, and by
    content on disk (:func:`_imports_cache_dir`)."""
    del mtime_ns, size  # the cache key: an edited file is parsed again
    data = path.read_bytes()
    key = hashlib.sha256(
        f"{_IMPORTS_CACHE_VERSION}\0{platform.python_version()}\0{name}\0{path.name}\0".encode()
        + data
    ).hexdigest()[:32]
    stored = _imports_cache_dir() / f"{key}.json"
    with contextlib.suppress(OSError, ValueError):
        found = json.loads(stored.read_text(encoding="utf-8"))
        if isinstance(found, list) and all(isinstance(m, str) for m in found):
            return tuple(found)
    modules = _parse_imports(path, name, data)
    with contextlib.suppress(OSError):
        stored.parent.mkdir(parents=True, exist_ok=True)
        tmp = stored.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(modules), encoding="utf-8")
        tmp.replace(stored)  # atomic: a concurrent reader sees the whole entry or none
    return modules


def _parse_imports(path: Path, name: str, data: bytes) -> tuple[str, ...]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    modules: set[str] = set()
    for node in _import_statements(ast.parse(data, filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(a.name for a in node.names)
            continue
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        modules.add(base)
        modules.update(f"{base}.{a.name}" for a in node.names if a.name != "*")
    return tuple(sorted(m for m in modules if _MODULE_NAME.fullmatch(m)))


def _closure(root: Path, entries: Sequence[str]) -> list[Path]:
    files: set[Path] = set()
    todo: list[tuple[Path, str]] = []  # (file, module name; "" for a script)
    found: dict[str, Path | None] = {}

    def module_file(name: str) -> Path | None:
        if name not in found:
            found[name] = _module_file(root, name)
        return found[name]

    def add(f: Path, name: str) -> None:
        if f not in files:
            files.add(f)
            todo.append((f, name))

    def add_module(name: str, *, run_as_main: bool = False) -> None:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__, a/b/__init__ too
            f = module_file(".".join(parts[:i]))
            if f is not None:
                add(f, ".".join(parts[:i]))
        main = root.joinpath(*parts, "__main__.py")
        if run_as_main and main.is_file():  # python -m a.package
            add(main, f"{name}.__main__")

    for entry in entries:
        if entry.endswith(".py") or "/" in entry:
            if not (root / entry).is_file():
                raise FileNotFoundError(f"{root / entry}: no such script")
            add(root / entry, "")
        elif module_file(entry) is None:
            raise ModuleNotFoundError(f"{entry}: no such module under {root}")
        else:
            add_module(entry, run_as_main=True)
    while todo:
        f, name = todo.pop()
        st = f.stat()
        for m in _imports(f, name, st.st_mtime_ns, st.st_size):
            if module_file(m) is not None:
                add_module(m)
    # Package data: the files beside an imported package's __init__.py that are not modules.
    for init in [f for f in files if f.name == "__init__.py"]:
        files.update(
            d for d in init.parent.iterdir()
            if d.is_file() and d.suffix not in (".py", ".pyc") and not d.name.startswith(".")
        )  # fmt: skip
    return sorted(files)


def code_files(*entries: str, root: Path | None = None) -> list[Path]:
    """Every file that runs when ``entries`` run (see the module docstring): burnqed module names
    (``burnqed.search.stage``; a package runs its ``__main__.py``) or script paths relative to
    ``root`` (``workflow/scripts/search_shard.py``).  ``root``: the checkout holding ``burnqed/``
    (default :data:`SOURCE_ROOT`, the one imported)."""
    return _closure(Path(root or SOURCE_ROOT), entries)


def code_digest(*entries: str, root: Path | None = None) -> str:
    """Content hash (16 hex digits) of :func:`code_files`: each file's path and bytes."""
    root = Path(root or SOURCE_ROOT)
    h = hashlib.sha256()
    for f in code_files(*entries, root=root):
        data = f.read_bytes()
        h.update(f"{f.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def launched_modules(*config: Any) -> tuple[str, ...]:
    """The burnqed modules that commands in ``config`` (sections, nested) run as a separate
    process: ``python -m burnqed.x`` anywhere in a list of strings (``lean.repl_command``,
    ``policy.server_command``)."""
    found: set[str] = set()
    todo = list(config)
    while todo:
        value = todo.pop()
        if isinstance(value, dict):
            todo.extend(value.values())
        elif isinstance(value, (list, tuple)):
            found.update(
                value[i + 1]
                for i in range(len(value) - 1)
                if value[i] == "-m"
                and isinstance(value[i + 1], str)
                and _MODULE_NAME.fullmatch(value[i + 1])
            )
            todo.extend(value)
    return tuple(sorted(found))


# Whole-file digests, remembered across processes by the file's identity on disk (path, size,
# mtime, ctime, inode, device): weights and .olean files run to gigabytes, and every search or eval
# that uses the expansion cache keys on them.  Any write to a file changes its ctime (which no
# user call can set back), so a remembered digest never describes other bytes.  A memo that
# cannot be read or written is ignored (it only saves time).
_DIGEST_MEMO_VERSION = "1"
_DIGEST_BLOCK = 8 << 20
_DIGEST_LOCK = threading.Lock()  # one connection, shared by the process's threads


def _digest_memo_path() -> Path:
    return _imports_cache_dir().parent / f"file-digests-v{_DIGEST_MEMO_VERSION}.sqlite3"


@cache
def _digest_memo() -> Any:
    import sqlite3

    try:
        path = _digest_memo_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(path, timeout=30, check_same_thread=False, isolation_level=None)
        db.execute("CREATE TABLE IF NOT EXISTS digest (identity TEXT PRIMARY KEY, sha256 TEXT)")
        return db
    except (OSError, sqlite3.Error):
        return None


def file_digest(path: str | Path) -> str:
    """The sha256 (hex) of a file's whole content; remembered by the file's identity on disk, so
    a file read once is not read again until it changes (the comment above)."""
    import sqlite3

    p = Path(path).resolve()
    st = p.stat()
    identity = f"{p}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\0{st.st_dev}"
    db = _digest_memo()
    if db is not None:
        with _DIGEST_LOCK, contextlib.suppress(sqlite3.Error):
            row = db.execute("SELECT sha256 FROM digest WHERE identity = ?", (identity,)).fetchone()
            if row is not None:
                return row[0]
    h = hashlib.sha256()
    with p.open("rb") as f:
        while block := f.read(_DIGEST_BLOCK):
            h.update(block)
    digest = h.hexdigest()
    if db is not None:
        with _DIGEST_LOCK, contextlib.suppress(sqlite3.Error):
            db.execute("INSERT OR REPLACE INTO digest VALUES (?, ?)", (identity, digest))
    return digest


def files_digest(files: Sequence[Path], root: Path) -> str:
    """One digest of ``files`` (paths relative to ``root`` and whole contents: :func:`file_digest`)."""
    h = hashlib.sha256(b"burnqed-files-v1\0")
    for f in sorted(files):
        h.update(f"{Path(f).relative_to(root).as_posix()}\0{file_digest(f)}\n".encode())
    return h.hexdigest()[:32]


def lean_project_versions(project_path: str | Path | None) -> dict[str, Any] | None:
    """What a Lean project pins: its toolchain (``lean-toolchain``), the revision of every package
    in ``lake-manifest.json``, its own git commit, and the Mathlib revision among them (the commit
    when the project is Mathlib itself).  None without a project; None per item that is absent."""
    if project_path is None:
        return None
    p = Path(project_path)
    toolchain = commit = None
    packages: dict[str, Any] = {}
    name = None
    with contextlib.suppress(OSError):
        toolchain = (p / "lean-toolchain").read_text(encoding="utf-8").strip()
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
        manifest = json.loads((p / "lake-manifest.json").read_text(encoding="utf-8"))
        name = manifest.get("name")
        packages = {pkg["name"]: pkg.get("rev") for pkg in manifest.get("packages", [])}
    # Its own checkout only: a directory inside another one would give that one's commit.
    if (p / ".git").exists():
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                ["git", "rev-parse", "HEAD"], cwd=p, capture_output=True, text=True, timeout=10
            )
            commit = (out.stdout.strip() or None) if out.returncode == 0 else None
    mathlib = commit if name == "mathlib" else packages.get("mathlib")
    return {"lean_toolchain": toolchain, "mathlib": mathlib, "packages": packages, "commit": commit}


def lean_toolchain(lean: Mapping[str, Any]) -> dict[str, Any]:
    """The Lean side of a search as its resume fingerprint sees it, for a Snakemake param (a new
    toolchain, Mathlib or Pantograph reruns every search and eval that used the old one): the
    toolchain and packages of ``lean.project_path`` (:func:`lean_project_versions`) and the first
    line of ``repl_command --version`` (Pantograph's version), run where the REPL runs.

    ``repl_version`` is None when the REPL is a burnqed module (``python -m burnqed.proplogic``: its
    code is in the job's code digest) or does not run here (not installed on this machine)."""
    command = list(lean.get("repl_command") or ())
    project = lean.get("project_path")
    version = None
    if command and not launched_modules(lean):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [*command, "--version"], cwd=project or None, stdin=subprocess.DEVNULL,
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            lines = out.stdout.strip().splitlines()
            version = lines[0] if out.returncode == 0 and lines else None
    return {"lean_project": lean_project_versions(project), "repl_version": version}


__all__ = [
    "SOURCE_ROOT",
    "TRACKED_PACKAGES",
    "code_digest",
    "code_files",
    "file_digest",
    "files_digest",
    "git_commit",
    "git_state",
    "launched_modules",
    "lean_project_versions",
    "lean_toolchain",
    "package_versions",
]
