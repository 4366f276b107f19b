from pathlib import Path

from burnqed.eval.compute import run
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    i = snakemake.input
    run(
        expert=[Path(m).parent for m in i.expert],  # iteration 0's search, then each iteration's
        search_only=[Path(m).parent for m in i.search_only],  # iterations >= 1's controls
        training={n: Path(a) for n, a in enumerate(i.adapters)},  # stated apart, never added
        out_json=Path(snakemake.output.json),
        out_md=Path(snakemake.output.md),
    )
