from pathlib import Path

import torch

from burnqed.eval.stage import run
from burnqed.logs import to_log_file

torch.set_num_threads(snakemake.threads)  # the in-process policy backend (CPU demo)
with to_log_file(snakemake.log[0]):
    i, o, p = snakemake.input, snakemake.output, snakemake.params
    run(
        model=i.model,
        benchmark=Path(i.benchmark[0]),
        trajectories=Path(o.json).with_suffix(
            ""
        ),  # results/iter_0/eval.json -> results/iter_0/eval/
        out=Path(o.json),
        cfg=p.cfg,
        search=p.search,
        lean=p.lean,
        policy=p.policy,
        ebm=Path(i.ebm) if i.get("ebm") else None,
        previous=Path(i.previous) if i.get("previous") else None,
        label=p.get("label"),
        budget_factor=p.get("budget_factor", 1),
        seed=p.seed,
        seed_salt=p.get("seed_salt"),  # rule eval_search_only's fresh draws; None: the shared ones
        resume="auto",  # a killed job's finished attempts are kept; a changed job starts afresh
        temperature=p.get("temperature"),
        log_dir=Path(snakemake.log[0]).with_suffix(".repl"),  # this job's REPL stderr logs
        cache=snakemake.resources.get("expansion_cache"),  # a machine setting: rules/common.smk
        cache_recheck=snakemake.resources.get("cache_recheck", 0.0),  # a string: rules/common.smk
    )
