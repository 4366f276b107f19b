from pathlib import Path

import torch

from burnqed.logs import to_log_file
from burnqed.train.joint import train_adapter

torch.set_num_threads(snakemake.threads)
with to_log_file(snakemake.log[0]):
    i, p = snakemake.input, snakemake.params
    mode = p.get("mode")  # the S configuration forces SFT-only
    train_adapter(
        base=Path(i.base),
        train=Path(i.train),
        val=Path(i.val),
        out=Path(snakemake.output[0]),
        cfg={**p.cfg, "mode": mode} if mode else p.cfg,
        ebm=p.ebm,
        pooling=p.pooling,
        iteration=int(snakemake.wildcards.i),
        previous_adapter=Path(i.previous_adapter) if i.get("previous_adapter") else None,
        trajectories=[Path(m).parent for m in i.get("searches", [])],  # dirs of the manifests
        eval_benchmarks=[Path(b) for b in i.eval_benchmarks],
        decontamination=p.decontamination,
        seed=p.seed,
        split=p.split,
        warm_head=Path(i.warm_head) if i.get("warm_head") else None,
    )
