"""Tactic applications per second through LeanPool vs a direct pipe loop on the same REPL.

The workload is fixed: ``--theorems`` propositional theorems ``p0 → … → pk → pk ∧ … ∧ p0`` (k
varies), each proved the way a search would meet it — at every state two wrong candidates (Lean
errors) before the right tactic.  The same requests — the same text: every tactic under the
per-tactic heartbeat wrapper ``set_option maxHeartbeats N in`` (``lean.tactic_heartbeats``),
``goal.delete`` at the end; no ``goal.save`` on either side (``lean.save_factor`` null: whether a
save pays is a question of its cost, measured below and weighed in ``bench/search.py``) — run

- ``direct``: one REPL process, a synchronous loop (write a line, read a line, ``json.loads``),
  one theorem after another — one request in flight;
- ``direct_pipelined``: the same raw loop, but ``--concurrency`` theorems interleaved and up to
  ``min(--concurrency, PIPELINE_DEPTH)`` requests written ahead of their replies — exactly the
  number the pool keeps in flight with that many sessions on one worker;
- ``pool1c``: a :class:`LeanPool` with 1 worker and ``--concurrency`` sessions at once (guard, goal
  parsing, rendering, bookkeeping included);
- ``pool1``: the same pool, one session at a time;
- ``pool2``: ``--concurrency`` sessions over 2 workers → ``scaling_2_workers`` (``pool2`` over
  ``pool1c`` throughput; bounded by the machine's cores: the REPLs and this process share them).

So the ratios measure the pool, not the REPL's parsing.  The two headline ratios (target ≥ 0.9 on
an otherwise idle machine — load average below 0.5, printed first and last — where the
propositional REPL answers a tactic in ~0.15 ms, so Python's cost per request is what they show):

- ``pool_vs_direct_pipelined_ratio`` = ``direct_pipelined`` / ``pool1c`` time: several sessions on
  one worker — how searches use the pool (``search.concurrency`` 32 over 6 workers, ~5 sessions
  per REPL) — against a raw loop with the same requests in flight;
- ``pool_vs_direct_ratio_single_session`` = ``direct`` / ``pool1``: one request in flight on both
  sides.  With the propositional REPL, whose tactics take ~0.15 ms, it is bounded by Python's
  round trip per request; with real Lean (milliseconds to seconds per tactic) that is noise.

``pool_vs_direct_unpipelined_ratio`` (``direct`` / ``pool1c``) is printed as an extra figure only:
it credits the pool with pipelining that the unpipelined loop does not do.

What a state's ``goal.save`` and ``goal.load`` cost on the stand-in, next to a tactic, one request
in flight over the direct pipe (median over the workload's states; ``bench/search.py`` takes the
ratios as its save and load costs): ``tactic_us_per_call``, ``save_us_per_state``,
``load_us_per_state``.

Each figure is the best of ``--repeats`` runs (REPL start-up excluded).

Prints (parameters first; these figures last, one ``name=value`` a line):

- ``load_average_1min_before``: load average before the runs (the ratios need an idle machine)
- ``direct_apps_per_s``: tactic applications per second, ``direct``
- ``direct_pipelined_apps_per_s``: the same, ``direct_pipelined``
- ``pool_1_worker_single_session_apps_per_s``: the same, ``pool1``
- ``pool_1_worker_apps_per_s``: the same, ``pool1c``
- ``pool_2_workers_apps_per_s``: the same, ``pool2``
- ``pool_overhead_us_per_app_single_session``: (``pool1`` − ``direct``) time per application, µs
- ``pool_overhead_us_per_app_pipelined``: (``pool1c`` − ``direct_pipelined``) time per application, µs
- ``pool_vs_direct_unpipelined_ratio``: ``direct`` / ``pool1c`` time (extra, not like for like)
- ``scaling_2_workers``: ``pool1c`` / ``pool2`` time
- ``tactic_us_per_call``: a tactic's time per call over the direct pipe, µs
- ``save_us_per_state``: ``goal.save`` per state, µs
- ``load_us_per_state``: ``goal.load`` per state, µs
- ``save_vs_tactic``: save over tactic time
- ``load_vs_tactic``: load over tactic time
- ``load_average_1min_after``: load average after the runs
- ``pool_vs_direct_ratio_single_session``: ``direct`` / ``pool1`` time
- ``pool_vs_direct_pipelined_ratio``: ``direct_pipelined`` / ``pool1c`` time

Example::

    python bench/lean_pool.py --theorems 60 --repeats 3
    python bench/lean_pool.py --smoke        # tiny sizes, seconds
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

from burnqed.config import LeanConfig
from burnqed.lean.client import PIPELINE_DEPTH, repl_argv, with_heartbeats
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

    def __init__(self, cfg: LeanConfig, save_dir: Path) -> None:
        self.cfg = cfg
        self.save_dir = save_dir
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

    def run(self, tasks: list[Task], *, concurrency: int = 1, depth: int = 1) -> float:
        """Seconds for the workload (the same requests the pool sends): ``concurrency`` theorems
        interleaved, up to ``depth`` requests written ahead of their replies (1, 1: one at a time)."""
        todo = iter(tasks)
        ready: deque[tuple[Generator, tuple[str, dict]]] = deque()  # each theorem's next request
        inflight: deque[Generator] = deque()  # written, reply unread (the REPL answers in order)

        def start() -> None:
            task = next(todo, None)
            if task is not None:
                gen = _requests(task, self.cfg)
                ready.append((gen, next(gen)))

        t0 = time.perf_counter()
        for _ in range(concurrency):
            start()
        while ready or inflight:
            while ready and len(inflight) < depth:
                gen, (cmd, payload) = ready.popleft()
                self.stdin.write(f"{cmd} {json.dumps(payload, ensure_ascii=False)}\n".encode())
                inflight.append(gen)
            self.stdin.flush()
            gen = inflight.popleft()
            reply = json.loads(self.stdout.readline())
            try:
                ready.append((gen, gen.send(reply)))
            except StopIteration:
                start()
        return time.perf_counter() - t0

    def save_load_costs(self, tasks: list[Task]) -> tuple[float, float, float]:
        """Median seconds of a goal.tactic, a goal.save and a goal.load round trip on the
        workload's states (one request in flight)."""
        tactic, save, load = [], [], []

        def timed(cmd: str, payload: dict, into: list[float]) -> dict:
            t0 = time.perf_counter()
            reply = self.call(cmd, payload)
            into.append(time.perf_counter() - t0)
            return reply

        for i, task in enumerate(tasks):
            units = self.call("frontend.process", _start_payload(task))["units"]
            sid = next(u["goalStateId"] for u in units if "goalStateId" in u)
            ids = [sid]
            for j, candidates in enumerate(task.steps):
                text = with_heartbeats(candidates[-1], self.cfg.tactic_heartbeats)
                r = timed("goal.tactic", {"stateId": sid, "tactic": text}, tactic)
                sid = r["nextStateId"]
                path = str(self.save_dir / f"m{i}-{j}")
                assert timed("goal.save", {"id": sid, "path": path}, save) == {}
                ids += [sid, timed("goal.load", {"path": path}, load)["id"]]
            self.call("goal.delete", {"stateIds": ids})
        return statistics.median(tactic), statistics.median(save), statistics.median(load)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _start_payload(task: Task) -> dict:
    return {
        "file": theorem_file(task.theorem, ["sorry"]),
        "readHeader": False,
        "inheritEnv": False,
        "sorrys": True,
        "typeErrorsAsGoals": False,
        "newConstants": False,
    }


def _requests(task: Task, cfg: LeanConfig) -> Generator[tuple[str, dict], dict, None]:
    """The requests the pool sends for one theorem, each after the previous one's reply
    (``send``): the start, every candidate under the heartbeat wrapper, ``goal.delete`` at the
    end."""
    units = (yield ("frontend.process", _start_payload(task)))["units"]
    sid = next(u["goalStateId"] for u in units if "goalStateId" in u)
    ids, r = [sid], {}
    for candidates in task.steps:
        for tac in candidates:
            text = with_heartbeats(tac, cfg.tactic_heartbeats)
            r = yield ("goal.tactic", {"stateId": sid, "tactic": text})
            if "nextStateId" in r:
                sid = r["nextStateId"]
                ids.append(sid)
    if r.get("goals") != []:
        raise SystemExit(f"workload broken: {task.theorem.name} not proved")
    yield ("goal.delete", {"stateIds": ids})


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


async def measure(
    base: LeanConfig, tasks: list[Task], concurrency: int, repeats: int, save_dir: Path
) -> tuple[dict, tuple[float, float, float]]:
    """Best seconds per setting, and the save/load costs.  The settings take turns in every
    round, so background load hits them alike, and every REPL lives across rounds, so their
    caches are equally warm."""
    two = LeanConfig.from_dict({**base.to_dict(), "workers": 2})
    direct = DirectLoop(base, save_dir)
    depth = min(concurrency, PIPELINE_DEPTH)  # what the pool's client keeps in flight
    times: dict[str, list[float]] = {
        k: [] for k in ("direct", "direct_pipelined", "pool1", "pool1c", "pool2")
    }
    try:
        async with LeanPool(base) as one, LeanPool(two) as both:
            for round_ in range(repeats + 1):  # round 0 warms up and is not counted
                t = {
                    "direct": direct.run(tasks),  # synchronous: the pools sit idle meanwhile
                    "direct_pipelined": direct.run(tasks, concurrency=concurrency, depth=depth),
                    "pool1": await run_pool(one, tasks, 1),
                    "pool1c": await run_pool(one, tasks, concurrency),
                    "pool2": await run_pool(both, tasks, concurrency),
                }
                if round_:
                    for k, v in t.items():
                        times[k].append(v)
        costs = direct.save_load_costs(tasks)
    finally:
        direct.close()
    return {k: min(v) for k, v in times.items()}, costs


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
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: runs in seconds")
    args = ap.parse_args(argv)
    if args.smoke:
        args.theorems, args.repeats, args.concurrency = 8, 1, 4
    shipped = LeanConfig()
    base = LeanConfig(
        repl_command=tuple(args.repl_command),
        imports=(),
        workers=1,
        tactic_timeout_s=10.0,
        recycle_after_requests=10**9,
        recycle_after_s=1e9,
        memory_limit_mb=4096,
        save_factor=None,  # no goal.save on either side: its cost is measured on its own
    )
    tasks = workload(args.theorems)
    n = count_applications(tasks)
    print(f"load_average_1min_before={os.getloadavg()[0]:.2f}  # target figures need < 0.5")
    print(f"repl_command={' '.join(args.repl_command)}")
    print(f"theorems={len(tasks)}")
    print(f"tactic_applications={n}")
    print(f"repeats={args.repeats}")
    print(f"concurrency={args.concurrency}")
    print(f"pipeline_depth={PIPELINE_DEPTH}")
    print(f"direct_pipelined_in_flight={min(args.concurrency, PIPELINE_DEPTH)}")
    print(f"tactic_heartbeats={base.tactic_heartbeats}  # the wrapper on every tactic, both sides")
    print(f"save_factor={base.save_factor}  # no goal.save during the runs, either side")
    print(f"spares={shipped.spares} verifiers={shipped.verifiers}  # idle during the runs")
    print(f"cpu_count={os.cpu_count()}", flush=True)

    with tempfile.TemporaryDirectory(prefix="burnqed-bench-") as d:
        best, (tactic_s, save_s, load_s) = asyncio.run(
            measure(base, tasks, args.concurrency, args.repeats, Path(d))
        )
    direct, piped = best["direct"], best["direct_pipelined"]
    pool1, pool1c, pool2 = best["pool1"], best["pool1c"], best["pool2"]

    print(f"direct_apps_per_s={n / direct:.1f}")
    print(f"direct_pipelined_apps_per_s={n / piped:.1f}")
    print(f"pool_1_worker_single_session_apps_per_s={n / pool1:.1f}")
    print(f"pool_1_worker_apps_per_s={n / pool1c:.1f}")
    print(f"pool_2_workers_apps_per_s={n / pool2:.1f}")
    # Python's round trip per application when one session waits for each reply; with real Lean
    # (ms per tactic) it is what a lone session pays on top of Lean.
    print(f"pool_overhead_us_per_app_single_session={(pool1 - direct) / n * 1e6:.0f}")
    print(f"pool_overhead_us_per_app_pipelined={(pool1c - piped) / n * 1e6:.0f}")
    print(f"pool_vs_direct_unpipelined_ratio={direct / pool1c:.3f}")  # extra: not like for like
    print(f"scaling_2_workers={pool1c / pool2:.3f}")
    print(f"tactic_us_per_call={tactic_s * 1e6:.0f}")
    print(f"save_us_per_state={save_s * 1e6:.0f}")
    print(f"load_us_per_state={load_s * 1e6:.0f}")
    print(f"save_vs_tactic={save_s / tactic_s:.2f}")
    print(f"load_vs_tactic={load_s / tactic_s:.2f}")
    print(f"load_average_1min_after={os.getloadavg()[0]:.2f}")
    # Headlines, like for like: the same requests in flight on both sides.
    print(f"pool_vs_direct_ratio_single_session={direct / pool1:.3f}")
    print(f"pool_vs_direct_pipelined_ratio={piped / pool1c:.3f}")


if __name__ == "__main__":
    main()
