"""Where a run's wall time went: its jobs, the cores' busy fraction and the DAG's critical path.

Snakemake leaves two things behind that say it: a ``benchmark:`` file per job
(``logs/benchmarks/<stage>/<job>.tsv``: wall seconds ``s``, ``cpu_time``, …; :mod:`burnqed.eval.memory`
reads the same files) and a record per output file in ``.snakemake/metadata/`` (the rule, its
input files, the log, the job's start and end times).  From the records come the jobs and the
DAG — a job depends on the jobs whose outputs it names as inputs — and each job's duration is its
benchmark file's ``s`` (found beside its log by the project's convention: ``logs/<stage>/<job>.log``
↔ ``logs/benchmarks/<stage>/<job>.tsv``), else its record's end minus start.  The figures:

- ``wall_s``: first start to last end; ``job_seconds``: the sum of the jobs' durations;
  ``cpu_seconds``: the sum of the benchmark files' ``cpu_time`` (the job's process tree);
- ``busy_cores``: job-seconds per second of wall (1.48 means 1.48 jobs ran on average);
  ``busy_fraction``: that over ``cores``; ``cpu_fraction``: CPU seconds over ``cores`` × wall;
- ``packed_s``: ``job_seconds / cores`` — the wall time if the same jobs filled every core all the
  time; ``critical_path_s``: the longest chain of durations through the DAG — the wall time with
  unlimited cores; ``lower_bound_s``: the larger of the two, what no schedule of these jobs beats
  on ``cores`` cores, and ``schedule_efficiency``: it over ``wall_s``;
- ``critical_path``: the jobs of that chain, first to last;
- ``reserved_core_seconds``: the jobs' durations times the threads Snakemake gave each (a
  two-thread job holds both cores of a 2-core machine however much of them it uses), and
  ``replay_s``: the run replayed (:func:`replay`) — its jobs, their durations, threads and
  priorities, scheduled the way Snakemake schedules them; near ``wall_s`` it says the replay is a
  model of this run's schedule, and it is what the *what-ifs* are compared with.  Both need the
  threads and priorities Snakemake logged for every job (``.snakemake/log/``), else they are None.

**What-ifs** (``what_if``, ``burnqed timing --what-if``): the same replay with some jobs given
other threads or durations — e.g. iteration 1's two trainings at one thread each and 1.26 times
longer — prints ``what_if_s``, ``what_if_reserved_core_seconds`` and ``what_if_ratio`` (over
``replay_s``): what a change of thread counts or job costs would do to the wall time, before a run
is spent on it.  An estimate: the replayed jobs keep their measured durations, so two jobs side by
side are assumed not to slow each other.

With ``targets``, only the jobs that built those files count: what a run of just those targets
costs (a study seed's evals out of the whole demo: ``burnqed timing --targets …``).

Only as good as the files: a record left by an earlier run of a job that did not rerun still
counts with its old times (run from a clean directory for a clean figure), and the jobs' own
wall times are as busy as the machine was.

Example::

    >>> import json, base64, os, tempfile, pathlib
    >>> run = pathlib.Path(tempfile.mkdtemp())
    >>> def job(rule, out, inputs, start, end):
    ...     name = base64.b64encode(out.encode()).decode()
    ...     meta = run / ".snakemake" / "metadata"
    ...     meta.mkdir(parents=True, exist_ok=True)
    ...     rec = {"rule": rule, "input": inputs, "log": [f"logs/{rule}.log"],
    ...            "starttime": start, "endtime": end, "job_hash": hash(rule)}
    ...     _ = (meta / name).write_text(json.dumps(rec))
    >>> job("a", "x", [], 0, 10); job("b", "y", ["x"], 10, 30); job("c", "z", [], 0, 5)
    >>> t = run_timing(run, cores=2)
    >>> t["wall_s"], t["job_seconds"], t["critical_path_s"], t["critical_path"]
    (30.0, 35.0, 30.0, ['a (x)', 'b (y)'])
    >>> run_timing(run, cores=2, targets=["z"])["job_seconds"]
    5.0
"""

from __future__ import annotations

import base64
import csv
import json
import logging
import re
from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

METADATA = Path(".snakemake/metadata")
BENCHMARKS = Path("logs/benchmarks")
SNAKEMAKE_LOGS = Path(".snakemake/log")
_RULE_LINE = re.compile(r"^(?:local)?rule (\S+):$")
_FIELD_LINE = re.compile(r"^    (log|priority|threads): (.*)$")


def _decode(name: str) -> str:
    """The output path a metadata file records (base64 parts; '@' marks a continued name)."""
    raw = name.replace("@", "")
    return base64.b64decode(raw + "=" * (-len(raw) % 4)).decode("utf-8", "replace")


def _largest(rows: list[dict[str, str]], key: str) -> float | None:
    vals = [float(r[key]) for r in rows if r.get(key) not in (None, "", "NA", "-")]
    return max(vals) if vals else None


def _benchmark(run: Path, logs: list[str]) -> dict[str, float] | None:
    """The ``s`` and ``cpu_time`` of the job's benchmark file (the largest over its rows)."""
    for log_file in logs:
        rel = Path(log_file)
        if not rel.parts or rel.parts[0] != "logs":
            continue
        path = run / BENCHMARKS / Path(*rel.parts[1:]).with_suffix(".tsv")
        if path.is_file():
            with path.open(encoding="utf-8") as f:
                rows = list(csv.DictReader(f, delimiter="\t"))
            s = _largest(rows, "s")
            if s is not None:
                name = path.relative_to(run / BENCHMARKS).with_suffix("").as_posix()
                return {"s": s, "cpu": _largest(rows, "cpu_time") or 0.0, "name": name}
    return None


def read_settings(run: Path) -> dict[tuple[str, ...], dict[str, int]]:
    """The ``threads`` and ``priority`` Snakemake logged for each job of the run (its job blocks in
    ``.snakemake/log/*.snakemake.log``, later logs over earlier ones; a block without them means
    1 and 0), by the job's log files."""
    settings: dict[tuple[str, ...], dict[str, int]] = {}
    logs = Path(run) / SNAKEMAKE_LOGS
    for path in sorted(logs.glob("*.snakemake.log")) if logs.is_dir() else []:
        block: dict[str, str] | None = None
        for line in [*path.read_text(encoding="utf-8", errors="replace").splitlines(), ""]:
            if _RULE_LINE.match(line):
                block = {}
            elif block is not None and (m := _FIELD_LINE.match(line)):
                block[m.group(1)] = m.group(2).strip()
            elif block is not None and not line.startswith("    "):
                if "log" in block:  # Snakemake leaves out threads: 1 and priority: 0
                    key = tuple(x.strip() for x in block["log"].split(","))
                    settings[key] = {"threads": int(block.get("threads") or 1),
                                     "priority": int(block.get("priority") or 0)}  # fmt: skip
                block = None
    return settings


def read_jobs(run: Path) -> list[dict[str, Any]]:
    """The run's jobs from its metadata records: name, rule, start, end, duration ``s``, CPU
    seconds, outputs and inputs (one entry per job, however many outputs it has), and the
    ``threads`` and ``priority`` Snakemake logged for it (None where its log does not say)."""
    meta = Path(run) / METADATA
    jobs: dict[Any, dict[str, Any]] = {}
    for path in sorted(meta.iterdir()) if meta.is_dir() else []:
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            log.warning("%s: not a readable Snakemake record; skipped", path)
            continue
        if rec.get("incomplete") or rec.get("starttime") is None or rec.get("endtime") is None:
            continue
        key = (rec.get("rule"), rec.get("job_hash"), tuple(rec.get("log") or ()))
        job = jobs.setdefault(key, {
            "rule": rec.get("rule"), "start": float(rec["starttime"]),
            "end": float(rec["endtime"]), "outputs": [], "inputs": set(rec.get("input") or ()),
            "logs": list(rec.get("log") or ()),
        })  # fmt: skip
        job["outputs"].append(_decode(path.name))
    settings = read_settings(Path(run))
    out = []
    for job in jobs.values():
        given = settings.get(tuple(job["logs"]), {})
        job["threads"], job["priority"] = given.get("threads"), given.get("priority")
        bench = _benchmark(Path(run), job["logs"])
        job["s"] = bench["s"] if bench else job["end"] - job["start"]
        job["cpu"] = bench["cpu"] if bench else None
        job["name"] = bench["name"] if bench else f"{job['rule']} ({min(job['outputs'])})"
        out.append(job)
    return sorted(out, key=lambda j: (j["start"], j["name"]))


def _predecessors(jobs: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """For each job, the indices of the jobs whose outputs it reads."""
    producer = {out: i for i, j in enumerate(jobs) for out in j["outputs"]}
    return [
        sorted({producer[p] for p in j["inputs"] if p in producer and producer[p] != i})
        for i, j in enumerate(jobs)
    ]


def _pick(
    ready: list[int], free: int, threads: Sequence[int], priority: Sequence[int]
) -> list[int]:
    """The ready jobs Snakemake starts on ``free`` cores: the set of the largest summed priority
    whose threads fit (its scheduler's objective; a knapsack, small here), then of the most cores
    used, ties to the earlier jobs."""
    best: list[tuple[tuple[int, int], list[int]]] = [((0, 0), [])] * (free + 1)
    for i in ready:
        w = threads[i]
        for c in range(free, w - 1, -1):
            (p, used), chosen = best[c - w]
            score = (p + priority[i], used + w)
            if score > best[c][0]:
                best[c] = (score, [*chosen, i])
    return max(best, key=lambda b: b[0])[1]


def replay(
    jobs: Sequence[Mapping[str, Any]],
    *,
    cores: int,
    durations: Sequence[float] | None = None,
    threads: Sequence[int] | None = None,
) -> dict[str, Any]:
    """The jobs (:func:`read_jobs`, each with ``threads`` and ``priority``) scheduled on ``cores``
    the way ``snakemake --cores`` schedules them: whenever a job ends, among the jobs whose inputs
    all exist, start the set of the largest summed priority that fits the free cores (a job's
    threads above ``cores`` are cut to ``cores``, as Snakemake does).  ``durations`` and
    ``threads`` replace the jobs' own.  Returns ``wall_s``, ``reserved_core_seconds`` and each
    job's ``start``."""
    n = len(jobs)
    dur = [float(j["s"]) for j in jobs] if durations is None else [float(d) for d in durations]
    given = [j["threads"] for j in jobs] if threads is None else list(threads)
    if any(t is None for t in given) or any(j.get("priority") is None for j in jobs):
        raise ValueError(
            "the replay and its what-ifs need the threads and priority Snakemake logged for "
            "every job (.snakemake/log/*.snakemake.log of the run)"
        )
    thr = [max(1, min(int(t), cores)) for t in given]
    prio = [int(j["priority"]) for j in jobs]
    preds = _predecessors(jobs)
    waiting = [len(p) for p in preds]
    succs: list[list[int]] = [[] for _ in jobs]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    ready = [i for i in range(n) if waiting[i] == 0]
    start: list[float] = [0.0] * n
    running: list[tuple[float, int]] = []
    now, free = 0.0, cores
    while ready or running:
        for i in _pick(ready, free, thr, prio):
            ready.remove(i)
            start[i], free = now, free - thr[i]
            running.append((now + dur[i], i))
        if not running:  # cannot happen: a ready job always fits an idle machine
            raise AssertionError("replay: ready jobs but none fits")
        running.sort()
        now = running[0][0]
        while running and running[0][0] <= now:
            _, i = running.pop(0)
            free += thr[i]
            for k in succs[i]:
                waiting[k] -= 1
                if waiting[k] == 0:
                    ready.append(k)
        ready.sort()
    return {
        "wall_s": round(max((start[i] + dur[i] for i in range(n)), default=0.0), 1),
        "reserved_core_seconds": round(sum(d * t for d, t in zip(dur, thr, strict=True)), 1),
        "start": start,
    }


def what_if(
    jobs: Sequence[Mapping[str, Any]], changes: Sequence[str], *, cores: int
) -> dict[str, Any]:
    """:func:`replay` with ``changes`` applied in order, each ``PATTERN:threads=N,scale=F`` (either
    or both): the jobs whose names match the glob ``PATTERN`` (``model/iter_1_sft*``) get ``N``
    threads and their durations times ``F``.  ValueError names a change that is malformed or
    matches no job."""
    dur = [float(j["s"]) for j in jobs]
    thr = [j["threads"] for j in jobs]
    for change in changes:
        pattern, _, spec = change.rpartition(":")
        if not pattern or not spec:
            raise ValueError(f"what-if {change!r}: expected PATTERN:threads=N,scale=F")
        hits = [i for i, j in enumerate(jobs) if fnmatchcase(j["name"], pattern)]
        if not hits:
            raise ValueError(f"what-if {change!r}: {pattern!r} matches no job of the run")
        for item in spec.split(","):
            key, _, value = item.partition("=")
            try:
                if key.strip() == "threads" and int(value) >= 1:
                    for i in hits:
                        thr[i] = int(value)
                elif key.strip() == "scale" and float(value) > 0:
                    for i in hits:
                        dur[i] *= float(value)
                else:
                    raise ValueError
            except ValueError:
                raise ValueError(
                    f"what-if {change!r}: {item!r} is not threads=N (N >= 1) or scale=F (F > 0)"
                ) from None
    return replay(jobs, cores=cores, durations=dur, threads=thr)


def critical_path(jobs: list[Mapping[str, Any]]) -> tuple[float, list[str]]:
    """The longest chain of durations through the DAG of ``jobs`` (:func:`read_jobs`), and its
    jobs first to last."""
    preds = _predecessors(jobs)
    if not jobs:
        return 0.0, []
    # Longest path in a DAG: in an order where every job follows its predecessors (Kahn's).
    succs: list[list[int]] = [[] for _ in jobs]
    waiting = [len(p) for p in preds]
    for i, ps in enumerate(preds):
        for p in ps:
            succs[p].append(i)
    ready = [i for i, n in enumerate(waiting) if n == 0]
    finish: list[float] = [0.0] * len(jobs)  # the longest chain ending with job i
    via: list[int | None] = [None] * len(jobs)
    while ready:
        i = ready.pop()
        top = max(preds[i], key=lambda p: finish[p], default=None)
        finish[i] = jobs[i]["s"] + (finish[top] if top is not None else 0.0)
        via[i] = top
        for k in succs[i]:
            waiting[k] -= 1
            if waiting[k] == 0:
                ready.append(k)
    end = max(range(len(jobs)), key=lambda i: finish[i])
    chain: list[str] = []
    k: int | None = end
    while k is not None:
        chain.append(jobs[k]["name"])
        k = via[k]
    return finish[end], chain[::-1]


def upstream(jobs: list[Mapping[str, Any]], targets: Sequence[str]) -> list[Mapping[str, Any]]:
    """The jobs that produced ``targets`` (output paths as the records name them) and every job
    they depend on: what building only those targets runs.  A target no job produced raises
    ValueError naming it."""
    producer = {out: i for i, j in enumerate(jobs) for out in j["outputs"]}
    missing = [t for t in targets if t not in producer]
    if missing:
        raise ValueError(f"no job of the run produced {', '.join(missing)}")
    keep, todo = set(), [producer[t] for t in targets]
    while todo:
        i = todo.pop()
        if i not in keep:
            keep.add(i)
            todo += [producer[p] for p in jobs[i]["inputs"] if p in producer]
    return [j for i, j in enumerate(jobs) if i in keep]


def run_timing(
    run: Path, *, cores: int, targets: Sequence[str] = (), what_ifs: Sequence[str] = ()
) -> dict[str, Any] | None:
    """The figures of the module docstring for the run in directory ``run``; None without records.
    ``targets``: only the jobs that built them (:func:`upstream`) — their job-seconds and critical
    path as measured in this run (``wall_s`` is then the span of those jobs in it, not the wall
    time of a run of the targets alone).  ``what_ifs``: :func:`what_if`'s changes, replayed
    (ValueError without the threads and priorities the replay needs)."""
    jobs = read_jobs(Path(run))
    if targets:
        jobs = upstream(jobs, targets)
    if not jobs:
        return None
    wall = max(j["end"] for j in jobs) - min(j["start"] for j in jobs)
    job_seconds = sum(j["s"] for j in jobs)
    cpus = [j["cpu"] for j in jobs if j["cpu"] is not None]
    path_s, path = critical_path(jobs)
    packed = job_seconds / cores
    bound = max(path_s, packed)
    known = all(j["threads"] is not None and j["priority"] is not None for j in jobs)
    replayed = replay(jobs, cores=cores) if known else None
    figures = {
        "jobs": len(jobs),
        "cores": cores,
        "wall_s": round(wall, 1),
        "job_seconds": round(job_seconds, 1),
        "cpu_seconds": round(sum(cpus), 1) if cpus else None,
        "busy_cores": round(job_seconds / wall, 3) if wall > 0 else None,
        "busy_fraction": round(job_seconds / wall / cores, 3) if wall > 0 else None,
        "cpu_fraction": round(sum(cpus) / wall / cores, 3) if wall > 0 and cpus else None,
        "packed_s": round(packed, 1),
        "critical_path_s": round(path_s, 1),
        "lower_bound_s": round(bound, 1),
        "schedule_efficiency": round(bound / wall, 3) if wall > 0 else None,
        "reserved_core_seconds": replayed["reserved_core_seconds"] if replayed else None,
        "replay_s": replayed["wall_s"] if replayed else None,
        "critical_path": path,
    }
    if what_ifs:  # without the settings, the replay's ValueError says what is missing
        changed = what_if(jobs, what_ifs, cores=cores)
        figures["what_if_s"] = changed["wall_s"]
        figures["what_if_reserved_core_seconds"] = changed["reserved_core_seconds"]
        base = replayed["wall_s"] if replayed else 0.0
        figures["what_if_ratio"] = round(changed["wall_s"] / base, 3) if base else None
    return figures


def timing_lines(t: Mapping[str, Any]) -> list[str]:
    """``name=value`` lines of :func:`run_timing` (the critical path last, ``→``-joined)."""
    lines = [f"{k}={v}" for k, v in t.items() if k != "critical_path"]
    return [*lines, "critical_path=" + " → ".join(t["critical_path"])]
