# Search stage (burnqed/search/): best-first search over the search pool with the policy of
# iteration i, sharded (search.shards) so a cluster runs the shards in parallel.
# Iteration 0 has no EBM; iterations >= 1 add models/iter_{i}/ebm/ with the EBM stage.


wildcard_constraints:
    shard="[0-9]+",


rule search_shard:
    input:
        model="models/iter_{i}/merged",
        # Iteration 0 searches the data stage's pool; later ones the pool selected for them.
        theorems=branch(
            evaluate("{i} == '0'"),
            then="data/theorems/search_pool.jsonl",
            otherwise="results/iter_{i}/search_pool.jsonl",
        ),
        # Iterations >= 1 rank the frontier with that iteration's EBM (iteration 0 has none).
        ebm=branch(evaluate("int({i}) > 0"), then="models/iter_{i}/ebm"),
    output:
        "results/iter_{i}/search/shard_{shard}/manifest.json",
    log:
        "logs/search/iter_{i}_shard_{shard}.log",
    benchmark:
        "logs/benchmarks/search/iter_{i}_shard_{shard}.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/search", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("train"),
        # Iterations >= 1 draw their own samples (rules/common.smk search_seed_salt).
        seed_salt=search_seed_salt,
        code=code_digest("search_shard", "lean", "policy"),
    script:
        "../workflow/scripts/search_shard.py"


# The search pool of iteration i >= 1 (burnqed/search/selection.py): the data stage's pool minus what
# earlier iterations proved, shallow theorems and those a probe tactic closes, then a seeded sample.
rule search_pool_select:
    input:
        pool="data/theorems/search_pool.jsonl",
        earlier=earlier_searches,
    output:
        pool="results/iter_{i}/search_pool.jsonl",
        meta="results/iter_{i}/search_pool.jsonl.meta.json",
    log:
        "logs/search/iter_{i}_pool.log",
    benchmark:
        "logs/benchmarks/search/iter_{i}_pool.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        seed=seed_of("train"),
        code=code_digest("search_select_pool", "lean"),
    script:
        "../workflow/scripts/search_select_pool.py"


# Iteration 0 also searches at a high temperature ("noise injection") for diverse negatives.
rule search_noise_shard:
    input:
        model="models/iter_0/merged",
        theorems="data/theorems/search_pool.jsonl",
    output:
        "results/iter_0/search_noise/shard_{shard}/manifest.json",
    log:
        "logs/search/iter_0_noise_shard_{shard}.log",
    benchmark:
        "logs/benchmarks/search/iter_0_noise_shard_{shard}.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/search", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("train"),
        temperature=lookup(dpath="search/noise_temperature", within=config),
        # A seeded random frontier order: decisions that favour no priority (params.yaml).
        order=lookup(dpath="search/noise_order", within=config),
        # Independent of the pool search's draws for the same theorems and states.
        seed_salt="search_noise/iter_0",
        code=code_digest("search_shard", "lean", "policy"),
    script:
        "../workflow/scripts/search_shard.py"


# The baseline: the raw base model (no fine-tuning) searched like an iteration, so every report can
# show the gain over it (the evaluation of the baseline is results/baseline/eval.json).
rule search_baseline_shard:
    input:
        model="models/base",
        theorems="data/theorems/search_pool.jsonl",
    output:
        "results/baseline/search/shard_{shard}/manifest.json",
    log:
        "logs/search/baseline_shard_{shard}.log",
    benchmark:
        "logs/benchmarks/search/baseline_shard_{shard}.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/search", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("train"),
        code=code_digest("search_shard", "lean", "policy"),
    script:
        "../workflow/scripts/search_shard.py"


rule search:
    input:
        expand(
            "results/iter_{{i}}/search/shard_{shard}/manifest.json",
            shard=range(lookup(dpath="search/shards", within=config)),
        ),
    output:
        "results/iter_{i}/search/manifest.json",
    log:
        "logs/search/iter_{i}_gather.log",
    benchmark:
        "logs/benchmarks/search/iter_{i}_gather.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    params:
        code=code_digest("search_gather"),
    script:
        "../workflow/scripts/search_gather.py"


rule search_noise:
    input:
        expand(
            "results/iter_0/search_noise/shard_{shard}/manifest.json",
            shard=range(lookup(dpath="search/shards", within=config)),
        ),
    output:
        "results/iter_0/search_noise/manifest.json",
    log:
        "logs/search/iter_0_noise_gather.log",
    benchmark:
        "logs/benchmarks/search/iter_0_noise_gather.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    params:
        code=code_digest("search_gather"),
    script:
        "../workflow/scripts/search_gather.py"


rule search_baseline:
    input:
        expand(
            "results/baseline/search/shard_{shard}/manifest.json",
            shard=range(lookup(dpath="search/shards", within=config)),
        ),
    output:
        "results/baseline/search/manifest.json",
    log:
        "logs/search/baseline_gather.log",
    benchmark:
        "logs/benchmarks/search/baseline_gather.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    params:
        code=code_digest("search_gather"),
    script:
        "../workflow/scripts/search_gather.py"


# Search only, the other arm of the compute comparison (Polu et al. 2022; issue 61; rule
# compute_report, rules/eval.smk): iteration 0's model — no training, no value model, so at the
# search's own temperature, as iteration 0 — searching, at iteration {i} >= 1, the pool theorems the
# arm has not proved itself (rules/common.smk search_only_pool), with the same budget, attempts and
# config and seeds of its own (rules/common.smk search_only_salt).
rule search_only_shard:
    input:
        model="models/iter_0/merged",
        theorems=search_only_pool,
    output:
        "results/iter_{i}/search_only/shard_{shard}/manifest.json",
    log:
        "logs/search/iter_{i}_search_only_shard_{shard}.log",
    benchmark:
        "logs/benchmarks/search/iter_{i}_search_only_shard_{shard}.tsv"
    wildcard_constraints:
        # iteration 0's searches are both arms' first step
        i="[1-9][0-9]*",
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/search", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("train"),
        seed_salt=search_only_salt,
        code=code_digest("search_shard", "lean", "policy"),
    script:
        "../workflow/scripts/search_shard.py"


# The search-only arm's pool of iteration {i} >= 2 (iteration 1's is expert iteration's own,
# rules/common.smk search_only_pool): the data stage's pool minus what iteration 0's searches and
# the arm's own searches before {i} proved, selected as rule search_pool_select selects expert
# iteration's (burnqed/search/selection.py: shallow and probe-closed theorems out, the same seed).
rule search_only_pool_select:
    input:
        pool="data/theorems/search_pool.jsonl",
        earlier=search_only_earlier,
    output:
        pool="results/iter_{i}/search_only_pool.jsonl",
        meta="results/iter_{i}/search_only_pool.jsonl.meta.json",
    log:
        "logs/search/iter_{i}_search_only_pool.log",
    benchmark:
        "logs/benchmarks/search/iter_{i}_search_only_pool.tsv"
    wildcard_constraints:
        i="[2-9]|[1-9][0-9]+",
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 2
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        seed=seed_of("train"),
        code=code_digest("search_select_pool", "lean"),
    script:
        "../workflow/scripts/search_select_pool.py"


rule search_only:
    input:
        expand(
            "results/iter_{{i}}/search_only/shard_{shard}/manifest.json",
            shard=range(lookup(dpath="search/shards", within=config)),
        ),
    output:
        "results/iter_{i}/search_only/manifest.json",
    log:
        "logs/search/iter_{i}_search_only_gather.log",
    benchmark:
        "logs/benchmarks/search/iter_{i}_search_only_gather.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    params:
        code=code_digest("search_gather"),
    script:
        "../workflow/scripts/search_gather.py"
