from pathlib import Path

from burnqed.logs import to_log_file
from burnqed.report.stage import run_cross

with to_log_file(snakemake.log[0]):
    i = snakemake.input
    run_cross(
        evals=[Path(i.baseline), *map(Path, i.iterations)],
        out_dir=Path(snakemake.output[0]),
        cfg=snakemake.params.cfg,
        no_ebm=[Path(p) for p in i.no_ebm],
        controls=[Path(p) for p in i.controls],
        pools=[Path(p) for p in i.pools],
    )
