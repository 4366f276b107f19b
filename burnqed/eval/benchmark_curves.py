"""Expert iteration against search only on the eval benchmark, in Polu et al.'s Fig. 2 form (issue
61 §3: the registered secondary beside the pool comparison of :mod:`burnqed.eval.compute`).

Polu et al. ("Formal Mathematics Statement Curriculum Learning", §4.6, Fig. 2) plot the cumulative
pass rate on held-out statements over iterations: the evaluations of expert iteration's successive
models, unioned, against a sample-only loop that searches with the first model as many times.  Per
iteration ``i`` of a run:

- **expert iteration**: iteration ``i``'s eval (``results/iter_i/eval.json``: its model, its value
  model from iteration 1 on, the whole benchmark at the eval's budgets);
- **search only**: iteration 0's model, no value model, evaluated again with a seed salt of its own
  (``results/iter_i/eval_search_only.json``, rule ``eval_search_only``, salt
  ``eval_search_only/iter_i``): fresh samples at the same search settings and budgets;
- **step 1, both arms'**: iteration 0's eval.

Each arm's curve after step ``k``: the benchmark theorems any of its first ``k`` evals proved (at
the evals' largest budget), each once, over the benchmark's theorems, beside the evals' cumulative
node expansions, generated tokens and value-model scorings.  Each arm is written eval-shaped
(:func:`burnqed.eval.compute.arm_curve`, ``kind`` :data:`~burnqed.eval.compute.CURVE_KIND`) with
the benchmark's own block (name, split, role), so the paired test of :mod:`burnqed.eval.paired`
(``varies: training``) and a study's comparison of measure ``benchmark curve``
(:mod:`burnqed.study.registration`) read the two arms as two evals.  **Paired**, after each step
from the second: exact McNemar on the cumulative solved indicator over the benchmark.  On a
confirmation benchmark every eval of either arm is a look, and each eval records its own
(:func:`burnqed.eval.ledger.look_record`).

Refused, naming the file: an eval of another benchmark or with other search or eval settings, a
search-only eval not of iteration 0's model or with a value model, two search-only evals with the
same draws (their seed salts), a number of search-only evals other than one per iteration after 0.

Example::

    run(benchmark=Path("data/benchmarks/proplogic_test.jsonl"),
        expert=[Path("results/iter_0/eval.json"), Path("results/iter_1/eval.json")],
        search_only=[Path("results/iter_1/eval_search_only.json")],
        out_json=Path("results/compute/benchmark.json"),
        out_md=Path("results/compute/benchmark.md"),
        out_arms={EXPERT: Path("results/compute/benchmark_expert_iteration.json"),
                  SEARCH_ONLY: Path("results/compute/benchmark_search_only.json")}, seed=0)
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.config import InputError
from burnqed.data.benchmarks import sha256_file
from burnqed.eval.compute import (
    ARMS,
    EXPERT,
    SEARCH_ONLY,
    VARIES,
    arm_curve,
    check_arm_files,
    curve,
    paired_lines,
    search_compute,
    write_arms_report,
)
from burnqed.eval.ledger import role_of, split_name
from burnqed.eval.paired import paired_test
from burnqed.eval.stage import theorem_ids
from burnqed.eval.table import markdown_table, pct

KIND = "burnqed benchmark curves"
BUDGET_UNIT = (
    "iterations evaluated: step 1 is iteration 0's eval (both arms'), step i + 1 iteration i's "
    "eval of the whole benchmark — expert iteration's model of iteration i, or search only's "
    "iteration 0 model with fresh samples"
)
SALT = "eval_search_only/iter_{i}"
HEADERS = ["after iteration", "EI proved", "EI pass rate", "EI nodes", "EI value scorings",
           "SO proved", "SO pass rate", "SO nodes"]  # fmt: skip  # rule eval_search_only's seed salt of iteration i


def _eval(path: Path) -> dict[str, Any]:
    try:
        e = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise InputError(f"{path}: cannot read the eval ({err.strerror})") from None
    if e.get("kind") != "burnqed eval":
        raise InputError(f"{path}: not an eval (kind {e.get('kind')!r})")
    return e


def _settings(e: Mapping[str, Any]) -> dict[str, Any]:
    """What two evals of one curve must share: search and eval config, budget factor, attempts."""
    config = (e.get("provenance") or {}).get("config") or {}
    return {"search": config.get("search"), "eval": config.get("eval"),
            "budget_factor": e.get("budget_factor", 1), "pass_n": e.get("pass_n")}  # fmt: skip


def _check(
    benchmark: Path, expert: Sequence[Path], search_only: Sequence[Path],
    es: Sequence[Mapping[str, Any]], so: Sequence[Mapping[str, Any]],
) -> None:  # fmt: skip
    digest = sha256_file(benchmark)
    want = _settings(es[0])
    for path, e in [*zip(expert, es, strict=True), *zip(search_only, so, strict=True)]:
        got = (e.get("benchmark") or {}).get("sha256")
        if got != digest:
            raise InputError(f"{path}: an eval of {(e.get('benchmark') or {}).get('file')} "
                             f"(sha256 {str(got)[:12]}), not of {benchmark} "
                             f"({digest[:12]})")  # fmt: skip
        differ = sorted(k for k, v in _settings(e).items() if v != want[k])
        if differ:
            raise InputError(f"{path}: evaluated with other settings than {expert[0]} "
                             f"({', '.join(differ)}); both arms spend the same search")  # fmt: skip
    first = (es[0].get("provenance") or {}).get("model") or {}
    salts: dict[Any, Path] = {None: expert[0]}
    for path, e in zip(search_only, so, strict=True):
        prov = e.get("provenance") or {}
        model = prov.get("model") or {}
        if (model.get("path"), model.get("sha256")) != (first.get("path"), first.get("sha256")):
            raise InputError(f"{path}: evaluates {model.get('path')}, not iteration 0's model "
                             f"{first.get('path')} (search only does not retrain)")  # fmt: skip
        if prov.get("ebm"):
            raise InputError(f"{path}: evaluated with a value model ({prov['ebm'].get('path')}); "
                             "search only has none, as iteration 0")  # fmt: skip
        salt = (prov.get("seeds") or {}).get("seed_salt")
        if salt in salts:
            raise InputError(f"{path}: draws the samples of {salts[salt]} (seed salt {salt!r}): "
                             "search only searches again with fresh ones")  # fmt: skip
        salts[salt] = path


def benchmark_curves(
    *, benchmark: Path, expert: Sequence[Path], search_only: Sequence[Path],
    seed: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The comparison (module docstring): ``expert`` the eval JSONs of iterations 0 …,
    ``search_only`` the search-only evals of iterations 1 … (iteration 0's model, fresh salts).
    Returns ``benchmark.json``'s content, with each arm's curve under ``arms``."""
    if not expert:
        raise InputError("no eval of iteration 0: both arms' first step")
    if len(search_only) != len(expert) - 1:
        raise InputError(f"{len(expert)} eval(s) of expert iteration (iterations 0 …) and "
                         f"{len(search_only)} search-only eval(s): one per iteration after "
                         "iteration 0")  # fmt: skip
    benchmark = Path(benchmark)
    es = [_eval(p) for p in expert]
    so = [_eval(p) for p in search_only]
    _check(benchmark, expert, search_only, es, so)
    keys = theorem_ids(benchmark)
    b = es[0]["benchmark"]
    block = {"name": b.get("name"), "split": b.get("split"), "role": role_of(es[0]),
             "file": str(benchmark), "sha256": b.get("sha256")}  # fmt: skip
    first = [search_compute(Path(expert[0]).with_suffix(""), "iter_0 eval")]
    ei = [search_compute(Path(p).with_suffix(""), f"iter_{i} eval")
          for i, p in enumerate(expert[1:], 1)]  # fmt: skip
    sos = [search_compute(Path(p).with_suffix(""), f"iter_{i} eval search only")
           for i, p in enumerate(search_only, 1)]  # fmt: skip
    steps = {EXPERT: [first, *([s] for s in ei)], SEARCH_ONLY: [first, *([s] for s in sos)]}
    stopped = {i: e["provenance"]["model"]["training_stopped"] for i, e in enumerate(es)
               if ((e.get("provenance") or {}).get("model") or {}).get("training_stopped")}  # fmt: skip
    pool = {"keys": keys, "file": str(benchmark), "sha256": block["sha256"]}
    denominator = f"the {len(keys)} theorems of {split_name(b)}"
    arms = {
        arm: arm_curve(arm, steps[arm], pool, seed=seed, benchmark=block, budget_unit=BUDGET_UNIT,
                       denominator=denominator, stopped=stopped if arm == EXPERT else None)
        for arm in ARMS
    }  # fmt: skip
    paired = []
    for k in arms[EXPERT]["budgets"][1:]:
        t = paired_test(arms[SEARCH_ONLY], arms[EXPERT], varies=VARIES, budget=k)
        paired.append({"iteration": k - 1, "step": k, **t})
    return {
        "kind": KIND,
        "description": (
            "Expert iteration vs search only on the benchmark (Polu et al. 2022, Fig. 2): the "
            "union of every iteration's eval against iteration 0's model evaluated as many times "
            "with fresh samples; the cumulative pass rate against cumulative search compute."
        ),
        "benchmark": block | {"theorems": len(keys)},
        "evals": {
            EXPERT: [str(p) for p in expert],
            SEARCH_ONLY: [str(expert[0]), *(str(p) for p in search_only)],
        },
        "curves": {arm: curve(st, keys) for arm, st in steps.items()},
        "paired": paired,
        "stopped": {f"iter_{i}": v for i, v in sorted(stopped.items())},
        "arms": arms,
    }


def benchmark_markdown(report: Mapping[str, Any]) -> str:
    """The section ``Search only on the benchmark``: both curves and their paired tests."""
    ei, so = report["curves"][EXPERT], report["curves"][SEARCH_ONLY]
    b = report["benchmark"]
    rows = [
        [str(a["step"] - 1), f"{a['proved']}/{a['pool']}", pct(a["pass_rate"]),
         str(a["nodes_expanded"]), str(a["value_scorings"]), f"{c['proved']}/{c['pool']}",
         pct(c["pass_rate"]), str(c["nodes_expanded"])]
        for a, c in zip(ei, so, strict=True)
    ]  # fmt: skip
    lines = [
        "## Search only on the benchmark",
        "",
        f"Expert iteration against search only on {split_name(b)} ({b['role'] or 'no role'}), "
        "Polu et al.'s Fig. 2 form: after each iteration, the benchmark theorems any of the arm's "
        "evals so far proved (each once).  Expert iteration: every iteration's eval (its model "
        "and value model); search only: iteration 0's model, no value model, evaluated again each "
        "iteration with fresh samples (seed salt eval_search_only/iter_i); iteration 0's eval is "
        "both arms' first step.",
        "",
        markdown_table(HEADERS, rows),
        "",
    ]
    for it, s in (report.get("stopped") or {}).items():
        lines += [f"> **{it}'s model is the previous iteration's: its training stopped at step "
                  f"{s.get('step')} ({s.get('reason')}).**", ""]  # fmt: skip
    lines += paired_lines(
        report["paired"],
        "Paired per benchmark theorem on the cumulative solved indicator (exact McNemar: gained = "
        "proved so far by expert iteration only; budget = iterations evaluated):",
    )
    return "\n".join(lines)


def run(
    *,
    benchmark: Path,
    expert: Sequence[Path],
    search_only: Sequence[Path],
    out_json: Path,
    out_md: Path,
    out_arms: Mapping[str, Path],
    seed: int | None = None,
) -> dict[str, Any]:
    """Write ``out_json``, ``out_md`` and each arm's curve (``out_arms``: arm → file)."""
    check_arm_files(out_arms)
    report = benchmark_curves(benchmark=benchmark, expert=expert, search_only=search_only,
                              seed=seed)  # fmt: skip
    write_arms_report(report, benchmark_markdown(report), out_json=out_json, out_md=out_md,
                      out_arms=out_arms, where=str(benchmark))  # fmt: skip
    return report


__all__ = ["BUDGET_UNIT", "HEADERS", "KIND", "benchmark_curves", "benchmark_markdown", "run"]
