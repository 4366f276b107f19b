"""Search-engine throughput and trajectory-writing cost, with simulated backends (no GPU, no Lean).

Workload: synthetic theorems whose proof trees are fixed by hashing (each tactic fails, repeats a
state, opens a new state or closes the proof with fixed probabilities), searched by the real engine
(``burnqed.search.search_all``) with the shipped defaults for concurrency, batch size, candidates,
Lean workers, tactic timeout and node budget.  Simulated costs, all multiplied by ``--scale`` (a
time factor that keeps the run to a few minutes on 2 cores; every cost shrinks alike, so the shape
and the ratios hold):

- generation: a call of ``n`` prompts takes ``a + b·n`` seconds, one call at a time (one GPU);
- Lean: each tactic call runs on the worker its session is pinned to, one call at a time per
  worker (a REPL is single-threaded), for a **heavy-tailed** time: log-normal with median
  ``--lean-median`` and 99th percentile ``--lean-p99`` (σ = ln(p99/median)/2.326), and with
  probability ``--lean-hang`` a call that runs until the tactic timeout (``lean.tactic_timeout_s``;
  real Lean has tactics that loop).  A draw above the timeout is a timeout too.  At the timeout the
  client kills the REPL, as ``burnqed.lean.pool`` does: every call queued behind the hung one
  (head-of-line blocking for every session pinned there) fails unrun and is retried, the worker is
  down for ``--repl-start`` seconds while a new process starts, and its sessions' states are void:
  each session replays, on first use of each state, the tactic path the new process lacks (start +
  one call per step not yet rebuilt).  Sessions are placed and moved as the pool places them: a
  new one on the live worker with the fewest sessions (then the fewest calls under way), and one
  whose states are void moves when that evens the load;
- ``verify`` is a fresh-process whole-file check: ``--repl-start`` seconds to start a REPL plus
  the proof's tactics, one verification at a time (the pool's verification slot).

Figures (parameters first, then one ``name=value`` per line):

- ``ideal_bound_fraction``: the ideal time over the measured time.  **The ideal (frozen before
  any change to the Lean layer's restart, spare, restore or verification policy):**

      max(generation busy time, (the Lean time of first-time tactic calls + verification) / workers)

  — restarts, replays, loads and waits are losses the design can avoid, never part of the ideal.
  Generation busy time is the summed time of the generation calls the run made (``a + b·n`` each).
  A first-time tactic call is each tactic application the search asks for, once (not a retry of a
  call killed unrun, not a replay); its Lean time is its drawn time, at most the in-REPL timeout
  (a hang costs the timeout, however the pool then handles it).  Verification is the Lean time of
  checking each found proof's file (its tactics re-run), not the start of the process that checks
  it.  A session's start (the statement's elaboration) counts as its first call.  Target ≥ 0.93
  (aim 0.95).
- ``speedup_vs_sequential``: expansions per second over one-request-at-a-time search (concurrency 1,
  batches of 1, one Lean worker) on the first ``--sequential-theorems`` of the same theorems, same
  latency draws.  Target ≥ 5.
- ``overhead_expansions_per_s``: expansions per second with zero-latency backends (pure engine
  overhead).  Target ≥ 2,000 on 2 cores.
- ``write_1m_rows_s``: seconds spent in ``TrajectoryWriter.add`` + ``checkpoint`` for 1M node rows
  of distinct trees (every attempt its own states, 200–700 characters like miniF2F goals), in
  checkpoints of 10K rows (the trees are built outside the timed region).
- ``checkpoint_growth_ratio``: the cost of one 10K-row checkpoint written after 1M rows (median of
  the last 5) over one written after 10K rows (median over 5 fresh directories).  Target ≤ 1.5
  (append-only parts: a checkpoint must not grow with what is already written).

Run::

    python bench/search.py            # a few minutes on 2 cores
    python bench/search.py --quick    # smaller workload, for a smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist

from burnqed.config import LeanConfig, SearchConfig
from burnqed.lean.pool import TacticFailure, Verdict
from burnqed.policy import Candidate, SamplingParams, dedup_candidates
from burnqed.search import search_all
from burnqed.search.tree import SearchTree
from burnqed.theorems import Theorem
from burnqed.trajectory import TrajectoryWriter


def _u(*parts: object) -> float:
    """A uniform number in [0, 1) fixed by ``parts``."""
    d = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(d, "big") / 2**64


# ---- simulated Lean ------------------------------------------------------------------------


@dataclass(frozen=True)
class Latency:
    """Lean's time per tactic call: log-normal body, a fraction of hangs, the tactic timeout."""

    median_s: float
    p99_s: float
    hang: float  # probability that a call runs until the timeout
    timeout_s: float

    @property
    def sigma(self) -> float:
        return math.log(self.p99_s / self.median_s) / NormalDist().inv_cdf(0.99)

    def draw(self, *key: object) -> float:
        """The time of the call named by ``key`` (deterministic); ``timeout_s`` if it times out."""
        if _u(*key, "hang") < self.hang:
            return self.timeout_s
        return self.body(*key)

    def body(self, *key: object) -> float:
        """A call that does not hang (replays and verification re-run tactics that succeeded)."""
        if not self.median_s:
            return 0.0
        z = NormalDist().inv_cdf(min(max(_u(*key, "lat"), 1e-12), 1 - 1e-12))
        return min(self.median_s * math.exp(self.sigma * z), self.timeout_s)

    def describe(self) -> str:
        return (
            f"lognormal(median={self.median_s:g} s, p99={self.p99_s:g} s, sigma={self.sigma:.3f}) "
            f"+ {self.hang:.2%} hangs to the {self.timeout_s:g} s tactic timeout"
        )


@dataclass(frozen=True)
class SimState:
    sid: int
    text: str
    depth: int
    solved: bool
    parent: SimState | None = None
    tactic: str = ""


@dataclass(frozen=True)
class SimSuccess:
    state: SimState
    messages: tuple[str, ...]
    lean_time_s: float


class SimSession:
    """A proof session of the simulated pool, placed and moved as ``burnqed.lean.pool`` does."""

    def __init__(self, env: SimEnv, theorem: Theorem, worker: int) -> None:
        self.env = env
        self.worker = worker
        self.root = SimState(0, f"⊢ {theorem.name} : root", 0, False)
        self.name = theorem.name
        # The process its live states are in: (worker, generation), None right after a move.
        self.ids: tuple[int, int] | None = None
        self.live: set[int] = set()  # states (by id) that exist in that process

    def _place(self, now: float) -> int:
        """``ProofSession._place``: stay unless the states are void here and moving to a live
        worker evens the load."""
        env, w = self.env, self.worker
        if self.ids is None or self.ids == (w, env.generation(w, now)):
            return w
        best = env.least_loaded(now)
        if best == w or not env.live(best, now) or not env.better(best, w):
            return w
        env.sessions[w] -= 1
        env.sessions[best] += 1
        self.worker, self.ids, self.live = best, None, set()
        env.moves += 1
        return best

    def _replay_s(self, w: int, now: float, state: SimState) -> float:
        """The calls that rebuild ``state`` in ``w``'s current process (start + missing steps), as
        the pool replays a path on the first use of a state in a new process."""
        env = self.env
        here = (w, env.generation(w, now))
        if self.ids != here:
            self.ids, self.live = here, set()
        cost, s = 0.0, state
        while s is not None and id(s) not in self.live:
            self.live.add(id(s))
            cost += env.latency.body(self.name, s.text, "replay", here)
            env.replays += 1
            s = s.parent
        return cost

    async def run(self, state: SimState | None, lean_s: float) -> float:
        """Run one call (``state`` None: the session's start) until it runs; returns when it ends
        (a timed-out call: when the REPL is killed)."""
        env = self.env
        while True:
            now = time.perf_counter()
            w = self.worker if state is None else self._place(now)
            kill = env.pending_kill(w, now)
            if kill is not None:
                # Behind a call that will time out: when the REPL is killed this one fails unrun
                # and is retried (after a move, if the session moves).
                env.queued[w] += 1
                try:
                    await asyncio.sleep(kill - now)
                finally:
                    env.queued[w] -= 1
                env.unrun += 1
                continue
            replay = 0.0 if state is None else self._replay_s(w, now, state)
            env.queued[w] += 1
            try:
                await env.call(w, replay, lean_s)
            finally:
                env.queued[w] -= 1
            if state is None:
                self.ids = (w, env.generation(w, time.perf_counter()))
                self.live = {id(self.root)}
            return w

    async def apply(self, state: SimState, tactic: str) -> SimSuccess | TacticFailure:
        env = self.env
        lat = env.latency.draw(self.name, state.text, tactic)
        w = await self.run(state, lat)
        if lat >= env.latency.timeout_s:
            return TacticFailure("timeout", f"timeout after {lat:g} s", lat)
        u = _u(self.name, state.text, tactic)
        if u < 0.4:
            return TacticFailure("error", "tactic failed", lat)
        if u < 0.5:  # a transposition: back to the parent's state family
            return SimSuccess(state, (), lat)
        depth = state.depth + 1
        solved = u > 1 - 0.002 * min(depth, 8)  # deeper states close more often
        text = "no goals" if solved else f"⊢ {self.name} : {state.text[-12:]}{tactic}{u:.6f}"
        new = SimState(depth, text, depth, solved, state, tactic)
        if self.ids == (w, env.generation(w, time.perf_counter())):
            self.live.add(id(new))  # made in the session's current process
        return SimSuccess(new, (), lat)

    async def close(self) -> None:
        self.env.sessions[self.worker] -= 1


class SimEnv:
    """``workers`` Lean workers with heavy-tailed calls, run as ``burnqed.lean.pool`` runs them.

    Each worker keeps its own timeline (a call starts when the worker is free and ends exactly its
    drawn time later), as a REPL process does: the event loop's wake-up latency delays when a
    search sees a result, not the worker's next call.  A call that times out kills the REPL at the
    timeout: every call queued behind it fails unrun and is retried, the worker is down for
    ``repl_start_s`` (a new process), and its sessions' states are void (replays).  Placement as in
    the pool: a new session goes to the live worker with the fewest sessions, then the fewest
    requests under way; a session whose states are void moves to a better live worker.
    """

    def __init__(self, latency: Latency, workers: int, repl_start_s: float) -> None:
        self.latency = latency
        self.repl_start_s = repl_start_s
        self.free_at = [0.0] * workers
        self.sessions = [0] * workers
        self.queued = [0] * workers  # calls under way (waiting or running), as _Worker.queued
        self.kills: list[list[tuple[float, float]]] = [[] for _ in range(workers)]  # (kill, up)
        self.calls = 0
        self.work_s = 0.0  # Lean work: drawn call times + restarts
        self.first_s = 0.0  # the ideal's Lean time: every call's drawn time, once (≤ the timeout)
        self.timeouts = 0
        self.replays = 0
        self.replay_s = 0.0
        self.unrun = 0  # calls killed unrun behind a timeout, retried
        self.moves = 0
        self.verifications = 0
        self.verify_s = 0.0
        self.verify_check_s = 0.0  # the ideal's verification: the files' tactics, no start-up
        self._verify_slot = asyncio.Semaphore(1)

    def generation(self, w: int, now: float) -> int:
        """Which process of worker ``w`` is current at ``now`` (kills so far)."""
        return sum(1 for kill, _ in self.kills[w] if kill <= now)

    def pending_kill(self, w: int, now: float) -> float | None:
        return next((kill for kill, _ in self.kills[w] if kill > now), None)

    def live(self, w: int, now: float) -> bool:
        """Not between a kill and its new process being up (``_Worker.client is not None``)."""
        return not any(kill <= now < up for kill, up in self.kills[w])

    def least_loaded(self, now: float) -> int:
        return min(
            range(len(self.sessions)),
            key=lambda w: (not self.live(w, now), self.sessions[w], self.queued[w], w),
        )

    def better(self, best: int, w: int) -> bool:
        """Moving one session from ``w`` to ``best`` evens the load (``LeanPool._better``)."""
        nb, nw = self.sessions[best] + 1, self.sessions[w]
        return nb < nw or (nb == nw and self.queued[best] < self.queued[w])

    async def call(self, worker: int, replay_s: float, lean_s: float) -> None:
        self.calls += 1
        self.work_s += lean_s
        self.first_s += lean_s
        self.replay_s += replay_s
        busy = replay_s + lean_s
        if not busy:
            return
        now = time.perf_counter()
        start = max(now, self.free_at[worker])
        end = start + busy
        self.free_at[worker] = end
        if lean_s >= self.latency.timeout_s:  # the client kills the REPL; a new one starts
            self.timeouts += 1
            self.work_s += self.repl_start_s
            self.free_at[worker] = end + self.repl_start_s
            self.kills[worker].append((end, end + self.repl_start_s))
        await asyncio.sleep(end - now)

    async def start(self, theorem: Theorem) -> SimSession:
        worker = self.least_loaded(time.perf_counter())
        self.sessions[worker] += 1
        session = SimSession(self, theorem, worker)
        await session.run(None, self.latency.body(theorem.name, "start"))
        return session

    async def verify(self, theorem: Theorem, tactics: list[str]) -> Verdict:
        """A fresh REPL process checks the whole file: start-up plus the proof's tactics."""
        async with self._verify_slot:
            check = sum(
                self.latency.body(theorem.name, "verify", i, t) for i, t in enumerate(tactics)
            )
            cost = self.repl_start_s + check
            self.verifications += 1
            self.verify_check_s += check
            self.verify_s += cost
            if cost:
                await asyncio.sleep(cost)
        return Verdict(ok=True, reasons=(), file="", axioms=())


# ---- simulated generator -------------------------------------------------------------------


class SimGenerator:
    """Deterministic candidates per prompt; a call of n prompts sleeps ``a + b·n`` (serial)."""

    model_id = "sim"

    def __init__(self, a: float, b: float) -> None:
        self.a, self.b = a, b
        self.batches: list[int] = []
        self.busy_s = 0.0  # summed time of the calls made: the ideal's generation time

    def generate(self, prompts, params: SamplingParams):
        self.batches.append(len(prompts))
        self.busy_s += self.a + self.b * len(prompts)
        if self.a or self.b:
            time.sleep(self.a + self.b * len(prompts))
        out = []
        for p in prompts:
            raw = [
                Candidate(f"tac{int(_u(p, i) * 12)}", -3 * _u(p, i, "lp"), 8)
                for i in range(params.n)
            ]
            out.append(dedup_candidates(raw))
        return out

    def embed(self, texts):
        raise NotImplementedError

    def close(self) -> None:
        pass


def theorems(n: int) -> list[Theorem]:
    return [
        Theorem(name=f"sim{i:05d}", formal_statement=f"theorem sim{i:05d} : P := by\n")
        for i in range(n)
    ]


async def _search(ths, cfg, gen, env, k):
    t0 = time.perf_counter()
    results = await search_all(ths, gen, env, replace(cfg, expansions_per_step=k))
    return results, time.perf_counter() - t0


def bench_throughput(args, cfg: SearchConfig, workers: int, latency: Latency):
    a, b = args.gen_a * args.scale, args.gen_b * args.scale
    start = args.repl_start * args.scale
    k = args.expansions_per_step or cfg.expansions_per_step
    ths = theorems(args.theorems)
    gen, env = SimGenerator(a, b), SimEnv(latency, workers, start)
    results, wall = asyncio.run(_search(ths, cfg, gen, env, k))
    expansions = sum(r.nodes_expanded for r in results)
    # The frozen ideal (module docstring).
    gen_ideal = gen.busy_s
    lean_ideal = (env.first_s + env.verify_check_s) / workers
    ideal = max(gen_ideal, lean_ideal)
    proved = sum(r.status == "proved" for r in results)
    print(
        f"# concurrent: {len(ths)} theorems, {expansions} expansions, {env.calls} Lean calls "
        f"({env.timeouts} timeouts → restarts, {env.unrun} killed unrun and retried, "
        f"{env.moves} session moves, {env.replays} replayed calls, {env.replay_s:.2f} s "
        f"replaying), {proved} proved ({env.verifications} verifications, "
        f"{env.verify_s:.2f} s), wall {wall:.2f} s; ideal {ideal:.2f} s (generation "
        f"{gen_ideal:.2f} s busy, Lean (first calls + checks) / workers {lean_ideal:.2f} s); "
        f"{len(gen.batches)} generation batches of "
        f"mean {statistics.mean(gen.batches):.1f}",
        flush=True,
    )

    # One request at a time: one search, batches of one prompt, one Lean worker.
    seq_cfg = replace(cfg, concurrency=1, batch_generate_size=1)
    seq_ths = ths[: args.sequential_theorems]
    sgen, senv = SimGenerator(a, b), SimEnv(latency, 1, start)
    sres, swall = asyncio.run(_search(seq_ths, seq_cfg, sgen, senv, 1))
    sexp = sum(r.nodes_expanded for r in sres)
    print(
        f"# sequential: {len(seq_ths)} theorems, {sexp} expansions, {senv.calls} Lean calls "
        f"({senv.timeouts} timeouts), wall {swall:.2f} s",
        flush=True,
    )
    speedup = (expansions / wall) / (sexp / swall)
    return ideal / wall, speedup


def bench_overhead(args, cfg: SearchConfig) -> float:
    ths = theorems(args.theorems)
    k = cfg.expansions_per_step
    best = 0.0
    for _ in range(args.repeats):
        env = SimEnv(Latency(0.0, 0.0, 0.0, math.inf), 1, 0.0)
        results, wall = asyncio.run(_search(ths, cfg, SimGenerator(0, 0), env, k))
        best = max(best, sum(r.nodes_expanded for r in results) / wall)
    return best


def _fake_result(tree: SearchTree, i: int):
    from burnqed.search.engine import SearchResult

    return SearchResult(
        theorem=f"t{i:07d}",
        attempt=0,
        status="failed",
        ended_by="budget",
        proof=None,
        verified=False,
        proof_expansion=None,
        nodes_expanded=tree.expansions,
        nodes_total=len(tree.nodes),
        rejected_proofs=0,
        wall_s=1.0,
        lean_s=0.5,
        gen_wait_s=0.2,
        tokens=100,
        reasons=("node budget spent",),
        tree=tree,
    )


_VARS = "abcdefghkmnpqrstuvwxyz"
_OPS = (" + ", " - ", " * ", " / ", " ^ ")
_SUB = "₀₁₂₃₄₅₆₇₈₉"


def _expr(rng: random.Random, depth: int = 0) -> str:
    if depth > 2 or rng.random() < 0.3:
        return rng.choice(_VARS) if rng.random() < 0.6 else str(rng.randint(0, 999))
    return f"({_expr(rng, depth + 1)}{rng.choice(_OPS)}{_expr(rng, depth + 1)})"


def _goal(rng: random.Random, theorem: int, node: int) -> str:
    """A miniF2F-like goal, 200–700 characters, distinct for every (theorem, node)."""
    names = " ".join(sorted(rng.sample(_VARS, rng.randint(2, 6))))
    hyps = [f"{names} : ℝ"]
    for j in range(rng.randint(2, 6)):
        rel = rng.choice(("=", "<", "≤", "≠"))
        hyps.append(f"h{_SUB[j]} : {_expr(rng)} {rel} {_expr(rng)}")
    hyps.append(f"hn : n = {theorem * 1_000_003 + node}")  # the distinct part, as a `have` adds
    text = "\n".join(hyps) + f"\n⊢ {_expr(rng)} = {_expr(rng)}"
    while len(text) < 200:
        text = text.replace("⊢ ", f"h{len(text)} : 0 < {_expr(rng)}\n⊢ ", 1)
    return text[:700]


def _tree(nodes: int, theorem: int) -> SearchTree:
    """A tree of ``nodes`` distinct states: 8 children per expansion, Lean-like goals."""
    rng = random.Random(theorem)
    tree = SearchTree(root_state=None, root_text=_goal(rng, theorem, 0))
    frontier = [tree.root]
    while len(tree.nodes) < nodes:
        parent = frontier.pop(0)
        tree.begin_expansion(parent, step=parent.node_id)
        for c in range(min(8, nodes - len(tree.nodes))):
            child = tree.add_state(
                parent,
                f"nlinarith [sq_nonneg ({_expr(rng)}), h₀, h{c}]",
                -0.5 * rng.random(),
                state=None,
                text=_goal(rng, theorem, len(tree.nodes)),
                solved=False,
                lean_s=0.01,
                priority=-1.0,
            )
            frontier.append(child)
        tree.finish_expansion(parent, wall_s=0.1, lean_s=0.08, tokens=64, num_candidates=8)
    return tree


PER_TREE = 500  # node rows per attempt
CHECKPOINT_ROWS = 10_000  # rows per checkpoint; also the "early" point of the growth ratio


def _checkpoint(w: TrajectoryWriter, first: int) -> tuple[float, float]:
    """Build (untimed) and write (timed) one checkpoint of distinct trees; (add s, checkpoint s)."""
    trees = [_tree(PER_TREE, first + j) for j in range(CHECKPOINT_ROWS // PER_TREE)]
    t0 = time.perf_counter()
    for j, tree in enumerate(trees):
        w.add(_fake_result(tree, first + j))
    t1 = time.perf_counter()
    w.checkpoint()
    return t1 - t0, time.perf_counter() - t1


def bench_writer(args) -> tuple[float, float, float, float]:
    """(s per 1M rows, growth ratio, early checkpoint s, late checkpoint s)."""
    per_ckpt = CHECKPOINT_ROWS // PER_TREE
    early = []
    for r in range(5):  # a checkpoint written after 10K rows, in 5 fresh directories
        with tempfile.TemporaryDirectory() as d:
            w = TrajectoryWriter(Path(d), checkpoint_every=10**9)
            _checkpoint(w, 10**8 * (r + 1))
            early.append(_checkpoint(w, 10**8 * (r + 1) + per_ckpt)[1])
    with tempfile.TemporaryDirectory() as d:
        w = TrajectoryWriter(Path(d), checkpoint_every=10**9)
        spent, times, i = 0.0, [], 0
        while w.rows_written < args.write_rows:
            add_s, ckpt_s = _checkpoint(w, i)
            i += per_ckpt
            spent += add_s + ckpt_s
            times.append(ckpt_s)
        write_s = spent * 1_000_000 / w.rows_written
        distinct = len({t for t in read_states(Path(d))})
        if distinct != w.rows_written:
            raise SystemExit(f"writer bench: {distinct} distinct states of {w.rows_written} rows")
    late = statistics.median(times[-5:])
    return write_s, late / statistics.median(early), statistics.median(early), late


def read_states(out: Path) -> list[str]:
    import pyarrow.parquet as pq

    return [
        s for part in sorted((out / "nodes").glob("part-*.parquet"))
        for s in pq.read_table(part, columns=["state"]).column("state").to_pylist()
    ]  # fmt: skip


def main() -> None:
    lean_defaults = LeanConfig()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small workload (smoke test)")
    p.add_argument("--theorems", type=int, default=244)  # miniF2F valid: 244
    p.add_argument("--sequential-theorems", type=int, default=12)
    p.add_argument("--gen-a", type=float, default=0.5, help="generation call fixed cost, s")
    p.add_argument("--gen-b", type=float, default=0.02, help="generation cost per prompt, s")
    p.add_argument("--lean-median", type=float, default=0.1, help="median Lean call, s")
    p.add_argument("--lean-p99", type=float, default=2.5, help="99th percentile Lean call, s")
    p.add_argument(
        "--lean-hang", type=float, default=0.002, help="fraction of calls that hit the timeout"
    )
    p.add_argument(
        "--repl-start", type=float, default=5.0, help="seconds to start a REPL (restart, verify)"
    )
    p.add_argument(
        "--scale",
        type=float,
        default=0.01,
        help="time factor multiplying every simulated time (keeps the bench to a few minutes; "
        "the distribution's shape and the ratios hold)",
    )
    p.add_argument("--write-rows", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=None, help="override the default")
    p.add_argument("--expansions-per-step", type=int, default=None, help="override the default")
    args = p.parse_args()
    if args.quick:
        args.theorems, args.sequential_theorems, args.write_rows, args.repeats = 30, 4, 100_000, 1
    cfg = SearchConfig()  # the shipped defaults (params.yaml mirrors them)
    if args.concurrency:
        cfg = replace(cfg, concurrency=args.concurrency)
    workers = lean_defaults.workers
    k = args.expansions_per_step or cfg.expansions_per_step
    sc = args.scale
    latency = Latency(
        args.lean_median * sc,
        args.lean_p99 * sc,
        args.lean_hang,
        lean_defaults.tactic_timeout_s * sc,
    )
    unscaled = Latency(
        args.lean_median, args.lean_p99, args.lean_hang, lean_defaults.tactic_timeout_s
    )
    print(f"time_scale={sc:g}  # every simulated time below is multiplied by this when run")
    print(f"lean_latency={unscaled.describe()}")
    print(f"lean_workers={workers}")
    print(f"repl_start_s={args.repl_start:g}  # restart after a timeout; fresh-process verify")
    print(f"generation_s=a + b*n, a={args.gen_a:g}, b={args.gen_b:g}  # one call at a time")
    print(
        f"search=theorems {args.theorems}, max_nodes {cfg.max_nodes}, num_candidates "
        f"{cfg.num_candidates}, concurrency {cfg.concurrency}, batch_generate_size "
        f"{cfg.batch_generate_size}, expansions_per_step {k}"
    )
    print(
        f"writer=1 checkpoint per {CHECKPOINT_ROWS} rows, {PER_TREE} rows per attempt", flush=True
    )
    fraction, speedup = bench_throughput(args, cfg, workers, latency)
    overhead = bench_overhead(args, cfg)
    write_s, growth, early, late = bench_writer(args)
    print(
        f"# checkpoint of {CHECKPOINT_ROWS} rows: {early:.3f} s after 10K rows, {late:.3f} s after 1M"
    )
    print(f"ideal_bound_fraction={fraction:.3f}")
    print(f"speedup_vs_sequential={speedup:.2f}")
    print(f"overhead_expansions_per_s={overhead:.0f}")
    print(f"write_1m_rows_s={write_s:.2f}")
    print(f"checkpoint_growth_ratio={growth:.3f}")


if __name__ == "__main__":
    main()
