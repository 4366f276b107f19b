"""Running a registered study and writing its report; the power analysis behind its seed count.

:func:`run` runs each of the registration's seeds in its own working directory —
``snakemake <targets> --directory <out>/seed_<s> --configfile <design.configfiles…> <overlay>
--config seed=<s>``, where the overlay holds ``design.overrides`` — after writing the seed's
``study_run.json`` (the per-rule digests of the checkout that runs it, its git state, when it
started), ``parallel`` seeds at a time, then :func:`report`; :func:`status` says where each seed
stands without reading a result.  :func:`report` reads every ``seed_*`` directory under ``out`` and
writes ``report.json``, ``report.md`` and ``forest.png`` (:mod:`burnqed.study.analysis`).  :func:`power` turns
development seeds' runs of the registered comparisons into the number of seeds the study needs.

A study outlives the machine its seeds ran on: each seed that ends is kept in
``kept/seed_<s>.tar.gz`` beside the registration (:func:`keep_seed`: the files its report reads,
tracked by git, with the interim looks' state), and :func:`run`, :func:`status` and :func:`report`
unpack any kept seed a fresh clone lacks (:func:`restore_kept`).  A finished seed is never run
again; one a session left unfinished starts over in the next (Snakemake resumes it where its
directory survived).

Example::

    burnqed study run studies/learning-d3/registration.yaml --cores 2 --parallel 2
    burnqed study status studies/learning-d3/registration.yaml   # while it runs, from another shell
    burnqed study report studies/learning-d3/registration.yaml
    burnqed study power studies/learning-d3/registration.yaml dev/seed_1 dev/seed_2 dev/seed_3
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
import re
import socket
import statistics
import subprocess
import tarfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from burnqed.config import InputError
from burnqed.eval.ledger import LEDGER, looks_in, now, read_ledger
from burnqed.eval.ledger import add as add_looks
from burnqed.eval.stage import write_json
from burnqed.provenance import git_state
from burnqed.study import registration as registration_file
from burnqed.study import stats
from burnqed.study.analysis import (
    analyse,
    draw_forest,
    file_measures,
    per_seed,
    report_markdown,
    seed_cost,
    stronger_control,
)
from burnqed.study.curves import (
    COMPUTE,
    draw_pool_curves,
    guard_stops,
    pool_curves,
    read_compute_reports,
)

log = logging.getLogger(__name__)

RUN_RECORD = "study_run.json"
OVERLAY = "study_overrides.yaml"
SNAKEMAKE_LOG = "study_snakemake.log"

# Errors by which the design itself stops a seed: a training guard (deterministic: a rerun stops
# again).  Such a seed is *aborted* — recorded, not rerun, and reported as the registration's
# abort rule says (studies/<study>/RUN.md); any other failure is infrastructure and is rerun.
DESIGN_STOPS = ("burnqed.train.joint.JointTrainingError",)
_ERROR_LINE = re.compile(r"^(burnqed(?:\.\w+)+Error): (.+)$", re.M)


def default_out(registration: Path) -> Path:
    """Where the seeds run: ``seeds/`` beside the registration (ignored by git)."""
    return Path(registration).parent / "seeds"


KEPT = "kept"  # beside the registration, tracked by git: each ended seed's report files


def kept_dir(registration: Path) -> Path:
    """Where a study keeps what outlives its machine: ``kept/`` beside the registration."""
    return Path(registration).parent / KEPT


def _registered(registration: Path, root: Path) -> tuple[dict, dict, list[int]]:
    reg = registration_file.load(registration)
    registration_file.refuse_withdrawn(registration)
    if reg.get("protocol", 1) >= 2:
        registration_file.refuse_fixed_seeds(root, reg["design"], registration)
        registration_file.rule_probability(reg, registration)
    rc = registration_file.first_commit(registration, root)
    if rc is None:
        raise InputError(
            f"{registration}: not committed — commit the registration first; its seeds come "
            "from that commit"
        )
    return reg, rc, registration_file.derive_seeds(rc["commit"], reg["analysis"]["seeds"])


def _refuse_other_digests(
    registration: Path, root: Path, design: Mapping[str, Any], rc: Mapping[str, Any]
) -> None:
    """:class:`InputError` when this checkout's digests differ from the registered design's: a
    seed run with other code or config makes the report exploratory (the ``digests`` check), so
    the study stops before its first seed rather than after hours of compute.  (Each seed still
    records the digests it started with: an edit mid-study shows there.)"""
    registered = design["rules"]
    proto = int(registration_file.load(registration).get("protocol", 1))
    here = registration_file.design_digests(root, design, sorted(registered), protocol=proto)
    bad = registration_file.differing_rules(registered, here)
    if proto >= 2:
        env = registration_file.environment(root)["packages"]
        want = (design.get("environment") or {}).get("packages") or {}
        other = sorted(k for k in set(env) | set(want) if env.get(k) != want.get(k))
        if other:
            raise InputError(
                f"{registration}: this machine's pinned packages differ from the registered "
                "design's: " + ", ".join(f"{k} {env.get(k)} (registered {want.get(k)})"
                                        for k in other)
                + ": install with constraints.txt (README) before any seed runs"
            )  # fmt: skip
    if bad:
        raise InputError(
            f"{registration}: this checkout's code or config differs from the registered "
            f"design's for {', '.join(bad)}: run the study from a commit that computes the "
            f"registered digests — its registration's (git checkout {rc['commit'][:12]}) or the "
            "one its seeds ran from (git.commit in their study_run.json) — or register the "
            "changed design (new seeds)"
        )


def _eval_files(reg: Mapping[str, Any]) -> list[str]:
    comps = reg["comparisons"]
    files = {
        f
        for c in [*comps["primary"], *(comps.get("secondary") or [])]
        for f in (c["treatment"], *registration_file.controls(c))
    }
    return sorted(files)


def has_evals(directory: Path, reg: Mapping[str, Any]) -> bool:
    """Whether a seed's directory holds every eval the registration compares (not read)."""
    return all((Path(directory) / f).is_file() for f in _eval_files(reg))


def load_seed(directory: Path, reg: Mapping[str, Any]) -> dict[str, Any]:
    """``{"evals": {path: eval JSON}, "run": study_run.json or None}`` of one seed's directory;
    :class:`InputError` naming a missing or unreadable eval."""
    evals = {}
    for f in _eval_files(reg):
        p = Path(directory) / f
        try:
            evals[f] = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"{p}: not a readable eval JSON ({e})") from None
    return {"evals": evals, "run": _record(directory), "looks": own_looks(directory)}


def own_looks(directory: Path) -> list[dict[str, Any]]:
    """The look records of every eval a seed's directory holds (``results/*/eval*.json``: the
    compared ones and the rest, the baseline's too) — the study's own looks at its benchmark."""
    looks = []
    for p in sorted(Path(directory).glob("results/*/eval*.json")):
        try:
            looks += looks_in(json.loads(p.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"{p}: not a readable eval JSON ({e})") from None
    return looks


def design_stop(log_text: str) -> dict[str, str] | None:
    """The first :data:`DESIGN_STOPS` error a seed's Snakemake log shows (``{"error", "reason"}``),
    or None: the traceback's last line, as Python prints it, in the failed job's output."""
    for m in _ERROR_LINE.finditer(log_text):
        if m.group(1) in DESIGN_STOPS:
            return {"error": m.group(1), "reason": m.group(2).strip()}
    return None


def _design_stop_since(logpath: Path, offset: int) -> dict[str, str] | None:
    """:func:`design_stop` of a seed's Snakemake log from ``offset`` on (one session's output)."""
    if not logpath.is_file():
        return None
    with logpath.open(encoding="utf-8", errors="replace") as f:
        f.seek(offset)
        return design_stop(f.read())


def aborted(record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A seed's abort (``study_run.json``'s ``aborted``: error, reason, when), or None."""
    return (record or {}).get("aborted")


def _record(directory: Path) -> dict[str, Any] | None:
    path = Path(directory) / RUN_RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def seed_directories(out: Path) -> dict[int, Path]:
    found = {}
    for d in sorted(Path(out).glob("seed_*")):
        suffix = d.name.removeprefix("seed_")
        if d.is_dir() and suffix.isdigit():
            found[int(suffix)] = d
    return found


def run(
    registration: Path,
    *,
    root: Path = Path("."),
    out: Path | None = None,
    cores: int = 2,
    parallel: int = 1,
    snakemake_args: Sequence[str] = (),
    ledger: Path = LEDGER,
) -> dict[str, Any]:
    """Run every registered seed (module docstring), ``parallel`` at a time, then write the report;
    returns it.  With ``parallel`` > 1 the seeds' jobs share the cores: each seed's snakemake
    runs with ``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets a policy (a waiting OpenMP
    thread sleeps instead of spinning on a core another seed's job needs; how a thread waits never
    changes how the work is split, so the bytes are the same).  A seed the design stops
    (:data:`DESIGN_STOPS`) is recorded as aborted in its ``study_run.json`` and never rerun; the
    others go on.  After any other failure no new seed starts; the running ones finish, then
    :class:`InputError` names every failed seed."""
    if parallel < 1:
        raise InputError(f"--parallel {parallel}: at least 1")
    root = Path(root)
    reg, rc, seeds = _registered(registration, root)
    out = Path(out) if out is not None else default_out(registration)
    kept = kept_dir(registration)
    restore_kept(out, kept)
    design = reg["design"]
    proto = int(reg.get("protocol", 1))
    if proto >= 2:
        # What decides a number is registered: the cores (a rule's threads are cut to them) and
        # every Snakemake argument but those that only change how a run reports or resumes.
        if cores != design["cores"]:
            raise InputError(f"--cores {cores}: the registration's design.cores is "
                             f"{design['cores']} (a job's threads are cut to the cores)")  # fmt: skip
        extra = registration_file.undeclared_snakemake_args(design, snakemake_args)
        if extra:
            raise InputError(f"--snakemake-arg {' '.join(extra)}: not in the registration's "
                             "design.snakemake_args (an argument that may decide a number is "
                             "registered, or not passed)")  # fmt: skip
        snakemake_args = [*design.get("snakemake_args", []), *snakemake_args]
    _refuse_other_digests(registration, root, design, rc)
    env = None
    if parallel > 1 and "OMP_WAIT_POLICY" not in os.environ:
        env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    stop = threading.Event()

    design_seq = registration_file.sequential_design(reg)
    if design_seq is not None and monitor(reg, design_seq, out)["stopped"]:
        log.info("study %s: stopped at an interim look; no seed runs", reg["study"])
        return report(registration, root=root, out=out, ledger=ledger)

    def one(i: int, s: int) -> str | None:
        """Run seed ``s``; its failure's text, or None."""
        if stop.is_set():
            return None
        try:
            failed = run_seed(i, s)
        except InputError as e:
            stop.set()
            return str(e)
        if failed is None and design_seq is not None:
            with _LEDGER_LOCK:
                state = monitor(reg, design_seq, out, finished=s)
                kept.mkdir(parents=True, exist_ok=True)
                (kept / SEQUENTIAL).write_bytes((out / SEQUENTIAL).read_bytes())
            if state["stopped"]:
                stop.set()  # no new seed starts; those running finish (over-run, reported apart)
        return failed

    def run_seed(i: int, s: int) -> str | None:
        work = (out / f"seed_{s}").resolve()
        work.mkdir(parents=True, exist_ok=True)
        done = _finished(work, reg)
        if done or _abort_recorded(work, s):
            if done:
                log.info("seed %d: finished in an earlier session; not run again", s)
            keep_seed(work, reg, kept)
            return None
        overlay = work / OVERLAY
        overlay.write_text(yaml.safe_dump(dict(design.get("overrides") or {})), encoding="utf-8")
        argv = [
            registration_file.snakemake_command(),
            *design["targets"],
            "--cores",
            str(cores),
            "--directory",
            str(work),
            "--config",
            f"seed={s}",
            *snakemake_args,
            "--configfile",
            *registration_file.configfile_args(root, design, overlay),
        ]
        _unlock_if_stale(work, s, argv, root)
        # The checkout's digests when this seed starts (an edit mid-study shows in its record).
        digests = registration_file.design_digests(
            root, design, sorted(design["rules"]), protocol=proto
        )
        record = _run_record(work, s, registration, rc, digests)
        record["sessions"][-1].update(
            parallel=parallel,
            cores=cores,
            snakemake_args=list(snakemake_args),
            **({"packages": registration_file.environment(root)["packages"]} if proto >= 2 else {}),
        )
        write_json(work / RUN_RECORD, record)
        t0 = time.monotonic()
        log.info("study %s: seed %d (%d of %d) in %s", reg["study"], s, i, len(seeds), work)
        logpath = work / SNAKEMAKE_LOG
        offset = logpath.stat().st_size if logpath.is_file() else 0
        record["sessions"][-1]["log_offset"] = offset
        with logpath.open("a", encoding="utf-8") as logf:
            r = subprocess.run(argv, cwd=root, stdout=logf, stderr=subprocess.STDOUT, env=env)
        record["sessions"][-1].update(
            finished_at=now(), wall_s=round(time.monotonic() - t0, 1), returncode=r.returncode
        )
        stopped = _design_stop_since(logpath, offset) if r.returncode != 0 else None
        if stopped is not None:
            record["aborted"] = {**stopped, "at": now()}
        write_json(work / RUN_RECORD, record)
        if stopped is not None:
            log.warning("seed %d: aborted by the design: %s", s, stopped["reason"])
            failed = _build_fallbacks(reg, work, argv, root, env, logpath)
            _add_looks(root, ledger, work)
            if failed:
                stop.set()
                return f"seed {s}: its fallback evals failed (log: {logpath})"
            keep_seed(work, reg, kept)
            return None
        _add_looks(root, ledger, work)
        if r.returncode != 0:
            stop.set()
            return f"seed {s}: snakemake exited {r.returncode} (log: {logpath})"
        keep_seed(work, reg, kept)
        return None

    with ThreadPoolExecutor(max_workers=parallel) as pool:
        failed = [f for f in pool.map(one, range(1, len(seeds) + 1), seeds) if f]
    if failed:
        raise InputError("; ".join(failed))
    return report(registration, root=root, out=out, ledger=ledger)


SEQUENTIAL = "sequential.json"  # in the seeds' directory: finish order and interim decisions


def sequential_state(out: Path) -> dict[str, Any]:
    """The interim looks so far: ``order`` (seeds in the order they finished — look j analyses
    the first ``count`` of them), ``looks`` (each look's count, its seeds and per primary only
    the decision), ``stopped`` (the look that stopped the study, or None)."""
    path = Path(out) / SEQUENTIAL
    if not path.is_file():
        return {"order": [], "looks": [], "stopped": None}
    return json.loads(path.read_text(encoding="utf-8"))


def seed_differences(reg: Mapping[str, Any], work: Path, seed: int) -> dict[str, float | None]:
    """Per primary, a finished or stopped seed's paired difference (a stopped one at its
    registered fallback; None without one)."""
    from burnqed.study.analysis import fallback_row, per_seed

    rec = _record(work)
    out: dict[str, float | None] = {}
    if aborted(rec) is None:
        evals = load_seed(work, reg)["evals"]
        for c in reg["comparisons"]["primary"]:
            out[c["name"]] = per_seed(c, evals, seed)["difference"]
        return out
    evals = _stopped_evals(work, reg, None)
    for c in reg["comparisons"]["primary"]:
        fb = registration_file.fallback_of(c)
        row = fallback_row(c, fb, {"evals": evals}, seed, None) if fb else None
        out[c["name"]] = row["difference"] if row else None
    return out


def monitor(reg, design, out: Path, *, finished: int | None = None) -> dict[str, Any]:
    """Record that ``finished`` has finished (or stopped) and, when the finished count reaches the
    next planned interim look, analyse it: per primary still open, only the decision
    (:func:`burnqed.study.sequential.interim_decision`: stop for efficacy, for futility, or go
    on); the study stops when every primary has stopped.  Nothing else is computed or written: an
    interim look shows no estimate.  Returns the state (:func:`sequential_state`)."""
    from burnqed.study.sequential import GO_ON, interim_decision

    state = sequential_state(out)
    if finished is not None and finished not in state["order"]:
        state["order"].append(finished)
    n = len(state["order"])
    done = {x["count"] for x in state["looks"]}
    interim = [k for k in design.looks[:-1] if k <= n and k not in done]
    if interim and state["stopped"] is None and n < design.total:
        closed = {name for x in state["looks"] for name, d in x["decisions"].items() if d != GO_ON}
        diffs = {c["name"]: [] for c in reg["comparisons"]["primary"]}
        for sd in state["order"]:
            got = seed_differences(reg, Path(out) / f"seed_{sd}", sd)
            for name in diffs:
                diffs[name].append(got[name] if got[name] is not None else 0.0)
        counts = [*sorted(done), n]
        decisions = {name: interim_decision(d, counts, design)
                     for name, d in diffs.items() if name not in closed}  # fmt: skip
        state["looks"].append({"count": n, "seeds": list(state["order"]), "at": now(),
                               "decisions": decisions})  # fmt: skip
        log.info("interim look at %d seeds: %s", n,
                 "; ".join(f"{k}: {v}" for k, v in decisions.items()))  # fmt: skip
        if all(d != GO_ON for d in decisions.values()):
            state["stopped"] = {"look": len(state["looks"]), "count": n, "at": now()}
    write_json(Path(out) / SEQUENTIAL, state)
    return state


def fallback_files(reg: Mapping[str, Any]) -> list[str]:
    """The eval files the primaries' registered fallbacks read for a stopped seed: each fallback
    file and the side it keeps (none for ``difference: 0``, none without a fallback)."""
    files: set[str] = set()
    for c in reg["comparisons"]["primary"]:
        fb = registration_file.fallback_of(c)
        if fb is None or "difference" in fb:
            continue
        files.add(fb.get("treatment", c["treatment"]))
        files.update([fb["control"]] if "control" in fb else registration_file.controls(c))
    return sorted(files)


def _build_fallbacks(
    reg: Mapping[str, Any], work: Path, argv: Sequence[str], root: Path, env, logpath: Path
) -> bool:
    """After a design stop, build what the fallbacks read (iteration 0's evals, say, which
    Snakemake may not have reached when the training stopped); True when that failed."""
    needed = [f for f in fallback_files(reg) if not (work / f).is_file()]
    if not needed:
        return False
    targets = set(reg["design"]["targets"])
    cmd = [argv[0], *needed, *(a for a in argv[1:] if a not in targets)]
    log.info("seed %s: building its fallback evals %s", work.name, ", ".join(needed))
    with logpath.open("a", encoding="utf-8") as logf:
        r = subprocess.run(cmd, cwd=root, stdout=logf, stderr=subprocess.STDOUT, env=env)
    return r.returncode != 0


_LEDGER_LOCK = threading.Lock()


def _add_looks(root: Path, ledger: Path, work: Path) -> None:
    """The seed's looks into the tracked ledger (the study records its own looks; the merge is
    idempotent, so a rerun adds nothing twice)."""
    files = sorted(work.glob("results/*/eval*.json"))
    if files:
        with _LEDGER_LOCK:  # seeds run side by side: one read-merge-write at a time
            add_looks(Path(root) / ledger, files)


def kept_files(work: Path, reg: Mapping[str, Any]) -> list[Path]:
    """What an ended seed's report, status and interim looks read from its directory: its
    ``study_run.json`` and overlay, every eval it holds (the compared ones, the fallbacks', the
    rest: each is a look), ``results/compute.json`` and the pool curves beside it."""
    names = {RUN_RECORD, OVERLAY, COMPUTE, *_eval_files(reg), *fallback_files(reg)}
    found = {work / n for n in names if (work / n).is_file()}
    found.update(work.glob("results/*/eval*.json"))
    found.update(work.glob("results/compute/*.json"))
    return sorted(found)


def keep_seed(work: Path, reg: Mapping[str, Any], kept: Path) -> Path:
    """Write ``kept/seed_<s>.tar.gz``: :func:`kept_files` of an ended seed (finished, or aborted
    with its fallbacks built), so the study outlives the machine its seeds ran on — a study's
    seeds take longer than a machine is kept, and ``seeds/`` (models, searches, caches: gigabytes)
    is not tracked.  The archive's bytes follow from the files alone (sorted members, their own
    modification times, no owner, gzip without a timestamp): keeping a seed twice changes
    nothing git sees."""
    kept.mkdir(parents=True, exist_ok=True)
    dest = kept / f"{work.name}.tar.gz"
    tmp = dest.with_name(dest.name + ".tmp")
    with (
        tmp.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for f in kept_files(work, reg):
            info = tar.gettarinfo(str(f), arcname=f.relative_to(work).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o644
            with f.open("rb") as fh:
                tar.addfile(info, fh)
    tmp.replace(dest)
    return dest


def restore_kept(out: Path, kept: Path) -> list[int]:
    """Unpack each kept seed (:func:`keep_seed`) whose directory under ``out`` has no
    ``study_run.json`` — a new machine, a fresh clone — and the interim looks' state; never
    overwrites a seed directory that has its record.  Returns the seeds restored."""
    restored = []
    for arch in sorted(Path(kept).glob("seed_*.tar.gz")):
        name = arch.name.removesuffix(".tar.gz")
        work = Path(out) / name
        if (work / RUN_RECORD).is_file() or not name.removeprefix("seed_").isdigit():
            continue
        work.mkdir(parents=True, exist_ok=True)
        try:
            with tarfile.open(arch, "r:gz") as tar:
                tar.extractall(work, filter="data")
        except (OSError, tarfile.TarError) as e:
            raise InputError(f"{arch}: not a readable kept seed ({e})") from None
        restored.append(int(name.removeprefix("seed_")))
    seq = Path(kept) / SEQUENTIAL
    if seq.is_file() and not (Path(out) / SEQUENTIAL).is_file():
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / SEQUENTIAL).write_bytes(seq.read_bytes())
    if restored:
        log.info("restored %d kept seed(s) from %s: %s", len(restored), kept,
                 ", ".join(map(str, restored)))  # fmt: skip
    return restored


def _finished(work: Path, reg: Mapping[str, Any]) -> bool:
    """Whether a seed has ended well: its last session finished with exit status 0 and every
    compared eval is there (a kept seed's models are gone: it is never run again)."""
    last = ((_record(work) or {}).get("sessions") or [{}])[-1]
    return last.get("returncode") == 0 and has_evals(work, reg)


def status(registration: Path, *, root: Path = Path("."), out: Path | None = None) -> dict:
    """Where a study stands, from its seeds' ``study_run.json`` and which compared evals exist —
    never their contents (a running study stays unread): per registered seed its state
    (``finished``, ``aborted``, ``running``, ``stopped``, ``failed``, ``not started``; ``unfinished`` for an
    unended session whose process cannot be checked from here, :func:`_unended`), sessions and cost
    (:func:`burnqed.study.analysis.seed_cost`); the median cost of a finished seed and what the
    seeds left would take at it."""
    root = Path(root)
    reg, _, seeds = _registered(registration, root)
    out = Path(out) if out is not None else default_out(registration)
    restore_kept(out, kept_dir(registration))
    rows = []
    for s in seeds:
        work = out / f"seed_{s}"
        rec = _record(work)
        sessions = (rec or {}).get("sessions") or []
        last = sessions[-1] if sessions else {}
        if rec is None:
            state = "not started"
        elif aborted(rec) is not None:
            state = "aborted"
        elif "finished_at" not in last:
            state = {"running": "running", "gone": "stopped"}.get(_unended(last), "unfinished")
        elif last.get("returncode") != 0:
            state = "failed"
        else:
            state = "finished" if has_evals(work, reg) else "stopped"
        row = {"seed": s, "state": state, "sessions": len(sessions), "cost_s": seed_cost(rec)}
        if state == "aborted":
            row["aborted"] = aborted(rec)["reason"]
        rows.append(row)
    done = [r["cost_s"] for r in rows if r["state"] == "finished" and r["cost_s"] is not None]
    median = statistics.median(done) if done else None
    left = sum(r["state"] not in ("finished", "aborted") for r in rows)
    return {
        "study": reg["study"],
        "seeds": rows,
        "finished": sum(r["state"] == "finished" for r in rows),
        "aborted": sum(r["state"] == "aborted" for r in rows),
        "registered": len(seeds),
        "median_seed_s": median,
        "left_s": None if median is None else left * median,
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _unended(last: Mapping[str, Any]) -> str:
    """Of a session with no end recorded: ``running`` (its process lives, on this host), ``gone``
    (it does not), ``elsewhere`` (it ran on another host: not checkable from here) or ``unknown``
    (it recorded no process: a session from before pids were kept)."""
    host, pid = last.get("host"), last.get("pid")
    if host is not None and host != socket.gethostname():
        return "elsewhere"
    if pid is None:
        return "unknown"
    return "running" if _alive(pid) else "gone"


def _unlock_if_stale(work: Path, seed: int, argv: Sequence[str], root: Path) -> None:
    """Before a seed's session: when its last session never finished (killed: the machine went,
    the command was stopped) its Snakemake left a lock, and the next run would refuse the
    directory.  The lock is released (``snakemake --unlock``, Snakemake's own way) when that
    session's process is gone; :class:`InputError` when it still runs on this host, or ran on
    another (it cannot be checked from here)."""
    path = work / RUN_RECORD
    locks = work / ".snakemake" / "locks"
    if not path.is_file() or not (locks.is_dir() and any(locks.iterdir())):
        return
    last = (json.loads(path.read_text(encoding="utf-8")).get("sessions") or [{}])[-1]
    if "finished_at" in last:
        return
    state = _unended(last)
    if state == "running" and last["pid"] == os.getpid():
        state = "gone"  # this process ended that session itself (a second `run` in one process)
    if state == "elsewhere":
        raise InputError(
            f"seed {seed}: its last session ran on {last['host']} and did not finish; if it is "
            f"not running there, remove {locks} and run again"
        )
    if state == "running":
        raise InputError(
            f"seed {seed}: `burnqed study run` (pid {last['pid']}) is still running it; stop it "
            "or wait"
        )
    log.info("seed %d: its last session ended unfinished; releasing its Snakemake lock", seed)
    r = subprocess.run([*argv, "--unlock"], cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        raise InputError(f"seed {seed}: snakemake --unlock failed: {r.stderr.strip()[-500:]}")


def _abort_recorded(work: Path, seed: int) -> bool:
    """Whether the seed is aborted (:func:`aborted`), so not run again.  A seed whose last session
    failed on a design stop before the runner recorded aborts (its log shows it; sessions without a
    ``log_offset`` read the whole log) is recorded as aborted now, dated by that session's end."""
    record = _record(work)
    if record is None:
        return False
    if aborted(record) is None:
        last = (record.get("sessions") or [{}])[-1]
        if last.get("returncode") in (None, 0):
            return False
        stopped = _design_stop_since(work / SNAKEMAKE_LOG, last.get("log_offset", 0))
        if stopped is None:
            return False
        record["aborted"] = {**stopped, "at": last.get("finished_at")}
        write_json(work / RUN_RECORD, record)
    log.warning("seed %d: aborted by the design (%s); not run again", seed,
                record["aborted"]["reason"])  # fmt: skip
    return True


def _run_record(
    work: Path, seed: int, registration: Path, rc: Mapping[str, Any], rules: Mapping[str, Any]
) -> dict[str, Any]:
    """The seed's ``study_run.json`` for one more session of ``burnqed study run``: the first
    session's start stays ``started_at``, ``rules`` and ``git`` are this session's, and
    ``sessions`` lists every session — its digests, start, end, wall time and Snakemake's exit
    status — so a seed finished across sessions keeps what each ran and what it cost."""
    old = _record(work) or {}
    session = {
        "rules": dict(rules),
        "git": git_state(),
        "started_at": now(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }
    earlier = old.get("sessions")
    if earlier is None and old:  # a record from before sessions: its run, untimed
        earlier = [{k: old[k] for k in ("rules", "git", "started_at") if k in old}]
    return {
        "seed": seed,
        "registration": str(registration),
        "registration_commit": rc["commit"],
        "rules": dict(rules),
        "git": session["git"],
        "started_at": old.get("started_at") or session["started_at"],
        "sessions": [*(earlier or []), session],
    }


UNBLINDINGS = "unblindings.jsonl"  # beside the registration: every read of interim figures


def unblindings(registration: Path) -> list[dict[str, Any]]:
    """The recorded reads of the study's interim figures (``--unblind``), oldest first."""
    path = Path(registration).parent / UNBLINDINGS
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _stopped_evals(directory: Path, reg: Mapping[str, Any], post_hoc) -> dict[str, Any]:
    """The evals a stopped seed holds that a fallback (registered or post hoc) reads."""
    files = set(fallback_files(reg))
    for c in reg["comparisons"]["primary"]:
        fb = (post_hoc or {}).get(c["name"])
        if fb and "difference" not in fb:
            files.add(fb.get("treatment", c["treatment"]))
            files.update([fb["control"]] if "control" in fb else registration_file.controls(c))
    out = {}
    for f in sorted(files):
        p = Path(directory) / f
        if p.is_file():
            out[f] = json.loads(p.read_text(encoding="utf-8"))
    return out


def read_post_hoc(path: Path | None, reg: Mapping[str, Any]) -> dict[str, dict] | None:
    """A post-hoc fallback file (``{primary name: fallback}``, as a registration's ``fallback``),
    checked; None without one.  Its figures are reported beside the registered ones, labelled
    post hoc, and decide nothing."""
    if path is None:
        return None
    raw = registration_file.read_yaml_file(Path(path))
    names = {c["name"] for c in reg["comparisons"]["primary"]}
    fallbacks = raw.get("fallbacks") if isinstance(raw, Mapping) else None
    if not isinstance(fallbacks, Mapping) or not fallbacks:
        raise InputError(f"{path}: fallbacks: a mapping {{primary name: fallback}}")
    for name, fb in fallbacks.items():
        if name not in names:
            raise InputError(f"{path}: fallbacks: {name!r} is not a primary comparison")
        registration_file.check_fallback(Path(path), f"fallbacks[{name!r}]", fb)
    return {k: dict(v) for k, v in fallbacks.items()}


def report(
    registration: Path,
    *,
    root: Path = Path("."),
    out: Path | None = None,
    report_dir: Path | None = None,
    ledger: Path = LEDGER,
    unblind: bool = False,
    post_hoc: Path | None = None,
) -> dict[str, Any]:
    """Write ``report.json``, ``report.md`` and ``forest.png`` (beside the registration unless
    ``report_dir``) from the seed directories under ``out``; returns the report.  An unfinished
    study's figures are written only with ``unblind``, which is recorded (:data:`UNBLINDINGS`)
    and fails the final report's "blind until the end" check: the registered way to look early
    is ``analysis.sequential``, whose interim analyses show only stop or go on."""
    root = Path(root)
    reg = registration_file.load(registration)
    registration_file.refuse_withdrawn(registration)
    rc = registration_file.first_commit(registration, root)
    derived = registration_file.derive_seeds(rc["commit"], reg["analysis"]["seeds"]) if rc else []
    out = Path(out) if out is not None else default_out(registration)
    restore_kept(out, kept_dir(registration))
    fallbacks = read_post_hoc(post_hoc, reg)
    dirs = seed_directories(out)
    if not dirs:
        raise InputError(f"{out}: no seed_<s> directory (run `burnqed study run` first)")
    # A registered seed whose directory lacks a compared eval is still running (or stopped): the
    # report is partial without it.  Any other seed directory must be whole.
    records = {s: _record(d) for s, d in dirs.items()}
    stopped = {
        s: {"abort": aborted(records[s]), "run": records[s], "looks": own_looks(d),
            "evals": _stopped_evals(d, reg, fallbacks)}
        for s, d in dirs.items()
        if aborted(records[s]) is not None
    }  # fmt: skip
    unfinished = [
        s for s, d in dirs.items() if s in derived and s not in stopped and not has_evals(d, reg)
    ]
    seeds = {
        s: load_seed(d, reg) for s, d in dirs.items() if s not in unfinished and s not in stopped
    }
    if not seeds:
        raise InputError(f"{out}: no seed has finished yet (unfinished: {unfinished})")
    design_seq = registration_file.sequential_design(reg)
    state = sequential_state(out) if design_seq is not None else None
    done = len((set(seeds) | set(stopped)) & set(derived))
    ended = state is not None and state["stopped"] is not None
    if done < len(derived) and not ended:
        if not unblind:
            raise InputError(
                f"{registration}: {done} of {len(derived)} registered seeds have finished: an "
                "unfinished study's figures are read only with --unblind, which is recorded in "
                f"{Path(registration).parent / UNBLINDINGS} and fails the final report's "
                "'blind until the end' check (`burnqed study status` says where it stands "
                "without reading a result)"
            )
        record = {"at": now(), "seeds": done, "registered": len(derived), "host": socket.gethostname(),
                  "git": git_state()}  # fmt: skip
        with (Path(registration).parent / UNBLINDINGS).open("a", encoding="utf-8") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        log.warning("study %s: interim figures unblinded at %d of %d seeds (recorded)",
                    reg["study"], done, len(derived))  # fmt: skip
    report_dir = Path(report_dir) if report_dir is not None else Path(registration).parent
    earlier = report_dir / "report.json"
    first = None
    if earlier.is_file():
        old = json.loads(earlier.read_text(encoding="utf-8"))
        if not old.get("partial"):
            committed = registration_file.first_commit(earlier, root)
            first = old.get("first_written_at") or (committed or {}).get("date")
    first = first or (now() if done >= len(derived) or ended else None)
    r = analyse(
        reg,
        seeds,
        derived_seeds=derived,
        registration_commit=rc,
        ledger=read_ledger(Path(root) / ledger),
        ledger_path=str(ledger),
        unfinished=unfinished,
        aborted=stopped,
        post_hoc=fallbacks,
        unblindings=unblindings(registration),
        first_written_at=first,
        sequential=state,
    )
    if compares_pool_curves(reg):
        docs = read_compute_reports({s: dirs[s] for s in seeds})
        r["pool_curves"] = {str(s): c for s, c in pool_curves(docs).items()}
        r["stopped_trainings"] = {str(s): x for s, x in guard_stops(docs).items()}
    write_json(report_dir / "report.json", r)
    (report_dir / "report.md").write_text(report_markdown(r), encoding="utf-8")
    draw_pictures(r, report_dir)
    log.info(
        "study %s: %s, decision %s → %s",
        reg["study"],
        r["label"],
        r["decision"]["verdict"],
        report_dir / "report.md",
    )
    return r


def _look_label(file: str) -> str:
    """The label an eval file's look carries (the eval stage's: its directory's name, ``search
    ×2`` for the search-longer control); :class:`InputError` for a file of another label."""
    path = Path(file)
    if path.name == "eval.json":
        return path.parent.name
    if path.name == "eval_longer.json":
        return f"{path.parent.name} search ×2"
    raise InputError(f"{file}: a post-hoc fallback from the ledger reads eval.json or "
                     "eval_longer.json only (their looks' labels are known)")  # fmt: skip


def ledger_fallback_row(
    c: Mapping[str, Any],
    fb: Mapping[str, Any],
    seed: int,
    looks: Sequence[Mapping[str, Any]],
    theorems: int,
) -> dict[str, Any]:
    """A stopped seed's row of comparison ``c`` under a post-hoc fallback, from the ledger's
    looks when its directory is gone: d = (solved by the treatment − solved by the control) / n,
    which is (gained − lost) / n when both evals are complete on the same n theorems (checked);
    the discordant counts themselves are unknown."""
    from burnqed.study.analysis import _budget

    budget = _budget(c)
    at = budget if isinstance(budget, tuple) else (budget, budget)
    if "difference" in fb:
        return {"seed": seed, "gained": None, "lost": None, "theorems": theorems,
                "difference": 0.0, "p_value": None, "verdict": "fallback: d = 0",
                "reasons": [], "budget": list(at), "control": None,
                "fallback": "difference 0"}  # fmt: skip
    solved = {}
    files = {"treatment": fb.get("treatment", c["treatment"]),
             "control": fb.get("control", c["control"])}  # fmt: skip
    for side, budget_at in (("control", at[0]), ("treatment", at[1])):
        f = files[side]
        if not isinstance(f, str):
            raise InputError(f"{c['name']}: a post-hoc fallback needs one control file")
        label = _look_label(f)
        found = [r for r in looks if r.get("seed") == seed and r.get("label") == label]
        if len(found) != 1:
            raise InputError(f"seed {seed}: {len(found)} looks labelled {label!r} in the ledger "
                             f"for {f} (need one)")  # fmt: skip
        n = found[0]["counts"]
        if not (n.get("complete") and n.get("evaluated") == n.get("expected") == theorems
                and n.get("budget") == budget_at):  # fmt: skip
            raise InputError(f"seed {seed}: the ledger's look at {f} is not a complete eval of "
                             f"{theorems} theorems at budget {budget_at}: {n}")  # fmt: skip
        solved[side] = n["solved"]
    return {"seed": seed, "gained": None, "lost": None, "theorems": theorems,
            "difference": (solved["treatment"] - solved["control"]) / theorems,
            "p_value": None, "verdict": "from the ledger's counts", "reasons": [],
            "budget": list(at), "control": files["control"], "fallback": files["treatment"],
            "solved": solved}  # fmt: skip


def reanalyse(
    registration: Path,
    *,
    root: Path = Path("."),
    ledger: Path = LEDGER,
    post_hoc: Path | None = None,
    report_dir: Path | None = None,
) -> dict[str, Any]:
    """Analyse a committed report's per-seed figures again with today's code, when its seeds'
    directories are gone: the registered figures recompute from the per-seed paired counts (their
    sufficient statistics), the checks stay as the report recorded them from the directories,
    and what today's protocol adds is said — the real sign-test p, the realised power, the checks
    the registration's protocol never recorded, a post-hoc fallback (``post_hoc``) whose rows come
    from the ledger's looks (:func:`ledger_fallback_row`)."""
    root = Path(root)
    reg = registration_file.load(registration)
    rc = registration_file.first_commit(registration, root)
    derived = registration_file.derive_seeds(rc["commit"], reg["analysis"]["seeds"]) if rc else []
    report_dir = Path(report_dir) if report_dir is not None else Path(registration).parent
    path = report_dir / "report.json"
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: no committed report to reanalyse ({e})") from None
    fallbacks = read_post_hoc(post_hoc, reg)
    looks = read_ledger(root / ledger)
    fb_rows = {}
    for c in reg["comparisons"]["primary"]:
        fb = (fallbacks or {}).get(c["name"])
        if fb is None or not old.get("aborted"):
            continue
        rows = next(x["per_seed"] for x in old["comparisons"] if x["name"] == c["name"])
        n = statistics.mode([r["theorems"] for r in rows])
        fb_rows[c["name"]] = [ledger_fallback_row(c, fb, x["seed"], looks, n)
                              for x in old["aborted"]]  # fmt: skip
    seeds = {s: {"evals": {}, "run": None, "looks": []} for s in old["seeds"]}
    stopped = {x["seed"]: {"abort": x, "run": None, "looks": []} for x in old.get("aborted") or []}
    committed = registration_file.first_commit(path, root)
    recorded = {
        "comparisons": old["comparisons"],
        "checks": old["checks"],
        "looks_per_seed": (old.get("looks") or {}).get("per_seed"),
        "cost": old.get("cost"),
        "seeds": old["seeds"],
        "fallback_rows": fb_rows,
        "reanalysed": {
            "from": str(path),
            "first_committed": committed,
            "note": "the per-seed figures and checks as the report recorded them from the seeds' "
            "directories; the pooled figures recomputed from them",
        },
    }
    r = analyse(
        reg,
        seeds,
        derived_seeds=derived,
        registration_commit=rc,
        ledger=looks,
        ledger_path=str(ledger),
        aborted=stopped,
        post_hoc=fallbacks,
        first_written_at=old.get("first_written_at") or (committed or {}).get("date"),
        recorded=recorded,
    )
    if old.get("pool_curves"):
        r["pool_curves"] = old["pool_curves"]
    write_json(path, r)
    (report_dir / "report.md").write_text(report_markdown(r), encoding="utf-8")
    draw_pictures(r, report_dir)
    return r


def compares_pool_curves(reg: Mapping[str, Any]) -> bool:
    """Whether any registered comparison compares pool curves (Polu's comparison)."""
    return any(registration_file.POOL_CURVE in m for m in file_measures(reg).values())


def draw_pictures(r: Mapping[str, Any], report_dir: Path) -> None:
    """``forest.png``, and ``curves.png`` when the report holds pool curves."""
    draw_forest(r, report_dir / "forest.png")
    if r.get("pool_curves"):
        curves = {int(s): c for s, c in r["pool_curves"].items()}
        draw_pool_curves(curves, report_dir / "curves.png", title=f"Study {r['study']}")


def power(
    registration: Path,
    development: Sequence[Path],
    *,
    target: float = 0.8,
    at_seeds: int | None = None,
    previous: Path | None = None,
) -> dict[str, Any]:
    """Per primary comparison of the registration (a draft: no digests needed), its per-seed
    differences on the development runs (each directory one seed's run, holding the compared
    evals), their mean and standard deviation, and the seeds a one-sample t-test at α/m needs for
    ``target`` power (:func:`burnqed.study.stats.seeds_needed`; None for a mean at or below 0),
    planned with the larger of that standard deviation and the one a seed's benchmark sampling
    alone gives (the mean McNemar variance, :func:`burnqed.study.stats.within_variance`): a few
    seeds can agree by chance more closely than their benchmarks allow.
    At the study's count — ``at_seeds``, else the largest needed — each comparison's power
    (0 for a mean at or below 0: it cannot be confirmed) and the chance that every seed's
    difference is positive (:func:`burnqed.study.stats.every_seed_positive`)."""
    reg = registration_file.load(registration, need_rules=False)
    alpha, primary = float(reg["analysis"]["alpha"]), reg["comparisons"]["primary"]
    if len(development) < 2:
        raise InputError(
            "at least two development seeds' runs: the spread between seeds is the point"
        )
    runs = [load_seed(Path(d), reg) for d in development]
    earlier: dict[str, float] = {}
    if previous is not None:
        try:
            old = json.loads(Path(previous).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"{previous}: not a study report ({e})") from None
        for c in old.get("comparisons") or []:
            d = [
                r["difference"] for r in c.get("per_seed") or [] if r.get("difference") is not None
            ]
            if len(d) >= 2:
                earlier[c["name"]] = statistics.stdev(d)
    out = []
    for c in primary:
        rows = []
        for d, r in zip(development, runs, strict=True):
            seed = ((r["evals"][c["treatment"]].get("provenance") or {}).get("seeds") or {}).get(
                "seed"
            )
            rows.append({**per_seed(c, r["evals"], seed), "directory": str(d)})
        ok = [x for x in rows if x["difference"] is not None]
        diffs = [x["difference"] for x in ok]
        mean = sum(diffs) / len(diffs)
        sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (len(diffs) - 1))
        # A seed's d carries its benchmark's sampling at least (McNemar's variance over its
        # theorems): a spread between a few seeds below it is chance, and planning on it would
        # promise power the study does not have.
        within = stats.mean_within_variance(ok)
        # A spread from a few seeds is itself uncertain (3 seeds: 2 df): plan on its upper 80 %
        # bound, or on what a previous study of the comparison realised if that is larger.
        upper = stats.sd_upper_bound(sd, len(diffs)) if len(diffs) >= 2 else sd
        realised = earlier.get(c["name"])
        planned = max(upper, math.sqrt(within), realised or 0.0)
        out.append(
            {
                "name": c["name"],
                "per_seed": rows,
                "mean": mean,
                "sd": sd,
                "within_sd": math.sqrt(within),
                "sd_upper_80": upper,
                "previous_sd": realised,
                "sd_planned": planned,
                "seeds_needed": stats.seeds_needed(
                    mean, planned, alpha=alpha, comparisons=len(primary), power=target
                ),
            }
        )
    needed = [x["seeds_needed"] for x in out]
    k = at_seeds if at_seeds is not None else (None if None in needed else max(needed))
    if k is not None:
        for x in out:
            x["at_seeds"] = {
                "seeds": k,
                "power": stats.t_test_power(x["mean"], x["sd_planned"], k, alpha / len(primary))
                if x["mean"] > 0
                else 0.0,
                "every_seed_positive": stats.every_seed_positive(x["mean"], x["sd_planned"], k),
            }
    return {
        "method": f"two-sided one-sample t-test at α/m = {alpha:g}/{len(primary)} (Holm's worst "
        f"case), {100 * target:g} % power, per-seed differences normal with the development seeds' "
        "mean and the largest of their standard deviation's upper 80 % bound, the benchmark "
        "sampling's and the one a previous study of the comparison realised",
        "development": [str(d) for d in development],
        "alpha": alpha,
        "power": target,
        "comparisons": out,
        "seeds": None if None in needed else max(needed),
        "at_seeds": k,
    }


def variance(registration: Path, runs: Sequence[Path]) -> dict[str, Any]:
    """Per comparison of the registration (primary and secondary; a draft: no digests needed), the
    decomposition of its per-run differences over the development ``runs`` — each directory one
    run holding the compared evals; runs whose compared evals share their models and benchmark (by
    digest) are one seed's, their evals differing only in their search seed
    (:func:`burnqed.study.variance.decompose`)."""
    from burnqed.study.variance import decompose

    reg = registration_file.load(registration, need_rules=False)
    loaded = [load_seed(Path(d), reg) for d in runs]
    comps = reg["comparisons"]
    out = []
    for c in [*comps["primary"], *(comps.get("secondary") or [])]:
        rows = []
        for d, r in zip(runs, loaded, strict=True):
            treat, control = r["evals"][c["treatment"]], r["evals"][stronger_control(c, r["evals"])]
            search = ((treat.get("provenance") or {}).get("seeds") or {}).get("seed")
            rows.append({**per_seed(c, r["evals"], search), "seed": _trained(treat, control),
                         "search_seed": search, "directory": str(d)})  # fmt: skip
        out.append({"name": c["name"], "runs": rows, "decomposition": decompose(rows)})
    return {"runs": [str(d) for d in runs], "comparisons": out}


def _trained(*evals: Mapping[str, Any]) -> str:
    """What a run's evals were trained and drawn from: their models' and value models' digests and
    the benchmark's (equal for two runs that differ only in the evals' search seed)."""
    parts = []
    for e in evals:
        prov = e.get("provenance") or {}
        parts += [str((prov.get("model") or {}).get("sha256")),
                  str((prov.get("ebm") or {}).get("sha256")),
                  str((e.get("benchmark") or {}).get("sha256"))]  # fmt: skip
    return "/".join(parts)
