"""``burnqed eval``, ``burnqed compare``, ``burnqed summary``: evaluation by hand (the same ``run``
functions the Snakemake rules call); ``burnqed ledger add`` / ``show``: the ledger of looks.

Example::

    burnqed eval --configfile config/demo.yaml --model models/iter_0/merged \\
        --out results/iter_0/eval.json --previous results/baseline/eval.json
    burnqed compare results/baseline/eval.json results/iter_*/eval.json \\
        --control results/iter_0/eval_longer.json --out results/compare.md
    burnqed summary results/iter_0/search/shard_0
    burnqed ledger add results/*/eval*.json
    burnqed timing . --cores 2
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from burnqed.config import add_cache_arguments, add_config_arguments

    p = subparsers.add_parser(
        "eval",
        help="search a pinned benchmark once at the largest budget; solve rate at every budget",
        description=(
            "Evaluate a policy (and optional EBM) on data/benchmarks/<eval.benchmark>.jsonl: "
            "one search at max(eval.budgets) with eval.pass_n attempts, scored at every budget."
        ),
    )
    p.add_argument("--model", required=True, help="policy model: HF directory or served model id")
    p.add_argument("--ebm", type=Path, default=None, metavar="DIR", help="EBM directory (optional)")
    p.add_argument(
        "--benchmark",
        type=Path,
        default=None,
        metavar="JSONL",
        help="benchmark file (default: data/benchmarks/<eval.benchmark>.jsonl)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="JSON", help="eval JSON to write")
    p.add_argument(
        "--trajectories",
        type=Path,
        default=None,
        metavar="DIR",
        help="search output directory (default: beside --out, named like it without .json)",
    )
    p.add_argument("--previous", type=Path, default=None, metavar="JSON", help="previous eval JSON")
    p.add_argument("--label", default=None, help="row label (default: --out's directory name)")
    p.add_argument("--temperature", type=float, default=None, help="sampling temperature")
    p.add_argument("--resume", action="store_true", help="continue an interrupted search")
    p.add_argument(
        "--no-search",
        action="store_true",
        help="only score what --trajectories holds (an unfinished run is reported partial)",
    )
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: params seed)")
    p.add_argument(
        "--ledger",
        type=Path,
        default=Path("ledger/looks.jsonl"),
        metavar="JSONL",
        help="where an eval of a confirmation benchmark records its look (default: %(default)s)",
    )
    add_cache_arguments(p)
    add_config_arguments(p)
    p.set_defaults(func=main_eval)

    c = subparsers.add_parser(
        "compare",
        help="compare eval JSONs across iterations (markdown + JSON)",
        description="Iterations as rows, budgets as columns, cumulative, delta row, newly solved, "
        "and the learning check: each step and each control judged by an exact McNemar test on "
        "per-theorem outcomes.",
    )
    c.add_argument("evals", nargs="+", type=Path, metavar="EVAL_JSON")
    c.add_argument(
        "--control",
        dest="controls",
        action="append",
        type=Path,
        default=[],
        metavar="EVAL_JSON",
        help="a search-longer control (e.g. results/iter_0/eval_longer.json) the last iteration "
        "must beat; repeatable.  Without one the learning check is undecided",
    )
    c.add_argument("--out", type=Path, default=None, metavar="MD", help="markdown to write")
    c.add_argument("--json", type=Path, default=None, metavar="JSON", help="JSON to write")
    c.add_argument(
        "--ledger",
        type=Path,
        default=Path("ledger/looks.jsonl"),
        metavar="JSONL",
        help="the ledger of looks whose designs are counted beside this run's (default: "
        "%(default)s; absent: none)",
    )
    c.set_defaults(func=main_compare)

    led = subparsers.add_parser(
        "ledger",
        help="the ledger of looks at confirmation benchmarks (docs/confirmation.md)",
        description="Merge the looks that evals on confirmation benchmarks recorded into the "
        "tracked ledger, idempotently (sorted, one JSON per line).",
    )
    led_sub = led.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    a = led_sub.add_parser(
        "add",
        help="merge look records into the ledger",
        description="Read every FILE (an eval JSON's look block, a look record, or a JSONL of "
        "them; an eval on a development or pool split holds none) and merge them into the ledger.",
    )
    a.add_argument("files", nargs="+", type=Path, metavar="FILE")
    a.add_argument(
        "--ledger", type=Path, default=Path("ledger/looks.jsonl"), metavar="JSONL",
        help="the ledger file (default: %(default)s)",
    )  # fmt: skip
    a.add_argument(
        "--looked-at",
        default=None,
        metavar="DATE",
        help="ISO 8601 date of the looks made before evals recorded them (an eval JSON on a "
        "confirmation benchmark without a look block is refused without it)",
    )
    a.set_defaults(func=main_ledger_add)
    sh = led_sub.add_parser(
        "show",
        help="the looks of a time window, run by run",
        description="The ledger's looks from --since to --until (ISO 8601; Z, an offset or none "
        "for UTC), one table row a run (commit, seed, benchmark): its times, looks and distinct "
        "designs.",
    )
    sh.add_argument("--since", default=None, metavar="TIME", help="from this time (inclusive)")
    sh.add_argument("--until", default=None, metavar="TIME", help="to this time (exclusive)")
    sh.add_argument(
        "--ledger", type=Path, default=Path("ledger/looks.jsonl"), metavar="JSONL",
        help="the ledger file (default: %(default)s)",
    )  # fmt: skip
    sh.set_defaults(func=main_ledger_show)

    s = subparsers.add_parser(
        "summary",
        help="trajectory statistics of any search output directory",
        description="Statuses, proved rate, nodes, candidates per expansion, errors, time split.",
    )
    s.add_argument("directory", type=Path, metavar="DIR")
    s.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    s.set_defaults(func=main_summary)

    t = subparsers.add_parser(
        "timing",
        help="where a run's wall time went: busy cores, critical path (Snakemake's own files)",
        description="From logs/benchmarks/ and .snakemake/metadata/ of a run directory: wall time, "
        "job-seconds, CPU seconds, the cores' busy fraction, the DAG's critical path and the "
        "lower bound no schedule beats, the run replayed as Snakemake schedules it and, with "
        "--what-if, replayed with other thread counts or job durations; name=value lines "
        "(burnqed.eval.timing).",
    )
    t.add_argument("run", type=Path, nargs="?", default=Path("."), metavar="RUN_DIR",
                   help="the run's directory (default: here)")  # fmt: skip
    t.add_argument("--cores", type=int, default=2, help="the run's --cores (default 2)")
    t.add_argument("--targets", nargs="+", default=(), metavar="FILE",
                   help="only the jobs that built these outputs (e.g. a study seed's evals)")  # fmt: skip
    t.add_argument("--what-if", action="append", default=[], metavar="PATTERN:SPEC",
                   help="replay with the jobs whose names match the glob PATTERN given "
                   "threads=N and/or scale=F (their durations times F), e.g. "
                   "'model/iter_1_sft*:threads=1,scale=1.26'; repeatable, applied in order")  # fmt: skip
    t.add_argument("--json", action="store_true", help="print JSON instead of name=value lines")
    t.set_defaults(func=main_timing)


def main_eval(args: argparse.Namespace) -> int:
    from burnqed.config import cache_dir, cache_recheck, load_config, resolve_seeds
    from burnqed.data.benchmarks import BenchmarkError, HashMismatchError
    from burnqed.eval.stage import run
    from burnqed.search.stage import SearchTerminated

    params = load_config(args)
    benchmark = args.benchmark or Path("data/benchmarks") / f"{params['eval']['benchmark']}.jsonl"
    trajectories = args.trajectories or args.out.with_suffix("")
    try:
        run(
            model=args.model,
            benchmark=benchmark,
            trajectories=trajectories,
            out=args.out,
            cfg=params["eval"],
            search=params["search"],
            lean=params["lean"],
            policy=params["policy"],
            ebm=args.ebm,
            previous=args.previous,
            label=args.label,
            seed=args.seed if args.seed is not None else resolve_seeds(params)["search"],
            temperature=args.temperature,
            resume=args.resume,
            run_search=not args.no_search,
            cache=cache_dir(args, params),
            cache_recheck=cache_recheck(args, params),
        )
    except SearchTerminated as e:
        return e.exit_code
    except (BenchmarkError, HashMismatchError) as e:  # refused before any search
        print(f"burnqed eval: {e}", file=sys.stderr)
        return 2
    # By hand, a look at a confirmation benchmark goes into the ledger at once (the workflow's
    # evals are merged after the run: Snakefile's onsuccess, the study runner).
    from burnqed.eval.ledger import add as add_looks
    from burnqed.eval.ledger import looks_from_file

    if looks_from_file(args.out):
        add_looks(args.ledger, [args.out])
    return 0


def main_compare(args: argparse.Namespace) -> int:
    from burnqed.eval.compare import CompareError, compare, compare_markdown, load_evals, run
    from burnqed.eval.stage import write_json

    try:
        if args.out is not None:
            c = run(evals=args.evals, out_md=args.out, out_json=args.json, controls=args.controls,
                    ledger=args.ledger)  # fmt: skip
        else:
            c = compare(load_evals(args.evals), load_evals(args.controls))
            if args.json is not None:
                write_json(args.json, c)
    except CompareError as e:
        print(f"burnqed compare: {e}", file=sys.stderr)
        return 2
    print(compare_markdown(c))
    return 0


def main_summary(args: argparse.Namespace) -> int:
    from burnqed.eval.summary import summarise_dir, summary_markdown

    s = summarise_dir(args.directory)
    print(json.dumps(s, indent=2, default=str) if args.json else summary_markdown(s))
    return 0


def main_ledger_add(args: argparse.Namespace) -> int:
    from burnqed.eval.ledger import add

    counts = add(args.ledger, args.files, looked_at=args.looked_at)
    print(f"{args.ledger}: {counts['read']} looks read, {counts['before']} records before, "
          f"{counts['after']} after")  # fmt: skip
    return 0


def main_ledger_show(args: argparse.Namespace) -> int:
    from burnqed.eval.ledger import parse_time, read_ledger, window_markdown

    since = parse_time(args.since, "--since") if args.since else None
    until = parse_time(args.until, "--until") if args.until else None
    print(window_markdown(read_ledger(args.ledger), since, until), end="")
    return 0


def main_timing(args: argparse.Namespace) -> int:
    from burnqed.config import InputError
    from burnqed.eval.timing import run_timing, timing_lines

    if args.cores < 1:
        raise InputError(f"--cores must be >= 1, got {args.cores}")
    try:
        t = run_timing(args.run, cores=args.cores, targets=args.targets, what_ifs=args.what_if)
    except ValueError as e:
        raise InputError(f"{args.run}: {e}") from None
    if t is None:
        raise InputError(f"{args.run}: no Snakemake records (.snakemake/metadata) of finished jobs")
    print(json.dumps(t, indent=2) if args.json else "\n".join(timing_lines(t)))
    return 0
