from pathlib import Path

from burnqed.eval.compare import run
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    evals = [Path(snakemake.input.baseline), *map(Path, snakemake.input.iterations)]
    controls = [Path(c) for c in snakemake.input.controls]  # search-longer controls, shown apart
    run(
        evals=evals,
        controls=controls,
        out_md=Path(snakemake.output.md),
        out_json=Path(snakemake.output.json),
        configs=snakemake.params.configs,  # the value-model configurations of each iteration
        benchmarks=Path(snakemake.params.benchmarks),  # the jobs' peak memory so far
        ledger=Path(snakemake.params.ledger),  # the looks recorded before this run
        cache_refuted_max=float(snakemake.params.cache_refuted_max),  # the cache section's flag
    )
