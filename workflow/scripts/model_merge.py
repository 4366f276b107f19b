from pathlib import Path

import torch

from burnqed.logs import to_log_file
from burnqed.train.export import merge_adapter

torch.set_num_threads(snakemake.threads)
with to_log_file(snakemake.log[0]):
    i = snakemake.input
    merge_adapter(base=Path(i.base), adapter=Path(i.adapter), out=Path(snakemake.output[0]))
