# EBM stage (burnqed/ebm/), iterations >= 1: embed every state the earlier searches reached with the
# policy of iteration i, train the goal-conditioned energy head on them, measure the embeddings.
# The embedding cache is append-only and lives beside its manifest (the declared output), so a
# killed or rerun job embeds only what is missing; training resumes from models/iter_{i}/ebm.partial.
rule ebm_embed:
    input:
        model="models/iter_{i}/merged",
        searches=ebm_searches,
    output:
        "results/iter_{i}/embeddings/manifest.json",
    log:
        "logs/ebm/iter_{i}_embed.log",
    benchmark:
        "logs/benchmarks/ebm/iter_{i}_embed.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/ebm", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=240,
    params:
        cfg=lookup(dpath="ebm", within=config),
        policy=lookup(dpath="policy", within=config),
        code=code_digest("ebm_embed", "policy"),
    script:
        "../workflow/scripts/ebm_embed.py"


# The main line's EBM: trained on the frozen embeddings (sft.mode: sft), or the head trained jointly
# with the adapter (sft.mode: joint — configuration C), exported in the scorer's format.
if config["sft"]["mode"] == "joint":

    # Its energy weight (search.energy_weight: fitted) is fitted on the pool decisions of the
    # theorems neither joint training nor its warm start (A's EBM) trained on, embedded by the
    # merged joint model (burnqed.ebm.stage.joint_energy_weight).
    rule ebm_export_joint:
        input:
            unpack(joint_warm_head),
            unpack(joint_fallback),
            adapter="models/iter_{i}/adapter",
            merged="models/iter_{i}/merged",
            embeddings="results/iter_{i}/embeddings/manifest.json",
            searches=ebm_searches,
            eval_benchmarks=decontamination_benchmark_files(config),
        output:
            directory("models/iter_{i}/ebm"),
        log:
            "logs/ebm/iter_{i}_export_joint.log",
        benchmark:
            "logs/benchmarks/ebm/iter_{i}_export_joint.tsv"
        priority: job_priority
        conda:
            "../workflow/envs/burnqed.yaml"
        threads: 1
        resources:
            mem_mb=8000,
            runtime=30,
        params:
            pooling=lookup(dpath="policy/pooling", within=config),
            seed=seed_of("train"),
            split=lookup(dpath="split", within=config),
            decontamination=lookup(dpath="data/decontamination", within=config),
            code=code_digest("ebm_export_joint"),
        script:
            "../workflow/scripts/ebm_export_joint.py"

else:

    rule ebm_train:
        input:
            embeddings="results/iter_{i}/embeddings/manifest.json",
            searches=ebm_searches,
            # Decontamination: no state of the searches may be an evaluation-benchmark goal.
            eval_benchmarks=decontamination_benchmark_files(config),
        output:
            directory("models/iter_{i}/ebm"),
        log:
            "logs/ebm/iter_{i}_train.log",
        benchmark:
            "logs/benchmarks/ebm/iter_{i}_train.tsv"
        priority: job_priority
        conda:
            "../workflow/envs/burnqed.yaml"
        threads: lookup(dpath="threads/ebm", within=config)
        resources:
            gpu=1,
            mem_mb=16000,
            runtime=120,
        params:
            cfg=lookup(dpath="ebm", within=config),
            seed=seed_of("train"),
            split=lookup(dpath="split", within=config),
            decontamination=lookup(dpath="data/decontamination", within=config),
            code=code_digest("ebm_train"),
        script:
            "../workflow/scripts/ebm_train.py"


rule ebm_metrics:
    input:
        embeddings="results/iter_{i}/embeddings/manifest.json",
        searches=ebm_searches,
        ebm="models/iter_{i}/ebm",
    output:
        metrics="results/iter_{i}/ebm_metrics.json",
        plots=report(
            directory("results/iter_{i}/ebm_plots"),
            patterns=["{plot}.png"],
            category="iteration {i}",
            subcategory="EBM and embeddings",
            caption="../workflow/report/ebm_plots.rst",
        ),
    log:
        "logs/ebm/iter_{i}_metrics.log",
    benchmark:
        "logs/benchmarks/ebm/iter_{i}_metrics.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/ebm", within=config)
    resources:
        mem_mb=16000,
        runtime=60,
    params:
        cfg=lookup(dpath="ebm", within=config),
        seed=seed_of("train"),
        split=lookup(dpath="split", within=config),
        code=code_digest("ebm_metrics"),
    script:
        "../workflow/scripts/ebm_metrics.py"


# The decoupled EBMs of the value-model configurations (rules/common.smk value_configs): A on the
# previous model's frozen embeddings, S on the SFT-only model's, B on the joint model's (the main
# line's embeddings); the same searches, groups and seed as the main line's EBM.
rule ebm_embed_config:
    input:
        model=config_embedding_model,
        searches=ebm_searches,
    output:
        "results/iter_{i}/configs/{c}/embeddings/manifest.json",
    log:
        "logs/ebm/iter_{i}_{c}_embed.log",
    benchmark:
        "logs/benchmarks/ebm/iter_{i}_{c}_embed.tsv"
    wildcard_constraints:
        c="A|S",
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/ebm", within=config)
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=240,
    params:
        cfg=lookup(dpath="ebm", within=config),
        policy=lookup(dpath="policy", within=config),
        code=code_digest("ebm_embed", "policy"),
    script:
        "../workflow/scripts/ebm_embed.py"


rule ebm_train_config:
    input:
        embeddings=config_embeddings,
        searches=ebm_searches,
        eval_benchmarks=decontamination_benchmark_files(config),
    output:
        directory("models/iter_{i}/configs/{c}/ebm"),
    log:
        "logs/ebm/iter_{i}_{c}_train.log",
    benchmark:
        "logs/benchmarks/ebm/iter_{i}_{c}_train.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/ebm", within=config)
    resources:
        gpu=1,
        mem_mb=16000,
        runtime=120,
    params:
        cfg=lookup(dpath="ebm", within=config),
        seed=seed_of("train"),
        split=lookup(dpath="split", within=config),
        decontamination=lookup(dpath="data/decontamination", within=config),
        code=code_digest("ebm_train"),
    script:
        "../workflow/scripts/ebm_train.py"


rule ebm_metrics_config:
    input:
        embeddings=config_embeddings,
        searches=ebm_searches,
        ebm="models/iter_{i}/configs/{c}/ebm",
    output:
        metrics="results/iter_{i}/configs/{c}/ebm_metrics.json",
        plots=directory("results/iter_{i}/configs/{c}/ebm_plots"),
    log:
        "logs/ebm/iter_{i}_{c}_metrics.log",
    benchmark:
        "logs/benchmarks/ebm/iter_{i}_{c}_metrics.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/ebm", within=config)
    resources:
        mem_mb=16000,
        runtime=60,
    params:
        cfg=lookup(dpath="ebm", within=config),
        seed=seed_of("train"),
        split=lookup(dpath="split", within=config),
        code=code_digest("ebm_metrics"),
    script:
        "../workflow/scripts/ebm_metrics.py"


# The feature value (burnqed/value/features.py; issue 30 §6), the EBM's control: weights on
# features any Lean state has (goals, hypotheses, tokens of iteration i's policy), fitted on the
# same pool searches' decisions; its directory is a value model like an EBM's.
rule value_features:
    input:
        model="models/iter_{i}/merged",
        searches=ebm_searches,
        eval_benchmarks=decontamination_benchmark_files(config),
    output:
        directory("models/iter_{i}/features"),
    log:
        "logs/ebm/iter_{i}_features.log",
    benchmark:
        "logs/benchmarks/ebm/iter_{i}_features.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        cfg=lookup(dpath="ebm", within=config),
        seed=seed_of("train"),
        split=lookup(dpath="split", within=config),
        decontamination=lookup(dpath="data/decontamination", within=config),
        code=code_digest("value_features"),
    script:
        "../workflow/scripts/value_features.py"


# The depth twin (burnqed/value/features.py, issue 44 §5): the fairest control of a value that wins
# by diving deeper — the number of open goals and the priority's depth term (its depth
# normalisation, fitted on a grid), fitted on the same pool decisions and cross-fitted the same way
# as every value; value-model claims are against the stronger of it and the log-prob twin.
rule value_depth_twin:
    input:
        model="models/iter_{i}/merged",
        searches=ebm_searches,
        eval_benchmarks=decontamination_benchmark_files(config),
    output:
        directory("models/iter_{i}/depth_twin"),
    log:
        "logs/ebm/iter_{i}_depth_twin.log",
    benchmark:
        "logs/benchmarks/ebm/iter_{i}_depth_twin.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        cfg=lookup(dpath="ebm", within=config),
        seed=seed_of("train"),
        split=lookup(dpath="split", within=config),
        decontamination=lookup(dpath="data/decontamination", within=config),
        twin="depth",
        code=code_digest("value_features"),
    script:
        "../workflow/scripts/value_features.py"
