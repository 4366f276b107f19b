"""``burnqed ebm``: the EBM stage by hand — embed, train, metrics — with the SPEC §3 paths as defaults.

Config options (``--params``, ``--configfile``) go *before* the subcommand.  ``--iteration I``
(default 1) sets the defaults: the searches of iterations ``< I`` plus iteration 0's noise search,
``models/iter_I/merged``, ``results/iter_I/embeddings``, ``models/iter_I/ebm``,
``results/iter_I/ebm_metrics.json`` and ``results/iter_I/ebm_plots``; ``--search`` (repeatable) and
the path options override them.  An eval's trajectories (``results/iter_I/eval/``) are refused as
``--search``, and ``train`` drops or refuses (``data.decontamination``) every theorem one of whose
states is a goal of the evaluation benchmark (``eval.benchmark``).

Example::

    burnqed ebm --configfile config/demo.yaml embed --iteration 1
    burnqed ebm --configfile config/demo.yaml train --iteration 1
    burnqed ebm --configfile config/demo.yaml metrics --iteration 1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from burnqed.config import add_config_arguments, decontamination_benchmarks, resolve_seeds


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "ebm",
        help="energy-based value model: embed states, train the head, embedding metrics",
        description=__doc__.split("\n\n")[0],
        epilog="Options above go before the subcommand: "
        "`burnqed ebm --configfile config/demo.yaml train`.",
    )
    add_config_arguments(p)
    sub = p.add_subparsers(dest="ebm_command", required=True, metavar="SUBCOMMAND")

    def common(s: argparse.ArgumentParser) -> None:
        s.add_argument("--iteration", type=int, default=1, help="iteration I >= 1 (default: 1)")
        s.add_argument("--search", type=Path, action="append", default=None, metavar="DIR",
                       help="search output to learn from (repeatable; default: the searches of "
                       "iterations < I and results/iter_0/search_noise)")  # fmt: skip
        s.add_argument("--embeddings", type=Path, default=None, metavar="DIR",
                       help="embedding cache (default: results/iter_I/embeddings)")  # fmt: skip

    e = sub.add_parser("embed", help="embed every state of the searches (resumable cache)")
    common(e)
    e.add_argument("--model", default=None, help="policy model (default: models/iter_I/merged)")
    e.set_defaults(func=_embed)

    t = sub.add_parser("train", help="train the energy head on InfoNCE groups")
    common(t)
    t.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="EBM directory (default: models/iter_I/ebm)")  # fmt: skip
    t.add_argument("--device", default="auto", help="torch device (default: cuda if available)")
    t.add_argument("--seed", type=int, default=None, help="seed (default: params seed)")
    t.add_argument("--eval-benchmark", type=Path, nargs="*", metavar="JSONL",
                   help="evaluation benchmark(s) the training states are decontaminated against "
                   "(default: data/benchmarks/<eval.benchmark>.jsonl)")  # fmt: skip
    t.set_defaults(func=_train)

    m = sub.add_parser("metrics", help="embedding-quality metrics and plots (+ the EBM's energies)")
    common(m)
    m.add_argument("--ebm", type=Path, default=None, metavar="DIR",
                   help="trained EBM (default: models/iter_I/ebm when it exists)")  # fmt: skip
    m.add_argument("--out", type=Path, default=None, metavar="JSON",
                   help="metrics file (default: results/iter_I/ebm_metrics.json)")  # fmt: skip
    m.add_argument("--plots", type=Path, default=None, metavar="DIR",
                   help="plot directory (default: results/iter_I/ebm_plots)")  # fmt: skip
    m.add_argument("--seed", type=int, default=None, help="seed (default: params seed)")
    m.set_defaults(func=_metrics)


def _searches(args: argparse.Namespace) -> list[Path]:
    from burnqed.ebm import searches_before

    return args.search or [Path(s) for s in searches_before(args.iteration)]


def _embeddings(args: argparse.Namespace) -> Path:
    return args.embeddings or Path(f"results/iter_{args.iteration}/embeddings")


def _embed(args: argparse.Namespace) -> int:
    from burnqed.config import load_config
    from burnqed.ebm.stage import run_embed

    params = load_config(args)
    run_embed(searches=_searches(args), model=args.model or f"models/iter_{args.iteration}/merged",
              out=_embeddings(args), cfg=params["ebm"], policy=params["policy"])  # fmt: skip
    return 0


def _train(args: argparse.Namespace) -> int:
    from burnqed.config import load_config
    from burnqed.data.decontam import ContaminationError
    from burnqed.ebm.stage import run_train

    params = load_config(args)
    benchmarks = args.eval_benchmark
    if benchmarks is None:
        benchmarks = [Path("data/benchmarks") / f"{n}.jsonl"
                      for n in decontamination_benchmarks(params)]  # fmt: skip
    try:
        run_train(searches=_searches(args), embeddings=_embeddings(args),
                  out=args.out or Path(f"models/iter_{args.iteration}/ebm"), cfg=params["ebm"],
                  split=params["split"], seed=args.seed if args.seed is not None else resolve_seeds(params)["train"],
                  device=args.device,
                  eval_benchmarks=benchmarks,
                  decontamination=params["data"].get("decontamination", "refuse"))  # fmt: skip
    except (ContaminationError, FileNotFoundError) as e:
        if getattr(args, "debug", False):
            raise
        print(f"burnqed ebm train: {e}", file=sys.stderr)
        return 2
    return 0


def _metrics(args: argparse.Namespace) -> int:
    from burnqed.config import load_config
    from burnqed.ebm.stage import run_metrics

    params = load_config(args)
    ebm = args.ebm
    default_ebm = Path(f"models/iter_{args.iteration}/ebm")
    if ebm is None and default_ebm.is_dir():
        ebm = default_ebm
    run_metrics(searches=_searches(args), embeddings=_embeddings(args),
                out=args.out or Path(f"results/iter_{args.iteration}/ebm_metrics.json"),
                plots=args.plots or Path(f"results/iter_{args.iteration}/ebm_plots"),
                cfg=params["ebm"], split=params["split"], ebm=ebm,
                seed=args.seed if args.seed is not None else resolve_seeds(params)["train"])  # fmt: skip
    return 0
