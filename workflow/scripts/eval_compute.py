from pathlib import Path

from burnqed.eval.compute import EXPERT, SEARCH_ONLY, run
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    i, o = snakemake.input, snakemake.output
    run(
        pool=Path(i.pool),
        shared=[Path(m).parent for m in i.shared],  # iteration 0's pool and noise searches
        expert=[Path(m).parent for m in i.expert],  # iterations >= 1, each arm's own search
        search_only=[Path(m).parent for m in i.search_only],
        base=Path(i.base),  # what training spent, stated apart, never added
        adapters=[Path(a) for a in i.adapters],
        out_json=Path(o.json),
        out_md=Path(o.md),
        out_arms={EXPERT: Path(o.expert_arm), SEARCH_ONLY: Path(o.search_only_arm)},
        seed=snakemake.params.seed,
    )
