"""The machine profiles plan the real-run DAG (config/a100-7b.yaml) with each rule's resources:
the single-GPU profile and the SLURM profile in dry runs.  The SLURM one needs
snakemake-executor-plugin-slurm (``pip install -e '.[slurm]'``, not in ``dev``): it is marked
``slurm`` and runs in .ci/run's SLURM step, which installs it."""

from __future__ import annotations

import re

import pytest

from tests import snakemake_cli
from tests.workflow.conftest import BIN, REPO, tiny_env


def dry_run(profile: str) -> str:
    r = snakemake_cli.run(
        [str(BIN / "snakemake"), "-n", "--profile", f"workflow/profiles/{profile}",
         "--configfile", "config/a100-7b.yaml"],
        cwd=REPO, env=tiny_env(), timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r.stdout + r.stderr


def planned(out: str) -> dict[str, list[dict[str, str]]]:
    """rule -> the resources of each of its planned jobs (``resources: k=v, ...`` lines)."""
    jobs: dict[str, list[dict[str, str]]] = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        m = re.match(r"(?:local)?rule (\w+):", block)
        res = re.search(r"\n\s+resources: (.*)", block)
        if m and res:
            jobs.setdefault(m.group(1), []).append(dict(re.findall(r"(\w+)=([^,]*)", res.group(1))))
    return jobs


@pytest.mark.parametrize("profile", ["gpu", pytest.param("slurm", marks=pytest.mark.slurm)])
def test_profile_plans_the_full_real_run_with_resources(profile):
    out = dry_run(profile)
    jobs = planned(out)
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out.split("Job stats:")[1], re.M))
    assert int(stats.pop("total")) == sum(len(v) for v in jobs.values())
    assert {r: len(v) for r, v in jobs.items()} == {r: int(n) for r, n in stats.items()}
    # The whole iteration 0 of the 7B run: data, base, SFT, merge, both searches and gathers.
    assert {"tactic_pairs", "base_model", "sft", "merge", "search_shard", "search"} <= set(jobs)
    for rule, want in {
        "sft": {"gpu": "1", "mem_mb": "48000", "runtime": "720"},
        "search_shard": {"gpu": "1", "mem_mb": "32000", "runtime": "720"},
        "merge": {"mem_mb": "64000", "runtime": "60"},
    }.items():
        for res in jobs[rule]:
            assert want.items() <= res.items(), (rule, res)
    if profile == "gpu":
        # GPU jobs are serialised by the machine's gpu=1; every other job asks for none.
        assert jobs["tactic_pairs"][0]["gpu"] == "0"
    else:
        # Every SLURM job carries a runtime and memory request (profile defaults where the rule has none).
        for res in (r for v in jobs.values() for r in v):
            assert int(res["runtime"]) > 0 and int(res["mem_mb"]) > 0, res
            assert "slurm_partition" in res
