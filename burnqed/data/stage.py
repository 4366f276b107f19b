"""The data stage (SPEC §4.2): raw sources and the benchmark registry in, training data out.

Outputs (paths as the workflow lays them out; every one written atomically):

- ``data/tactic_pairs/train.parquet``, ``val.parquet`` — tactic pairs
  (:data:`~burnqed.data.schema.TACTIC_PAIR_SCHEMA`, zstd), split by theorem name;
- ``data/tactic_pairs/filter_report.json`` — rows read per source, each filter's drop counts, the
  decontamination check against the evaluation benchmark(s), the split sizes, the config and seed;
- ``data/benchmarks/<name>_<split>.jsonl`` + ``.meta.json`` — see :mod:`burnqed.data.benchmarks`;
- ``data/theorems/search_pool.jsonl`` — the statements searched for new training data (and, when
  asked, ``search_pool.report.json``: theorems per entry and the decontamination check).

Decontamination (:mod:`burnqed.data.decontam`): given the evaluation benchmark file(s), no theorem
stating one of their statements (up to renaming, at any of its states, checked before any filter)
reaches the tactic pairs or the search pool; ``data.decontamination``
says whether such data is refused (the stage fails, naming them) or dropped (counted and named).

:func:`run` does all of it; :func:`build_tactic_pairs`, :func:`build_search_pool` and
:func:`~burnqed.data.benchmarks.build_benchmarks` are the pieces the Snakemake rules and the
``burnqed data`` subcommands call.

Example::

    >>> from burnqed.config import DataConfig
    >>> cfg = DataConfig.from_dict({"sources": [{"name": "proplogic", "format": "proplogic"}],
    ...                             "benchmarks": ["proplogic"], "tokenizer": "bytes",
    ...                             "search_pool": [{"source": "proplogic"}]})
    >>> run(cfg=cfg, seed=0)                                       # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from burnqed import __version__
from burnqed.config import DataConfig
from burnqed.data.benchmarks import REGISTRY, benchmark_paths, build_benchmarks
from burnqed.data.decontam import BenchmarkIndex, check_pairs, check_theorems
from burnqed.data.filters import FilterStep, filter_pairs, load_token_counter, split_by_theorem
from burnqed.data.readers import PAIR_READERS, STATEMENT_READERS, DataFormatError
from burnqed.data.schema import TACTIC_PAIR_SCHEMA, validate_tactic_pairs
from burnqed.theorems import Theorem, read_theorems, write_theorems

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TacticPairSummary:
    """What :func:`build_tactic_pairs` did (also written as ``filter_report.json``)."""

    source_rows: dict[str, int]  # rows read per source, before any filter
    filters: tuple[FilterStep, ...]
    train_rows: int
    train_theorems: int
    val_rows: int
    val_theorems: int
    decontamination: dict | None = None  # DecontaminationCheck.to_json(); None: not checked

    def to_json(self) -> dict:
        d = asdict(self)
        d["filters"] = [f.to_json() for f in self.filters]
        return d


def _benchmark_index(eval_benchmarks: Sequence[Path]) -> BenchmarkIndex | None:
    """The statements to keep out of training data; None (and a warning) when none are given."""
    if not eval_benchmarks:
        log.warning("no evaluation benchmark given: decontamination is not checked")
        return None
    return BenchmarkIndex.load(eval_benchmarks)


# --------------------------------------------------------------------------------------------
# Sources


def _source_where(spec: Mapping) -> str:
    return f"data.sources[{spec.get('name')!r}] (format {spec.get('format')!r})"


def _source_path(spec: Mapping) -> Path:
    """The source's local copy; a missing one says which config entry names it."""
    path = Path(spec["path"])
    if not path.exists():
        raise DataFormatError(
            f"{_source_where(spec)}: {path} does not exist; download the dataset and point "
            f"`path` at the local copy (burnqed never fetches training sources itself)"
        )
    return path


def read_source_pairs(spec: Mapping, *, cfg: DataConfig, seed: int) -> pa.Table | None:
    """The tactic pairs of one ``data.sources`` entry, or None for a statements-only format."""
    name, fmt = spec["name"], spec["format"]
    if fmt == "proplogic":
        from burnqed.data.proplogic import traced_pairs, training_theorems

        return traced_pairs(training_theorems(cfg.proplogic, seed=seed), source=name)
    reader = PAIR_READERS.get(fmt)
    if reader is None:
        if fmt in STATEMENT_READERS:
            log.info("%s: statements only (no tactic states), no pairs", _source_where(spec))
            return None
        raise DataFormatError(f"{_source_where(spec)}: unknown format")
    table = reader(_source_path(spec), source=name)
    validate_tactic_pairs(table, where=f"{_source_where(spec)} reader output")
    return table


def read_source_statements(spec: Mapping, *, cfg: DataConfig, seed: int) -> list[Theorem]:
    """The theorem statements of one ``data.sources`` entry (for the search pool)."""
    fmt = spec["format"]
    if fmt == "proplogic":
        from burnqed.data.proplogic import training_theorems

        return training_theorems(cfg.proplogic, seed=seed)
    reader = STATEMENT_READERS.get(fmt)
    if reader is None:
        raise DataFormatError(
            f"{_source_where(spec)}: this format has no theorem statements, so it cannot be in "
            f"data.search_pool (formats with statements: "
            f"{sorted([*STATEMENT_READERS, 'proplogic'])})"
        )
    return reader(_source_path(spec))


# --------------------------------------------------------------------------------------------
# Tactic pairs


def _write_parquet(table: pa.Table, path: Path) -> None:
    validate_tactic_pairs(table, where=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, tmp, compression="zstd")
    tmp.replace(path)


def build_tactic_pairs(
    *,
    out_train: Path,
    out_val: Path,
    cfg: DataConfig,
    seed: int,
    report: Path | None = None,
    sources: Sequence[Mapping] | None = None,
    eval_benchmarks: Sequence[Path] = (),
) -> TacticPairSummary:
    """Read every source (``cfg.sources`` unless ``sources`` is given), decontaminate against
    ``eval_benchmarks`` (every state, before any filter), filter, split by theorem and write ``out_train``/``out_val`` (and
    ``report``, the JSON filter report)."""
    sources = cfg.sources if sources is None else sources
    index = _benchmark_index(eval_benchmarks)  # a missing benchmark fails before the reading
    tables, source_rows = [], {}
    for spec in sources:
        table = read_source_pairs(spec, cfg=cfg, seed=seed)
        if table is None:
            continue
        source_rows[spec["name"]] = table.num_rows
        log.info(
            "source %s: %d rows, %d theorems",
            spec["name"],
            table.num_rows,
            len(set(table.column("theorem").to_pylist())),
        )
        tables.append(table)
    pairs = pa.concat_tables(tables) if tables else TACTIC_PAIR_SCHEMA.empty_table()
    if pairs.num_rows == 0:
        log.warning("no tactic pairs were read from %d source(s)", len(sources))
    # Decontamination first: a filter that drops a theorem's root (or any) row must not hide it.
    decontamination = None
    if index is not None:
        pairs, check = check_pairs(
            pairs, index, mode=cfg.decontamination, what="tactic pairs", where=str(out_train)
        )
        decontamination = check.to_json()
    count_tokens = load_token_counter(cfg.tokenizer)
    kept, steps = filter_pairs(
        pairs, banned_words=cfg.banned_words, max_tokens=cfg.max_tokens, count_tokens=count_tokens
    )
    train, val = split_by_theorem(kept, val_fraction=cfg.val_fraction, seed=seed)
    _write_parquet(train, Path(out_train))
    _write_parquet(val, Path(out_val))
    summary = TacticPairSummary(
        source_rows=source_rows,
        filters=tuple(steps),
        train_rows=train.num_rows,
        train_theorems=len(set(train.column("theorem").to_pylist())),
        val_rows=val.num_rows,
        val_theorems=len(set(val.column("theorem").to_pylist())),
        decontamination=decontamination,
    )
    if report is not None:
        report = Path(report)
        report.parent.mkdir(parents=True, exist_ok=True)
        body = {
            **summary.to_json(),
            "seed": seed,
            "config": cfg.to_dict(),
            "created_by": f"burnqed {__version__}",
        }
        tmp = report.with_name(report.name + ".tmp")
        tmp.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(report)
    return summary


# --------------------------------------------------------------------------------------------
# Search pool


def build_search_pool(
    *,
    cfg: DataConfig,
    out: Path,
    seed: int,
    benchmarks_dir: Path | None = None,
    benchmark_files: Sequence[Path] = (),
    eval_benchmarks: Sequence[Path] = (),
    report: Path | None = None,
) -> int:
    """Write the ``cfg.search_pool`` statements to ``out`` (JSONL); return how many.

    Statements of ``eval_benchmarks`` are refused or dropped (``cfg.decontamination``); ``report``
    (JSON) records the theorems per entry and that check.

    Entries are ``{benchmark, split}`` (the file ``<benchmark>_<split>.jsonl`` among
    ``benchmark_files``, else in ``benchmarks_dir``; so build benchmarks first) or ``{source}`` (a
    ``data.sources`` entry whose format has statements).  A name seen twice keeps its first
    statement; a clash with a *different* statement is logged as a warning.
    """
    index = _benchmark_index(eval_benchmarks)
    given = {Path(f).name: Path(f) for f in benchmark_files}
    sources = {s["name"]: s for s in cfg.sources}
    pool: dict[str, Theorem] = {}
    per_entry: dict[str, int] = {}
    for i, entry in enumerate(cfg.search_pool):
        if "benchmark" in entry:
            split = entry.get("split", "")
            jsonl, _ = benchmark_paths(Path(benchmarks_dir or "."), entry["benchmark"], split)
            jsonl = given.get(jsonl.name, jsonl)
            if not jsonl.exists():
                raise DataFormatError(
                    f"data.search_pool[{i}]: {jsonl} not found (is {entry['benchmark']!r} in "
                    f"data.benchmarks and split {split!r} one of its splits?)"
                )
            theorems = list(read_theorems(jsonl))
            what = f"{entry['benchmark']}_{split}"
        elif "source" in entry:
            spec = sources.get(entry["source"])
            if spec is None:
                raise DataFormatError(
                    f"data.search_pool[{i}]: unknown source {entry['source']!r} "
                    f"(data.sources has {sorted(sources)})"
                )
            theorems = read_source_statements(spec, cfg=cfg, seed=seed)
            what = f"source {entry['source']}"
        else:
            raise DataFormatError(
                f"data.search_pool[{i}]: needs `benchmark` (+ `split`) or `source`"
            )
        added = clashes = 0
        for t in theorems:
            first = pool.get(t.key)
            if first is None:
                pool[t.key] = t
                added += 1
            elif first.formal_statement != t.formal_statement:
                clashes += 1
        if clashes:
            log.warning(
                "search pool: %d theorem(s) of %s reuse a key with another statement; "
                "the first statement is kept",
                clashes,
                what,
            )
        log.info("search pool: %d theorems from %s", added, what)
        per_entry[what] = added
    theorems = list(pool.values())
    decontamination = None
    if index is not None:
        theorems, check = check_theorems(
            theorems, index, mode=cfg.decontamination, what="search pool", where=str(out)
        )
        decontamination = check.to_json()
    n = write_theorems(Path(out), theorems)
    log.info("search pool: %d theorems → %s", n, out)
    if report is not None:
        body = {
            "theorems": n,
            "per_entry": per_entry,
            "decontamination": decontamination,
            "seed": seed,
            "config": cfg.to_dict(),
            "created_by": f"burnqed {__version__}",
        }
        report = Path(report)
        tmp = report.with_name(report.name + ".tmp")
        tmp.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        tmp.replace(report)
    return n


# --------------------------------------------------------------------------------------------
# The whole stage


def benchmarks_to_build(cfg: DataConfig) -> tuple[str, ...]:
    """``data.benchmarks``, plus any benchmark the search pool reads, plus the generated
    ``proplogic`` benchmark whenever a ``proplogic`` source is configured (its held-out splits are
    the demo's search pool and eval set)."""
    names = list(cfg.benchmarks)
    names += [e["benchmark"] for e in cfg.search_pool if "benchmark" in e]
    if any(s["format"] == "proplogic" for s in cfg.sources):
        names.append("proplogic")
    return tuple(dict.fromkeys(names))


def build_all_benchmarks(
    *, cfg: DataConfig, seed: int, raw_dir: Path, out_dir: Path, benchmark_seed: int | None = None
) -> list[Path]:
    """:func:`~burnqed.data.benchmarks.build_benchmarks` for :func:`benchmarks_to_build`, registry
    files read from ``raw_dir/<registry filename>`` (where ``burnqed data fetch`` puts them)."""
    names = benchmarks_to_build(cfg)
    raw = {n: Path(raw_dir) / REGISTRY[n].filename for n in names if n in REGISTRY}
    return build_benchmarks(
        raw=raw, out_dir=Path(out_dir), names=names, proplogic=cfg.proplogic, seed=seed,
        benchmark_seed=benchmark_seed,
    )  # fmt: skip


def run(
    *,
    cfg: DataConfig,
    seed: int,
    raw_benchmarks_dir: Path = Path("data/raw/benchmarks"),
    benchmarks_dir: Path = Path("data/benchmarks"),
    pairs_dir: Path = Path("data/tactic_pairs"),
    search_pool: Path = Path("data/theorems/search_pool.jsonl"),
    eval_benchmarks: Sequence[Path] = (),
    benchmark_seed: int | None = None,
) -> None:
    """Benchmarks, then tactic pairs, then the search pool (which may read the benchmarks); both
    decontaminated against ``eval_benchmarks`` (built first, when they are among the benchmarks).
    ``seed`` is the data's, ``benchmark_seed`` (None: ``seed``) the held-out sets'."""
    build_all_benchmarks(cfg=cfg, seed=seed, raw_dir=raw_benchmarks_dir, out_dir=benchmarks_dir,
                         benchmark_seed=benchmark_seed)  # fmt: skip
    pairs_dir = Path(pairs_dir)
    build_tactic_pairs(
        out_train=pairs_dir / "train.parquet",
        out_val=pairs_dir / "val.parquet",
        cfg=cfg,
        seed=seed,
        report=pairs_dir / "filter_report.json",
        eval_benchmarks=eval_benchmarks,
    )
    search_pool = Path(search_pool)
    build_search_pool(
        cfg=cfg,
        benchmarks_dir=Path(benchmarks_dir),
        out=search_pool,
        seed=seed,
        eval_benchmarks=eval_benchmarks,
        report=search_pool.with_name(search_pool.stem + ".report.json"),
    )
