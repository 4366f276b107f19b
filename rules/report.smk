# Report stage (burnqed/report/): markdown + PNG reports from DuckDB SQL over the eval trajectories
# and eval JSONs, go/no-go gates (params.yaml `report`) at the top.  results/iter_{i}/report/ per
# iteration; results/report/ across iterations: the headline's (the default target).  The EBM, its
# twins and the ablation exist for i >= 1; its embedding metrics are the `ablations` target's.


rule report:
    input:
        eval="results/iter_{i}/eval.json",
        baseline="results/baseline/eval.json",
        previous=branch(
            evaluate("{i} == '0'"),
            then="results/baseline/eval.json",
            otherwise=evaluate("'results/iter_%d/eval.json' % (int({i}) - 1)"),
        ),
        no_ebm=branch(evaluate("{i} != '0'"), then="results/iter_{i}/eval_no_ebm.json"),
        # The EBM's held-out rank-1 from its ebm.json; its embedding metrics (ebm_metrics.json)
        # are the attribution set's (rule ablations, results/ablations/compare.md).
        ebm=branch(evaluate("{i} != '0'"), then="models/iter_{i}/ebm"),
        configs=iteration_config_files,
    output:
        report(
            directory("results/iter_{i}/report"),
            patterns=["{name}.png", "{name}.md"],
            category="iteration {i}",
            subcategory="report",
            caption="../workflow/report/iteration_report.rst",
        ),
    log:
        "logs/report/iter_{i}.log",
    benchmark:
        "logs/benchmarks/report/iter_{i}.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=30,
    params:
        cfg=lookup(dpath="report", within=config),
        configs=iteration_config_set,
        code=code_digest("report_iteration"),
    script:
        "../workflow/scripts/report_iteration.py"


rule report_cross:
    input:
        baseline="results/baseline/eval.json",
        iterations=expand(
            "results/iter_{i}/eval.json",
            i=range(lookup(dpath="iterations", within=config)),
        ),
        no_ebm=expand(
            "results/iter_{i}/eval_no_ebm.json",
            i=range(1, lookup(dpath="iterations", within=config)),
        ),
        controls=control_evals(config),
        pools=expand(
            "results/iter_{i}/search_pool.jsonl.meta.json",
            i=range(1, lookup(dpath="iterations", within=config)),
        ),
    output:
        report(
            directory("results/report"),
            patterns=["{name}.png", "{name}.md"],
            category="across iterations",
            subcategory="report",
            caption="../workflow/report/cross_report.rst",
        ),
    log:
        "logs/report/cross.log",
    benchmark:
        "logs/benchmarks/report/cross.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        cfg=lookup(dpath="report", within=config),
        # Each iteration's trajectories (beside its eval JSON) give its unique-candidates gate.
        code=code_digest("report_cross"),
    script:
        "../workflow/scripts/report_cross.py"


# The headline's figures in one JSON file (burnqed.report.summary): the default target's last job,
# after every report, so that the peak memory it reads from logs/benchmarks/ covers every other job
# (those files are read, not declared: no rule names another job's benchmark file).
rule summary:
    input:
        compare="results/compare.json",
        pairs_report="data/tactic_pairs/filter_report.json",
        reports=expand(
            "results/iter_{i}/report",
            i=range(lookup(dpath="iterations", within=config)),
        ),
        cross="results/report",
        # Polu's comparison on the pool (none with one iteration)
        compute=[f for f in compute_files(config) if f.endswith("compute.json")],
    output:
        "results/summary.json",
    log:
        "logs/report/summary.log",
    benchmark:
        "logs/benchmarks/report/summary.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        benchmarks="logs/benchmarks",
        seed=lookup(dpath="seed", within=config),
        target="default",
        code=code_digest("report_summary"),
    script:
        "../workflow/scripts/report_summary.py"


# Every figure the README and docs/ quote, the attribution set's included (rule ablations), each
# figure only it builds listed in the file (run.ablations_only): the whole run's last job.
# `burnqed report docs results` copies it to docs/summary.json and redraws the README's figure.
use rule summary as summary_ablations with:
    input:
        compare="results/ablations/compare.json",
        pairs_report="data/tactic_pairs/filter_report.json",
        # Order: after the default target's last job, so the peak memory covers the whole run.
        headline="results/summary.json",
        compute=[f for f in compute_files(config) if f.endswith("compute.json")],
    output:
        "results/ablations/summary.json",
    log:
        "logs/report/summary_ablations.log",
    benchmark:
        "logs/benchmarks/report/summary_ablations.tsv"
    params:
        benchmarks="logs/benchmarks",
        seed=lookup(dpath="seed", within=config),
        target="ablations",
        code=code_digest("report_summary"),
