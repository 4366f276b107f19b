# Data stage (burnqed/data/): benchmarks pinned by sha256, tactic pairs, search pool.


wildcard_constraints:
    benchmark="[A-Za-z0-9]+",
    split="[a-z]+",


rule fetch_benchmark:
    output:
        "data/raw/benchmarks/{benchmark}.jsonl",
    log:
        "logs/data/fetch_{benchmark}.log",
    benchmark:
        "logs/benchmarks/data/fetch_{benchmark}.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    resources:
        runtime=10,
    params:
        code=code_digest("data_fetch"),
    script:
        "../workflow/scripts/data_fetch.py"


rule benchmark_split:
    input:
        raw="data/raw/benchmarks/{benchmark}.jsonl",
    output:
        jsonl="data/benchmarks/{benchmark}_{split}.jsonl",
        meta="data/benchmarks/{benchmark}_{split}.meta.json",
    log:
        "logs/data/benchmark_{benchmark}_{split}.log",
    benchmark:
        "logs/benchmarks/data/benchmark_{benchmark}_{split}.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    params:
        code=code_digest("data_benchmark"),
    script:
        "../workflow/scripts/data_benchmark.py"


rule proplogic_benchmark_split:
    output:
        jsonl="data/benchmarks/proplogic_{split}.jsonl",
        meta="data/benchmarks/proplogic_{split}.meta.json",
    log:
        "logs/data/benchmark_proplogic_{split}.log",
    benchmark:
        "logs/benchmarks/data/benchmark_proplogic_{split}.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    params:
        cfg=lookup(dpath="data", within=config),
        seed=seed_of("data"),
        benchmark_seed=benchmark_seed,
        code=code_digest("data_proplogic_benchmark"),
    script:
        "../workflow/scripts/data_proplogic_benchmark.py"


ruleorder: proplogic_benchmark_split > benchmark_split


rule tactic_pairs:
    input:
        # Decontamination: no statement of the evaluation benchmark(s) may be trained on.
        eval_benchmarks=decontamination_benchmark_files(config),
    output:
        train="data/tactic_pairs/train.parquet",
        val="data/tactic_pairs/val.parquet",
        report="data/tactic_pairs/filter_report.json",
    log:
        "logs/data/tactic_pairs.log",
    benchmark:
        "logs/benchmarks/data/tactic_pairs.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=8000,
    params:
        cfg=lookup(dpath="data", within=config),
        seed=seed_of("data"),
        code=code_digest("data_pairs"),
    script:
        "../workflow/scripts/data_pairs.py"


rule search_pool:
    input:
        benchmarks=search_pool_benchmarks(config),
        eval_benchmarks=decontamination_benchmark_files(config),
    output:
        pool="data/theorems/search_pool.jsonl",
        report="data/theorems/search_pool.report.json",
    log:
        "logs/data/search_pool.log",
    benchmark:
        "logs/benchmarks/data/search_pool.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    params:
        cfg=lookup(dpath="data", within=config),
        seed=seed_of("data"),
        code=code_digest("data_pool"),
    script:
        "../workflow/scripts/data_pool.py"


rule data_all:
    input:
        rules.tactic_pairs.output,
        rules.search_pool.output,
        expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
