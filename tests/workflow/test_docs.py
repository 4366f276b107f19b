"""The docs' numbers are the committed summary's, and their generated parts are current.

- Every figure the README and docs/ quote about the demo is rendered here from
  ``docs/summary.json`` (:data:`CLAIMS`: a sentence with ``{name}`` holes filled from
  :func:`figures`) and must appear in its page as rendered (line breaks count as spaces).  A
  refreshed summary with other numbers fails this test, naming the sentence to rewrite.
- Coverage: after the claims and the generated blocks are cut out, no figure-like token (a
  percentage, a p-value, a gained/lost pair, an "N of M") is left in those pages except the
  non-results of :data:`NOT_RESULTS` (each with why), so a new number cannot skip the check.
- Claims from flags (issue 44 §7): a verdict word — met / not met, better, worse, no measurable
  effect, significant, confirmatory, exploratory — stands in a page only inside a claim, where it is
  rendered from the summary's flags ({verdict}, {C_verdict}, {goal}, {evidence}, …), or in a
  generated block; flipping a flag in the summary breaks the claim (tested).
- The generated parts — the blocks (:data:`burnqed.report.docs.BLOCKS`), docs/configuration.md and
  the README's PNG (compared pixel by pixel) — equal what ``burnqed report docs`` writes.
- What only the ``ablations`` target builds is marked where it is published: the committed summaries
  list it (``run.ablations_only``, :func:`burnqed.report.summary.ablations_only`); a claim that the
  default target's summary of the same run (:func:`burnqed.report.summary.headline_view`) cannot
  state stands in a section that names the target (:data:`burnqed.report.docs.ABLATIONS`), and the
  blocks that show such figures say so.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from matplotlib.image import imread

from burnqed.eval.paired import format_p
from burnqed.report.docs import (
    ABLATIONS,
    BLOCK_RE,
    BLOCKS,
    configuration_markdown,
    current_blocks,
    doc_files,
    draw_runs,
    read_runs,
    replace_blocks,
    seed_row,
    seeds_table,
    shipped_configs,
    study_reports,
    value_goal,
    value_table,
)
from burnqed.report.summary import SUMMARY_KEYS, ablations_only, draw, headline_view
from tests.workflow.conftest import REPO

DOCS = REPO / "docs"
SUMMARY = json.loads((DOCS / "summary.json").read_text(encoding="utf-8"))


def _pc(x: float) -> str:
    return f"{100 * x:.1f}"


def figures(s: dict) -> dict[str, str]:
    """Each quoted figure of the summary, formatted as the docs write it."""
    ev, lc = s["evals"], s["learning"]
    f: dict[str, str] = {"theorems": str(s["benchmark"]["theorems"]), "pass_n": str(s["pass_n"])}
    iterations = [label for label in ev if re.fullmatch(r"iter_\d+", label)]
    for label, key in (
        ("baseline", "base"),
        *((i, "it" + i.removeprefix("iter_")) for i in iterations),
    ):
        for b, r in ev[label]["rates"].items():
            if r is not None:
                f[f"{key}_{b}"] = _pc(r)
        for b, split in (ev[label]["ended_by"] or {}).items():
            if split:
                f[f"{key}_budget_{b}"] = str(split.get("budget", 0))
                f[f"{key}_unsolved_{b}"] = str(sum(v for k, v in split.items() if k != "proof"))
    i0 = ev["iter_0"]
    f["it0_rise"] = _pc((i0["solved"]["4"] - i0["solved"]["1"]) / i0["theorems"])
    for i, t in enumerate([*lc["steps"], *lc["controls"]]):
        f[f"step{i}_g"], f[f"step{i}_l"] = str(t["gained"]), str(t["lost"])
        f[f"step{i}_p"] = format_p(t["p_value"])
    f["verdict"] = lc["verdict"]
    # flags: what a claim may say of a comparison (its paired test's verdict) or of a goal
    f["evidence"] = (s.get("run") or {}).get("evidence") or "exploratory"
    for i, t in enumerate([*lc["steps"], *lc["controls"]]):
        f[f"step{i}_verdict"] = _verdict(t)
    cfg = shipped_configs(s)
    for c, r in cfg["rates"].items():
        f[f"{c}_with"], f[f"{c}_without"] = _pc(r["with"]), _pc(r["without"])
        if (ab := r.get("ablation")) and ab.get("gained") is not None:
            f[f"{c}_g"], f[f"{c}_l"] = str(ab["gained"]), str(ab["lost"])
            f[f"{c}_p"] = format_p(ab["p_value"])
        if r.get("depth_twin") is not None:
            f[f"{c}_depth"] = _pc(r["depth_twin"])
        if (vs := r.get("vs_stronger")) and vs.get("gained") is not None:
            f[f"{c}_twin"] = r["stronger_twin"]
            f[f"{c}_sg"], f[f"{c}_sl"] = str(vs["gained"]), str(vs["lost"])
            f[f"{c}_sp"] = format_p(vs["p_value"])
            if vs.get("p_holm") is not None:
                f[f"{c}_sholm"] = format_p(vs["p_holm"])
            f[f"{c}_verdict"] = vs["verdict"]
        vm = r.get("value_model") or {}
        if vm.get("decisions_changed") is not None:
            f[f"{c}_changed"] = _pc(vm["decisions_changed"])
        for part, top in (
            ("ho", vm.get("heldout_top1")),
            ("sd", vm.get("heldout_top1_same_depth")),
        ):
            for n, x in (top or {}).items():
                f[f"{c}_{part}_{n}"] = f"{x['rate']:.3f}"
            if top:
                f[f"{c}_{part}_n"] = str(top["logprob"]["decisions"])
    goal = cfg.get("goal") or {}
    f["goal"] = goal.get("verdict") or "undecided"
    fc = seed_row(s)["features_vs_c"]  # the feature value against C, two-sided
    if fc and fc.get("gained") is not None:
        f["FC_g"], f["FC_l"], f["FC_p"] = (
            str(fc["gained"]),
            str(fc["lost"]),
            format_p(fc["p_value"]),
        )
        f["FC_verdict"] = fc.get("verdict") or _verdict(fc)
    emb = cfg.get("embeddings") or {}
    for c, e in emb.items():
        if e and e.get("rank1") is not None:
            f[f"{c}_rank1"], f["chance"] = f"{e['rank1']:.3f}", f"{e['chance']:.2f}"
    for q, t in (cfg.get("questions") or {}).items():
        k = q.replace("→", "")
        f[f"{k}_g"], f[f"{k}_l"], f[f"{k}_p"] = (
            str(t["gained"]),
            str(t["lost"]),
            format_p(t["p_value"]),
        )
    live = (cfg.get("features") or {}).get("live") or {}
    for part, key in (("ho", "heldout_top1"), ("sd", "heldout_top1_same_depth")):
        for n, x in ((live.get("value_model") or {}).get(key) or {}).items():
            f[f"F_{part}_{n}"] = f"{x['rate']:.3f}"
    if live.get("test"):
        t = live["test"]
        f["F_g"], f["F_l"], f["F_p"] = str(t["gained"]), str(t["lost"]), format_p(t["p_value"])
        f["F_verdict"] = _verdict(t)
        f["F_rate"] = _pc(live["rate"])
    agreement = (cfg.get("features") or {}).get("agreement")
    if agreement:
        f["agree_exact"], f["agree"] = str(agreement["exact"]), str(agreement["agree"])
        f["F_inexact"] = str(agreement["inexact"])
        inexact = agreement["live_vs_twin_inexact"]
        f["Fi_g"], f["Fi_l"] = str(inexact["gained"]), str(inexact["lost"])
    # Polu's comparison on the pool (burnqed.eval.compute): each arm after its last step, the
    # paired test after each iteration, the tokens each training saw
    cp = s.get("compute") or {}
    for arm, key in (("expert iteration", "EI"), ("search only", "SO")):
        if last := ((cp.get("curves") or {}).get(arm) or [None])[-1]:
            f[f"{key}_proved"], f[f"{key}_rate"] = str(last["proved"]), _pc(last["pass_rate"])
            f[f"{key}_nodes"], f[f"{key}_tokens"] = (
                f"{last['nodes_expanded']:,}",
                f"{last['tokens']:,}",
            )
    if cp.get("curves"):
        f["pool"] = str(cp["pool_theorems"])
        ei, so = cp["curves"]["expert iteration"][-1], cp["curves"]["search only"][-1]
        f["EI_SO_nodes"] = f"{ei['nodes_expanded'] / so['nodes_expanded']:.2f}"
        f["EI_SO_tokens"] = f"{ei['tokens'] / so['tokens']:.2f}"
    for t in cp.get("paired") or []:
        k = f"cmp{t['iteration']}"
        f[f"{k}_g"], f[f"{k}_l"], f[f"{k}_p"] = (
            str(t["gained"]),
            str(t["lost"]),
            format_p(t["p_value"]),
        )
        f[f"{k}_verdict"] = t["verdict"]
    for name, tokens in (cp.get("training_tokens") or {}).items():
        if tokens is not None:
            f[f"train_{name}"] = f"{tokens:,}"
    for d in s["detectable"]:
        n = d["changed"]
        f[f"det{n}_g"], f[f"det{n}_l"] = str(d["gained"]), str(d["lost"])
        f[f"det{n}_pts"] = _pc(d["points"])
    dc = s["decontamination"]
    f["dc_theorems"], f["dc_rows"] = str(dc["contaminated_theorems"]), str(dc["rows_dropped"])
    f["dc_checked"] = f"{dc['theorems_checked']:,}"
    m = s["manual"]
    run = m["run"]
    f["wall"] = f"{run['wall_s'] // 60} min {run['wall_s'] % 60} s"
    # the whole run's peak as the demo measures it (burnqed.eval.memory; docs/demo.md says which)
    f["jobs"] = str(run["jobs"])
    if s.get("memory"):
        f["mem_gb"] = f"{s['memory']['run_peak_mb'] / 1000:.1f}"
        f["mem_job"] = s["memory"]["job_peak"]["job"]
        f["mem_job_mb"] = f"{s['memory']['job_peak_mb']:.0f}"
    f["pairs"] = f"{m['data']['tactic_pairs']:,}"
    pair = m["cache_pair"]
    for k in ("with", "without"):
        f[f"cache_{k}"] = f"{pair[k + '_s'] // 60} min {pair[k + '_s'] % 60} s"
    f["dc_bench"] = str(m["data"]["benchmark_decontam_theorems"])
    return f  # fmt: skip


# (page, sentence with {figure} holes): every figure a page quotes about the demo.
CLAIMS = [
    ("docs/value-model.md", "the feature value gains {F_g} theorems and loses {F_l} against the same policy without a value (p = {F_p}; {F_rate} % at 4 nodes)"),
    ("docs/value-model.md", "S → B is +{SB_g}/−{SB_l} (p = {SB_p})"),
    ("docs/value-model.md", "on the {A_sd_n} held-out decisions whose open nodes share a depth"),
    ("docs/value-model.md", "A's, S's and B's energies rank the on-path node first more often than the log-prob ({A_sd_energy}, {S_sd_energy} and {B_sd_energy} against {A_sd_logprob}), each within two standard errors of it"),
    ("docs/value-model.md", "C is +{C_g}/−{C_l} against its twin (p = {C_p})"),
    ("docs/value-model.md", "and S +{S_g}/−{S_l} and B +{B_g}/−{B_l}, A +{A_g}/−{A_l}"),
    ("docs/value-model.md", "**Seed 0, {evidence}.** The energy shares the priority with the log-prob and changes {C_changed} % of C's decisions"),
    ("docs/value-model.md", "it solves {C_depth} % with iteration 2's policy, against C's {C_with} %"),
    ("docs/value-model.md", "Against the stronger of its two twins, the {C_twin} twin, C gains {C_sg} and loses {C_sl} (p = {C_sp}: {C_verdict})"),
    ("docs/value-model.md", "with Holm's correction over the four configurations' claims its p is {C_sholm}, so the value model's goal is **{goal}**; A, S and B against theirs: +{A_sg}/−{A_sl}, +{S_sg}/−{S_sl} and +{B_sg}/−{B_sl} (Holm {A_sholm}, {S_sholm} and {B_sholm})"),
    ("docs/value-model.md", "A {A_rank1}, S {S_rank1}, B {B_rank1} and C {C_rank1} against {chance}"),
    ("docs/value-model.md", "against C it gains {FC_g} and loses {FC_l} (p = {FC_p}: {FC_verdict})"),
    ("docs/value-model.md", "each is one seed's {evidence} run"),
    ("docs/value-model.md", "its features rank the on-path node first more often than the log-prob ({F_sd_value} against {F_sd_logprob})"),
    ("docs/value-model.md", "its live replay equals its live eval on {agree} of {agree_exact} theorems"),
    ("docs/demo.md", "one seed, {evidence} (`docs/runs/`)"),
    ("README.md", "evaluates each on {theorems} held-out deeper theorems"),
    ("docs/demo.md", "on a 2-core AMD EPYC ({mem_gb} GB peak memory, the whole run's"),
    ("docs/demo.md", "{wall} wall for its {jobs} jobs, design P4 on the development overlay"),
    ("docs/demo.md", "the whole run's peak (the upper bound above), {mem_gb} GB; the largest single job, `{mem_job}`, peaks at {mem_job_mb} MB"),
    ("docs/demo.md", "Seed 0's figures are **{evidence}** — one seed"),
    ("docs/demo.md", "{theorems} held-out theorems of 4–6 steps, pass@{pass_n}"),
    ("docs/demo.md", "iteration 0 rises {it0_rise} points from 1 to 4 nodes"),
    ("docs/demo.md", "(iteration 0 at 4 nodes: {it0_budget_4} of {it0_unsolved_4}; iteration 2: {it2_budget_4} of {it2_unsolved_4};"),
    ("docs/demo.md", "{det6_g} theorems gained and none lost ({det6_pts} points); {det20_g} vs {det20_l} when 20 theorems change; {det40_g} vs {det40_l} ({det40_pts} points) when 40 do"),
    ("docs/demo.md", "baseline → iteration 0 +{step0_g}/−{step0_l} (p = {step0_p}), iteration 0 → 1 +{step1_g}/−{step1_l} (p = {step1_p}), iteration 1 → 2 +{step2_g}/−{step2_l} (p = {step2_p})"),
    ("docs/demo.md", "iteration 2 gains {step3_g} and loses {step3_l} (p = {step3_p}): the learning check **{verdict}s**"),
    ("docs/demo.md", "After iteration 2's searches expert iteration has proved {EI_proved} of the {pool} pool theorems ({EI_rate} %), search only {SO_proved} ({SO_rate} %)"),
    ("docs/demo.md", "expert iteration gains {cmp1_g} and loses {cmp1_l} after iteration 1 (p = {cmp1_p}: {cmp1_verdict}) and gains {cmp2_g} and loses {cmp2_l} after iteration 2 (p = {cmp2_p}: {cmp2_verdict})"),
    ("docs/demo.md", "expanded {EI_SO_nodes} times search only's nodes ({EI_nodes} against {SO_nodes}) and generated {EI_SO_tokens} times its tokens"),
    ("docs/demo.md", "iterations 1 and 2's adapters saw {train_iter_1} and {train_iter_2} tokens (iteration 0's, both arms', {train_iter_0})"),
    ("docs/demo.md", "Seeds 1 and 2, expert iteration against search only: +{s1_cmp1_g}/−{s1_cmp1_l} and +{s2_cmp1_g}/−{s2_cmp1_l} after iteration 1, +{s1_cmp2_g}/−{s1_cmp2_l} and +{s2_cmp2_g}/−{s2_cmp2_l} after iteration 2"),
    ("docs/expansion-cache.md", "{cache_with} with the cache and {cache_without} without it"),
    ("docs/demo.md", "the default target without it took {cache_without} against {cache_with} with it"),
    ("docs/decontamination.md", "On the demo ({dc_checked} generated theorems, {pairs} pairs, against the {theorems} theorems"),
    ("docs/decontamination.md", "this one finds {dc_theorems} theorems ({dc_rows} pairs), every one at its root, stating {dc_bench} benchmark theorems"),
]  # fmt: skip

# Figure-like tokens left in a results page that are not results of the demo, and why.
NOT_RESULTS = {
    "README.md": {"95 %": "the intervals' confidence level (burnqed.eval.passk)"},
    "docs/demo.md": {
        "95 %": "'~95 % of its tactics fail': config/demo.yaml's measurement on the search pool",
    },
    "docs/value-model.md": {},
    "docs/decontamination.md": {},
}
_FIGURE = re.compile(
    r"(?:≥ )?\d+(?:[.,]\d+)?(?: ?%| points)|p = [\d.]+|[+−]\d+/−\d+|\b\d+ of \d+\b"
)


# Verdict words: in a results page only inside a claim (rendered from a flag) or a generated block.
_FLAG = re.compile(
    r"\b(?:not met|met|better|worse|no measurable effect|significant(?:ly)?|confirmatory|"
    r"exploratory|undecided|confirmed)\b"
)
# Verdict words a results page may use outside a claim, and why (they say what a word means, or
# name a check, not what a result was).
NOT_VERDICTS: dict[str, set[str]] = {
    "README.md": set(),
    "docs/demo.md": set(),
    "docs/value-model.md": set(),
    "docs/decontamination.md": set(),
}


def _verdict(t: dict) -> str:
    """A paired test's verdict as the summary's counts imply it (exact McNemar at α = 0.05)."""
    from burnqed.eval.paired import ALPHA

    if t.get("gained") is None:
        return "undecided"
    if t["p_value"] >= ALPHA:
        return "no measurable effect"
    return "better" if t["gained"] > t["lost"] else "worse"


def _flat(text: str) -> str:
    return " ".join(text.split())


def _page(name: str) -> str:
    return (REPO / name).read_text(encoding="utf-8")


def run_figures() -> dict[str, str]:
    """The other published seeds' pool comparisons (docs/runs/seed_N.json, the default target's):
    ``s{N}_cmp{i}_g`` and ``_l``, expert iteration's gains and losses after iteration i."""
    f = {}
    for path in sorted((REPO / "docs" / "runs").glob("seed_*.json")):
        seed = path.stem.removeprefix("seed_")
        for t in (json.loads(path.read_text(encoding="utf-8")).get("compute") or {}).get(
            "paired"
        ) or []:
            f[f"s{seed}_cmp{t['iteration']}_g"] = str(t["gained"])
            f[f"s{seed}_cmp{t['iteration']}_l"] = str(t["lost"])
    return f


FIG = figures(SUMMARY) | run_figures()
# What the default target's summary of the same run states: the summary without the figures only
# `ablations` builds.
HEADLINE_FIG = figures(headline_view(SUMMARY)) | run_figures()


def _ablations_only(claim: str) -> bool:
    """A claim the default target's summary cannot state as the page does (a figure it lacks, or
    states otherwise: Holm's p over one claim)."""
    try:
        return claim.format(**HEADLINE_FIG) != claim.format(**FIG)
    except KeyError:
        return True


def _section(page: str, text: str) -> str:
    """The section of ``page`` (from a heading to the next) whose text holds ``text``."""
    sections = re.split(r"(?m)^(?=#{1,6} )", _page(page))
    (found,) = [sec for sec in sections if _flat(text) in _flat(sec)]
    return found


@pytest.mark.parametrize(("page", "claim"), CLAIMS, ids=[f"{p}:{c[:40]}" for p, c in CLAIMS])
def test_every_quoted_figure_is_the_committed_summarys(page, claim):
    rendered = claim.format(**FIG)
    assert _flat(rendered) in _flat(_page(page)), (
        f"{page} should say, from docs/summary.json:\n  {rendered}\n(the sentence of "
        "tests/workflow/test_docs.py CLAIMS: rewrite the page, or the claim when the text moved)"
    )


def _outside_claims(page: str) -> str:
    text = _flat(BLOCK_RE.sub("", _page(page)))
    for p, claim in CLAIMS:
        if p == page:
            text = text.replace(_flat(claim.format(**FIG)), " ")
    return text


@pytest.mark.parametrize("page", sorted(NOT_RESULTS))
def test_no_figure_in_a_results_page_escapes_the_check(page):
    left = sorted(set(_FIGURE.findall(_outside_claims(page))) - set(NOT_RESULTS[page]))
    assert not left, f"{page}: figures not tied to docs/summary.json (add a claim): {left}"


@pytest.mark.parametrize("page", sorted(NOT_VERDICTS))
def test_no_verdict_in_a_results_page_escapes_its_flag(page):
    """A sentence cannot say "met" (or better, significant, confirmatory, …) where the summary's
    flag says otherwise: outside the claims rendered from flags and the generated blocks, no
    verdict word is left."""
    left = sorted(set(_FLAG.findall(_outside_claims(page))) - NOT_VERDICTS[page])
    assert not left, f"{page}: verdicts not rendered from a flag (put them in a claim): {left}"


def test_a_flipped_flag_breaks_the_claims_that_state_it():
    """Every claim holding a verdict hole renders differently when its flag flips, so a page
    written for one verdict fails the check once the summary says another."""
    flipped = json.loads(json.dumps(SUMMARY))
    flipped["learning"]["verdict"] = {"pass": "fail"}.get(SUMMARY["learning"]["verdict"], "pass")
    cfg = flipped["configs"][-1]  # the shipped iteration's (burnqed.report.docs.shipped_configs)
    cfg["goal"]["verdict"] = "met" if cfg["goal"]["verdict"] != "met" else "not met"
    for r in cfg["rates"].values():
        if r.get("vs_stronger"):
            r["vs_stronger"]["verdict"] = (
                "worse" if r["vs_stronger"]["verdict"] != "worse" else "better"
            )
    for chk in cfg["goal"]["checks"]:
        if chk["check"].startswith("the feature value does not beat C") and chk.get("value"):
            v = chk["value"].get("verdict")
            chk["value"]["verdict"] = "worse" if v != "worse" else "better"
    for t in (flipped.get("compute") or {}).get("paired") or []:
        t["verdict"] = "worse" if t["verdict"] != "worse" else "better"
    flipped["run"]["evidence"] = "confirmatory"
    moved = figures(flipped)
    holes = ("{verdict}", "{goal}", "{evidence}", "_verdict}")
    flagged = [(p, c) for p, c in CLAIMS if any(h in c for h in holes)]
    assert flagged, "no claim states a verdict from a flag"
    for page, claim in flagged:
        if ("{step" in claim or "{F_verdict}" in claim) and "_verdict}" in claim:
            continue  # a step's verdict follows from its counts, not a flag of its own
        assert _flat(claim.format(**moved)) not in _flat(_page(page)), (page, claim)


def test_a_changed_summary_breaks_the_claims_and_the_table():
    """The check can fail: one number moved in the summary changes a rendered claim and the table."""
    moved = json.loads(json.dumps(SUMMARY))
    moved["learning"]["steps"][0]["gained"] += 1
    moved["evals"]["iter_1"]["rates"]["4"] = 0.5
    changed = figures(moved)
    (page, claim), *_ = [c for c in CLAIMS if "{step0_g}" in c[1]]
    assert _flat(claim.format(**figures(SUMMARY))) in _flat(_page(page))
    assert _flat(claim.format(**changed)) not in _flat(_page(page))
    assert BLOCKS["solve-table"](moved) not in _page("docs/demo.md")


def test_the_committed_summaries_list_what_only_ablations_builds():
    """docs/summary.json and every published run are the whole demo's (the ``ablations`` target's:
    before the demo had two targets its default built everything) and list the figures only that
    target builds; without them they are what the default target's summary states."""
    for s in read_runs(DOCS):
        assert s["run"]["target"] == "ablations", s["run"]
        assert s["run"]["ablations_only"] == ablations_only(s)
        assert {"configs.0.rates.A", "configs.0.features", "memory"} <= set(ablations_only(s))
    view = headline_view(SUMMARY)
    shipped = shipped_configs(view)
    assert list(shipped["rates"]) == ["C"] and "goal" not in shipped
    assert view["learning"] == SUMMARY["learning"] and view["evals"] == SUMMARY["evals"]


@pytest.mark.parametrize(
    ("page", "claim"),
    [c for c in CLAIMS if _ablations_only(c[1])],
    ids=[f"{p}:{c[:40]}" for p, c in CLAIMS if _ablations_only(c)],
)
def test_every_claim_only_ablations_builds_stands_in_a_section_that_says_so(page, claim):
    section = _section(page, claim.format(**FIG))
    assert ABLATIONS in section, (
        f"{page}: the claim {claim[:60]!r}… quotes a figure only the `ablations` target builds: "
        f"its section must say so (name {ABLATIONS})"
    )


def test_the_headline_claims_are_the_default_targets():
    """The check above is not vacuous either way: the learning check, C against its twins, Polu's
    comparison and the solve rates are the default target's; the configurations, the feature
    value, Holm over four and the whole run's memory are not."""
    only = {c for _, c in CLAIMS if _ablations_only(c)}
    headline = {c for _, c in CLAIMS} - only
    assert any("{step0_g}" in c for c in headline) and any("{C_depth}" in c for c in headline)
    assert any("{cmp1_g}" in c for c in headline)  # Polu's comparison: the default target's
    assert any("{C_changed}" in c for c in headline)
    assert any("{S_g}" in c for c in only) and any("{F_g}" in c for c in only)
    assert any("{C_sholm}" in c for c in only) and any("{mem_gb}" in c for c in only)


def test_the_blocks_mark_what_only_ablations_builds():
    """The value table and the goal (from the ablations target's summary) name the target; the
    per-seed table marks its columns for the feature value and the goal; a default target's
    summary gives C's row alone, unmarked."""
    assert ABLATIONS in value_table(SUMMARY) and ABLATIONS in value_goal(SUMMARY)
    header = seeds_table(read_runs(DOCS)).splitlines()[0]
    assert (
        f"the feature value vs C ({ABLATIONS})" in header and f"value goal ({ABLATIONS})" in header
    )
    default = {**headline_view(SUMMARY)}
    default["run"] = {**default["run"], "target": "default"}
    rows = [line for line in value_table(default).splitlines() if line.startswith("| ")][1:]
    assert [r.split(" | ")[0] for r in rows] == ["| C"] and ABLATIONS not in value_table(default)


def test_the_summary_has_every_key():
    assert tuple(SUMMARY) == SUMMARY_KEYS and SUMMARY["kind"] == "burnqed summary"


def test_generated_blocks_are_current():
    blocks = current_blocks(REPO, SUMMARY, read_runs(DOCS))
    seen = set()
    for page in doc_files(REPO):
        text = page.read_text(encoding="utf-8")
        seen |= {m.group(2) for m in BLOCK_RE.finditer(text)}
        assert replace_blocks(text, blocks) == text, (
            f"{page.relative_to(REPO)}: a generated block is stale: run `burnqed report docs`"
        )
    assert "solve-table" in seen
    # Every committed study report is a block somewhere: the last registered one whole, as the
    # README's headline; an earlier one whole or brief.
    reports = study_reports(REPO)
    assert all({f"study:{n}", f"study-brief:{n}"} & seen for n in reports), (seen, list(reports))
    if reports:
        last = max(reports, key=lambda n: reports[n]["registration_commit"]["date"])
        readme = (REPO / "README.md").read_text(encoding="utf-8")
        assert f"<!-- generated: study:{last} -->" in readme, last


def test_configuration_page_is_current_and_names_every_knob():
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert page == configuration_markdown(REPO), (
        "docs/configuration.md is stale: run `burnqed report docs`"
    )
    for key in ("search.max_nodes", "sft.joint_lambda", "ebm.negatives", "report", "cpu_isa"):
        assert f"`{key}" in page
    # a key's params.yaml comment and the demo's value reach the page
    assert "Node expansions per theorem attempt" in page and "; demo `6000`" in page


def test_the_readme_figure_is_drawn_from_the_summary(tmp_path):
    draw(SUMMARY, tmp_path / "curves.png")
    assert np.array_equal(imread(tmp_path / "curves.png"), imread(DOCS / "budget_curves.png")), (
        "docs/budget_curves.png is not the summary's: run `burnqed report docs`"
    )
    draw_runs(read_runs(DOCS), tmp_path / "seeds.png")
    assert np.array_equal(imread(tmp_path / "seeds.png"), imread(DOCS / "seed_curves.png")), (
        "docs/seed_curves.png is not the published runs': run `burnqed report docs`"
    )


def test_every_published_run_is_one_seeds_and_exploratory():
    runs = read_runs(DOCS)
    seeds = [(r.get("run") or {}).get("seed") for r in runs]
    assert len(runs) >= 3 and len(set(seeds)) == len(seeds) and None not in seeds, seeds
    assert {(r.get("run") or {}).get("evidence") for r in runs} == {"exploratory"}


def test_readme_is_at_most_10000_characters_and_links_every_docs_page():
    text = _page("README.md")
    assert len(text) <= 10_000, len(text)
    for page in sorted(DOCS.glob("*.md")):
        assert f"(docs/{page.name})" in text, f"README does not link docs/{page.name}"


def test_every_relative_link_of_the_docs_resolves():
    for page in doc_files(REPO):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), (
                f"{page.relative_to(REPO)}: broken link {target}"
            )
