"""``burnqed cache``: look after the expansion cache (:mod:`burnqed.search.cache`).

``stats`` prints its size, shards and entries per kind (policy candidates by model, Lean answers by
toolchain and REPL), answers evicted, temporaries killed writers left, and the hit rates by kind of
every run that used it (each run's record in ``runs/``); ``prune --keep-models`` drops the policy
answers of every other model (a model that matches no answer held is refused: a typo would drop
them all); ``prune --lean --toolchain T`` the Lean answers of a toolchain or REPL (``T``: a
``lean-toolchain`` such as ``leanprover/lean4:v4.9.0``, its whole version ``v4.9.0`` or ``4.9.0`` —
never part of one —, a REPL ``--version`` text, or a settings digest ``stats`` lists), ``prune
--lean --all`` every Lean answer; ``verify`` asks Lean again a ``--sample`` of the stored Lean
questions (:mod:`burnqed.search.cache_verify`) and evicts what it now refutes (exit 1 when it found
any; 3, saying so, when it settled none: nothing drawn, no question kept, every one unreachable or
inconclusive).  The directory is the argument, else the
config's ``cache`` (``--params`` + ``--configfile``, whose ``lean`` section ``verify`` uses).

Example::

    burnqed cache stats --configfile config/demo.yaml
    burnqed cache stats results/cache --json
    burnqed cache prune results/cache --keep-models models/iter_1/merged models/iter_2/merged
    burnqed cache prune results/cache --lean --toolchain leanprover/lean4:v4.9.0
    burnqed cache verify --configfile config/demo.yaml --sample 0.1
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from burnqed.config import add_config_arguments

    p = subparsers.add_parser(
        "cache",
        help="expansion cache: size, entries and hit rates by kind; prune by model or toolchain; "
        "re-check Lean answers",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("action", choices=("stats", "prune", "verify"))
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
    p.add_argument(
        "--lean",
        action="store_true",
        help="prune: Lean answers (of --toolchain T, or --all)",
    )
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--toolchain",
        default=None,
        metavar="T",
        help="prune --lean: the toolchain or REPL whose answers go (a lean-toolchain, its whole "
        "version, a REPL --version text, or a settings digest `stats` lists)",
    )
    g.add_argument("--all", action="store_true", help="prune --lean: every Lean answer")
    p.add_argument(
        "--sample",
        type=float,
        default=1.0,
        metavar="F",
        help="verify: the fraction of this configuration's Lean answers asked again (default 1)",
    )
    p.add_argument(
        "--seed", type=int, default=0, help="verify: which rows the sample draws (default 0)"
    )
    p.add_argument("--json", action="store_true", help="stats, verify: print JSON")
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
        [kind, k["shards"], k["rows"], k["evicted"], f"{k['bytes'] / mib:.1f}"]
        for kind, k in s["kinds"].items()
    ]
    lines += [*_table(["kind", "shards", "entries", "evicted", "MiB"], kinds), ""]
    models = s["kinds"]["policy"].get("rows_by_model") or {}
    if models:
        lines += [
            *_table(["model digest", "policy entries"], [list(m) for m in models.items()]),
            "",
        ]
    lean = s["kinds"]["lean"].get("rows_by_settings") or {}
    if lean:
        rows = [[d, v["rows"], v["lean_toolchain"] or "–", v["lean_version"] or "–",
                 v["repl_version"] or "–"] for d, v in lean.items()]  # fmt: skip
        headers = ["Lean settings", "entries", "lean-toolchain", "lean --version", "REPL"]
        lines += [*_table(headers, rows), ""]
    temps = s.get("temporaries") or {}
    if temps.get("files"):
        lines += [
            f"{temps['files']} temporary file(s), {temps['bytes'] / mib:.1f} MiB, not counted: "
            "shards being written, or left by killed writers (`prune` removes those over an hour "
            "old).",
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


def _versions(label: str) -> set[str]:
    """The whole version numbers a toolchain or REPL label names, with and without a leading
    ``v`` — ``leanprover/lean4:v4.9.0`` → {4.9.0, v4.9.0}; ``Lean (version 4.9.0, …)`` →
    {4.9.0, v4.9.0} — never a part of one (``4.9`` is not ``4.9.0``).

    >>> sorted(_versions("leanprover/lean4:v4.10.0-rc1"))
    ['4.10.0-rc1', 'v4.10.0-rc1']
    """
    found = re.findall(r"(?<![\w.])v?(\d+(?:\.\d+)+(?:-[\w.]+)?)(?![\w.])", label)
    return {v for n in found for v in (n, f"v{n}")}


def _lean_matches(description: dict, value: str) -> bool:
    """Whether a Lean settings description names the toolchain or REPL ``value``: one of its
    labels (:func:`~burnqed.search.cache_store.lean_label`) is ``value`` or names it as a whole
    version (:func:`_versions`) — ``v4.9.0`` matches ``leanprover/lean4:v4.9.0``, while ``4``,
    ``v4.9`` or ``Lean`` match nothing."""
    from burnqed.search.cache_store import lean_label

    for label in lean_label(description).values():
        if label and (str(label) == value or value in _versions(str(label))):
            return True
    return False


def _prune_lean(directory: Path, args: argparse.Namespace) -> dict:
    from burnqed.config import InputError
    from burnqed.search.cache_store import lean_label, prune, settings_descriptions, summary

    if args.all:
        return prune(directory, lambda settings: False, kind="lean", column="settings")
    if args.toolchain is None:
        raise InputError("prune --lean: name the answers to drop (--toolchain T, or --all)")
    descriptions = settings_descriptions(directory)
    held = summary(directory)["kinds"]["lean"].get("rows_by_settings") or {}
    drop = {d for d, desc in descriptions.items() if _lean_matches(desc, args.toolchain)}
    drop |= {d for d in held if d == args.toolchain}
    if not drop:
        known = sorted({str(v) for d in held for v in lean_label(descriptions.get(d)).values()
                        if v} | set(held))  # fmt: skip
        raise InputError(
            f"prune --lean --toolchain {args.toolchain}: no Lean answers of that toolchain or "
            f"REPL here (held: {', '.join(known) or 'none'}); nothing pruned"
        )
    return prune(directory, lambda settings: settings not in drop, kind="lean", column="settings")


def _kept_models(directory: Path, models: list[str]) -> set[str]:
    """The model digests and served names ``--keep-models`` keeps: a model directory here (by its
    fingerprint), a digest or served name the store holds.  One that matches no answer held is
    refused, naming what is held — a typo would otherwise keep nothing and drop every answer."""
    from burnqed.config import InputError
    from burnqed.search.cache import model_fingerprint
    from burnqed.search.cache_store import summary

    held = set(summary(directory)["kinds"]["policy"].get("rows_by_model") or {})
    keep = set()
    for m in models:
        if Path(m).is_dir():
            names = {model_fingerprint(m)}
        elif "/" in m or m.startswith((".", "~")):
            raise InputError(
                f"prune --keep-models {m}: no such model directory here, and no policy answers "
                "of a model served under that name; give its digest (`burnqed cache stats` lists "
                "them) to keep its answers; nothing pruned"
            )
        else:
            names = {m, f"served:{m}"}
        if not names & held:
            raise InputError(
                f"prune --keep-models {m}: no policy answers of that model here (held: "
                f"{', '.join(sorted(held)) or 'none'}); nothing pruned"
            )
        keep |= names
    return keep


def main(args: argparse.Namespace) -> int:
    from burnqed.config import InputError
    from burnqed.search.cache_store import prune, summary

    directory = _directory(args)
    if args.action == "stats":
        s = summary(directory)
        print(json.dumps(s, indent=2) if args.json else stats_markdown(s), end="")
        return 0
    if args.action == "verify":
        return _verify(directory, args)
    if not args.keep_models and not args.lean:
        raise InputError(
            "prune: name what goes (--keep-models MODEL …, or --lean --toolchain T / --lean --all)"
        )
    if args.keep_models:
        keep = _kept_models(directory, args.keep_models)
        counts = prune(directory, lambda model: model in keep)
        print(
            f"kept {counts['kept']} policy entries, dropped {counts['dropped']} "
            f"({counts['shards_replaced']} shard(s) rewritten, {counts['unreadable']} unreadable "
            f"left as they are)",
            file=sys.stderr,
        )
    if args.lean:
        counts = _prune_lean(directory, args)
        print(
            f"kept {counts['kept']} Lean entries, dropped {counts['dropped']} "
            f"({counts['shards_replaced']} shard(s) rewritten, {counts['unreadable']} unreadable "
            f"left as they are)",
            file=sys.stderr,
        )
    return 0


def _verify(directory: Path, args: argparse.Namespace) -> int:
    from burnqed.config import InputError, LeanConfig, load_config
    from burnqed.search.cache_verify import verify

    if not 0.0 < args.sample <= 1.0:
        raise InputError(f"verify --sample {args.sample}: a fraction within (0, 1] expected")
    lean = LeanConfig.from_dict(dict(load_config(args).get("lean") or {}))
    report = verify(directory, lean, sample=args.sample, seed=args.seed)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key in ("rows", "other_settings_rows", "checked", "agreed", "disagreed",
                    "inconclusive", "unreachable", "no_question", "errors", "evicted"):  # fmt: skip
            print(f"{key}={report[key]}")
    if report["agreed"] + report["disagreed"] == 0:  # no answer was settled either way
        print(
            f"cache verify {directory}: checked nothing — {report['rows']} row(s) under this "
            f"Lean's key, {report['checked']} drawn, {report['other_settings_rows']} of other "
            "toolchains or REPLs, "
            f"{report['no_question'] + report['unreachable'] + report['inconclusive']} without a "
            f"verdict, {report['errors']} REPL error(s)",
            file=sys.stderr,
        )
        return 3
    return 1 if report["disagreed"] else 0
