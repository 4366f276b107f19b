from pathlib import Path

from burnqed.eval.compare import run
from burnqed.logs import to_log_file

with to_log_file(snakemake.log[0]):
    evals = [Path(snakemake.input.baseline), *map(Path, snakemake.input.iterations)]
    run(evals=evals, out_md=Path(snakemake.output.md), out_json=Path(snakemake.output.json))
