"""A study's report: the registered comparisons on every seed, pooled with the seed as the replicate,
checked against the registration.

:func:`analyse` is pure (registration, per-seed eval JSONs and run records, the registration's
commit, the ledger) and returns ``report.json``'s content; :func:`report_markdown` words it.  For
each comparison (:func:`burnqed.eval.paired.paired_test`, control → treatment at the registered
budget): per seed the theorems gained and lost, exact McNemar and ``d_s = (b_s − c_s)/n_s`` — a
seed where the value model collapsed to its twin gives 0 and stays in; across seeds the one-sample
t-test and Hartung–Knapp random effects (the registration's ``analysis.test`` decides), the
fixed-effect stratified count test beside them, sign agreement (not a gate); Holm over the
primaries' deciding p-values; intervals at ``1 − α/m`` for the m primaries (Bonferroni), at
``1 − α`` for secondaries; :func:`draw_forest` draws them, seed by seed and pooled.  A primary is *confirmed* when its Holm-adjusted p is below α and its
pooled estimate is positive (and, if registered, every seed's difference is positive).

The run is labelled **confirmatory** only when every check passes (:func:`checks`): the registration
was committed, unchanged since, before the first result; each seed directory is one of the
registration's seeds and its evals carry that seed; each seed ran with the registered per-rule
digests (its ``study_run.json``); no look at any of those seeds is in the ledger but the study's
own, made after the registration; every compared eval is on a confirmation benchmark (a
comparison of ``measure: pool curve`` compares two pool curves, each on the seed's search pool:
:func:`measure_problems`); every paired test was decided.  Anything else is **exploratory**, with the failed checks named.  A study whose
seeds are some of the registered ones, every check passing, is **partial** (k of n seeds: a run
still going, or one stopped): its figures are shown, labelled partial, and its decision is
undecided — a primary is decided on the registered number of seeds only.

A seed the design itself stopped (a training guard; ``study_run.json``'s ``aborted``, recorded by
:func:`burnqed.study.stage.run`) is *aborted*: it counts as run, so it does not make a study
partial; the report names it and its reason; it is **not positive** for every comparison (so a
registered "every seed positive" fails); the pooled tests are computed on the seeds that finished,
and beside them a sensitivity analysis — the one-sample t-test, Holm over the primaries, with each
aborted seed at d = 0 (the handling the learning study fixed before its results were read:
studies/learning-d3/RUN.md).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.data.benchmarks import CONFIRMATION, POOL
from burnqed.eval.compute import CURVE_KIND, EXPERT, SEARCH_ONLY, stopped_text
from burnqed.eval.ledger import designs_seen, role_of, split_name
from burnqed.eval.paired import UNDECIDED, format_p, paired_test, solved_at
from burnqed.eval.table import markdown_table, pct
from burnqed.study import stats
from burnqed.study.curves import pooled_curves
from burnqed.study.registration import (
    BENCHMARK_CURVE,
    CURVES,
    EVAL,
    NEVER_RECORDED,
    POOL_CURVE,
    PROTOCOL,
    differing_rules,
    fallback_of,
    measure_of,
    sequential_design,
)

log = logging.getLogger(__name__)

CONFIRMATORY, EXPLORATORY, PARTIAL = "confirmatory", "exploratory", "partial"
SEED_COLUMNS = [
    "seed",
    "control",
    "budget",
    "gained",
    "lost",
    "paired",
    "d",
    "p (McNemar)",
    "verdict",
]


def _budget(c: Mapping[str, Any]) -> int | tuple[int, int] | None:
    b = c.get("budget")
    return tuple(b) if isinstance(b, list) else b


def stronger_control(c: Mapping[str, Any], evals: Mapping[str, Mapping[str, Any]]) -> str:
    """The comparison's control on one seed: its ``control``, or of a list the one that solves the
    most at the control's budget (the registered one, else each eval's largest), the last listed on
    a tie — a rule fixed in the registration that always takes the harder control, so choosing it
    cannot favour the treatment.

    >>> e = lambda n: {"budgets": [4], "per_theorem": [{"theorem": str(i), "evaluated": True,
    ...     "budget_at_proof": 1 if i < n else None} for i in range(9)]}
    >>> c = {"control": ["twin_a", "twin_b"], "budget": 4}
    >>> [stronger_control(c, {"twin_a": e(a), "twin_b": e(2)}) for a in (3, 2)]
    ['twin_a', 'twin_b']
    """
    if not isinstance(c["control"], list):
        return c["control"]
    b = _budget(c)
    best, most = None, -1
    for f in c["control"]:
        e = evals[f]
        at = b[0] if isinstance(b, tuple) else b if b is not None else max(e.get("budgets") or [0])
        solved = sum((solved_at(e, at) or {}).values())
        if solved >= most:
            best, most = f, solved
    return best


def _control_text(control: str | Sequence[str]) -> str:
    if isinstance(control, str):
        return control
    return (
        f"the stronger of {', '.join(control[:-1])} and {control[-1]} (per seed; the last on a tie)"
    )


def per_seed(c: Mapping[str, Any], evals: Mapping[str, Mapping[str, Any]], seed: int) -> dict:
    """One comparison on one seed: the paired test's counts, p and verdict, and ``d_s``; against
    the :func:`stronger_control` when the control is a list (``control`` names the one taken)."""
    control = stronger_control(c, evals)
    t = paired_test(evals[control], evals[c["treatment"]], varies=c["varies"], budget=_budget(c))
    d = stats.paired_difference(t["gained"], t["lost"], t["theorems"]) if t["theorems"] else None
    return {
        "seed": seed,
        "gained": t["gained"],
        "lost": t["lost"],
        "theorems": t["theorems"],
        "difference": d,
        "p_value": t["p_value"],
        "verdict": t["verdict"],
        "reasons": t["reasons"],
        "budget": [t["budget_before"], t["budget_after"]],
        "control": control,
    }


def pooled(
    rows: Sequence[Mapping[str, Any]], *, test: str, level: float, aborted: int = 0
) -> dict[str, Any]:
    """Both seed-level tests at ``level``, the fixed-effect count test and sign agreement; how
    many seeds are positive, and whether every seed is (never with ``aborted`` seeds: an aborted
    seed is not positive)."""
    ok = [r for r in rows if r["difference"] is not None]
    # A row reconstructed from counts (a post-hoc fallback from the ledger) has a difference but
    # no discordant counts: the seed-level t-test still runs, the count-based tests do not.
    counted = all(r.get("gained") is not None for r in ok)
    b, c, n = ([r[k] for r in ok] for k in ("gained", "lost", "theorems"))
    d = [r["difference"] for r in ok]
    t = stats.t_test(d, level=level)
    hk = stats.hartung_knapp(b, c, n, level=level) if counted else None
    deciding = {"t": t, "hartung-knapp": hk}[test]
    return {
        "seeds": len(ok),
        "level": level,
        "t_test": t,
        "hartung_knapp": hk,
        "decides": test,
        "estimate": deciding["estimate"] if deciding else None,
        "p_value": deciding["p_value"] if deciding else None,
        "stratified": stats.stratified_count_test(b, c) if counted else None,
        "sign_agreement": stats.sign_agreement(d, deciding["estimate"] if deciding else 0.0),
        "positive": sum(1 for x in d if x > 0),
        "every_seed_positive": bool(d) and all(x > 0 for x in d) and not aborted,
    }


def checks(
    reg: Mapping[str, Any],
    seeds: Mapping[int, Mapping[str, Any]],
    *,
    derived_seeds: Sequence[int],
    registration_commit: Mapping[str, Any] | None,
    ledger: Sequence[Mapping[str, Any]],
    until: str | None = None,
    unblindings: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The checks that make a run confirmatory (module docstring), each ``{check, ok, detail}``.
    ``until``: when the report was first written (ledger looks after it are not checked: a later
    eval on a study seed cannot flip a published report).  ``unblindings``: reads of interim
    figures (``--unblind``).  ``seeds``: per seed directory found, ``{"evals": {path: eval
    JSON}, "run": study_run.json or None, "looks": the looks of every eval it holds}``
    (:func:`burnqed.study.stage.load_seed`)."""
    proto = int(reg.get("protocol", 1))
    out = []

    def add(name: str, problems: list[str], fine: str) -> None:
        out.append({"check": name, "ok": not problems, "detail": "; ".join(problems) or fine})

    rc = registration_commit
    problems = []
    if rc is None:
        problems.append("the registration file was never committed")
    elif not rc.get("unchanged"):
        problems.append(f"the registration differs from its first commit {rc['commit'][:12]}")
    add(
        "registration committed",
        problems,
        f"first committed in {rc['commit'][:12]} on {rc['date']}" if rc else "",
    )

    found_seeds, derived = sorted(seeds), sorted(derived_seeds)
    problems = []
    if not set(found_seeds) <= set(derived):
        problems.append(
            f"seed directories {sorted(set(found_seeds) - set(derived))} are not among the "
            f"registration's seeds {derived}"
        )
    for s, run in seeds.items():
        for path, e in run["evals"].items():
            got = ((e.get("provenance") or {}).get("seeds") or {}).get("seed")
            if got != s:
                problems.append(f"seed_{s}/{path} was made with seed {got}")
    add(
        "seeds",
        problems,
        f"{len(found_seeds)} of the {len(derived)} seeds derived from the registration's commit: "
        f"{found_seeds}",
    )

    problems = []
    registered = (reg.get("design") or {}).get("rules") or {}
    for s, run in seeds.items():
        rec = run.get("run")
        if rec is None:
            problems.append(f"seed_{s}: no study_run.json (not run by `burnqed study run`)")
            continue
        every = [x.get("rules") or {} for x in rec.get("sessions") or []] or [
            rec.get("rules") or {}
        ]
        bad = sorted({r for got in every for r in differing_rules(registered, got)})
        if bad:
            problems.append(
                f"seed_{s}: digests differ from the registration's for {', '.join(bad)}"
            )
        if proto >= 2:
            problems += _environment_problems(reg, s, rec.get("sessions") or [])
    add(
        "digests",
        problems,
        f"every seed ran the registered code and config ({len(registered)} rules)"
        + (", packages, cores and Snakemake arguments" if proto >= 2 else ""),
    )
    if proto >= 2:
        problems = []
        for s, run in seeds.items():
            problems += _provenance_problems(reg, s, run)
        add(
            "evals' provenance",
            problems,
            "every eval names a commit its seed ran and the registered package versions",
        )
        add(
            "blind until the end",
            [f"interim figures read on {u.get('at')} at {u.get('seeds')} seeds" for u in
             unblindings],
            "no interim figure was read (`burnqed study report --unblind` records each read)",
        )  # fmt: skip

    own = [r for run in seeds.values() for r in run["looks"]]
    problems = []
    first_result = min((r["looked_at"] for r in own if r.get("looked_at")), default=None)
    started = [run["run"].get("started_at") for run in seeds.values() if run.get("run")]
    earliest = min([x for x in [first_result, *started] if x], default=None)
    if rc is not None and earliest is not None and not _before(rc["date"], earliest):
        problems.append(f"registered {rc['date']}, but the first seed ran at {earliest}")
    add(
        "registered before results",
        problems,
        f"registered {rc['date'] if rc else '–'}, first result {earliest or '–'}",
    )

    own_keys = {_look_key(r) for r in own}
    # What a look must not have seen: these seeds, their benchmarks (by content: another search
    # seed on the same benchmark is a look at it) and their models.
    benches = {(r.get("benchmark") or {}).get("sha256") for r in own} - {None}
    models = {m for r in own for m in ((r.get("design") or {}).get("model"),)} - {None}
    problems = []
    for r in ledger:
        if until is not None and not _before(str(r.get("looked_at")), until):
            continue  # after the report was first written: it cannot have shaped it
        seen = (
            r.get("seed") in found_seeds
            or (r.get("benchmark") or {}).get("sha256") in benches
            or (r.get("design") or {}).get("model") in models
        )
        if not seen:
            continue
        foreign = _look_key(r) not in own_keys or (
            rc is not None and not _before(rc["date"], str(r.get("looked_at")))
        )
        if foreign:
            problems.append(
                f"{r['benchmark'].get('name')}_{r['benchmark'].get('split')} "
                f"(sha256 {str(r['benchmark'].get('sha256'))[:12]}) was looked at with seed "
                f"{r.get('seed')} by {r.get('label') or 'a design'} on {r.get('looked_at')}, "
                "outside this study: the same seed, benchmark content or model as a study seed's"
            )
    add(
        "fresh seeds",
        sorted(set(problems)),
        "no look at these seeds, their benchmarks or their models in the ledger but the "
        "study's own" + (f" (to the report's first writing, {until})" if until else ""),
    )

    measures = file_measures(reg)
    problems = []
    for s, run in seeds.items():
        for path, e in run["evals"].items():
            for measure in sorted(measures.get(path) or {EVAL}):
                problems += measure_problems(f"seed_{s}/{path}", e, measure)
    curves = any(POOL_CURVE in m for m in measures.values())
    bench = any(BENCHMARK_CURVE in m for m in measures.values())
    add("confirmation benchmark", problems, "every compared eval is on a confirmation benchmark"
        + ("; every pool curve on its seed's search pool" if curves else "")
        + ("; every benchmark curve on a confirmation benchmark" if bench else ""))  # fmt: skip
    return out


def file_measures(reg: Mapping[str, Any]) -> dict[str, set[str]]:
    """Each compared file (treatments, controls, fallbacks) → the ``measure`` of every comparison
    that compares it (:data:`burnqed.study.registration.MEASURES`): a file two kinds of
    comparison name is checked as both."""
    out: dict[str, set[str]] = {}
    comps = reg.get("comparisons") or {}
    for c in [*(comps.get("primary") or []), *(comps.get("secondary") or [])]:
        fb = fallback_of(c) or {}
        for f in (c["treatment"], *_as_list(c["control"]),
                  *(fb[k] for k in ("treatment", "control") if k in fb)):  # fmt: skip
            out.setdefault(f, set()).add(measure_of(c))
    return out


def measure_problems(where: str, e: Mapping[str, Any], measure: str) -> list[str]:
    """Why the compared file ``e`` is not what its comparison's ``measure`` says: an eval on a
    confirmation benchmark, or a pool curve (:data:`burnqed.eval.compute.CURVE_KIND`) on the
    search pool — a pool curve is on the pool by design, checked as such, never let through as
    an eval — or a benchmark curve (the same kind of file) on a confirmation benchmark."""
    b = e.get("benchmark") or {}
    if measure in CURVES:
        if e.get("kind") != CURVE_KIND:
            return [f"{where} is not a {measure} (kind {e.get('kind')!r}) but its comparison's "
                    f"measure is {measure}"]  # fmt: skip
        if measure == POOL_CURVE and b.get("role") != POOL:
            return [f"{where} is a pool curve on {b.get('name')} (role {b.get('role')!r}), not "
                    "the search pool"]  # fmt: skip
        if measure == BENCHMARK_CURVE and role_of(e) != CONFIRMATION:
            return [f"{where} is a benchmark curve on {b.get('name')} (role "
                    f"{role_of(e) or b.get('role')!r}), not a confirmation benchmark"]  # fmt: skip
        return []
    if e.get("kind") == CURVE_KIND or role_of(e) != CONFIRMATION:
        return [f"{where} is on {split_name(b)} ({role_of(e) or b.get('role') or 'no role'})"]
    return []


def _environment_problems(
    reg: Mapping[str, Any], seed: int, sessions: Sequence[Mapping[str, Any]]
) -> list[str]:
    """What a seed's sessions ran with that the registration did not: packages, cores,
    Snakemake arguments beyond the registered and harmless ones."""
    from burnqed.study.registration import undeclared_snakemake_args

    design = reg.get("design") or {}
    want = (design.get("environment") or {}).get("packages") or {}
    out = []
    for i, x in enumerate(sessions, 1):
        got = x.get("packages")
        if got is None:
            out.append(f"seed_{seed}: session {i} recorded no package versions")
        else:
            other = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            if other:
                out.append(f"seed_{seed}: session {i} ran other versions of {', '.join(other)}")
        if x.get("cores") != design.get("cores"):
            out.append(f"seed_{seed}: session {i} ran with --cores {x.get('cores')}, registered "
                       f"{design.get('cores')}")  # fmt: skip
        extra = undeclared_snakemake_args(
            design, [a for a in x.get("snakemake_args") or [] if a not in
                     (design.get("snakemake_args") or [])])  # fmt: skip
        if extra:
            out.append(f"seed_{seed}: session {i} passed {' '.join(extra)} to Snakemake")
    return out


def _provenance_problems(reg: Mapping[str, Any], seed: int, run: Mapping[str, Any]) -> list[str]:
    """What a seed's evals say of themselves that its runs do not: a commit no session of the
    seed ran, package versions other than the registered ones."""
    want = ((reg.get("design") or {}).get("environment") or {}).get("packages") or {}
    sessions = (run.get("run") or {}).get("sessions") or []
    commits = {(x.get("git") or {}).get("commit") for x in sessions} - {None}
    out = []
    for path, e in (run.get("evals") or {}).items():
        prov = e.get("provenance") or {}
        if commits and prov.get("git_commit") not in commits:
            out.append(f"seed_{seed}/{path} was made at commit {prov.get('git_commit')}, which no "
                       "session of the seed ran")  # fmt: skip
        got = prov.get("versions") or {}
        other = sorted(k for k in set(got) & set(want) if got[k] != want[k])
        if other:
            out.append(f"seed_{seed}/{path} ran {', '.join(f'{k} {got[k]}' for k in other)}, "
                       "not the registered versions")  # fmt: skip
    return out


def _before(a: str, b: str) -> bool:
    """ISO 8601 ``a`` no later than ``b``, both to the second (a run started in the second its
    registration was committed read that commit).  A time without an offset is UTC and a bare date
    that day's start, as the ledger reads them: a look recorded by hand with its day only
    (``burnqed ledger add --looked-at 2026-11-27``) counts as before anything later that day."""
    from burnqed.eval.ledger import parse_time

    return parse_time(a, "a look's time") <= parse_time(b, "a look's time")


def _look_key(r: Mapping[str, Any]) -> tuple:
    b = r.get("benchmark") or {}
    d = r.get("design") or {}
    return (
        b.get("sha256"),
        r.get("seed"),
        d.get("model"),
        d.get("value_model"),
        d.get("search_config"),
    )


def fallback_row(
    c: Mapping[str, Any],
    fb: Mapping[str, Any],
    stopped: Mapping[str, Any],
    seed: int,
    theorems: int | None,
) -> dict[str, Any] | None:
    """A stopped seed's row of comparison ``c`` under the fallback ``fb`` (registered or post
    hoc): the paired test of the fallback's files from the seed's directory, or for
    ``difference: 0`` no theorem changed on ``theorems`` paired theorems (the shipped system is
    the control).  None when a fallback file is missing."""
    if "difference" in fb:
        return {"seed": seed, "gained": 0, "lost": 0, "theorems": theorems, "difference": 0.0,
                "p_value": 1.0, "verdict": "no measurable effect", "reasons": [],
                "budget": list(_budget(c)) if isinstance(_budget(c), tuple) else [_budget(c)] * 2,
                "control": _control_text(c["control"]), "fallback": "difference 0"}  # fmt: skip
    sub = {**c, "treatment": fb.get("treatment", c["treatment"]),
           "control": fb.get("control", c["control"])}  # fmt: skip
    evals = stopped.get("evals") or {}
    if not all(f in evals for f in (sub["treatment"], *_as_list(sub["control"]))):
        return None
    return {**per_seed(sub, evals, seed), "fallback": sub["treatment"]}


def _as_list(x: str | Sequence[str]) -> list[str]:
    return [x] if isinstance(x, str) else list(x)


def _typical_n(rows: Sequence[Mapping[str, Any]]) -> int | None:
    ns = [r["theorems"] for r in rows if r.get("theorems")]
    return statistics.mode(ns) if ns else None


def analyse(
    reg: Mapping[str, Any],
    seeds: Mapping[int, Mapping[str, Any]],
    *,
    derived_seeds: Sequence[int],
    registration_commit: Mapping[str, Any] | None,
    ledger: Sequence[Mapping[str, Any]],
    ledger_path: str | None = None,
    unfinished: Sequence[int] = (),
    aborted: Mapping[int, Mapping[str, Any]] | None = None,
    post_hoc: Mapping[str, Mapping[str, Any]] | None = None,
    unblindings: Sequence[Mapping[str, Any]] = (),
    first_written_at: str | None = None,
    sequential: Mapping[str, Any] | None = None,
    recorded: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``report.json``'s content (module docstring).  ``unfinished``: registered seeds whose
    directory exists but lacks a compared eval (still running, or stopped).  ``aborted``: per seed
    the design stopped, ``{"abort": study_run.json's aborted, "run": study_run.json, "looks":
    the looks of the evals it made, "evals": the compared or fallback evals it has}``.
    ``post_hoc``: per primary's name, a fallback decided after results were read (reported
    beside, labelled post hoc, never deciding).  ``unblindings``: reads of interim figures.
    ``first_written_at``: when the final report was first written (the fresh check ends there)."""
    aborted = dict(aborted or {})
    a = reg["analysis"]
    alpha, test = float(a["alpha"]), a["test"]
    primary = list(reg["comparisons"]["primary"])
    secondary = list(reg["comparisons"].get("secondary") or [])
    m = len(primary)
    stopped = sorted(aborted)
    if recorded is not None:  # a reanalysis of a committed report's per-seed figures
        rows_of = {c["name"]: list(c["per_seed"]) for c in recorded["comparisons"]}
    else:
        rows_of = {
            c["name"]: [per_seed(c, seeds[s]["evals"], s) for s in sorted(seeds)]
            for c in [*primary, *secondary]
        }
    fallbacks: dict[str, list] = {}
    for c in primary:
        fb = fallback_of(c) or (post_hoc or {}).get(c["name"])
        if recorded is not None and c["name"] in (recorded.get("fallback_rows") or {}):
            fallbacks[c["name"]] = recorded["fallback_rows"][c["name"]]
        elif fb is not None and stopped:
            n = _typical_n(rows_of[c["name"]])
            fallbacks[c["name"]] = [fallback_row(c, fb, aborted[s], s, n) for s in stopped]
    missing = [f"{name} on seed {s}" for name, fr in fallbacks.items()
               for s, r in zip(stopped, fr, strict=True) if r is None]  # fmt: skip
    comparisons = []
    for kind, items, level in (
        ("primary", primary, 1 - alpha / m),
        ("secondary", secondary, 1 - alpha),
    ):
        for c in items:
            rows = rows_of[c["name"]]
            registered_fb = kind == "primary" and fallback_of(c) is not None
            fb_rows = [r for r in fallbacks.get(c["name"], []) if r is not None]
            out = {**c, "kind": kind, "per_seed": rows}
            if registered_fb:
                # The primary analysis: every seed with a result, a stopped seed at its fallback
                # (what its user would ship); the seeds that finished, and the stopped ones at
                # d = 0, beside it.
                out["fallback_rows"] = fb_rows
                out["pooled"] = pooled([*rows, *fb_rows], test=test, level=level)
                out["analysis"] = "fallback"
                if stopped:
                    out["finished_only"] = pooled(rows, test=test, level=level,
                                                  aborted=len(stopped))  # fmt: skip
            else:
                out["pooled"] = pooled(rows, test=test, level=level, aborted=len(stopped))
                out["analysis"] = "finished seeds"
                if fb_rows and len(fb_rows) == len(stopped):
                    out["post_hoc_fallback"] = {
                        "fallback": dict(post_hoc[c["name"]]),
                        "rows": fb_rows,
                        "pooled": pooled([*rows, *fb_rows], test=test, level=level),
                    }
            if stopped:
                out["sensitivity"] = _sensitivity(rows, len(stopped), level=level)
            comparisons.append(out)
    prim = [c for c in comparisons if c["kind"] == "primary"]
    design = sequential_design(reg)
    if design is not None:
        for c in prim:
            c["sequential"] = _sequential_analysis(c, design, sequential or {}, len(derived_seeds))
            c["pooled"] = {**c["pooled"], "estimate": c["sequential"]["estimate"],
                           "p_value": c["sequential"]["p_value"],
                           "decides": "sequential"}  # fmt: skip
    adjusted = stats.holm(
        [c["pooled"]["p_value"] if c["pooled"]["p_value"] is not None else 1.0 for c in prim]
    )
    for key, p_of in (
        ("sensitivity", lambda c: (c.get("sensitivity") or {}).get("p_value")),
        ("finished_only", lambda c: (c.get("finished_only") or {}).get("p_value")),
        ("post_hoc_fallback", lambda c: ((c.get("post_hoc_fallback") or {}).get("pooled")
                                         or {}).get("p_value")),
    ):  # fmt: skip
        if all(c.get(key) for c in prim):
            for c, p in zip(prim, stats.holm([p_of(c) or 1.0 for c in prim]), strict=True):
                target = c[key]["pooled"] if key == "post_hoc_fallback" else c[key]
                target["holm_p"] = p
    every_seed = bool((a.get("decision") or {}).get("every_seed_positive"))
    for c, p in zip(prim, adjusted, strict=True):
        est = c["pooled"]["estimate"]
        c["holm_p"] = p
        c["confirmed"] = bool(
            p < alpha
            and est is not None
            and est > 0
            and (c["pooled"]["every_seed_positive"] or not every_seed)
        )
        c["realised"] = _realised_power(reg, c, alpha / m)
    undecided = [
        f"{c['name']} on seed {r['seed']}: {'; '.join(r['reasons'])}"
        for c in comparisons
        for r in c["per_seed"]
        if r["verdict"] == UNDECIDED
    ]
    stopped_runs = {s: {"evals": {}, "run": x.get("run"), "looks": x.get("looks") or []}
                    for s, x in aborted.items()}  # fmt: skip
    if recorded is not None:
        found = [dict(x) for x in recorded["checks"]]
    else:
        found = checks(
            reg,
            {**seeds, **stopped_runs},
            derived_seeds=derived_seeds,
            registration_commit=registration_commit,
            ledger=ledger,
            until=first_written_at,
            unblindings=unblindings,
        )
        found.append(
            {
                "check": "decided",
                "ok": not undecided,
                "detail": "; ".join(undecided) or "every paired test decided",
            }
        )
    if any(fallback_of(c) for c in primary):
        found.append({"check": "fallbacks", "ok": not missing,
                      "detail": ("no fallback result for " + "; ".join(missing)) if missing
                      else "every stopped seed has its registered fallback result"})  # fmt: skip
    done = len((set(seeds) | set(aborted)) & set(derived_seeds))
    ended = bool((sequential or {}).get("stopped"))  # an interim look stopped the study
    partial = (
        None
        if ended or set(derived_seeds) <= set(seeds) | set(aborted)
        else {"seeds": done, "registered": len(derived_seeds), "unfinished": sorted(unfinished)}
    )
    label = (PARTIAL if partial else CONFIRMATORY) if all(x["ok"] for x in found) else EXPLORATORY
    looks = list((recorded or {}).get("looks_per_seed") or [])
    own = [r for s in seeds.values() for r in s["looks"]]
    on_benchmark = next((c for c in [*primary, *secondary] if measure_of(c) == EVAL), primary[0])
    for s in sorted(seeds) if recorded is None else []:
        e = seeds[s]["evals"][on_benchmark["treatment"]]
        sha = (e.get("benchmark") or {}).get("sha256")
        looks.append(
            {
                "seed": s,
                "designs": designs_seen([*ledger, *own], sha256=sha, seed=s),
                "in_ledger": designs_seen(ledger, sha256=sha, seed=s),
            }
        )
    met = all(c["confirmed"] for c in prim)
    if partial:
        for c in prim:
            c["confirmed"] = None  # decided on the registered number of seeds only
        verdict = f"undecided (partial: {done} of {len(derived_seeds)} registered seeds"
        verdict += ", exploratory)" if label == EXPLORATORY else ")"
    else:
        verdict = ("met" if met else "not met") + f" ({label})"
    proto = int(reg.get("protocol", 1))
    return {
        "kind": "burnqed study report",
        "study": reg["study"],
        "protocol": proto,
        "label": label,
        "checks": found,
        "never_recorded": list(NEVER_RECORDED.get(proto, [])),
        "alpha": alpha,
        "test": test,
        "test_description": stats.TESTS[test],
        "seeds": sorted(seeds) if recorded is None else list(recorded["seeds"]),
        "aborted": [
            {"seed": s, **{k: x["abort"].get(k) for k in ("error", "reason", "at")}}
            for s, x in sorted(aborted.items())
        ],
        "registered_seeds": list(derived_seeds),
        "registration_commit": registration_commit,
        "partial": partial,
        "unblindings": list(unblindings),
        "first_written_at": first_written_at,
        "stopped_early": dict(sequential["stopped"]) if ended else None,
        "decision": {
            **(a.get("decision") or {}),
            "primaries_confirmed": None if partial else met,
            "verdict": verdict,
        },
        "comparisons": comparisons,
        "looks": {"ledger": ledger_path, "per_seed": looks},
        "cost": _cost(seeds) if recorded is None else recorded["cost"],
        **({"reanalysed": recorded["reanalysed"]} if recorded is not None else {}),
    }


def _sequential_analysis(
    c: Mapping[str, Any], design, state: Mapping[str, Any], registered: int
) -> dict[str, Any]:
    """A primary's final analysis under the registered interim looks: at the look that stopped it
    (its seeds, in the order they finished), or at the end over every seed; the stage-wise p and
    the repeated confidence interval (:func:`burnqed.study.sequential.final_analysis`).  Seeds
    that finished after the look that stopped it (in flight then) are counted apart."""
    from burnqed.study.sequential import GO_ON, final_analysis

    rows = {r["seed"]: r for r in [*c["per_seed"], *(c.get("fallback_rows") or [])]}
    looks = list(state.get("looks") or [])
    stop = next((j for j, x in enumerate(looks)
                 if (x.get("decisions") or {}).get(c["name"], GO_ON) != GO_ON), None)  # fmt: skip
    order = [s for s in state.get("order") or [] if s in rows]
    order += sorted(s for s in rows if s not in order)  # seeds finished before monitoring
    if stop is not None:
        counts = [x["count"] for x in looks[: stop + 1]]
        used, final = looks[stop]["seeds"], False
    else:
        counts = [x["count"] for x in looks] + [len(order)]
        used, final = order, True
    d = [rows[s]["difference"] if rows[s]["difference"] is not None else 0.0 for s in used]
    r = final_analysis(d, counts, design, final=final)
    return {**r, "stopped_at": stop + 1 if stop is not None else None,
            "decision": looks[stop]["decisions"][c["name"]] if stop is not None else "final",
            "over_run": sorted(set(rows) - set(used)), "registered": registered}  # fmt: skip


def _realised_power(reg: Mapping[str, Any], c: Mapping[str, Any], level: float) -> dict | None:
    """The power the study had at its planned effect, with the spread its seeds realised (and
    the planned one beside it): what a registration planned on too small a spread learns."""
    plan = next((x for x in ((reg["analysis"].get("power") or {}).get("comparisons") or [])
                 if isinstance(x, Mapping) and x.get("name") == c["name"]), None)  # fmt: skip
    rows = [*c["per_seed"], *(c.get("fallback_rows") or [])]
    d = [r["difference"] for r in rows if r["difference"] is not None]
    if len(d) < 2:
        return None
    sd = statistics.stdev(d)
    counted = [
        r for r in c["per_seed"] if r["difference"] is not None and r.get("gained") is not None
    ]
    within = stats.mean_within_variance(counted) if counted else None
    out = {
        "realised_sd": sd,
        "seeds": len(d),
        # How much of the seeds' spread a seed's own benchmark sampling (McNemar) explains: the
        # rest is between seeds — what more seeds, not more theorems, average away.
        "within_sd": None if within is None else within**0.5,
        "beyond_mcnemar_share": None if within is None or sd == 0 else 1 - within / sd**2,
    }
    if plan is None or not isinstance(plan.get("mean"), (int, float)):
        return out
    k, mean = len(d), float(plan["mean"])
    planned_sd = plan.get("sd_planned")
    return {
        **out,
        "planned_mean": mean,
        "planned_sd": planned_sd,
        "power_planned": (stats.t_test_power(mean, planned_sd, k, level)
                          if mean > 0 and planned_sd else 0.0),
        "power_realised": stats.t_test_power(mean, sd, k, level) if mean > 0 else 0.0,
    }  # fmt: skip


def _sensitivity(rows: Sequence[Mapping[str, Any]], aborted: int, *, level: float) -> dict | None:
    """The one-sample t-test at ``level`` over the finished seeds' differences and ``aborted``
    seeds at d = 0 (None below 2 seeds)."""
    d = [r["difference"] for r in rows if r["difference"] is not None] + [0.0] * aborted
    t = stats.t_test(d, level=level)
    return None if t is None else {**t, "aborted_at_zero": aborted}


def _cost(seeds: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """Wall seconds per seed (:func:`seed_cost`), their median over the seeds that have one, and
    the most seeds any session ran at once."""
    per = {s: seed_cost(run.get("run")) for s, run in seeds.items()}
    known = [x for x in per.values() if x is not None]
    median = statistics.median(known) if known else None
    parallel = max(
        (x.get("parallel", 1) for run in seeds.values()
         for x in (run.get("run") or {}).get("sessions") or []),
        default=1,
    )  # fmt: skip
    return {
        "per_seed_wall_s": per,
        "median_wall_s": median,
        "seeds_timed": len(known),
        "parallel": parallel,
    }


def seed_cost(record: Mapping[str, Any] | None) -> float | None:
    """A seed's wall time over every session that ran it, each session's over the seeds it ran at
    once (``parallel``: K seeds sharing the cores for w seconds cost w/K each) — None when a
    session did not finish or the record predates ``sessions``."""
    sessions = (record or {}).get("sessions") or []
    if not sessions or any("wall_s" not in x for x in sessions):
        return None
    return sum(x["wall_s"] / x.get("parallel", 1) for x in sessions)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:+.2f} pts"


def _interval(r: Mapping[str, Any] | None) -> str:
    if not r:
        return "–"
    return (
        f"{_pct(r['estimate'])} [{_pct(r['low'])}, {_pct(r['high'])}], p = {format_p(r['p_value'])}"
    )


def _unconfirmed(c: Mapping[str, Any], r: Mapping[str, Any]) -> list[str]:
    """Which of the registered conditions a primary that is not confirmed fails."""
    p, alpha = c["pooled"], r["alpha"]
    why = []
    if c.get("holm_p") is None or c["holm_p"] >= alpha:
        why.append(f"Holm-adjusted p not below α = {alpha:g}")
    if p["estimate"] is None or p["estimate"] <= 0:
        why.append("pooled estimate not positive")
    if (r["decision"] or {}).get("every_seed_positive") and not p["every_seed_positive"]:
        why.append("not positive on every seed, as registered")
    return why


def report_markdown(r: Mapping[str, Any]) -> str:
    """``report.md``: label and checks, the decision, per-seed and pooled tables, the looks."""
    out = [
        f"# Study {r['study']} — **{r['label'].upper()}**",
        "",
        f"Decision: **{r['decision']['verdict']}**.  The registered rule: "
        f"{r['decision'].get('rule', '')}",
        "",
        f"Seeds {r['seeds']} (registered: {r['registered_seeds']}); α = {r['alpha']:g}; the "
        f"deciding seed-level test: {r['test_description']}.",
        "",
        *(
            [
                f"**Partial**: {r['partial']['seeds']} of the {r['partial']['registered']} "
                "registered seeds have finished"
                + (
                    f" (unfinished: {r['partial']['unfinished']})"
                    if r["partial"]["unfinished"]
                    else ""
                )
                + "; the figures below are interim and nothing is decided on them.",
                "",
            ]
            if r.get("partial")
            else []
        ),
        *(
            [
                f"**Aborted by the design** ({len(r['aborted'])} of the "
                f"{len(r['registered_seeds'])} registered seeds): a training guard stopped the "
                "seed, so it has no iteration-1 result.  Each counts as not positive for every "
                "comparison; the pooled tests below are on the seeds that finished, with a "
                "sensitivity analysis that puts each aborted seed at d = 0.",
                "",
                *[f"- seed {x['seed']}: {x['reason']} (`{x['error']}`)" for x in r["aborted"]],
                "",
            ]
            if r.get("aborted")
            else []
        ),
        "## Checks against the registration",
        "",
        markdown_table(
            ["", "check", "detail"],
            [["✓" if c["ok"] else "✗", c["check"], c["detail"]] for c in r["checks"]],
        ),
        "",
        *(
            [
                f"**Never recorded** (registration protocol {r.get('protocol', 1)}; today's is "
                f"{PROTOCOL}): these checks did not exist when the study ran, so nothing above "
                "vouches for them —",
                "",
                *[f"- {x}" for x in r["never_recorded"]],
                "",
            ]
            if r.get("never_recorded")
            else []
        ),
        *(
            [
                f"**Interim figures were read** {len(r['unblindings'])} time(s) before the end "
                "(`--unblind`): " + "; ".join(
                    f"{u.get('at')} at {u.get('seeds')} seeds" for u in r["unblindings"]) + ".",
                "",
            ]
            if r.get("unblindings")
            else []
        ),
    ]  # fmt: skip
    for c in r["comparisons"]:
        p = c["pooled"]
        fb_rows = c.get("fallback_rows") or []
        out += [
            f"## {c['kind'].capitalize()}: {c['name']}",
            "",
            f"{c['treatment']} against {_control_text(c['control'])} (varies the {c['varies']}), "
            + (
                "pool curves on each seed's search pool, at the budget's iterations searched; "
                if measure_of(c) == POOL_CURVE
                else "benchmark curves, the union of each iteration's eval against iteration 0's "
                "model evaluated as many times with fresh samples, at the budget's iterations; "
                if measure_of(c) == BENCHMARK_CURVE
                else ""
            )
            + "per seed: exact McNemar; d = (gained − lost) / paired theorems.",
            "",
            markdown_table(
                SEED_COLUMNS,
                [_seed_cells(x) for x in [*c["per_seed"], *fb_rows]],
            ),
            "",
            *(
                [
                    "Seeds the design stopped stand at the registered fallback ("
                    + _fallback_text(c["fallback"])
                    + "): the primary analysis below counts "
                    "them, as a user of the seed would have shipped it.",
                    "",
                ]
                if fb_rows
                else []
            ),
            f"Pooled over {p['seeds']} seeds, {100 * p['level']:.1f} % intervals"
            + (" (Bonferroni, 1 − α/m)" if c["kind"] == "primary" else " (unadjusted)")
            + ":",
            "",
            f"- one-sample t-test{' (decides)' if p['decides'] == 't' else ''}: "
            f"{_interval(p['t_test'])}",
            f"- Hartung–Knapp random effects{' (decides)' if p['decides'] == 'hartung-knapp' else ''}"
            f": {_interval(p['hartung_knapp'])}"
            + (f", τ² = {p['hartung_knapp']['tau2']:.2e}" if p["hartung_knapp"] else ""),
            f"- fixed-effect stratified count test (about these seeds' draws, not new ones): gained "
            f"{p['stratified']['gained']}, lost {p['stratified']['lost']}, p = "
            f"{format_p(p['stratified']['p_value'])}",
            _sign_line(p),
        ]
        n_aborted = len(r.get("aborted") or [])
        counted = "seeds" if fb_rows else "finished seeds"
        out.append(
            f"- every seed positive: {'yes' if p['every_seed_positive'] else 'no'} ({p['positive']} of "
            f"{len(c['per_seed']) + len(fb_rows)} {counted} positive"
            + (f"; {n_aborted} aborted, counted not positive" if n_aborted and not fb_rows else "")
            + ")"
        )
        if c.get("finished_only"):
            out.append(
                f"- beside it, the {c['finished_only']['seeds']} seeds that finished only: "
                f"{_interval(c['finished_only']['t_test'])}" + _holm_text(c["finished_only"])
            )
        if r.get("aborted"):
            sens = c.get("sensitivity")
            out.append(
                f"- sensitivity, the {len(r['aborted'])} aborted seed(s) at d = 0 (one-sample "
                f"t-test over {sens['seeds']} seeds): {_interval(sens)}" + _holm_text(sens)
                if sens
                else "- sensitivity with the aborted seeds at d = 0: fewer than 2 seeds"
            )
        ph = c.get("post_hoc_fallback")
        if ph:
            rows = ", ".join(f"seed {x['seed']} {_pct(x['difference'])}" for x in ph["rows"])
            out.append(
                f"- **post hoc** (decided after the results were read; decides nothing): each "
                f"aborted seed at its fallback ({_fallback_text(ph['fallback'])}; {rows}), "
                f"one-sample t-test over {ph['pooled']['seeds']} seeds: "
                f"{_interval(ph['pooled']['t_test'])}" + _holm_text(ph["pooled"])
            )
        sq = c.get("sequential")
        if sq:
            where = (f"stopped at interim look {sq['stopped_at']} ({sq['decision']}) on "
                     f"{sq['seeds']} seeds" if sq["stopped_at"] else
                     f"the final analysis on {sq['seeds']} seeds")  # fmt: skip
            out.append(
                f"- **sequential (decides)**: {where}, looks at {sq['counts']}; estimate "
                f"{_pct(sq['estimate'])}, repeated {100 * sq['level']:.1f} % interval "
                f"[{_pct(sq['low'])}, {_pct(sq['high'])}], stage-wise p = "
                f"{format_p(sq['p_value'])}"
                + (f"; {len(sq['over_run'])} seed(s) that finished after the look are not in it"
                   if sq["over_run"] else "")
            )  # fmt: skip
        rp = c.get("realised")
        if rp and "planned_mean" in rp:
            out.append(
                f"- power at the planned effect ({_pct(rp['planned_mean'])}) over "
                f"{rp['seeds']} seeds: planned {rp['power_planned']:.2f} (SD "
                f"{_pct(rp['planned_sd'])}), realised {rp['power_realised']:.2f} (the seeds' "
                f"SD {_pct(rp['realised_sd'])})"
            )
        if c["kind"] == "primary":
            said = {True: "confirmed", False: "not confirmed", None: "undecided (partial)"}
            why = _unconfirmed(c, r) if c["confirmed"] is False else []
            out.append(
                f"- Holm-adjusted p = {format_p(c['holm_p'])}: **{said[c['confirmed']]}**"
                + (f" ({'; '.join(why)})" if why else "")
            )
        out.append("")
    cost = r.get("cost") or {}
    if cost.get("median_wall_s") is not None:
        out += [
            "## Cost",
            "",
            f"Median wall time of a seed: {cost['median_wall_s'] / 60:.1f} min over the "
            f"{cost['seeds_timed']} seeds timed in every session that ran them (each seed's "
            "`study_run.json`, `sessions`)"
            + (
                f"; up to {cost['parallel']} seeds ran at once, each charged its wall time over "
                "the seeds sharing the cores."
                if cost.get("parallel", 1) > 1
                else "."
            ),
            "",
        ]
    if r.get("pool_curves"):
        out += pool_curves_markdown(r["pool_curves"], r.get("stopped_trainings"))
    out += [
        "## Looks at the benchmark",
        "",
        "Distinct designs that have looked at each seed's benchmark: the ledger "
        f"({r['looks']['ledger'] or 'none'}) plus this study's own.",
        "",
        markdown_table(
            ["seed", "designs", "of them in the ledger"],
            [
                [str(x["seed"]), str(x["designs"]), str(x["in_ledger"])]
                for x in r["looks"]["per_seed"]
            ],
        ),
        "",
    ]
    return "\n".join(out)


HEADERS_CURVES = ["after iteration", "expert iteration", "its node expansions", "search only",
                  "its node expansions", "difference, points"]  # fmt: skip


def pool_curves_markdown(
    curves: Mapping[str, Any], stopped: Mapping[str, Any] | None = None
) -> list[str]:
    """The pool curves' section of ``report.md``: the picture, the seeds' mean per step and the
    trainings a guard stopped (``None``: a report from before they were read says nothing)."""
    per_seed = {int(s): c for s, c in curves.items()}
    pooled = pooled_curves(per_seed)
    rows = [
        [str(e["step"] - 1), pct(e["pass_rate"]), f"{e['nodes_expanded']:,.0f}",
         pct(o["pass_rate"]), f"{o['nodes_expanded']:,.0f}",
         f"{100 * (e['pass_rate'] - o['pass_rate']):+.2f}"]
        for e, o in zip(pooled[EXPERT], pooled[SEARCH_ONLY], strict=True)
    ]  # fmt: skip
    return [
        "## Expert iteration against search only: the pool curves",
        "",
        f"Each arm's cumulative pool pass rate after each iteration, the mean of {len(per_seed)} "
        "seeds (each seed's `results/compute.json`; the picture: every seed thin, the mean bold).",
        "",
        "![Both arms' cumulative pool pass rate, every seed and their mean](curves.png)",
        "",
        markdown_table(HEADERS_CURVES, rows),
        "",
        *_compute_table(pooled),
        *([stopped_text(stopped), ""] if stopped is not None else []),
    ]


def _compute_table(pooled: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """What each arm's searches spent, cumulative after each iteration (the seeds' mean): node
    expansions and generated tokens, expert iteration's against search only's with their ratio,
    and the value model's scorings; nothing when the seeds' compute reports lack the counts."""
    pairs = list(zip(pooled[EXPERT], pooled[SEARCH_ONLY], strict=True))
    if not pairs or not all("tokens" in e and "tokens" in o for e, o in pairs):
        return []

    def ratio(e: Mapping[str, Any], o: Mapping[str, Any], key: str) -> str:
        return f"{e[key]:,.0f} / {o[key]:,.0f} ({e[key] / o[key]:.2f}×)" if o[key] else "–"

    scorings = all("value_scorings" in e and "value_scorings" in o for e, o in pairs)
    rows = [
        [str(e["step"] - 1), ratio(e, o, "nodes_expanded"), ratio(e, o, "tokens"),
         *([f"{e['value_scorings']:,.0f} / {o['value_scorings']:,.0f}"] if scorings else [])]
        for e, o in pairs
    ]  # fmt: skip
    return [
        "Both arms' search compute at the same search attempts, cumulative, the seeds' mean "
        "(expert iteration / search only, and their ratio):",
        "",
        markdown_table(
            [
                "after iteration",
                "node expansions",
                "generated tokens",
                *(["value-model scorings"] if scorings else []),
            ],
            rows,
        ),
        "",
    ]


def _seed_cells(x: Mapping[str, Any]) -> list[str]:
    return [
        str(x["seed"]) + (" (fallback)" if x.get("fallback") else ""),
        x.get("control") or "",
        f"{x['budget'][0]} vs {x['budget'][1]}",
        str(x["gained"]),
        str(x["lost"]),
        str(x["theorems"]),
        _pct(x["difference"]),
        format_p(x["p_value"]),
        x["verdict"],
    ]


def _fallback_text(fb: Mapping[str, Any]) -> str:
    if "difference" in fb:
        return f"d = 0: {fb.get('why', '')}".rstrip(": ")
    files = ", ".join(f"{k} {fb[k]}" for k in ("treatment", "control") if k in fb)
    return f"{files}: {fb['why']}" if fb.get("why") else files


def _holm_text(x: Mapping[str, Any] | None) -> str:
    return f", Holm-adjusted p = {format_p(x['holm_p'])}" if x and "holm_p" in x else ""


def _sign_line(p: Mapping[str, Any]) -> str:
    """Sign agreement, descriptive, with its real two-sided sign-test p (ties dropped)."""
    sa = p["sign_agreement"]
    if "sign_test_p" in sa:
        return (
            f"- sign agreement (descriptive, not a gate): {sa['agree']} of {sa['seeds']} seeds "
            f"have the pooled sign (sign test, zeros dropped: {sa['positive']} positive, "
            f"{sa['negative']} negative, p = {format_p(sa['sign_test_p'])})"
        )
    return (
        f"- sign agreement (not a gate): {sa['agree']} of {sa['seeds']} seeds have the pooled "
        f"sign (all by chance: {format_p(sa['all_by_chance'])})"
    )


def forest_rows(
    c: Mapping[str, Any], aborted: Sequence[Mapping[str, Any]] = ()
) -> list[tuple[str, float | None, float | None, float | None]]:
    """One comparison's panel of :func:`draw_forest`, top to bottom: ``(label, estimate, low,
    high)`` per seed (no interval; ``None`` for an aborted seed), then the pooled estimates — the
    deciding one first and marked "(decides)": a sequential design's repeated interval at the
    look it stopped at (or its final), else the registered test's, then the other tests."""
    p = c["pooled"]
    rows: list[tuple[str, float | None, float | None, float | None]] = [
        (f"seed {x['seed']} (+{x['gained']}/−{x['lost']})", x["difference"], None, None)
        for x in c["per_seed"]
    ]
    rows += [(f"seed {x['seed']} (aborted)", None, None, None) for x in aborted]
    sq = c.get("sequential") if p["decides"] == "sequential" else None
    if sq:
        where = f"look {sq['stopped_at']}" if sq.get("stopped_at") else "final"
        rows.append((f"sequential, {where}, {sq['seeds']} seeds (decides)", sq["estimate"],
                     sq["low"], sq["high"]))  # fmt: skip
    tests = {"t_test": ("t-test", "t"), "hartung_knapp": ("Hartung–Knapp", "hartung-knapp")}
    for key in sorted(tests, key=lambda k: tests[k][1] != p["decides"]):
        t = p[key]
        if t:
            name, test = tests[key]
            mark = " (decides)" if test == p["decides"] else ""
            rows.append((f"{name}{mark}", t["estimate"], t["low"], t["high"]))
    return rows


def draw_forest(r: Mapping[str, Any], out: Path) -> None:
    """``forest.png``: per comparison (one panel each), every seed's paired difference with its
    gained/lost, and the pooled estimates with their intervals (the deciding test's first)."""
    import matplotlib

    matplotlib.use("Agg")  # no display; before pyplot is imported anywhere
    import matplotlib.pyplot as plt

    comps = r["comparisons"]
    # A row a seed (finished or aborted) and one a pooled test, each tall enough for its label.
    heights = [len(forest_rows(c, r.get("aborted") or [])) for c in comps]
    fig, axes = plt.subplots(len(comps), 1, figsize=(7, 0.6 + sum(1.0 + 0.17 * h for h in heights)),
                             squeeze=False, height_ratios=heights)  # fmt: skip
    for ax, c in zip(axes[:, 0], comps, strict=True):
        p = c["pooled"]
        rows = forest_rows(c, r.get("aborted") or [])
        ys = list(range(len(rows)))[::-1]
        for y, (_, est, lo, hi) in zip(ys, rows, strict=True):
            if est is None:
                continue
            if lo is None:
                ax.plot([100 * est], [y], "o", color="tab:blue")
            else:
                ax.errorbar([100 * est], [y], xerr=[[100 * (est - lo)], [100 * (hi - est)]],
                            fmt="D", color="black", capsize=3)  # fmt: skip
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_yticks(ys, [x[0] for x in rows], fontsize=8)
        ax.set_title(f"{c['kind']}: {c['name']} ({100 * p['level']:.1f} % intervals)", fontsize=9)
        ax.set_xlabel("treatment − control, solve-rate points", fontsize=8)
    fig.suptitle(f"Study {r['study']} ({r['label']})", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / fig.get_figheight()))  # the title's own strip
    fig.savefig(out, dpi=100)
    plt.close(fig)
