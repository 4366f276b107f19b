from pathlib import Path

from burnqed.logs import to_log_file
from burnqed.report.stage import run_iteration

with to_log_file(snakemake.log[0]):
    i = snakemake.input

    def optional(name):
        return Path(i.get(name)) if i.get(name) else None

    run_iteration(
        eval_json=Path(i.eval),
        trajectories=Path(i.eval).with_suffix(""),  # the eval's trajectories lie beside its JSON
        out_dir=Path(snakemake.output[0]),
        cfg=snakemake.params.cfg,
        baseline=optional("baseline"),
        previous=optional("previous"),
        no_ebm=optional("no_ebm"),
        ebm_metrics=optional("ebm_metrics"),
        ebm_dir=optional("ebm"),
        configs=snakemake.params.configs,  # the value-model configurations (iterations >= 1)
    )
