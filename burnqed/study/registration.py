"""A study's pre-registration: the frozen design, comparisons, analysis and decision rule, in a
committed YAML file (``studies/<name>/registration.yaml``), and the seeds its commit decides.

The file (every key checked by :func:`load`, one line naming the file and key on error)::

    protocol: 2               # PROTOCOL; absent: 1 (NEVER_RECORDED says what 1 lacks)
    study: NAME
    description: what the study confirms
    design:
      configfiles: [params.yaml, config/demo.yaml]   # relative to the repository root
      overrides: {}                                  # a config overlay merged last (no seed)
      targets: [results/iter_1/eval.json, ...]       # what each seed builds
      cores: 2                                       # each seed's snakemake --cores (protocol 2)
      snakemake_args: []                             # passed to each seed's snakemake (protocol 2)
      rules: {eval: {code: …, config: …, workflow: …, threads: …, seeds: …}, ...}   # register
      environment: {packages: {torch: 2.13.0, …}}    # written by `burnqed study register`
    comparisons:
      primary:
        - {name: …, treatment: results/iter_1/eval.json, control: results/iter_0/eval_longer.json,
           budget: [8, 4], varies: budget,               # budget: one, or [control, treatment]
           fallback: {treatment: results/iter_0/eval.json, why: …}}   # a seed the design stops
        - {name: …, treatment: results/iter_1/eval.json, varies: value model, budget: 4,
           control: [results/iter_1/eval_no_ebm.json, results/iter_1/eval_depth_twin.json],
           fallback: {difference: 0, why: …}}
           # a list: per seed, the stronger of them — the one that solves more at the control's
           # budget, the last listed on a tie (list the fairer control last)
        - {name: …, measure: pool curve, varies: training, budget: 2,
           treatment: results/compute/expert_iteration.json,
           control: results/compute/search_only.json}
           # two arms' pool curves (burnqed.eval.compute): the cumulative solved indicator over
           # the seed's search pool after `budget` iterations searched
        - {name: …, measure: benchmark curve, varies: training, budget: 2,
           treatment: results/compute/benchmark_expert_iteration.json,
           control: results/compute/benchmark_search_only.json}
           # the same on the confirmation benchmark (burnqed.eval.benchmark_curves): the union of
           # every iteration's eval against iteration 0's model evaluated again, fresh samples
      secondary: [...]
    analysis:
      alpha: 0.05
      test: t                 # or hartung-knapp: the seed-level test that decides
      seeds: 40               # how many seeds (the power analysis below says why)
      power: {comparisons: [{name, mean, sd_planned, …}], abort_rate: 0.07}   # `study power`
      decision: {rule: "…", every_seed_positive: false}
      sequential: {looks: [10, 20, 30, 40], futility: true}   # optional interim looks
      rule_probability: {met: …}                     # written by `burnqed study register`

A comparison's ``measure`` says what its two files are (:data:`MEASURES`): ``eval`` (the default)
— two evals, each on a confirmation benchmark; ``pool curve`` — expert iteration against search
only on the search pool, by design not a confirmation benchmark (:mod:`burnqed.eval.compute`'s
eval-shaped pool curves), which must vary ``training``, at one budget (iterations searched), against
one control; ``benchmark curve`` — the same two arms on a confirmation benchmark, Polu et al.'s
Fig. 2 form (:mod:`burnqed.eval.benchmark_curves`: the union of every iteration's eval against
iteration 0's model evaluated as many times with fresh samples), with the same rules.  The report checks each file against its comparison's measure
(:func:`burnqed.study.analysis.checks`), so a pool curve is an explicit kind of comparison, not
an eval that escapes the confirmation check.

``design.rules`` holds, for every rule the targets need (a Snakemake dry run), the digest of the
code its job runs — the same files ``rules/common.smk``'s ``code_digest`` covers (the rule's shim,
the burnqed modules it reaches, the modules its config launches, the instruction-set pin, the
Lean toolchain for rules given ``lean``) — and of the config values it looks up (``seed``,
``threads`` and ``cache`` aside: the study varies the first, the others are machine settings);
from protocol 2 also of its block of the workflow with the workflow's shared text
(:func:`workflow_text`), the thread counts (they move numbers) and how its seeds follow the study
seed (:func:`seeds_digest`; a fixed ``seeds.*`` is refused: :func:`refuse_fixed_seeds`).
Per rule, so a refactor of code no rule of the study runs does not void it, and a mismatch names
the rule.  :func:`rule_specs` reads each rule's ``code_digest(...)`` arguments and ``lookup(dpath=…)``
keys from ``rules/*.smk``.

The seeds (:func:`derive_seeds`) are a hash of the commit that first added the registration file,
so nobody chose them after a look.

A registration found wrong before its results were read is withdrawn, not edited: a
``WITHDRAWN.md`` beside it says why, the file stays as committed (its seeds stay verifiable), and
``burnqed study run`` and ``report`` refuse it (:func:`refuse_withdrawn`); a new registration, with
its own commit and seeds, replaces it.

Example::

    burnqed study register studies/learning-d3/registration.yaml   # writes design.rules
    git add studies/learning-d3/registration.yaml && git commit -m "Register the learning study"
    burnqed study seeds studies/learning-d3/registration.yaml
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from burnqed import provenance
from burnqed.config import (
    SEED_KINDS,
    ConfigError,
    InputError,
    deep_merge,
    read_yaml,
    validate_params,
)
from burnqed.eval.paired import FACTORS
from burnqed.study.stats import TESTS

log = logging.getLogger(__name__)

# Config keys a rule's ``config`` digest leaves out: what the study varies, and machine settings.
# (From protocol 2 the thread counts and the seeds' derivation have digests of their own.)
UNDIGESTED = ("seed", "threads", "cache")
# The registration protocol this code writes.  1: per-rule code and config digests (the learning
# study).  2: also the workflow's text, threads and seeds per rule, the pinned packages, cores and
# Snakemake arguments of the design, the decision rule's simulated probability, each primary's
# fallback for an aborted seed, sequential looks.  An older study's report names the checks its
# protocol never recorded (:data:`NEVER_RECORDED`).
PROTOCOL = 2
NEVER_RECORDED = {
    1: [
        "the workflow's text (Snakefile, rules/*.smk, input functions) per rule",
        "thread counts per rule, --cores and pass-through Snakemake arguments",
        "the seeds' derivation per rule (a fixed seeds.* would not have been seen)",
        "the pinned package versions each seed ran with",
        "the evals' own provenance (commit, versions) against the seeds' runs",
        "looks matched on benchmark content and models (only on the search seed)",
        "reads of interim figures (a partial report was not recorded)",
        "the decision rule's simulated probability of being met",
        "a fallback result for a seed the design stops",
    ]
}
_RULE = re.compile(r"^(\s*)rule (\w+):", re.M)
_DIGEST = re.compile(r"code_digest\(([^)]*)\)")
_LOOKUP = re.compile(r'lookup\(dpath="([^"]+)"')


# What a comparison's two files are (its ``measure``; module docstring).
EVAL, POOL_CURVE, BENCHMARK_CURVE = "eval", "pool curve", "benchmark curve"
MEASURES = {
    EVAL: "two evals, each on a confirmation benchmark",
    POOL_CURVE: "two pool curves (burnqed.eval.compute): expert iteration against search only, the "
    "cumulative solved indicator over the seed's search pool after a number of iterations",
    BENCHMARK_CURVE: "two benchmark curves (burnqed.eval.benchmark_curves): expert iteration "
    "against search only on a confirmation benchmark, Polu et al.'s Fig. 2 form — the union of "
    "every iteration's eval against iteration 0's model evaluated as many times with fresh "
    "samples — after a number of iterations",
}
# The measures whose two files are an expert-iteration and a search-only arm: they vary training.
CURVES = (POOL_CURVE, BENCHMARK_CURVE)
# The factor only pool curves vary (burnqed.eval.paired.FACTORS).
TRAINING = "training"


def measure_of(c: Mapping[str, Any]) -> str:
    """A comparison's ``measure`` (:data:`MEASURES`; ``eval`` when it names none)."""
    return str(c.get("measure", EVAL))


def _fail(path: Path, key: str, why: str) -> InputError:
    return InputError(f"{path}: {key}: {why}")


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _hash(obj: Any) -> str:
    return hashlib.sha256(_canonical(obj).encode()).hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# The file


def controls(c: Mapping[str, Any]) -> list[str]:
    """A comparison's control eval files: its one ``control``, or the list whose stronger member is
    the control (:func:`burnqed.study.analysis.stronger_control`)."""
    return list(c["control"]) if isinstance(c["control"], list) else [c["control"]]


def _comparison(path: Path, key: str, c: Any) -> dict[str, Any]:
    if not isinstance(c, Mapping):
        raise _fail(path, key, "expected a mapping {name, treatment, control, budget, varies}")
    for field in ("name", "treatment", "varies"):
        if not isinstance(c.get(field), str) or not c[field]:
            raise _fail(path, f"{key}.{field}", "missing (a string)")
    control = c.get("control")
    if isinstance(control, list):
        if len(control) < 2 or not all(isinstance(f, str) and f for f in control):
            raise _fail(path, f"{key}.control", "an eval file, or a list of two or more (the "
                        "stronger of them is the control)")  # fmt: skip
        if len(set(control)) != len(control):
            raise _fail(path, f"{key}.control", "a file listed twice")
    elif not isinstance(control, str) or not control:
        raise _fail(path, f"{key}.control", "missing (an eval file, or a list of them)")
    if c["varies"] not in FACTORS:
        raise _fail(path, f"{key}.varies", f"{c['varies']!r}: expected one of {', '.join(FACTORS)}")
    budget = c.get("budget")
    ok = (
        budget is None
        or isinstance(budget, int)
        or (
            isinstance(budget, list)
            and len(budget) == 2
            and all(isinstance(b, int) for b in budget)
        )
    )
    if not ok:
        raise _fail(path, f"{key}.budget", "an integer, or [control budget, treatment budget]")
    unknown = set(c) - {"name", "treatment", "control", "varies", "budget", "description",
                        "fallback", "measure"}  # fmt: skip
    if unknown:
        raise _fail(path, key, f"unknown key(s) {sorted(unknown)}")
    _measure(path, key, c)
    if "fallback" in c:
        check_fallback(path, f"{key}.fallback", c["fallback"])
    return dict(c)


def _measure(path: Path, key: str, c: Mapping[str, Any]) -> None:
    """A comparison's ``measure`` and what it allows: a pool or benchmark curve varies
    ``training`` at one budget against one control; an eval comparison never varies ``training``
    (only the curves do)."""
    m = c.get("measure", EVAL)
    if m not in MEASURES:
        raise _fail(path, f"{key}.measure", f"{m!r}: expected one of {', '.join(MEASURES)}")
    if m in CURVES:
        if c["varies"] != TRAINING:
            raise _fail(path, f"{key}.varies", f"{c['varies']!r}: a {m} comparison varies "
                        f"{TRAINING} (expert iteration against search only)")  # fmt: skip
        if isinstance(c["control"], list):
            raise _fail(path, f"{key}.control", f"one {m} (the search-only arm)")
        if isinstance(c.get("budget"), list):
            raise _fail(path, f"{key}.budget", "one number of iterations searched, the same for "
                        "both arms")  # fmt: skip
    elif c["varies"] == TRAINING:
        raise _fail(path, f"{key}.varies", f"{TRAINING} compares two arms' curves: give the "
                    f"comparison measure: {POOL_CURVE} or {BENCHMARK_CURVE} (its files are "
                    "checked as curves, not as evals)")  # fmt: skip


def check_fallback(path: Path, key: str, f: Any) -> None:
    """A comparison's ``fallback``: what stands for a seed the design stops (:func:`fallback_of`)
    — eval files in place of the treatment and/or control (``treatment:``, ``control:``, e.g. the
    last finished iteration's eval: the model its user would ship), or ``difference: 0`` (the
    shipped system is the control itself: no value model), with ``why``, in words."""
    if not isinstance(f, Mapping):
        raise _fail(path, key, "a mapping {treatment/control: eval file} or {difference: 0}, + why")
    unknown = set(f) - {"treatment", "control", "difference", "why"}
    if unknown:
        raise _fail(path, key, f"unknown key(s) {sorted(unknown)}")
    if not isinstance(f.get("why"), str) or not f["why"].strip():
        raise _fail(path, f"{key}.why", "missing (why this stands for the seed's result)")
    files = [f[k] for k in ("treatment", "control") if k in f]
    if "difference" in f:
        if files or f["difference"] != 0:
            raise _fail(path, key, "difference: 0 alone, or eval files, not both")
    elif not files or not all(isinstance(x, str) and x for x in files):
        raise _fail(
            path, key, "an eval file for the treatment and/or the control, or difference: 0"
        )


def fallback_of(c: Mapping[str, Any]) -> dict[str, Any] | None:
    """The comparison's registered fallback (None: none registered — protocol 1)."""
    return dict(c["fallback"]) if isinstance(c.get("fallback"), Mapping) else None


def validate(reg: Any, path: Path, *, need_rules: bool = True) -> dict[str, Any]:
    """The registration ``reg`` (read from ``path``) after checking every key; :class:`InputError`
    naming the file and key otherwise.  ``need_rules``: ``design.rules`` must be there (it is
    what ``burnqed study register`` writes)."""
    if not isinstance(reg, Mapping):
        raise InputError(f"{path}: not a mapping")
    unknown = set(reg) - {"protocol", "study", "description", "design", "comparisons", "analysis"}
    if unknown:
        raise _fail(path, "top level", f"unknown key(s) {sorted(unknown)}")
    proto = reg.get("protocol", 1)
    if not isinstance(proto, int) or not 1 <= proto <= PROTOCOL:
        raise _fail(path, "protocol", f"1 to {PROTOCOL} (this code's protocol), got {proto!r}")
    if not isinstance(reg.get("study"), str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", reg["study"]):
        raise _fail(path, "study", "missing (a name: letters, digits, _ . -)")
    design = reg.get("design")
    if not isinstance(design, Mapping):
        raise _fail(path, "design", "missing (configfiles, overrides, targets, rules)")
    files = design.get("configfiles")
    if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
        raise _fail(path, "design.configfiles", "a non-empty list of config files")
    if not isinstance(design.get("overrides", {}), Mapping):
        raise _fail(path, "design.overrides", "a mapping (a config overlay)")
    for key in ("seed", "seeds"):
        if key in (design.get("overrides") or {}):
            raise _fail(path, f"design.overrides.{key}", "the seeds come from the registration's "
                        "commit, each study seed deciding every source of variation")  # fmt: skip
    unknown = set(design) - {"configfiles", "overrides", "targets", "rules", "cores",
                             "snakemake_args", "environment"}  # fmt: skip
    if unknown:
        raise _fail(path, "design", f"unknown key(s) {sorted(unknown)}")
    if proto >= 2:
        if not isinstance(design.get("cores"), int) or design["cores"] < 1:
            raise _fail(path, "design.cores", "each seed's snakemake --cores (a thread count "
                        "above it is cut to it, which moves numbers)")  # fmt: skip
        args = design.get("snakemake_args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise _fail(path, "design.snakemake_args", "a list of arguments (may be empty)")
    targets = design.get("targets")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        raise _fail(path, "design.targets", "a non-empty list of files each seed builds")
    rules = design.get("rules")
    if need_rules and not (isinstance(rules, Mapping) and rules):
        raise _fail(path, "design.rules", "missing: run `burnqed study register` to write it")
    if need_rules and proto >= 2 and not isinstance(design.get("environment"), Mapping):
        raise _fail(path, "design.environment", "missing: run `burnqed study register`")
    comps = reg.get("comparisons")
    if not isinstance(comps, Mapping) or not comps.get("primary"):
        raise _fail(path, "comparisons.primary", "at least one primary comparison")
    names = set()
    for kind in ("primary", "secondary"):
        items = comps.get(kind) or []
        if not isinstance(items, list):
            raise _fail(path, f"comparisons.{kind}", "a list")
        for i, c in enumerate(items):
            c = _comparison(path, f"comparisons.{kind}[{i}]", c)
            if c["name"] in names:
                raise _fail(path, f"comparisons.{kind}[{i}].name", f"{c['name']!r} twice")
            names.add(c["name"])
            fb = fallback_of(c) or {}
            for f in (c["treatment"], *controls(c), *(fb.get(k) for k in ("treatment", "control"))):
                if f is not None and f not in targets:
                    raise _fail(path, f"comparisons.{kind}[{i}]", f"{f} is not in design.targets")
            if proto >= 2 and kind == "primary" and not fb:
                raise _fail(path, f"comparisons.primary[{i}].fallback", "missing: what stands "
                            "for a seed the design stops (its user's result)")  # fmt: skip
    a = reg.get("analysis")
    if not isinstance(a, Mapping):
        raise _fail(path, "analysis", "missing (alpha, test, seeds, power, decision)")
    if not isinstance(a.get("alpha"), float) or not 0 < a["alpha"] < 1:
        raise _fail(path, "analysis.alpha", "a number in (0, 1)")
    if a.get("test") not in TESTS:
        raise _fail(path, "analysis.test", f"one of {', '.join(TESTS)}")
    if not isinstance(a.get("seeds"), int) or a["seeds"] < 2:
        raise _fail(path, "analysis.seeds", "an integer >= 2 (the seed is the replicate)")
    if not isinstance(a.get("power"), Mapping) or not a["power"]:
        raise _fail(path, "analysis.power", "the power analysis the number of seeds came from")
    d = a.get("decision")
    if not isinstance(d, Mapping) or not isinstance(d.get("rule"), str):
        raise _fail(path, "analysis.decision.rule", "missing (the decision rule, in words)")
    if not isinstance(d.get("every_seed_positive", False), bool):
        raise _fail(path, "analysis.decision.every_seed_positive", "true or false")
    unknown = set(a) - {"alpha", "test", "seeds", "power", "decision", "sequential",
                        "rule_probability"}  # fmt: skip
    if unknown:
        raise _fail(path, "analysis", f"unknown key(s) {sorted(unknown)}")
    if "sequential" in a:
        _sequential(path, a["sequential"], a["seeds"])
        if (a.get("decision") or {}).get("every_seed_positive"):
            raise _fail(path, "analysis.decision.every_seed_positive", "not with interim looks "
                        "(a study that stops early has no 'every seed')")  # fmt: skip
        if need_rules and not a["sequential"].get("design"):
            raise _fail(path, "analysis.sequential.design", "missing: run `burnqed study "
                        "register`")  # fmt: skip
    if proto >= 2 and need_rules:
        planned(reg, path)  # every primary's planned effect and spread, named
    return dict(reg)


def _sequential(path: Path, s: Any, seeds: int) -> None:
    """``analysis.sequential``: ``looks`` (seed counts at which the runner analyses, increasing,
    the last the registered seeds), ``futility`` (true: a primary whose pooled estimate is at or
    below 0 from half the seeds on stops — non-binding), ``previous`` (optional: a previous
    study's report.json whose per-seed differences of the same comparisons check the boundaries
    beside normal ones) and ``design`` (written by ``burnqed study register``:
    :meth:`burnqed.study.sequential.SequentialDesign.to_dict`, one design at α/m for every
    primary)."""
    key = "analysis.sequential"
    if not isinstance(s, Mapping):
        raise _fail(path, key, "a mapping {looks, futility, previous}")
    unknown = set(s) - {"looks", "futility", "previous", "design"}
    if unknown:
        raise _fail(path, key, f"unknown key(s) {sorted(unknown)}")
    looks = s.get("looks")
    if (
        not isinstance(looks, list)
        or len(looks) < 2
        or not all(isinstance(n, int) for n in looks)
        or looks != sorted(set(looks))
        or looks[0] < 3
        or looks[-1] != seeds
    ):
        raise _fail(path, f"{key}.looks", f"two or more increasing seed counts, the first at "
                    f"least 3, the last analysis.seeds ({seeds})")  # fmt: skip
    if not isinstance(s.get("futility", False), bool):
        raise _fail(path, f"{key}.futility", "true or false")
    if "previous" in s and not isinstance(s["previous"], str):
        raise _fail(path, f"{key}.previous", "a previous study's report.json (a path)")


def sequential_design(reg: Mapping[str, Any]):
    """The registered :class:`~burnqed.study.sequential.SequentialDesign` (None: no interim
    looks)."""
    from burnqed.study.sequential import SequentialDesign

    s = reg["analysis"].get("sequential")
    if not s or not s.get("design"):
        return None
    return SequentialDesign.from_dict(s["design"])


def calibrate_sequential(reg: Mapping[str, Any], root: Path) -> dict[str, Any] | None:
    """``analysis.sequential.design``: the O'Brien–Fleming-type design at α/m for the registered
    looks, its t boundaries checked on normal null studies and, with ``previous``, on that study's
    per-seed differences of comparisons with the same names, resampled and centred (the largest
    factor any of them needs: :meth:`~burnqed.study.sequential.SequentialDesign.calibrated`)."""
    from burnqed.study.sequential import SequentialDesign, resampled, standard_normal

    a = reg["analysis"]
    s = a.get("sequential")
    if not s:
        return None
    samplers = {"normal": standard_normal}
    if s.get("previous"):
        prev = Path(root) / s["previous"]
        try:
            old = json.loads(prev.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise InputError(f"analysis.sequential.previous: {prev}: not a report ({e})") from None
        names = {c["name"] for c in reg["comparisons"]["primary"]}
        for c in old.get("comparisons") or []:
            d = [
                r["difference"] for r in c.get("per_seed") or [] if r.get("difference") is not None
            ]
            if c.get("name") in names and len(d) >= 3:
                samplers[f"{s['previous']}: {c['name']}"] = resampled(d)
    m = len(reg["comparisons"]["primary"])
    design = SequentialDesign.calibrated(
        s["looks"], float(a["alpha"]) / m,
        futility_from=0.5 if s.get("futility") else None, null_samplers=samplers,
    )  # fmt: skip
    return {**{k: v for k, v in s.items() if k != "design"}, "design": design.to_dict()}


def planned(reg: Mapping[str, Any], path: Path | str = "registration") -> dict[str, dict]:
    """Per primary comparison, its planned effect and spread from ``analysis.power.comparisons``
    (``burnqed study power``'s ``mean`` and ``sd_planned``, by name) and, for a fallback with eval
    files, the fallback's planned effect (``fallback_mean``; its spread is the comparison's); the
    planned share of seeds the design stops (``analysis.power.abort_rate``, default 0)."""
    power = reg["analysis"].get("power") or {}
    rows = {c.get("name"): c for c in power.get("comparisons") or [] if isinstance(c, Mapping)}
    out = {}
    for i, c in enumerate(reg["comparisons"]["primary"]):
        row = rows.get(c["name"])
        key = f"analysis.power.comparisons[name={c['name']!r}]"
        if row is None:
            raise _fail(Path(path), key, "missing: every primary's planned mean and sd_planned "
                        "(`burnqed study power`)")  # fmt: skip
        for field in ("mean", "sd_planned"):
            if not isinstance(row.get(field), (int, float)):
                raise _fail(Path(path), f"{key}.{field}", "missing (a number)")
        fb = fallback_of(c) or {}
        fb_mean = 0.0 if "difference" in fb else row.get("fallback_mean")
        stops = (power.get("abort_rate") or 0) > 0
        if fb and stops and not isinstance(fb_mean, (int, float)):
            raise _fail(Path(path), f"{key}.fallback_mean", "missing: the fallback's planned "
                        "effect (a number; analysis.power.abort_rate is above 0)")  # fmt: skip
        out[c["name"]] = {"index": i, "mean": float(row["mean"]),
                          "sd": float(row["sd_planned"]),
                          "fallback_mean": None if fb_mean is None else float(fb_mean),
                          "fallback_exact": "difference" in fb}  # fmt: skip
    rate = power.get("abort_rate", 0.0)
    if not isinstance(rate, (int, float)) or not 0 <= rate < 1:
        raise _fail(Path(path), "analysis.power.abort_rate", "a share of seeds in [0, 1)")
    for v in out.values():
        v["abort_rate"] = float(rate)
    return out


def read_yaml_file(path: Path) -> Any:
    """A YAML file's content; :class:`InputError` naming the file when it cannot be read."""
    path = Path(path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    except yaml.YAMLError as e:
        raise InputError(f"{path}: not YAML ({' '.join(str(e).split())})") from None


def load(path: Path, *, need_rules: bool = True) -> dict[str, Any]:
    return validate(read_yaml_file(Path(path)), Path(path), need_rules=need_rules)


WITHDRAWN = "WITHDRAWN.md"


def refuse_withdrawn(path: Path) -> None:
    """:class:`InputError` when a ``WITHDRAWN.md`` sits beside the registration."""
    note = Path(path).parent / WITHDRAWN
    if note.is_file():
        raise InputError(
            f"{path}: withdrawn ({note}): its seeds are neither run nor reported; run the "
            "registration that replaces it"
        )


HEADER = (
    "# A study's pre-registration (docs/confirmation.md): commit it before any seed runs; its\n"
    "# seeds come from that commit.  design.rules is written by `burnqed study register`.\n"
)


def dump(reg: Mapping[str, Any]) -> str:
    return HEADER + yaml.safe_dump(dict(reg), sort_keys=False, allow_unicode=True, width=100)


# --------------------------------------------------------------------------------------------
# Design digests


def rule_specs(root: Path) -> dict[str, dict[str, Any]]:
    """Every rule of ``root/rules/*.smk`` with a code digest: ``{rule: {"script", "sections",
    "lookups"}}`` — its ``code_digest(script, *sections)`` arguments and the config keys its
    ``lookup(dpath=…)`` calls read."""
    specs: dict[str, dict[str, Any]] = {}
    for smk in sorted((Path(root) / "rules").glob("*.smk")):
        text = smk.read_text(encoding="utf-8")
        starts = list(_RULE.finditer(text))
        for i, m in enumerate(starts):
            end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
            block = text[m.end() : end]
            # The block ends where the file returns to the rule's own indentation with code.
            indent = len(m.group(1))
            lines = block.splitlines()
            kept = [lines[0]] if lines else []
            for line in lines[1:]:
                stripped = line.lstrip()
                if (
                    stripped
                    and not stripped.startswith("#")
                    and len(line) - len(stripped) <= indent
                ):
                    break
                kept.append(line)
            block = "\n".join(kept)
            digest = _DIGEST.search(block)
            if digest is None:
                continue  # an aggregating rule: no job runs code
            args = [a.strip().strip("\"'") for a in digest.group(1).split(",") if a.strip()]
            specs[m.group(2)] = {
                "script": args[0],
                "sections": args[1:],
                "lookups": sorted(set(_LOOKUP.findall(block))),
                "block": m.group(0) + block,
            }
    return specs


def workflow_text(root: Path) -> str:
    """What every rule's job shares of the workflow's own text: the Snakefile and the text of each
    ``rules/*.smk`` outside its rule blocks (the input functions, ``rules/common.smk`` whole) — a
    rule's own block is digested with it (:func:`rule_digests`), so an edit to another rule's
    block voids nothing else."""
    parts = [(Path(root) / "Snakefile").read_text(encoding="utf-8")]
    blocks = [spec["block"] for spec in rule_specs(root).values()]
    for smk in sorted((Path(root) / "rules").glob("*.smk")):
        text = smk.read_text(encoding="utf-8")
        for b in blocks:
            text = text.replace(b, "")
        parts.append(f"{smk.name}\n{text}")
    return "\n".join(parts)


def merged_config(root: Path, design: Mapping[str, Any]) -> dict[str, Any]:
    """``design.configfiles`` merged in order, then ``design.overrides``, validated against the
    schema (the workflow's config but its seed)."""
    config: dict[str, Any] = {}
    for f in design["configfiles"]:
        config = deep_merge(config, read_yaml(Path(root) / f))
    config = deep_merge(config, design.get("overrides") or {})
    validate_params(config, source=" + ".join(design["configfiles"]) + " + overrides")
    return config


def _lookup(config: Mapping[str, Any], dpath: str) -> Any:
    x: Any = config
    for k in dpath.split("/"):
        if not isinstance(x, Mapping) or k not in x:
            return None
        x = x[k]
    return x


def seeds_digest(config: Mapping[str, Any]) -> dict[str, Any]:
    """How the rules' seeds follow the run's ``seed``: per kind of :data:`SEED_KINDS`, ``"seed"``
    when it is the run's seed (``seeds.<kind>: null``), else the fixed value — the resolved seeds
    of any study seed, with the study seed left out.

    >>> seeds_digest({"seed": 5, "seeds": {"benchmark": 0}})
    {'data': 'seed', 'benchmark': 0, 'train': 'seed', 'search': 'seed'}
    """
    own = config.get("seeds") or {}
    return {k: "seed" if own.get(k) is None else own[k] for k in SEED_KINDS}


def rule_digests(
    root: Path, config: Mapping[str, Any], rules: Sequence[str], *, protocol: int = PROTOCOL
) -> dict[str, dict[str, str]]:
    """``{rule: {"code": …, "config": …}}`` for ``rules`` (module docstring), and from protocol 2
    ``"workflow"`` (the rule's block with :func:`workflow_text`), ``"threads"`` (the ``threads``
    section: a thread count moves a job's numbers) and ``"seeds"`` (:func:`seeds_digest`);
    :class:`InputError` naming the rule when one cannot be computed."""
    specs = rule_specs(root)
    shared = workflow_text(root) if protocol >= 2 else ""
    out = {}
    for rule in sorted(rules):
        spec = specs.get(rule)
        if spec is None:
            raise InputError(f"{Path(root) / 'rules'}: no rule {rule!r} with a code_digest")
        try:
            launched = provenance.launched_modules(*(config[s] for s in spec["sections"]))
            files = provenance.code_digest(
                f"workflow/scripts/{spec['script']}.py", *launched, root=Path(root)
            )
            runs: dict[str, Any] = {"files": files, "cpu_isa": config["cpu_isa"]}
            if "lean" in spec["sections"]:
                runs["lean"] = provenance.lean_toolchain(config["lean"])
        except (OSError, KeyError, ModuleNotFoundError) as e:
            raise InputError(f"rule {rule}: cannot compute its code digest ({e})") from None
        looked = {
            d: _lookup(config, d) for d in spec["lookups"] if d.split("/")[0] not in UNDIGESTED
        }
        out[rule] = {"code": _hash(runs), "config": _hash(looked)}
        if protocol >= 2:
            out[rule].update(
                workflow=_hash([spec["block"], shared]),
                threads=_hash(config.get("threads")),
                seeds=_hash(seeds_digest(config)),
            )
    return out


def differing_rules(registered: Mapping[str, Any], got: Mapping[str, Any]) -> list[str]:
    """The rules whose digests differ between ``registered`` and ``got`` (a rule in only one of
    them differs).

    >>> differing_rules({"a": 1, "b": 2}, {"a": 1, "b": 3, "c": 4})
    ['b', 'c']
    """
    return sorted(r for r in set(registered) | set(got) if registered.get(r) != got.get(r))


def snakemake_command() -> str:
    """The ``snakemake`` beside this Python (a virtualenv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "snakemake"
    found = str(beside) if beside.is_file() else shutil.which("snakemake")
    if not found:
        raise InputError("snakemake: not found beside this Python nor on PATH")
    return found


def configfile_args(root: Path, design: Mapping[str, Any], overlay: Path) -> list[str]:
    """``--configfile`` values for a seed's run: the design's files (absolute: the run's working
    directory is the seed's) and the overlay holding ``design.overrides``."""
    return [str((Path(root) / f).resolve()) for f in design["configfiles"]] + [str(overlay)]


def rules_for_targets(root: Path, design: Mapping[str, Any]) -> list[str]:
    """The rules a fresh seed runs to build ``design.targets`` (a Snakemake dry run in an empty
    working directory)."""
    with tempfile.TemporaryDirectory(prefix="burnqed-study-") as tmp:
        overlay = Path(tmp) / "overrides.yaml"
        overlay.write_text(yaml.safe_dump(dict(design.get("overrides") or {})), encoding="utf-8")
        argv = [
            snakemake_command(),
            *design["targets"],
            "-n",
            "--quiet",
            "rules",
            "--directory",
            str(Path(tmp) / "run"),
            "--config",
            "seed=0",
            "--configfile",
            *configfile_args(root, design, overlay),
        ]
        r = subprocess.run(argv, cwd=root, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        last = (r.stderr or r.stdout).strip().splitlines()[-5:]
        raise InputError(f"snakemake dry run of design.targets failed: {' | '.join(last)}")
    rules, table = [], False
    for line in r.stdout.splitlines():
        if line.startswith("Job stats:"):
            table, rules = True, []
            continue
        parts = line.split()
        if table and len(parts) == 2 and parts[1].isdigit() and parts[0] not in ("job", "total"):
            rules.append(parts[0])
        elif table and parts and parts[0] == "total":
            table = False
    if not rules:
        raise InputError("snakemake dry run of design.targets listed no job: nothing to build?")
    return sorted(set(rules))


def design_digests(
    root: Path, design: Mapping[str, Any], rules: Sequence[str], *, protocol: int = PROTOCOL
) -> dict:
    try:
        config = merged_config(root, design)
    except ConfigError as e:
        raise InputError(f"design.configfiles: {e}") from None
    return rule_digests(root, config, rules, protocol=protocol)


def register(path: Path, root: Path) -> dict[str, Any]:
    """Write ``design.rules`` of the registration at ``path`` (everything else checked first;
    nothing written when a digest cannot be computed); returns the registration."""
    reg = load(path, need_rules=False)
    design_digests(root, reg["design"], [])  # the config files first: one line naming a bad one
    proto = reg.get("protocol", 1)
    if proto < PROTOCOL:
        raise _fail(Path(path), "protocol", f"{proto}: a new registration is protocol: {PROTOCOL} "
                    "(an older protocol leaves checks unrecorded: docs/confirmation.md)")  # fmt: skip
    refuse_fixed_seeds(root, reg["design"], path)
    planned(reg, path)
    if reg["analysis"].get("sequential"):
        reg["analysis"] = {**reg["analysis"], "sequential": calibrate_sequential(reg, root)}
    reg["analysis"] = {**reg["analysis"], "rule_probability": rule_probability(reg, path)}
    rules = rules_for_targets(root, reg["design"])
    reg["design"] = {
        **reg["design"],
        "rules": design_digests(root, reg["design"], rules),
        "environment": environment(root),
    }
    validate(reg, path)
    Path(path).write_text(dump(reg), encoding="utf-8")
    log.info("%s: %d rules' digests written", path, len(rules))
    return reg


def refuse_fixed_seeds(root: Path, design: Mapping[str, Any], path: Path | str) -> None:
    """:class:`InputError` when the design's config fixes any ``seeds.<kind>``: every source of
    variation (data, benchmark, training, search) must follow the study seed, or the seeds are
    not independent replicates — ``seeds.benchmark: 0`` would evaluate every study seed on seed
    0's benchmark, one that 135 looks have seen."""
    fixed = {k: v for k, v in seeds_digest(merged_config(root, design)).items() if v != "seed"}
    if fixed:
        raise _fail(Path(path), "design.configfiles", "fixes " + ", ".join(
            f"seeds.{k}: {v}" for k, v in fixed.items()) + ": a study's seeds must each decide "
            "every source of variation (set them to null)")  # fmt: skip


def rule_probability(reg: Mapping[str, Any], path: Path | str = "registration") -> dict:
    """The registered rule's simulated probability of being met at the planned effects
    (:func:`burnqed.study.planning.simulate_rule`); :class:`InputError` naming
    ``analysis.decision`` when it is below :data:`~burnqed.study.planning.MIN_PROBABILITY`."""
    from burnqed.study.planning import MIN_PROBABILITY, simulate_rule

    a = reg["analysis"]
    plans = planned(reg, path)
    every = bool((a.get("decision") or {}).get("every_seed_positive"))
    r = simulate_rule(plans, alpha=float(a["alpha"]), seeds=int(a["seeds"]),
                      every_seed_positive=every, sequential=sequential_design(reg))  # fmt: skip
    if r["met"] < MIN_PROBABILITY:
        each = ", ".join(f"{n}: {p:.3g}" for n, p in r["per_primary"].items())
        raise _fail(Path(path), "analysis.decision", f"the rule is met with probability "
                    f"{r['met']:.3g} at the planned effects ({r['studies']} simulated studies; "
                    f"per primary {each}), below {MIN_PROBABILITY}: a rule that cannot be met "
                    "decides nothing — plan more seeds, register a primary with no power as "
                    "secondary, or drop every_seed_positive")  # fmt: skip
    return r


def pinned_packages(root: Path) -> list[str]:
    """The names ``constraints.txt`` pins (``name==version`` lines)."""
    path = Path(root) / "constraints.txt"
    if not path.is_file():
        raise InputError(f"{path}: missing: a protocol-2 registration records the versions it pins "
                         "(design.environment); register from the repository's root")  # fmt: skip
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            names.append(line.split("==", 1)[0].strip().lower())
    return names


def environment(root: Path) -> dict[str, Any]:
    """``{"packages": {name: installed version}}`` of every package ``constraints.txt`` pins:
    what this machine runs (a pin the install did not honour shows)."""
    return {"packages": provenance.package_versions(pinned_packages(root))}


# Snakemake arguments that decide no number: how a run reports, waits, and resumes.
HARMLESS_SNAKEMAKE_ARGS = (
    "--keep-going", "-k", "--rerun-incomplete", "--ri", "--quiet", "-q", "--printshellcmds", "-p",
    "--verbose", "--show-failed-logs", "--nolock", "--latency-wait", "--keep-incomplete",
)  # fmt: skip


def undeclared_snakemake_args(design: Mapping[str, Any], args: Sequence[str]) -> list[str]:
    """The arguments in ``args`` neither registered (``design.snakemake_args``) nor harmless
    (:data:`HARMLESS_SNAKEMAKE_ARGS`, ``--opt=value`` forms too; a number after
    ``--latency-wait`` too)."""
    registered = list(design.get("snakemake_args") or [])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in registered or a.split("=", 1)[0] in HARMLESS_SNAKEMAKE_ARGS:
            skip = a == "--latency-wait"
            continue
        out.append(a)
    return out


# --------------------------------------------------------------------------------------------
# Its commit and seeds


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=30)


def first_commit(path: Path, root: Path) -> dict[str, str] | None:
    """``{"commit", "date"}`` of the first commit that added ``path`` (None: never committed);
    :class:`InputError` when ``path`` is not inside the checkout ``root``."""
    try:
        rel = Path(path).resolve().relative_to(Path(root).resolve())
    except ValueError:
        raise InputError(
            f"{path}: not inside the checkout {root} (--root); give the registration of that "
            "checkout"
        ) from None
    r = _git(root, "log", "--diff-filter=A", "--format=%H %cI", "--", rel.as_posix())
    lines = r.stdout.decode().split("\n") if r.returncode == 0 else []
    lines = [x for x in lines if x.strip()]
    if not lines:
        return None
    sha, date = lines[-1].split(" ", 1)
    committed = _git(root, "show", f"{sha}:{rel.as_posix()}")
    return {
        "commit": sha,
        "date": date.strip(),
        "unchanged": committed.returncode == 0 and committed.stdout == Path(path).read_bytes(),
    }


def derive_seeds(commit: str, k: int) -> list[int]:
    """``k`` distinct seeds in [10000, 99999] from the registration's commit: nobody chose them."""
    seeds: list[int] = []
    i = 0
    while len(seeds) < k:
        h = hashlib.sha256(f"burnqed study seed {commit} {i}".encode()).hexdigest()
        s = 10_000 + int(h[:12], 16) % 90_000
        if s not in seeds:
            seeds.append(s)
        i += 1
    return seeds
