"""The replay stage: search a recorded eval's trees again under another priority (issue 30 §1-2).

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

A state the recording never expanded is expanded live with the recording's model and seeds under
``live`` (then the replay equals a live eval with that priority), else counted ``unexpanded`` and its
attempt marked inexact.  A recording whose sampling (temperature, candidates, top_p,
max_new_tokens) differs from the sampling of the eval the priority stands for is refused
(:class:`ReplayRefused`, one line naming the field): its answers are not the ones that eval would
get.  Every eval samples at ``eval.temperature`` with ``eval.num_candidates`` (``burnqed.eval.stage``);
a search recording (a pool search) at ``search.temperature``, or ``search.temperature_with_ebm``
with a value model.

The replay's trajectories are scored like an eval's (:func:`burnqed.eval.metrics.score_trajectories`)
into an eval JSON of ``kind: burnqed replay`` with the recording's digests in its provenance and
its model, seed, sampling and machine, so :func:`burnqed.eval.paired.paired_test` (``varies="value
model"``) and ``burnqed compare`` pair it with the recording.  Its ``replay`` block has, per budget:
the replay's and the recording's solved counts, the oracle ceiling, the unexpanded pops and inexact
attempts, and the frontier top-1 (:mod:`burnqed.replay.decisions`) of log-prob alone, the value
alone (the value model's energies, or the recording's own) and their sum at the weights the
search gives the value (``search.energy_weight``: ``fitted`` resolves to the value model's own fit
on the pool's decisions, :func:`burnqed.search.value.resolve_energy_weight`).

Example::

    run(recording=Path("results/iter_0/eval_longer.json"), out=Path("results/iter_0/replay.json"),
        cfg=params["eval"], search=params["search"], lean=params["lean"],
        policy=params["policy"], priority="oracle")
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
from collections.abc import Callable, Mapping, Sequence
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


class ReplayRefused(InputError):
    """The recording cannot stand for the eval the priority means (the message names the field)."""


@dataclass(frozen=True)
class ReplayRun:
    """What one replay search gave, beside its trajectories."""

    results: list[SearchResult]
    # (theorem, attempt) → the first expansion index whose answer was made up (unexpanded, or a
    # verdict assumed): a run with budget b is exact for that attempt iff b <= this
    inexact_from: dict[tuple[str, int], int]
    unexpanded_at: list[int]  # the expansion index of every unexpanded pop


def intended_sampling(
    kind: str,
    *,
    eval_cfg: EvalConfig,
    search: SearchConfig,
    policy: PolicyConfig,
    with_value: bool,
) -> dict[str, tuple[float, str]]:
    """Field → (value, the setting it comes from) of the sampling a live run with the priority uses:
    an eval's (``kind == "eval"``) or a search's."""
    if kind == "eval":
        temp, n = (eval_cfg.temperature, "eval.temperature"), (eval_cfg.num_candidates, "eval.num_candidates")  # fmt: skip
    elif with_value:
        temp = (search.temperature_with_ebm, "search.temperature_with_ebm")
        n = (search.num_candidates, "search.num_candidates")
    else:
        temp, n = (search.temperature, "search.temperature"), (search.num_candidates, "search.num_candidates")  # fmt: skip
    return {
        "temperature": temp,
        "candidates": n,
        "top_p": (policy.top_p, "policy.top_p"),
        "max_new_tokens": (policy.max_new_tokens, "policy.max_new_tokens"),
    }


def check_sampling(
    recorded: Mapping[str, Any] | None, intended: Mapping[str, tuple[float, str]], *, what: str
) -> None:
    """Raise :class:`ReplayRefused`, naming the first field where the recording's sampling (its
    manifest's ``sampling`` block) differs from ``intended``."""
    recorded = recorded or {}
    keys = {"candidates": "n"}
    for name, (want, setting) in intended.items():
        got = recorded.get(keys.get(name, name))
        if got is None or float(got) != float(want):
            raise ReplayRefused(
                f"{what}: the recording sampled with {name} {got}, a live run with this priority "
                f"samples with {name} {want} ({setting}); its answers are not that run's"
            )


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


def replay_table(
    *,
    budgets: Sequence[int],
    replay: ReplayRun,
    recorded_solved: Mapping[int, int | None],
    replay_solved: Mapping[int, int],
    oracle: Mapping[int, int],
    decisions: Sequence[Any],
    names: Sequence[str],
) -> list[dict]:
    """The per-budget rows of the replay block."""
    rows = []
    for b in budgets:
        rows.append(
            {
                "budget": b,
                "solved": replay_solved[b],
                "recorded_solved": recorded_solved.get(b),
                "oracle_ceiling": oracle[b],
                "unexpanded": sum(i < b for i in replay.unexpanded_at),
                "inexact_attempts": sum(i < b for i in replay.inexact_from.values()),
                "frontier_top1": {n: top1_rate(decisions, n, budget=b) for n in names},
            }
        )
    return rows


def replay_markdown(result: Mapping[str, Any]) -> str:
    """The replay block as a markdown table (what ``burnqed replay`` prints)."""
    block = result["replay"]
    names = block["priorities"]

    def rate(x: Mapping[str, Any]) -> str:
        if x["rate"] is None:
            return "–"
        return f"{x['rate']:.3f}" + (f" ± {x['se']:.3f}" if x["se"] is not None else "")

    head = ["budget", "solved", "recorded", "oracle ceiling", "unexpanded", "inexact attempts",
            "decisions", *(f"top-1 {n}" for n in names)]  # fmt: skip
    lines = [
        f"# {result['label']} ({result['status']['label']})",
        "",
        f"priority: {block['priority']['name']}; live: {block['live']}; {ENERGY_NOTE}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in block["by_budget"]:
        top = r["frontier_top1"]
        cells = [r["budget"], r["solved"], "–" if r["recorded_solved"] is None else r["recorded_solved"],
                 r["oracle_ceiling"], r["unexpanded"], r["inexact_attempts"],
                 top[names[0]]["decisions"], *(rate(top[n]) for n in names)]  # fmt: skip
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


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
) -> dict:
    """The replay stage (module docstring); returns the JSON written to ``out``.

    ``recording``: a recorded eval's JSON (or a search's trajectory directory);
    ``recording_trajectories`` overrides where its trajectories are; ``trajectories`` is where the
    replay's go (default: beside ``out``, named like it).  ``priority_name`` is one of
    :data:`PRIORITIES` (``value`` needs ``ebm``); ``live`` expands what the recording never did
    with the recording's model (or ``model``) and seeds, and asks Lean what it never asked.
    """
    if ebm is not None:
        priority_name = "value"
    if priority_name not in PRIORITIES:
        raise InputError(f"priority {priority_name!r}: expected one of {', '.join(PRIORITIES)}")
    if priority_name == "value" and ebm is None:
        raise InputError("priority value needs a value model (--ebm DIR)")
    rec_json, rec_dir = _recording_paths(Path(recording), recording_trajectories)
    rec = Recording.read(rec_dir)
    manifest = rec.manifest
    eval_cfg = EvalConfig.from_dict(cfg)
    policy_cfg = PolicyConfig.from_dict(policy)
    kind = "eval" if rec_json is not None or manifest.get("kind") == "eval" else "search"
    if rec_json is not None:
        budgets = [int(b) for b in rec_json["budgets"]]
        pass_n = int(rec_json["pass_n"])
        expected = [r["theorem"] for r in rec_json["per_theorem"]]
        search_dict = {
            **search_section(eval_cfg, search),
            "max_nodes": max(budgets),
            "attempts": pass_n,
        }
    else:
        search_dict = dict(search)
        budgets = [int(SearchConfig.from_dict(search_dict).max_nodes)]
        pass_n = int(SearchConfig.from_dict(search_dict).attempts)
        expected = sorted({*rec.roots, *(t for t, _ in rec.start_errors)})
    search_cfg = SearchConfig.from_dict(search_dict)
    # The oracle: on-path states first at energy weight 1, the rest in the log-prob's order.
    oracle_cfg = replace(search_cfg, energy_weight=1.0)
    recorded_ebm = manifest.get("ebm")
    recorded_weight = manifest.get("energy_weight") or {}
    if priority_name == "recorded" and recorded_weight.get("value") is not None:
        own = recorded_weight.get("logprob_weight", search_cfg.logprob_weight)
        search_cfg = weighted(
            search_cfg, {"value": recorded_weight["value"], "logprob_weight": own}
        )
    with_value = priority_name == "value" or (priority_name == "recorded" and bool(recorded_ebm))
    what = f"{recording} replayed with priority {priority_name}"
    if priority_name == "recorded" and manifest.get("order", "priority") != "priority":
        raise ReplayRefused(
            f"{what}: the recording popped its frontier in {manifest['order']} order (its "
            "manifest's order), which replay does not repeat; replay it under logprob, value or "
            "oracle"
        )
    if priority_name != "oracle":  # the ceiling is the recording's own, whatever it sampled
        check_sampling(
            manifest.get("sampling"),
            intended_sampling(kind, eval_cfg=eval_cfg, search=search_cfg, policy=policy_cfg,
                              with_value=with_value),
            what=what,
        )  # fmt: skip
    run_cfg = search_cfg
    if priority_name == "oracle":
        run_cfg = oracle_cfg
    sampled = manifest["sampling"]
    sampling = SamplingParams(
        n=int(sampled["n"]), temperature=float(sampled["temperature"]),
        top_p=float(sampled["top_p"]), max_new_tokens=int(sampled["max_new_tokens"]), stop=STOP,
    )  # fmt: skip
    seed = sampled.get("seed")
    theorems = _theorems(manifest, expected, needed=live)
    traj = Path(trajectories) if trajectories else Path(out).with_suffix("")
    _prepare_out(traj)
    model_id = model or manifest.get("model")
    # Under --live, states the recording never scored get the recording's own value model.
    live_ebm = (
        Path(recorded_ebm)
        if live and priority_name == "recorded" and rec.has_energies and recorded_ebm
        else None
    )
    embeddings = priority_name == "value" or live_ebm is not None
    need_policy = live or embeddings

    with contextlib.ExitStack() as stack:
        generator = None
        if need_policy:
            from burnqed.policy.backend import open_generator

            generator = stack.enter_context(
                open_generator(policy_cfg, str(model_id), embeddings=embeddings)
            )

        async def main() -> tuple[ReplayRun, dict, ValueModel | None, Any]:
            pool_cm: Any = contextlib.nullcontext()
            if live:
                from burnqed.lean.pool import LeanPool

                pool_cm = LeanPool(LeanConfig.from_dict(lean))
            async with pool_cm as env:
                live_source = LiveSource(generator, env) if live else None
                value = _value_model(priority_name, rec, ebm or live_ebm, generator)
                source = RecordedSource(rec, live=live_source)
                replay = await replay_search(
                    theorems, source, run_cfg, sampling=sampling, seed=seed, value_model=value,
                    out=traj,
                )  # fmt: skip
                return replay, source.stats(), value, getattr(value, "stats", lambda: None)()

        replay, source_stats, value, value_stats = asyncio.run(main())

        # Frontier top-1 on the recording's own pops (its decisions); a value model still needs
        # the policy here (its embeddings).
        rows = _decision_rows(rec_dir)
        judge = value if priority_name == "value" or isinstance(value, RecordedValue) else None
        weight = None
        if judge is not None:  # the sum at the weights the search gives it (fitted: the pool's)
            weight = resolve_energy_weight(search_cfg.energy_weight, value_meta(judge),
                                           logprob_weight=search_cfg.logprob_weight)  # fmt: skip
        priorities = decision_priorities(rows, search_cfg, judge, weight)
        recorded_depth = (manifest.get("config") or {}).get("max_depth", search_cfg.max_depth)
        decisions = find_decisions(rows, max_depth=int(recorded_depth), priorities=priorities)

    # The oracle ceiling: the recording's answers ranked by its proof paths (never asks anyone).
    if priority_name == "oracle":
        oracle = solved_by_budget(replay.results, budgets)
    else:
        oracle_run = asyncio.run(
            replay_search(theorems, RecordedSource(rec), oracle_cfg,
                          sampling=sampling, seed=seed, value_model=OracleValue(rec))
        )  # fmt: skip
        oracle = solved_by_budget(oracle_run.results, budgets)

    metrics = score_trajectories(traj, expected=expected, budgets=budgets, pass_n=pass_n)
    replay_solved = {b["budget"]: b["solved"] for b in metrics["by_budget"]}
    if rec_json is not None:
        recorded_solved = {b["budget"]: b["solved"] for b in rec_json["by_budget"]}
    else:
        recorded = score_trajectories(rec_dir, expected=expected, budgets=budgets, pass_n=pass_n)
        recorded_solved = {b["budget"]: b["solved"] for b in recorded["by_budget"]}
    inexact = sorted(replay.inexact_from)
    rec_prov = (rec_json or {}).get("provenance") or {}
    rec_label = (rec_json or {}).get("label") or Path(recording).name
    label = label or f"{rec_label} replay ({priority_name})"
    block = {
        "priority": {
            "name": priority_name,
            "energy_weight": run_cfg.energy_weight if priority_name == "oracle" else weight,
            "logprob_weight": (weight or {}).get("logprob_weight", run_cfg.logprob_weight),
            "depth_normalisation": run_cfg.depth_normalisation,
        },
        "live": live,
        "priorities": list(priorities),
        "energy_note": ENERGY_NOTE,
        "by_budget": replay_table(
            budgets=budgets,
            replay=replay,
            recorded_solved=recorded_solved,
            replay_solved=replay_solved,
            oracle=oracle,
            decisions=decisions,
            names=list(priorities),
        ),
        "source": source_stats,
        "value": value_stats,
        "inexact_attempts": [
            {"theorem": t, "attempt": a, "from_expansion": replay.inexact_from[t, a]}
            for t, a in inexact
        ],
    }
    value_artifact: Any = None
    if priority_name == "value":
        value_artifact = {"path": str(ebm), "sha256": path_digest(ebm)}
    elif priority_name == "oracle":
        value_artifact = {"path": "oracle: the recorded proof paths", "sha256": None}
    elif priority_name == "recorded":
        value_artifact = rec_prov.get("ebm")
    result = {
        "kind": KIND,
        "label": label,
        "budget_factor": (rec_json or {}).get("budget_factor", 1),
        **metrics,
        "benchmark": (rec_json or {}).get("benchmark") or {},
        **({"machine": rec_json["machine"]} if rec_json and "machine" in rec_json else {}),
        "replay": block,
        "provenance": {
            # What the answers came from: the recording's model, seeds and sampling.
            "model": rec_prov.get("model") or {"path": manifest.get("model"), "sha256": None},
            "ebm": value_artifact,
            "seeds": rec_prov.get("seeds") or {"seed": seed},
            "sampling": manifest.get("sampling"),
            "trajectories": str(traj),
            "recording": {
                "label": rec_label,
                "eval_json": None
                if rec_json is None
                else {"path": str(recording), "sha256": sha256_file(Path(recording))},
                "trajectories": {"path": str(rec_dir), "sha256": path_digest(rec_dir)},
                "search_manifest_kind": manifest.get("kind"),
            },
            "config": {
                "eval": eval_cfg.to_dict(),
                "search": run_cfg.to_dict(),
                "lean": dict(lean),
                "policy": dict(policy),
            },
            "git_commit": git_commit(),
            "versions": package_versions(),
        },
    }
    (traj / MANIFEST).write_text(
        json.dumps({"kind": "replay", "sampling": manifest.get("sampling"), "config": run_cfg.to_dict(),
                    "theorems_file": manifest.get("theorems_file"), "model": manifest.get("model"),
                    "source": source_stats}, indent=2, sort_keys=True) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    write_json(Path(out), result)
    log.info("replay %s → %s\n%s", label, out, replay_markdown(result))
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
    "check_sampling",
    "find_decisions",
    "intended_sampling",
    "replay_markdown",
    "replay_search",
    "run",
]
