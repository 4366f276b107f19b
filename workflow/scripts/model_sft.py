from pathlib import Path

import torch

from burnqed.logs import to_log_file
from burnqed.train.sft import train_sft

torch.set_num_threads(snakemake.threads)
with to_log_file(snakemake.log[0]):
    i = snakemake.input
    train_sft(
        base=Path(i.base),
        train=Path(i.train),
        val=Path(i.val),
        out=Path(snakemake.output[0]),
        cfg=snakemake.params.cfg,
        iteration=int(snakemake.wildcards.i),
        seed=snakemake.params.seed,
    )
