# Eval stage (burnqed/eval/): the pinned benchmark data/benchmarks/<eval.benchmark>.jsonl searched
# once at the largest budget (trajectories kept beside the JSON, resumable) and scored at every budget.
# results/baseline/eval.json: the base model; results/iter_{i}/eval.json: iteration i (with its EBM
# for i >= 1, plus the ablation without it, same theorems and seeds); results/compare.{md,json}
# (the headline) and results/ablations/compare.{md,json} (every value-model configuration).


rule eval_baseline:
    input:
        model="models/base",
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
    output:
        # Trajectories go beside it (eval.json -> eval/): not declared, so a killed job keeps its
        # finished attempts and the rerun resumes them (burnqed.search.stage, resume="auto").
        json=report(
            "results/baseline/eval.json",
            category="baseline",
            subcategory="eval",
            caption="../workflow/report/eval.rst",
        ),
    log:
        "logs/eval/baseline.log",
    benchmark:
        "logs/benchmarks/eval/baseline.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        label="baseline",
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


rule eval:
    input:
        model="models/iter_{i}/merged",
        ebm=branch(evaluate("{i} != '0'"), then="models/iter_{i}/ebm"),
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        # Newly solved theorems are counted against the iteration before (the baseline for 0).
        previous=branch(
            evaluate("{i} == '0'"),
            then="results/baseline/eval.json",
            otherwise=evaluate("'results/iter_%d/eval.json' % (int({i}) - 1)"),
        ),
    output:
        # Trajectories go beside it (eval.json -> eval/): not declared, so a killed job keeps its
        # finished attempts and the rerun resumes them (burnqed.search.stage, resume="auto").
        json=report(
            "results/iter_{i}/eval.json",
            category="iteration {i}",
            subcategory="eval",
            caption="../workflow/report/eval.rst",
        ),
    log:
        "logs/eval/iter_{i}.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


# The search-longer control: iteration i's model (and EBM) searched with eval.control_budget_factor
# times the node budgets instead of being trained again; the next iteration must beat it.
rule eval_longer:
    input:
        model="models/iter_{i}/merged",
        ebm=branch(evaluate("{i} != '0'"), then="models/iter_{i}/ebm"),
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
    output:
        # Trajectories go beside it (eval.json -> eval/): not declared, so a killed job keeps its
        # finished attempts and the rerun resumes them (burnqed.search.stage, resume="auto").
        json="results/iter_{i}/eval_longer.json",
    log:
        "logs/eval/iter_{i}_longer.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_longer.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        budget_factor=lookup(dpath="eval/control_budget_factor", within=config),
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


# The EBM ablation: the same model, theorems, seeds and sampling temperature (eval.temperature, as
# every eval), without the EBM.  It waits for nothing it does not read: needing no EBM it is ready
# before its twin with the EBM, which then finds in the expansion cache what the two share (as
# configuration S's pair below; docs/performance.md).
rule eval_no_ebm:
    input:
        model="models/iter_{i}/merged",
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
    output:
        # Trajectories go beside it (eval.json -> eval/): not declared, so a killed job keeps its
        # finished attempts and the rerun resumes them (burnqed.search.stage, resume="auto").
        json="results/iter_{i}/eval_no_ebm.json",
    log:
        "logs/eval/iter_{i}_no_ebm.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_no_ebm.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


# The value-model configurations of iteration i >= 1 (rules/common.smk value_configs): A, S, B
# with their decoupled EBMs (the main line, C, is results/iter_{i}/eval.json), and S without its
# EBM; the same theorems, seeds and temperature as every eval, so each pair is a paired comparison.
rule eval_config:
    input:
        model=config_model,
        ebm="models/iter_{i}/configs/{c}/ebm",
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
    output:
        json="results/iter_{i}/configs/{c}/eval.json",
    log:
        "logs/eval/iter_{i}_{c}.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_{c}.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        label=config_label,
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


rule eval_config_no_ebm:
    input:
        model="models/iter_{i}/configs/S/merged",
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
    output:
        json="results/iter_{i}/configs/S/eval_no_ebm.json",
    log:
        "logs/eval/iter_{i}_S_no_ebm.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_S_no_ebm.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        # The expansion cache: a machine setting like threads (params.yaml `cache`), not a param.
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        label=config_no_ebm_label,
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


# The depth twins (models/iter_{i}/depth_twin: the open goals and a fitted depth term), each
# policy's stronger control beside its no-value twin: iteration i's model (the twin of B and C),
# and configurations A's and S's policies.  The same theorems, seeds and temperature as every eval.
rule eval_depth_twin:
    input:
        model="models/iter_{i}/merged",
        ebm="models/iter_{i}/depth_twin",
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
    output:
        json="results/iter_{i}/eval_depth_twin.json",
    log:
        "logs/eval/iter_{i}_depth_twin.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_depth_twin.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        label=depth_twin_label,
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


rule eval_config_depth_twin:
    input:
        model=config_model,
        ebm="models/iter_{i}/depth_twin",
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
    output:
        json="results/iter_{i}/configs/{c}/eval_depth_twin.json",
    log:
        "logs/eval/iter_{i}_{c}_depth_twin.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_{c}_depth_twin.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        label=depth_twin_label,
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


# The replay prediction of each configuration's EBM (issue 30 §7): its no-EBM twin's recorded trees
# (rules/common.smk config_twin) searched again with the EBM in the priority, the twin's policy
# embedding the states; compare.md shows it beside the live figure.  No order with the live eval
# with the EBM: the replay is a function of the twin's trees and the EBM alone.  The main line, C:
rule replay_ebm:
    input:
        recording="results/iter_{i}/eval_no_ebm.json",
        value="models/iter_{i}/ebm",
        model="models/iter_{i}/merged",
    output:
        json="results/iter_{i}/replay.json",
    log:
        "logs/eval/iter_{i}_replay.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_replay.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        label=replay_label,
        code=code_digest("replay", "lean", "policy"),
    script:
        "../workflow/scripts/replay.py"


# A, S and B (rules/common.smk value_configs), each over its own twin.
rule replay_config:
    input:
        recording=config_recording,
        value="models/iter_{i}/configs/{c}/ebm",
        model=config_model,
    output:
        json="results/iter_{i}/configs/{c}/replay.json",
    log:
        "logs/eval/iter_{i}_{c}_replay.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_{c}_replay.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        label=replay_label,
        code=code_digest("replay", "lean", "policy"),
    script:
        "../workflow/scripts/replay.py"


# The feature value of iteration i (models/iter_{i}/features): first its live replay over the
# recorded trees of the eval without a value model (same policy, seeds and temperature; what they
# never expanded, expanded live) — an equality check of replay, not a prediction: it must equal the
# live eval that follows, theorem by theorem — then the live eval, paired with eval_no_ebm in
# compare.md beside the check ("live replay = live eval: N of N equal").
rule live_replay_features:
    input:
        recording="results/iter_{i}/eval_no_ebm.json",
        value="models/iter_{i}/features",
        # The recording's policy: its tokenizer counts the feature value's tokens, and it expands
        # the states the recording never did.
        model="models/iter_{i}/merged",
    output:
        json="results/iter_{i}/replay_features.json",
    log:
        "logs/eval/iter_{i}_replay_features.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_replay_features.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=60,
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        label=features_replay_label,
        # States the recording never expanded are expanded live (the recording's model and seeds,
        # Lean): the replay then equals the live eval (an equality check; docs/value-model.md).
        live=True,
        code=code_digest("replay", "lean", "policy"),
    script:
        "../workflow/scripts/replay.py"


rule eval_features:
    input:
        model="models/iter_{i}/merged",
        ebm="models/iter_{i}/features",
        # Order only: the live replay runs before the live eval it is checked against (and the
        # twin without a value model, which the replay reads, has filled the expansion cache).
        live_replay=ancient("results/iter_{i}/replay_features.json"),
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
    output:
        json="results/iter_{i}/eval_features.json",
    log:
        "logs/eval/iter_{i}_features.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_features.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        label=features_label,
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


# The headline's comparison (the default target): the iterations, the search-longer control and,
# per iteration i >= 1, C against its two twins (rules/common.smk headline_sets).
rule compare:
    input:
        baseline="results/baseline/eval.json",
        iterations=expand(
            "results/iter_{i}/eval.json",
            i=range(lookup(dpath="iterations", within=config)),
        ),
        controls=control_evals(config),
        configs=headline_files(config),
    output:
        md=report(
            "results/compare.md",
            category="across iterations",
            subcategory="compare",
            caption="../workflow/report/compare.rst",
        ),
        json="results/compare.json",
    log:
        "logs/eval/compare.log",
    benchmark:
        "logs/benchmarks/eval/compare.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        configs=headline_sets(config),
        # Read, not declared (no rule names another job's benchmark file): the jobs before this one.
        benchmarks="logs/benchmarks",
        # Read, not declared (a tracked file `burnqed ledger add` changes after runs; a fresh
        # clone must not rerun compare): the looks recorded before this run (docs/confirmation.md).
        ledger="ledger/looks.jsonl",
        # How much of an eval's cached Lean answers Lean may refute before compare.md flags it.
        cache_refuted_max=lookup(dpath="report/cache_refuted_max", within=config),
        code=code_digest("eval_compare"),
    script:
        "../workflow/scripts/eval_compare.py"


# The attribution set's comparison (rule `ablations`): the same, with every value-model
# configuration of every iteration >= 1 — A, S, B beside C, their twins, the replays, the feature
# value, the EBM metrics — so Holm's correction runs over the four configurations' claims.
use rule compare as compare_ablations with:
    input:
        baseline="results/baseline/eval.json",
        iterations=expand(
            "results/iter_{i}/eval.json",
            i=range(lookup(dpath="iterations", within=config)),
        ),
        controls=control_evals(config),
        configs=config_files(config),
    output:
        md=report(
            "results/ablations/compare.md",
            category="ablations",
            subcategory="compare",
            caption="../workflow/report/compare.rst",
        ),
        json="results/ablations/compare.json",
    log:
        "logs/eval/compare_ablations.log",
    benchmark:
        "logs/benchmarks/eval/compare_ablations.tsv"
    params:
        configs=config_sets(config),
        benchmarks="logs/benchmarks",
        ledger="ledger/looks.jsonl",
        code=code_digest("eval_compare"),


# Expert iteration against search only at the same search attempts (Polu et al. 2022;
# burnqed/eval/compute.py), in the default target: iteration 0's searches (pool and noise) are both
# arms' first step; then expert iteration's own search of each iteration and the search-only arm's
# (rules/search.smk search_only: iteration 0's model on the pool theorems it has not proved).  Per
# arm the cumulative pool pass rate against node expansions, generated tokens and value-model
# scorings, the arms paired per theorem on the cumulative solved indicator, each arm's pool curve
# as an eval-shaped JSON (results/compute/), and what training spent beside (never added).
rule compute_report:
    input:
        pool="data/theorems/search_pool.jsonl",
        shared=[
            "results/iter_0/search/manifest.json",
            "results/iter_0/search_noise/manifest.json",
        ],
        expert=comparison_searches(config, "search"),
        search_only=comparison_searches(config, "search_only"),
        # What training spent, stated apart (the base model's record, each training summary).
        base="models/base",
        adapters=expand(
            "models/iter_{i}/adapter",
            i=range(lookup(dpath="iterations", within=config)),
        ),
    output:
        json="results/compute.json",
        md="results/compute.md",
        expert_arm="results/compute/expert_iteration.json",
        search_only_arm="results/compute/search_only.json",
    log:
        "logs/eval/compute.log",
    benchmark:
        "logs/benchmarks/eval/compute.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        # the seed the pool searches sample with (rules/search.smk), in the pool curves' provenance
        seed=seed_of("train"),
        code=code_digest("eval_compute"),
    script:
        "../workflow/scripts/eval_compute.py"


# Polu et al.'s Fig. 2 on the benchmark (burnqed/eval/benchmark_curves.py): search only's eval of
# iteration i >= 1 is iteration 0's model, no value model, evaluated again with a seed salt of its
# own (fresh samples; every other eval is unsalted so that evals pair).  Not in the default target:
# a study that registers the comparison builds it (design.targets).
rule eval_search_only:
    input:
        model="models/iter_0/merged",
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        meta=expand(
            "data/benchmarks/{name}.meta.json",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
    output:
        # Trajectories go beside it (eval_search_only.json -> eval_search_only/), resumable.
        json="results/iter_{i}/eval_search_only.json",
    log:
        "logs/eval/iter_{i}_search_only.log",
    benchmark:
        "logs/benchmarks/eval/iter_{i}_search_only.tsv"
    wildcard_constraints:
        i="[1-9][0-9]*",
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/eval", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=720,
        expansion_cache=lookup(dpath="cache", within=config),
        cache_recheck=cache_recheck_setting(),
    params:
        cfg=lookup(dpath="eval", within=config),
        search=lookup(dpath="search", within=config),
        lean=lookup(dpath="lean", within=config),
        policy=lookup(dpath="policy", within=config),
        seed=seed_of("search"),
        seed_salt=eval_search_only_salt,
        label=eval_search_only_label,
        code=code_digest("eval", "lean", "policy"),
    script:
        "../workflow/scripts/eval.py"


# The two arms of that comparison: per iteration the union of expert iteration's evals against
# search only's (iteration 0's eval is both arms' first step), each arm an eval-shaped curve on the
# benchmark (results/compute/benchmark_*.json) that a study's `benchmark curve` comparison reads.
rule compute_benchmark:
    input:
        benchmark=expand(
            "data/benchmarks/{name}.jsonl",
            name=lookup(dpath="eval/benchmark", within=config),
        ),
        expert=benchmark_curve_evals(config, "eval"),
        search_only=benchmark_curve_evals(config, "eval_search_only"),
    output:
        json="results/compute/benchmark.json",
        md="results/compute/benchmark.md",
        expert_arm="results/compute/benchmark_expert_iteration.json",
        search_only_arm="results/compute/benchmark_search_only.json",
    log:
        "logs/eval/compute_benchmark.log",
    benchmark:
        "logs/benchmarks/eval/compute_benchmark.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        seed=seed_of("search"),
        code=code_digest("eval_benchmark_curves"),
    script:
        "../workflow/scripts/eval_benchmark_curves.py"


# One study seed: the evals the confirmation's primary comparisons read and what they need, nothing
# else (rules/common.smk study_seed_files; docs/performance.md "One study seed").
rule study_seed:
    input:
        study_seed_inputs,
