from pathlib import Path

import torch

from burnqed.ebm.stage import run_train
from burnqed.logs import to_log_file

torch.set_num_threads(snakemake.threads)

with to_log_file(snakemake.log[0]):
    run_train(
        searches=list(snakemake.input.searches),
        out=Path(snakemake.output[0]),
        embeddings=Path(snakemake.input.embeddings).parent,
        cfg=snakemake.params.cfg,
        seed=snakemake.params.seed,
        split=snakemake.params.split,
        eval_benchmarks=[Path(b) for b in snakemake.input.eval_benchmarks],
        decontamination=snakemake.params.decontamination,
    )
