"""The replay stage: search a recorded eval's trees again under another priority (issue 30 §1-2,
issue 44 §6).

A recorded eval (its JSON and trajectory directory) holds the policy's candidates for every state it
expanded and Lean's answer to every tactic it applied; candidates are seeded per (theorem, attempt,
state), so another priority visiting the same states gets the same answers
(:mod:`burnqed.search.recorded`).  ``run`` searches the recording's theorems again with the
engine, its answers from a :class:`~burnqed.search.recorded.RecordedSource`, under a priority:

- ``recorded``: the recording's own (log-prob, with its recorded energies when it had a value
  model) — it reproduces the recording theorem by theorem;
- ``logprob``: log-prob alone (a recording made with a value model, without it);
- ``value``: a value model (``--ebm DIR``, scored live: it needs the policy for embeddings), with
  ``search.energy_weight``;
- ``oracle``: knows the recorded proof paths (ranks on-path states first): the ceiling.

**A prediction or an equality check.**  Without ``live`` the replay answers only from the recording:
a pop of a state the recording never expanded gets no candidates and leaves its attempt
*uncovered*.  The replay then reports its coverage (covered attempts / all, per budget) and its
effect on the covered theorems only, the uncovered counted apart, never scored as failures — with
the bound of what it can say: over the recording's trees it cannot solve a theorem the recording did
not solve within its own budget (:mod:`burnqed.replay.coverage`).  Its eval-shaped figures (``by_budget``,
``per_theorem``, what ``burnqed compare`` pairs with the recording) are the theorems covered at the
largest budget.  With ``live`` what the recording never expanded is expanded live with the
recording's model and seeds: the replay then equals the live eval with that priority — an equality
check of replay, not a prediction.

**Checks before anything runs** (:mod:`burnqed.replay.checks`, one line each): the recording's
order and sampling must be those of the run the priority stands for; the model it loads and the
search settings that decide its pops must be the recording's (by digest) unless
``allow_mismatch`` names them, and then its provenance records both sides.  Its provenance's
``model`` is the model it loaded (the recording's when it loads none: its answers are that
model's).

``run`` reads like a recipe: :func:`setup` (the arguments), :func:`load_recording`, :func:`check`,
:func:`replay` (the search, the decisions, the oracle ceiling), :func:`score` (coverage, the
prediction, the eval JSON of ``kind: burnqed replay``) and :func:`write`.  The ``replay`` block has,
per budget: coverage, the covered theorems' solved counts by the recording and the replay, gained
and lost with the exact McNemar p and the most it could gain, the uncovered theorems apart, the
oracle ceiling, the unexpanded pops, and the frontier top-1 (:mod:`burnqed.replay.decisions`) of
log-prob alone, the value alone (the value model's energies, or the recording's own) and their sum at
the weights the search gives the value (``search.energy_weight``: ``fitted`` resolves to the value
model's own fit on the pool's decisions, :func:`burnqed.search.value.resolve_energy_weight`).

Example::

    run(recording=Path("results/iter_0/eval_longer.json"), out=Path("results/iter_0/replay.json"),
        cfg=params["eval"], search=params["search"], lean=params["lean"],
        policy=params["policy"], priority_name="oracle")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from burnqed.config import EvalConfig, InputError, LeanConfig, PolicyConfig, SearchConfig
from burnqed.data.benchmarks import sha256_file
from burnqed.data.prompt import STOP
from burnqed.eval.metrics import score_trajectories
from burnqed.eval.stage import path_digest, search_section, write_json
from burnqed.policy import SamplingParams
from burnqed.provenance import git_commit, package_versions
from burnqed.replay.checks import (
    PRIORITY_SEARCH,
    REPLAYED_SEARCH,
    ReplayRefused,
    check_model,
    check_sampling,
    check_search,
    intended_sampling,
    parse_mismatches,
    search_settings,
)
from burnqed.replay.coverage import BOUND, LIVE, coverage_rows, covered_effect
from burnqed.replay.decisions import find_decisions, top1_rate
from burnqed.search.engine import SearchResult, search_from_source
from burnqed.search.recorded import OracleValue, RecordedSource, RecordedValue, Recording
from burnqed.search.sources import LiveSource
from burnqed.search.value import ValueModel, resolve_energy_weight, value_meta, weighted
from burnqed.theorems import Theorem, read_theorems
from burnqed.trajectory import MANIFEST, TrajectoryWriter, read_nodes, search_part_dirs
from burnqed.value.frontier import logprob_term

log = logging.getLogger(__name__)

PRIORITIES = ("recorded", "logprob", "value", "oracle")
KIND = "burnqed replay"
REPLAY_MARK = "replay.json"  # in a replay's trajectory directory: a rerun may replace it
ENERGY_NOTE = (
    "the sum is logprob_weight · log-prob − energy_weight · energy at the weights the search "
    "gives the value model (search.energy_weight: fitted takes the value model's own fit on the "
    "pool's decisions, whose log-prob weight is 0 where the energy ranks alone)"
)
# What a replay is, by priority (``live``: an equality check whatever the priority).
ROLES = {
    "recorded": "reproduction",
    "logprob": "prediction",
    "value": "prediction",
    "oracle": "oracle ceiling",
}


@dataclass(frozen=True)
class ReplayRun:
    """What one replay search gave, beside its trajectories."""

    results: list[SearchResult]
    # (theorem, attempt) → the first expansion index whose answer was made up (unexpanded, or a
    # verdict assumed): a run with budget b is exact (covered) for that attempt iff b <= this
    inexact_from: dict[tuple[str, int], int]
    unexpanded_at: list[int]  # the expansion index of every unexpanded pop


def _recording_paths(recording: Path, trajectories: Path | None) -> tuple[dict | None, Path]:
    """(the recorded eval JSON or None, its trajectory directory)."""
    recording = Path(recording)
    if recording.is_dir():
        return None, recording
    if not recording.is_file():
        raise InputError(f"{recording}: no such eval JSON or trajectory directory")
    try:
        rec = json.loads(recording.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"{recording}: not JSON ({e})") from None
    if rec.get("kind") not in ("burnqed eval", KIND):
        raise InputError(f"{recording}: not a burnqed eval JSON (kind={rec.get('kind')!r})")
    if trajectories is None:
        recorded = (rec.get("provenance") or {}).get("trajectories")
        # As written (relative to where the eval ran), else beside the JSON as `burnqed eval` puts it.
        candidates = [Path(recorded)] if recorded else []
        candidates.append(recording.with_suffix(""))
        trajectories = next((p for p in candidates if p.is_dir()), candidates[0])
    if not Path(trajectories).is_dir():
        raise InputError(f"{trajectories}: the recording's trajectory directory is missing")
    return rec, Path(trajectories)


def _theorems(manifest: Mapping[str, Any], keys: Sequence[str], *, needed: bool) -> list[Theorem]:
    """The recorded theorems, from the recording's theorem file; without it (moved, another
    machine) keys alone do for a replay that never asks Lean."""
    path = manifest.get("theorems_file")
    if path and Path(path).is_file():
        by_key = {t.key: t for t in read_theorems(Path(path))}
        missing = [k for k in keys if k not in by_key]
        if missing:
            raise InputError(f"{path}: theorem {missing[0]!r} of the recording is not in it")
        return [by_key[k] for k in keys]
    if needed:
        raise InputError(f"{path}: the recording's theorem file is missing (needed with --live)")
    log.warning("%s: theorem file missing; replaying by theorem key alone", path)
    return [Theorem(name=k, formal_statement="", key=k) for k in keys]


def _prepare_out(directory: Path) -> None:
    """A replay's trajectory directory: new, or an earlier replay's (replaced)."""
    directory = Path(directory)
    has_parts = any(directory.glob("*/part-*.parquet")) if directory.is_dir() else False
    if has_parts and not (directory / REPLAY_MARK).is_file():
        raise InputError(
            f"{directory}: holds trajectory parts that are not a replay's; not replacing them"
        )
    for d in ("nodes", "summary"):
        shutil.rmtree(directory / d, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / REPLAY_MARK).write_text("{}\n", encoding="utf-8")


async def replay_search(
    theorems: Sequence[Theorem],
    source: RecordedSource,
    cfg: SearchConfig,
    *,
    sampling: SamplingParams,
    seed: int | None,
    value_model: ValueModel | None = None,
    out: Path | None = None,
) -> ReplayRun:
    """Search ``theorems`` with answers from ``source`` (into ``out``'s trajectory parts if given)
    and say where each attempt stopped being exact."""
    inexact_from: dict[tuple[str, int], int] = {}
    unexpanded_at: list[int] = []

    def on_result(r: SearchResult) -> None:
        key = (r.theorem, r.attempt)
        first = []
        hashes = set(source.unexpanded.get(key, ()))
        if hashes and r.tree is not None:
            at = [n.expansion_index for n in r.tree.nodes if n.expanded and n.state_hash in hashes]
            unexpanded_at.extend(at)
            first.extend(at)
        if key in source.assumed and r.proof_expansion is not None:
            first.append(r.proof_expansion)
        if first:
            inexact_from[key] = min(first)

    writer = TrajectoryWriter(out, checkpoint_every=cfg.checkpoint_every) if out else None
    with writer if writer is not None else contextlib.nullcontext():
        results = await search_from_source(
            theorems, source, cfg, sampling=sampling, seed=seed, writer=writer,
            value_model=value_model, on_result=on_result,
        )  # fmt: skip
    return ReplayRun(results, inexact_from, unexpanded_at)


def solved_by_budget(results: Sequence[SearchResult], budgets: Sequence[int]) -> dict[int, int]:
    """Theorems some attempt of which is solved within each budget."""
    return {b: len({r.theorem for r in results if r.solved_within(b)}) for b in budgets}


def _decision_rows(rec_dir: Path) -> list[dict]:
    cols = ["theorem", "attempt", "node_id", "parent_id", "state", "solved", "duplicate_of",
            "depth", "expansion_index", "step", "on_proof_path", "cum_logprob"]  # fmt: skip
    tables = [read_nodes(d).table.select(cols) for d in search_part_dirs(rec_dir)]
    return [r for t in tables for r in t.to_pylist()]


def _energies(
    rows: Sequence[Mapping[str, Any]], value: ValueModel, *, batch: int = 256
) -> dict[tuple[str, str], float]:
    """(state, root state) → energy for every non-root state node that can enter a frontier."""
    roots = {(r["theorem"], r["attempt"]): r["state"] for r in rows if r["parent_id"] is None}
    pairs = list(dict.fromkeys(
        (r["state"], roots[r["theorem"], r["attempt"]]) for r in rows
        if r["parent_id"] is not None and r["state"] is not None and r["duplicate_of"] is None
        and not r["solved"]
    ))  # fmt: skip
    out: dict[tuple[str, str], float] = {}
    for i in range(0, len(pairs), batch):
        chunk = pairs[i : i + batch]
        es = value.energies([s for s, _ in chunk], [g for _, g in chunk])
        out.update({p: float(e) for p, e in zip(chunk, es, strict=True)})
    return out


def decision_priorities(
    rows: Sequence[Mapping[str, Any]], cfg: SearchConfig, value: ValueModel | None,
    weight: Mapping[str, Any] | None = None,
) -> dict[str, Callable[[Mapping[str, Any]], float]]:  # fmt: skip
    """The priorities frontier top-1 is reported for: log-prob alone, and with a value the value
    alone (lower energy first) and the sum at the ``weight`` the search gives it
    (:func:`burnqed.search.value.resolve_energy_weight`; its log-prob weight may be 0)."""

    def logprob(r: Mapping[str, Any]) -> float:
        return logprob_term(r["cum_logprob"], r["depth"], cfg.depth_normalisation)

    out: dict[str, Callable[[Mapping[str, Any]], float]] = {"logprob": logprob}
    if value is None:
        return out
    energy = _energies(rows, value)
    roots = {(r["theorem"], r["attempt"]): r["state"] for r in rows if r["parent_id"] is None}

    def e(r: Mapping[str, Any]) -> float:
        return energy.get((r["state"], roots[r["theorem"], r["attempt"]]), 0.0)

    w = weight or {"value": cfg.energy_weight, "logprob_weight": cfg.logprob_weight}
    a, b = float(w["logprob_weight"]), float(w["value"])
    out["value"] = lambda r: -e(r)
    out["sum"] = lambda r: a * logprob(r) - b * e(r)
    return out


PREDICTION_KEYS = ("gained", "lost", "p_value", "max_gain", "gained_theorems", "lost_theorems")


def replay_table(
    *,
    budgets: Sequence[int],
    searched: ReplayRun,
    coverage: Sequence[Mapping[str, Any]],
    effects: Sequence[Mapping[str, Any]],
    oracle: Mapping[int, int],
    decisions: Sequence[Any],
    names: Sequence[str],
) -> list[dict]:
    """The per-budget rows of the replay block: coverage (:func:`~burnqed.replay.coverage.coverage_rows`)
    and the effect on the covered theorems (:func:`~burnqed.replay.coverage.covered_effect`) beside
    the oracle ceiling, the unexpanded pops and frontier top-1.  ``solved`` and ``recorded_solved``
    count the covered theorems only."""
    rows = []
    for b, cov, eff in zip(budgets, coverage, effects, strict=True):
        rows.append(
            {
                "budget": b,
                "coverage": {k: cov[k] for k in ("attempts", "covered", "coverage")},
                "covered_theorems": eff["theorems"],
                "solved": eff["solved"],
                "recorded_solved": eff["recorded_solved"],
                "prediction": {k: eff[k] for k in PREDICTION_KEYS},
                "uncovered": {**eff["uncovered"], "names": cov["uncovered_theorems"][:20]},
                "oracle_ceiling": oracle[b],
                "unexpanded": sum(i < b for i in searched.unexpanded_at),
                "inexact_attempts": sum(i < b for i in searched.inexact_from.values()),
                "frontier_top1": {n: top1_rate(decisions, n, budget=b) for n in names},
            }
        )
    return rows


def replay_markdown(result: Mapping[str, Any]) -> str:
    """The replay block as a markdown table (what ``burnqed replay`` prints), with what it can say."""
    block = result["replay"]
    names = block["priorities"]

    def rate(x: Mapping[str, Any]) -> str:
        if x["rate"] is None:
            return "–"
        return f"{x['rate']:.3f}" + (f" ± {x['se']:.3f}" if x["se"] is not None else "")

    head = ["budget", "coverage (attempts)", "covered theorems", "recorded", "replay",
            "gained/lost (p)", "can gain ≤", "uncovered apart (recorded solved)", "oracle ceiling",
            "unexpanded", "decisions", *(f"top-1 {n}" for n in names)]  # fmt: skip
    lines = [
        f"# {result['label']} ({block['role']}; {result['status']['label']})",
        "",
        f"priority: {block['priority']['name']}; live: {block['live']}; {ENERGY_NOTE}",
        "",
        f"What it can say: {block['says']}.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in block["by_budget"]:
        top, cov, p, apart = r["frontier_top1"], r["coverage"], r["prediction"], r["uncovered"]
        cells = [r["budget"], f"{cov['covered']}/{cov['attempts']}", r["covered_theorems"],
                 r["recorded_solved"], r["solved"],
                 f"+{p['gained']}/−{p['lost']} ({p['p_value']:.3g})",
                 "–" if p["max_gain"] is None else p["max_gain"],
                 f"{apart['theorems']} ({apart['recorded_solved']})", r["oracle_ceiling"],
                 r["unexpanded"], top[names[0]]["decisions"], *(rate(top[n]) for n in names)]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# The recipe: setup → load_recording → check → replay → score → write


@dataclass(frozen=True)
class Setup:
    """The replay's arguments, checked (nothing read yet)."""

    priority: str  # one of PRIORITIES
    ebm: Path | None  # the value model of priority value
    live: bool  # expand live what the recording never did: an equality check, not a prediction
    model: str | None  # the policy to load (None: the recording's)
    allow_mismatch: frozenset[str]  # burnqed.replay.checks.MISMATCHES the replay may run with
    eval_cfg: EvalConfig
    policy_cfg: PolicyConfig
    search: Mapping[str, Any]  # the search section
    lean: Mapping[str, Any]
    policy: Mapping[str, Any]


def setup(
    *,
    cfg: Mapping[str, Any],
    search: Mapping[str, Any],
    lean: Mapping[str, Any],
    policy: Mapping[str, Any],
    priority_name: str,
    ebm: Path | None,
    live: bool,
    model: str | None,
    allow_mismatch: str | Collection[str] | None,
) -> Setup:
    """Check the arguments: a known priority, a value model where it needs one."""
    if ebm is not None:
        priority_name = "value"
    if priority_name not in PRIORITIES:
        raise InputError(f"priority {priority_name!r}: expected one of {', '.join(PRIORITIES)}")
    if priority_name == "value" and ebm is None:
        raise InputError("priority value needs a value model (--ebm DIR)")
    return Setup(
        priority=priority_name, ebm=None if ebm is None else Path(ebm), live=live,
        model=None if model is None else str(model), allow_mismatch=parse_mismatches(allow_mismatch),
        eval_cfg=EvalConfig.from_dict(cfg), policy_cfg=PolicyConfig.from_dict(policy),
        search=search, lean=lean, policy=policy,
    )  # fmt: skip


@dataclass(frozen=True)
class Loaded:
    """The recording, read: its eval JSON, its answers, and the search a replay of it runs."""

    path: Path  # as given: an eval JSON or a search's trajectory directory
    json: dict | None  # the recorded eval JSON (None: a search's trajectory directory)
    directory: Path  # its trajectories
    rec: Recording
    kind: str  # "eval" or "search": whose sampling a live run of the priority uses
    budgets: list[int]
    pass_n: int
    expected: list[str]  # its theorems
    # The replay's search: the recording's budget and attempts, this config's priority weights
    # (the recording's own for priority recorded).
    search_cfg: SearchConfig

    @property
    def manifest(self) -> dict:
        return self.rec.manifest

    @property
    def label(self) -> str:
        return (self.json or {}).get("label") or self.path.name

    def model(self) -> dict:
        """The recording's model, ``{"path", "sha256"}``: its eval's provenance, else (a search's
        directory) its manifest's path without a digest."""
        recorded = ((self.json or {}).get("provenance") or {}).get("model")
        return dict(recorded) if recorded else {"path": self.manifest.get("model"), "sha256": None}


def load_recording(recording: Path, trajectories: Path | None, s: Setup) -> Loaded:
    """Read the recording (its JSON, trajectories and answers) and derive the replay's search."""
    rec_json, rec_dir = _recording_paths(Path(recording), trajectories)
    rec = Recording.read(rec_dir)
    manifest = rec.manifest
    kind = "eval" if rec_json is not None or manifest.get("kind") == "eval" else "search"
    if rec_json is not None:
        budgets = [int(b) for b in rec_json["budgets"]]
        pass_n = int(rec_json["pass_n"])
        expected = [r["theorem"] for r in rec_json["per_theorem"]]
        search_dict = {
            **search_section(s.eval_cfg, s.search),
            "max_nodes": max(budgets),
            "attempts": pass_n,
        }
    else:
        search_dict = dict(s.search)
        budgets = [int(SearchConfig.from_dict(search_dict).max_nodes)]
        pass_n = int(SearchConfig.from_dict(search_dict).attempts)
        expected = sorted({*rec.roots, *(t for t, _ in rec.start_errors)})
    search_cfg = SearchConfig.from_dict(search_dict)
    recorded_weight = manifest.get("energy_weight") or {}
    if s.priority == "recorded" and recorded_weight.get("value") is not None:
        own = recorded_weight.get("logprob_weight", search_cfg.logprob_weight)
        search_cfg = weighted(
            search_cfg, {"value": recorded_weight["value"], "logprob_weight": own}
        )
    return Loaded(path=Path(recording), json=rec_json, directory=rec_dir, rec=rec, kind=kind,
                  budgets=budgets, pass_n=pass_n, expected=expected, search_cfg=search_cfg)  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """What the replay runs, once the checks passed."""

    what: str  # how refusals and logs name the replay
    run_cfg: SearchConfig  # the replay's search (the oracle's: energy weight 1)
    oracle_cfg: SearchConfig  # on-path states first at energy weight 1, the rest by log-prob
    search_fields: tuple[str, ...]  # the search settings checked against the recording's
    sampling: SamplingParams  # the recording's
    seed: int | None
    theorems: list[Theorem]
    trajectories: Path  # the replay's
    recorded_model: dict  # the recording's {"path", "sha256"}
    model: dict | None  # the policy the replay loads {"path", "sha256"}; None: it loads none
    live_ebm: Path | None  # --live with priority recorded: the recording's value model
    mismatches: dict[str, dict]  # what allow_mismatch let through: both sides


def check(
    s: Setup, r: Loaded, *, out: Path, trajectories: Path | None, what: str
) -> Plan:  # fmt: skip
    """Refuse, in one line, a replay that would not be one of this recording
    (:mod:`burnqed.replay.checks`); else what it runs.  Reads no model and writes nothing."""
    manifest = r.manifest
    recorded_ebm = manifest.get("ebm")
    with_value = s.priority == "value" or (s.priority == "recorded" and bool(recorded_ebm))
    if s.priority == "recorded" and manifest.get("order", "priority") != "priority":
        raise ReplayRefused(
            f"{what}: the recording popped its frontier in {manifest['order']} order (its "
            "manifest's order), which replay does not repeat; replay it under logprob, value or "
            "oracle"
        )
    if s.priority != "oracle":  # the ceiling is the recording's own, whatever it sampled
        check_sampling(
            manifest.get("sampling"),
            intended_sampling(r.kind, eval_cfg=s.eval_cfg, search=r.search_cfg,
                              policy=s.policy_cfg, with_value=with_value),
            what=what,
        )  # fmt: skip
    fields = REPLAYED_SEARCH + (PRIORITY_SEARCH if s.priority == "recorded" else ())
    mismatches = {}
    if (m := check_search(manifest.get("config"), r.search_cfg.to_dict(), fields, what=what,
                          allow="search" in s.allow_mismatch)) is not None:  # fmt: skip
        mismatches["search"] = m
    # Under --live, states the recording never scored get the recording's own value model.
    live_ebm = (
        Path(recorded_ebm)
        if s.live and s.priority == "recorded" and r.rec.has_energies and recorded_ebm
        else None
    )
    model = _model_to_load(s, r, needed=s.live or s.priority == "value" or live_ebm is not None,
                           what=what)  # fmt: skip
    if model is not None and (m := check_model(r.model(), model, what=what,
                                               allow="model" in s.allow_mismatch)):  # fmt: skip
        mismatches["model"] = m
    sampled = manifest["sampling"]
    sampling = SamplingParams(
        n=int(sampled["n"]), temperature=float(sampled["temperature"]),
        top_p=float(sampled["top_p"]), max_new_tokens=int(sampled["max_new_tokens"]), stop=STOP,
    )  # fmt: skip
    oracle_cfg = replace(r.search_cfg, energy_weight=1.0)
    return Plan(
        what=what,
        run_cfg=oracle_cfg if s.priority == "oracle" else r.search_cfg,
        oracle_cfg=oracle_cfg,
        search_fields=fields,
        sampling=sampling,
        seed=sampled.get("seed"),
        theorems=_theorems(manifest, r.expected, needed=s.live),
        trajectories=Path(trajectories) if trajectories else Path(out).with_suffix(""),
        recorded_model=r.model(),
        model=model,
        live_ebm=live_ebm,
        mismatches=mismatches,
    )


def _model_to_load(s: Setup, r: Loaded, *, needed: bool, what: str) -> dict | None:
    """``{"path", "sha256"}`` of the policy the replay loads — ``--model``, else the recording's —
    where it needs one (embeddings for a value model, ``--live`` expansions); None where not."""
    if not needed:
        if s.model is not None:
            log.warning("%s: --model %s not loaded (this replay asks no model)", what, s.model)
        return None
    path = s.model or r.model().get("path") or r.manifest.get("model")
    return {"path": str(path), "sha256": path_digest(path)}


@dataclass(frozen=True)
class Replayed:
    """What the replay found: its search, what answered it, the decisions, the oracle ceiling."""

    run: ReplayRun
    source: dict  # RecordedSource.stats()
    value: dict | None  # the value model's stats (recorded energies, live, missing)
    priorities: list[str]  # the priorities frontier top-1 is reported for
    weight: dict | None  # the weights the search gives the value (None without one)
    decisions: list  # burnqed.replay.decisions.find_decisions on the recording's pops
    oracle: dict[int, int]  # budget → theorems solved by the oracle over the recording's answers


def replay(s: Setup, r: Loaded, p: Plan) -> Replayed:
    """Search the recording's theorems again under the priority (into the replay's trajectory
    directory), judge the recording's own pops (frontier top-1), and find the oracle ceiling."""
    _prepare_out(p.trajectories)
    with contextlib.ExitStack() as stack:
        generator = None
        if p.model is not None:
            from burnqed.policy.backend import open_generator

            generator = stack.enter_context(
                open_generator(s.policy_cfg, p.model["path"], embeddings=s.priority == "value"
                               or p.live_ebm is not None)
            )  # fmt: skip

        async def main() -> tuple[ReplayRun, dict, ValueModel | None]:
            pool_cm: Any = contextlib.nullcontext()
            if s.live:
                from burnqed.lean.pool import LeanPool

                pool_cm = LeanPool(LeanConfig.from_dict(s.lean))
            async with pool_cm as env:
                live_source = LiveSource(generator, env) if s.live else None
                value = _value_model(s.priority, r.rec, s.ebm or p.live_ebm, generator)
                source = RecordedSource(r.rec, live=live_source)
                searched = await replay_search(
                    p.theorems, source, p.run_cfg, sampling=p.sampling, seed=p.seed,
                    value_model=value, out=p.trajectories,
                )  # fmt: skip
                return searched, source.stats(), value

        searched, source_stats, value = asyncio.run(main())
        # Frontier top-1 on the recording's own pops (its decisions); a value model still needs
        # the policy here (its embeddings).
        rows = _decision_rows(r.directory)
        judge = value if s.priority == "value" or isinstance(value, RecordedValue) else None
        weight = None
        if judge is not None:  # the sum at the weights the search gives it (fitted: the pool's)
            weight = resolve_energy_weight(r.search_cfg.energy_weight, value_meta(judge),
                                           logprob_weight=r.search_cfg.logprob_weight)  # fmt: skip
        priorities = decision_priorities(rows, r.search_cfg, judge, weight)
        recorded_depth = (r.manifest.get("config") or {}).get("max_depth", r.search_cfg.max_depth)
        decisions = find_decisions(rows, max_depth=int(recorded_depth), priorities=priorities)

    # The oracle ceiling: the recording's answers ranked by its proof paths (never asks anyone).
    if s.priority == "oracle":
        oracle = solved_by_budget(searched.results, r.budgets)
    else:
        oracle_run = asyncio.run(
            replay_search(p.theorems, RecordedSource(r.rec), p.oracle_cfg,
                          sampling=p.sampling, seed=p.seed, value_model=OracleValue(r.rec))
        )  # fmt: skip
        oracle = solved_by_budget(oracle_run.results, r.budgets)
    return Replayed(run=searched, source=source_stats,
                    value=getattr(value, "stats", lambda: None)(), priorities=list(priorities),
                    weight=weight, decisions=decisions, oracle=oracle)  # fmt: skip


def score(s: Setup, r: Loaded, p: Plan, x: Replayed, *, label: str | None) -> dict:
    """The replay's eval JSON: coverage per budget, the effect on the covered theorems against the
    recording (the uncovered apart), its eval-shaped figures over the theorems covered at the
    largest budget, and its provenance."""
    metrics, coverage, effects = _covered(s, r, p, x)
    live = " live" if s.live else ""
    return {
        "kind": KIND,
        "label": label or f"{r.label}{live} replay ({s.priority})",
        "budget_factor": (r.json or {}).get("budget_factor", 1),
        **metrics,
        "benchmark": (r.json or {}).get("benchmark") or {},
        **({"machine": r.json["machine"]} if r.json and "machine" in r.json else {}),
        "replay": _block(s, p, x, coverage=coverage, effects=effects, budgets=r.budgets),
        "provenance": _provenance(s, r, p),
    }


def _covered(s: Setup, r: Loaded, p: Plan, x: Replayed) -> tuple[dict, list[dict], list[dict]]:
    """(the eval-shaped metrics of the theorems covered at the largest budget, coverage per
    budget, the effect on the covered theorems per budget) — :mod:`burnqed.replay.coverage`."""
    budgets = r.budgets
    scored = dict(expected=r.expected, budgets=budgets, pass_n=r.pass_n)
    replayed = score_trajectories(p.trajectories, **scored)
    recorded = r.json if r.json is not None else score_trajectories(r.directory, **scored)
    attempts = {(res.theorem, res.attempt): res.proof_expansion for res in x.run.results}
    coverage = coverage_rows(attempts, x.run.inexact_from, budgets=budgets)
    effects = [
        covered_effect(recorded, replayed, cov["uncovered_theorems"], budget=b,
                       recording_budget=max(budgets))
        for b, cov in zip(budgets, coverage, strict=True)
    ]  # fmt: skip
    if s.live:  # the bound is a recording-only replay's; a live one can find anything
        effects = [{**e, "max_gain": None} for e in effects]
    uncovered = set(coverage[-1]["uncovered_theorems"])
    if not uncovered:
        return replayed, coverage, effects
    # The scoring below ignores the uncovered theorems' rows (and says so: "not in the benchmark").
    log.info("%s: %d of %d theorems uncovered at %d nodes: counted apart, their rows left out of "
             "the eval-shaped figures", p.what, len(uncovered), len(r.expected), max(budgets))  # fmt: skip
    covered = [t for t in r.expected if t not in uncovered]
    metrics = score_trajectories(p.trajectories, **{**scored, "expected": covered})
    return metrics, coverage, effects


def _block(
    s: Setup, p: Plan, x: Replayed, *, coverage: list[dict], effects: list[dict],
    budgets: Sequence[int],
) -> dict:  # fmt: skip
    """The replay block: what the replay is and can say, its priority, the per-budget table, what
    answered it, and where each attempt stopped being exact."""
    return {
        "role": "equality check" if s.live else ROLES[s.priority],
        "says": LIVE if s.live else BOUND,
        "priority": {
            "name": s.priority,
            "energy_weight": p.run_cfg.energy_weight if s.priority == "oracle" else x.weight,
            "logprob_weight": (x.weight or {}).get("logprob_weight", p.run_cfg.logprob_weight),
            "depth_normalisation": p.run_cfg.depth_normalisation,
        },
        "live": s.live,
        "priorities": x.priorities,
        "energy_note": ENERGY_NOTE,
        "by_budget": replay_table(
            budgets=budgets,
            searched=x.run,
            coverage=coverage,
            effects=effects,
            oracle=x.oracle,
            decisions=x.decisions,
            names=x.priorities,
        ),
        "source": x.source,
        "value": x.value,
        "inexact_attempts": [
            {"theorem": t, "attempt": a, "from_expansion": x.run.inexact_from[t, a]}
            for t, a in sorted(x.run.inexact_from)
        ],
    }


def _provenance(s: Setup, r: Loaded, p: Plan) -> dict:
    """What the replay used — the model it loaded (where it loaded none, the recording's, whose
    answers it replays), its value model, the recording's seeds and sampling, the mismatches
    allowed — and what the recording had."""
    rec_prov = (r.json or {}).get("provenance") or {}
    value_artifact: Any = None
    if s.priority == "value":
        value_artifact = {"path": str(s.ebm), "sha256": path_digest(s.ebm)}
    elif s.priority == "oracle":
        value_artifact = {"path": "oracle: the recorded proof paths", "sha256": None}
    elif s.priority == "recorded":
        value_artifact = rec_prov.get("ebm")
    return {
        "model": p.model or p.recorded_model,
        "model_loaded": p.model,
        "ebm": value_artifact,
        "seeds": rec_prov.get("seeds") or {"seed": p.seed},
        "sampling": r.manifest.get("sampling"),
        "trajectories": str(p.trajectories),
        # What --allow-mismatch let through, both sides (empty: the replay is the recording's).
        "mismatches": p.mismatches,
        "recording": {
            "label": r.label,
            "eval_json": None
            if r.json is None
            else {"path": str(r.path), "sha256": sha256_file(r.path)},
            "trajectories": {"path": str(r.directory), "sha256": path_digest(r.directory)},
            "search_manifest_kind": r.manifest.get("kind"),
            "model": p.recorded_model,
            "search": search_settings(r.manifest.get("config"), p.search_fields),
        },
        "config": {
            "eval": s.eval_cfg.to_dict(),
            "search": p.run_cfg.to_dict(),
            "lean": dict(s.lean),
            "policy": dict(s.policy),
        },
        "git_commit": git_commit(),
        "versions": package_versions(),
    }


def write(result: Mapping[str, Any], r: Loaded, p: Plan, *, out: Path) -> None:
    """The replay's trajectory manifest (a replay can be replayed) and its JSON."""
    model = result["provenance"]["model"]
    (p.trajectories / MANIFEST).write_text(
        json.dumps({"kind": "replay", "sampling": r.manifest.get("sampling"),
                    "config": p.run_cfg.to_dict(), "theorems_file": r.manifest.get("theorems_file"),
                    "model": model.get("path"), "source": result["replay"]["source"]},
                   indent=2, sort_keys=True) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    write_json(Path(out), result)
    log.info("replay %s → %s\n%s", result["label"], out, replay_markdown(result))


def run(
    *,
    recording: Path,
    out: Path,
    cfg: Mapping[str, Any],
    search: Mapping[str, Any],
    lean: Mapping[str, Any],
    policy: Mapping[str, Any],
    priority_name: str = "recorded",
    ebm: Path | None = None,
    live: bool = False,
    model: str | None = None,
    trajectories: Path | None = None,
    recording_trajectories: Path | None = None,
    label: str | None = None,
    allow_mismatch: str | Collection[str] | None = None,
) -> dict:
    """The replay stage (module docstring); returns the JSON written to ``out``.

    ``recording``: a recorded eval's JSON (or a search's trajectory directory);
    ``recording_trajectories`` overrides where its trajectories are; ``trajectories`` is where the
    replay's go (default: beside ``out``, named like it).  ``priority_name`` is one of
    :data:`PRIORITIES` (``value`` needs ``ebm``); ``live`` expands what the recording never did
    with the recording's model (or ``model``, which must be the recording's) and seeds, and asks
    Lean what it never asked; ``allow_mismatch`` (``"model,search"``) lets a replay run with
    another model or search settings than the recording's, recording both.
    """
    s = setup(cfg=cfg, search=search, lean=lean, policy=policy, priority_name=priority_name,
              ebm=ebm, live=live, model=model, allow_mismatch=allow_mismatch)  # fmt: skip
    r = load_recording(recording, recording_trajectories, s)
    p = check(s, r, out=out, trajectories=trajectories,
              what=f"{recording} replayed with priority {s.priority}")  # fmt: skip
    x = replay(s, r, p)
    result = score(s, r, p, x, label=label)
    write(result, r, p, out=out)
    return result


def _value_model(name: str, rec: Recording, ebm: Path | None, generator: Any) -> ValueModel | None:
    if name == "value":
        from burnqed.search.value import load_value_model

        assert ebm is not None
        return load_value_model(Path(ebm), generator)
    if name == "oracle":
        return OracleValue(rec)
    if name == "recorded" and rec.has_energies:
        fallback = None
        if ebm is not None:  # --live: the recording's value model scores what it never did
            from burnqed.search.value import load_value_model

            fallback = load_value_model(Path(ebm), generator)
        return RecordedValue(rec, fallback)
    return None


__all__ = [
    "PRIORITIES",
    "ReplayRefused",
    "ReplayRun",
    "check",
    "check_sampling",
    "find_decisions",
    "intended_sampling",
    "load_recording",
    "replay",
    "replay_markdown",
    "replay_search",
    "run",
    "score",
    "setup",
    "write",
]
