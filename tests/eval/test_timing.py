"""burnqed.eval.timing and ``burnqed timing``: a run's wall time, busy cores and critical path from
Snakemake's records and benchmark files."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from burnqed.cli import main as cli_main
from burnqed.eval.timing import critical_path, read_jobs, run_timing


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
