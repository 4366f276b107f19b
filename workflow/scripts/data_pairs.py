from burnqed.config import DataConfig
from burnqed.data.stage import build_tactic_pairs
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    out = snakemake.output
    build_tactic_pairs(
        out_train=out.train,
        out_val=out.val,
        report=out.report,
        cfg=DataConfig.from_dict(snakemake.params.cfg),
        seed=snakemake.params.seed,
        eval_benchmarks=list(snakemake.input.eval_benchmarks),
    )
