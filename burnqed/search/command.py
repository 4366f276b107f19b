"""``burnqed search``: run the search stage by hand (the same ``run`` the Snakemake rule calls).

Options override the ``search`` section of the validated parameters (``--params`` + ``--configfile``
overlays); the result is checked like any configuration.  SIGTERM/SIGINT flush the finished attempts
and exit with status 143; ``--resume`` then continues where it stopped.  More infrastructure errors
than ``search.max_error_fraction`` exit with status 1 (finished attempts kept; ``--resume`` retries
the errors).

Example::

    burnqed search --configfile config/demo.yaml --theorems data/benchmarks/proplogic_test.jsonl \\
        --model models/iter_0/merged --max-nodes 64 --out results/debug/search
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected I/N (e.g. 0/4), got {text!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise argparse.ArgumentTypeError(f"shard {text}: need 0 <= I < N")
    return i, n


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from burnqed.config import SEARCH_ORDERS, add_cache_arguments, add_config_arguments

    p = subparsers.add_parser(
        "search",
        help="best-first proof search over a theorem file into a trajectory directory",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--theorems",
        type=Path,
        required=True,
        metavar="JSONL",
        help="theorem file (data/theorems/*.jsonl or data/benchmarks/*.jsonl)",
    )
    p.add_argument("--model", required=True, help="policy model: HF directory or served model id")
    p.add_argument(
        "--ebm",
        type=Path,
        default=None,
        metavar="DIR",
        help="trained EBM directory (value model); default: none",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=None,
        help="sampling temperature (default: search.temperature, or "
        "search.temperature_with_ebm with --ebm)",
    )
    p.add_argument(
        "--order",
        choices=SEARCH_ORDERS,
        default="priority",
        help="how each search pops its frontier: priority (best-first, the default) or random "
        "(a seeded random order, as the noise search's search.noise_order)",
    )
    p.add_argument("--max-nodes", type=int, default=None, help="override search.max_nodes")
    p.add_argument(
        "--num-candidates", type=int, default=None, help="override search.num_candidates"
    )
    p.add_argument("--concurrency", type=int, default=None, help="override search.concurrency")
    p.add_argument("--attempts", type=int, default=None, help="override search.attempts")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="trajectory directory")
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue --out: keep its finished (theorem, attempt) pairs, retry its errors",
    )
    p.add_argument(
        "--shard",
        type=_shard,
        default=None,
        metavar="I/N",
        help="search only shard I of N of the theorems",
    )
    p.add_argument("--seed", type=int, default=None, help="sampling seed (default: params seed)")
    p.add_argument(
        "--seed-salt",
        default=None,
        metavar="SALT",
        help="the search's own salt: candidates draw from burnqed.policy.salted_seed(seed, SALT), "
        "as the rules' searches do (the noise search: search_noise/iter_0; iteration i's: "
        "search/iter_i); its manifest records it (default: none, the evals' way)",
    )
    p.add_argument("--log-dir", type=Path, default=None, help="directory for REPL stderr logs")
    p.add_argument(
        "--ledger",
        type=Path,
        default=Path("ledger/looks.jsonl"),
        metavar="JSONL",
        help="where a search of a confirmation benchmark records its look (default: "
        "%(default)s; docs/confirmation.md)",
    )
    add_cache_arguments(p)
    add_config_arguments(p)
    p.set_defaults(func=main)
    return p


def main(args: argparse.Namespace) -> int:
    from burnqed.config import (
        cache_dir,
        cache_recheck,
        load_config,
        resolve_seeds,
        validate_params,
    )
    from burnqed.search.stage import SearchTerminated, TooManyErrors, run

    params = load_config(args)
    search = dict(params.get("search") or {})
    for key in ("max_nodes", "num_candidates", "concurrency", "attempts"):
        value = getattr(args, key)
        if value is not None:
            search[key] = value
    # A bad override fails here exactly like a bad params.yaml value, naming the key.
    validate_params({**params, "search": search}, source="burnqed search options")
    seed = args.seed if args.seed is not None else resolve_seeds(params)["train"]
    try:
        manifest = run(
            theorems=args.theorems,
            model=args.model,
            out=args.out,
            cfg=search,
            lean=params.get("lean") or {},
            policy=params.get("policy") or {},
            ebm=args.ebm,
            temperature=args.temperature,
            order=args.order,
            resume=args.resume,
            seed=seed,
            seed_salt=args.seed_salt,
            shard=args.shard,
            log_dir=args.log_dir,
            cache=cache_dir(args, params),
            cache_recheck=cache_recheck(args, params),
        )
    except SearchTerminated as e:
        return e.exit_code
    except TooManyErrors as e:
        print(f"burnqed search: {e}", file=sys.stderr)
        return e.exit_code
    record_look(args, manifest, seed)
    return 0


def record_look(args: argparse.Namespace, manifest: dict, seed: int) -> None:
    """A search of a confirmation benchmark by hand is a look at it: ``look.json`` in the output
    directory and a record in the ledger (docs/confirmation.md).  Any other theorem file: none."""
    import json
    import logging

    from burnqed.data.looks import add_records, search_look
    from burnqed.provenance import git_commit

    look = search_look(args.theorems, manifest, model=args.model, ebm=args.ebm, seed=seed)
    if look is None:
        return
    look["git_commit"] = git_commit()
    (Path(args.out) / "look.json").write_text(json.dumps(look, indent=1, sort_keys=True) + "\n")
    n = add_records(args.ledger, [look])
    logging.getLogger(__name__).warning(
        "%s is a confirmation benchmark: this search is a look, recorded in %s (%d records)",
        args.theorems, args.ledger, n)  # fmt: skip
