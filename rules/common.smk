# Helpers shared by the rule files; keep this file tiny.
from functools import cache
from hashlib import sha256
from pathlib import Path

from burnqed.ebm import searches_before


# Iterations >= 1 need the EBM and the trajectory-mixing SFT stages; until those rules exist, the
# iteration wildcard only matches 0 so nothing runs an iteration the spec does not describe.
wildcard_constraints:
    i="0",


@cache  # several rules digest the same packages: read each set of files once per parse
def code_digest(*packages):
    """Content hash of the burnqed source files a job runs, passed as a param.

    Snakemake does not see edits inside the package, but it reruns a job whose params changed.
    """
    h = sha256()
    for pkg in packages:
        path = Path(workflow.basedir, "burnqed", pkg)
        for f in [path] if path.is_file() else sorted(path.glob("**/*.py")):
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def search_pool_benchmarks(config):
    """The benchmark split files the search pool reads (its {benchmark, split} entries)."""
    return [
        f"data/benchmarks/{e['benchmark']}_{e['split']}.jsonl"
        for e in config["data"]["search_pool"]
        if "benchmark" in e
    ]


def ebm_searches(wildcards):
    """Manifests of the searches the EBM of iteration {i} learns from (earlier iterations + noise)."""
    return [f"{d}/manifest.json" for d in searches_before(int(wildcards.i))]
