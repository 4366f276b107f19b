"""The records of the ledger of looks (:mod:`burnqed.eval.ledger` says what a look is and who
writes one): their file format and merge, kept below the search and eval stages so that every
command that searches or evaluates a confirmation benchmark can record its look
(:func:`search_look`, ``burnqed search``).

Example::

    >>> r = {"kind": KIND, "benchmark": {"sha256": "b"}, "seed": 0, "design": {},
    ...      "looked_at": "2026-01-01T00:00:00+00:00"}
    >>> len(merge([r], [{**r, "looked_at": "2026-01-02T00:00:00+00:00"}]))
    1
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from burnqed.config import InputError
from burnqed.data.benchmarks import CONFIRMATION, benchmark_role, sha256_file

LEDGER = Path("ledger/looks.jsonl")  # the tracked ledger, relative to the repository root
KIND = "burnqed look"
# Fields that say when and by whom, not what was seen: two records equal in everything else are
# one look, recorded once (the earliest).
INCIDENTAL = ("looked_at", "label", "git_commit")


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _key(r: Mapping[str, Any]) -> str:
    return _canonical({k: v for k, v in r.items() if k not in INCIDENTAL})


def _order(r: Mapping[str, Any]) -> tuple:
    b = r.get("benchmark") or {}
    return (
        str(b.get("name")),
        str(b.get("split")),
        str(b.get("sha256")),
        str(r.get("seed")),
        str(r.get("looked_at")),
        _canonical(r),
    )


def merge(*groups: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The union of look records, one per look (the earliest ``looked_at``, then the smallest
    record, wins), sorted by benchmark, seed and date."""
    best: dict[str, dict[str, Any]] = {}
    for group in groups:
        for r in group:
            k = _key(r)
            if k not in best or _order(r) < _order(best[k]):
                best[k] = dict(r)
    return sorted(best.values(), key=_order)


def _check(r: Any, where: str) -> dict[str, Any]:
    if not isinstance(r, Mapping) or r.get("kind") != KIND:
        raise InputError(f"{where}: not a look record (kind {KIND!r})")
    for key in ("benchmark", "seed", "design", "looked_at"):
        if key not in r:
            raise InputError(f"{where}: look record without {key!r}")
    if not isinstance(r["benchmark"], Mapping) or not r["benchmark"].get("sha256"):
        raise InputError(f"{where}: look record without benchmark.sha256")
    return dict(r)


def read_ledger(path: Path) -> list[dict[str, Any]]:
    """The records of a ledger file (none when it does not exist); :class:`InputError` naming the
    file and line of a bad one."""
    path = Path(path)
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}:{n}: not JSON ({e.msg})") from None
        out.append(_check(r, f"{path}:{n}"))
    return out


def ledger_bytes(records: Sequence[Mapping[str, Any]]) -> bytes:
    return "".join(_canonical(r) + "\n" for r in merge(records)).encode("utf-8")


def write_ledger(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(ledger_bytes(records))
    os.replace(tmp, path)


def add_records(ledger: Path, records: Sequence[Mapping[str, Any]]) -> int:
    """Merge ``records`` into the ledger file; returns how many records it holds after."""
    merged = merge(read_ledger(ledger), records)
    write_ledger(ledger, merged)
    return len(merged)


def path_digest(path: Path | str | None) -> str | None:
    """sha256 over a file or over a directory's files (relative names and contents) but the files
    every run writes anew (:data:`burnqed.determinism.RUN_SPECIFIC_FILES`: dates, wall times);
    None when ``path`` is not a local file or directory (e.g. a hub id)."""
    from burnqed.determinism import RUN_SPECIFIC_FILES

    if path is None:
        return None
    p = Path(path)
    if p.is_file():
        return sha256_file(p)
    if not p.is_dir():
        return None
    h = hashlib.sha256()
    for f in sorted(x for x in p.rglob("*") if x.is_file() and x.name not in RUN_SPECIFIC_FILES):
        h.update(str(f.relative_to(p)).encode() + b"\0" + sha256_file(f).encode() + b"\n")
    return h.hexdigest()


def search_look(
    theorems: Path,
    manifest: Mapping[str, Any],
    *,
    model: Path | str,
    ebm: Path | None,
    seed: int,
    label: str = "burnqed search",
) -> dict[str, Any] | None:
    """The look a search of ``theorems`` is when they are a confirmation benchmark (its
    ``.meta.json`` names the benchmark and split; None otherwise): the benchmark, the seed, the
    design (model and value-model digests, a digest of the search configuration and sampling the
    manifest records) and the counts (attempts with an outcome, proved)."""
    meta = Path(theorems).with_suffix("").with_suffix(".meta.json")
    if not meta.is_file():
        return None
    m = json.loads(meta.read_text(encoding="utf-8"))
    name, split = m.get("benchmark"), m.get("split")
    if benchmark_role(f"{name}_{split}") != CONFIRMATION:
        return None
    what = {"search": manifest.get("config"), "sampling": manifest.get("sampling")}
    statuses = manifest.get("statuses") or {}
    return {
        "kind": KIND,
        "benchmark": {"name": name, "split": split, "sha256": sha256_file(Path(theorems))},
        "seed": seed,
        "design": {
            "model": path_digest(model),
            "value_model": path_digest(ebm),
            "search_config": hashlib.sha256(_canonical(what).encode()).hexdigest()[:16],
        },
        "counts": {
            "evaluated": manifest.get("results"),
            "expected": manifest.get("attempts"),
            "budget": (manifest.get("config") or {}).get("max_nodes"),
            "solved": statuses.get("proved"),
            "complete": None,
        },
        "looked_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "git_commit": None,
        "label": label,
    }
