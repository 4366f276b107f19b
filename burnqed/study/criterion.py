"""A design's development criterion (issue 61): a check that can fail on every development seed.

The criterion is written, and committed, before the first development result of the designs it
judges (``docs/development.md``); :func:`judge` applies it to the designs' runs, one directory per
development seed, and says per seed and per check what passed.  A criterion file names the
comparisons a registration would make — the same keys, checked by
:mod:`burnqed.study.registration` — each with a **margin** in points that ``d_s = (gained − lost) /
paired theorems`` must reach on *every* development seed (``seed_margin``: a margin, not a sign,
so it can fail on each seed), and optionally one the seeds' mean must reach (``mean_margin``)::

    criterion:
      description: "…"
      seeds: [101, 102, 103]
      checks:
        - seed_margin: 2.0
          comparison: {name: expert iteration against search only, measure: pool curve,
                       varies: training, treatment: results/compute/expert_iteration.json,
                       control: results/compute/search_only.json}
        - seed_margin: -1.0
          mean_margin: 0.5
          comparison: {name: the shipped value model against its stronger twin,
                       varies: value model, budget: 4, treatment: "results/iter_{last}/eval.json",
                       control: ["results/iter_{last}/eval_no_ebm.json",
                                 "results/iter_{last}/eval_depth_twin.json"]}

A comparison without ``budget`` is taken at the largest budget its two files share (a pool curve:
after the last iteration searched).  ``{last}`` in a file name is the run's last iteration, read off
its expert-iteration pool curve (``results/compute/expert_iteration.json``: iterations searched
− 1), so one criterion judges designs with different numbers of iterations.

**A seed without a result fails every check**: a file missing or unreadable, a training a guard
stopped (the iteration's model is the previous one: ``results/compute.json``'s ``stopped``, or an
eval's ``provenance.model.training_stopped``), or a comparison left undecided (its files differ
in more than the factor it varies).  A design **qualifies** when every check passes on every seed
of the criterion and every ``mean_margin`` holds.

Example::

    burnqed study criterion studies/polu/criterion.yaml runs/dev/P1/seed_101 runs/dev/P1/seed_102 \\
        runs/dev/P1/seed_103
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from burnqed.config import InputError
from burnqed.eval.paired import UNDECIDED
from burnqed.eval.table import markdown_table
from burnqed.study import registration as regfile
from burnqed.study.analysis import per_seed

KIND = "burnqed development criterion"
LAST = "{last}"
EXPERT_CURVE = "results/compute/expert_iteration.json"  # where {last} is read
COMPUTE = "results/compute.json"  # its ``stopped``: trainings a guard stopped


def _fail(path: Path, key: str, why: str) -> InputError:
    return InputError(f"{path}: {key}: {why}")


def _margin(path: Path, key: str, x: Any, *, required: bool) -> float | None:
    if x is None and not required:
        return None
    if isinstance(x, bool) or not isinstance(x, int | float):
        raise _fail(path, key, f"{x!r}: a number of points (e.g. 2.0)")
    return float(x)


def load(path: Path) -> dict[str, Any]:
    """The criterion file, every key checked (one line naming the file and key), before any run is
    read."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        raise InputError(f"{path}: not a readable YAML file ({e})") from None
    c = (doc or {}).get("criterion") if isinstance(doc, Mapping) else None
    if not isinstance(c, Mapping):
        raise _fail(path, "criterion", "missing (a mapping: description, seeds, checks)")
    unknown = set(c) - {"description", "seeds", "checks"}
    if unknown:
        raise _fail(path, "criterion", f"unknown key(s) {sorted(unknown)}")
    seeds = c.get("seeds")
    if (
        not isinstance(seeds, list)
        or len(seeds) < 2
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        raise _fail(path, "criterion.seeds", "two or more distinct integer development seeds")
    checks = c.get("checks")
    if not isinstance(checks, list) or not checks:
        raise _fail(path, "criterion.checks", "missing (a list of {comparison, seed_margin})")
    out = []
    for k, ch in enumerate(checks):
        key = f"criterion.checks[{k}]"
        if not isinstance(ch, Mapping):
            raise _fail(path, key, "expected a mapping {comparison, seed_margin, mean_margin}")
        unknown = set(ch) - {"comparison", "seed_margin", "mean_margin", "why"}
        if unknown:
            raise _fail(path, key, f"unknown key(s) {sorted(unknown)}")
        comparison = regfile._comparison(path, f"{key}.comparison", ch.get("comparison"))
        out.append(
            {
                "comparison": comparison,
                "seed_margin": _margin(
                    path, f"{key}.seed_margin", ch.get("seed_margin"), required=True
                ),
                "mean_margin": _margin(
                    path, f"{key}.mean_margin", ch.get("mean_margin"), required=False
                ),
                "why": ch.get("why"),
            }
        )
    names = [ch["comparison"]["name"] for ch in out]
    if len(set(names)) != len(names):
        raise _fail(path, "criterion.checks", "two checks with the same comparison name")
    return {"description": c.get("description"), "seeds": list(seeds), "checks": out}


def _read(path: Path) -> dict[str, Any]:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not a readable JSON file ({e})") from None


def last_iteration(run: Path) -> int:
    """The run's last iteration searched: its expert-iteration pool curve's steps − 1 (step 1 is
    iteration 0's searches)."""
    budgets = _read(Path(run) / EXPERT_CURVE).get("budgets") or []
    if not budgets:
        raise InputError(f"{Path(run) / EXPERT_CURVE}: a pool curve without budgets")
    return max(budgets) - 1


def _resolve(c: Mapping[str, Any], last: int | None) -> dict[str, Any]:
    def one(f: str) -> str:
        if LAST in f and last is None:
            raise InputError(f"{f}: {LAST} needs the run's {EXPERT_CURVE}")
        return f.replace(LAST, str(last))

    control = c["control"]
    return {
        **c,
        "treatment": one(c["treatment"]),
        "control": [one(f) for f in control] if isinstance(control, list) else one(control),
    }


def stopped_trainings(run: Path, evals: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The trainings a guard stopped in ``run`` (each: where it is said), from
    ``results/compute.json`` and the compared files' provenance."""
    out = []
    compute = Path(run) / COMPUTE
    if compute.is_file():
        for it, s in sorted((_read(compute).get("stopped") or {}).items()):
            out.append(f"{it} (step {s.get('step')}: {s.get('reason')})")
    for f, e in sorted(evals.items()):
        s = ((e.get("provenance") or {}).get("model") or {}).get("training_stopped")
        if s:
            out.append(f"{f}: its model's training stopped at step {s.get('step')}")
    return out


def _seed_of(run: Path, evals: Mapping[str, Mapping[str, Any]]) -> int | None:
    for e in evals.values():
        s = ((e.get("provenance") or {}).get("seeds") or {}).get("seed")
        if s is not None:
            return int(s)
    return None


def judge_seed(criterion: Mapping[str, Any], run: Path) -> dict[str, Any]:
    """Every check on one development seed's run: d in points, the counts, p and whether it
    reached its ``seed_margin``; a seed without a result (module docstring) fails every check,
    saying why."""
    run = Path(run)
    problems: list[str] = []
    last = None
    if any(LAST in f for ch in criterion["checks"] for f in _files(ch["comparison"])):
        try:
            last = last_iteration(run)
        except InputError as e:
            problems.append(str(e))
    comps = []
    evals: dict[str, Any] = {}
    for ch in criterion["checks"]:
        try:
            c = _resolve(ch["comparison"], last)
        except InputError as e:
            problems.append(str(e))
            comps.append(None)
            continue
        comps.append(c)
        for f in _files(c):
            if f not in evals:
                try:
                    evals[f] = _read(run / f)
                except InputError as e:
                    problems.append(str(e))
    stopped = stopped_trainings(run, evals)
    problems += [f"a guard stopped a training: {s}" for s in stopped]
    rows = []
    for ch, c in zip(criterion["checks"], comps, strict=True):
        name, margin = ch["comparison"]["name"], ch["seed_margin"]
        if c is None or not all(f in evals for f in _files(c)):
            rows.append({"name": name, "passed": False, "difference": None,
                         "why": "no result"})  # fmt: skip
            continue
        r = per_seed(c, evals, _seed_of(run, evals))
        d = None if r["difference"] is None else 100 * r["difference"]
        why = None
        if r["verdict"] == UNDECIDED:
            why = "undecided: " + "; ".join(r["reasons"])
        elif d is None:
            why = "no paired theorem"
        elif d < margin:
            why = f"d {d:+.2f} below the margin {margin:+.2f}"
        rows.append({
            "name": name, "control": r["control"], "budget": r["budget"],
            "gained": r["gained"], "lost": r["lost"], "theorems": r["theorems"],
            "difference": d, "p_value": r["p_value"], "margin": margin,
            "passed": why is None and not problems, "why": why or ("no result" if problems else None),
        })  # fmt: skip
    return {"run": str(run), "seed": _seed_of(run, evals), "last_iteration": last,
            "problems": problems, "checks": rows,
            "passed": not problems and all(r["passed"] for r in rows)}  # fmt: skip


def _files(c: Mapping[str, Any]) -> list[str]:
    control = c["control"]
    return [c["treatment"], *(control if isinstance(control, list) else [control])]


def judge(criterion_file: Path, runs: Sequence[Path]) -> dict[str, Any]:
    """The criterion (:func:`load`) on a design's development runs, one directory a seed: per seed
    and check, then each check's mean over the seeds with its ``mean_margin``, and whether the
    design qualifies — every check passed on every one of the criterion's seeds, each mean margin
    held.  A run of a seed the criterion does not name, or a seed it names without a run, is
    refused / counted as a failure."""
    crit = load(criterion_file)
    if not runs:
        raise InputError("no development run given (one directory per development seed)")
    seeds = [judge_seed(crit, Path(r)) for r in runs]
    named = set(crit["seeds"])
    for s in seeds:
        if s["seed"] is not None and s["seed"] not in named:
            raise InputError(
                f"{s['run']}: seed {s['seed']} is not one of the criterion's development seeds "
                f"({', '.join(map(str, crit['seeds']))})"
            )
    missing = sorted(named - {s["seed"] for s in seeds})
    means = []
    for k, ch in enumerate(crit["checks"]):
        ds = [s["checks"][k]["difference"] for s in seeds]
        mean = sum(ds) / len(ds) if ds and all(d is not None for d in ds) else None
        m = ch["mean_margin"]
        means.append({
            "name": ch["comparison"]["name"], "seed_margin": ch["seed_margin"], "mean": mean,
            "mean_margin": m, "seeds_passed": sum(s["checks"][k]["passed"] for s in seeds),
            "mean_passed": m is None or (mean is not None and mean >= m),
        })  # fmt: skip
    qualifies = (
        not missing and all(s["passed"] for s in seeds) and all(x["mean_passed"] for x in means)
    )
    return {
        "kind": KIND,
        "criterion": str(criterion_file),
        "description": crit["description"],
        "seeds": seeds,
        "missing_seeds": missing,
        "checks": means,
        "qualifies": qualifies,
    }


def _points(x: float | None) -> str:
    return "–" if x is None else f"{x:+.2f}"


def markdown(r: Mapping[str, Any]) -> str:
    """The judgement as docs/development.md quotes it: per seed and check, then the means."""
    rows = []
    for s in r["seeds"]:
        for c in s["checks"]:
            counts = f"+{c['gained']}/−{c['lost']} of {c['theorems']}" if c.get("theorems") else "–"
            rows.append([str(s["seed"]), c["name"], counts, _points(c["difference"]),
                         _points(c.get("margin")), "yes" if c["passed"] else f"no ({c['why']})"])  # fmt: skip
    lines = [
        markdown_table(["seed", "check", "gained/lost", "d (points)", "margin", "passed"], rows),
        "",
        markdown_table(
            ["check", "seeds passed", "mean d", "mean margin", "mean passed"],
            [
                [
                    x["name"],
                    f"{x['seeds_passed']}/{len(r['seeds'])}",
                    _points(x["mean"]),
                    _points(x["mean_margin"]),
                    "yes" if x["mean_passed"] else "no",
                ]
                for x in r["checks"]
            ],
        ),
        "",
    ]
    for s in r["seeds"]:
        lines += [f"- seed {s['seed']}: {p}" for p in s["problems"]]
    if r["missing_seeds"]:
        lines.append(f"- no run for seed(s) {', '.join(map(str, r['missing_seeds']))}")
    lines += ["", f"**{'Qualifies' if r['qualifies'] else 'Does not qualify'}.**"]
    return "\n".join(lines) + "\n"
