"""``burnqed report``: the iteration report or the cross-iteration report by hand (the same
functions the Snakemake rules call).

Example::

    burnqed report iteration --eval results/iter_0/eval.json --trajectories results/iter_0/eval \\
        --baseline results/baseline/eval.json --out results/iter_0/report
    burnqed report cross results/baseline/eval.json results/iter_*/eval.json --out results/report
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from burnqed.config import add_config_arguments

    p = subparsers.add_parser(
        "report",
        help="markdown + PNG reports with go/no-go gates (one iteration, or across iterations)",
        description=__doc__.split("\n\n")[0],
    )
    sub = p.add_subparsers(dest="report_kind", required=True, metavar="KIND")
    it = sub.add_parser("iteration", help="report of one iteration's eval")
    it.add_argument("--eval", type=Path, required=True, metavar="JSON", dest="eval_json")
    it.add_argument("--trajectories", type=Path, default=None, metavar="DIR",
                    help="the eval's search output (default: --eval without .json)")  # fmt: skip
    it.add_argument("--baseline", type=Path, default=None, metavar="JSON")
    it.add_argument("--previous", type=Path, default=None, metavar="JSON")
    it.add_argument("--no-ebm", type=Path, default=None, metavar="JSON", help="EBM ablation eval")
    it.add_argument("--ebm-metrics", type=Path, default=None, metavar="JSON")
    it.add_argument("--ebm", type=Path, default=None, metavar="DIR", help="EBM directory")
    it.add_argument("--out", type=Path, required=True, metavar="DIR")
    add_config_arguments(it)
    it.set_defaults(func=main_iteration)

    cr = sub.add_parser("cross", help="report across iterations")
    cr.add_argument("evals", nargs="+", type=Path, metavar="EVAL_JSON")
    cr.add_argument("--no-ebm", type=Path, nargs="*", default=[], metavar="JSON")
    cr.add_argument("--ebm-metrics", type=Path, nargs="*", default=[], metavar="JSON")
    cr.add_argument("--out", type=Path, required=True, metavar="DIR")
    add_config_arguments(cr)
    cr.set_defaults(func=main_cross)


def main_iteration(args: argparse.Namespace) -> int:
    from burnqed.config import load_config
    from burnqed.report.stage import run_iteration

    params = load_config(args)
    run_iteration(
        eval_json=args.eval_json,
        trajectories=args.trajectories or args.eval_json.with_suffix(""),
        out_dir=args.out,
        cfg=params["report"],
        baseline=args.baseline,
        previous=args.previous,
        no_ebm=args.no_ebm,
        ebm_metrics=args.ebm_metrics,
        ebm_dir=args.ebm,
    )
    return 0


def main_cross(args: argparse.Namespace) -> int:
    from burnqed.config import load_config
    from burnqed.report.stage import run_cross

    params = load_config(args)
    run_cross(
        evals=args.evals,
        out_dir=args.out,
        cfg=params["report"],
        no_ebm=args.no_ebm,
        ebm_metrics=args.ebm_metrics,
    )
    return 0
