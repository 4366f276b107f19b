# Model stage (burnqed/train/): the base model, the adapter of every iteration (LoRA / QLoRA; from
# iteration 1 warm-started from adapter i-1 on the tactic pairs plus the proofs of the searches
# before i — trained jointly with the energy head when sft.mode is joint, burnqed/train/joint.py) and
# the merged export; with joint training, the SFT-only adapter of the S configuration beside it.


rule base_model:
    input:
        # Only the demo's tiny model is trained here (from scratch, on the tactic pairs): a
        # pretrained base must not be fetched again because the data changed.
        branch(
            lookup(dpath="model/base", within=config) == "tiny",
            then=["data/tactic_pairs/train.parquet", "data/tactic_pairs/val.parquet"],
            otherwise=[],
        ),
    output:
        directory("models/base"),
    log:
        "logs/model/base.log",
    benchmark:
        "logs/benchmarks/model/base.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/base", within=config)
    resources:
        mem_mb=16000,
        runtime=120,
    params:
        cfg=lookup(dpath="model", within=config),
        seed=seed_of("train"),
        code=code_digest("model_base"),
    script:
        "../workflow/scripts/model_base.py"


rule sft:
    input:
        unpack(sft_warm_start),
        unpack(joint_warm_head),
        base="models/base",
        train="data/tactic_pairs/train.parquet",
        val="data/tactic_pairs/val.parquet",
        eval_benchmarks=decontamination_benchmark_files(config),
    output:
        directory("models/iter_{i}/adapter"),
    log:
        "logs/model/iter_{i}_sft.log",
    benchmark:
        "logs/benchmarks/model/iter_{i}_sft.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: train_threads
    resources:
        gpu=1,
        mem_mb=48000,
        runtime=720,
    params:
        cfg=lookup(dpath="sft", within=config),
        # Joint training: the energy head's architecture and the scorer's pooling.
        ebm=lookup(dpath="ebm", within=config),
        pooling=lookup(dpath="policy/pooling", within=config),
        decontamination=lookup(dpath="data/decontamination", within=config),
        seed=seed_of("train"),
        split=lookup(dpath="split", within=config),
        code=code_digest("model_sft"),
    script:
        "../workflow/scripts/model_sft.py"


# Configuration S: the same iteration trained SFT-only (the path sft.mode: sft takes), the control
# that tells joint training apart from one more round of SFT.
rule sft_only:
    input:
        unpack(sft_warm_start),
        base="models/base",
        train="data/tactic_pairs/train.parquet",
        val="data/tactic_pairs/val.parquet",
        eval_benchmarks=decontamination_benchmark_files(config),
    output:
        directory("models/iter_{i}/configs/S/adapter"),
    log:
        "logs/model/iter_{i}_sft_only.log",
    benchmark:
        "logs/benchmarks/model/iter_{i}_sft_only.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/later_train", within=config)
    resources:
        gpu=1,
        mem_mb=48000,
        runtime=720,
    params:
        cfg=lookup(dpath="sft", within=config),
        ebm=lookup(dpath="ebm", within=config),
        pooling=lookup(dpath="policy/pooling", within=config),
        decontamination=lookup(dpath="data/decontamination", within=config),
        seed=seed_of("train"),
        split=lookup(dpath="split", within=config),
        mode="sft",
        code=code_digest("model_sft"),
    script:
        "../workflow/scripts/model_sft.py"


rule merge:
    input:
        base="models/base",
        adapter="models/iter_{i}/adapter",
    output:
        directory("models/iter_{i}/merged"),
    log:
        "logs/model/iter_{i}_merge.log",
    benchmark:
        "logs/benchmarks/model/iter_{i}_merge.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/merge", within=config)
    resources:
        # The merge runs on the GPU when there is one (a 7B base in bf16 is 15 GB).
        gpu=1,
        mem_mb=64000,
        runtime=60,
    params:
        code=code_digest("model_merge"),
    script:
        "../workflow/scripts/model_merge.py"


rule merge_sft_only:
    input:
        base="models/base",
        adapter="models/iter_{i}/configs/S/adapter",
    output:
        directory("models/iter_{i}/configs/S/merged"),
    log:
        "logs/model/iter_{i}_merge_sft_only.log",
    benchmark:
        "logs/benchmarks/model/iter_{i}_merge_sft_only.tsv"
    priority: job_priority
    conda:
        "../workflow/envs/burnqed.yaml"
    threads: lookup(dpath="threads/merge", within=config)
    resources:
        gpu=1,
        mem_mb=64000,
        runtime=60,
    params:
        code=code_digest("model_merge"),
    script:
        "../workflow/scripts/model_merge.py"
