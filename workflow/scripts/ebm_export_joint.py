from pathlib import Path

from burnqed.logs import to_log_file
from burnqed.train.joint import export_joint_ebm

with to_log_file(snakemake.log[0]):
    i, p = snakemake.input, snakemake.params
    export_joint_ebm(
        adapter=Path(i.adapter),
        merged=Path(i.merged),
        out=Path(snakemake.output[0]),
        pooling=p.pooling,
        # search.energy_weight: fitted, on the pool decisions of theorems the head never saw
        searches=[Path(m).parent for m in i.searches],  # dirs of the manifests
        embeddings=Path(i.embeddings).parent,
        warm_head=Path(i.warm_head) if i.get("warm_head") else None,
        fallback=Path(i.fallback) if i.get("fallback") else None,  # ebm.fallback: depth_twin
        eval_benchmarks=[Path(b) for b in i.eval_benchmarks],
        decontamination=p.decontamination,
        seed=p.seed,
        split=p.split,
    )
