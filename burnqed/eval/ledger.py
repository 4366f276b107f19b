"""The ledger of looks: every eval on a *confirmation* benchmark is a recorded look.

A look (:func:`look_record`) says which design saw which benchmark's outcomes, with which seed,
when, and what it saw: the benchmark (name, split, sha256), the seed, the **design** — the model's
content digest, the value model's (null without one) and a digest of the search configuration the
eval ran with (:func:`search_config_digest`: the eval and search sections, the sampling block and
the temperature) — the date, the headline counts (theorems evaluated, solved at the largest budget)
and the git commit (the ledger adds the eval's label).  The eval stage (:mod:`burnqed.eval.stage`) writes it into the eval JSON's
``look`` block when the benchmark's role is ``confirmation``
(:func:`burnqed.data.benchmarks.benchmark_role`); evals on development or pool splits are not
looks.  Its ``looked_at`` is clock time (:data:`burnqed.eval.stage.CLOCK_FIELDS`).

``burnqed ledger add FILES…`` merges looks into a tracked file, ``ledger/looks.jsonl``, after the
jobs: no job writes a tracked file while another runs.  ``burnqed ledger show --since T --until T``
lists the looks of a time window run by run (:func:`window_markdown`): what a claim such as "no
test look while the design was developed" rests on.  The merge is idempotent, commutative and
associative: two records of the same look (everything but ``looked_at``, ``label`` and
``git_commit`` equal) are one, and the earliest wins; the file is sorted, one JSON object per line
with sorted keys, so the same looks give the same bytes.  :func:`designs_seen` counts the distinct
designs that have looked at a benchmark (by sha256) with a seed: ``compare.md`` and the study
report print it, over the ledger plus the run's own looks.

Example::

    burnqed ledger add results/*/eval*.json results/iter_*/configs/*/eval*.json
    >>> a = {"benchmark": {"sha256": "b"}, "seed": 0, "design": {"model": "m1"}}
    >>> designs_seen([a, {**a, "design": {"model": "m2"}}, a], sha256="b", seed=0)
    2
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from burnqed.config import InputError
from burnqed.data.benchmarks import CONFIRMATION, ROLES
from burnqed.data.looks import (  # noqa: F401  (the ledger's records: re-exported here)
    INCIDENTAL,
    KIND,
    LEDGER,
    _canonical,
    _check,
    add_records,
    ledger_bytes,
    merge,
    read_ledger,
    write_ledger,
)

log = logging.getLogger(__name__)


def search_config_digest(e: Mapping[str, Any]) -> str:
    """16 hex digits over what the eval searched with (``provenance.config.eval`` and ``.search``,
    ``provenance.sampling``, the temperature): two evals of one model and value model with the
    same digest are the same design."""
    prov = e.get("provenance") or {}
    cfg = prov.get("config") or {}
    what = {
        "eval": cfg.get("eval"),
        "search": cfg.get("search"),
        "sampling": prov.get("sampling"),
    }
    return hashlib.sha256(_canonical(what).encode()).hexdigest()[:16]


def _digest(block: Any) -> str | None:
    if not isinstance(block, Mapping):
        return None
    return block.get("sha256") or block.get("path")


def design_of(e: Mapping[str, Any]) -> dict[str, str | None]:
    """``{model, value_model, search_config}`` of an eval JSON."""
    prov = e.get("provenance") or {}
    return {
        "model": _digest(prov.get("model")),
        "value_model": _digest(prov.get("ebm")),
        "search_config": search_config_digest(e),
    }


def split_name(b: Mapping[str, Any]) -> str:
    """A benchmark block's name as its file has it: ``name_split`` (``proplogic_test``), or the name
    alone for a theorem set without splits (the search pool)."""
    return f"{b.get('name')}_{b.get('split')}" if b.get("split") else str(b.get("name"))


def role_of(e: Mapping[str, Any]) -> str | None:
    """The role of the eval's benchmark split (None: not a known split)."""
    b = e.get("benchmark") or {}
    return ROLES.get(f"{b.get('name')}_{b.get('split')}")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def look_record(e: Mapping[str, Any], *, looked_at: str | None = None) -> dict[str, Any]:
    """The look an eval JSON (its metrics, benchmark and provenance) is: the module docstring's
    fields.  ``looked_at``: ISO 8601 (default: now)."""
    b = e.get("benchmark") or {}
    status = e.get("status") or {}
    budgets = e.get("budgets") or []
    top = max(budgets) if budgets else None
    solved = next(
        (r.get("solved") for r in e.get("by_budget") or [] if r.get("budget") == top), None
    )
    prov = e.get("provenance") or {}
    return {
        "kind": KIND,
        "benchmark": {"name": b.get("name"), "split": b.get("split"), "sha256": b.get("sha256")},
        "seed": (prov.get("seeds") or {}).get("seed"),
        "design": design_of(e),
        "counts": {
            "evaluated": status.get("evaluated_theorems"),
            "expected": status.get("expected_theorems"),
            "budget": top,
            "solved": solved,
            "complete": status.get("complete"),
        },
        "looked_at": looked_at or now(),
        "git_commit": prov.get("git_commit"),
    }


def looks_in(e: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The look records an eval JSON carries (its ``look`` block, with the eval's label; none for
    an eval that is no look)."""
    look = e.get("look")
    return [{**look, "label": e.get("label")}] if isinstance(look, Mapping) else []


def looks_from_file(path: Path, *, looked_at: str | None = None) -> list[dict[str, Any]]:
    """The looks in one file: an eval JSON's ``look`` block, a JSONL of look records, or — for an
    eval JSON from before looks were recorded, with ``looked_at`` given — the look it was
    (:func:`look_record`).  An eval on a benchmark that is not a confirmation split holds none."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    if path.suffix == ".jsonl":
        return read_ledger(path)
    try:
        e = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not JSON ({err.msg})") from None
    if isinstance(e, Mapping) and e.get("kind") == KIND:
        return [_check(e, str(path))]
    if isinstance(e, Mapping) and e.get("kind") == "burnqed replay":
        return []  # a replay records no look of its own (its recording's eval does)
    if not isinstance(e, Mapping) or e.get("kind") != "burnqed eval":
        raise InputError(f"{path}: neither an eval JSON nor a look record")
    found = looks_in(e)
    if found:
        return [_check(r, str(path)) for r in found]
    if role_of(e) != CONFIRMATION:
        return []
    if looked_at is None:
        raise InputError(
            f"{path}: an eval on a confirmation benchmark without a look block (made before looks "
            "were recorded): give its date with --looked-at"
        )
    return [{**look_record(e, looked_at=looked_at), "label": e.get("label")}]


def add(ledger: Path, files: Sequence[Path], *, looked_at: str | None = None) -> dict[str, int]:
    """Merge the looks in ``files`` into ``ledger`` (every file read and checked before it is
    written; one writer at a time, :func:`locked`: seeds of a study finish side by side);
    returns ``{"before", "read", "after"}`` record counts."""
    found = [r for f in files for r in looks_from_file(Path(f), looked_at=looked_at)]
    with locked(ledger):
        before = read_ledger(ledger)
        merged = merge(before, found)
        write_ledger(ledger, merged)
    log.info(
        "%s: %d looks read from %d files; %d records before, %d after",
        ledger,
        len(found),
        len(files),
        len(before),
        len(merged),
    )
    return {"before": len(before), "read": len(found), "after": len(merged)}


@contextlib.contextmanager
def locked(ledger: Path):
    """An exclusive lock on the ledger (``fcntl.flock`` on ``.<name>.lock`` beside it) for one
    read-merge-write: two processes merging at once would each write what the other missed."""
    import fcntl

    ledger = Path(ledger)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with open(ledger.with_name(f".{ledger.name}.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def record_run_looks(basedir: Path | str, workdir: Path | str = ".") -> dict[str, int] | None:
    """After a successful workflow run (the Snakefile's ``onsuccess``): the looks of every eval
    under ``workdir/results`` into the repository's ledger (``basedir/ledger/looks.jsonl``), so
    the demo records its looks itself.  None when no eval there is a look (a development run)."""
    files = [p for p in sorted(Path(workdir).glob("results/**/eval*.json"))
             if p.suffix == ".json" and looks_from_file(p)]  # fmt: skip
    if not files:
        return None
    return add(Path(basedir) / LEDGER, files)


def designs_seen(records: Iterable[Mapping[str, Any]], *, sha256: str | None, seed: Any) -> int:
    """How many distinct designs the records show looking at the benchmark with this sha256 and
    seed."""
    return len(
        {
            _canonical(r.get("design"))
            for r in records
            if (r.get("benchmark") or {}).get("sha256") == sha256 and r.get("seed") == seed
        }
    )


def looks_summary(
    ledger_records: Sequence[Mapping[str, Any]],
    run_records: Sequence[Mapping[str, Any]],
    *,
    benchmark: Mapping[str, Any],
    seed: Any,
    ledger: Path | str | None,
) -> dict[str, Any]:
    """The looks at one benchmark and seed: distinct designs in the ledger, in this run, in all."""
    name = f"{benchmark.get('name')}_{benchmark.get('split')}"
    sha = benchmark.get("sha256")
    return {
        "benchmark": name,
        "sha256": sha,
        "seed": seed,
        "role": ROLES.get(name),
        "ledger": str(ledger) if ledger is not None else None,
        "in_ledger": designs_seen(ledger_records, sha256=sha, seed=seed),
        "in_this_run": designs_seen(run_records, sha256=sha, seed=seed),
        "designs": designs_seen([*ledger_records, *run_records], sha256=sha, seed=seed),
    }


def looks_markdown(s: Mapping[str, Any] | None) -> list[str]:
    """The looks section of ``compare.md`` and the study report."""
    if not s or s["role"] is None:  # a benchmark split of no known role: nothing to say
        return []
    head = ["## Looks at this benchmark", ""]
    if s["role"] != CONFIRMATION:
        return [
            *head,
            f"{s['benchmark']} is a {s['role']} split, not a confirmation benchmark: its evals "
            "are not looks.",
            "",
        ]
    return [
        *head,
        f"**{s['designs']}** distinct designs (model, value model, search configuration) have "
        f"looked at {s['benchmark']} (sha256 {str(s['sha256'])[:12]}) with seed {s['seed']}: "
        f"{s['in_ledger']} in the ledger ({s['ledger'] or 'none'}, as it stood when this was "
        f"written), {s['in_this_run']} in this run.  A confirmation benchmark that many designs "
        "have looked at is no longer held out from them (docs/confirmation.md).",
        "",
    ]


# --------------------------------------------------------------------------------------------
# A window of time


def parse_time(text: str, what: str) -> datetime:
    """An ISO 8601 time (``Z`` or an offset; none: UTC); :class:`InputError` naming ``what``."""
    try:
        t = datetime.fromisoformat(text)
    except ValueError:
        raise InputError(
            f"{what}: {text!r} is not an ISO 8601 time (e.g. 2026-11-27T21:12:06Z)"
        ) from None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)


def in_window(
    records: Iterable[Mapping[str, Any]],
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[dict[str, Any]]:
    """The records looked at from ``since`` (inclusive) to ``until`` (exclusive); None: open."""
    out = []
    for r in records:
        t = parse_time(str(r.get("looked_at")), "looked_at")
        if (since is None or t >= since) and (until is None or t < until):
            out.append(dict(r))
    return out


def runs_of(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Looks grouped by the run that made them — commit, seed and benchmark — each with its first
    and last time, its looks, its distinct designs and its labels; in order of the first time.

    >>> r = lambda t, m: {"looked_at": t, "git_commit": "c0ffee", "seed": 0, "label": "iter_1",
    ...     "benchmark": {"name": "proplogic", "split": "test"}, "design": {"model": m}}
    >>> [(x["first"], x["last"], x["looks"], x["designs"]) for x in runs_of(
    ...     [r("2026-01-01T10:05:00+00:00", "b"), r("2026-01-01T10:00:00+00:00", "a")])]
    [('2026-01-01T10:00:00+00:00', '2026-01-01T10:05:00+00:00', 2, 2)]
    """
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in records:
        b = r.get("benchmark") or {}
        key = (str(r.get("git_commit")), r.get("seed"), f"{b.get('name')}_{b.get('split')}")
        groups.setdefault(key, []).append(r)
    out = []
    for (commit, seed, bench), rs in groups.items():
        times = sorted(str(r.get("looked_at")) for r in rs)
        out.append({
            "commit": commit, "seed": seed, "benchmark": bench,
            "first": times[0], "last": times[-1], "looks": len(rs),
            "designs": len({_canonical(r.get("design")) for r in rs}),
            "labels": sorted({str(r.get("label")) for r in rs}),
        })  # fmt: skip
    return sorted(out, key=lambda x: (x["first"], x["commit"], str(x["seed"])))


def window_markdown(
    records: Sequence[Mapping[str, Any]], since: datetime | None, until: datetime | None
) -> str:
    """The looks of a window as markdown: a sentence, then one table row a run (:func:`runs_of`)."""
    span = (
        f"from {since.isoformat() if since else 'the first record'} "
        f"to {until.isoformat() if until else 'the last'}"
    )
    looks = in_window(records, since, until)
    if not looks:
        return f"No look at a confirmation benchmark in the ledger {span}.\n"
    runs = runs_of(looks)
    seeds = sorted({str(x["seed"]) for x in runs}, key=lambda s: (len(s), s))
    lines = [
        f"**{len(looks)}** looks at confirmation benchmarks in the ledger {span}, by "
        f"{len(runs)} runs (commit, seed, benchmark); seeds {', '.join(seeds)}.",
        "",
        "| looked at (UTC) | commit | seed | benchmark | looks | designs |",
        "|---|---|---|---|---|---|",
    ]
    for x in runs:
        first, last = (parse_time(x[k], k).astimezone(UTC) for k in ("first", "last"))
        when = f"{first:%Y-%m-%d %H:%M}"
        if f"{last:%Y-%m-%d %H:%M}" != when:
            when += f"–{last:%H:%M}" if first.date() == last.date() else f"–{last:%Y-%m-%d %H:%M}"
        lines.append(
            f"| {when} | {x['commit'][:8]} | {x['seed']} | {x['benchmark']} | {x['looks']} "
            f"| {x['designs']} |"
        )
    return "\n".join(lines) + "\n"
