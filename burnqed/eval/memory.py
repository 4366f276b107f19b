"""Peak memory of a run, from the ``benchmark:`` files Snakemake writes for every job.

Each job's file (``logs/benchmarks/<stage>/<job>.tsv``, beside the job's log, a header line and one row per repeat) holds its wall
seconds ``s`` and ``max_rss`` (MB: the largest resident set of the job's whole process tree,
sampled by Snakemake while it runs).  Two figures come out:

- ``job_peak_mb``: the largest ``max_rss`` of any one job, with its rule and file — what one
  machine must hold for the largest stage;
- ``run_peak_mb``: the largest sum of ``max_rss`` over the jobs running at the same moment — an
  upper bound on the whole run's resident set (each job's own peak counted as if all coincided),
  which is what ``--cores N`` puts side by side.  A sampler of the process tree would give the true
  figure, but it has to run outside the DAG (around ``snakemake``), while this one comes from files
  the jobs already write and can be put in ``compare.md`` by a job of the run itself.  A job's
  interval is ``[end − s, end]`` with ``end`` the file's modification time (Snakemake writes it
  when the job ends), so the figure is only as good as the files' mtimes: one restored by
  ``dvc pull`` or copied without ``-p`` overlaps the wrong jobs; Snakemake's own process is not
  counted.

Example::

    >>> import tempfile, pathlib, os
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> for name, s, rss, end in (("a.tsv", 10, 300, 100), ("b.tsv", 5, 200, 98), ("c.tsv", 3, 250, 200)):
    ...     p = d / "x" / name
    ...     p.parent.mkdir(exist_ok=True)
    ...     _ = p.write_text(f"s\\th:m:s\\tmax_rss\\n{s}\\t0:00:{s}\\t{rss}\\n")
    ...     os.utime(p, (end, end))
    >>> m = peak_memory(d)
    >>> (m["jobs"], m["job_peak_mb"], m["run_peak_mb"], m["job_peak"]["job"])
    (3, 300.0, 500.0, 'x/a')
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def _row(path: Path) -> dict[str, float] | None:
    """The largest ``max_rss`` and the longest ``s`` over the file's rows (None: no usable row)."""
    with path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    rss = [float(r["max_rss"]) for r in rows if r.get("max_rss") not in (None, "", "NA", "-")]
    secs = [float(r["s"]) for r in rows if r.get("s") not in (None, "", "NA", "-")]
    if not rss or not secs:
        return None
    return {"max_rss": max(rss), "s": max(secs)}


def peak_memory(benchmarks: Path) -> dict[str, Any] | None:
    """The job and run peaks of every ``*.tsv`` under ``benchmarks`` (module docstring); None
    when there is none."""
    jobs = []
    for p in sorted(Path(benchmarks).rglob("*.tsv")):
        r = _row(p)
        if r is None:
            continue
        end = p.stat().st_mtime
        jobs.append({"job": p.relative_to(benchmarks).with_suffix("").as_posix(),
                     "start": end - r["s"], "end": end, "mb": r["max_rss"], "s": r["s"]})  # fmt: skip
    if not jobs:
        return None
    top = max(jobs, key=lambda j: j["mb"])
    # Sweep the starts and ends: the running sum is largest just after some job starts.
    events = sorted(
        [(j["start"], 1, j["mb"]) for j in jobs] + [(j["end"], 0, -j["mb"]) for j in jobs]
    )
    running, run_peak = 0.0, 0.0
    for _, _, delta in events:  # at a tie an end (0) comes before a start (1)
        running += delta
        run_peak = max(run_peak, running)
    return {
        "jobs": len(jobs),
        "job_peak_mb": top["mb"],
        "job_peak": {"job": top["job"], "s": top["s"]},
        "run_peak_mb": round(run_peak, 3),
        "wall_s": round(max(j["end"] for j in jobs) - min(j["start"] for j in jobs), 1),
        "job_seconds": round(sum(j["s"] for j in jobs), 1),
        "how": "max_rss of Snakemake's benchmark files; run peak = largest sum over concurrent jobs",
    }


def memory_markdown(m: Mapping[str, Any] | None) -> list[str]:
    """The section of ``compare.md`` (nothing without benchmark files)."""
    if not m:
        return []
    return [
        "## Peak memory",
        "",
        f"Largest resident set of one job: **{m['job_peak_mb']:.0f} MB** "
        f"(`{m['job_peak']['job']}`); of the whole run "
        f"(the largest sum over jobs running at once, an upper bound): **{m['run_peak_mb']:.0f} MB**; "
        f"{m['jobs']} jobs with benchmark files so far, {m['wall_s']:.0f} s from the first start to "
        "the last end (burnqed.eval.memory).",
        "",
    ]
