"""The Lean environment a REPL runs in, as what decides its answers: :func:`environment_identity`.

The same tactic on the same printed state gives the same answer only under the same Lean: the
same REPL program, toolchain and imported library.  The expansion cache
(:mod:`burnqed.search.cache`) keys every Lean answer on this identity, taken where the REPL runs
(its working directory and environment: :func:`~burnqed.lean.client.repl_environment`):

- ``program`` — the bytes of the executable ``lean.repl_command`` starts (found on the REPL's
  ``PATH``) and of every file its arguments name (a wrapper script, a script an interpreter runs);
- ``toolchain`` — ``lean --version`` (its version, platform and commit) and ``lean --print-prefix``
  of the ``lean`` the REPL finds, and ``$LEAN_SYSROOT``: Lean's ``findSysroot``, which Pantograph
  calls to locate ``Init``, ``Std`` and ``Lean``, reads the variable, else asks ``lean`` on the
  ``PATH`` (through elan, the toolchain the working directory's ``lean-toolchain`` pins);
- ``lean_path`` — for every entry of ``LEAN_PATH`` as the REPL sees it (``lake env printenv
  LEAN_PATH`` of ``lean.project_path``, else the caller's), the digest of every ``.olean`` file
  under it (path and whole bytes: :func:`~burnqed.provenance.files_digest`; ``.olean.server`` and
  ``.olean.private`` too): Mathlib and every package exactly as built, uncommitted edits included
  once they are built.  A file is read once and remembered by its identity on disk (the first
  digest of a Mathlib build reads its gigabytes of ``.olean`` files; later ones only stat them).

**Where the REPL runs is read off the running REPL.**  A wrapper may set up its own environment —
``cd ../project && exec lake env repl``, a ``PATH`` with another ``lean`` — that the caller's
environment and ``lean.project_path`` do not show.  So the identity is taken from the process that
answers a running REPL's requests (:func:`repl_process`: the deepest process below the one started,
since a wrapper's ``exec`` keeps its pid and ``lake env`` runs the REPL as its child): its
executable's bytes (``program.running``), and its own ``PATH``, ``LEAN_SYSROOT``, ``LEAN_PATH`` and
working directory for ``toolchain`` and ``lean_path``.  :func:`observe_repl` starts one to look
(the search stage looks at its pool's first worker instead); where none starts, the caller's
environment stands in and ``program.running`` is None.

An absent part is None (no ``lean`` on the PATH, no ``LEAN_PATH``, a command not found here).  A
command that runs a burnqed module (``python -m burnqed.proplogic``, which runs no Lean) has all
three None: that module's code keys it (:func:`~burnqed.provenance.code_digest`, by the caller).

Example::

    >>> import sys
    >>> from burnqed.config import LeanConfig
    >>> cfg = LeanConfig(repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=())
    >>> sorted(environment_identity(cfg))
    ['lean_path', 'program', 'toolchain']
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from burnqed.config import LeanConfig
from burnqed.lean.client import repl_environment
from burnqed.lean.errors import ReplError
from burnqed.provenance import file_digest, files_digest, launched_modules

log = logging.getLogger(__name__)


def _program(cfg: LeanConfig, env: dict[str, str], cwd: str | None) -> dict[str, Any] | None:
    """The bytes of the REPL's executable and of the files its arguments name."""
    command = list(cfg.repl_command)
    where = Path(cwd) if cwd else Path.cwd()
    exe = shutil.which(command[0], path=env.get("PATH"))
    if exe is None and (where / command[0]).is_file():
        exe = str(where / command[0])
    files = {}
    for arg in command[1:]:
        candidate = Path(arg) if Path(arg).is_absolute() else where / arg
        with contextlib.suppress(OSError, ValueError):
            if candidate.is_file():
                files[arg] = file_digest(candidate)
    return {
        "executable": file_digest(exe) if exe is not None else None,
        "files": files,
    }


def _toolchain(env: dict[str, str], cwd: str | None) -> dict[str, Any] | None:
    """``lean --version`` / ``--print-prefix`` of the toolchain the REPL's sysroot comes from."""
    sysroot = env.get("LEAN_SYSROOT")
    lean = (
        str(Path(sysroot) / "bin" / "lean")
        if sysroot
        else shutil.which("lean", path=env.get("PATH"))
    )
    if lean is None or not Path(lean).exists():
        return None if sysroot is None else {"sysroot": sysroot, "version": None, "prefix": None}
    out: dict[str, Any] = {"sysroot": sysroot}
    for key, flag in (("version", "--version"), ("prefix", "--print-prefix")):
        out[key] = None
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            r = subprocess.run([lean, flag], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=60)  # fmt: skip
            if r.returncode == 0:
                out[key] = r.stdout.strip()
    return out


def olean_files(root: Path) -> list[Path]:
    """The compiled-module files under ``root`` that an import reads (``*.olean*``)."""
    return sorted(
        Path(d) / f
        for d, _, names in os.walk(root)
        for f in names
        if ".olean" in f and not f.startswith(".")
    )


def _lean_path(env: dict[str, str]) -> dict[str, str | None] | None:
    """Per ``LEAN_PATH`` entry, the digest of its ``.olean`` files (None: no such directory)."""
    entries = [e for e in (env.get("LEAN_PATH") or "").split(os.pathsep) if e]
    if not entries:
        return None
    t0 = time.perf_counter()
    out: dict[str, str | None] = {}
    count = 0
    for entry in entries:
        root = Path(entry)
        if not root.is_dir():
            out[entry] = None
            continue
        files = olean_files(root)
        count += len(files)
        out[entry] = files_digest(files, root)
    log.info("LEAN_PATH: %d .olean files in %d entries digested in %.1f s", count, len(entries),
             time.perf_counter() - t0)  # fmt: skip
    return out


def repl_process(pid: int | None) -> dict[str, Any] | None:
    """The process that answers the requests of the REPL started as ``pid``, as it runs: its
    executable, working directory and environment — the deepest process below ``pid`` (a
    wrapper's ``exec`` keeps the pid; ``lake env`` starts the REPL as its child).  None when it
    cannot be read (gone, another user's, no ``/proc``)."""
    import psutil

    if pid is None:
        return None
    try:
        root = psutil.Process(pid)
        below = root.children(recursive=True)
        parent = {p.pid: p.ppid() for p in below}

        def depth(p: psutil.Process) -> int:
            d, q = 0, p.pid
            while q in parent:
                d, q = d + 1, parent[q]
            return d

        leaf = max([root, *below], key=lambda p: (depth(p), p.create_time()))
        return {"exe": leaf.exe(), "cwd": leaf.cwd(), "env": dict(leaf.environ())}
    except (psutil.Error, OSError) as e:
        log.warning("REPL pid %s: cannot read the process that runs it (%s)", pid, e)
        return None


async def observe_repl(cfg: LeanConfig) -> dict[str, Any] | None:
    """Start ``lean.repl_command`` as a pool would, read the process that answers it
    (:func:`repl_process`) once it is ready, and stop it; None when it does not start (the
    search would fail there anyway) or runs a burnqed module (keyed by its code)."""
    from burnqed.lean.client import ReplClient

    if launched_modules(cfg.to_dict()):
        return None
    try:
        async with ReplClient(cfg, name="observe") as client:
            return repl_process(client.pid)
    except (ReplError, OSError) as e:
        log.info("lean.repl_command %s: not started to see where it runs (%s); the caller's "
                 "environment stands in", list(cfg.repl_command), e)  # fmt: skip
        return None


def environment_identity(
    cfg: LeanConfig, running: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What decides a Lean answer besides the question (module docstring): ``program``,
    ``toolchain`` and ``lean_path``, from the environment of ``running`` (:func:`repl_process`
    of a running REPL) where given, else the caller's.  A project whose ``LEAN_PATH`` cannot be
    had (no ``lake``) gives ``lean_path: {"error": …}`` (such a REPL does not start either).  A REPL
    that is a burnqed module (the propositional stand-in) runs no Lean: all three are None, its
    code keys it (so the demo's cache does not depend on whether a machine has Lean installed)."""
    if launched_modules(cfg.to_dict()):
        return {"program": None, "toolchain": None, "lean_path": None}
    try:
        env, cwd = repl_environment(cfg)
    except ReplError as e:
        env, cwd = dict(os.environ), cfg.project_path
        lean_path: Any = {"error": str(e)}
    else:
        lean_path = None  # below, from the environment the REPL runs in
    program = _program(cfg, env, cwd)
    program["running"] = None
    if running is not None:
        env, cwd = dict(running["env"]), running["cwd"]
        with contextlib.suppress(OSError):
            program["running"] = file_digest(running["exe"])
        lean_path = None
    if lean_path is None:
        lean_path = _lean_path(env)
    return {"program": program, "toolchain": _toolchain(env, cwd), "lean_path": lean_path}


__all__ = ["environment_identity", "observe_repl", "olean_files", "repl_process"]
