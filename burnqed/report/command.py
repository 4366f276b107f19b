"""``burnqed report``: the iteration report or the cross-iteration report by hand (the same
functions the Snakemake rules call).

Example::

    burnqed report iteration --eval results/iter_0/eval.json --trajectories results/iter_0/eval \\
        --baseline results/baseline/eval.json --out results/iter_0/report
    burnqed report cross results/baseline/eval.json results/iter_*/eval.json --out results/report
    burnqed tree results/iter_0/eval --theorem KEY --out tree.html
    burnqed report summary                 # results/summary.json of a finished run
    burnqed report docs results            # docs/summary.json, the PNG, generated doc text

``burnqed tree`` (registered here beside ``burnqed report``: it is the report package's) writes one
attempt's search tree as a self-contained HTML page (:mod:`burnqed.report.tree`).
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

    su = sub.add_parser("summary", help="results/summary.json: every figure the docs quote "
                        "(with --target ablations, of results/ablations/compare.json)")  # fmt: skip
    su.add_argument("--compare", type=Path, default=Path("results/compare.json"), metavar="JSON")
    su.add_argument("--pairs-report", type=Path, default=Path("data/tactic_pairs/filter_report.json"),
                    metavar="JSON", help="the tactic pairs' filter report (decontamination)")  # fmt: skip
    su.add_argument("--benchmarks", type=Path, default=Path("logs/benchmarks"), metavar="DIR",
                    help="the jobs' Snakemake benchmark files (peak memory)")  # fmt: skip
    su.add_argument("--out", type=Path, default=Path("results/summary.json"), metavar="JSON")
    su.add_argument("--seed", type=int, default=None, help="the run's seed (recorded as is)")
    su.add_argument("--target", choices=["default", "ablations"], default="default",
                    help="the Snakemake target whose compare it reads (recorded; ablations: the "
                    "figures only it builds listed)")  # fmt: skip
    su.set_defaults(func=main_summary)

    do = sub.add_parser(
        "docs",
        help="refresh docs/summary.json (from RESULTS), the README's figure and table, "
        "docs/configuration.md",
    )
    do.add_argument("results", type=Path, nargs="?", default=None, metavar="RESULTS",
                    help="a finished run's results/ (its ablations/summary.json: the docs quote "
                    "the attribution set); without it, regenerate from the committed "
                    "docs/summary.json")  # fmt: skip
    do.add_argument("--run", type=Path, action="append", default=[], metavar="RESULTS",
                    help="publish another seed's finished run beside it (its ablations/summary.json "
                    "→ docs/runs/seed_<seed>.json, exploratory); repeatable")  # fmt: skip
    do.add_argument("--root", type=Path, default=Path("."), metavar="DIR", help="the checkout")
    do.set_defaults(func=main_docs)

    tr = subparsers.add_parser(
        "tree",
        help="one attempt's search tree as a static, self-contained HTML page",
        description="Write one attempt's search tree (states, tactics, outcomes, energies, "
        "log-probabilities, expansion order, the proof path, why the search ended) as one HTML "
        "file that needs no server or network.",
    )
    tr.add_argument("directory", type=Path, metavar="DIR",
                    help="a search or eval output directory (or the eval JSON beside one)")  # fmt: skip
    tr.add_argument("--theorem", required=True, metavar="KEY", help="the theorem's key")
    tr.add_argument("--attempt", type=int, default=None, metavar="N",
                    help="attempt (default: the proved one whose proof came first, else the first)")  # fmt: skip
    tr.add_argument("--open-depth", type=int, default=2, metavar="D",
                    help="subtrees shown open down to this depth (the proof path always is)")  # fmt: skip
    tr.add_argument("--out", type=Path, required=True, metavar="HTML")
    tr.set_defaults(func=main_tree)


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


def main_summary(args: argparse.Namespace) -> int:
    from burnqed.report.summary import run

    run(compare_json=args.compare, out=args.out, pairs_report=args.pairs_report,
        benchmarks=args.benchmarks, seed=args.seed, target=args.target)  # fmt: skip
    return 0


def main_docs(args: argparse.Namespace) -> int:
    from burnqed.report.docs import refresh

    refresh(args.root, args.results, runs=args.run)
    return 0


def main_tree(args: argparse.Namespace) -> int:
    import logging

    from burnqed.report.tree import write_tree

    row = write_tree(args.directory, theorem=args.theorem, attempt=args.attempt, out=args.out,
                     open_depth=args.open_depth)  # fmt: skip
    logging.getLogger(__name__).info(
        "%s attempt %d (%s, ended by %s, %d nodes) → %s", row["theorem"], row["attempt"],
        row["status"], row["ended_by"], row["nodes_total"], args.out,
    )  # fmt: skip
    return 0
