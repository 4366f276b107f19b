from pathlib import Path

import torch

from burnqed.logs import to_log_file
from burnqed.train.base import build_base

torch.set_num_threads(snakemake.threads)
with to_log_file(snakemake.log[0]):
    # input: (train, val) tactic pairs for the demo's tiny model, nothing for a pretrained base
    pairs, val = [Path(f) for f in snakemake.input] or [None, None]
    build_base(
        out=Path(snakemake.output[0]),
        cfg=snakemake.params.cfg,
        pairs=pairs,
        val=val,
        seed=snakemake.params.seed,
    )
