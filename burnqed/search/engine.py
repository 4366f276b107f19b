"""Best-first proof search over many theorems at once, with batched generation and value scoring.

Each (theorem, attempt) is one best-first search (:class:`~burnqed.search.tree.SearchTree`): pop the
``k`` highest-priority open states, ask the policy for candidates for each, apply every candidate in
Lean, merge duplicate states, push the new states, repeat until a proof verifies, the node budget
(``max_nodes`` expansions) is spent, the frontier is empty or the wall-clock timeout hits.  A proof
found step by step counts only after :meth:`ProofEnvironment.verify` accepts the whole file.

Throughput comes from running ``concurrency`` searches together on one event loop:

- every search's generation requests go into one queue, sent to the (synchronous) generator from a
  dedicated thread in batches of up to ``batch_generate_size``, **whenever the generator is idle**
  (continuous batching, as SGLang and vLLM schedule their own batches).  Requests that arrive while
  a call runs wait for it and go out together in the next one, so batches grow by themselves when
  generation is the bottleneck and stay small when it is not.  Nothing ever waits for a batch to
  fill: with Lean the bottleneck (the usual case: a step's 8 candidates take seconds of Lean, its
  generation a fraction of a batched call) holding requests back for company only idles the
  searches, and so the Lean workers (``bench/search.py``: ``ideal_bound_fraction`` 0.80 with the
  earlier fill-first rule, 0.86 with this one; with generation the bottleneck it is better too,
  since an idle generator gains nothing by waiting).  There is no timer.
- new states are scored by the value model the same way, in batches of up to ``batch_encode_size``,
  sent as soon as the model is idle (scoring is short; holding it back would stall the searches).
- Lean calls are plain coroutines: while one search waits on Lean, the generator works for others.

Every answer — a node's candidates, a tactic's outcome, a proof's verdict — comes through one
:class:`~burnqed.search.sources.AnswerSource` (:func:`search_from_source`): live (the policy and
Lean; :func:`search_all` is that), a recorded search's tree (``burnqed replay``), later the
expansion cache.  A generation request carries what a recording or cache keys on (theorem, attempt,
state hash, prompt, per-candidate seeds: :class:`~burnqed.search.sources.ExpandRequest`); the
source answers what it knows at once, and only the rest is batched to the model.

Determinism and schedule invariance (what makes runs repeat and anytime budgets exact): within a
search, nodes are popped in priority order (ties by node id, which is creation order), popped nodes
get consecutive expansion indices, and results are processed in expansion order then candidate order
— never in completion order.  Every candidate is sampled with its own seed, derived from (run seed,
theorem key, attempt, the node's state hash, candidate index) (:func:`burnqed.policy.candidate_seeds`),
and the backends make a candidate a function of its prompt and seed alone; energies are computed per
state; Lean's answers are deterministic (a heartbeat limit, not the clock, decides a tactic; a
wall-clock backstop that fires is counted as a non-deterministic event); a search whose proof is
being verified waits for the verdict.  So a theorem's tree — node order, candidates, energies,
proof — does not depend on ``concurrency``, the batch sizes, the number of Lean workers or which one
serves it, or how long anything takes; and a run with ``max_nodes = b`` performs exactly the first
``b`` expansions of a run with a larger budget, so ``SearchResult.solved_within(b)`` on the larger
run equals the smaller run's outcome.

**Frontier order.**  ``order="priority"`` (every eval and pool search) pops by :func:`priority`;
``order="random"`` pops in a seeded random order instead — each state's key a uniform number drawn
from (run seed, theorem, attempt, state hash) (:func:`random_key`), so the tree is as repeatable
and schedule-invariant as a priority search's.  Its decisions (which open node lay on the proof
path it found) favour no priority, which makes them the fair data to fit and judge a value against
the log-prob on (the noise search, ``search.noise_order``; :mod:`burnqed.value.frontier`).

Example (with a generator ``gen`` and a ``LeanPool`` or fake environment ``env``)::

    cfg = SearchConfig(max_nodes=64, num_candidates=4, concurrency=8)
    results = asyncio.run(search_all(theorems, gen, env, cfg))
    solved = sum(r.status == "proved" for r in results)
    solved_at_16 = sum(r.solved_within(16) for r in results)
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import heapq
import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from burnqed.config import SEARCH_ORDERS, SearchConfig
from burnqed.data.prompt import STOP, format_prompt
from burnqed.lean.errors import StartError
from burnqed.outcomes import END_REASONS, STATUS_OF_END, STATUSES
from burnqed.policy import Generation, SamplingParams, TacticGenerator, candidate_seeds
from burnqed.search.sources import (
    AnswerSource,
    ExpandRequest,
    LiveSource,
    ProofEnvironment,
    ProofSessionLike,
    ProofStateLike,
)
from burnqed.search.tree import FAILED, PROVED, InvariantError, Node, SearchTree, state_hash
from burnqed.search.value import (
    ValueModel,
    priority,
    resolve_energy_weight,
    value_meta,
    weighted,
)
from burnqed.theorems import Theorem

log = logging.getLogger(__name__)

# Why a solved state carries no verdict (its proof was never checked): recorded in its node's
# error as "verification: <reason>", and read back by burnqed.search.recorded.
NOT_VERIFIED_ENDED = "not verified before the attempt ended"
NOT_VERIFIED_LATER = "not verified: an earlier proof was accepted"

BATCH_TRIES = 3  # tries of a generation or value-model batch before its searches fail
BATCH_RETRY_S = 0.5  # first back-off between tries (doubling)


# --------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class SearchResult:
    """The outcome of one (theorem, attempt).

    Statuses and end reasons are :mod:`burnqed.outcomes`'.  Invariants (:meth:`check`):
    ``status == "proved"`` ⇔ ``proof is not None`` ⇔ ``verified`` ⇔ ``proof_expansion is not None``;
    ``status == STATUS_OF_END[ended_by]``; ``proof_expansion < nodes_expanded <= max_nodes``;
    ``nodes_expanded <= nodes_total``; a timeout, statement error or error carries a reason.
    """

    theorem: str
    attempt: int
    status: str  # burnqed.outcomes.STATUSES
    ended_by: str  # burnqed.outcomes.END_REASONS: why the search stopped
    proof: tuple[str, ...] | None  # the verified tactic list
    verified: bool  # whole-file verification accepted `proof`
    proof_expansion: int | None  # expansion index (0-based) that produced the proof's last state
    nodes_expanded: int  # expansions performed (the node budget spent)
    nodes_total: int  # tree nodes incl. the root, error edges and duplicate edges
    rejected_proofs: int  # solved states whose whole-file verification failed
    wall_s: float  # attempt wall time, start of the Lean session to the end
    lean_s: float  # summed Lean time of tactic applications
    gen_wait_s: float  # time this search spent waiting on generation batches
    tokens: int  # generated tokens over all expansions
    # tactics a wall-clock backstop failed (kind "timeout"): non-deterministic events
    wall_timeouts: int = 0
    reasons: tuple[str, ...] = ()  # why it stopped / failed / errored, human-readable
    # the verifier's reasons, one entry per proof it rejected ("; "-joined), in the order tried
    rejections: tuple[str, ...] = ()
    tree: SearchTree | None = field(default=None, compare=False, repr=False)

    def solved_within(self, budget: int) -> bool:
        """Would a run with ``max_nodes = budget`` have proved it? (exact for deterministic runs)"""
        return self.proof_expansion is not None and self.proof_expansion < budget

    def check(self, cfg: SearchConfig | None = None) -> None:
        """Raise :class:`InvariantError` unless the documented invariants hold (tree included)."""

        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise InvariantError(f"{self.theorem}#{self.attempt}: {msg}")

        need(self.status in STATUSES, f"unknown status {self.status!r}")
        need(self.ended_by in END_REASONS, f"unknown end reason {self.ended_by!r}")
        need(
            STATUS_OF_END[self.ended_by] == self.status,
            f"ended by {self.ended_by} but status {self.status}",
        )
        proved = self.status == "proved"
        need(proved == (self.proof is not None), "proof present iff proved")
        need(proved == self.verified, "verified iff proved")
        need(proved == (self.proof_expansion is not None), "proof_expansion iff proved")
        need(self.nodes_expanded <= self.nodes_total, "more expansions than nodes")
        if self.proof_expansion is not None:
            need(self.proof_expansion < self.nodes_expanded, "proof found after the last expansion")
        if cfg is not None:
            need(self.nodes_expanded <= cfg.max_nodes, "expansions exceed max_nodes")
            if self.proof is not None:
                need(len(self.proof) <= cfg.max_depth, "proof longer than max_depth")
        if self.status in ("timeout", "statement_error", "error"):
            need(bool(self.reasons), f"a {self.status} must say why")
        if self.tree is not None:
            t = self.tree
            need(len(t.nodes) == self.nodes_total, "nodes_total disagrees with the tree")
            need(t.expansions == self.nodes_expanded, "nodes_expanded disagrees with the tree")
            t.check_invariants(
                max_nodes=cfg.max_nodes if cfg else None, max_depth=cfg.max_depth if cfg else None
            )
            if self.proof is not None:
                path = [n for n in t.nodes if n.on_proof_path]
                need([n.tactic for n in path[1:]] == list(self.proof), "proof != tree's proof path")
                need(t.root.status == PROVED, "proved attempt with an unproved root")


# --------------------------------------------------------------------------------------------
# Batching


class _Search:
    """Scheduler-side bookkeeping of one live search."""

    __slots__ = ("gen_wait_s",)

    def __init__(self) -> None:
        self.gen_wait_s = 0.0  # time spent waiting on generation batches


class _Batcher:
    """A queue of requests sent to a synchronous batch function on a dedicated thread."""

    def __init__(self, name: str, fn: Callable[[list], Sequence], batch_size: int) -> None:
        self.name = name
        self.fn = fn
        self.batch_size = batch_size
        self.pending: deque[tuple[Any, asyncio.Future]] = deque()
        self.busy = False
        self.sizes: list[int] = []  # every batch sent, for stats and tests
        self.busy_s = 0.0
        # One thread: backends need not be thread-safe, and a GPU runs one batch at a time anyway.
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"burnqed-{name}")

    def submit(self, item: Any) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self.pending.append((item, fut))
        return fut

    def take(self) -> list[tuple[Any, asyncio.Future]]:
        batch = []
        while self.pending and len(batch) < self.batch_size:
            entry = self.pending.popleft()
            if not entry[1].done():  # a cancelled search (timeout) leaves cancelled futures
                batch.append(entry)
        return batch


class _Scheduler:
    def __init__(
        self,
        source: AnswerSource,
        sampling: SamplingParams,
        value_model: ValueModel | None,
        cfg: SearchConfig,
        seed: int | None,
    ) -> None:
        self.seed = seed  # the run seed every candidate's seed derives from (None: unseeded)
        self.loop = asyncio.get_running_loop()
        self.k = cfg.expansions_per_step
        self.source = source
        self.sampling = sampling
        # Only the requests the source cannot answer at once reach the model, in batches.
        self.gen = _Batcher(
            "generate", lambda reqs: source.generate(reqs, sampling), cfg.batch_generate_size
        )
        self.value: _Batcher | None = None
        if value_model is not None:
            self.value = _Batcher(
                "value",
                lambda pairs: value_model.energies([s for s, _ in pairs], [g for _, g in pairs]),
                cfg.batch_encode_size,
            )
        self.tasks: set[asyncio.Task] = set()

    def close(self) -> None:
        for b in (self.gen, self.value):
            if b is not None:
                b.executor.shutdown(wait=False, cancel_futures=True)

    # -- flushing --------------------------------------------------------------------------

    def kick(self) -> None:
        """Send a batch to every idle model that has requests waiting (called on every change)."""
        for b in (self.value, self.gen):
            if b is not None and not b.busy and b.pending:
                self._launch(b)

    def _launch(self, b: _Batcher) -> None:
        batch = b.take()
        if not batch:
            return
        b.busy = True
        b.sizes.append(len(batch))
        task = self.loop.create_task(self._run(b, batch))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _call(self, b: _Batcher, items: list) -> Sequence:
        """``b.fn(items)``, tried up to :data:`BATCH_TRIES` times: a failed model call is an
        infrastructure hiccup, not a result, and the same items give the same answers (seeded), so
        trying again changes nothing but the outcome of the hiccup."""
        for attempt in range(1, BATCH_TRIES + 1):
            try:
                out = await self.loop.run_in_executor(b.executor, b.fn, items)
                if len(out) != len(items):
                    raise RuntimeError(f"{b.name}: {len(out)} results for a batch of {len(items)}")
                return out
            except Exception as e:
                if attempt == BATCH_TRIES:
                    raise
                delay = BATCH_RETRY_S * 2 ** (attempt - 1)
                log.warning(
                    "%s batch of %d failed (try %d of %d): %s; retrying in %.1f s",
                    b.name, len(items), attempt, BATCH_TRIES, e, delay,
                )  # fmt: skip
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    async def _run(self, b: _Batcher, batch: list) -> None:
        t0 = time.perf_counter()
        try:
            out = await self._call(b, [item for item, _ in batch])
        except Exception as e:  # still failing: the batch's searches fail; the others carry on
            log.error("%s batch of %d failed %d times: %s", b.name, len(batch), BATCH_TRIES, e)
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(e)
        else:
            for (_, fut), res in zip(batch, out, strict=True):
                if not fut.done():
                    fut.set_result(res)
        finally:
            b.busy_s += time.perf_counter() - t0
            b.busy = False
            self.kick()

    # -- requests --------------------------------------------------------------------------

    async def generate(self, search: _Search, requests: list[ExpandRequest]) -> list[Generation]:
        """The candidates of each request: the source's own answer where it has one (a recording,
        a cache), else the model's, batched with every other search's requests."""
        out: list[Generation | asyncio.Future] = []
        for req in requests:
            known = self.source.lookup(req, self.sampling)
            out.append(known if known is not None else self.gen.submit(req))
        futs = [x for x in out if isinstance(x, asyncio.Future)]
        if not futs:
            return out  # type: ignore[return-value]  # every answer known: no model, no wait
        self.kick()
        t0 = time.perf_counter()
        try:
            await asyncio.gather(*futs)
        finally:
            search.gen_wait_s += time.perf_counter() - t0
        return [x.result() if isinstance(x, asyncio.Future) else x for x in out]

    async def energies(self, pairs: list[tuple[str, str]]) -> list[float]:
        assert self.value is not None
        futs = [self.value.submit(p) for p in pairs]
        self.kick()
        return [float(e) for e in await asyncio.gather(*futs)]


# --------------------------------------------------------------------------------------------
# One search


def random_key(seed: int | None, theorem: str, attempt: int, state_hash: str) -> float:
    """A random-order search's frontier key of a state: uniform in [0, 1), a function of the run
    seed, theorem, attempt and state alone (not of when or where the state was reached).

    >>> random_key(0, "t", 0, "ab") == random_key(0, "t", 0, "ab") != random_key(0, "t", 1, "ab")
    True
    """
    text = f"frontier\0{seed or 0}\0{theorem}\0{attempt}\0{state_hash}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big") / 2.0**64


class _Attempt:
    """Best-first search of one (theorem, attempt); builds a :class:`SearchResult`."""

    def __init__(
        self,
        sched: _Scheduler,
        source: AnswerSource,
        cfg: SearchConfig,
        theorem: Theorem,
        attempt: int,
        use_value: bool,
        order: str = "priority",
    ) -> None:
        self.sched = sched
        self.source = source
        self.cfg = cfg
        self.theorem = theorem
        self.attempt = attempt
        self.use_value = use_value
        self.order = order
        self.search = _Search()
        self.tree: SearchTree | None = None
        self.in_flight: list[Node] = []  # popped, not yet finished (rolled back on timeout)
        self.unverified: list[Node] = []  # solved, verification not yet decided
        self.proof: tuple[str, ...] | None = None
        self.verified = False  # the verifier's own verdict on `proof` (Verdict.ok), not a proxy
        self.proof_expansion: int | None = None
        self.rejected = 0
        self.rejections: list[str] = []  # the verifier's reasons for each rejected proof
        self.lean_s = 0.0
        self.tokens = 0
        self.wall_timeouts = 0  # tactics failed by a wall-clock backstop (burnqed.outcomes)
        self.stop = ""

    def _priority(self, cum_logprob: float, depth: int, energy: float | None) -> float:
        c = self.cfg
        return priority(
            cum_logprob,
            depth=depth,
            depth_normalisation=c.depth_normalisation,
            energy=energy,
            logprob_weight=c.logprob_weight,
            energy_weight=c.energy_weight,
        )

    async def run(self) -> SearchResult:
        t0 = time.perf_counter()
        self.t0 = t0
        ended_by, reasons = "fault", []
        session = None
        try:
            # search.timeout_s is a fault backstop (null: none); node budgets bound a search.
            async with asyncio.timeout(self.cfg.timeout_s):
                session = await self.source.start(self.theorem, self.attempt)
                ended_by = await self._search(session)
            if ended_by != "proof":
                reasons.append(self.stop)
        except TimeoutError:
            ended_by = "timeout"
            reasons.append(f"wall-clock timeout after {self.cfg.timeout_s:g} s (search.timeout_s)")
            self._roll_back()
        except StartError as e:  # Lean's own verdict on the statement: a result, not a fault
            ended_by = "statement"
            reasons.append(f"statement: {e}")
        except Exception as e:  # one broken attempt must not end the run; it is recorded instead
            log.exception("%s attempt %d failed", self.theorem.key, self.attempt)
            ended_by = "fault"
            reasons.append(f"{type(e).__name__}: {e}")
            self._roll_back()
        finally:
            if session is not None:
                try:
                    await session.close()
                except Exception as e:
                    log.warning("%s: closing the proof session failed: %s", self.theorem.key, e)
        if self.rejected:
            reasons.append(f"{self.rejected} proof(s) rejected by whole-file verification")
        tree = self.tree
        return SearchResult(
            theorem=self.theorem.key,
            attempt=self.attempt,
            status=STATUS_OF_END[ended_by],
            ended_by=ended_by,
            proof=self.proof,
            verified=self.verified,
            proof_expansion=self.proof_expansion,
            nodes_expanded=tree.expansions if tree else 0,
            nodes_total=len(tree.nodes) if tree else 0,
            rejected_proofs=self.rejected,
            wall_s=time.perf_counter() - t0,
            lean_s=self.lean_s,
            gen_wait_s=self.search.gen_wait_s,
            tokens=self.tokens,
            wall_timeouts=self.wall_timeouts,
            reasons=tuple(reasons),
            rejections=tuple(self.rejections),
            tree=tree,
        )

    def _roll_back(self) -> None:
        """Undo an interrupted step so the tree only holds complete expansions."""
        if self.tree is not None:
            self.tree.abort_expansions(self.in_flight)
            for n in self.unverified:
                if n.status not in (PROVED, FAILED):
                    self.tree.mark_rejected(n, NOT_VERIFIED_ENDED)
        self.in_flight = []
        self.unverified = []

    async def _search(self, session: ProofSessionLike) -> str:
        """Search until it ends; return why (``proof``, ``budget`` or ``frontier``)."""
        cfg, sched = self.cfg, self.sched
        root = session.root
        tree = self.tree = SearchTree(root_state=root, root_text=root.text)
        goal = root.text  # the value model is goal-conditioned on the theorem's root goal
        if getattr(root, "solved", False):
            raise RuntimeError("the theorem's initial state has no goals")
        frontier: list[tuple[float, int]] = [(-tree.root.priority, 0)]
        step = 0
        while True:
            if tree.expansions >= cfg.max_nodes:
                self.stop = f"node budget spent ({cfg.max_nodes} expansions)"
                return "budget"
            if not frontier:
                self.stop = "frontier empty: every branch failed or hit max_depth"
                return "frontier"
            take = min(sched.k, cfg.max_nodes - tree.expansions)
            popped = [
                tree.nodes[heapq.heappop(frontier)[1]] for _ in range(min(take, len(frontier)))
            ]
            for node in popped:
                tree.begin_expansion(node, step=step)
            self.in_flight = popped
            step += 1
            t_step = time.perf_counter()

            # Each candidate's seed is keyed by what it samples (theorem, attempt, state), never by
            # the batch it lands in: the tree does not depend on concurrency or timing.
            requests = [
                ExpandRequest(
                    theorem=self.theorem.key,
                    attempt=self.attempt,
                    state_hash=n.state_hash,
                    prompt=format_prompt(n.text),
                    seeds=None
                    if sched.seed is None
                    else candidate_seeds(
                        sched.seed, self.theorem.key, self.attempt, n.state_hash, sched.sampling.n
                    ),
                )
                for n in popped
            ]
            gens = await sched.generate(self.search, requests)
            jobs = [(i, c) for i, g in enumerate(gens) for c in g.candidates]
            results = await asyncio.gather(
                *(session.apply(popped[i].state, c.text) for i, c in jobs)
            )

            # Energies of the new, unsolved, expandable states (duplicates are not rescored).
            energy: dict[str, float] = {}
            if self.use_value:
                texts: dict[str, None] = {}
                for (i, _), res in zip(jobs, results, strict=True):
                    st = getattr(res, "state", None)
                    if (
                        st is not None
                        and not st.solved
                        and popped[i].depth + 1 < cfg.max_depth
                        and not tree.has_state(st.text)
                    ):
                        texts[st.text] = None
                if texts:
                    scores = await sched.energies([(t, goal) for t in texts])
                    energy = dict(zip(texts, scores, strict=True))

            # From here to the end of the step nothing awaits: the tree changes atomically.
            now = time.perf_counter() - self.t0
            lean_by_node = [0.0] * len(popped)
            solved: list[Node] = []
            for (i, cand), res in zip(jobs, results, strict=True):
                parent = popped[i]
                lean = float(res.lean_time_s)
                lean_by_node[i] += lean
                st = getattr(res, "state", None)
                if st is None:
                    if res.kind == "timeout":  # the clock decided, not the heartbeat limit
                        self.wall_timeouts += 1
                    tree.add_error(
                        parent,
                        cand.text,
                        cand.logprob,
                        error=f"{res.kind}: {res.message}",
                        lean_s=lean,
                        created_s=now,
                    )
                    continue
                e = energy.get(st.text)
                depth = parent.depth + 1
                key = (
                    self._priority(parent.cum_logprob + cand.logprob, depth, e)
                    if self.order == "priority"
                    else random_key(sched.seed, self.theorem.key, self.attempt, state_hash(st.text))
                )
                child = tree.add_state(
                    parent,
                    cand.text,
                    cand.logprob,
                    state=st,
                    text=st.text,
                    solved=st.solved,
                    lean_s=lean,
                    created_s=now,
                    ebm_energy=e,
                    priority=key,
                )
                if child.solved:
                    solved.append(child)
                elif child.is_state and depth < cfg.max_depth:
                    heapq.heappush(frontier, (-child.priority, child.node_id))
            wall = time.perf_counter() - t_step
            for i, (node, g) in enumerate(zip(popped, gens, strict=True)):
                tree.finish_expansion(
                    node,
                    wall_s=wall,
                    lean_s=lean_by_node[i],
                    tokens=g.tokens,
                    num_candidates=g.raw_count,
                )
                self.tokens += g.tokens
            self.lean_s += sum(lean_by_node)
            self.in_flight = []

            # Verify in node order = expansion order, so the proof is the earliest one that holds.
            self.unverified = solved
            for child in solved:
                tactics = [n.tactic for n in tree.proof_path(child)[1:]]
                verdict = await self.source.verify(self.theorem, tactics, attempt=self.attempt)
                if verdict.ok is True:
                    tree.mark_proved(child)
                    self.verified = True
                    self.proof = tuple(tree.set_proof_path(child))
                    self.proof_expansion = tree.nodes[child.parent_id].expansion_index
                    break
                self.rejected += 1
                if any(str(r).startswith("timeout:") for r in verdict.reasons):
                    self.wall_timeouts += 1  # the check's clock decided, not Lean's verdict
                reason = "; ".join(verdict.reasons) or "rejected"
                self.rejections.append(reason)
                log.debug("%s: proof %s rejected: %s", self.theorem.key, tactics, reason)
                tree.mark_rejected(child, reason)
            # Solved states after the accepted one stay unverified: they are not proofs.
            for child in solved:
                if child.status not in (PROVED, FAILED):
                    tree.mark_rejected(child, NOT_VERIFIED_LATER)
            self.unverified = []
            if self.proof is not None:
                self.stop = "proof found"
                return "proof"


# --------------------------------------------------------------------------------------------
# Many searches


async def search_all(
    theorems: Iterable[Theorem],
    generator: TacticGenerator,
    env: ProofEnvironment,
    cfg: SearchConfig,
    *,
    sampling: SamplingParams | None = None,
    seed: int | None = 0,
    writer: Any = None,
    value_model: ValueModel | None = None,
    attempts: int | None = None,
    skip: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset(),
    keep_trees: bool = False,
    on_result: Callable[[SearchResult], None] | None = None,
    order: str = "priority",
) -> list[SearchResult]:
    """Search every (theorem, attempt) not in ``skip``, ``cfg.concurrency`` at a time, asking the
    policy ``generator`` and Lean ``env`` (:class:`~burnqed.search.sources.LiveSource`).

    ``writer.add(result)`` (e.g. a :class:`burnqed.trajectory.TrajectoryWriter`) receives each result
    with its tree as soon as it finishes; ``on_result`` is called after it (progress bars).  The
    returned results drop their trees unless ``keep_trees`` (trees of a large run do not fit in
    memory).  ``cfg.expansions_per_step`` (k) nodes are popped per step of each search.  ``seed``
    is the run seed every candidate's seed derives from (:func:`burnqed.policy.candidate_seeds`;
    None: unseeded sampling, not reproducible).  ``order``: how each search pops its frontier
    (:data:`burnqed.config.SEARCH_ORDERS`; the module docstring).
    """
    return await search_from_source(
        theorems,
        LiveSource(generator, env),
        cfg,
        sampling=sampling,
        seed=seed,
        writer=writer,
        value_model=value_model,
        attempts=attempts,
        skip=skip,
        keep_trees=keep_trees,
        on_result=on_result,
        order=order,
    )


async def search_from_source(
    theorems: Iterable[Theorem],
    source: AnswerSource,
    cfg: SearchConfig,
    *,
    sampling: SamplingParams | None = None,
    seed: int | None = 0,
    writer: Any = None,
    value_model: ValueModel | None = None,
    attempts: int | None = None,
    skip: frozenset[tuple[str, int]] | set[tuple[str, int]] = frozenset(),
    keep_trees: bool = False,
    on_result: Callable[[SearchResult], None] | None = None,
    order: str = "priority",
) -> list[SearchResult]:
    """:func:`search_all` with its answers — candidate lists, Lean outcomes, verdicts — from
    ``source`` (:mod:`burnqed.search.sources`: live, a recorded tree, …); the search itself is the
    same code whatever answers it."""
    if cfg.expansions_per_step < 1:
        raise ValueError(f"expansions_per_step must be >= 1, got {cfg.expansions_per_step}")
    if order not in SEARCH_ORDERS:
        raise ValueError(f"order must be one of {SEARCH_ORDERS}, got {order!r}")
    if order == "random" and value_model is not None:
        raise ValueError("a random-order search has no use for a value model")
    # search.energy_weight: fitted → the value model's own weights (numbers from here on).
    if value_model is not None:
        cfg = weighted(cfg, resolve_energy_weight(cfg.energy_weight, value_meta(value_model),
                                                  logprob_weight=cfg.logprob_weight))  # fmt: skip
    else:
        cfg = dataclasses.replace(cfg, energy_weight=0.0)  # unused without a value model
    if sampling is None:
        temperature = cfg.temperature_with_ebm if value_model is not None else cfg.temperature
        sampling = SamplingParams(n=cfg.num_candidates, temperature=temperature, stop=STOP)
    n_attempts = cfg.attempts if attempts is None else attempts
    work = deque((t, a) for t in theorems for a in range(n_attempts) if (t.key, a) not in skip)
    sched = _Scheduler(source, sampling, value_model, cfg, seed)
    results: list[SearchResult] = []
    t0 = time.perf_counter()

    # A source that finds an answer it gave was wrong (the expansion cache: Lean refuted a cached
    # answer) asks for the attempt again; it answers the redo from Lean, so it happens once.  Such
    # an answer may have been served to another attempt of the same theorem (an answer is keyed on
    # the theorem's statement and tactic path), so with such a source a theorem's attempts are
    # held until its last one ends, and each is asked about again before any is written.
    redo = getattr(source, "redo", None)
    settled = getattr(source, "settled", None)
    left = Counter(t.key for t, _ in work)
    held: dict[str, list[tuple[Theorem, int, SearchResult]]] = {}

    async def searched(theorem: Theorem, a: int) -> SearchResult:
        while True:
            attempt = _Attempt(sched, source, cfg, theorem, a,
                               use_value=value_model is not None, order=order)  # fmt: skip
            result = await attempt.run()
            if redo is None or not redo(theorem.key, a):
                return result
            log.warning("%s attempt %d: redone (%s)", theorem.key, a, "; ".join(result.reasons))

    def emit(result: SearchResult) -> None:
        if settled is not None:
            settled(result.theorem, result.attempt)
        if writer is not None:
            writer.add(result)
        if on_result is not None:
            on_result(result)
        results.append(result if keep_trees else _without_tree(result))

    async def worker() -> None:
        while work:
            theorem, a = work.popleft()
            result = await searched(theorem, a)
            if redo is None:
                emit(result)
                continue
            held.setdefault(theorem.key, []).append((theorem, a, result))
            left[theorem.key] -= 1
            if left[theorem.key]:
                continue
            for th, aa, r in sorted(held.pop(theorem.key), key=lambda x: x[1]):
                if redo(th.key, aa):  # an answer it was served went since it ended
                    log.warning("%s attempt %d: redone (an answer it used was evicted)", th.key, aa)
                    r = await searched(th, aa)
                emit(r)

    try:
        await asyncio.gather(*(worker() for _ in range(max(1, cfg.concurrency))))
    finally:
        for task in list(sched.tasks):
            task.cancel()
        sched.close()
    elapsed = time.perf_counter() - t0
    sizes = sched.gen.sizes
    expansions = sum(r.nodes_expanded for r in results)
    log.info(
        "searched %d attempts in %.1f s: %d proved, %d expansions (%.1f/s); generation %d batches "
        "of mean %.1f prompts, busy %.0f%%",
        len(results),
        elapsed,
        sum(r.status == "proved" for r in results),
        expansions,
        expansions / max(elapsed, 1e-9),
        len(sizes),
        sum(sizes) / max(len(sizes), 1),
        100 * sched.gen.busy_s / max(elapsed, 1e-9),
    )
    return results


def _without_tree(r: SearchResult) -> SearchResult:

    return dataclasses.replace(r, tree=None)


__all__ = [
    "STATUSES",
    "ProofEnvironment",
    "ProofSessionLike",
    "ProofStateLike",
    "SearchResult",
    "random_key",
    "search_all",
    "search_from_source",
]
