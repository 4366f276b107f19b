"""The SLURM profile against a real single-node SLURM cluster (Debian's slurm-wlm, started by
workflow/slurm/single-node.sh): the demo's search with ``search.shards: 2`` runs as SLURM jobs
through snakemake-executor-plugin-slurm, gathers to the same result as a local run, the jobs are in
SLURM's own records with the resources the rules declare, and no SLURM daemon is left running.
The cluster is installed, started and stopped with only ``/usr/bin:/bin`` on ``PATH`` (a plain
``env -i`` shell, cron): the script must find the daemons where Debian puts them (``/usr/sbin``).

Needs root (it installs slurm-wlm + munge from Debian if missing and starts the daemons):
``python -m pytest -m slurm`` (a step of .ci/run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from burnqed.trajectory import read_summary
from tests.workflow.conftest import REPO, snakemake, tiny_env

# The first test's budget includes starting the cluster and the tiny upstream run.
pytestmark = [pytest.mark.slurm, pytest.mark.timeout(900)]

CLUSTER = REPO / "workflow/slurm/single-node.sh"
TARGET = "results/iter_0/search/manifest.json"
TARGET_DIR = "results/iter_0/search"
UPSTREAM = ("models/iter_0/merged", "data/theorems/search_pool.jsonl")
# threads.search 4 (params.yaml's; the demo overlay asks for 1): what --cpus-per-task must become.
SHARDS = {"search": {"shards": 2}, "threads": {"search": 4}}


# What a plain `env -i` shell or cron has: no /usr/sbin, where Debian installs the daemons.
BARE_PATH = "/usr/bin:/bin"


def cluster(action: str, state: Path) -> subprocess.CompletedProcess:
    """``single-node.sh ACTION`` in a bare environment (``env -i PATH=/usr/bin:/bin``)."""
    return subprocess.run(
        ["bash", str(CLUSTER), action],
        env={"PATH": BARE_PATH, "BURNQED_SLURM_DIR": str(state)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=900,
    )


def running(state: Path) -> dict[str, int]:
    """SLURM/munge daemons whose pid files in ``state`` name a live process."""
    alive = {}
    for d in ("munged", "slurmctld", "slurmd"):
        f = state / f"{d}.pid"
        if f.is_file() and f.read_text().strip():
            pid = int(f.read_text())
            try:
                os.kill(pid, 0)
                alive[d] = pid
            except ProcessLookupError:
                pass
    return alive


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    assert os.geteuid() == 0, "the slurm tests start SLURM's daemons: run them as root"
    r = cluster("install", Path("/nonexistent"))
    assert r.returncode == 0, r.stdout + r.stderr
    state = tmp_path_factory.mktemp("slurm")
    r = cluster("start", state)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SLURM is up: node" in r.stdout, r.stdout + r.stderr
    try:
        yield state
    finally:
        r = cluster("stop", state)
        assert r.returncode == 0, r.stdout + r.stderr
        assert running(state) == {}


def test_install_and_start_work_without_sbin_on_path(slurm):
    """The fixture installed and started the cluster with PATH=/usr/bin:/bin; it is up, and a
    second ``install`` there finds the daemons in /usr/sbin instead of reinstalling them."""
    r = cluster("install", slurm)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "slurm-wlm and munge are installed" in r.stdout, r.stdout + r.stderr
    assert set(running(slurm)) == {"munged", "slurmctld", "slurmd"}
    env = {"PATH": BARE_PATH, "SLURM_CONF": str(slurm / "slurm.conf")}
    ping = subprocess.run(["scontrol", "ping"], env=env, capture_output=True, text=True, timeout=60)
    assert ping.returncode == 0 and "is UP" in ping.stdout, ping.stdout + ping.stderr
    sinfo = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%T"], env=env, capture_output=True, text=True, timeout=60
    )
    assert sinfo.returncode == 0, sinfo.stderr
    assert sinfo.stdout.split() and set(sinfo.stdout.split()) <= {"idle", "mixed", "allocated"}


@pytest.fixture(scope="module")
def runs(slurm, tmp_path_factory, make_tiny_repo):
    """The same tiny search run locally and through the slurm profile, from shared upstream."""
    base = tmp_path_factory.mktemp("slurm-run")
    local = make_tiny_repo(base / "local", **SHARDS)
    r = snakemake(local, "--cores", "2", *UPSTREAM)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    on_slurm = base / "slurm"
    shutil.copytree(local, on_slurm, symlinks=True)  # copy2: times and .snakemake records kept
    r = snakemake(local, "--cores", "2", TARGET)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
    env = tiny_env(SLURM_CONF=str(slurm / "slurm.conf"))
    r = snakemake(
        on_slurm,
        "--profile",
        "workflow/profiles/slurm",
        # No slurmdbd here: status from squeue (jobs stay listed for MinJobAge = 10 min).
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "1",
        "--slurm-keep-successful-logs",
        TARGET,
        env=env,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-8000:]
    return local, on_slurm, slurm, r.stdout + r.stderr


def test_sharded_search_on_slurm_gathers_the_local_result(runs):
    local, on_slurm, _, log = runs
    mine = json.loads((on_slurm / TARGET).read_text(encoding="utf-8"))
    ref = json.loads((local / TARGET).read_text(encoding="utf-8"))
    assert len(mine["per_shard"]) == 2
    # config/demo.yaml searches each pool theorem several times, each attempt with its own seeds.
    attempts = yaml.safe_load((on_slurm / "config/demo.yaml").read_text())["search"]["attempts"]
    assert attempts > 1
    assert mine["theorems"] == ref["theorems"] == 4
    assert mine["attempts"] == ref["attempts"] == 4 * attempts
    assert mine["statuses"] == ref["statuses"]
    for shard in ("shard_0", "shard_1"):
        m = mine["per_shard"][f"results/iter_0/search/{shard}"]
        r = ref["per_shard"][f"results/iter_0/search/{shard}"]
        assert m["statuses"] == r["statuses"], shard
        # The Snakefile's instruction-set pin reached the SLURM jobs (sbatch --export=ALL, and
        # each job parses the Snakefile again), with the caller's own values recorded.
        assert m["machine"]["isa_pin"] == r["machine"]["isa_pin"], shard
        assert m["machine"]["isa_pin"]["setting"] == "avx2"
        assert m["machine"]["cpu_capability"] == r["machine"]["cpu_capability"]
        # The same search, theorem by theorem: same outcome, same tree size, same tokens sampled.
        keys = ("theorem", "attempt", "status", "nodes_total", "nodes_expanded", "tokens")
        rows = [
            sorted(
                tuple(t[k] for k in keys)
                for t in read_summary(run / TARGET_DIR / shard).table.to_pylist()
            )
            for run in (on_slurm, local)
        ]
        assert rows[0] == rows[1] and len(rows[0]) == 2 * attempts, rows
        assert {row[1] for row in rows[0]} == set(range(attempts)), rows
    # Both shards and the gather went through sbatch, none ran locally.
    assert len(re.findall(r"has been submitted with SLURM jobid \d+", log)) == 3, log[-3000:]


def _jobs(state: Path) -> list[dict[str, str]]:
    """Every job slurmctld still holds (MinJobAge), as scontrol's key=value pairs."""
    out = subprocess.run(
        ["scontrol", "show", "job", "--oneliner"],
        env=dict(os.environ, SLURM_CONF=str(state / "slurm.conf")),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line.strip()]


def test_jobs_are_in_slurms_records_with_the_rules_resources(runs):
    _, _, state, _ = runs
    jobs = _jobs(state)
    shards = [j for j in jobs if j.get("Comment", "").startswith("rule_search_shard")]
    assert len(shards) == 2, jobs
    completed = {
        m["JobId"]: m
        for m in (
            dict(re.findall(r"(\w+)=(\S*)", line))
            for line in (state / "jobcomp.log").read_text().splitlines()
        )
    }
    for j in shards:
        # rules/search.smk search_shard: threads.search (4 here), mem_mb 32000, runtime 720 min, gpu 1
        done = completed[j["JobId"]]  # SLURM's job completion log
        assert done["JobState"] == "COMPLETED", done
        assert done["TimeLimit"] == "720", done
        assert "mem=32000M" in done["Tres"], done
        assert done["ProcCnt"] == "4", done  # threads -> --cpus-per-task
        assert j["TresPerJob"] == "gres:gpu:1", j
    gather = [j for j in jobs if j.get("Comment", "").startswith("rule_search_")]
    assert len(gather) == 3  # the two shards and the gather
