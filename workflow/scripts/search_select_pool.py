from pathlib import Path

from burnqed.logs import to_log_file
from burnqed.search.selection import run

with to_log_file(snakemake.log[0]):
    run(
        pool=Path(snakemake.input.pool),
        earlier=[Path(m).parent for m in snakemake.input.earlier],  # each search's manifest.json
        out=Path(snakemake.output.pool),
        cfg=snakemake.params.search,
        lean=snakemake.params.lean,
        seed=snakemake.params.seed,
    )
