# Helpers shared by the rule files; keep this file tiny.
from functools import cache
from hashlib import sha256
from pathlib import Path


# Expert iteration i: any non-negative integer (`iterations` in params.yaml says how many are built).
wildcard_constraints:
    i="[0-9]+",


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


def earlier_searches(wildcards):
    """The finished searches before iteration i: results/iter_j/search for j < i and iteration 0's
    noise search (what SFT learns from and what the next search pool excludes)."""
    i = int(wildcards.i)
    if i == 0:
        return []
    searches = [f"results/iter_{j}/search/manifest.json" for j in range(i)]
    return [*searches, "results/iter_0/search_noise/manifest.json"]


def sft_warm_start(wildcards):
    """SFT inputs beyond the pairs at iteration i >= 1: adapter i-1 and the earlier searches."""
    if int(wildcards.i) == 0:
        return {}
    return {
        "previous_adapter": f"models/iter_{int(wildcards.i) - 1}/adapter",
        "searches": earlier_searches(wildcards),
    }


def eval_benchmark_files(config):
    """The evaluation benchmark file(s) (eval.benchmark): what training data is decontaminated against."""
    names = config["eval"]["benchmark"]
    names = [names] if isinstance(names, str) else names
    return [f"data/benchmarks/{n}.jsonl" for n in names]


def search_pool_benchmarks(config):
    """The benchmark split files the search pool reads (its {benchmark, split} entries)."""
    return [
        f"data/benchmarks/{e['benchmark']}_{e['split']}.jsonl"
        for e in config["data"]["search_pool"]
        if "benchmark" in e
    ]


def control_evals(config):
    """The search-longer control: the iteration before the last, given more search (none with a
    single iteration)."""
    n = config["iterations"]
    return [f"results/iter_{n - 2}/eval_longer.json"] if n >= 2 else []


def ebm_searches(wildcards):
    """Manifests of the searches the EBM of iteration {i} learns from (= earlier_searches)."""
    return earlier_searches(wildcards)
