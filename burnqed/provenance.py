"""How an artifact was made: the git commit of the burnqed checkout and the versions of the packages
that decide the numbers.  Every stage's summary, manifest and eval JSON records these.

Example::

    >>> sorted(package_versions(("pyyaml",)))[:2]
    ['burnqed', 'python']
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import burnqed

# What decides training, search and evaluation results.
TRACKED_PACKAGES = (
    "torch", "transformers", "tokenizers", "peft", "trl", "accelerate", "datasets",
    "bitsandbytes", "safetensors", "numpy", "pyarrow", "duckdb", "snakemake", "dvc",
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


__all__ = ["TRACKED_PACKAGES", "git_commit", "git_state", "package_versions"]
