from pathlib import Path

from burnqed.data.benchmarks import build_benchmarks
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    b, split = snakemake.wildcards.benchmark, snakemake.wildcards.split
    build_benchmarks(
        raw={b: snakemake.input.raw},
        names=[b],
        splits=[split],
        out_dir=Path(snakemake.output.jsonl).parent,
    )
