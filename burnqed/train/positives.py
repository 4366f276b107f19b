"""Positive trajectory steps: the (state, tactic) pairs on verified proof paths of earlier searches.

SFT of iteration ``i ≥ 1`` learns from the proofs its predecessors found (SPEC §3, §4.7): every step
on the proof path of an attempt whose summary says ``status = 'proved'`` **and** ``verified`` (the
whole-file re-check), in the searches ``results/iter_{j}/search/`` (``j < i``) and iteration 0's
noise search ``results/iter_0/search_noise/``.  The parts are read with DuckDB through
:func:`burnqed.trajectory.open_duckdb` (a sharded search directory is read shard by shard); parts a
reader skips (corrupt, orphaned) are reported in the result, never fatal.

A step is the proof-path node joined to its parent: ``state_before`` = the parent's state, ``tactic``
= the node's tactic, ``depth`` = the parent's depth (the step's index in the proof, as in tactic
pairs).  Steps are returned as a tactic-pair table (``source`` = the search's label, e.g.
``iter_0/search``), de-duplicated on (state, tactic) across all searches, earlier searches first —
so one prompt format and one decontamination check serve pairs and steps alike.

Example::

    >>> from pathlib import Path
    >>> steps = read_positive_steps({"iter_0/search": Path("results/iter_0/search")})  # doctest: +SKIP
    >>> steps.counts["iter_0/search"]["unique_steps"]                                   # doctest: +SKIP
    212
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from burnqed.data.schema import TACTIC_PAIR_SCHEMA
from burnqed.split import TheoremSplit
from burnqed.trajectory import open_duckdb, search_part_dirs

log = logging.getLogger(__name__)

RESULTS = Path("results")
MANIFEST = "manifest.json"  # written by the search stage when a search (or its gather) is complete

_STEPS_SQL = """
select c.theorem, p.state as state_before, c.tactic, coalesce(c.state, '') as state_after,
       p.depth as depth
from nodes c
join nodes p on p.theorem = c.theorem and p.attempt = c.attempt and p.node_id = c.parent_id
join summary s on s.theorem = c.theorem and s.attempt = c.attempt
where c.on_proof_path and s.status = 'proved' and s.verified
  and c.tactic is not null and p.state is not null
order by c.theorem, c.attempt, p.depth
"""

_COUNTS_SQL = """
select count(*) as attempts,
       count(*) filter (where status = 'proved' and verified) as proved_verified,
       count(*) filter (where status = 'proved' and not verified) as proved_unverified,
       count(distinct theorem) filter (where status = 'proved' and verified) as theorems_proved
from summary
"""


def trajectory_dirs(iteration: int, results: Path = RESULTS) -> dict[str, Path]:
    """The searches SFT of ``iteration`` learns from: label → directory (none at iteration 0)."""
    dirs = {f"iter_{j}/search": Path(results) / f"iter_{j}" / "search" for j in range(iteration)}
    if iteration > 0:
        dirs["iter_0/search_noise"] = Path(results) / "iter_0" / "search_noise"
    return dirs


def label_of(directory: Path) -> str:
    """``results/iter_0/search_noise`` → ``iter_0/search_noise`` (the source name of its steps)."""
    directory = Path(directory)
    return f"{directory.parent.name}/{directory.name}"


def _part_dirs(directory: Path) -> list[Path]:
    """:func:`burnqed.trajectory.search_part_dirs`, warning when the search wrote no parts."""
    shards = search_part_dirs(directory)
    if not shards:
        log.warning("%s: no trajectory parts (no summary/ here or in shard_*/)", directory)
    return shards


@dataclass(frozen=True)
class PositiveSteps:
    """De-duplicated positive steps of all the searches, and what was read from each."""

    table: pa.Table  # TACTIC_PAIR_SCHEMA; source = the search's label
    counts: dict[str, dict[str, int]]  # label → attempts, proved_verified, …, steps, unique_steps
    skipped: list[str] = field(default_factory=list)  # "<part>: <reason>" of every skipped part

    def to_json(self) -> dict[str, Any]:
        return {"per_source": self.counts, "skipped_parts": self.skipped}


def _read_one(label: str, directory: Path) -> tuple[pa.Table, dict[str, int], list[str]]:
    tables, skipped = [], []
    counts = {"attempts": 0, "proved_verified": 0, "proved_unverified": 0, "theorems_proved": 0}
    for d in _part_dirs(Path(directory)):
        con, skip = open_duckdb(d)
        try:
            skipped += skip
            row = con.execute(_COUNTS_SQL).fetchall()[0]
            for k, v in zip(counts, row, strict=True):
                counts[k] += int(v or 0)
            tables.append(con.sql(_STEPS_SQL).to_arrow_table())
        finally:
            con.close()
    n = sum(t.num_rows for t in tables)
    if tables:
        steps = pa.concat_tables(tables)
    else:
        steps = pa.table({k: pa.array([], pa.string()) for k in
                          ("theorem", "state_before", "tactic", "state_after")}
                         ).append_column("depth", pa.array([], pa.int32()))  # fmt: skip
    steps = steps.append_column("source", pa.array([label] * n, pa.string()))
    steps = steps.select(TACTIC_PAIR_SCHEMA.names).cast(TACTIC_PAIR_SCHEMA)
    if counts["proved_unverified"]:
        log.warning(
            "%s: %d proved attempt(s) failed whole-proof verification; their steps are not used",
            label,
            counts["proved_unverified"],
        )
    return steps, {**counts, "steps": n}, skipped


def read_positive_steps(searches: Mapping[str, Path] | Sequence[Path]) -> PositiveSteps:
    """The positive steps of ``searches`` (label → directory, or directories labelled by
    :func:`label_of`), de-duplicated on (state_before, tactic), earlier searches winning."""
    if not isinstance(searches, Mapping):
        searches = {label_of(Path(d)): Path(d) for d in searches}
    tables, counts, skipped = [], {}, []
    seen: set[tuple[str, str]] = set()
    for label, directory in searches.items():
        steps, c, skip = _read_one(label, Path(directory))
        skipped += skip
        keys = zip(
            steps.column("state_before").to_pylist(), steps.column("tactic").to_pylist(),
            strict=True,
        )  # fmt: skip
        keep = []
        for key in keys:
            keep.append(key not in seen)
            seen.add(key)
        steps = steps.filter(pa.array(keep, pa.bool_()))
        c["unique_steps"] = steps.num_rows
        counts[label] = c
        tables.append(steps)
        log.info(
            "%s: %d attempts, %d proved and verified (%d theorems): %d steps, %d new",
            label, c["attempts"], c["proved_verified"], c["theorems_proved"], c["steps"],
            c["unique_steps"],
        )  # fmt: skip
    table = pa.concat_tables(tables) if tables else TACTIC_PAIR_SCHEMA.empty_table()
    return PositiveSteps(table=table, counts=counts, skipped=skipped)


class StepSplit(NamedTuple):
    """Steps split by theorem: trained on, validated on (checkpoint selection), tested on."""

    train: pa.Table
    val: pa.Table
    test: pa.Table


def split_steps_by_theorem(table: pa.Table, split: TheoremSplit) -> StepSplit:
    """``(train, val, test)`` of the steps, every step of a theorem on one side: the run's one
    theorem split (:meth:`burnqed.split.TheoremSplit.sides`), so a theorem stays on its side in
    every later iteration (a theorem validated or tested on at iteration 1 is not trained on at
    iteration 2) and the value model holds out the same theorems."""
    sides = split.sides(table.column("theorem").to_pylist())
    val, test = sides["val"], sides["test"]

    def rows(names: set[str]) -> pa.Array:
        return pc.is_in(table.column("theorem"), value_set=pa.array(sorted(names), pa.string()))

    return StepSplit(
        train=table.filter(pc.invert(rows(val | test))),
        val=table.filter(rows(val)),
        test=table.filter(rows(test)),
    )
