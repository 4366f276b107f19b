"""Expert iteration against search only at the same compute (Polu et al. 2022; issue 45).

Polu et al. ("Formal Mathematics Statement Curriculum Learning") compare expert iteration — proof
search interleaved with learning — with proof search only, at the same compute, by the cumulative
pass rate on the statement set.  Here the two arms share iteration 0's search
(``results/iter_0/search``: ``models/iter_0/merged`` on the data stage's pool); then

- **expert iteration**: iteration i's own search (``results/iter_i/search``: iteration i's model
  and value model, on iteration i's pool);
- **search only**: the same pool searched again by iteration 0's model, no value model, with the
  same search config and seeds of its own (``results/iter_i/search_only``, rule
  ``search_only_shard``).

Compute is counted from what each search records in its summary rows (:mod:`burnqed.trajectory`):
node expansions (``nodes_expanded``) and generated tokens (``tokens``), summed over every row, the
infrastructure errors' included (they spent it).  Training is stated apart (the adapters'
``training_summary.json``: steps, examples, tokens where recorded) and never added to search
compute: the search-only arm trains nothing after iteration 0, so its search compute is the
comparison's and training is what expert iteration spends besides.

Per arm, after each search: the cumulative node expansions and tokens and the cumulative pool pass
rate — the theorems proved by any of the arm's searches so far (a theorem proved twice counts once)
over the theorems any search of either arm attempted (the data stage's pool: later pools are
subsets).  Per iteration i >= 1: the exact McNemar (:mod:`burnqed.eval.paired`) of iteration i's
search against its search-only control on the same theorems — they must be the same, else
:class:`~burnqed.config.InputError` naming both directories.

Example::

    run(expert=[Path("results/iter_0/search"), Path("results/iter_1/search")],
        search_only=[Path("results/iter_1/search_only")],
        training={1: Path("models/iter_1/adapter")},
        out_json=Path("results/compute.json"), out_md=Path("results/compute.md"))
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.config import InputError
from burnqed.eval.paired import (
    ALPHA,
    BETTER,
    NO_EFFECT,
    TEST,
    WORSE,
    mcnemar_p,
    table_cells,
    table_headers,
)
from burnqed.eval.table import markdown_table, pct
from burnqed.outcomes import INFRASTRUCTURE, SOLVED
from burnqed.trajectory import MANIFEST, read_summary, search_part_dirs

log = logging.getLogger(__name__)

KIND = "burnqed compute"
EXPERT = "expert iteration"
SEARCH_ONLY = "search only"
# Keys of a training summary that count tokens, where a trainer records them.
TOKEN_KEYS = ("tokens", "train_tokens", "trained_tokens")


def _manifest(directory: Path) -> dict[str, Any]:
    """The search's manifest (a gathered one: its first shard's for the settings), {} without."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return {}
    m = json.loads(path.read_text(encoding="utf-8"))
    per_shard = m.get("per_shard") or {}
    return next(iter(per_shard.values()), m) if per_shard else m


def search_compute(directory: Path, label: str) -> dict[str, Any]:
    """One search's counts from its summary rows (every shard's): theorems attempted (an attempt
    that ran to a result), proved, attempts, infrastructure errors, node expansions and generated
    tokens; its settings from the manifest; ``proved_theorems``/``theorem_keys`` for the curves."""
    directory = Path(directory)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    parts = search_part_dirs(directory)
    if not parts:
        raise InputError(f"{directory}: no search trajectories (run its search first)")
    for d in parts:
        read = read_summary(d)
        rows += read.table.select(["theorem", "status", "nodes_expanded", "tokens"]).to_pylist()
        skipped += read.skipped
    if not rows:
        raise InputError(f"{directory}: the search has no summary rows")
    attempted = sorted({r["theorem"] for r in rows if r["status"] != INFRASTRUCTURE})
    proved = sorted({r["theorem"] for r in rows if r["status"] == SOLVED})
    m = _manifest(directory)
    cfg = m.get("config") or {}
    return {
        "label": label,
        "directory": str(directory),
        "model": m.get("model"),
        "ebm": m.get("ebm"),
        "seed_salt": m.get("seed_salt"),
        "temperature": (m.get("sampling") or {}).get("temperature"),
        "max_nodes": cfg.get("max_nodes"),
        "attempts_per_theorem": cfg.get("attempts"),
        "config": cfg,
        "theorems": len(attempted),
        "proved": len(proved),
        "attempts": len(rows),
        "errors": sum(r["status"] == INFRASTRUCTURE for r in rows),
        "nodes_expanded": sum(r["nodes_expanded"] for r in rows),
        "tokens": sum(r["tokens"] for r in rows),
        "skipped_parts": skipped,
        "theorem_keys": attempted,
        "proved_theorems": proved,
    }


def curve(searches: Sequence[Mapping[str, Any]], pool: int) -> list[dict[str, Any]]:
    """Cumulative compute and pool pass rate after each search of one arm."""
    out, proved, nodes, tokens = [], set(), 0, 0
    for s in searches:
        proved |= set(s["proved_theorems"])
        nodes += s["nodes_expanded"]
        tokens += s["tokens"]
        out.append({
            "search": s["label"],
            "nodes_expanded": nodes,
            "tokens": tokens,
            "proved": len(proved),
            "pool": pool,
            "pass_rate": len(proved) / pool if pool else None,
        })  # fmt: skip
    return out


def _config_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    ca, cb = a.get("config") or {}, b.get("config") or {}
    return sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))


def paired_searches(
    control: Mapping[str, Any], expert: Mapping[str, Any], alpha: float = ALPHA
) -> dict[str, Any]:
    """Exact McNemar of ``expert`` (iteration i's search: "after") against ``control`` (its search
    only: "before") over the theorems both attempted — which must be the same theorems, searched
    with the same search config: else an :class:`InputError` naming both directories."""
    ta, tb = set(control["theorem_keys"]), set(expert["theorem_keys"])
    if ta != tb:
        only = sorted(ta ^ tb)
        raise InputError(
            f"{expert['directory']} and {control['directory']}: the two searches' pools differ "
            f"({len(tb - ta)} theorem(s) only in the first, {len(ta - tb)} only in the second, "
            f"e.g. {only[0]!r}); search only must search iteration i's own pool"
        )
    differ = _config_differences(control, expert)
    if differ:
        raise InputError(
            f"{expert['directory']} and {control['directory']}: searched with different search "
            f"settings ({', '.join(differ)}); search only must spend the same budget and attempts"
        )
    pa, pb = set(control["proved_theorems"]), set(expert["proved_theorems"])
    paired = sorted(ta)
    gained = [t for t in paired if t in pb and t not in pa]
    lost = [t for t in paired if t in pa and t not in pb]
    p = mcnemar_p(len(gained), len(lost))
    verdict = (BETTER if len(gained) > len(lost) else WORSE) if p < alpha else NO_EFFECT
    return {
        "test": TEST,
        "before": control["label"],
        "after": expert["label"],
        "varies": "training (model and value model) against search only",
        "budget_before": control.get("max_nodes"),
        "budget_after": expert.get("max_nodes"),
        "alpha": alpha,
        "theorems": len(paired),
        "gained": len(gained),
        "lost": len(lost),
        "both": len(pa & pb),
        "neither": len(ta - pa - pb),
        "gained_theorems": gained,
        "lost_theorems": lost,
        "p_value": p,
        "verdict": verdict,
        "reasons": [],
    }


def training_compute(adapters: Mapping[int, Path]) -> dict[str, Any]:
    """Per iteration, what its adapter's ``training_summary.json`` says it trained: steps, examples
    and tokens (null where the trainer does not record them)."""
    out = {}
    for i, adapter in sorted(adapters.items()):
        path = Path(adapter) / "training_summary.json"
        if not path.is_file():
            raise InputError(f"{path}: no training summary (train iteration {i} first)")
        s = json.loads(path.read_text(encoding="utf-8"))
        data = s.get("data") or {}
        out[f"iter_{i}"] = {
            "summary": str(path),
            "steps": s.get("steps"),
            "train_examples": data.get("train_examples"),
            "tokens": next((s[k] for k in TOKEN_KEYS if s.get(k) is not None), None),
        }
    return out


def compute_report(
    expert: Sequence[Path],
    search_only: Sequence[Path],
    training: Mapping[int, Path] | None = None,
) -> dict[str, Any]:
    """The comparison: ``expert`` is iteration 0's search then iteration i's (i = 1 …),
    ``search_only`` the search-only control of iterations 1 … (one fewer).  ``training``:
    iteration → adapter directory (stated apart)."""
    if len(expert) != len(search_only) + 1:
        raise InputError(
            f"{len(expert)} expert-iteration search(es) and {len(search_only)} search-only "
            "control(s): expected iteration 0's search plus one control per later iteration"
        )
    ei = [search_compute(d, f"iter_{i} search") for i, d in enumerate(expert)]
    so = [search_compute(d, f"iter_{i} search only") for i, d in enumerate(search_only, 1)]
    paired = [{"iteration": i, **paired_searches(c, e)} for i, (c, e) in
              enumerate(zip(so, ei[1:], strict=True), 1)]  # fmt: skip
    pool = len({t for s in (*ei, *so) for t in s["theorem_keys"]})
    arms = {EXPERT: ei, SEARCH_ONLY: [ei[0], *so]}
    searches = {s["label"]: {k: v for k, v in s.items() if k not in ("theorem_keys", "config")}
                for s in (*ei, *so)}  # fmt: skip
    return {
        "kind": KIND,
        "description": (
            "Expert iteration vs search only at the same search compute (Polu et al. 2022): "
            "cumulative pool pass rate against cumulative node expansions and generated tokens; "
            "training compute stated apart, never added to search compute."
        ),
        "pool_theorems": pool,
        "searches": searches,
        "curves": {arm: curve(ss, pool) for arm, ss in arms.items()},
        "paired": paired,
        "training": {
            "note": "stated apart, not added to either arm's search compute: the search-only arm "
            "trains nothing after iteration 0, whose adapter both arms share",
            "iterations": training_compute(training or {}),
        },
    }


def _ratio(a: int, b: int) -> str:
    return "–" if not b else f"{a / b:.2f}"


def compute_markdown(report: Mapping[str, Any]) -> str:
    """The section ``Search only at the same compute``: curves, paired tests, training."""
    ei, so = report["curves"][EXPERT], report["curves"][SEARCH_ONLY]
    rows = [
        [a["search"], str(a["nodes_expanded"]), str(a["tokens"]), f"{a['proved']}/{a['pool']}",
         pct(a["pass_rate"]), b["search"], str(b["nodes_expanded"]), str(b["tokens"]),
         f"{b['proved']}/{b['pool']}", pct(b["pass_rate"])]
        for a, b in zip(ei, so, strict=True)
    ]  # fmt: skip
    lines = [
        "## Search only at the same compute",
        "",
        "Cumulative pool pass rate (a theorem proved by any search so far, once) against "
        "cumulative search compute: expert iteration (iteration i's model and value model) and "
        "search only (iteration 0's model searching iteration i's pool again, same search "
        "config, its own seeds).  Training is not counted in either arm (below).",
        "",
        markdown_table(
            [
                "expert iteration",
                "nodes",
                "tokens",
                "proved",
                "pass rate",
                "search only",
                "nodes",
                "tokens",
                "proved",
                "pass rate",
            ],
            rows,
        ),
        "",
    ]
    if ei:
        a, b = ei[-1], so[-1]
        lines += [
            f"Compute ratio (expert iteration / search only) after the last search: nodes "
            f"{_ratio(a['nodes_expanded'], b['nodes_expanded'])}, tokens "
            f"{_ratio(a['tokens'], b['tokens'])}.",
            "",
        ]
    if report["paired"]:
        lines += [
            "Iteration i's search against its search-only control, the same theorems "
            "(exact McNemar: gained = proved by expert iteration only):",
            "",
            markdown_table(
                ["iteration", *table_headers()],
                [[str(t["iteration"]), *table_cells(t)] for t in report["paired"]],
            ),
            "",
        ]
    training = report["training"]["iterations"]
    if training:
        lines += [
            "Training, " + report["training"]["note"] + ":",
            "",
            markdown_table(
                ["adapter", "steps", "examples", "tokens"],
                [
                    [
                        k,
                        str(v["steps"]),
                        str(v["train_examples"]),
                        "not recorded" if v["tokens"] is None else str(v["tokens"]),
                    ]
                    for k, v in training.items()
                ],
            ),
            "",
        ]
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def run(
    *,
    expert: Sequence[Path],
    search_only: Sequence[Path],
    out_json: Path,
    out_md: Path,
    training: Mapping[int, Path] | None = None,
) -> dict[str, Any]:
    """Write ``out_json`` and ``out_md`` (:func:`compute_report`, :func:`compute_markdown`)."""
    report = compute_report(expert, search_only, training)
    _write(out_json, json.dumps(report, indent=2, sort_keys=True) + "\n")
    _write(out_md, compute_markdown(report) + "\n")
    for t in report["paired"]:
        log.info("iteration %d vs search only: gained %d, lost %d, p = %.3g (%s)",
                 t["iteration"], t["gained"], t["lost"], t["p_value"], t["verdict"])  # fmt: skip
    return report
