from pathlib import Path

from burnqed.config import DataConfig
from burnqed.data.benchmarks import build_proplogic_benchmark
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    cfg = DataConfig.from_dict(snakemake.params.cfg).proplogic
    build_proplogic_benchmark(
        out_dir=Path(snakemake.output.jsonl).parent,
        cfg=cfg,
        seed=snakemake.params.seed,
        benchmark_seed=snakemake.params.benchmark_seed,
        splits=[snakemake.wildcards.split],
    )
