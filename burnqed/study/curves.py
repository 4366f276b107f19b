"""The picture of Polu's comparison across a study's seeds: both arms' cumulative pool pass rate,
every seed thin and the pooled curve bold (issue 61).

Each seed's ``results/compute.json`` (:mod:`burnqed.eval.compute`) holds, per arm, one point per
step — iteration 0's shared searches are step 1 — with the cumulative node expansions and pass
rate.  :func:`pool_curves` keeps those figures in the study's report (``report.json``'s
``pool_curves``), so a report re-rendered without the seeds' directories draws the same picture;
:func:`pooled_curves` averages the seeds step by step (a step counts only when every seed reached
it); :func:`draw_pool_curves` draws ``curves.png`` in two panels: against the iterations searched
(Polu et al.'s axis: equal search attempts per iteration in both arms) and against the cumulative
node expansions (what the searches spent: expert iteration's trees grow with its policy).

Example::

    curves = pool_curves(read_compute_reports({101: Path("runs/dev/p0/seed_101")}))
    curves[101]["expert iteration"][-1]   # {"step": 2, "nodes_expanded": 21263, "pass_rate": 0.475}
    draw_pool_curves(curves, Path("curves.png"), title="Study pool-ei")
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from burnqed.config import InputError
from burnqed.eval.compute import ARMS, EXPERT, SEARCH_ONLY

COMPUTE = "results/compute.json"
POINT_KEYS = ("step", "nodes_expanded", "pass_rate")
# The rest of a point's search compute, kept when the compute report holds it (reports written
# before it was counted lack it; the pooled curve then leaves it out).
COMPUTE_KEYS = ("tokens", "value_scorings")
COLOURS = {EXPERT: "tab:red", SEARCH_ONLY: "tab:blue"}


def read_compute_reports(dirs: Mapping[int, Path]) -> dict[int, dict[str, Any]]:
    """``{seed: results/compute.json}`` of each seed directory, read once for
    :func:`pool_curves` and :func:`guard_stops`; :class:`InputError` naming the file when it
    is missing, unreadable or lacks an arm's curve (each point's :data:`POINT_KEYS`)."""
    out = {}
    for seed, d in sorted(dirs.items()):
        path = Path(d) / COMPUTE
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"{path}: not a readable compute report ({e})") from None
        curves = doc.get("curves") if isinstance(doc, dict) else None
        for arm in ARMS:
            points = (curves or {}).get(arm)
            if not points or not all(isinstance(p, dict) and all(k in p for k in POINT_KEYS)
                                     for p in points):  # fmt: skip
                raise InputError(f"{path}: curves.{arm!r} is missing or lacks {POINT_KEYS}")
        out[int(seed)] = doc
    return out


def pool_curves(
    docs: Mapping[int, Mapping[str, Any]],
) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """``{seed: {arm: [{step, nodes_expanded, pass_rate[, tokens, value_scorings]}, …]}}`` from
    :func:`read_compute_reports` (:data:`COMPUTE_KEYS` where a report holds them)."""
    return {
        seed: {
            arm: [
                {k: p[k] for k in (*POINT_KEYS, *COMPUTE_KEYS) if k in p}
                for p in doc["curves"][arm]
            ]
            for arm in ARMS
        }
        for seed, doc in docs.items()
    }


def guard_stops(
    docs: Mapping[int, Mapping[str, Any]],
) -> dict[int, dict[str, dict[str, Any]]]:
    """``{seed: {"iter_<i>": {step, reason}}}``: the trainings a guard stopped, from
    :func:`read_compute_reports` (``stopped``; :mod:`burnqed.eval.compute`) — the iteration kept
    the previous iteration's model and the seed's run went on.  Seeds with none are left out."""
    out = {}
    for seed, doc in docs.items():
        stopped = {
            it: {"step": (x or {}).get("step"), "reason": (x or {}).get("reason")}
            for it, x in sorted((doc.get("stopped") or {}).items())
        }
        if stopped:
            out[seed] = stopped
    return out


def pooled_curves(curves: Mapping[int, Mapping[str, list[Mapping[str, Any]]]]) -> dict[str, list]:
    """Per arm, the seeds' mean pass rate and node expansions at each step every seed reached
    (``seeds`` says how many were averaged), and of each of :data:`COMPUTE_KEYS` that every seed
    holds there."""
    pooled: dict[str, list] = {}
    for arm in ARMS:
        runs = [c[arm] for c in curves.values()]
        steps = min((len(r) for r in runs), default=0)
        pooled[arm] = [
            {
                "step": runs[0][i]["step"],
                "nodes_expanded": statistics.fmean(r[i]["nodes_expanded"] for r in runs),
                "pass_rate": statistics.fmean(r[i]["pass_rate"] for r in runs),
                **{
                    k: statistics.fmean(r[i][k] for r in runs)
                    for k in COMPUTE_KEYS
                    if all(k in r[i] for r in runs)
                },
                "seeds": len(runs),
            }
            for i in range(steps)
        ]
    return pooled


def draw_pool_curves(
    curves: Mapping[int, Mapping[str, list[Mapping[str, Any]]]], out: Path, *, title: str
) -> None:
    """``out`` (PNG): both arms' cumulative pool pass rate against the iterations searched and
    against the cumulative node expansions; each seed a thin line, the pooled curve bold."""
    import matplotlib

    matplotlib.use("Agg")  # no display; before pyplot is imported anywhere
    import matplotlib.pyplot as plt

    if not curves:
        raise InputError(f"{out}: no seed's pool curves to draw")
    pooled = pooled_curves(curves)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, x_key, x_label in (
        (axes[0], "step", "after iteration (both arms: the same search attempts each)"),
        (axes[1], "nodes_expanded", "cumulative node expansions"),
    ):
        # Step 1 is iteration 0's searches: the first panel counts iterations from 0.
        offset = 1 if x_key == "step" else 0
        for arm in ARMS:
            colour = COLOURS[arm]
            for c in curves.values():
                pts = c[arm]
                ax.plot([p[x_key] - offset for p in pts], [100 * p["pass_rate"] for p in pts],
                        color=colour, lw=0.7, alpha=0.35)  # fmt: skip
            pts = pooled[arm]
            ax.plot([p[x_key] - offset for p in pts], [100 * p["pass_rate"] for p in pts],
                    color=colour, lw=2.6, marker="o",
                    label=f"{arm} (mean of {len(curves)} seeds)")  # fmt: skip
        ax.set_xlabel(x_label, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_xticks(sorted({p["step"] - 1 for c in curves.values() for p in c[EXPERT]}))
    axes[0].set_ylabel("cumulative pool pass rate, %", fontsize=9)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"{title}: expert iteration against search only on the search pool "
                 "(thin: a seed; bold: their mean)", fontsize=10)  # fmt: skip
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
