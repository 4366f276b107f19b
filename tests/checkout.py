"""A copy of this checkout's ``burnqed/`` package with an edit, for the tests that check a cache or
checkpoint is keyed by the code that made it (:func:`burnqed.provenance.code_digest`).

Point :data:`burnqed.provenance.SOURCE_ROOT` at the copy (``monkeypatch.setattr``) and every code
digest is taken of the copy's files: what a run of the edited checkout would record, without
importing the edited code.  A verbatim copy digests like this checkout (paths are relative).

Example::

    root = edited_checkout(tmp_path, "burnqed/ebm/head.py", "class ", "class ")  # verbatim
    monkeypatch.setattr(burnqed.provenance, "SOURCE_ROOT", root)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import burnqed.provenance


def edited_checkout(dest: Path, path: str, old: str, new: str) -> Path:
    """``dest`` holding a copy of ``burnqed/`` whose file ``path`` has its one ``old`` replaced by
    ``new``; returns ``dest`` (the root to digest)."""
    shutil.copytree(burnqed.provenance.SOURCE_ROOT / "burnqed", dest / "burnqed",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    f = dest / path
    text = f.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"{path}: {old!r} occurs {text.count(old)} times"
    f.write_text(text.replace(old, new), encoding="utf-8")
    return dest
