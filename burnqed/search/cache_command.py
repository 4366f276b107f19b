"""``burnqed cache``: look after the expansion cache (:mod:`burnqed.search.cache`).

``stats`` prints its size, shards and entries per kind (policy candidates by model), and the hit
rates by kind of every run that used it (each run's record in ``runs/``); ``prune --keep-models``
drops the policy answers of every other model (Lean answers do not depend on the model and stay).
The directory is the argument, else the config's ``cache`` (``--params`` + ``--configfile``).

Example::

    burnqed cache stats --configfile config/demo.yaml
    burnqed cache stats results/cache --json
    burnqed cache prune results/cache --keep-models models/iter_1/merged models/iter_2/merged
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from burnqed.config import add_config_arguments

    p = subparsers.add_parser(
        "cache",
        help="expansion cache: size, entries and hit rates by kind; prune by model",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("action", choices=("stats", "prune"))
    p.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=None,
        metavar="DIR",
        help="cache directory (default: the config's `cache`)",
    )
    p.add_argument(
        "--keep-models",
        nargs="+",
        default=None,
        metavar="MODEL",
        help="prune: the models whose policy answers stay (model directories, served names or "
        "the digests `stats` lists)",
    )
    p.add_argument("--json", action="store_true", help="stats: print JSON")
    add_config_arguments(p)
    p.set_defaults(func=main)
    return p


def _directory(args: argparse.Namespace) -> Path:
    from burnqed.config import InputError, load_config

    if args.directory is not None:
        directory = args.directory
    else:
        configured = load_config(args).get("cache")
        if not configured:
            raise InputError("no cache directory: give one, or set `cache` in the config")
        directory = Path(configured)
    if not directory.is_dir():
        raise InputError(f"{directory}: no such cache directory")
    return directory


def _table(headers: list[str], rows: list[list]) -> list[str]:
    def line(cells: list) -> str:
        return "| " + " | ".join(str(c) for c in cells) + " |"

    return [line(headers), "|" + "---|" * len(headers), *(line(r) for r in rows)]


def stats_markdown(s: dict) -> str:
    """``burnqed cache stats`` as text: one line per kind, then the recorded runs' hit rates."""
    mib = 1 << 20
    lines = [f"# Expansion cache {s['dir']}: {s['bytes'] / mib:.1f} MiB", ""]
    kinds = [
        [kind, k["shards"], k["rows"], f"{k['bytes'] / mib:.1f}"] for kind, k in s["kinds"].items()
    ]
    lines += [*_table(["kind", "shards", "entries", "MiB"], kinds), ""]
    models = s["kinds"]["policy"].get("rows_by_model") or {}
    if models:
        lines += [
            *_table(["model digest", "policy entries"], [list(m) for m in models.items()]),
            "",
        ]
    rates = [
        [kind, r.get("hits", 0), r.get("misses", 0),
         "–" if r["hit_rate"] is None else f"{100 * r['hit_rate']:.1f}%"]
        for kind, r in s["hit_rates"].items()
    ]  # fmt: skip
    lines += [f"Hit rates over the {s['runs']} run(s) recorded in runs/:", ""]
    lines += _table(["kind", "hits", "misses", "hit rate"], rates)
    return "\n".join(lines) + "\n"


def main(args: argparse.Namespace) -> int:
    from burnqed.config import InputError
    from burnqed.search.cache import model_fingerprint
    from burnqed.search.cache_store import prune, summary

    directory = _directory(args)
    if args.action == "stats":
        s = summary(directory)
        print(json.dumps(s, indent=2) if args.json else stats_markdown(s), end="")
        return 0
    if not args.keep_models:
        raise InputError("prune: name the models to keep (--keep-models MODEL …)")
    # A model is kept by its directory's fingerprint, its served name, or the digest itself.
    keep = {m for m in args.keep_models} | {model_fingerprint(m) for m in args.keep_models}
    counts = prune(directory, lambda model: model in keep)
    print(
        f"kept {counts['kept']} policy entries, dropped {counts['dropped']} "
        f"({counts['shards_replaced']} shard(s) rewritten)",
        file=sys.stderr,
    )
    return 0
