"""Move a run's artifacts between machines with DVC so that Snakemake sees nothing to redo.

DVC moves the bytes: ``data/``, ``models/`` and ``results/`` are each tracked whole by a ``.dvc``
file (``data.dvc`` ...), so the rules that later engineers add are covered without listing them,
and Snakemake keeps owning the DAG (``dvc.yaml`` has no stages).  What DVC does not move is what
Snakemake decides reruns from: file times (an input newer than an output, or a script newer than
an output, reruns the job; DVC writes pulled files with the time of the pull, in no useful order)
and its records in ``.snakemake/metadata``: what each output was built from — the rule's params
(its config sections and its code digest, which covers the shim, every burnqed file the job runs
and the modules its commands launch: :func:`burnqed.provenance.code_digest`), the input list and
each input's checksum.  So ``push`` also writes ``snakemake-state.json`` (git-tracked, beside the
``.dvc`` files): the order of every artifact's modification time and the metadata records of the
artifacts.  ``pull`` fetches with DVC, checks that the workspace is byte for byte what the ``.dvc``
files record (``dvc status`` clean, same directory hashes as the state file, same file list), then
writes the metadata records back and stamps the files' times in the recorded order, all newer than
every git-tracked file and none in the future — except that a git-tracked file an output was built
from (an input outside the artifacts) whose bytes differ from the checksum Snakemake recorded is
stamped after the artifacts, as a local edit would be.

Why this is safe (not a blind ``snakemake --touch``): the bytes are the ones the state file was
taken from, their time order is the one Snakemake accepted on the source machine, and the
metadata is the source's; what the new times hide — that a script or a tracked input is newer than
an output — cannot hide a change: a script's bytes are in the code digest param, so Snakemake
compares them through the records (a shim edited after the push, or before it on the pushing
machine without a rerun, differs from the recorded params), and a tracked input that changed is
stamped newer.  So ``snakemake -n`` on the new machine plans exactly what it would plan on the old
one after the same edits: a job whose params, code, input list or tracked inputs differ in this
checkout reruns, with everything downstream of it.

Example::

    burnqed artifacts push            # source machine, after `snakemake ...` finished
    git add data.dvc models.dvc results.dvc snakemake-state.json .gitignore && git commit && git push
    git clone ... && cd ... && burnqed artifacts pull    # fresh machine; then `snakemake -n` is empty
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from base64 import urlsafe_b64decode
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger(__name__)

# Artifact directories (SPEC §3): each is one DVC-tracked unit.
ROOTS = ("data", "models", "results")
STATE = "snakemake-state.json"
STATE_FORMAT = 1
METADATA = Path(".snakemake/metadata")
INCOMPLETE = Path(".snakemake/incomplete")
# Restored modification times are 1 ms apart: coarse enough for any file system's clock.
STEP_NS = 1_000_000
# How long `pull` may wait for the clock to leave room above the newest git-tracked file.
MAX_WAIT_S = 60.0


class ArtifactError(RuntimeError):
    """A push or pull that cannot go on; the message names the file and what to do."""


def dvc(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the ``dvc`` CLI of this Python environment in ``repo``."""
    cmd = [sys.executable, "-m", "dvc", *args]
    log.info("$ dvc %s", " ".join(args))
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    r = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True)
    if r.stdout.strip():
        log.info("%s", r.stdout.strip())
    if check and r.returncode != 0:
        raise ArtifactError(
            f"dvc {' '.join(args)} failed (exit {r.returncode}): {r.stderr.strip()}"
        )
    return r


def _check_repo(repo: Path) -> None:
    if not (repo / ".dvc").is_dir():
        raise ArtifactError(f"{repo}: no .dvc/ directory; run from the repository root")


def _decode_key(rel: Path) -> str:
    """The output path a file under .snakemake/metadata records (base64 parts, '@' = continued)."""
    b64 = "".join(part.removeprefix("@") for part in rel.parts)
    return urlsafe_b64decode(b64.encode()).decode()


def _under_roots(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(f"{r}/") for r in roots)


def incomplete_outputs(repo: Path) -> list[str]:
    """Outputs Snakemake marks as being written (a running or killed job)."""
    base = repo / INCOMPLETE
    if not base.is_dir():
        return []
    keys = []
    for f in base.rglob("*"):
        if f.is_file() and f.name != "migration_underway":
            try:
                keys.append(_decode_key(f.relative_to(base)))
            except ValueError:
                keys.append(str(f))
    return sorted(keys)


def _times(repo: Path, roots: Sequence[str]) -> dict[str, int]:
    """Modification time (ns) of every file and directory under the roots, by relative path."""
    out: dict[str, int] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(repo / root):
            dirnames.sort()
            for name in [*filenames, ""]:
                p = Path(dirpath, name) if name else Path(dirpath)
                out[p.relative_to(repo).as_posix()] = os.lstat(p).st_mtime_ns
    return out


def _dvc_hashes(repo: Path, roots: Sequence[str]) -> dict[str, str]:
    import yaml

    hashes = {}
    for root in roots:
        f = repo / f"{root}.dvc"
        if not f.is_file():
            raise ArtifactError(f"{f.name}: missing; `burnqed artifacts push` writes it")
        outs = yaml.safe_load(f.read_text(encoding="utf-8"))["outs"]
        hashes[root] = outs[0]["md5"]
    return hashes


def snapshot(repo: Path, roots: Sequence[str]) -> dict:
    """What ``pull`` needs to give Snakemake the same view of the artifacts as here."""
    records = []
    meta = repo / METADATA
    if meta.is_dir():
        for f in sorted(meta.rglob("*")):
            if not f.is_file():
                continue
            rel = f.relative_to(meta)
            key = _decode_key(rel)
            if _under_roots(key, roots):
                record = json.loads(f.read_text(encoding="utf-8"))
                records.append({"output": key, "file": rel.as_posix(), "record": record})
    times = _times(repo, roots)
    order = sorted(set(times.values()))
    rank = {t: i for i, t in enumerate(order)}
    return {
        "format": STATE_FORMAT,
        "about": "Written by `burnqed artifacts push`; read by `burnqed artifacts pull`. "
        "Snakemake's view of the DVC-tracked artifacts: the order of their modification "
        "times (rank) and Snakemake's metadata records for them.",
        "roots": list(roots),
        "dvc": _dvc_hashes(repo, roots),
        "rank": {path: rank[t] for path, t in sorted(times.items())},
        "metadata": records,
    }


def push(repo: Path, *, remote: str | None = None) -> dict:
    """Track the artifact directories with DVC, record Snakemake's view of them, upload."""
    _check_repo(repo)
    roots = [r for r in ROOTS if (repo / r).is_dir()]
    if not roots:
        raise ArtifactError(f"nothing to push: none of {', '.join(ROOTS)} exists in {repo}")
    incomplete = incomplete_outputs(repo)
    if incomplete:
        raise ArtifactError(
            f"Snakemake marks {len(incomplete)} output(s) as incomplete ({', '.join(incomplete[:5])}): "
            "let the run finish, or rerun it with --rerun-incomplete, before pushing"
        )
    dvc(repo, "add", "--quiet", *roots)
    state = snapshot(repo, roots)
    (repo / STATE).write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    dvc(repo, "push", *(["--remote", remote] if remote else []), *(f"{r}.dvc" for r in roots))
    log.info(
        "pushed %s (%d paths, %d Snakemake records); commit: git add %s %s .gitignore",
        ", ".join(roots),
        len(state["rank"]),
        len(state["metadata"]),
        " ".join(f"{r}.dvc" for r in roots),
        STATE,
    )
    return state


def _missing_on_remote(repo: Path, roots: Sequence[str], remote: str | None) -> list[str]:
    r = dvc(
        repo,
        "status",
        "--cloud",
        "--json",
        *(["--remote", remote] if remote else []),
        *(f"{x}.dvc" for x in roots),
        check=False,
    )
    try:
        return sorted(json.loads(r.stdout or "{}"))
    except json.JSONDecodeError:
        return []


def pull(repo: Path, *, remote: str | None = None) -> None:
    """``dvc pull`` the artifacts named by the state file, then :func:`restore`."""
    _check_repo(repo)
    state = _read_state(repo)
    roots = state["roots"]
    r = dvc(
        repo,
        "pull",
        *(["--remote", remote] if remote else []),
        *(f"{x}.dvc" for x in roots),
        check=False,
    )
    if r.returncode != 0:
        missing = _missing_on_remote(repo, roots, remote)
        what = (
            f"{len(missing)} file(s) are not on the remote: {', '.join(missing[:20])}"
            + (" ..." if len(missing) > 20 else "")
            if missing
            else r.stderr.strip()
        )
        raise ArtifactError(
            f"dvc pull failed, nothing restored: {what} "
            "(push them from the machine that has them: `burnqed artifacts push`)"
        )
    restore(repo, state=state)


def _read_state(repo: Path) -> dict:
    path = repo / STATE
    if not path.is_file():
        raise ArtifactError(f"{STATE}: missing; `burnqed artifacts push` writes it (commit it)")
    state = json.loads(path.read_text(encoding="utf-8"))
    if state.get("format") != STATE_FORMAT:
        raise ArtifactError(f"{STATE}: format {state.get('format')!r}, expected {STATE_FORMAT}")
    return state


def changed_sources(repo: Path, records: Sequence[dict], roots: Sequence[str]) -> list[str]:
    """The files outside the artifacts (git-tracked inputs) that an output was built from and that
    differ from it now: bytes unlike the checksum Snakemake recorded, absent, or with no checksum
    to compare (Snakemake records none above its size threshold)."""
    changed = set()
    for rec in records:
        record = rec["record"]
        checksums = record.get("input_checksums") or {}
        for path in record.get("input") or []:
            f = repo / path
            if _under_roots(path, roots) or path in changed or f.is_dir():
                continue
            recorded = checksums.get(path)
            if recorded is not None and ":" not in recorded:
                recorded = f"sha256:{recorded}"
            if (
                not f.is_file()
                or recorded != f"sha256:{hashlib.sha256(f.read_bytes()).hexdigest()}"
            ):
                changed.add(path)
    return sorted(changed)


def _git_tracked_newest_ns(repo: Path) -> int:
    r = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True)
    newest = 0
    for name in r.stdout.decode().split("\0"):
        p = repo / name
        if name and p.exists():
            newest = max(newest, os.stat(p).st_mtime_ns)
    return newest


def restore(repo: Path, *, state: dict | None = None) -> None:
    """Give Snakemake the source machine's view of artifacts already fetched by ``dvc pull``.

    Refuses (changing nothing) unless the workspace holds exactly the bytes the state was taken
    from: ``dvc status`` clean, the same directory hashes, the same file list.
    """
    _check_repo(repo)
    state = state or _read_state(repo)
    roots = state["roots"]
    r = dvc(repo, "status", "--json", *(f"{x}.dvc" for x in roots), check=False)
    status = json.loads(r.stdout or "{}") if r.returncode == 0 else None
    if status:
        raise ArtifactError(
            f"the workspace differs from the .dvc files ({json.dumps(status)}): "
            "run `dvc pull` (or `dvc checkout`) first; nothing restored"
        )
    if status is None:
        raise ArtifactError(f"dvc status failed: {r.stderr.strip()}")
    hashes = _dvc_hashes(repo, roots)
    if hashes != state["dvc"]:
        stale = [x for x in roots if hashes.get(x) != state["dvc"].get(x)]
        raise ArtifactError(
            f"{STATE} was written for other contents of {', '.join(f'{x}.dvc' for x in stale)}: "
            "commit the state file together with the .dvc files `burnqed artifacts push` wrote"
        )
    times = _times(repo, roots)
    recorded = state["rank"]
    if set(times) != set(recorded):
        extra = sorted(set(times) - set(recorded))[:5]
        lost = sorted(set(recorded) - set(times))[:5]
        raise ArtifactError(
            f"the files under {', '.join(roots)} differ from {STATE}: not recorded {extra}, "
            f"absent {lost}; nothing restored"
        )

    meta = repo / METADATA
    for rec in state["metadata"]:
        f = meta / rec["file"]
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(rec["record"]), encoding="utf-8")

    # Ranks become times STEP_NS apart, ending now and starting after the newest tracked file.
    span = (max(recorded.values(), default=0) + 1) * STEP_NS
    floor = _git_tracked_newest_ns(repo)
    wait = (floor + STEP_NS + span - time.time_ns()) / 1e9
    if wait > MAX_WAIT_S:
        raise ArtifactError(
            f"a git-tracked file is {wait:.0f} s in the future; fix the clock or its time"
        )
    if wait > 0:
        time.sleep(wait)
    end = time.time_ns()
    start = end - span + STEP_NS
    # Files first, then directories deepest first (setting a file's time leaves its directory's).
    for path in sorted(recorded, key=lambda p: (os.path.isdir(repo / p), -p.count("/"))):
        t = start + recorded[path] * STEP_NS
        os.utime(repo / path, ns=(t, t), follow_symlinks=False)
    # A changed tracked input is newer than the artifacts, as after a local edit: Snakemake
    # reruns what was built from it.
    changed = changed_sources(repo, state["metadata"], roots)
    for path in changed:
        if (repo / path).is_file():
            t = max(time.time_ns(), end + STEP_NS)
            os.utime(repo / path, ns=(t, t))
    if changed:
        log.warning(
            "%d input(s) outside %s differ from what the outputs were built from, so Snakemake "
            "reruns the jobs that read them: %s",
            len(changed),
            ", ".join(roots),
            ", ".join(changed[:10]),
        )
    log.info(
        "restored %d paths' times and %d Snakemake records under %s",
        len(recorded),
        len(state["metadata"]),
        ", ".join(roots),
    )
