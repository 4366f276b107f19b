"""``burnqed data``: the data stage from the command line, with the functions the workflow calls.

``burnqed data`` alone runs the whole stage (benchmarks, tactic pairs, search pool); a subcommand
runs one piece.  Config options (``--params``, ``--configfile``) and ``--data-dir`` go *before* the
subcommand, because they belong to the ``data`` command that all pieces share.

Example::

    burnqed data fetch minif2f                          # download, verify sha256
    burnqed data fetch minif2f --from ~/minif2f.jsonl   # or take a local copy (verified too)
    burnqed data --configfile config/demo.yaml          # the whole stage
    burnqed data --configfile config/demo.yaml pairs    # only data/tactic_pairs/
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from burnqed.config import add_config_arguments, load_config, resolve_seeds

if TYPE_CHECKING:
    from burnqed.config import DataConfig


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "data",
        help="build benchmarks, tactic pairs and the search pool; fetch pinned benchmarks",
        description=(
            "The data stage (SPEC §4.2). Without a subcommand: build data/benchmarks/, "
            "data/tactic_pairs/ and data/theorems/search_pool.jsonl from the `data` section of "
            "the config. Raw sources are local files named in the config; benchmark files are "
            "pinned by sha256 and fetched with `burnqed data fetch`."
        ),
        epilog=(
            "Options above go before the subcommand: "
            "`burnqed data --configfile config/demo.yaml pairs`. "
            "Run `burnqed data SUBCOMMAND --help` for a subcommand's options."
        ),
    )
    add_config_arguments(p)
    p.add_argument(
        "--data-dir",
        type=Path,
        default=Path("data"),
        metavar="DIR",
        help="root of the data layout: DIR/raw/benchmarks, DIR/benchmarks, "
        "DIR/tactic_pairs, DIR/theorems (default: %(default)s)",
    )
    p.set_defaults(func=_run_all)
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")

    f = sub.add_parser(
        "fetch",
        help="download (or copy) a registry benchmark and verify its sha256",
        description="Put the pinned file of benchmark NAME at DIR/raw/benchmarks/<filename>. "
        "The file is hashed before it is written: a file whose sha256 differs from "
        "the registry's is refused, with both hashes in the message. Needs no config.",
    )
    f.add_argument("name", metavar="NAME", help="registry benchmark name (e.g. minif2f)")
    f.add_argument(
        "--from",
        dest="local_path",
        type=Path,
        metavar="PATH",
        help="use this local file instead of downloading (no network needed)",
    )
    f.add_argument(
        "--dest",
        type=Path,
        metavar="PATH",
        help="where to write it (default: DIR/raw/benchmarks/<registry filename>)",
    )
    f.set_defaults(func=_fetch)

    b = sub.add_parser(
        "benchmarks",
        help="write DIR/benchmarks/<name>_<split>.jsonl + .meta.json",
        description="For each benchmark in data.benchmarks or data.search_pool: verify the raw "
        "file's sha256 and write one JSONL of theorems per split with a .meta.json (hashes, "
        "Lean/Mathlib versions, known defects). The generated proplogic benchmark (splits valid, "
        "test) is written whenever a proplogic source is configured.",
    )
    b.set_defaults(func=_benchmarks)

    t = sub.add_parser(
        "pairs",
        help="write DIR/tactic_pairs/{train,val}.parquet + filter_report.json",
        description="Read every data.sources entry, filter (banned words per theorem, empty rows, "
        "dedup, token length) logging each filter's drop count, and split train/val "
        "by theorem name.",
    )
    t.set_defaults(func=_pairs)

    s = sub.add_parser(
        "pool",
        help="write DIR/theorems/search_pool.jsonl",
        description="Collect the data.search_pool statements (benchmark splits, which must be "
        "built first, or sources with statements) into one JSONL.",
    )
    s.set_defaults(func=_pool)


def _reporting_data_errors(func: Callable[[argparse.Namespace], int]):
    """Bad input (a malformed file, a wrong hash, a missing raw file) is a one-line message and
    exit status 2, not a traceback (``burnqed --debug``: the traceback): the message already
    names the file and record."""

    @functools.wraps(func)
    def wrapper(args: argparse.Namespace) -> int:
        from burnqed.data.benchmarks import BenchmarkError, HashMismatchError
        from burnqed.data.decontam import ContaminationError
        from burnqed.data.readers import DataFormatError
        from burnqed.data.schema import SchemaError
        from burnqed.theorems import TheoremFileError

        try:
            return func(args)
        except (
            BenchmarkError,
            HashMismatchError,
            DataFormatError,
            SchemaError,
            TheoremFileError,
            ContaminationError,
            FileNotFoundError,
        ) as e:
            if getattr(args, "debug", False):
                raise
            print(f"burnqed data: {e}", file=sys.stderr)
            return 2

    return wrapper


def _config(args: argparse.Namespace) -> tuple[DataConfig, int]:
    """The ``data`` section and the data's seed (``seeds.data``, else ``seed``)."""
    from burnqed.config import DataConfig

    params = load_config(args)
    return DataConfig.from_dict(params.get("data")), resolve_seeds(params)["data"]


def _benchmark_seed(args: argparse.Namespace) -> int:
    """The held-out sets' seed (``seeds.benchmark``, else ``seed``)."""
    return resolve_seeds(load_config(args))["benchmark"]


def _eval_benchmarks(args: argparse.Namespace) -> list[Path]:
    """The benchmark file(s) the data is decontaminated against
    (:func:`burnqed.config.decontamination_benchmarks`)."""
    from burnqed.config import decontamination_benchmarks

    names = decontamination_benchmarks(load_config(args))
    return [args.data_dir / "benchmarks" / f"{n}.jsonl" for n in names]


@_reporting_data_errors
def _run_all(args: argparse.Namespace) -> int:
    from burnqed.data.stage import run

    cfg, seed = _config(args)
    d = args.data_dir
    run(
        cfg=cfg,
        seed=seed,
        raw_benchmarks_dir=d / "raw" / "benchmarks",
        benchmarks_dir=d / "benchmarks",
        pairs_dir=d / "tactic_pairs",
        search_pool=d / "theorems" / "search_pool.jsonl",
        eval_benchmarks=_eval_benchmarks(args),
        benchmark_seed=_benchmark_seed(args),
    )
    return 0


@_reporting_data_errors
def _fetch(args: argparse.Namespace) -> int:
    from burnqed.data.benchmarks import fetch_benchmark, get_benchmark

    dest = args.dest or args.data_dir / "raw" / "benchmarks" / get_benchmark(args.name).filename
    print(fetch_benchmark(args.name, dest, local_path=args.local_path))
    return 0


@_reporting_data_errors
def _benchmarks(args: argparse.Namespace) -> int:
    from burnqed.data.stage import build_all_benchmarks

    cfg, seed = _config(args)
    build_all_benchmarks(
        cfg=cfg,
        seed=seed,
        raw_dir=args.data_dir / "raw" / "benchmarks",
        out_dir=args.data_dir / "benchmarks",
        benchmark_seed=_benchmark_seed(args),
    )
    return 0


@_reporting_data_errors
def _pairs(args: argparse.Namespace) -> int:
    from burnqed.data.stage import build_tactic_pairs

    cfg, seed = _config(args)
    d = args.data_dir / "tactic_pairs"
    build_tactic_pairs(
        out_train=d / "train.parquet",
        out_val=d / "val.parquet",
        cfg=cfg,
        seed=seed,
        report=d / "filter_report.json",
        eval_benchmarks=_eval_benchmarks(args),
    )
    return 0


@_reporting_data_errors
def _pool(args: argparse.Namespace) -> int:
    from burnqed.data.stage import build_search_pool

    cfg, seed = _config(args)
    build_search_pool(
        cfg=cfg,
        benchmarks_dir=args.data_dir / "benchmarks",
        out=args.data_dir / "theorems" / "search_pool.jsonl",
        seed=seed,
        eval_benchmarks=_eval_benchmarks(args),
        report=args.data_dir / "theorems" / "search_pool.report.json",
    )
    return 0
