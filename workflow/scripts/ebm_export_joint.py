from pathlib import Path

from burnqed.logs import to_log_file
from burnqed.train.joint import export_joint_ebm

with to_log_file(snakemake.log[0]):
    export_joint_ebm(
        adapter=Path(snakemake.input.adapter),
        merged=Path(snakemake.input.merged),
        out=Path(snakemake.output[0]),
        pooling=snakemake.params.pooling,
    )
