from pathlib import Path

from burnqed.logs import to_log_file
from burnqed.report.summary import run

with to_log_file(snakemake.log[0]):
    i = snakemake.input
    run(compare_json=Path(i.compare), out=Path(snakemake.output[0]),
        pairs_report=Path(i.pairs_report), benchmarks=Path(snakemake.params.benchmarks),
        seed=snakemake.params.seed, target=snakemake.params.target)  # fmt: skip
