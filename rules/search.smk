# Search stage (burnqed/search/): best-first search over the search pool with the policy of
# iteration i, sharded (search.shards) so a cluster runs the shards in parallel.
# Iteration 0 has no EBM; iterations >= 1 add models/iter_{i}/ebm/ with the EBM stage.


wildcard_constraints:
    shard="[0-9]+",


rule search_shard:
    input:
        model="models/iter_{i}/merged",
        theorems="data/theorems/search_pool.jsonl",
        # Iterations >= 1 rank the frontier with that iteration's EBM (iteration 0 has none).
        ebm=branch(evaluate("int({i}) > 0"), then="models/iter_{i}/ebm"),
    output:
        directory("results/iter_{i}/search/shard_{shard}"),
    log:
        "logs/search/iter_{i}_shard_{shard}.log",
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 4
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
    params:
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=lookup(dpath="seed", within=config),
        code=code_digest(
            "search",
            "trajectory.py",
            "theorems.py",
            "lean",
            "policy",
            "data/prompt.py",
            "ebm",
        ),
    script:
        "../workflow/scripts/search_shard.py"


# Iteration 0 also searches at a high temperature ("noise injection") for diverse negatives.
rule search_noise_shard:
    input:
        model="models/iter_0/merged",
        theorems="data/theorems/search_pool.jsonl",
    output:
        directory("results/iter_0/search_noise/shard_{shard}"),
    log:
        "logs/search/iter_0_noise_shard_{shard}.log",
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 4
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
    params:
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=lookup(dpath="seed", within=config),
        temperature=lookup(dpath="search/noise_temperature", within=config),
        code=code_digest(
            "search",
            "trajectory.py",
            "theorems.py",
            "lean",
            "policy",
            "data/prompt.py",
        ),
    script:
        "../workflow/scripts/search_shard.py"


rule search:
    input:
        expand(
            "results/iter_{{i}}/search/shard_{shard}",
            shard=range(lookup(dpath="search/shards", within=config)),
        ),
    output:
        "results/iter_{i}/search/manifest.json",
    log:
        "logs/search/iter_{i}_gather.log",
    conda:
        "../workflow/envs/burnqed.yaml"
    script:
        "../workflow/scripts/search_gather.py"


rule search_noise:
    input:
        expand(
            "results/iter_0/search_noise/shard_{shard}",
            shard=range(lookup(dpath="search/shards", within=config)),
        ),
    output:
        "results/iter_0/search_noise/manifest.json",
    log:
        "logs/search/iter_0_noise_gather.log",
    conda:
        "../workflow/envs/burnqed.yaml"
    script:
        "../workflow/scripts/search_gather.py"
