"""Expert iteration against search only at the same search compute (Polu et al. 2022; issue 61).

Polu et al. ("Formal Mathematics Statement Curriculum Learning", §4.6) compare expert iteration —
proof search interleaved with learning — with a loop that skips the retraining and spends the same
search attempts per iteration, by the cumulative pass rate on the statement set.  The default
target builds that comparison on the search pool for every iteration (rule ``compute_report``):

- **the shared first step**: iteration 0's searches — the pool search (``results/iter_0/search``)
  and the noise search (``results/iter_0/search_noise``), both by iteration 0's model on the data
  stage's pool — are both arms' step 1: their compute is both arms', their proofs both arms';
- **expert iteration**: iteration i's own search (``results/iter_i/search``: iteration i's model
  and value model on iteration i's pool — the pool theorems expert iteration has not proved yet);
- **search only**: iteration 0's model, no retraining, no value model (so at ``search.temperature``,
  as iteration 0), searching *its own* pool chain (``results/iter_i/search_only``: the pool
  theorems search only has not proved yet, rule ``search_only_pool_select``), with the same search
  config and seeds of its own (salt ``search_only/iter_i``).

Each arm's step i searches only theorems the arm has not proved before it: a search that does not
(expert iteration's leftovers searched by the other arm, say) is refused naming it.

**Compute**, from what each search's rows record (:mod:`burnqed.trajectory`): node expansions
(``nodes_expanded``) and generated tokens (``tokens``), summed over every attempt, infrastructure
errors included (they spent it), and the value model's scorings (node rows with an energy: one
forward pass of the policy over the state each).  **Training** — the tokens each trainer's
optimizer steps saw (:class:`burnqed.train.artifacts.TrainedTokens`: the base model's
``burnqed_model.json``, each adapter's ``training_summary.json``) — is stated beside it, never
added: the search-only arm trains nothing after iteration 0, whose model both arms share.

**The curve**, per arm after each step: cumulative compute and the cumulative pool pass rate —
the theorems any of the arm's searches so far proved (once each) over the data stage's pool.  Each
arm is also written as an eval-shaped **pool curve** (:func:`arm_curve`; ``results/compute/
expert_iteration.json`` and ``search_only.json``): per pool theorem the step at which the arm first
proved it (``budget_at_proof``; ``budgets`` are the steps, ``budget_unit`` says so), a benchmark
block naming the pool (role ``pool``), provenance — so the paired test of
:mod:`burnqed.eval.paired` (``varies: training``), and a study's registered comparison of ``kind:
pool curve`` (:mod:`burnqed.study.registration`), read them as they read two evals.  **Paired**,
after each step from the second: exact McNemar of the two arms on the cumulative solved indicator
over the pool (gained = proved so far by expert iteration only).

An iteration whose training a guard stopped keeps the previous iteration's model
(:func:`burnqed.train.joint.stop_record`): its search, its training row and its step say so.

Example::

    run(pool=Path("data/theorems/search_pool.jsonl"),
        shared=[Path("results/iter_0/search"), Path("results/iter_0/search_noise")],
        expert=[Path("results/iter_1/search")], search_only=[Path("results/iter_1/search_only")],
        base=Path("models/base"), adapters=[Path("models/iter_0/adapter"),
                                            Path("models/iter_1/adapter")],
        out_json=Path("results/compute.json"), out_md=Path("results/compute.md"),
        out_arms={"expert iteration": Path("results/compute/expert_iteration.json"),
                  "search only": Path("results/compute/search_only.json")}, seed=0)
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.config import InputError
from burnqed.data.benchmarks import sha256_file
from burnqed.eval.paired import paired_test, table_cells, table_headers
from burnqed.eval.table import markdown_table, pct
from burnqed.outcomes import INFRASTRUCTURE, SOLVED
from burnqed.provenance import git_commit, package_versions
from burnqed.theorems import read_theorems
from burnqed.trajectory import MANIFEST, read_nodes, read_summary, search_part_dirs

log = logging.getLogger(__name__)

KIND = "burnqed compute"
CURVE_KIND = "burnqed pool curve"  # an arm's eval-shaped curve (burnqed.study reads it)
EXPERT = "expert iteration"
SEARCH_ONLY = "search only"
ARMS = (EXPERT, SEARCH_ONLY)
# What separates the arms (burnqed.eval.paired.FACTORS): training, and with it the models, the
# value model and the value model's search temperature.
VARIES = "training"
POOL_BENCHMARK = "search_pool"  # the benchmark block's name: the data stage's pool
POOL_ROLE = "pool"  # burnqed.data.benchmarks.POOL
BUDGET_UNIT = (
    "iterations searched: step 1 is iteration 0's searches (both arms'), step i + 1 iteration i's "
    "search of the pool theorems the arm had not proved"
)


def _manifest(directory: Path) -> dict[str, Any]:
    """The search's manifest (a gathered one: its first shard's for the settings), {} without."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        return {}
    m = json.loads(path.read_text(encoding="utf-8"))
    per_shard = m.get("per_shard") or {}
    return next(iter(per_shard.values()), m) if per_shard else m


def _value_scorings(parts: Sequence[Path]) -> int:
    """Node rows with a value-model energy: the states the value model scored."""
    n = 0
    for d in parts:
        t = read_nodes(d).table
        if t.num_rows:
            n += t.num_rows - t.column("ebm_energy").null_count
    return n


def search_compute(directory: Path, label: str) -> dict[str, Any]:
    """One search's counts from its rows (every shard's): theorems attempted (an attempt that ran
    to a result), proved, attempts, infrastructure errors, node expansions, generated tokens and
    value-model scorings; its settings from the manifest; ``proved_theorems``/``theorem_keys``
    for the curves."""
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
        "sampling": m.get("sampling"),
        "machine": m.get("machine"),
        "max_nodes": cfg.get("max_nodes"),
        "attempts_per_theorem": cfg.get("attempts"),
        "config": cfg,
        "theorems": len(attempted),
        "proved": len(proved),
        "attempts": len(rows),
        "errors": sum(r["status"] == INFRASTRUCTURE for r in rows),
        "nodes_expanded": sum(r["nodes_expanded"] for r in rows),
        "tokens": sum(r["tokens"] for r in rows),
        "value_scorings": _value_scorings(parts),
        "skipped_parts": skipped,
        "theorem_keys": attempted,
        "proved_theorems": proved,
    }


def _config_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    ca, cb = a.get("config") or {}, b.get("config") or {}
    return sorted(k for k in set(ca) | set(cb) if ca.get(k) != cb.get(k))


def check_own_pools(arm: str, steps: Sequence[Sequence[Mapping[str, Any]]]) -> None:
    """Every search of ``arm`` after the shared step searched only theorems the arm had not
    proved before it (its own pool chain); :class:`InputError` naming the search otherwise."""
    proved: set[str] = set()
    for step in steps:
        for s in step:
            again = sorted(set(s["theorem_keys"]) & proved)
            if again:
                raise InputError(
                    f"{s['directory']}: searched {len(again)} theorem(s) {arm} had already "
                    f"proved (e.g. {again[0]!r}): each arm searches the pool theorems it has not "
                    "proved itself"
                )
        proved |= {t for s in step for t in s["proved_theorems"]}


def curve(steps: Sequence[Sequence[Mapping[str, Any]]], pool: Sequence[str]) -> list[dict]:
    """Cumulative compute and pool pass rate of one arm after each step (a list of searches)."""
    keys = set(pool)
    out, proved = [], set()
    nodes = tokens = scorings = 0
    for k, step in enumerate(steps, 1):
        for s in step:
            proved |= set(s["proved_theorems"]) & keys
            nodes += s["nodes_expanded"]
            tokens += s["tokens"]
            scorings += s["value_scorings"]
        out.append({
            "step": k,
            "searches": [s["label"] for s in step],
            "nodes_expanded": nodes,
            "tokens": tokens,
            "value_scorings": scorings,
            "proved": len(proved),
            "pool": len(keys),
            "pass_rate": len(proved) / len(keys) if keys else None,
        })  # fmt: skip
    return out


def _first_proof(steps: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, int]:
    first: dict[str, int] = {}
    for k, step in enumerate(steps, 1):
        for s in step:
            for t in s["proved_theorems"]:
                first.setdefault(t, k)
    return first


def arm_curve(
    arm: str,
    steps: Sequence[Sequence[Mapping[str, Any]]],
    pool: Mapping[str, Any],
    *,
    seed: int | None,
    stopped: Mapping[int, Mapping[str, Any]] | None = None,
    benchmark: Mapping[str, Any] | None = None,
    budget_unit: str = BUDGET_UNIT,
    denominator: str | None = None,
) -> dict[str, Any]:
    """``arm``'s pool curve as an eval-shaped JSON (module docstring): per pool theorem the step at
    which the arm first proved it (``budget_at_proof``, None: not proved; ``evaluated``: some
    search of the arm ran an attempt on it to a result), ``budgets`` the steps, ``by_budget`` the
    cumulative counts and compute, the pool as its benchmark, and the provenance the paired test
    compares (:data:`burnqed.eval.paired.COMPARED_FIELDS`): the model and value model of the arm's
    last step, its sampling, search config, seed and machine.  ``stopped``: iteration → the
    ``stopped`` block of its training (the arm's model there is the previous iteration's).

    The same curve over another theorem set (:mod:`burnqed.eval.benchmark_curves`: an eval
    benchmark, each step an eval of all of it): ``pool`` holds its keys, ``benchmark`` its block
    (default: the data stage's search pool), ``budget_unit`` what a step is and ``denominator``
    what the pass rate divides by."""
    keys = list(pool["keys"])
    first = _first_proof(steps)
    attempted = {t for step in steps for s in step for t in s["theorem_keys"]}
    rows = [{"theorem": t, "evaluated": t in attempted, "budget_at_proof": first.get(t),
             "solved": t in first} for t in keys]  # fmt: skip
    evaluated = sum(r["evaluated"] for r in rows)
    budgets = list(range(1, len(steps) + 1))
    c = curve(steps, keys)
    last = steps[-1][0]  # the arm's own search of the last step (the pool search at step 1)
    complete = evaluated == len(keys)
    block = dict(benchmark) if benchmark is not None else {
        "name": POOL_BENCHMARK, "split": None, "role": POOL_ROLE, "file": pool["file"],
        "sha256": pool["sha256"],
    }  # fmt: skip
    return {
        "kind": CURVE_KIND,
        "label": arm,
        "budget_unit": budget_unit,
        "budgets": budgets,
        "pass_n": last.get("attempts_per_theorem"),
        "status": {
            "complete": complete,
            "label": f"{'complete' if complete else 'partial'} {evaluated}/{len(keys)}",
            "evaluated_theorems": evaluated,
            "expected_theorems": len(keys),
            "denominator": denominator
            or f"the {len(keys)} theorems of the data stage's search pool",
        },
        "by_budget": [
            {
                "budget": p["step"],
                "solved": p["proved"],
                "rate": p["pass_rate"],
                "nodes_expanded": p["nodes_expanded"],
                "tokens": p["tokens"],
                "value_scorings": p["value_scorings"],
                "searches": p["searches"],
            }
            for p in c
        ],
        "solved_theorems": sorted(first),
        "per_theorem": rows,
        "benchmark": block,
        "provenance": {
            "model": {"path": last.get("model"), "sha256": None},
            "ebm": {"path": last["ebm"], "sha256": None} if last.get("ebm") else None,
            "searches": [[s["directory"] for s in step] for step in steps],
            "seed_salts": [[s.get("seed_salt") for s in step] for step in steps],
            "sampling": last.get("sampling"),
            "config": {"search": last.get("config")},
            "seeds": {"seed": seed},
            "training_stopped": {f"iter_{i}": dict(v) for i, v in sorted((stopped or {}).items())},
            "git_commit": git_commit(),
            "versions": package_versions(),
        },
        "machine": last.get("machine"),
    }


def training_compute(base: Path | None, adapters: Sequence[Path]) -> dict[str, Any]:
    """What each training spent: the base model's (its ``burnqed_model.json``, when it trained
    one) and each iteration's adapter's (``training_summary.json``): steps, examples, the tokens
    its optimizer steps saw (prompt, completion and the value head's rows apart; None where a
    summary predates the count) and, for a training a guard stopped, its ``stopped`` block."""
    out: dict[str, Any] = {}
    if base is not None:
        path = Path(base) / "burnqed_model.json"
        if not path.is_file():
            raise InputError(f"{path}: no base model record (build models/base first)")
        training = json.loads(path.read_text(encoding="utf-8")).get("training")
        if training:  # a pretrained base trained nothing here
            out["base"] = {"summary": str(path), "steps": training.get("steps"),
                           "train_examples": training.get("examples"),
                           "tokens": training.get("tokens"), "stopped": None}  # fmt: skip
    for i, adapter in enumerate(adapters):
        path = Path(adapter) / "training_summary.json"
        if not path.is_file():
            raise InputError(f"{path}: no training summary (train iteration {i} first)")
        s = json.loads(path.read_text(encoding="utf-8"))
        out[f"iter_{i}"] = {
            "summary": str(path),
            "steps": s.get("steps"),
            "train_examples": (s.get("data") or {}).get("train_examples"),
            "tokens": s.get("tokens"),
            "stopped": s.get("stopped"),
        }
    return out


def _pool(path: Path) -> dict[str, Any]:
    path = Path(path)
    try:
        keys = [t.key for t in read_theorems(path)]
    except OSError as e:
        raise InputError(f"{path}: cannot read the search pool ({e.strerror})") from None
    return {"file": str(path), "sha256": sha256_file(path), "keys": keys}


def compute_report(
    *,
    pool: Path,
    shared: Sequence[Path],
    expert: Sequence[Path],
    search_only: Sequence[Path],
    base: Path | None = None,
    adapters: Sequence[Path] = (),
    seed: int | None = None,
) -> dict[str, Any]:
    """The comparison (module docstring): ``shared`` is iteration 0's searches (both arms' first
    step), ``expert`` and ``search_only`` each arm's search of iterations 1 …; ``base`` and
    ``adapters`` (iterations 0 …) what training spent, stated apart.  Returns ``compute.json``'s
    content, with each arm's pool curve under ``arms``."""
    if len(expert) != len(search_only):
        raise InputError(
            f"{len(expert)} expert-iteration search(es) and {len(search_only)} search-only "
            "search(es): one of each per iteration after iteration 0"
        )
    if not shared:
        raise InputError("no shared first step: iteration 0's searches are both arms' first step")
    p = _pool(pool)
    first = [search_compute(d, f"iter_0 {Path(d).name}") for d in shared]
    ei = [search_compute(d, f"iter_{i} search") for i, d in enumerate(expert, 1)]
    so = [search_compute(d, f"iter_{i} search only") for i, d in enumerate(search_only, 1)]
    for a, b in zip(ei, so, strict=True):
        differ = _config_differences(a, b)
        if differ:
            raise InputError(
                f"{a['directory']} and {b['directory']}: searched with different search "
                f"settings ({', '.join(differ)}); search only must spend the same budget and "
                "attempts"
            )
    steps = {EXPERT: [first, *([s] for s in ei)], SEARCH_ONLY: [first, *([s] for s in so)]}
    for arm, st in steps.items():
        check_own_pools(arm, st)
    training = training_compute(base, adapters)
    # iterations whose training a guard stopped: their model is the previous iteration's
    stopped = {i: training[f"iter_{i}"]["stopped"] for i in range(len(adapters))
               if training[f"iter_{i}"]["stopped"]}  # fmt: skip
    arms = {
        EXPERT: arm_curve(EXPERT, steps[EXPERT], p, seed=seed, stopped=stopped),
        SEARCH_ONLY: arm_curve(SEARCH_ONLY, steps[SEARCH_ONLY], p, seed=seed),
    }
    paired = []
    for k in arms[EXPERT]["budgets"][1:]:
        t = paired_test(arms[SEARCH_ONLY], arms[EXPERT], varies=VARIES, budget=k)
        paired.append({"iteration": k - 1, "step": k, **t})
    searches = {s["label"]: {k: v for k, v in s.items()
                             if k not in ("theorem_keys", "config", "machine")}
                for s in (*first, *ei, *so)}  # fmt: skip
    return {
        "kind": KIND,
        "description": (
            "Expert iteration vs search only at the same search attempts (Polu et al. 2022): each "
            "arm searches the pool theorems it has not proved itself, once per iteration; the "
            "cumulative pool pass rate against cumulative node expansions, generated tokens and "
            "value-model scorings; training compute stated apart, never added to search compute."
        ),
        "pool": {k: v for k, v in p.items() if k != "keys"} | {"theorems": len(p["keys"])},
        "pool_theorems": len(p["keys"]),
        "searches": searches,
        "curves": {arm: curve(st, p["keys"]) for arm, st in steps.items()},
        "paired": paired,
        "training": {
            "note": "stated beside search compute, never added to it: both arms share the base "
            "model and iteration 0's adapter; the adapters of iterations 1 … (and the value "
            "models trained for them, not counted here) are what expert iteration spends besides",
            "iterations": training,
        },
        "stopped": {f"iter_{i}": v for i, v in sorted(stopped.items())},
        "arms": arms,
    }


def _ratio(a: int, b: int) -> str:
    return "–" if not b else f"{a / b:.2f}"


def _tokens(t: Mapping[str, Any] | None) -> list[str]:
    if not t:
        return ["not recorded"] * 4
    return [str(t.get(k)) for k in ("total", "prompt", "completion", "value")]


def paired_lines(paired: Sequence[Mapping[str, Any]], intro: str) -> list[str]:
    """The paired tests of the two arms after each iteration, as markdown lines under ``intro``,
    and the reasons of any left undecided (none: no lines)."""
    if not paired:
        return []
    lines = [
        intro,
        "",
        markdown_table(
            ["after iteration", *table_headers()],
            [[str(t["iteration"]), *table_cells(t)] for t in paired],
        ),
        "",
    ]
    undecided = [f"after iteration {t['iteration']}: {'; '.join(t['reasons'])}"
                 for t in paired if t["reasons"]]  # fmt: skip
    if undecided:
        lines += ["Undecided: " + " — ".join(undecided) + ".", ""]
    return lines


def compute_markdown(report: Mapping[str, Any]) -> str:
    """The section ``Search only at the same compute``: the curves side by side, the paired
    tests on the cumulative solved indicator, training compute beside."""
    ei, so = report["curves"][EXPERT], report["curves"][SEARCH_ONLY]
    rows = [
        [str(a["step"] - 1), str(a["nodes_expanded"]), str(a["tokens"]), str(a["value_scorings"]),
         f"{a['proved']}/{a['pool']}", pct(a["pass_rate"]), str(b["nodes_expanded"]),
         str(b["tokens"]), f"{b['proved']}/{b['pool']}", pct(b["pass_rate"])]
        for a, b in zip(ei, so, strict=True)
    ]  # fmt: skip
    lines = [
        "## Search only at the same compute",
        "",
        "Expert iteration against search only on the search pool (Polu et al. 2022), after each "
        "iteration: the cumulative pool pass rate (a theorem proved by any of the arm's searches "
        "so far, once) against cumulative search compute.  Each arm searches the pool theorems it "
        "has not proved itself, with the same search config and seeds of its own; iteration 0's "
        "searches (pool and noise) are both arms' first step.  Expert iteration: each "
        "iteration's model and value model; search only: iteration 0's model, no retraining, no "
        "value model.  Value scorings: states the value model scored (one forward pass over the "
        "state each).  Training is not counted in either arm (below).",
        "",
        markdown_table(
            [
                "after iteration",
                "EI nodes",
                "EI tokens",
                "EI value scorings",
                "EI proved",
                "EI pass rate",
                "SO nodes",
                "SO tokens",
                "SO proved",
                "SO pass rate",
            ],
            rows,
        ),
        "",
        f"EI = expert iteration, SO = search only; pool: {report['pool']['file']} "
        f"({report['pool_theorems']} theorems, sha256 {str(report['pool']['sha256'])[:12]}).",
        "",
    ]
    for it, s in (report.get("stopped") or {}).items():
        lines += [
            f"> **{it}'s model is the previous iteration's ({s.get('previous_adapter')}): its "
            f"training stopped at step {s.get('step')} ({s.get('reason')}); expert iteration's "
            f"search of {it} ran with it.**",
            "",
        ]
    if ei:
        a, b = ei[-1], so[-1]
        lines += [
            f"Compute ratio (expert iteration / search only) after the last iteration: nodes "
            f"{_ratio(a['nodes_expanded'], b['nodes_expanded'])}, tokens "
            f"{_ratio(a['tokens'], b['tokens'])}; expert iteration's value model scored "
            f"{a['value_scorings']} states besides.",
            "",
        ]
    lines += paired_lines(
        report["paired"],
        "Paired per theorem of the pool on the cumulative solved indicator after each iteration "
        "(exact McNemar: gained = proved so far by expert iteration only, lost = by search only "
        "only; budget = iterations searched):",
    )
    training = report["training"]["iterations"]
    if training:
        lines += [
            "Training, " + report["training"]["note"] + ":",
            "",
            markdown_table(
                [
                    "training",
                    "steps",
                    "examples",
                    "tokens",
                    "prompt",
                    "completion",
                    "value rows",
                    "stopped",
                ],
                [
                    [
                        k,
                        str(v["steps"]),
                        str(v["train_examples"]),
                        *_tokens(v.get("tokens")),
                        "–" if not v.get("stopped") else f"step {v['stopped'].get('step')}",
                    ]
                    for k, v in training.items()
                ],
            ),
            "",
        ]
    return "\n".join(lines)


def check_arm_files(out_arms: Mapping[str, Path]) -> None:
    """Refuse, before any work, an ``out_arms`` without a file for each arm."""
    missing = [a for a in ARMS if a not in out_arms]
    if missing:
        raise InputError(f"out_arms: no file for {', '.join(missing)}")


def write_arms_report(
    report: Mapping[str, Any], markdown: str, *, out_json: Path, out_md: Path,
    out_arms: Mapping[str, Path], where: str,
) -> None:  # fmt: skip
    """Each arm's curve (``report["arms"]``) to its file of ``out_arms``, the rest of ``report``
    (naming those files) to ``out_json`` and ``markdown`` to ``out_md``, each written whole; the
    paired tests logged, on ``where``."""
    for arm in ARMS:
        _write(out_arms[arm], _json(report["arms"][arm]))
    body = {k: v for k, v in report.items() if k != "arms"}
    body["arm_files"] = {arm: str(out_arms[arm]) for arm in ARMS}
    _write(out_json, _json(body))
    _write(out_md, markdown + "\n")
    for t in report["paired"]:
        log.info("on %s after iteration %d, expert iteration vs search only: gained %s, lost %s, "
                 "p = %s (%s)", where, t["iteration"], t["gained"], t["lost"], t["p_value"],
                 t["verdict"])  # fmt: skip


def _write(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _json(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True) + "\n"


def run(
    *,
    pool: Path,
    shared: Sequence[Path],
    expert: Sequence[Path],
    search_only: Sequence[Path],
    out_json: Path,
    out_md: Path,
    out_arms: Mapping[str, Path],
    base: Path | None = None,
    adapters: Sequence[Path] = (),
    seed: int | None = None,
) -> dict[str, Any]:
    """Write ``out_json``, ``out_md`` and each arm's pool curve (``out_arms``: arm → file)."""
    check_arm_files(out_arms)
    report = compute_report(pool=pool, shared=shared, expert=expert, search_only=search_only,
                            base=base, adapters=adapters, seed=seed)  # fmt: skip
    write_arms_report(report, compute_markdown(report), out_json=out_json, out_md=out_md,
                      out_arms=out_arms, where="the pool")  # fmt: skip
    return report


def stopped_text(stopped: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> str:
    """One sentence on the trainings a guard stopped across a study's seeds
    (:func:`burnqed.study.curves.guard_stops`, the seeds as strings, as a study's
    ``report.json`` keeps them): for its report and the README's headline."""
    if not stopped:
        return "No training guard stopped a training on any seed."
    items = [
        f"seed {s}'s iteration {it.removeprefix('iter_')}"
        + (f" ({x['reason'].split(':')[0]})" if x.get("reason") else "")
        for s, its in sorted(stopped.items(), key=lambda kv: int(kv[0]))
        for it, x in its.items()
    ]
    n = len(items)
    return (
        f"A training guard stopped {n} training{'s' if n > 1 else ''} — "
        + ", ".join(items)
        + f": {'each' if n > 1 else 'that'} iteration kept the previous iteration's model, as "
        "the loop does, and the seed's run went on; its figures count as they came out."
    )
