from pathlib import Path

from burnqed.eval.benchmark_curves import run
from burnqed.eval.compute import EXPERT, SEARCH_ONLY
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    i, o = snakemake.input, snakemake.output
    run(
        benchmark=Path(i.benchmark[0]),
        expert=[Path(e) for e in i.expert],  # iterations 0 …: each iteration's own eval
        search_only=[Path(e) for e in i.search_only],  # iterations 1 …: iteration 0's model again
        out_json=Path(o.json),
        out_md=Path(o.md),
        out_arms={EXPERT: Path(o.expert_arm), SEARCH_ONLY: Path(o.search_only_arm)},
        seed=snakemake.params.seed,
    )
