"""The search stage: search every (theorem, attempt) of a theorem file into a trajectory directory.

``run`` is what the Snakemake rule's shim and ``burnqed search`` call: it builds the configs, opens
the policy backend (``burnqed.policy.backend.open_generator``), the Lean worker pool
(``burnqed.lean.pool.LeanPool``) and the optional EBM, and hands them to :func:`search_to_dir`, which
owns the output directory: resume, checkpoints, the manifest written last, and SIGTERM (flush the
finished attempts, then raise :class:`SearchTerminated`; the CLI exits 143).

Output (``out/``): ``nodes/part-*.parquet``, ``summary/part-*.parquet`` (burnqed.trajectory) and
``manifest.json`` — counts, solve rate, errors, config, model, provenance, the ``machine`` block
(:func:`burnqed.determinism.machine`) — written only when every attempt has a row, so a directory
without it is unfinished; ``run.json`` holds the job's fingerprint and the kernel level and torch
thread count its attempts ran with: a resume under others is refused with one line naming both.

Infrastructure errors are not results (statuses: :mod:`burnqed.outcomes`).  An attempt with status
``error`` (the REPL kept dying, the policy server stayed down, a start that timed out) is left out of
``solve_rate``, whose denominator is ``results`` (attempts that ran to an outcome, a statement Lean
rejects included: ``statement_error`` is the benchmark row's defect, listed in ``statement_errors``);
the manifest lists the errors apart (``errors``: count, fraction, count per reason class, each
attempt with its reason).  It also counts why the searches ended (``ended_by``), the events the
clock decided (``nondeterministic_events``: 0 in a reproducible run) and the Lean pool's counters
(``lean_pool``: restarts, interrupts, loads, replays, …).
``--resume`` keeps every finished attempt and retries exactly the ``error`` ones (their new rows
supersede the old ones: the rule is in :mod:`burnqed.trajectory`).  When errors exceed
``search.max_error_fraction`` of the attempts, the manifest is written all the same (marked
``error_limit_exceeded``) and :class:`TooManyErrors` is raised: ``burnqed search`` exits 1, the
Snakemake job fails (run it again with ``--resume`` once the infrastructure is fixed; Snakemake
deletes a failed job's output directory unless run with ``--keep-incomplete``).

Example::

    run(theorems=Path("data/benchmarks/proplogic_test.jsonl"), model="models/iter_0/merged",
        out=Path("results/iter_0/search"), cfg=params["search"], lean=params["lean"],
        policy=params["policy"])
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import signal
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Literal

from burnqed.config import SEARCH_ORDERS, InputError, LeanConfig, PolicyConfig, SearchConfig
from burnqed.data.prompt import STOP
from burnqed.isa import pin_in_force
from burnqed.outcomes import nondeterministic_events
from burnqed.policy import SamplingParams, TacticGenerator, salted_seed
from burnqed.progress import Progress
from burnqed.provenance import code_digest, git_commit, launched_modules, lean_project_versions
from burnqed.search.cache import CachedSource, CacheSpec, lean_settings, policy_settings
from burnqed.search.engine import ProofEnvironment, SearchResult, search_from_source
from burnqed.search.sources import AnswerSource, LiveSource
from burnqed.search.value import ValueModel, resolve_energy_weight, value_meta
from burnqed.theorems import Theorem, read_theorems
from burnqed.trajectory import (
    MANIFEST,
    SUMMARY_DIR,
    TrajectoryWriter,
    finished_attempts,
    read_summary,
)

log = logging.getLogger(__name__)


class SearchTerminated(RuntimeError):
    """SIGTERM/SIGINT arrived; finished attempts were flushed.  Exit status 143 by convention."""

    exit_code = 143


class TooManyErrors(RuntimeError):
    """More than ``search.max_error_fraction`` of the attempts ended in an infrastructure error;
    everything finished is kept and the manifest says which attempts failed and why."""

    exit_code = 1


# Attempts listed one by one in the manifest's `errors` (the count per reason class is complete).
MAX_LISTED_ERRORS = 100


def error_report(summary: Any, max_error_fraction: float) -> dict:
    """The manifest's ``errors`` entry for summary rows (an Arrow table of SUMMARY_SCHEMA)."""
    rows = [
        r
        for r in summary.select(["theorem", "attempt", "status", "reasons"]).to_pylist()
        if r["status"] == "error"
    ]
    # The reason class is what precedes the first colon: "start", "ReplError", "HTTPError", ...
    classes = Counter((r["reasons"][0] if r["reasons"] else "?").split(":", 1)[0] for r in rows)
    fraction = len(rows) / max(summary.num_rows, 1)
    return {
        "count": len(rows),
        "fraction": fraction,
        "max_fraction": max_error_fraction,
        "by_reason": dict(classes),
        "attempts": [
            {"theorem": r["theorem"], "attempt": r["attempt"], "reason": "; ".join(r["reasons"])}
            for r in sorted(rows, key=lambda r: (r["theorem"], r["attempt"]))[:MAX_LISTED_ERRORS]
        ],
    }


def shard_theorems(theorems: Sequence[Theorem], shard: tuple[int, int] | None) -> list[Theorem]:
    """Shard ``i`` of ``n`` takes every n-th theorem from the i-th (balanced, stable)."""
    if shard is None:
        return list(theorems)
    i, n = shard
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard}")
    return list(theorems[i::n])


# `theorem <name> … :=` (then `by`, or nothing): the shape the search completes with tactics.  A
# dataset's preamble (docstrings, `def`s, `abbrev`s: Goedel-Prover-V2, PutnamBench) may precede it.
_STATEMENT = re.compile(
    r"(?:\A|\n)\s*(?:(?:private|protected|noncomputable)\s+)*(?:theorem|lemma)\s+[^\s:({\[]+"
    r"[\s\S]*:=\s*(?:by\s*)?\Z"
)


def read_theorem_file(path: Path) -> list[Theorem]:
    """The theorems of ``path``, checked before anything expensive starts: the file exists and
    parses, each statement reads ``theorem <name> … := by`` (after any preamble), no key repeats.  A problem raises
    :class:`~burnqed.config.InputError` (or ``TheoremFileError``) naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: {'not a file' if path.exists() else 'no such theorem file'}")
    try:
        with path.open(encoding="utf-8") as f:  # the lines read_theorems reads, for their numbers
            lines = [n for n, line in enumerate(f, 1) if line.strip()]
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    theorems = list(read_theorems(path))
    if not theorems:
        raise InputError(f"{path}: no theorems in the file")
    first: dict[str, int] = {}
    for lineno, t in zip(lines, theorems, strict=True):
        if not _STATEMENT.search(t.formal_statement):
            raise InputError(
                f"{path}:{lineno}: formal_statement must read `theorem <name> … := by`, got "
                f"{t.formal_statement.strip()[:80]!r}"
            )
        if t.key in first:  # read_theorems qualifies repeated names, so only a repeated key is left
            raise InputError(f"{path}:{lineno}: theorem key {t.key!r} repeats line {first[t.key]}")
        first[t.key] = lineno
    return theorems


def check_out_dir(out: Path, *, resume: bool) -> None:
    """``out`` can take this run's parts: a (creatable, writable) directory, and one without parts
    unless resuming.  Raises :class:`~burnqed.config.InputError` naming it."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(
            f"{out}: exists and is not a directory (--out names a trajectory directory)"
        )
    if not resume and any(any((out / d).glob("part-*.parquet")) for d in ("nodes", SUMMARY_DIR)):
        raise InputError(
            f"{out}: already holds trajectory parts; pass --resume to continue it, or remove it"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{out}: cannot create the output directory ({e.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise InputError(f"{out}: the output directory is not writable")


RUN_RECORD = "run.json"  # the fingerprint of the job that wrote a directory's parts ("auto" resume)


def _listing_digest(path: Path | str | None) -> str | None:
    """Names, sizes and modification times of the files under ``path`` (cheap: no contents read;
    a model or EBM that was rebuilt has new times).  ``None`` for no path, the text for a hub id."""
    if path is None:
        return None
    p = Path(path)
    if not p.exists():
        return str(path)
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file())
    h = hashlib.sha256()
    for f in files:
        st = f.stat()
        h.update(f"{f.relative_to(p.parent)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def job_fingerprint(*, lean: dict, policy: dict, repl_version: str | None, **inputs: Any) -> str:
    """A digest of everything that decides a search's attempts: config sections, sampling, seed,
    shard, the theorem file's bytes, the model and EBM listings, the instruction-set pin's setting
    (``inputs``); the code that makes them (:func:`~burnqed.provenance.code_digest` of this module,
    what it imports and the modules the ``lean``/``policy`` commands launch: ``burnqed.proplogic``);
    the REPL's ``--version`` text and the toolchain and packages (Mathlib) of ``lean.project_path``.
    After an edit of the search code, a new REPL or Mathlib, a rerun redoes the attempts instead of
    keeping them.  The kernel level and thread count in use are kept beside it in the run record
    (:func:`resume_machine`): a resume under other ones is refused, not silently restarted."""
    record = {
        **inputs,
        "lean": lean,
        "policy": policy,
        "code": code_digest(__name__, *launched_modules(lean, policy)),
        "repl_version": repl_version,
        "lean_project": lean_project_versions(lean.get("project_path")),
    }
    return hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()


def resume_machine(machine: Mapping[str, Any]) -> dict[str, Any]:
    """What of the ``machine`` block a resumed search must share with the run it continues: torch's
    kernel level and thread count (both move log-probabilities in their last digits, so one eval's
    attempts would come from two different computations).  Not the CPU model: another CPU at the
    same level computes the same numbers."""
    return {
        "cpu_capability": machine.get("cpu_capability"),
        "torch_threads": machine.get("torch_threads"),
    }


def _read_run_record(out: Path) -> dict:
    with contextlib.suppress(OSError, ValueError):
        record = json.loads((Path(out) / RUN_RECORD).read_text(encoding="utf-8"))
        if isinstance(record, dict):
            return record
    return {}


def _has_parts(out: Path) -> bool:
    return any(any((Path(out) / d).glob("part-*.parquet")) for d in ("nodes", SUMMARY_DIR))


def check_resume_machine(out: Path, machine: Mapping[str, Any] | None) -> None:
    """Refuse (:class:`~burnqed.config.InputError`, one line naming both) to continue the parts of
    ``out`` under another kernel level or thread count than the run that wrote them recorded."""
    if machine is None or not _has_parts(out):
        return
    recorded = _read_run_record(out).get("machine")
    now = resume_machine(machine)
    if recorded is None or recorded == now:
        return

    def text(m: Mapping[str, Any]) -> str:
        return f"cpu_capability {m.get('cpu_capability')}, {m.get('torch_threads')} torch thread(s)"

    raise InputError(
        f"{out}: its finished attempts ran with {text(recorded)}; this run has {text(now)}: "
        "resuming would mix the two in one result — rerun with the same instruction-set pin "
        "(cpu_isa) and thread count, or remove the directory to start afresh"
    )


def write_run_record(out: Path, fingerprint: str | None, machine: Mapping[str, Any] | None) -> None:
    """``out/run.json``: the job's fingerprint and the :func:`resume_machine` part of its machine."""
    record: dict[str, Any] = {"fingerprint": fingerprint}
    if machine is not None:
        record["machine"] = resume_machine(machine)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{RUN_RECORD}.tmp"
    tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
    os.replace(tmp, out / RUN_RECORD)


def prepare_auto_resume(out: Path, fingerprint: str) -> bool:
    """``resume="auto"`` (how the workflow runs searches): continue ``out`` when its parts were
    written by this same job — a pre-empted or killed run — and start it afresh when they were
    written by a different one (a changed knob, model, theorem file, code, pin or REPL reruns the
    job: :func:`job_fingerprint`).  Returns whether to resume.  The record keeps the machine of the
    run whose parts are kept, for :func:`check_resume_machine` once torch runs."""
    out = Path(out)
    has_parts = _has_parts(out)
    before = _read_run_record(out)
    same = before.get("fingerprint") == fingerprint
    if has_parts and not same:
        log.warning("%s: parts from a different job (config, model, theorems, code, pin or REPL "
                    "changed): starting afresh", out)  # fmt: skip
        for d in ("nodes", SUMMARY_DIR):
            shutil.rmtree(out / d, ignore_errors=True)
        (out / MANIFEST).unlink(missing_ok=True)
    # resume_machine() of a resume_machine() block is itself
    write_run_record(out, fingerprint, before.get("machine") if has_parts and same else None)
    if has_parts and same:
        log.info("%s: resuming the parts this job wrote before it was stopped", out)
    return has_parts and same


def _machine() -> dict[str, Any]:
    from burnqed.determinism import machine

    return machine()


def recheck_fraction(value: float | str | None) -> float:
    """``cache_recheck`` as a number in [0, 1] (a rule passes it as a string: Snakemake rounds
    numeric resources); anything else is an :class:`~burnqed.config.InputError` naming it."""
    try:
        fraction = float(value or 0.0)
    except (TypeError, ValueError):
        fraction = float("nan")
    if not 0.0 <= fraction <= 1.0:
        raise InputError(f"cache_recheck: a fraction within [0, 1] expected (got {value!r})")
    return fraction


def recheck_seed(fingerprint: str) -> int:
    """The seed of a search job's re-check draws (:class:`~burnqed.search.cache.CachedSource`):
    from its :func:`job_fingerprint`, so a rerun of the job re-checks the same hits and two jobs
    (an eval and its twin) draw apart.

    >>> recheck_seed("ab" * 32) == recheck_seed("ab" * 32) != recheck_seed("cd" * 32)
    True
    """
    digest = hashlib.blake2b(f"recheck\0{fingerprint}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def check_repl(cfg: LeanConfig) -> str:
    """``lean.repl_command --version`` answers a version burnqed speaks; returns its text."""
    from burnqed.lean.client import read_version
    from burnqed.lean.errors import ReplError

    try:
        return asyncio.run(read_version(cfg)).text
    except (ReplError, OSError) as e:
        text = str(e)
        if "lean.repl_command" not in text:
            text = f"lean.repl_command {list(cfg.repl_command)}: {text}"
        raise InputError(text) from e


def _progress(total: int) -> Progress:
    # A bar on a terminal; in the rule's log a line with the rate and the ETA every 30 s.
    return Progress(log, "search", total=total, unit="attempts")


async def search_to_dir(
    theorems: Sequence[Theorem],
    generator: TacticGenerator,
    env: ProofEnvironment,
    cfg: SearchConfig,
    out: Path,
    *,
    sampling: SamplingParams,
    seed: int | None = 0,
    value_model: ValueModel | None = None,
    resume: bool = False,
    provenance: Mapping[str, Any] | None = None,
    machine: Mapping[str, Any] | None = None,
    cache: CacheSpec | None = None,
    order: str = "priority",
) -> dict:
    """Search the unfinished attempts of ``theorems`` into ``out``; return the manifest.

    Without ``resume`` the directory must not hold trajectory parts already (nothing written is
    ever overwritten).  The manifest is written last, after every attempt is flushed, with the
    ``machine`` block (:func:`burnqed.determinism.machine`; measured here when not given).
    ``cache``: answer through the expansion cache (:mod:`burnqed.search.cache`) — the same
    results, its ``cache`` block in the manifest (null without it).  ``order``: how each search
    pops its frontier (:data:`burnqed.config.SEARCH_ORDERS`), the manifest's ``order``.
    """
    out = Path(out)
    done: set[tuple[str, int]] = set()
    retried = 0
    if resume:
        done, skipped = finished_attempts(out)
        if (out / SUMMARY_DIR).is_dir():
            retried = read_summary(out).table.column("status").to_pylist().count("error")
        if skipped:
            log.warning(
                "resume: %d unreadable part(s) skipped; their attempts are redone", len(skipped)
            )
        (out / MANIFEST).unlink(missing_ok=True)  # unfinished again until this run completes
    elif any(any((out / d).glob("part-*.parquet")) for d in ("nodes", "summary")):
        raise FileExistsError(
            f"{out}: already holds trajectory parts; pass --resume to continue it, or remove it"
        )
    names = [t.key for t in theorems]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise ValueError(f"theorem key {dup!r} occurs more than once in the theorem file")
    todo = [(t.key, a) for t in theorems for a in range(cfg.attempts) if (t.key, a) not in done]
    log.info(
        "search: %d theorems × %d attempts, %d already finished, %d to do (%d errors retried) → %s",
        len(theorems),
        cfg.attempts,
        len(theorems) * cfg.attempts - len(todo),
        len(todo),
        retried,
        out,
    )
    meta = {"burnqed.search": json.dumps({**(provenance or {}), "config": cfg.to_dict()})}
    t0 = time.perf_counter()
    counts: Counter[str] = Counter()
    bar = _progress(len(todo))

    def on_result(r: SearchResult) -> None:
        counts[r.status] += 1
        bar.set_postfix(**counts)
        bar.update(1)
        log.debug(
            "finished %s#%d: %s after %d expansions",
            r.theorem,
            r.attempt,
            r.status,
            r.nodes_expanded,
        )
        finished = sum(counts.values())
        if finished % max(1, len(todo) // 20) == 0 or finished == len(todo):
            log.info("finished %d/%d attempts (%s)", finished, len(todo), dict(counts))

    live = LiveSource(generator, env)
    source: AnswerSource = live if cache is None else cache.open(live)
    try:
        with TrajectoryWriter(
            out,
            checkpoint_every=cfg.checkpoint_every,
            metadata=meta,
            before_checkpoint=source.flush if isinstance(source, CachedSource) else None,
        ) as writer:
            await search_from_source(
                theorems,
                source,
                cfg,
                sampling=sampling,
                seed=seed,
                writer=writer,
                value_model=value_model,
                skip=done,
                on_result=on_result,
                order=order,
            )
    finally:
        bar.close()
        if isinstance(source, CachedSource):  # the answers not yet written, however it ended
            source.close()
    read = read_summary(out)
    summary, skipped = read.table, read.skipped
    expected = {(t.key, a) for t in theorems for a in range(cfg.attempts)}
    missing = expected - set(
        zip(
            summary.column("theorem").to_pylist(),
            summary.column("attempt").to_pylist(),
            strict=True,
        )
    )
    if missing:
        raise RuntimeError(
            f"{out}: {len(missing)} attempts missing after the run (e.g. {min(missing)})"
        )
    statuses = Counter(summary.column("status").to_pylist())
    errors = error_report(summary, cfg.max_error_fraction)
    results = summary.num_rows - errors["count"]
    exceeded = errors["fraction"] > cfg.max_error_fraction
    rows = summary.select(["theorem", "attempt", "status", "wall_timeouts", "reasons"]).to_pylist()
    manifest = {
        "attempts": summary.num_rows,
        "theorems": len(theorems),
        "statuses": dict(statuses),
        "ended_by": dict(Counter(summary.column("ended_by").to_pylist())),
        # Errors are not results: the denominator is the attempts that ran to an outcome.
        "results": results,
        "solve_rate": statuses.get("proved", 0) / results if results else None,
        "errors": errors,
        "error_limit_exceeded": exceeded,
        # Statements Lean rejects: results (unsolved), listed so the benchmark row can be fixed.
        "statement_errors": [
            {"theorem": r["theorem"], "attempt": r["attempt"], "reason": "; ".join(r["reasons"])}
            for r in rows
            if r["status"] == "statement_error"
        ][:MAX_LISTED_ERRORS],
        "nondeterministic_events": nondeterministic_events(rows),
        "lean_pool": env.stats() if callable(getattr(env, "stats", None)) else None,
        # What the expansion cache answered and saved in this run (null: no cache).
        "cache": source.stats() if isinstance(source, CachedSource) else None,
        "node_rows": sum(summary.column("nodes_total").to_pylist()),
        "expansions_per_step": cfg.expansions_per_step,
        # priority (best-first) or random (a seeded random frontier order: the noise search)
        "order": order,
        "sampling": {
            "n": sampling.n,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_new_tokens": sampling.max_new_tokens,
            # every candidate's seed derives from this, the theorem, attempt and state
            "seed": seed,
            "seeds": "per candidate: burnqed.policy.candidate_seeds(seed, theorem key, attempt, "
            "state hash, candidate index)"
            if seed is not None
            else "unseeded",
        },
        "config": cfg.to_dict(),
        "elapsed_s_this_run": time.perf_counter() - t0,
        "resumed": resume,
        "skipped_parts": skipped,
        **(provenance or {}),
        "machine": dict(machine) if machine is not None else _machine(),
    }
    tmp = out / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, out / MANIFEST)
    if errors["count"]:
        log.warning(
            "%d of %d attempts ended in an infrastructure error (%s); `--resume` retries them",
            errors["count"],
            summary.num_rows,
            errors["by_reason"],
        )
    if exceeded:
        raise TooManyErrors(
            f"{out}: {errors['count']} of {summary.num_rows} attempts ended in an infrastructure "
            f"error ({errors['fraction']:.1%} > search.max_error_fraction "
            f"{cfg.max_error_fraction:.1%}; {errors['by_reason']}); finished attempts are kept, "
            "rerun with --resume to retry the errors"
        )
    log.info("search done: %s", dict(statuses))
    return manifest


def run_until_signalled(main: Any) -> Any:
    """Run coroutine ``main``; SIGTERM/SIGINT cancel it (its ``finally`` blocks flush) and raise
    :class:`SearchTerminated`."""
    got: list[int] = []

    async def wrapper() -> Any:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        installed = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, lambda s=sig: (got.append(s), task.cancel()))
                installed.append(sig)
        try:
            return await main
        finally:
            for sig in installed:
                loop.remove_signal_handler(sig)

    try:
        return asyncio.run(wrapper())
    except asyncio.CancelledError:
        if got:
            log.warning("signal %d: finished attempts were flushed; stopping", got[0])
            raise SearchTerminated(f"terminated by signal {got[0]}") from None
        raise


def run(
    *,
    theorems: Path,
    model: Path | str,
    out: Path,
    cfg: dict,
    lean: dict,
    policy: dict,
    ebm: Path | None = None,
    temperature: float | None = None,
    resume: bool | Literal["auto"] = False,
    seed: int = 0,
    seed_salt: str | None = None,
    shard: tuple[int, int] | None = None,
    log_dir: Path | None = None,
    kind: str = "search",
    cache: Path | str | None = None,
    cache_recheck: float | str = 0.0,
    order: str = "priority",
) -> dict:
    """The search stage (see the module docstring); returns the manifest.

    ``cache``: the expansion cache's directory (:mod:`burnqed.search.cache`; None: no cache) — a
    machine setting like the thread count, in no fingerprint: the results are the same with it,
    only the manifest's ``cache`` block and the clock fields differ, and a resume may add or drop
    it.  ``cache_recheck``: the fraction of its Lean hits asked live again (``cache_recheck`` in
    params.yaml, a machine setting too; a string from a rule's resources is read as a number).

    ``kind`` (``search`` | ``eval``) goes into the manifest: an eval's trajectories are benchmark
    proofs, which training stages refuse (:func:`burnqed.ebm.groups.eval_output`).

    ``seed_salt``: a search's own salt (the noise search's, a later iteration's: the rules set it):
    its candidates draw from ``salted_seed(seed, seed_salt)``
    (:func:`burnqed.policy.salted_seed`), recorded as the manifest's ``sampling.seed`` beside
    ``seed`` and ``seed_salt``; None (evals) draws from ``seed`` itself.

    ``order``: ``priority`` (best-first by :func:`burnqed.search.value.priority`) or ``random``
    (a seeded random frontier order, :func:`burnqed.search.engine.random_key`: the noise search's
    ``search.noise_order``, whose decisions favour no priority — what the value model's weight is
    fitted and judged on, :mod:`burnqed.ebm.fit`).

    ``resume="auto"`` (the workflow's rules) resumes parts written by this same job and discards
    parts written by a different one (:func:`prepare_auto_resume`), so re-running the same
    ``snakemake`` command after a kill finishes the search without redoing finished attempts.

    The theorem file, the output directory and the REPL (``--version``) are checked first, then
    the model directory (:func:`~burnqed.policy.backend.open_generator`), before any weights load
    or server starts: bad input raises :class:`~burnqed.config.InputError` naming it."""
    search_cfg = SearchConfig.from_dict(cfg)
    lean_cfg = LeanConfig.from_dict(lean)
    policy_cfg = PolicyConfig.from_dict(policy)
    # Inputs first, in milliseconds: a typo must not wait for a 7B load or a server launch.
    if order not in SEARCH_ORDERS:
        raise InputError(f"search order must be one of {', '.join(SEARCH_ORDERS)} (got {order!r})")
    if order == "random" and ebm is not None:
        raise InputError(f"{ebm}: a random-order search pops no value model's choice; pass no EBM")
    recheck = recheck_fraction(cache_recheck)
    pool_theorems = shard_theorems(read_theorem_file(Path(theorems)), shard)
    if temperature is None:
        temperature = search_cfg.temperature_with_ebm if ebm else search_cfg.temperature
    check_out_dir(Path(out), resume=resume is not False)
    repl_version = check_repl(lean_cfg)
    fingerprint = job_fingerprint(  # after the REPL check: its version is part of it
        search=search_cfg.to_dict(),
        lean=lean_cfg.to_dict(),
        policy=policy_cfg.to_dict(),
        repl_version=repl_version,
        temperature=temperature,
        seed=seed,
        seed_salt=seed_salt,
        order=order,
        shard=shard,
        theorems=hashlib.sha256(Path(theorems).read_bytes()).hexdigest(),
        model=_listing_digest(model),
        ebm=_listing_digest(ebm),
        cpu_isa=pin_in_force(),
    )
    if resume == "auto":
        resume = prepare_auto_resume(Path(out), fingerprint)
    sampling = SamplingParams(
        n=search_cfg.num_candidates,
        temperature=temperature,
        top_p=policy_cfg.top_p,
        max_new_tokens=policy_cfg.max_new_tokens,
        stop=STOP,
    )
    provenance = {
        "kind": kind,
        "theorems_file": str(theorems),
        "model": str(model),
        "ebm": str(ebm) if ebm else None,
        "shard": list(shard) if shard else None,
        "seed": seed,
        "seed_salt": seed_salt,  # sampling.seed = burnqed.policy.salted_seed(seed, seed_salt)
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "lean": lean_cfg.to_dict(),
        "repl_version": repl_version,
        "policy_backend": policy_cfg.backend,
    }
    from burnqed.lean.pool import LeanPool
    from burnqed.policy.backend import open_generator

    # With an EBM the backend must also embed (an HTTP backend starts its embedding server).
    with open_generator(policy_cfg, str(model), embeddings=ebm is not None) as generator:
        # Kernel level, threads and pin (torch is imported by now, and a broken model directory
        # has failed without it): in the manifest, and a resume must share the first two.
        machine = _machine()
        if resume:
            check_resume_machine(Path(out), machine)
        write_run_record(Path(out), fingerprint, machine)
        value_model = None
        if ebm is not None:
            from burnqed.search.value import load_value_model

            value_model = load_value_model(Path(ebm), generator)
            # The weights this search gives the energy and the log-prob (energy_weight: fitted or
            # a number).
            provenance["energy_weight"] = resolve_energy_weight(
                search_cfg.energy_weight, value_meta(value_model),
                logprob_weight=search_cfg.logprob_weight,
            )  # fmt: skip
        policy_key = policy_settings(generator, policy_cfg) if cache is not None else None

        async def main() -> dict:
            pool: AbstractAsyncContextManager = LeanPool(lean_cfg, log_dir=log_dir)
            async with pool as env:
                spec = None
                if cache is not None:
                    # The Lean key where the pool's REPL runs (a wrapper may `lake env` elsewhere),
                    # its .olean files read off the event loop; the re-check draws seeded by the job.
                    where = getattr(env, "repl_process", None)  # a LeanPool's; a fake has none
                    lean_key = await asyncio.to_thread(
                        lean_settings, lean_cfg, repl_version,
                        running=where() if callable(where) else None,
                    )  # fmt: skip
                    spec = CacheSpec(
                        Path(cache),
                        policy=policy_key,
                        lean=lean_key,
                        recheck=recheck,
                        recheck_seed=recheck_seed(fingerprint),
                        tactic_timeout_s=lean_cfg.tactic_timeout_s,
                    )
                try:
                    return await search_to_dir(
                        pool_theorems,
                        generator,
                        env,
                        search_cfg,
                        Path(out),
                        sampling=sampling,
                        seed=salted_seed(seed, seed_salt),
                        value_model=value_model,
                        resume=resume,
                        provenance=provenance,
                        machine=machine,
                        cache=spec,
                        order=order,
                    )
                finally:  # restarts, replays and moves: where the Lean time went
                    log.info("Lean pool: %s", env.stats())

        return run_until_signalled(main())


def _common(values: Sequence[Any]) -> Any:
    """The one value all of ``values`` share, else None."""
    first = values[0] if values else None
    return first if all(v == first for v in values) else None


def gather_shards(*, shards: Sequence[Path], out: Path) -> dict:
    """Combine the manifests of a sharded search (``…/search/shard_K/manifest.json``) into ``out``:
    totals over the shards plus each shard's own manifest, so one file says how the search went.
    A shard without a manifest is unfinished and is an error naming it."""
    per_shard, statuses, by_reason = {}, Counter(), Counter()
    for d in shards:
        path = Path(d) / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"{path}: shard unfinished (no manifest)")
        m = json.loads(path.read_text(encoding="utf-8"))
        if m.get("error_limit_exceeded"):
            raise RuntimeError(
                f"{path}: too many infrastructure errors ({m['errors']['count']} of "
                f"{m['attempts']} attempts); resume the shard before gathering"
            )
        per_shard[str(d)] = m
        statuses.update(m["statuses"])
        by_reason.update((m.get("errors") or {}).get("by_reason", {}))
    attempts = sum(m["attempts"] for m in per_shard.values())
    n_errors = statuses.get("error", 0)
    results = attempts - n_errors
    manifest = {
        "shards": sorted(per_shard),
        "attempts": attempts,
        "theorems": sum(m["theorems"] for m in per_shard.values()),
        "statuses": dict(statuses),
        # Errors are not results (see the module docstring): they are counted apart.
        "results": results,
        "solve_rate": statuses.get("proved", 0) / results if results else None,
        "errors": {"count": n_errors, "by_reason": dict(by_reason)},
        "node_rows": sum(m["node_rows"] for m in per_shard.values()),
        # The shards' common machine block; null when they ran on different ones (each shard's
        # manifest under per_shard keeps its own).
        "machine": _common([m.get("machine") for m in per_shard.values()]),
        "per_shard": per_shard,
    }
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    log.info(
        "gathered %d shard(s): %s, solve rate %s (%d errors apart)",
        len(shards),
        dict(statuses),
        "n/a" if results == 0 else f"{manifest['solve_rate']:.3f}",
        n_errors,
    )
    return manifest
