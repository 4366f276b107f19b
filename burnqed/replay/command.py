"""``burnqed replay``: run a recorded eval's search again under another priority, by hand (the same
``run`` a rule would call).

Without ``--live`` the replay is a prediction from the recording alone: it prints, per budget, the
attempts it could replay exactly (every pop recorded: its coverage), the recording's and the
replay's solved counts on the covered theorems, gained and lost there with the exact McNemar p, the
most it could gain (over the recording's trees it cannot solve a theorem the recording did not
solve within its budget), the uncovered theorems apart, the oracle ceiling, the unexpanded pops and
the frontier top-1 of log-prob, the value and their sum.  With ``--live`` it expands what the
recording never did and equals the live eval with that priority: an equality check, not a
prediction.  A recording whose sampling differs from the eval the priority stands for, a model or
search setting whose digest differs from the recording's (unless ``--allow-mismatch`` names it),
is refused in one line naming the field (exit 2).

Example::

    burnqed replay results/iter_0/eval_longer.json --priority oracle \\
        --out results/iter_0/replay_oracle.json --configfile config/demo.yaml
    burnqed replay results/iter_1/eval_no_ebm.json --ebm models/iter_1/ebm \\
        --model models/iter_1/merged --out results/iter_1/replay_ebm.json --configfile config/demo.yaml
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from burnqed.config import add_config_arguments

    p = subparsers.add_parser(
        "replay",
        help="search a recorded eval's trees again under another priority (oracle, EBM, …)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "recording",
        type=Path,
        metavar="EVAL_JSON",
        help="the recorded eval's JSON (or a search's trajectory directory)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="JSON", help="replay JSON to write")
    p.add_argument(
        "--priority",
        choices=("recorded", "logprob", "value", "oracle"),
        default="recorded",
        help="the recording's own (default), log-prob alone, a value model (--ebm), or the oracle "
        "that knows the recorded proof paths",
    )
    p.add_argument(
        "--ebm",
        type=Path,
        default=None,
        metavar="DIR",
        help="value model (implies --priority value)",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="an equality check, not a prediction: expand what the recording never expanded with "
        "its model and seeds, and ask Lean, so the replay equals the live eval with this priority "
        "(default: a prediction from the recording alone, on the attempts it covers; the others "
        "counted apart)",
    )
    p.add_argument(
        "--model",
        default=None,
        help="policy model to load (default: the recording's); refused unless its digest is the "
        "recording's model's",
    )
    p.add_argument(
        "--allow-mismatch",
        default=None,
        metavar="model,search",
        help="replay anyway with a model or search settings (budget, depth limit, pops per step, "
        "attempts) other than the recording's; the replay's provenance records both",
    )
    p.add_argument(
        "--trajectories",
        type=Path,
        default=None,
        metavar="DIR",
        help="the replay's trajectory directory (default: beside --out, named like it)",
    )
    p.add_argument(
        "--recording-trajectories",
        type=Path,
        default=None,
        metavar="DIR",
        help="the recording's trajectory directory (default: the one its JSON names)",
    )
    p.add_argument("--label", default=None, help="row label")
    add_config_arguments(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from burnqed.config import load_config
    from burnqed.replay.stage import replay_markdown, run

    params = load_config(args)
    result = run(
        recording=args.recording,
        out=args.out,
        cfg=params["eval"],
        search=params["search"],
        lean=params["lean"],
        policy=params["policy"],
        priority_name=args.priority,
        ebm=args.ebm,
        live=args.live,
        model=args.model,
        trajectories=args.trajectories,
        recording_trajectories=args.recording_trajectories,
        label=args.label,
        allow_mismatch=args.allow_mismatch,
    )
    print(replay_markdown(result))
    return 0
