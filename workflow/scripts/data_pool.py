from burnqed.config import DataConfig
from burnqed.data.stage import build_search_pool
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    cfg = DataConfig.from_dict(snakemake.params.cfg)
    build_search_pool(
        cfg=cfg,
        benchmark_files=snakemake.input.benchmarks,
        eval_benchmarks=list(snakemake.input.eval_benchmarks),
        out=snakemake.output.pool,
        report=snakemake.output.report,
        seed=snakemake.params.seed,
    )
