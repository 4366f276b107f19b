from pathlib import Path

from burnqed.ebm.stage import run_fit_features
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    run_fit_features(
        searches=list(snakemake.input.searches),
        model=snakemake.input.model,
        out=Path(snakemake.output[0]),
        cfg=snakemake.params.cfg,
        seed=snakemake.params.seed,
        split=snakemake.params.split,
        twin=snakemake.params.get("twin"),
        eval_benchmarks=[Path(b) for b in snakemake.input.eval_benchmarks],
        decontamination=snakemake.params.decontamination,
    )
