"""The model stage (SPEC §4.7): base model, SFT adapter, merged export — one function per artifact.

=============================  ==============================================  =====================
artifact                       function                                        module
=============================  ==============================================  =====================
``models/base/``               ``build_base(out=, cfg=, pairs=, seed=)``       :mod:`.base`
``models/iter_{i}/adapter/``   ``train_sft(base=, train=, val=, out=, cfg=,    :mod:`.sft`
                               iteration=, previous_adapter=,                  (:mod:`.positives`)
                               trajectories=, eval_benchmarks=, seed=)``
``models/iter_{i}/merged/``    ``merge_adapter(base=, adapter=, out=)``        :mod:`.export`
=============================  ==============================================  =====================

Each writes into ``<out>.tmp`` and renames it when done (:mod:`.artifacts`), logs step metrics to
``metrics.jsonl`` in the output, and records how the artifact was made in a JSON file beside it.
Importing this package is cheap: torch, transformers, peft and trl are imported when a function runs.

Example (the CPU demo's iteration 0, as ``burnqed train`` runs it)::

    from pathlib import Path
    from burnqed.config import SFTConfig
    from burnqed.train import build_base, merge_adapter, train_sft

    pairs = Path("data/tactic_pairs")
    build_base(out=Path("models/base"), cfg={"base": "tiny"}, pairs=pairs / "train.parquet",
               val=pairs / "val.parquet", seed=0)
    train_sft(base=Path("models/base"), train=pairs / "train.parquet", val=pairs / "val.parquet",
              out=Path("models/iter_0/adapter"), cfg=SFTConfig(quantization="none").to_dict(), seed=0)
    merge_adapter(base=Path("models/base"), adapter=Path("models/iter_0/adapter"),
                  out=Path("models/iter_0/merged"))
"""

from burnqed.train.base import TinyBaseConfig, build_base
from burnqed.train.examples import TrainingDataError
from burnqed.train.export import MergeError, merge_adapter
from burnqed.train.sft import plan_sft, train_sft

__all__ = [
    "MergeError",
    "TinyBaseConfig",
    "TrainingDataError",
    "build_base",
    "merge_adapter",
    "plan_sft",
    "train_sft",
]
