from pathlib import Path

from burnqed.logs import to_log_file
from burnqed.replay.stage import run

with to_log_file(snakemake.log[0]):
    i, p = snakemake.input, snakemake.params
    run(
        recording=Path(i.recording),
        out=Path(snakemake.output.json),
        cfg=p.cfg,
        search=p.search,
        lean=p.lean,
        policy=p.policy,
        ebm=Path(i.value),
        model=i.get("model"),  # the policy embedding the states (else the recording's)
        label=p.label,
        live=bool(p.get("live", False)),  # expand live what the recording never did
    )
