from pathlib import Path

import torch

from burnqed.logs import to_log_file
from burnqed.search.stage import run

torch.set_num_threads(snakemake.threads)  # the in-process policy backend (CPU demo)
with to_log_file(snakemake.log[0]):
    p = snakemake.params
    run(
        theorems=Path(snakemake.input.theorems),
        model=snakemake.input.model,
        out=Path(snakemake.output[0]).parent,  # the shard's directory; its manifest is written last
        cfg=p.search,
        lean=p.lean,
        policy=p.policy,
        ebm=Path(snakemake.input.ebm) if snakemake.input.get("ebm") else None,  # iterations >= 1
        temperature=p.get("temperature"),
        order=p.get("order", "priority"),  # the noise search's search.noise_order
        seed=p.seed,
        seed_salt=p.get("seed_salt"),  # a search's own draws (rules/common.smk search_seed_salt)
        resume="auto",  # a killed job's finished attempts are kept; a changed job starts afresh
        shard=(int(snakemake.wildcards.shard), p.search["shards"]),
        log_dir=Path(snakemake.log[0]).with_suffix(".repl"),  # this job's REPL stderr logs
        cache=snakemake.resources.get("expansion_cache"),  # a machine setting: rules/common.smk
        cache_recheck=snakemake.resources.get("cache_recheck", 0.0),  # a string: rules/common.smk
    )
