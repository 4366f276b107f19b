from pathlib import Path

from burnqed.logs import to_log_file
from burnqed.search.stage import gather_shards

with to_log_file(snakemake.log[0]):
    gather_shards(shards=[Path(m).parent for m in snakemake.input], out=Path(snakemake.output[0]))
