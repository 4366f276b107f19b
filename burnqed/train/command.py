"""``burnqed train``: the model stage from the command line — base model, SFT adapter, merge.

Each subcommand calls the same function its Snakemake rule calls, with the paths of the SPEC §3
layout as defaults.  Config options (``--params``, ``--configfile``) go *before* the subcommand, as
for ``burnqed data``.

Example::

    burnqed train --configfile config/demo.yaml base        # models/base/ (tiny: trained from scratch)
    burnqed train --configfile config/demo.yaml sft         # models/iter_0/adapter/
    burnqed train --configfile config/demo.yaml merge       # models/iter_0/merged/
    burnqed train --configfile config/demo.yaml sft --iteration 1   # warm start from iter_0's adapter
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path

from burnqed.config import (
    add_config_arguments,
    decontamination_benchmarks,
    load_config,
    resolve_seeds,
)

PAIRS = Path("data/tactic_pairs")
MODELS = Path("models")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="build the base model, fine-tune an adapter (LoRA/QLoRA), merge it",
        description=(
            "The model stage (SPEC §4.7). `base` makes models/base/ from the `model` section "
            "(a hub model made local, or the demo's tiny Llama trained from scratch on the tactic "
            "pairs); `sft` trains models/iter_I/adapter/ from the `sft` section; `merge` writes "
            "models/iter_I/merged/ (base + adapter, full precision, sharded safetensors)."
        ),
        epilog="Options above go before the subcommand: "
        "`burnqed train --configfile config/demo.yaml sft`.",
    )
    add_config_arguments(p)
    sub = p.add_subparsers(dest="train_command", required=True, metavar="SUBCOMMAND")

    b = sub.add_parser(
        "base",
        help="models/base/: local copy of model.base, or the tiny model trained from scratch",
        description="Write models/base/. For model.base = tiny, train the tiny Llama from scratch "
        "on --pairs and measure it on --val; otherwise copy the local directory or download "
        "the hub model once.",
    )
    b.add_argument("--out", type=Path, default=MODELS / "base", metavar="DIR",
                   help="output directory (default: %(default)s)")  # fmt: skip
    b.add_argument("--pairs", type=Path, default=PAIRS / "train.parquet", metavar="PARQUET",
                   help="training tactic pairs (tiny only; default: %(default)s)")  # fmt: skip
    b.add_argument("--val", type=Path, default=PAIRS / "val.parquet", metavar="PARQUET",
                   help="held-out pairs for the tiny model's accuracy check "
                   "(default: %(default)s; --no-val skips it)")  # fmt: skip
    b.add_argument("--no-val", dest="val", action="store_const", const=None,
                   help="skip the held-out check")  # fmt: skip
    b.set_defaults(func=_run_base)

    s = sub.add_parser(
        "sft",
        help="models/iter_I/adapter/: LoRA or QLoRA fine-tuning on the tactic pairs",
        description="Fine-tune --base with the `sft` section; keep the adapter with the lowest "
        "validation loss, with training_summary.json and hyperparameters.json beside it.",
    )
    s.add_argument("--iteration", type=int, default=0, metavar="I",
                   help="expert iteration (default: %(default)s)")  # fmt: skip
    s.add_argument("--base", type=Path, default=MODELS / "base", metavar="DIR",
                   help="base model directory (default: %(default)s)")  # fmt: skip
    s.add_argument("--train", type=Path, default=PAIRS / "train.parquet", metavar="PARQUET",
                   help="training tactic pairs (default: %(default)s)")  # fmt: skip
    s.add_argument("--val", type=Path, default=PAIRS / "val.parquet", metavar="PARQUET",
                   help="validation tactic pairs (default: %(default)s)")  # fmt: skip
    s.add_argument("--out", type=Path, metavar="DIR",
                   help="adapter directory (default: models/iter_I/adapter)")  # fmt: skip
    s.add_argument("--previous-adapter", type=Path, metavar="DIR",
                   help="adapter to warm-start from at I > 0 (default: models/iter_{I-1}/adapter)")  # fmt: skip
    s.add_argument("--trajectories", type=Path, nargs="*", metavar="DIR",
                   help="searches whose verified proofs are mixed in at I > 0 (default: "
                   "results/iter_J/search for J < I and results/iter_0/search_noise)")  # fmt: skip
    s.add_argument("--eval-benchmark", type=Path, nargs="*", metavar="JSONL",
                   help="benchmark file(s) kept out of the training data (default: "
                   "data/benchmarks/<eval.benchmark>.jsonl)")  # fmt: skip
    s.set_defaults(func=_run_sft)

    m = sub.add_parser(
        "merge",
        help="models/iter_I/merged/: base + adapter merged, sharded safetensors + tokenizer",
        description="Reload --base unquantized, merge --adapter into it, save, and check that the "
        "result reloads, matches base+adapter and generates a tactic.",
    )
    m.add_argument("--iteration", type=int, default=0, metavar="I",
                   help="expert iteration (default: %(default)s)")  # fmt: skip
    m.add_argument("--base", type=Path, default=MODELS / "base", metavar="DIR",
                   help="base model directory (default: %(default)s)")  # fmt: skip
    m.add_argument("--adapter", type=Path, metavar="DIR",
                   help="adapter directory (default: models/iter_I/adapter)")  # fmt: skip
    m.add_argument("--out", type=Path, metavar="DIR",
                   help="merged model directory (default: models/iter_I/merged)")  # fmt: skip
    m.add_argument("--max-shard-size", default="2GB", metavar="SIZE",
                   help="largest safetensors shard, e.g. 2GB or 500MB (default: %(default)s)")  # fmt: skip
    m.set_defaults(func=_run_merge)


def _reporting_data_errors(run: Callable[[argparse.Namespace], None]) -> Callable[..., int]:
    """A missing or malformed input is the user's to fix: one line naming the file, exit 2."""

    @functools.wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        from burnqed.data.decontam import ContaminationError
        from burnqed.theorems import TheoremFileError
        from burnqed.train.examples import TrainingDataError

        try:
            run(args)
        except (TrainingDataError, ContaminationError, TheoremFileError, FileNotFoundError) as e:
            if getattr(args, "debug", False):
                raise
            print(f"burnqed train {args.train_command}: {e}", file=sys.stderr)
            return 2
        return 0

    return wrapper


def _iteration_dir(i: int) -> Path:
    return MODELS / f"iter_{i}"


@_reporting_data_errors
def _run_base(args: argparse.Namespace) -> None:
    from burnqed.train.base import build_base

    params = load_config(args)
    build_base(
        out=args.out,
        cfg=params["model"],
        pairs=args.pairs,
        seed=resolve_seeds(params)["train"],
        val=args.val,
    )


@_reporting_data_errors
def _run_sft(args: argparse.Namespace) -> None:
    from burnqed.train.positives import trajectory_dirs
    from burnqed.train.sft import train_sft

    params = load_config(args)
    i = args.iteration
    previous = args.previous_adapter
    if previous is None and i > 0:
        previous = _iteration_dir(i - 1) / "adapter"
    trajectories = args.trajectories
    if trajectories is None:
        trajectories = trajectory_dirs(i)
    benchmarks = args.eval_benchmark
    if benchmarks is None:
        benchmarks = [Path("data/benchmarks") / f"{n}.jsonl"
                      for n in decontamination_benchmarks(params)]  # fmt: skip
    train_sft(
        base=args.base,
        train=args.train,
        val=args.val,
        out=args.out or _iteration_dir(i) / "adapter",
        cfg=params["sft"],
        iteration=i,
        previous_adapter=previous,
        trajectories=trajectories,
        eval_benchmarks=benchmarks,
        decontamination=params["data"].get("decontamination", "refuse"),
        seed=resolve_seeds(params)["train"],
        split=params["split"],
    )


@_reporting_data_errors
def _run_merge(args: argparse.Namespace) -> None:
    from burnqed.train.export import merge_adapter

    i = args.iteration
    merge_adapter(
        base=args.base,
        adapter=args.adapter or _iteration_dir(i) / "adapter",
        out=args.out or _iteration_dir(i) / "merged",
        max_shard_size=args.max_shard_size,
    )
