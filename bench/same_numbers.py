"""Did a speed change move the numbers?  Two finished runs of the demo, before and after.

A speed change is "identical" when the eval JSONs are equal under ``without_run_specific`` and
the model files byte-identical; one that must move numbers shows, per eval, a paired test with no
measurable change (the speed issue's rule).  This bench reads both: for every eval JSON the two
runs share (``results/**/eval*.json``) and every budget, the theorems the after-run solved that
the before-run did not (gained) and the reverse (lost), the exact McNemar p
(:func:`burnqed.eval.paired.mcnemar_p`) and Holm's adjustment over all the tests; and for every
model weight file both hold (``models/**/*.safetensors``), whether its bytes are the same.

"Nothing moved" is a development question: both runs must be on the development overlay
(``config/dev.yaml``: ``proplogic_dev``, where every look is free).  An eval on a confirmation
benchmark (``proplogic_test``: for registered studies and the published demo only) is refused,
naming the file, before anything is compared — a check that a change moved nothing is not a
reason to look at the test set (the speed work's checks did, 103 times in a day).

It prints one line per eval and budget first (``results/iter_1/eval.json budget 4: +3/-2 of 400,
p 1, Holm 1``), then the two runs as ``before=`` and ``after=``.

Prints (these figures last, one ``name=value`` a line):

- ``evals``: eval JSONs in both runs
- ``tests``: paired tests, one per eval and budget
- ``tests_changed``: tests with any theorem gained or lost
- ``gained``: theorems gained, summed over the tests
- ``lost``: theorems lost, summed over the tests
- ``min_p``: the smallest p of the tests (1 when none changed)
- ``min_holm_p``: the smallest Holm-adjusted p (over all the tests)
- ``significant_holm``: tests whose Holm-adjusted p is below 0.05 — a measurable change
- ``weight_files``: model weight files in both runs
- ``weight_files_identical``: those whose bytes are the same

Run::

    python bench/same_numbers.py --before RUN_A --after RUN_B    # two finished demo directories
    python bench/same_numbers.py --smoke     # two tiny runs of its own: that it runs (CI)
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from pathlib import Path

from burnqed.data.benchmarks import CONFIRMATION, sha256_file
from burnqed.eval.ledger import role_of
from burnqed.eval.paired import mcnemar_p, solved_at
from burnqed.study.stats import holm

ALPHA = 0.05


def eval_files(run: Path) -> dict[str, Path]:
    return {p.relative_to(run).as_posix(): p for p in sorted((run / "results").rglob("eval*.json"))}


def refuse_confirmation(run: Path) -> None:
    """SystemExit naming the first eval of ``run`` on a confirmation benchmark."""
    for name, path in eval_files(run).items():
        e = json.loads(path.read_text(encoding="utf-8"))
        if role_of(e) == CONFIRMATION:
            b = e.get("benchmark") or {}
            raise SystemExit(
                f"same_numbers: {run / name} is on {b.get('name')}_{b.get('split')}, a "
                "confirmation benchmark: run both sides with config/dev.yaml (the development "
                "split) — the test benchmark is for registered studies and the published demo"
            )


def weight_files(run: Path) -> dict[str, Path]:
    models = run / "models"
    return {p.relative_to(run).as_posix(): p for p in sorted(models.rglob("*.safetensors"))}


def compare(before: Path, after: Path) -> tuple[list[dict], dict[str, float]]:
    """The paired tests (one per shared eval and budget) and the figures of the docstring."""
    a, b = eval_files(before), eval_files(after)
    shared = sorted(a.keys() & b.keys())
    if not shared:
        raise SystemExit(f"{before} and {after}: no eval JSON (results/**/eval*.json) in both")
    tests = []
    for name in shared:
        ea = json.loads(a[name].read_text(encoding="utf-8"))
        eb = json.loads(b[name].read_text(encoding="utf-8"))
        for budget in sorted(set(ea.get("budgets") or []) & set(eb.get("budgets") or [])):
            sa, sb = solved_at(ea, budget), solved_at(eb, budget)
            if sa is None or sb is None:
                raise SystemExit(f"{name}: no per-theorem rows in one of the runs")
            paired = sa.keys() & sb.keys()
            gained = sum(sb[t] and not sa[t] for t in paired)
            lost = sum(sa[t] and not sb[t] for t in paired)
            tests.append({"eval": name, "budget": budget, "theorems": len(paired),
                          "gained": gained, "lost": lost, "p": mcnemar_p(gained, lost)})  # fmt: skip
    adjusted = holm([t["p"] for t in tests])
    for t, h in zip(tests, adjusted, strict=True):
        t["holm_p"] = h
    wa, wb = weight_files(before), weight_files(after)
    both = sorted(wa.keys() & wb.keys())
    figures = {
        "evals": len(shared),
        "tests": len(tests),
        "tests_changed": sum(1 for t in tests if t["gained"] or t["lost"]),
        "gained": sum(t["gained"] for t in tests),
        "lost": sum(t["lost"] for t in tests),
        "min_p": min(t["p"] for t in tests) if tests else 1.0,
        "min_holm_p": min(t["holm_p"] for t in tests) if tests else 1.0,
        "significant_holm": sum(1 for t in tests if t["holm_p"] < ALPHA),
        "weight_files": len(both),
        "weight_files_identical": sum(1 for k in both if sha256_file(wa[k]) == sha256_file(wb[k])),
    }
    return tests, figures


def _smoke_run(root: Path, flips: int, seed: int) -> Path:
    """A directory shaped like a finished run: two eval JSONs of 40 theorems at budgets 1–2 (the
    after-run with ``flips`` theorems' outcomes turned) and one weight file."""
    rng = random.Random(0)
    base = [rng.choice([None, 1, 2]) for _ in range(40)]
    turned = random.Random(seed).sample(range(40), flips)
    for name in ("results/iter_0/eval.json", "results/iter_1/eval_no_ebm.json"):
        rows = [{"theorem": f"t{i}", "evaluated": True,
                 "budget_at_proof": (None if b else 1) if i in turned else b}
                for i, b in enumerate(base)]  # fmt: skip
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        bench = {"name": "proplogic", "split": "dev"}  # a development run, as the bench asks
        path.write_text(json.dumps({"budgets": [1, 2], "per_theorem": rows, "benchmark": bench}),
                        encoding="utf-8")  # fmt: skip
    weights = root / "models/base/model.safetensors"
    weights.parent.mkdir(parents=True, exist_ok=True)
    weights.write_bytes(b"weights" if not flips else b"weights, other bits")
    return root


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, help="the finished run before the change")
    p.add_argument("--after", type=Path, help="the finished run after it")
    p.add_argument("--smoke", action="store_true", help="two tiny runs of its own (CI)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            before = _smoke_run(Path(tmp) / "before", 0, 1)
            after = _smoke_run(Path(tmp) / "after", 6, 1)
        elif args.before and args.after:
            before, after = args.before, args.after
        else:
            p.error("--before and --after (finished run directories), or --smoke")
        for run in (before, after):
            refuse_confirmation(run)
        tests, figures = compare(before.resolve(), after.resolve())
        for t in tests:
            print(f"{t['eval']} budget {t['budget']}: +{t['gained']}/-{t['lost']} of "
                  f"{t['theorems']}, p {t['p']:.3g}, Holm {t['holm_p']:.3g}")  # fmt: skip
        print(f"before={before}")
        print(f"after={after}")
        for k, v in figures.items():
            print(f"{k}={v}")


if __name__ == "__main__":
    main()
