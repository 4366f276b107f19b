"""Search-engine throughput and trajectory-writing cost, with simulated backends (no GPU, no Lean).

Workload: synthetic theorems whose proof trees are fixed by hashing (each tactic fails, repeats a
state, opens a new state or closes the proof with fixed probabilities), searched by the real engine
(``burnqed.search.search_all``) with the shipped defaults for concurrency, batch size, candidates and
Lean workers.  Simulated costs: a generation call of ``n`` prompts takes ``a + b·n`` seconds and runs
one at a time (one GPU); each Lean call takes ``l`` seconds on one of ``workers`` workers.

Figures (printed last, one ``name=value`` per line):

- ``ideal_bound_fraction``: the ideal time over the measured time.  The ideal is the busier
  resource's total work with perfect overlap: all expansions generated in full batches
  (``ceil(E / batch_generate_size) · (a + b · batch_generate_size)``) or all Lean calls spread over
  the workers (``calls · l / workers``), whichever is larger.  Target ≥ 0.9.
- ``speedup_vs_sequential``: expansions per second over one-request-at-a-time search (concurrency 1,
  batches of 1, one Lean call at a time) on the same theorems.  Target ≥ 5.
- ``overhead_expansions_per_s``: expansions per second with zero-latency backends (pure engine
  overhead).  Target ≥ 2,000 on 2 cores.
- ``write_1m_rows_s``: seconds to write 1M node rows through ``TrajectoryWriter``.
- ``checkpoint_growth_ratio``: the cost of one checkpoint after 1M rows over one after 10K rows.
  Target ≤ 1.5 (append-only parts: a checkpoint must not grow with what is already written).

Run::

    python bench/search.py            # ~1 minute on 2 cores
    python bench/search.py --quick    # smaller workload, for a smoke test
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import math
import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from burnqed.config import LeanConfig, SearchConfig
from burnqed.lean.pool import TacticFailure, Verdict
from burnqed.policy import Candidate, SamplingParams, dedup_candidates
from burnqed.search import search_all
from burnqed.search.stage import default_expansions_per_step
from burnqed.search.tree import SearchTree
from burnqed.theorems import Theorem
from burnqed.trajectory import TrajectoryWriter


def _u(*parts: object) -> float:
    """A uniform number in [0, 1) fixed by ``parts``."""
    d = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(d, "big") / 2**64


# ---- simulated Lean ------------------------------------------------------------------------


@dataclass(frozen=True)
class SimState:
    sid: int
    text: str
    depth: int
    solved: bool


@dataclass(frozen=True)
class SimSuccess:
    state: SimState
    messages: tuple[str, ...]
    lean_time_s: float


class SimSession:
    def __init__(self, env: SimEnv, theorem: Theorem, worker: int) -> None:
        self.env = env
        self.worker = worker
        self.root = SimState(0, f"⊢ {theorem.name} : root", 0, False)
        self.name = theorem.name

    async def apply(self, state: SimState, tactic: str) -> SimSuccess | TacticFailure:
        await self.env.call(self.worker)
        u = _u(self.name, state.text, tactic)
        if u < 0.4:
            return TacticFailure("error", "tactic failed", self.env.latency_s)
        if u < 0.5:  # a transposition: back to the parent's state family
            return SimSuccess(state, (), self.env.latency_s)
        depth = state.depth + 1
        solved = u > 1 - 0.002 * min(depth, 8)  # deeper states close more often
        text = "no goals" if solved else f"⊢ {self.name} : {state.text[-12:]}{tactic}{u:.6f}"
        return SimSuccess(SimState(depth, text, depth, solved), (), self.env.latency_s)

    async def close(self) -> None:
        self.env.sessions[self.worker] -= 1


class SimEnv:
    """``workers`` Lean workers, ``latency_s`` per call, each session pinned to one worker.

    As in ``burnqed.lean.pool``: a session lives on the least-loaded worker (Pantograph states are
    per-process) and a worker runs one call at a time.  Each worker keeps its own timeline (a call
    starts when the worker is free and ends exactly ``latency_s`` later), as a REPL process does:
    the event loop's wake-up latency delays when a search sees a result, not the worker's next call.
    """

    def __init__(self, latency_s: float, workers: int) -> None:
        self.latency_s = latency_s
        self.free_at = [0.0] * workers
        self.sessions = [0] * workers
        self.calls = 0

    async def call(self, worker: int) -> None:
        self.calls += 1
        if not self.latency_s:
            return
        now = time.perf_counter()
        end = max(now, self.free_at[worker]) + self.latency_s
        self.free_at[worker] = end
        await asyncio.sleep(end - now)

    async def start(self, theorem: Theorem) -> SimSession:
        worker = min(range(len(self.sessions)), key=self.sessions.__getitem__)
        self.sessions[worker] += 1
        return SimSession(self, theorem, worker)

    async def verify(self, theorem: Theorem, tactics: list[str]) -> Verdict:
        return Verdict(ok=True, reasons=(), file="", axioms=())


# ---- simulated generator -------------------------------------------------------------------


class SimGenerator:
    """Deterministic candidates per prompt; a call of n prompts sleeps ``a + b·n`` (serial)."""

    model_id = "sim"

    def __init__(self, a: float, b: float) -> None:
        self.a, self.b = a, b
        self.batches: list[int] = []

    def generate(self, prompts, params: SamplingParams):
        self.batches.append(len(prompts))
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
    results = await search_all(ths, gen, env, cfg, expansions_per_step=k)
    return results, time.perf_counter() - t0


def bench_throughput(args, cfg: SearchConfig, workers: int):
    a, b, lean = args.gen_a * args.scale, args.gen_b * args.scale, args.lean * args.scale
    k = args.expansions_per_step or default_expansions_per_step(cfg)
    ths = theorems(args.theorems)
    gen, env = SimGenerator(a, b), SimEnv(lean, workers)
    results, wall = asyncio.run(_search(ths, cfg, gen, env, k))
    expansions = sum(r.nodes_expanded for r in results)
    gen_ideal = math.ceil(expansions / cfg.batch_generate_size) * (a + b * cfg.batch_generate_size)
    lean_ideal = env.calls * lean / workers
    ideal = max(gen_ideal, lean_ideal)
    proved = sum(r.status == "proved" for r in results)
    print(
        f"# concurrent: {len(ths)} theorems, {expansions} expansions, {env.calls} Lean calls, "
        f"{proved} proved, wall {wall:.2f} s; ideal {ideal:.2f} s (generation {gen_ideal:.2f} s, "
        f"Lean {lean_ideal:.2f} s); {len(gen.batches)} generation batches of mean "
        f"{statistics.mean(gen.batches):.1f}"
    )

    # One request at a time: one search, batches of one prompt, one Lean worker.
    seq_cfg = replace(cfg, concurrency=1, batch_generate_size=1)
    seq_ths = ths[: args.sequential_theorems]
    sgen, senv = SimGenerator(a, b), SimEnv(lean, 1)
    sres, swall = asyncio.run(_search(seq_ths, seq_cfg, sgen, senv, 1))
    sexp = sum(r.nodes_expanded for r in sres)
    print(f"# sequential: {len(seq_ths)} theorems, {sexp} expansions, wall {swall:.2f} s")
    speedup = (expansions / wall) / (sexp / swall)
    return ideal / wall, speedup


def bench_overhead(args, cfg: SearchConfig) -> float:
    ths = theorems(args.theorems)
    k = default_expansions_per_step(cfg)
    best = 0.0
    for _ in range(args.repeats):
        results, wall = asyncio.run(_search(ths, cfg, SimGenerator(0, 0), SimEnv(0, 1), k))
        best = max(best, sum(r.nodes_expanded for r in results) / wall)
    return best


def _fake_result(tree: SearchTree, i: int):
    from burnqed.search.engine import SearchResult

    return SearchResult(
        theorem=f"t{i:07d}",
        attempt=0,
        status="failed",
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


def _tree(nodes: int) -> SearchTree:
    """A realistic tree of ``nodes`` nodes: 8 children per expansion, Lean-like state text."""
    tree = SearchTree(root_state=None, root_text="p q r : Prop\nh : p ∧ q\n⊢ (p → r) → q ∧ r")
    frontier = [tree.root]
    while len(tree.nodes) < nodes:
        parent = frontier.pop(0)
        tree.begin_expansion(parent, step=parent.node_id)
        for c in range(min(8, nodes - len(tree.nodes))):
            text = f"p q r : Prop\nh : p ∧ q\nh{len(tree.nodes)} : p → r\n⊢ q ∧ r ∨ s{c}"
            child = tree.add_state(
                parent,
                f"apply h{c}",
                -0.5,
                state=None,
                text=text,
                solved=False,
                lean_s=0.01,
                priority=-1.0,
            )
            frontier.append(child)
        tree.finish_expansion(parent, wall_s=0.1, lean_s=0.08, tokens=64, num_candidates=8)
    return tree


def bench_writer(args) -> tuple[float, float]:
    per_tree = 500
    tree = _tree(per_tree)
    trees_per_checkpoint = 20  # 10K rows per checkpoint
    total_rows = args.write_rows
    with tempfile.TemporaryDirectory() as d:
        w = TrajectoryWriter(Path(d), checkpoint_every=10**9)
        times: list[float] = []
        t0 = time.perf_counter()
        i = 0
        while w.rows_written < total_rows:
            for _ in range(trees_per_checkpoint):
                w.add(_fake_result(tree, i))
                i += 1
            c0 = time.perf_counter()
            w.checkpoint()
            times.append(time.perf_counter() - c0)
        write_s = (time.perf_counter() - t0) * 1_000_000 / w.rows_written
    # A checkpoint's cost after 10K rows (the first few) vs after 1M rows (the last few).
    early = statistics.median(times[1:6])
    late = statistics.median(times[-5:])
    return write_s, late / early


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="a small workload (smoke test)")
    p.add_argument("--theorems", type=int, default=244)  # miniF2F valid: 244
    p.add_argument("--sequential-theorems", type=int, default=12)
    p.add_argument("--gen-a", type=float, default=0.5, help="generation call fixed cost, s")
    p.add_argument("--gen-b", type=float, default=0.02, help="generation cost per prompt, s")
    p.add_argument("--lean", type=float, default=0.1, help="Lean cost per tactic call, s")
    p.add_argument(
        "--scale",
        type=float,
        default=0.02,
        help="multiply every simulated latency (keeps the bench short; ratios hold)",
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
    workers = LeanConfig().workers
    k = args.expansions_per_step or default_expansions_per_step(cfg)
    print(
        f"# simulated generation: a={args.gen_a} s + b={args.gen_b} s/prompt; Lean {args.lean} "
        f"s/call on {workers} workers; latencies scaled ×{args.scale}"
    )
    print(
        f"# search: {args.theorems} theorems, max_nodes={cfg.max_nodes}, num_candidates="
        f"{cfg.num_candidates}, concurrency={cfg.concurrency}, batch_generate_size="
        f"{cfg.batch_generate_size}, expansions_per_step={k}"
    )
    fraction, speedup = bench_throughput(args, cfg, workers)
    overhead = bench_overhead(args, cfg)
    write_s, growth = bench_writer(args)
    print(f"ideal_bound_fraction={fraction:.3f}")
    print(f"speedup_vs_sequential={speedup:.2f}")
    print(f"overhead_expansions_per_s={overhead:.0f}")
    print(f"write_1m_rows_s={write_s:.2f}")
    print(f"checkpoint_growth_ratio={growth:.3f}")


if __name__ == "__main__":
    main()
