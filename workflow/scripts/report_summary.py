from pathlib import Path

from burnqed.logs import to_log_file
from burnqed.report.summary import run

with to_log_file(snakemake.log[0]):
    i = snakemake.input
    compute = [i.compute] if isinstance(i.compute, str) else list(i.compute)  # none: 1 iteration
    run(compare_json=Path(i.compare), out=Path(snakemake.output[0]),
        pairs_report=Path(i.pairs_report), benchmarks=Path(snakemake.params.benchmarks),
        seed=snakemake.params.seed, target=snakemake.params.target,
        compute_json=Path(compute[0]) if compute else None)  # fmt: skip
