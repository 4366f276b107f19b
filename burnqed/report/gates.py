"""Go/no-go gates: each metric against its target and red line (``params.yaml`` ``report``).

``go`` at or above the target, ``watch`` between the red line and the target, ``no-go`` below the
red line, ``n/a`` when the metric is not available (no EBM yet, no baseline, …).  A gate computed
from a partial eval says so in its note.  The overall verdict is the worst gate.

Example::

    >>> from burnqed.config import ReportConfig
    >>> verdict(1.4, target=2.0, red_line=1.5)
    'no-go'
    >>> overall([{"verdict": "go"}, {"verdict": "watch"}, {"verdict": "n/a"}])
    'watch'
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from burnqed.config import REPORT_GATES, ReportConfig

log = logging.getLogger(__name__)

ORDER = {"no-go": 0, "watch": 1, "go": 2}

DESCRIPTIONS = {
    "gain_vs_baseline": "solve rate − baseline's (largest budget)",
    "gain_vs_previous": "solve rate − previous iteration's (largest budget)",
    "ebm_gain": "solve rate with EBM − without (same theorems and seeds)",
    "centroid_l2": "embedding centroid L2 (collapse shows as a drop)",
    "probe_accuracy": "embedding linear-probe accuracy",
    "ebm_rank1": "EBM held-out rank-1 accuracy",
    "unique_candidates": "unique candidates per expansion (diversity alarm)",
}


def verdict(value: float | None, *, target: float, red_line: float) -> str:
    if value is None:
        return "n/a"
    if value >= target:
        return "go"
    return "watch" if value >= red_line else "no-go"


def overall(gates: list[Mapping[str, Any]]) -> str:
    known = [g["verdict"] for g in gates if g["verdict"] in ORDER]
    return min(known, key=ORDER.__getitem__) if known else "n/a"


def top_rate(e: Mapping[str, Any] | None) -> float | None:
    if not e or not e.get("by_budget"):
        return None
    return e["by_budget"][-1]["rate"]


def _gain(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> tuple[float | None, str]:
    ra, rb = top_rate(a), top_rate(b)
    if ra is None or rb is None:
        return None, "not available"
    notes = [f"{x['label']} {x['status']['label']}" for x in (a, b) if not x["status"]["complete"]]
    return ra - rb, ("from a partial eval: " + ", ".join(notes)) if notes else ""


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _rank1(flat: Mapping[str, Any]) -> tuple[str, float] | None:
    """The held-out rank-1 accuracy among flattened metric keys (held-out/val/test preferred)."""
    keys = [k for k, v in flat.items() if re.search(r"rank[_-]?1", k, re.I)
            and isinstance(v, int | float) and not isinstance(v, bool)]  # fmt: skip
    if not keys:
        return None
    keys.sort(key=lambda k: (not re.search(r"held|val|test", k, re.I), "depth" in k, len(k)))
    return keys[0], float(flat[keys[0]])


def load_ebm_metrics(metrics_json: Path | None, ebm_dir: Path | None) -> dict | None:
    """Embedding metrics of an iteration: ``results/iter_{i}/ebm_metrics.json`` (``centroid_l2``,
    ``probe_accuracy``, …) plus the held-out rank-1 from the JSON files of ``models/iter_{i}/ebm/``.
    None when neither exists."""
    flat: dict[str, Any] = {}
    sources = []
    if metrics_json is not None and Path(metrics_json).is_file():
        flat.update(_flatten(json.loads(Path(metrics_json).read_text(encoding="utf-8"))))
        sources.append(str(metrics_json))
    rank1 = _rank1(flat)
    if rank1 is None and ebm_dir is not None and Path(ebm_dir).is_dir():
        for f in sorted(Path(ebm_dir).glob("*.json")):
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(data, Mapping) and (found := _rank1(_flatten(data))):
                rank1 = found
                sources.append(str(f))
                break
    if not sources:
        return None
    scalars = {
        k: v for k, v in flat.items() if isinstance(v, int | float | str | bool) or v is None
    }
    return {
        "centroid_l2": flat.get("centroid_l2"),
        "probe_accuracy": flat.get("probe_accuracy"),
        "ebm_rank1": rank1[1] if rank1 else None,
        "ebm_rank1_key": rank1[0] if rank1 else None,
        "all": scalars,
        "sources": sources,
    }


def evaluate_gates(
    cfg: ReportConfig,
    *,
    current: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
    previous: Mapping[str, Any] | None = None,
    no_ebm: Mapping[str, Any] | None = None,
    ebm: Mapping[str, Any] | None = None,
    unique_candidates: float | None = None,
) -> list[dict]:
    values: dict[str, tuple[float | None, str]] = {
        "gain_vs_baseline": _gain(current, baseline),
        "gain_vs_previous": _gain(current, previous),
        "ebm_gain": _gain(current, no_ebm),
        "centroid_l2": ((ebm or {}).get("centroid_l2"), ""),
        "probe_accuracy": ((ebm or {}).get("probe_accuracy"), ""),
        "ebm_rank1": ((ebm or {}).get("ebm_rank1"), (ebm or {}).get("ebm_rank1_key") or ""),
        "unique_candidates": (unique_candidates, ""),
    }
    gates = []
    for name in REPORT_GATES:
        value, note = values[name]
        target, red = getattr(cfg, f"{name}_target"), getattr(cfg, f"{name}_red_line")
        gates.append(
            {
                "gate": name,
                "description": DESCRIPTIONS[name],
                "value": value,
                "target": target,
                "red_line": red,
                "verdict": verdict(value, target=target, red_line=red),
                "note": note or ("not available" if value is None else ""),
            }
        )
    return gates
