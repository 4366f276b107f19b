"""The search stage: search every (theorem, attempt) of a theorem file into a trajectory directory.

``run`` is what the Snakemake rule's shim and ``burnqed search`` call: it builds the configs, opens
the policy backend (``burnqed.policy.backend.open_generator``), the Lean worker pool
(``burnqed.lean.pool.LeanPool``) and the optional EBM, and hands them to :func:`search_to_dir`, which
owns the output directory: resume, checkpoints, the manifest written last, and SIGTERM (flush the
finished attempts, then raise :class:`SearchTerminated`; the CLI exits 143).

Output (``out/``): ``nodes/part-*.parquet``, ``summary/part-*.parquet`` (burnqed.trajectory) and
``manifest.json`` — counts, solve rate, config, model, provenance — written only when every attempt
is done, so a directory without it is unfinished.

Example::

    run(theorems=Path("data/benchmarks/proplogic_test.jsonl"), model="models/iter_0/merged",
        out=Path("results/iter_0/search"), cfg=params["search"], lean=params["lean"],
        policy=params["policy"])
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import platform
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from burnqed.config import LeanConfig, PolicyConfig, SearchConfig
from burnqed.data.prompt import STOP
from burnqed.policy import SamplingParams, TacticGenerator
from burnqed.search.engine import ProofEnvironment, SearchResult, search_all
from burnqed.search.value import ValueModel
from burnqed.theorems import Theorem, read_theorems
from burnqed.trajectory import TrajectoryWriter, finished_attempts

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


class SearchTerminated(RuntimeError):
    """SIGTERM/SIGINT arrived; finished attempts were flushed.  Exit status 143 by convention."""

    exit_code = 143


def default_expansions_per_step(cfg: SearchConfig) -> int:
    """Nodes each search pops per step: enough that the searches in flight can keep two generation
    batches queued (one running, one filling) — ``ceil(2 · batch_generate_size / concurrency)`` —
    so the generator never waits for Lean.  1 (pure best-first) when concurrency alone suffices."""
    return max(1, math.ceil(2 * cfg.batch_generate_size / max(cfg.concurrency, 1)))


def shard_theorems(theorems: Sequence[Theorem], shard: tuple[int, int] | None) -> list[Theorem]:
    """Shard ``i`` of ``n`` takes every n-th theorem from the i-th (balanced, stable)."""
    if shard is None:
        return list(theorems)
    i, n = shard
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"shard must be (i, n) with 0 <= i < n, got {shard}")
    return list(theorems[i::n])


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _progress(total: int):
    from tqdm import tqdm

    # Quiet when not a TTY (rule logs): the INFO log lines carry the progress there.
    return tqdm(total=total, desc="search", unit="attempt", disable=not sys.stderr.isatty())


async def search_to_dir(
    theorems: Sequence[Theorem],
    generator: TacticGenerator,
    env: ProofEnvironment,
    cfg: SearchConfig,
    out: Path,
    *,
    sampling: SamplingParams,
    value_model: ValueModel | None = None,
    resume: bool = False,
    expansions_per_step: int | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> dict:
    """Search the unfinished attempts of ``theorems`` into ``out``; return the manifest.

    Without ``resume`` the directory must not hold trajectory parts already (nothing written is
    ever overwritten).  The manifest is written last, after every attempt is flushed.
    """
    out = Path(out)
    done: set[tuple[str, int]] = set()
    if resume:
        done, skipped = finished_attempts(out)
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
        "search: %d theorems × %d attempts, %d already finished, %d to do → %s",
        len(theorems),
        cfg.attempts,
        len(theorems) * cfg.attempts - len(todo),
        len(todo),
        out,
    )
    k = expansions_per_step or default_expansions_per_step(cfg)
    meta = {"burnqed.search": json.dumps({**(provenance or {}), "config": cfg.to_dict()})}
    t0 = time.perf_counter()
    counts: Counter[str] = Counter()
    bar = _progress(len(todo))

    def on_result(r: SearchResult) -> None:
        counts[r.status] += 1
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

    try:
        with TrajectoryWriter(out, checkpoint_every=cfg.checkpoint_every, metadata=meta) as writer:
            await search_all(
                theorems,
                generator,
                env,
                cfg,
                sampling=sampling,
                writer=writer,
                value_model=value_model,
                skip=done,
                expansions_per_step=k,
                on_result=on_result,
            )
    finally:
        bar.close()
    total, skipped = finished_attempts(out)
    expected = {(t.key, a) for t in theorems for a in range(cfg.attempts)}
    missing = expected - total
    if missing:
        raise RuntimeError(
            f"{out}: {len(missing)} attempts missing after the run (e.g. {min(missing)})"
        )
    from burnqed.trajectory import read_summary

    summary = read_summary(out).table
    statuses = Counter(summary.column("status").to_pylist())
    manifest = {
        "attempts": summary.num_rows,
        "theorems": len(theorems),
        "statuses": dict(statuses),
        "solve_rate": statuses.get("proved", 0) / max(summary.num_rows, 1),
        "node_rows": sum(summary.column("nodes_total").to_pylist()),
        "expansions_per_step": k,
        "sampling": {
            "n": sampling.n,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_new_tokens": sampling.max_new_tokens,
            "seed": sampling.seed,
        },
        "config": cfg.to_dict(),
        "elapsed_s_this_run": time.perf_counter() - t0,
        "resumed": resume,
        "skipped_parts": skipped,
        **(provenance or {}),
    }
    tmp = out / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, out / MANIFEST)
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
    resume: bool = False,
    seed: int = 0,
    shard: tuple[int, int] | None = None,
    log_dir: Path | None = None,
) -> dict:
    """The search stage (see the module docstring); returns the manifest."""
    search_cfg = SearchConfig.from_dict(cfg)
    lean_cfg = LeanConfig.from_dict(lean)
    policy_cfg = PolicyConfig.from_dict(policy)
    pool_theorems = shard_theorems(list(read_theorems(theorems)), shard)
    if temperature is None:
        temperature = search_cfg.temperature_with_ebm if ebm else search_cfg.temperature
    sampling = SamplingParams(
        n=search_cfg.num_candidates,
        temperature=temperature,
        top_p=policy_cfg.top_p,
        max_new_tokens=policy_cfg.max_new_tokens,
        stop=STOP,
        seed=seed,
    )
    provenance = {
        "theorems_file": str(theorems),
        "model": str(model),
        "ebm": str(ebm) if ebm else None,
        "shard": list(shard) if shard else None,
        "seed": seed,
        "git_commit": _git_commit(),
        "python": platform.python_version(),
        "lean": lean_cfg.to_dict(),
        "policy_backend": policy_cfg.backend,
    }
    Path(out).mkdir(parents=True, exist_ok=True)

    from burnqed.lean.pool import LeanPool
    from burnqed.policy.backend import open_generator

    with open_generator(policy_cfg, str(model)) as generator:
        value_model = None
        if ebm is not None:
            from burnqed.search.value import load_value_model

            value_model = load_value_model(Path(ebm), generator)

        async def main() -> dict:
            pool: AbstractAsyncContextManager = LeanPool(lean_cfg, log_dir=log_dir)
            async with pool as env:
                return await search_to_dir(
                    pool_theorems,
                    generator,
                    env,
                    search_cfg,
                    Path(out),
                    sampling=sampling,
                    value_model=value_model,
                    resume=resume,
                    provenance=provenance,
                )

        return run_until_signalled(main())


def gather_shards(*, shards: Sequence[Path], out: Path) -> dict:
    """Combine the manifests of a sharded search (``…/search/shard_K/manifest.json``) into ``out``:
    totals over the shards plus each shard's own manifest, so one file says how the search went.
    A shard without a manifest is unfinished and is an error naming it."""
    per_shard, statuses = {}, Counter()
    for d in shards:
        path = Path(d) / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"{path}: shard unfinished (no manifest)")
        m = json.loads(path.read_text(encoding="utf-8"))
        per_shard[str(d)] = m
        statuses.update(m["statuses"])
    attempts = sum(m["attempts"] for m in per_shard.values())
    manifest = {
        "shards": sorted(per_shard),
        "attempts": attempts,
        "theorems": sum(m["theorems"] for m in per_shard.values()),
        "statuses": dict(statuses),
        "solve_rate": statuses.get("proved", 0) / max(attempts, 1),
        "node_rows": sum(m["node_rows"] for m in per_shard.values()),
        "per_shard": per_shard,
    }
    out = Path(out)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    log.info(
        "gathered %d shard(s): %s, solve rate %.3f",
        len(shards),
        dict(statuses),
        manifest["solve_rate"],
    )
    return manifest
