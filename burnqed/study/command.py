"""``burnqed study register|seeds|run|report|power|criterion``: pre-registered multi-seed studies
(docs/confirmation.md).

Example::

    burnqed study power studies/learning-d3/registration.yaml dev/seed_1 dev/seed_2 dev/seed_3
    burnqed study register studies/learning-d3/registration.yaml
    burnqed study seeds studies/learning-d3/registration.yaml
    burnqed study run studies/learning-d3/registration.yaml --cores 2
    burnqed study report studies/learning-d3/registration.yaml
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "study",
        help="pre-registered multi-seed studies: register, seeds, run, status, report, power",
        description="A study runs a frozen design on seeds its registration's commit decides and "
        "pools each registered comparison with the seed as the replicate.",
    )
    sub = p.add_subparsers(dest="study_command", required=True, metavar="ACTION")

    def registration(q: argparse.ArgumentParser) -> None:
        q.add_argument("registration", type=Path, metavar="REGISTRATION_YAML")
        q.add_argument(
            "--root",
            type=Path,
            default=Path("."),
            metavar="DIR",
            help="the repository root (default: the current directory)",
        )

    r = sub.add_parser(
        "register",
        help="write the design's per-rule digests into the registration",
        description="Check every key, find the rules the targets need (a Snakemake "
        "dry run), write their code and config digests; refuse when one cannot be "
        "computed.",
    )
    registration(r)
    r.set_defaults(func=main_register)

    s = sub.add_parser("seeds", help="the seeds the registration's commit decides, and the ledger")
    registration(s)
    s.add_argument("--ledger", type=Path, default=Path("ledger/looks.jsonl"), metavar="JSONL")
    s.set_defaults(func=main_seeds)

    t = sub.add_parser(
        "status",
        help="which seeds have finished, are running or stopped; cost and time left",
        description="Reads each seed's study_run.json and whether its compared evals exist, "
        "never their contents: a running study stays unread.",
    )
    registration(t)
    t.add_argument("--out", type=Path, default=None, metavar="DIR", help="the seeds' directory")
    t.set_defaults(func=main_status)

    for name, helptext in (
        ("run", "run every seed in its own directory, then the report"),
        ("report", "report.md + report.json from the seeds' directories"),
    ):
        q = sub.add_parser(name, help=helptext)
        registration(q)
        q.add_argument(
            "--out",
            type=Path,
            default=None,
            metavar="DIR",
            help="where the seed_<s> directories are (default: seeds/ beside the registration)",
        )
        q.add_argument("--ledger", type=Path, default=Path("ledger/looks.jsonl"), metavar="JSONL")
        if name == "run":
            q.add_argument("--cores", type=int, default=2, help="each seed's snakemake --cores")
            q.add_argument(
                "--parallel",
                type=int,
                default=1,
                metavar="K",
                help="seeds run at once, each its own snakemake with --cores (default: "
                "%(default)s); their jobs fill the cores one seed leaves idle (docs/performance.md)",
            )
            q.add_argument(
                "--snakemake-arg",
                dest="snakemake_args",
                action="append",
                default=[],
                metavar="ARG",
                help="passed to each seed's snakemake (repeatable)",
            )
            q.set_defaults(func=main_run)
        else:
            q.add_argument(
                "--report-dir",
                type=Path,
                default=None,
                metavar="DIR",
                help="where report.md/json go (default: beside the registration)",
            )
            q.add_argument(
                "--unblind",
                action="store_true",
                help="write an unfinished study's interim figures; recorded in unblindings.jsonl "
                "beside the registration, and its final report fails 'blind until the end'",
            )
            q.add_argument(
                "--post-hoc",
                type=Path,
                default=None,
                metavar="YAML",
                help="fallbacks decided after results were read ({fallbacks: {primary: "
                "fallback}}): reported beside the registered analysis, labelled post hoc",
            )
            q.set_defaults(func=main_report)

    a = sub.add_parser(
        "reanalyse",
        help="a committed report's per-seed figures analysed again with today's code",
        description="When the seeds' directories are gone: the pooled figures recomputed from the "
        "report's per-seed paired counts, its checks as recorded, today's additions (sign test, "
        "realised power, the checks its protocol never recorded) and a post-hoc fallback from "
        "the ledger's looks.",
    )
    registration(a)
    a.add_argument("--ledger", type=Path, default=Path("ledger/looks.jsonl"), metavar="JSONL")
    a.add_argument("--post-hoc", type=Path, default=None, metavar="YAML",
                   help="fallbacks decided after the results were read (labelled post hoc)")  # fmt: skip
    a.set_defaults(func=main_reanalyse)

    w = sub.add_parser(
        "power",
        help="seeds needed, from development seeds' runs",
        description="Per primary comparison: the per-seed differences on the "
        "development runs, their mean and SD, and the seeds a one-sample t-test at "
        "α/m needs for the target power.",
    )
    w.add_argument("registration", type=Path, metavar="REGISTRATION_YAML")
    w.add_argument("development", nargs="+", type=Path, metavar="DEV_RUN_DIR")
    w.add_argument("--power", type=float, default=0.8, help="target power (default: %(default)s)")
    w.add_argument(
        "--seeds",
        type=int,
        default=None,
        help="also give each comparison's power and chance that every seed is positive at this "
        "many seeds (default: the largest number needed)",
    )
    w.add_argument("--json", type=Path, default=None, metavar="JSON", help="write the analysis")
    w.add_argument(
        "--previous",
        type=Path,
        default=None,
        metavar="REPORT_JSON",
        help="a previous study's report.json: a comparison of the same name plans on no less "
        "spread than its seeds realised",
    )
    w.set_defaults(func=main_power)

    k = sub.add_parser(
        "criterion",
        help="judge a design's development runs by the committed development criterion",
        description="Per development seed and check: d in points against the check's margin "
        "(every seed must reach it), then each check's mean against its mean margin; exits 0 "
        "when the design qualifies, 1 when it does not (burnqed.study.criterion).",
    )
    k.add_argument("criterion", type=Path, metavar="CRITERION_YAML")
    k.add_argument("runs", nargs="+", type=Path, metavar="DEV_RUN_DIR")
    k.add_argument("--json", type=Path, default=None, metavar="JSON", help="write the judgement")
    k.add_argument("--markdown", type=Path, default=None, metavar="MD", help="write its tables")
    k.set_defaults(func=main_criterion)

    v = sub.add_parser(
        "variance",
        help="where the spread of each comparison across seeds comes from",
        description="Per comparison of the registration: the variance of the per-run paired "
        "difference between development seeds, split into training and data, the benchmark's "
        "theorems and the evals' sampling (runs of one seed whose evals differ only in "
        "seeds.search); burnqed.study.variance.",
    )
    v.add_argument("registration", type=Path, metavar="REGISTRATION_YAML")
    v.add_argument("runs", nargs="+", type=Path, metavar="DEV_RUN_DIR")
    v.add_argument("--json", type=Path, default=None, metavar="JSON", help="write the analysis")
    v.add_argument("--markdown", type=Path, default=None, metavar="MD", help="write its tables")
    v.set_defaults(func=main_variance)


def main_register(args: argparse.Namespace) -> int:
    from burnqed.study.registration import register

    reg = register(args.registration, args.root)
    print(
        f"{args.registration}: digests of {len(reg['design']['rules'])} rules written; commit it "
        "before any seed runs"
    )
    return 0


def main_seeds(args: argparse.Namespace) -> int:
    from burnqed.eval.ledger import read_ledger
    from burnqed.study.registration import derive_seeds, first_commit, load

    reg = load(args.registration)
    rc = first_commit(args.registration, args.root)
    if rc is None:
        print(f"{args.registration}: not committed; no seeds yet")
        return 1
    seen = {r.get("seed") for r in read_ledger(args.root / args.ledger)}
    for s in derive_seeds(rc["commit"], reg["analysis"]["seeds"]):
        print(f"{s}{'  (in the ledger)' if s in seen else ''}")
    return 0


def main_run(args: argparse.Namespace) -> int:
    from burnqed.study.stage import run

    r = run(
        args.registration,
        root=args.root,
        out=args.out,
        cores=args.cores,
        parallel=args.parallel,
        snakemake_args=args.snakemake_args,
        ledger=args.ledger,
    )
    print(f"study {r['study']}: {r['label']}; decision {r['decision']['verdict']}")
    return 0


def main_status(args: argparse.Namespace) -> int:
    from burnqed.study.stage import status

    st = status(args.registration, root=args.root, out=args.out)
    for r in st["seeds"]:
        cost = "" if r["cost_s"] is None else f", {r['cost_s']:.0f} s"
        why = f": {r['aborted']}" if r.get("aborted") else ""
        print(f"seed {r['seed']}: {r['state']} (sessions: {r['sessions']}{cost}){why}")
    median, left = st["median_seed_s"], st["left_s"]
    print(
        f"study {st['study']}: {st['finished']} of {st['registered']} seeds finished"
        + (f", {st['aborted']} aborted by the design" if st["aborted"] else "")
        + ("" if median is None else f"; a seed {median / 60:.1f} min (median)")
        + ("" if left is None or not left else f"; ≈ {left / 3600:.1f} h left at that rate")
    )
    return 0


def main_report(args: argparse.Namespace) -> int:
    from burnqed.study.stage import report

    r = report(
        args.registration,
        root=args.root,
        out=args.out,
        report_dir=args.report_dir,
        ledger=args.ledger,
        unblind=args.unblind,
        post_hoc=args.post_hoc,
    )
    print(f"study {r['study']}: {r['label']}; decision {r['decision']['verdict']}")
    return 0


def main_reanalyse(args: argparse.Namespace) -> int:
    from burnqed.study.stage import reanalyse

    r = reanalyse(args.registration, root=args.root, ledger=args.ledger, post_hoc=args.post_hoc)
    print(f"study {r['study']}: {r['label']}; decision {r['decision']['verdict']} (reanalysed)")
    return 0


def main_power(args: argparse.Namespace) -> int:
    from burnqed.config import InputError
    from burnqed.eval.stage import write_json
    from burnqed.study.stage import power

    if args.seeds is not None and args.seeds < 2:
        raise InputError(f"--seeds {args.seeds}: at least 2 (the seed is the replicate)")
    p = power(
        args.registration,
        args.development,
        target=args.power,
        at_seeds=args.seeds,
        previous=args.previous,
    )
    if args.json is not None:
        write_json(args.json, p)
    for c in p["comparisons"]:
        at = c.get("at_seeds")
        extra = (
            f" power_at_{at['seeds']}={at['power']:.3f} "
            f"every_seed_positive_at_{at['seeds']}={at['every_seed_positive']:.3f}"
            if at
            else ""
        )
        print(
            f"{c['name']}: mean_difference={c['mean']:.4f} sd={c['sd']:.4f} "
            f"within_sd={c['within_sd']:.4f} sd_planned={c['sd_planned']:.4f} "
            f"seeds_needed={c['seeds_needed']}{extra}"
        )
    print(f"seeds={p['seeds']}")
    print(json.dumps({"method": p["method"]}, ensure_ascii=False))
    return 0


def main_criterion(args: argparse.Namespace) -> int:
    from burnqed.eval.stage import write_json
    from burnqed.study.criterion import judge, markdown

    r = judge(args.criterion, args.runs)
    if args.json is not None:
        write_json(args.json, r)
    md = markdown(r)
    if args.markdown is not None:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(md, encoding="utf-8")
    print(md, end="")
    for s in r["seeds"]:
        for c in s["checks"]:
            name = c["name"].replace(" ", "_")
            d = "none" if c["difference"] is None else f"{c['difference']:.2f}"
            print(f"seed_{s['seed']}.{name}.d={d} passed={int(c['passed'])}")
    print(f"qualifies={int(r['qualifies'])}")
    return 0 if r["qualifies"] else 1


def main_variance(args: argparse.Namespace) -> int:
    from burnqed.eval.stage import write_json
    from burnqed.study.stage import variance
    from burnqed.study.variance import decomposition_markdown

    v = variance(args.registration, args.runs)
    if args.json is not None:
        write_json(args.json, v)
    lines = []
    for c in v["comparisons"]:
        lines += decomposition_markdown(c["name"], c["decomposition"])
        comp = c["decomposition"]["components"]
        print(
            f"{c['name']}: "
            + " ".join(
                f"{k.replace(' ', '_')}={'–' if x is None else f'{x:.6f}'}" for k, x in comp.items()
            )
        )
    if args.markdown is not None:
        args.markdown.write_text("\n".join(lines), encoding="utf-8")
    return 0
