from pathlib import Path

from burnqed.ebm.stage import run_metrics
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    run_metrics(
        searches=list(snakemake.input.searches),
        ebm=Path(snakemake.input.ebm),
        embeddings=Path(snakemake.input.embeddings).parent,
        out=Path(snakemake.output.metrics),
        plots=Path(snakemake.output.plots),
        cfg=snakemake.params.cfg,
        seed=snakemake.params.seed,
        split=snakemake.params.split,
    )
