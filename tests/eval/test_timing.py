"""burnqed.eval.timing and ``burnqed timing``: a run's wall time, busy cores and critical path from
Snakemake's records and benchmark files."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from burnqed.cli import main as cli_main
from burnqed.eval.timing import (
    critical_path,
    read_jobs,
    read_settings,
    replay,
    run_timing,
    what_if,
)


def _job(run: Path, rule: str, outputs: list[str], inputs: list[str], start: float, end: float,
         *, bench: float | None = None, cpu: float = 0.0) -> None:  # fmt: skip
    """Snakemake's record of each output (base64 name, as .snakemake/metadata keeps them) and,
    with ``bench``, the job's benchmark file beside its log by the project's convention."""
    meta = run / ".snakemake" / "metadata"
    meta.mkdir(parents=True, exist_ok=True)
    log = f"logs/stage/{rule}.log"
    for out in outputs:
        record = {"rule": rule, "input": inputs, "log": [log], "starttime": start,
                  "endtime": end, "job_hash": abs(hash(rule)), "incomplete": False}  # fmt: skip
        (meta / base64.b64encode(out.encode()).decode()).write_text(json.dumps(record))
    if bench is not None:
        tsv = run / "logs" / "benchmarks" / "stage" / f"{rule}.tsv"
        tsv.parent.mkdir(parents=True, exist_ok=True)
        tsv.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{bench}\t0:00:01\t10\t{cpu}\n")


def _diamond(run: Path) -> None:
    """data (10 s) → a two-output training (40 s) and an eval (15 s) → a report reading both
    (5 s); the training's benchmark file says 38 s of its 40."""
    _job(run, "data", ["d.parquet"], [], 0, 10)
    _job(run, "train", ["m/model", "m/summary.json"], ["d.parquet"], 10, 50, bench=38.0, cpu=70)
    _job(run, "eval", ["e.json"], ["d.parquet"], 10, 25)
    _job(run, "report", ["r.md"], ["m/model", "e.json"], 50, 55)


def test_jobs_durations_and_the_critical_path(tmp_path):
    _diamond(tmp_path)
    jobs = read_jobs(tmp_path)
    assert [j["name"] for j in jobs] == ["data (d.parquet)", "eval (e.json)", "stage/train",
                                         "report (r.md)"]  # fmt: skip
    assert sorted(jobs[2]["outputs"]) == ["m/model", "m/summary.json"]  # one job, two records
    assert critical_path(jobs) == (53.0, ["data (d.parquet)", "stage/train", "report (r.md)"])
    t = run_timing(tmp_path, cores=2)
    assert (t["jobs"], t["wall_s"], t["job_seconds"], t["cpu_seconds"]) == (4, 55.0, 68.0, 70.0)
    assert (t["busy_cores"], t["packed_s"], t["lower_bound_s"]) == (1.236, 34.0, 53.0)
    assert t["schedule_efficiency"] == round(53 / 55, 3)


def test_the_jobs_a_target_needs(tmp_path):
    _diamond(tmp_path)
    t = run_timing(tmp_path, cores=2, targets=["e.json"])
    assert (t["jobs"], t["job_seconds"], t["critical_path"]) == (
        2, 25.0, ["data (d.parquet)", "eval (e.json)"])  # fmt: skip


def test_the_command_prints_name_value_lines_and_refuses_what_it_cannot_read(tmp_path, capsys):
    _diamond(tmp_path)
    assert cli_main(["timing", str(tmp_path), "--cores", "2"]) == 0
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["critical_path_s"] == "53.0" and lines["busy_fraction"] == "0.618"
    assert lines["critical_path"] == "data (d.parquet) → stage/train → report (r.md)"
    assert cli_main(["timing", str(tmp_path), "--targets", "nowhere.json"]) == 2
    assert "nowhere.json" in capsys.readouterr().err
    assert cli_main(["timing", str(tmp_path / "empty")]) == 2
    assert "no Snakemake records" in capsys.readouterr().err


def _snakemake_log(run: Path, blocks: list[tuple[str, str, int | None, int | None]]) -> None:
    """A Snakemake log with a job block per (rule, log, threads, priority); None: the line left
    out, as Snakemake leaves out threads 1 and priority 0."""
    lines = ["Building DAG of jobs...", "Job stats:"]
    for rule, log, threads, priority in blocks:
        lines += ["", "[Sun Nov 29 00:52:01 2026]", f"localrule {rule}:",
                  "    output: x", f"    log: {log}", "    jobid: 1"]  # fmt: skip
        lines += [f"    priority: {priority}"] if priority is not None else []
        lines += [f"    threads: {threads}"] if threads is not None else []
        lines += ["    resources: tmpdir=/tmp", "Select jobs to execute..."]
    logs = run / ".snakemake" / "log"
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "2026-11-29T005159.507534.snakemake.log").write_text("\n".join(lines) + "\n")


def _diamond_logged(run: Path) -> None:
    """The diamond with the threads and priorities Snakemake logged: the training two threads and
    on top, the eval one thread below it, data and report one thread, priority 0."""
    _diamond(run)
    _snakemake_log(run, [("data", "logs/stage/data.log", None, None),
                         ("train", "logs/stage/train.log", 2, 19),
                         ("eval", "logs/stage/eval.log", None, 3),
                         ("report", "logs/stage/report.log", None, None)])  # fmt: skip


def test_the_threads_and_priorities_snakemake_logged(tmp_path):
    _diamond_logged(tmp_path)
    got = {j["rule"]: (j["threads"], j["priority"]) for j in read_jobs(tmp_path)}
    assert got == {"data": (1, 0), "train": (2, 19), "eval": (1, 3), "report": (1, 0)}
    assert read_settings(tmp_path / "nowhere") == {}


def test_the_replay_schedules_as_snakemake_does(tmp_path):
    """On 2 cores the two-thread training (38 s by its benchmark file) takes both and the eval
    waits for it; on 3 they run side by side.  The replay is of durations, so its wall time is
    the measured jobs' (10 + 38 + 15 + 5), not the records' 55 s."""
    _diamond_logged(tmp_path)
    jobs = read_jobs(tmp_path)
    two = replay(jobs, cores=2)
    assert (two["wall_s"], two["reserved_core_seconds"]) == (68.0, 106.0)
    assert dict(zip([j["rule"] for j in jobs], two["start"], strict=True)) == {
        "data": 0.0, "train": 10.0, "eval": 48.0, "report": 63.0}  # fmt: skip
    assert replay(jobs, cores=3)["wall_s"] == 53.0
    # The eval ranks over the training now: it starts first, on one core, and the training,
    # which needs two, waits for it.
    assert replay([{**j, "priority": 99} if j["rule"] == "eval" else j for j in jobs],
                  cores=2)["wall_s"] == 10 + 15 + 38 + 5  # fmt: skip
    t = run_timing(tmp_path, cores=2)
    assert (t["replay_s"], t["reserved_core_seconds"]) == (68.0, 106.0)


def test_the_largest_summed_priority_that_fits(tmp_path):
    """Three ready jobs: a two-thread one of priority 5 and two one-thread ones of 3 each — the
    pair (6) starts, as Snakemake's scheduler picks; with priority 7 the two-thread one does."""
    for rule in ("big", "small1", "small2"):
        _job(tmp_path, rule, [f"{rule}.out"], [], 0, 10)
    _snakemake_log(tmp_path, [("big", "logs/stage/big.log", 2, 5),
                              ("small1", "logs/stage/small1.log", None, 3),
                              ("small2", "logs/stage/small2.log", None, 3)])  # fmt: skip
    jobs = read_jobs(tmp_path)
    starts = dict(zip([j["rule"] for j in jobs], replay(jobs, cores=2)["start"], strict=True))
    assert starts == {"big": 10.0, "small1": 0.0, "small2": 0.0}
    jobs = [{**j, "priority": 7} if j["rule"] == "big" else j for j in jobs]
    starts = dict(zip([j["rule"] for j in jobs], replay(jobs, cores=2)["start"], strict=True))
    assert starts == {"big": 0.0, "small1": 10.0, "small2": 10.0}


def test_what_ifs_change_threads_and_durations_and_name_what_they_cannot_read(tmp_path):
    _diamond_logged(tmp_path)
    jobs = read_jobs(tmp_path)
    # The training at one thread and 1.25 times longer: the eval runs beside it.
    one = what_if(jobs, ["stage/train:threads=1,scale=1.25"], cores=2)
    assert (one["wall_s"], one["reserved_core_seconds"]) == (10 + 47.5 + 5, 77.5)
    assert what_if(jobs, ["eval*:scale=2", "eval*:scale=0.5"], cores=2)["wall_s"] == 68.0
    for bad, says in [("stage/train", "expected PATTERN:threads=N,scale=F"),
                      ("nothing:threads=1", "'nothing' matches no job"),
                      ("stage/*:threads=0", "is not threads=N (N >= 1) or scale=F (F > 0)"),
                      ("stage/*:speed=2", "is not threads=N")]:  # fmt: skip
        with pytest.raises(ValueError, match=re.escape(says)):
            what_if(jobs, [bad], cores=2)


def test_the_command_replays_what_ifs_and_refuses_them_without_snakemakes_log(tmp_path, capsys):
    _diamond(tmp_path)
    assert cli_main(["timing", str(tmp_path)]) == 0
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert lines["replay_s"] == "None" and lines["reserved_core_seconds"] == "None"
    assert cli_main(["timing", str(tmp_path), "--what-if", "stage/train:threads=1"]) == 2
    assert "need the threads and priority Snakemake logged" in capsys.readouterr().err
    _diamond_logged(tmp_path)
    argv = ["timing", str(tmp_path), "--what-if", "stage/train:threads=1,scale=1.25"]
    assert cli_main(argv) == 0
    lines = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert (lines["replay_s"], lines["what_if_s"], lines["what_if_ratio"]) == (
        "68.0", "62.5", str(round(62.5 / 68, 3)))  # fmt: skip
    assert cli_main([*argv, "--what-if", "nothing:scale=2"]) == 2
    assert "'nothing' matches no job of the run" in capsys.readouterr().err
