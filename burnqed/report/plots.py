"""Report plots: matplotlib (Agg) PNGs of a fixed size, axes always labelled, "no data" drawn when
there is nothing to plot (an empty or all-failed run still gets every figure).

Inputs are small, already aggregated series (eval JSON curves, SQL histograms), never trajectory
rows.

Example::

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "curve.png"
    >>> budget_curves({"iter_0": {"x": [1, 10], "y": [0.1, 0.4]}}, p)
    [('node budget (expansions per attempt)', 'theorems proved (%)')]
    >>> p.stat().st_size > 1000
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display; before pyplot is imported anywhere
import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

FIGSIZE = (6.4, 4.0)  # inches
DPI = 100  # → 640 × 400 px
SIZE_PX = (int(FIGSIZE[0] * DPI), int(FIGSIZE[1] * DPI))


Labels = list[tuple[str, str]]  # (x label, y label) of each panel, read back from the figure


def _budget_axis(ax: Any, budgets: Sequence[float]) -> None:
    """A log x-axis labelled at the budgets themselves, as numbers (``1 2 3 4 6 8``): matplotlib's
    own log labels (``2×10⁰ 3×10⁰``) collide on a narrow panel."""
    ax.set_xscale("log")
    if ticks := sorted({float(b) for b in budgets if b is not None and b > 0}):
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.xaxis.set_minor_formatter(NullFormatter())


def _finish(
    fig: Any, ax: Any, out: Path, *, empty: bool, xlabel: str, ylabel: str, title: str
) -> Labels:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if empty:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", fontsize=14,
                color="grey")  # fmt: skip
    elif ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    out.parent.mkdir(parents=True, exist_ok=True)
    # No bbox_inches="tight": the PNG keeps the documented size whatever the labels.
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    labels = [(a.get_xlabel(), a.get_ylabel()) for a in fig.axes]
    plt.close(fig)
    return labels


def budget_curves(
    curves: Mapping[str, Mapping[str, Sequence[float]]],
    out: Path,
    *,
    title: str = "Solve rate by node budget",
    xlabel: str = "node budget (expansions per attempt)",
    markers: Mapping[str, Mapping[str, Sequence[Any]]] | None = None,
) -> Labels:
    """Step curves ``{label: {"x": [...], "y": [...]}}`` of solve rate (0..1) vs a budget; optional
    ``markers`` ``{label: {"x", "y", "lo", "hi"}}`` draw the configured budgets with CI bars."""
    fig, ax = plt.subplots(figsize=FIGSIZE)
    drawn = False
    colours = {}  # a curve's budget markers share its colour
    for label, c in curves.items():
        if len(c["x"]):
            (line,) = ax.step(list(c["x"]), [100 * y for y in c["y"]], where="post", label=label)
            colours[label] = line.get_color()
            drawn = True
    for label, m in (markers or {}).items():
        pts = [(x, y, lo, hi) for x, y, lo, hi in zip(m["x"], m["y"], m["lo"], m["hi"], strict=True)
               if y is not None]  # fmt: skip
        if pts:
            xs, ys, los, his = zip(*pts, strict=True)
            ax.errorbar(xs, [100 * y for y in ys],
                        yerr=[[100 * (y - lo) for y, lo in zip(ys, los, strict=True)],
                              [100 * (hi - y) for y, hi in zip(ys, his, strict=True)]],
                        fmt="o", capsize=3, color=colours.get(label),
                        label=f"{label} at budgets (95% CI)")  # fmt: skip
            drawn = True
    if drawn:  # labelled at the marked budgets (a step curve's x may be every node count)
        budgets = [x for m in (markers or {}).values() for x in m["x"]]
        if budgets:
            _budget_axis(ax, budgets)
        else:
            ax.set_xscale("log")
        ax.set_ylim(0, 100)
    return _finish(
        fig, ax, out, empty=not drawn, xlabel=xlabel, ylabel="theorems proved (%)", title=title
    )


def seed_budget_curves(
    panels: Mapping[str, Mapping[str, Mapping[str, Sequence[Any]]]],
    out: Path,
    *,
    title: str,
    xlabel: str = "node budget",
) -> Labels:
    """One panel per seed (``{panel title: {eval label: {"x", "y", "lo", "hi"}}}``: solve rates
    (0..1) at the evals' budgets with their 95 % intervals): each eval a line through its markers in
    one colour — the same colour in every panel — and **one legend entry per eval** for the whole
    figure; each panel's y-axis fitted to its data and intervals (a 10-point spread is visible)."""
    labels = list(dict.fromkeys(lab for p in panels.values() for lab in p))
    colour = {lab: f"C{i % 10}" for i, lab in enumerate(labels)}
    n = max(len(panels), 1)
    fig, axes = plt.subplots(1, n, figsize=(max(FIGSIZE[0], 3.2 * n), FIGSIZE[1]), squeeze=False)
    for ax, (name, curves) in zip(axes[0], panels.items(), strict=False):
        lows, highs = [], []
        for lab, m in curves.items():
            pts = [(x, y, lo, hi) for x, y, lo, hi in zip(m["x"], m["y"], m["lo"], m["hi"],
                                                          strict=True) if y is not None]  # fmt: skip
            if not pts:
                continue
            xs, ys, los, his = zip(*pts, strict=True)
            ax.errorbar(xs, [100 * y for y in ys],
                        yerr=[[100 * (y - lo) for y, lo in zip(ys, los, strict=True)],
                              [100 * (hi - y) for y, hi in zip(ys, his, strict=True)]],
                        fmt="-o", capsize=3, markersize=3, color=colour[lab], label=lab)  # fmt: skip
            lows.append(100 * min(los))
            highs.append(100 * max(his))
        if lows:
            pad = max(1.0, 0.05 * (max(highs) - min(lows)))
            ax.set_ylim(max(0.0, min(lows) - pad), min(100.0, max(highs) + pad))
            _budget_axis(ax, [x for m in curves.values() for x in m["x"]])
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center",
                    color="grey")  # fmt: skip
        ax.set_title(name, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("theorems proved (%)")
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_legend_handles_labels()[0]}
    if handles:  # one entry per eval, below the panels
        fig.legend([handles[lab] for lab in labels if lab in handles],
                   [lab for lab in labels if lab in handles], loc="lower center",
                   ncol=min(len(handles), 4), fontsize=7)  # fmt: skip
    fig.suptitle(title, fontsize=10)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout(rect=(0, 0.12 if handles else 0, 1, 1))
    fig.savefig(out, dpi=DPI)
    read = [(a.get_xlabel(), a.get_ylabel()) for a in axes[0]]
    plt.close(fig)
    return read


def anytime_curves(
    anytime: Mapping[str, Sequence[Sequence[float]]], out: Path, *, title: str
) -> Labels:
    """Three panels: solve rate vs summed Lean seconds, generated tokens, wall seconds."""
    panels = [("lean_s", "Lean seconds (summed over calls)"), ("tokens", "generated tokens"),
              ("wall_s", "wall seconds")]  # fmt: skip
    fig, axes = plt.subplots(1, 3, figsize=FIGSIZE, sharey=True)
    for ax, (key, xlabel) in zip(axes, panels, strict=True):
        pts = anytime.get(key) or []
        if pts:  # from (0, 0): nothing is proved before any cost is paid
            ax.step([0, *(p[0] for p in pts)], [0, *(100 * p[1] for p in pts)], where="post")
            ax.set_ylim(0, 100)
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center",
                    color="grey")  # fmt: skip
        ax.set_xlabel(xlabel, fontsize=8)
        ax.grid(alpha=0.3)
    for ax in axes:  # shared y axis: the label is on the first panel, and said for each
        ax.set_ylabel("theorems proved (%)" if ax is axes[0] else "")
    fig.suptitle(title, fontsize=10)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    labels = [(a.get_xlabel(), axes[0].get_ylabel()) for a in axes]
    plt.close(fig)
    return labels


def histogram(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    out: Path,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    width: float | None = None,
) -> Labels:
    """Bars ``{label: (x, counts)}`` (already binned by SQL), overlaid with transparency."""
    fig, ax = plt.subplots(figsize=FIGSIZE)
    drawn = False
    for label, (xs, counts) in series.items():
        if len(xs):
            ax.bar(list(xs), list(counts), width=width or 0.8, alpha=0.6, label=label, align="edge"
                   if width else "center")  # fmt: skip
            drawn = True
    return _finish(fig, ax, out, empty=not drawn, xlabel=xlabel, ylabel=ylabel, title=title)


def per_iteration(
    rows: Sequence[Mapping[str, Any]], out: Path, *, title: str = "Solve rate per iteration"
) -> Labels:
    """Rate at the largest budget per iteration (with its CI) and the cumulative rate."""
    fig, ax = plt.subplots(figsize=FIGSIZE)
    pts = [r for r in rows if r.get("rate") is not None]
    if pts:
        xs = list(range(len(pts)))
        ax.errorbar(xs, [100 * r["rate"] for r in pts],
                    yerr=[[100 * (r["rate"] - r["ci95"][0]) for r in pts],
                          [100 * (r["ci95"][1] - r["rate"]) for r in pts]],
                    fmt="o-", capsize=3, label="solve rate at the largest budget (95% CI)")  # fmt: skip
        cum = [(x, r["cumulative_rate"]) for x, r in zip(xs, pts, strict=True)
               if r.get("cumulative_rate") is not None]  # fmt: skip
        if cum:
            ax.plot([c[0] for c in cum], [100 * c[1] for c in cum], "s--", label="cumulative")
        ax.set_xticks(xs, [r["label"] for r in pts])
        ax.set_ylim(0, 100)
    return _finish(fig, ax, out, empty=not pts, xlabel="iteration",
                   ylabel="theorems proved (%)", title=title)  # fmt: skip
