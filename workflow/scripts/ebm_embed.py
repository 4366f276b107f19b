from pathlib import Path

import torch

from burnqed.ebm.stage import run_embed
from burnqed.logs import to_log_file

torch.set_num_threads(snakemake.threads)

with to_log_file(snakemake.log[0]):
    run_embed(
        searches=list(snakemake.input.searches),
        model=snakemake.input.model,
        out=Path(snakemake.output[0]).parent,
        cfg=snakemake.params.cfg,
        policy=snakemake.params.policy,
    )
