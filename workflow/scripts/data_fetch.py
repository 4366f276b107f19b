from burnqed.data.benchmarks import fetch_benchmark
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    fetch_benchmark(snakemake.wildcards.benchmark, snakemake.output[0])
