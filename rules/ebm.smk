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
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 2
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


rule ebm_train:
    input:
        embeddings="results/iter_{i}/embeddings/manifest.json",
        searches=ebm_searches,
    output:
        directory("models/iter_{i}/ebm"),
    log:
        "logs/ebm/iter_{i}_train.log",
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 2
    resources:
        gpu=1,
        mem_mb=16000,
        runtime=120,
    params:
        cfg=lookup(dpath="ebm", within=config),
        seed=lookup(dpath="seed", within=config),
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
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: 2
    resources:
        mem_mb=16000,
        runtime=60,
    params:
        cfg=lookup(dpath="ebm", within=config),
        seed=lookup(dpath="seed", within=config),
        code=code_digest("ebm_metrics"),
    script:
        "../workflow/scripts/ebm_metrics.py"
