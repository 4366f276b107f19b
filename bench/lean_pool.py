"""Tactic applications per second through LeanPool vs a direct pipe loop on the same REPL.

The workload is fixed: ``--theorems`` propositional theorems ``p0 → … → pk → pk ∧ … ∧ p0`` (k
varies), each proved the way a search would meet it — at every state two wrong candidates (Lean
errors) before the right tactic.  The same requests run

- ``direct``: one REPL process, a synchronous loop (write a line, read a line, ``json.loads``),
  one theorem after another;
- ``pool1c``: a :class:`LeanPool` with 1 worker and ``--concurrency`` sessions at once (guard, goal
  parsing, rendering, bookkeeping included) → ``pool_vs_direct_ratio`` (target ≥ 0.9 per worker);
- ``pool1``: the same pool, one session at a time → ``pool_vs_direct_ratio_single_session``;
- ``pool2``: ``--concurrency`` sessions over 2 workers → ``scaling_2_workers`` (``pool2`` over
  ``pool1c`` throughput; bounded by the machine's cores: the REPLs and this process share them).

The headline ratio uses several sessions on one worker because that is how searches use the pool
(``search.concurrency`` 32 over 6 workers: about 5 sessions per REPL).  Then the client pipelines
their requests and the REPL never waits for Python.  One session alone cannot pipeline — each step
needs the previous reply — so with the propositional REPL, whose tactics take ~0.15 ms, that figure
is bounded by Python's round trip per request; with real Lean (milliseconds to seconds per tactic)
the round trip is noise.  Both are printed so neither is mistaken for the other.

Each figure is the best of ``--repeats`` runs (REPL start-up excluded).  Parameters are printed
first, figures last, one ``name=value`` per line.

Example::

    python bench/lean_pool.py --theorems 60 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from burnqed.config import LeanConfig
from burnqed.lean.client import PIPELINE_DEPTH, repl_argv
from burnqed.lean.pool import LeanPool, TacticSuccess
from burnqed.lean.verify import theorem_file
from burnqed.theorems import Theorem


@dataclass(frozen=True)
class Task:
    theorem: Theorem
    steps: tuple[tuple[str, ...], ...]  # per state: candidates in order, the last one is right


def workload(n: int) -> list[Task]:
    tasks = []
    for i in range(n):
        k = 2 + i % 4
        ps = [f"p{j}" for j in range(k)]
        hs = [f"h{j}" for j in range(k)]
        statement = (
            f"theorem bench{i} ({' '.join(ps)} : Prop) : "
            + " → ".join(ps)
            + " → "
            + " ∧ ".join(reversed(ps))
            + " := by\n"
        )
        steps = [("exact h0", "constructor", "intro " + " ".join(hs))]
        for j in range(k - 1, 0, -1):  # goal p_j ∧ … ∧ p0: split, then close p_j
            steps.append(("left", f"exact h{j}", "constructor"))
            steps.append((f"exact h{(j + 1) % k}", "left", f"exact h{j}"))
        steps.append(("exact h1", "constructor", "exact h0"))  # the last goal, p0
        tasks.append(Task(Theorem(name=f"bench{i}", formal_statement=statement), tuple(steps)))
    return tasks


def count_applications(tasks: list[Task]) -> int:
    return sum(len(c) for t in tasks for c in t.steps)


# --------------------------------------------------------------------------------------------


class DirectLoop:
    """One REPL process driven synchronously: write a line, read a line, ``json.loads``."""

    def __init__(self, cfg: LeanConfig) -> None:
        self.proc = subprocess.Popen(
            repl_argv(cfg), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        if self.stdout.readline().strip() != b"ready.":
            raise SystemExit(f"{repl_argv(cfg)} did not print ready.")
        self.call("options.set", {"timeout": int(cfg.tactic_timeout_s * 1000)})

    def call(self, cmd: str, payload: dict) -> dict:
        self.stdin.write(f"{cmd} {json.dumps(payload, ensure_ascii=False)}\n".encode())
        self.stdin.flush()
        return json.loads(self.stdout.readline())

    def run(self, tasks: list[Task]) -> float:
        """Seconds for the workload (the same requests the pool sends)."""
        t0 = time.perf_counter()
        for task in tasks:
            payload = {
                "file": theorem_file(task.theorem, ["sorry"]),
                "readHeader": False,
                "inheritEnv": False,
                "sorrys": True,
                "typeErrorsAsGoals": False,
                "newConstants": False,
            }
            units = self.call("frontend.process", payload)["units"]
            sid = next(u["goalStateId"] for u in units if "goalStateId" in u)
            ids = [sid]
            for candidates in task.steps:
                for tac in candidates:
                    r = self.call("goal.tactic", {"stateId": sid, "tactic": tac})
                    if "nextStateId" in r:
                        sid = r["nextStateId"]
                        ids.append(sid)
            if not r.get("goals") == []:
                raise SystemExit(f"workload broken: {task.theorem.name} not proved")
            self.call("goal.delete", {"stateIds": ids})
        return time.perf_counter() - t0

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


async def _prove(pool: LeanPool, task: Task) -> bool:
    async with await pool.start(task.theorem) as s:
        state = s.root
        for candidates in task.steps:
            for tac in candidates:
                r = await s.apply(state, tac)
                if isinstance(r, TacticSuccess):
                    state = r.state
        return state.solved


async def run_pool(pool: LeanPool, tasks: list[Task], concurrency: int) -> float:
    """Seconds for the workload through ``pool``, ``concurrency`` sessions at a time."""
    sem = asyncio.Semaphore(concurrency)

    async def one(task: Task) -> bool:
        async with sem:
            return await _prove(pool, task)

    t0 = time.perf_counter()
    solved = await asyncio.gather(*(one(t) for t in tasks))
    elapsed = time.perf_counter() - t0
    if not all(solved):
        raise SystemExit(f"workload broken: {solved.count(False)} theorem(s) not proved")
    return elapsed


async def measure(base: LeanConfig, tasks: list[Task], concurrency: int, repeats: int) -> dict:
    """Best seconds per setting.  The settings take turns in every round, so background load
    hits them alike, and every REPL lives across rounds, so their caches are equally warm."""
    two = LeanConfig.from_dict({**base.to_dict(), "workers": 2})
    direct = DirectLoop(base)
    times: dict[str, list[float]] = {"direct": [], "pool1": [], "pool1c": [], "pool2": []}
    try:
        async with LeanPool(base) as one, LeanPool(two) as both:
            for round_ in range(repeats + 1):  # round 0 warms up and is not counted
                t = {
                    "direct": direct.run(tasks),  # synchronous: the pools sit idle meanwhile
                    "pool1": await run_pool(one, tasks, 1),
                    "pool1c": await run_pool(one, tasks, concurrency),
                    "pool2": await run_pool(both, tasks, concurrency),
                }
                if round_:
                    for k, v in t.items():
                        times[k].append(v)
    finally:
        direct.close()
    return {k: min(v) for k, v in times.items()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--theorems", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--concurrency", type=int, default=8, help="sessions at once (headline and 2-worker runs)"
    )
    ap.add_argument(
        "--repl-command",
        nargs="+",
        default=[sys.executable, "-m", "burnqed.proplogic"],
        help="argv of the REPL (default: burnqed's propositional REPL)",
    )
    args = ap.parse_args(argv)
    base = LeanConfig(
        repl_command=tuple(args.repl_command),
        imports=(),
        workers=1,
        tactic_timeout_s=10.0,
        recycle_after_requests=10**9,
        recycle_after_s=1e9,
        memory_limit_mb=4096,
    )
    tasks = workload(args.theorems)
    n = count_applications(tasks)
    print(f"repl_command={' '.join(args.repl_command)}")
    print(f"theorems={len(tasks)}")
    print(f"tactic_applications={n}")
    print(f"repeats={args.repeats}")
    print(f"concurrency={args.concurrency}")
    print(f"pipeline_depth={PIPELINE_DEPTH}")
    print(f"cpu_count={os.cpu_count()}")

    best = asyncio.run(measure(base, tasks, args.concurrency, args.repeats))
    direct, pool1, pool1c, pool2 = best["direct"], best["pool1"], best["pool1c"], best["pool2"]

    print(f"direct_apps_per_s={n / direct:.1f}")
    print(f"pool_1_worker_single_session_apps_per_s={n / pool1:.1f}")
    print(f"pool_1_worker_apps_per_s={n / pool1c:.1f}")
    print(f"pool_2_workers_apps_per_s={n / pool2:.1f}")
    # Python's round trip per application when one session waits for each reply; with real Lean
    # (ms per tactic) it is what a lone session pays on top of Lean.
    print(f"pool_overhead_us_per_app_single_session={(pool1 - direct) / n * 1e6:.0f}")
    print(f"pool_vs_direct_ratio_single_session={direct / pool1:.3f}")
    print(f"pool_vs_direct_ratio={direct / pool1c:.3f}")  # headline: concurrent sessions, 1 worker
    print(f"scaling_2_workers={pool1c / pool2:.3f}")


if __name__ == "__main__":
    main()
