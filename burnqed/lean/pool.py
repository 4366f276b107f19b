"""A pool of REPL workers shared by many proof searches, whose states survive worker restarts.

:class:`LeanPool` starts ``lean.workers`` REPL processes (:class:`~burnqed.lean.client.ReplClient`).
Each :class:`ProofSession` (one proof search) is pinned to the least-loaded worker when it starts — a
live one with the fewest sessions, then the fewest requests under way — so many searches (6–64)
share few workers.  There is no lock per worker: the sessions' requests go to
its client together, which pipelines them (:data:`~burnqed.lean.client.PIPELINE_DEPTH`), so the REPL
goes from one request to the next without waiting for Python.  A session hands out
:class:`ProofState`\\ s with session-local ids (``sid``) and remembers, for each, the parent and
tactic that produced it.  When its worker restarts, REPL state ids are void; the session rebuilds
the states it is asked about lazily, on next use, by starting the theorem again and replaying the
tactic path (``replays`` in :meth:`LeanPool.stats`).  Since its states must be rebuilt anyway, a
session whose worker restarted (or is restarting, or recycling) first moves to the least-loaded live
worker when that evens the load (``moves``): restarts leave sessions unevenly spread as searches
come and go, and a worker with fewer sessions than the others runs dry before them.

Workers restart:
- after any timeout (REPL-side ``interrupt`` or client-side read timeout: a timed-out REPL poisons
  later tactics, ``reference/pantograph.md`` §11) — the tactic fails with kind ``timeout``;
- after EOF, a crash or garbage on stdout — the request is retried once after restart and replay,
  then :class:`ReplError` is raised quoting the cause;
- after ``recycle_after_requests`` requests or ``recycle_after_s`` seconds (REPL memory grows): the
  old process takes no new requests, finishes those in flight, and is closed before its successor
  starts (one process per worker: with Mathlib each holds gigabytes).
A restarting worker starts its new process in the background; the next requests on it wait for it.
Requests that were queued behind the one that broke a REPL, or sent to a REPL another session had
just restarted, never ran: they are retried on the new process without counting as failures
(``crashes`` counts each broken process once).
Replay requests count towards recycling, so ``recycle_after_requests`` should stay well above the
search's ``max_depth`` (default 1000 vs 50), or every step past it would recycle and replay.

Theorems become goals by the route the REPL's ``--version`` selects (:attr:`ReplVersion.start_route`):
``frontend.process`` with ``sorrys`` (v0.3.4) or ``frontend.distil`` (later), on the file
``header-without-imports + statement + sorry``.

Example (with burnqed's propositional REPL)::

    >>> import asyncio, sys
    >>> from burnqed.config import LeanConfig
    >>> from burnqed.theorems import Theorem
    >>> cfg = LeanConfig(repl_command=(sys.executable, "-m", "burnqed.proplogic"),
    ...                  imports=(), workers=2)
    >>> thm = Theorem(name="t", formal_statement="theorem t (p q : Prop) : p ∧ q → q ∧ p := by\\n")
    >>> async def demo():
    ...     async with LeanPool(cfg) as pool:
    ...         s = await pool.start(thm)
    ...         r = await s.apply(s.root, "intro h")
    ...         return r.state.text
    >>> print(asyncio.run(demo()))   # doctest: +SKIP
    p q : Prop
    h : p ∧ q
    ⊢ q ∧ p
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from burnqed.config import LeanConfig
from burnqed.lean.client import (
    GoalState,
    ReplClient,
    ReplVersion,
    TacticRejected,
    read_version,
)
from burnqed.lean.errors import (
    ReplError,
    ReplProtocolError,
    ReplTimeoutError,
    StartError,
)
from burnqed.lean.goals import Goal, render_goals
from burnqed.lean.guard import TacticGuard
from burnqed.lean.verify import Verdict, theorem_file, verify_file, verify_proof
from burnqed.theorems import Theorem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProofState:
    """A proof state of one session."""

    sid: int  # session-local id (root = 0), stable across worker restarts
    goals: tuple[Goal, ...]
    text: str  # render_goals(goals): what the policy sees
    depth: int  # tactic steps from the root

    @property
    def solved(self) -> bool:
        return not self.goals


@dataclass(frozen=True)
class TacticSuccess:
    state: ProofState
    messages: tuple[str, ...]  # Lean's warnings/infos for the tactic
    lean_time_s: float  # REPL time of the goal.tactic request (0 when answered from the session)


@dataclass(frozen=True)
class TacticFailure:
    kind: Literal["error", "parse", "guard", "sorry", "timeout"]
    message: str
    lean_time_s: float  # REPL time; for a timeout or protocol error, the call's wall time


TacticResult = TacticSuccess | TacticFailure


MAX_TRIES = 6  # per apply/start: tries, counting retries of requests that never ran


class _Worker:
    """One REPL slot: the client that takes its requests now, and its background (re)start.

    Sessions pinned here share ``client`` without a lock: the client pipelines their requests.
    While ``client`` is None a new process is starting (``starting``) and requests wait for it;
    a replaced client may still be finishing requests already in flight (the pool's ``_retiring``).
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.client: ReplClient | None = None  # takes new requests; None while (re)starting
        self.sessions = 0  # open sessions pinned here
        self.queued = 0  # requests of those sessions under way (waiting, in the pipe or running)
        self.starting: asyncio.Task[ReplClient] | None = None  # background (re)start


class LeanPool:
    """``lean.workers`` REPL processes for many proof sessions; an async context manager."""

    def __init__(self, cfg: LeanConfig, *, log_dir: Path | None = None) -> None:
        if cfg.workers < 1:
            raise ValueError(f"lean.workers must be >= 1 (got {cfg.workers})")
        self.cfg = cfg
        self.log_dir = log_dir
        self.guard = TacticGuard.from_config(cfg)
        self.version: ReplVersion | None = None
        self._route: Literal["process", "distil"] = "process"
        self._workers: list[_Worker] = []
        self._retiring: set[ReplClient] = set()  # replaced clients not yet closed and counted
        self._closed = False
        # Each verifier is a fresh REPL with a full import (GBs with Mathlib): one at a time.
        self._verify_slot = asyncio.Semaphore(1)
        self._counts = dict.fromkeys(
            (
                "restarts",
                "recycles",
                "replays",
                "timeouts",
                "crashes",
                "sessions",
                "moves",
                "verifications",
            ),
            0,
        )
        self._retired_requests = 0  # requests and REPL time of clients already closed
        self._retired_lean_s = 0.0

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> LeanPool:
        self.version = await read_version(self.cfg)
        self._route = self.version.start_route
        log.info(
            "Pantograph %s: starting %d worker(s), start route %s",
            self.version.text,
            self.cfg.workers,
            self._route,
        )
        self._workers = [_Worker(i) for i in range(self.cfg.workers)]
        try:
            await asyncio.gather(*(self._spawn(w) for w in self._workers))
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Kill every worker's process group (idempotent); requests in flight fail with ReplError."""
        self._closed = True
        starting = [w.starting for w in self._workers if w.starting is not None]
        for task in starting:
            task.cancel()
        if starting:
            await asyncio.wait(starting)  # their clients close themselves when cancelled
        for w in self._workers:
            w.starting = None
            client, w.client = w.client, None
            if client is not None:
                self._retiring.add(client)
        for client in list(self._retiring):  # kill all at once, then reap
            client.kill("the Lean pool was closed")
        for client in list(self._retiring):
            await client.close()
            self._retired(client)

    def worker_pids(self) -> list[int | None]:
        """The current REPL pid of each worker (None while one is down or starting)."""
        return [w.client.pid if w.client is not None else None for w in self._workers]

    def stats(self) -> dict:
        """Counters since the pool started; ``lean_seconds`` is the time the REPLs spent working."""
        live = [w.client for w in self._workers if w.client is not None] + list(self._retiring)
        return {
            "workers": len(self._workers),
            "requests": self._retired_requests + sum(c.requests for c in live),
            **self._counts,
            "sessions_open": sum(w.sessions for w in self._workers),
            "lean_seconds": self._retired_lean_s + sum(c.lean_time_s for c in live),
        }

    def _log_file(self, name: str) -> Path | None:
        return None if self.log_dir is None else self.log_dir / f"{name}.stderr.log"

    async def _spawn(self, w: _Worker) -> ReplClient:
        client = ReplClient(
            self.cfg, name=f"worker{w.index}", stderr_log=self._log_file(f"worker{w.index}")
        )
        await client.start()
        w.client = client
        return client

    def _retired(self, client: ReplClient) -> None:
        """``client`` is closed: fold its counters into the pool's (once)."""
        if client in self._retiring:
            self._retiring.discard(client)
            self._retired_requests += client.requests
            self._retired_lean_s += client.lean_time_s

    def _replace(self, w: _Worker, old: ReplClient, why: str, *, drain: bool = False) -> bool:
        """Take ``old`` out of service and start its successor in the background.

        ``drain=False`` (restart) kills ``old`` now: its requests in flight fail and are retried.
        ``drain=True`` (recycle) lets them finish first; no new request reaches ``old`` either way.
        Returns False, doing nothing, when ``old`` is no longer the worker's client: another
        request's failure got there first, and one restart is enough.
        """
        if w.client is not old:
            return False
        w.client = None
        self._retiring.add(old)
        self._counts["restarts"] += 1
        log.info("worker%d: restarting (pid %s): %s", w.index, old.pid, why)
        if not drain:
            old.kill(f"restarting worker{w.index}")
        if not self._closed:
            w.starting = asyncio.create_task(self._swap(w, old, drain))
        return True

    async def _swap(self, w: _Worker, old: ReplClient, drain: bool) -> ReplClient:
        """Close (or drain and close) the old process, then start the new one.

        One process per worker at a time: with Mathlib each holds gigabytes.  If this task is
        cancelled (pool closing), ``old`` stays in ``_retiring`` and ``close`` kills it.
        """
        await (old.drain_and_close() if drain else old.close())
        self._retired(old)
        return await self._spawn(w)

    def _broken(self, w: _Worker, client: ReplClient, why: str) -> bool:
        """A request on ``client`` failed with a ReplError: restart the worker if ``client`` is still
        its REPL and return True (this request's failure is the news).  False when the worker
        already moved on: the request was collateral — queued behind another one that broke the
        REPL, or sent to a REPL another session had already restarted — and is simply retried."""
        if w.client is not client:
            return False
        self._counts["crashes"] += 1
        return self._replace(w, client, why)

    async def _ready(self, w: _Worker) -> ReplClient:
        """The worker's live client: waits for a (re)start, recycles an old one, revives a dead one.

        Any number of sessions may wait here at once; they share one (re)start.
        """
        failed_starts = 0
        for _ in range(10):  # each round makes progress or raises; 10 is far more than needed
            if self._closed:
                raise ReplError("the Lean pool is closed")
            task = w.starting
            if task is not None:
                if not task.done():
                    # Not `await task`: a cancelled waiter would cancel the start others wait for.
                    await asyncio.wait([task])
                if w.starting is task:
                    w.starting = None
                if task.cancelled():
                    continue  # the pool is closing
                if (e := task.exception()) is not None:
                    failed_starts += 1
                    if not isinstance(e, ReplError) or failed_starts >= 2:
                        raise e
                    log.warning("worker%d: restart failed (%s); trying again", w.index, e)
                continue
            client = w.client
            if client is None:  # after a failed start: try once more
                w.starting = asyncio.create_task(self._spawn(w))
                continue
            if not client.alive:
                self._counts["crashes"] += 1
                self._replace(w, client, f"pid {client.pid} died while idle")
                continue
            if (
                client.requests >= self.cfg.recycle_after_requests
                or client.age_s >= self.cfg.recycle_after_s
            ):
                self._counts["recycles"] += 1
                self._replace(
                    w,
                    client,
                    f"recycling after {client.requests} requests / {client.age_s:.0f} s",
                    drain=True,
                )
                continue
            return client
        raise ReplError(f"worker{w.index}: no usable REPL after 10 rounds of restarts")

    # -- starting theorems -------------------------------------------------------------------

    async def _start_goal(self, client: ReplClient, theorem: Theorem) -> GoalState:
        """The root state of ``theorem`` in ``client``'s REPL (the route depends on the version)."""
        file = theorem_file(theorem, ["sorry"])
        if self._route == "distil":
            try:
                targets = await client.frontend_distil(file)
            except ReplProtocolError as e:
                if e.kind == "command" and "Unknown command" in e.desc:
                    log.warning(
                        "no frontend.distil in Pantograph %s: using frontend.process",
                        self.version.text if self.version else "?",
                    )
                    self._route = "process"
                    return await self._start_goal(client, theorem)
                raise StartError(f"{theorem.key}: the statement does not elaborate: {e}") from e
            if not targets:
                raise StartError(f"{theorem.key}: frontend.distil found no goal in {file!r:.300}")
            return targets[-1]
        try:
            units = await client.frontend_process(file, sorrys=True)
        except ReplProtocolError as e:
            raise StartError(f"{theorem.key}: the statement does not elaborate: {e}") from e
        errors = [m for u in units for m in u.messages if m.severity == "error"]
        if errors:
            raise StartError(
                f"{theorem.key}: the statement does not elaborate: "
                + "; ".join(str(m) for m in errors[:5])
            )
        with_goals = [u for u in units if u.goal_state_id is not None]
        if not with_goals:
            raise StartError(
                f"{theorem.key}: no goal from {file!r:.300} (is the statement `… := by`?)"
            )
        unit = with_goals[-1]
        assert unit.goal_state_id is not None
        return GoalState(unit.goal_state_id, unit.goals)

    def _least_loaded(self) -> _Worker:
        """The worker a session should use: live before (re)starting, then the fewest sessions,
        then the fewest requests under way, then the lowest index (deterministic)."""
        return min(self._workers, key=lambda w: (w.client is None, w.sessions, w.queued, w.index))

    @staticmethod
    def _better(best: _Worker, w: _Worker) -> bool:
        """Would moving one session from ``w`` to ``best`` even the load?"""
        after = best.sessions + 1
        return after < w.sessions or (after == w.sessions and best.queued < w.queued)

    async def start(self, theorem: Theorem) -> ProofSession:
        """Open a proof session on the least-loaded worker; :class:`StartError` if it won't start."""
        if self._closed:
            raise ReplError("the Lean pool is closed")
        w = self._least_loaded()
        w.sessions += 1
        session = ProofSession(self, theorem, w)
        try:
            await session._open()
        except BaseException:
            w.sessions -= 1
            raise
        self._counts["sessions"] += 1
        return session

    # -- verification --------------------------------------------------------------------------

    async def verify(self, theorem: Theorem, tactics: Sequence[str]) -> Verdict:
        """Check the whole proof in a fresh REPL process (see :mod:`burnqed.lean.verify`)."""
        async with self._verify_slot:
            self._counts["verifications"] += 1
            return await verify_proof(
                self.cfg, theorem, tactics, stderr_log=self._log_file("verifier")
            )

    async def verify_file(self, theorem: Theorem, file: str) -> Verdict:
        """Check a whole Lean file claimed to prove ``theorem`` (statement must be unchanged)."""
        async with self._verify_slot:
            self._counts["verifications"] += 1
            return await verify_file(self.cfg, theorem, file, stderr_log=self._log_file("verifier"))


class ProofSession:
    """One proof search's view of the pool: states by session id, rebuilt by replay after restarts.

    Invariants: ``_parent[sid]``/``_tactic[sid]`` give the path of every state from the root (sid 0);
    ``_children[(parent, tactic)]`` maps each successful step to its sid, so a path names exactly one
    state; ``_repl_ids`` holds REPL ids valid only in ``_ids_client``'s process.

    ``apply`` may be called concurrently (a search applies all candidates of a step at once): the
    tactics go to the worker's REPL pipelined, and only replays take turns (``_replay_lock``).
    """

    def __init__(self, pool: LeanPool, theorem: Theorem, worker: _Worker) -> None:
        self.theorem = theorem
        self._pool = pool
        self._worker = worker
        self._states: list[ProofState] = []
        self._parent: list[int] = []  # -1 for the root
        self._tactic: list[str] = []
        self._messages: list[tuple[str, ...]] = []
        self._children: dict[tuple[int, str], int] = {}
        self._repl_ids: dict[int, int] = {}
        self._ids_client: ReplClient | None = None  # the process _repl_ids belong to
        self._replay_lock = asyncio.Lock()  # one replay at a time: they share _repl_ids
        self._closed = False

    @property
    def root(self) -> ProofState:
        return self._states[0]

    @property
    def worker_index(self) -> int:
        return self._worker.index

    async def __aenter__(self) -> ProofSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def path(self, state: ProofState) -> tuple[str, ...]:
        """The tactics from the root to ``state``."""
        steps = []
        sid = self._own(state)
        while self._parent[sid] >= 0:
            steps.append(self._tactic[sid])
            sid = self._parent[sid]
        return tuple(reversed(steps))

    def _own(self, state: ProofState) -> int:
        sid = state.sid
        if not (0 <= sid < len(self._states)) or (
            self._states[sid] is not state and self._states[sid] != state
        ):
            raise ValueError(f"{self.theorem.key}: state {sid} does not belong to this session")
        return sid

    async def _open(self) -> None:
        pool, w = self._pool, self._worker
        last: ReplError | None = None
        own_failures = 0
        for _ in range(MAX_TRIES):
            client = await pool._ready(w)
            try:
                root = await pool._start_goal(client, self.theorem)
            except StartError:
                raise
            except ReplTimeoutError as e:
                if _poisoned(w, client, e):
                    last = e
                    continue
                pool._counts["timeouts"] += 1
                pool._replace(w, client, f"timeout starting {self.theorem.key}")
                await client.close()
                raise StartError(f"{self.theorem.key}: elaborating the statement: {e}") from e
            except ReplError as e:
                last = e
                if pool._broken(w, client, f"starting {self.theorem.key}: {e}"):
                    own_failures += 1
                    if own_failures == 2:
                        break
                continue
            self._ids_client = client
            self._repl_ids = {0: root.state_id}
            self._add(ProofState(0, root.goals, render_goals(root.goals), 0), -1, "", ())
            return
        raise ReplError(
            f"{self.theorem.key}: could not start on worker{w.index} after a restart: {last}"
        ) from last

    def _add(self, state: ProofState, parent: int, tactic: str, messages: tuple[str, ...]) -> None:
        self._states.append(state)
        self._parent.append(parent)
        self._tactic.append(tactic)
        self._messages.append(messages)
        if parent >= 0:
            self._children[(parent, tactic)] = state.sid

    async def _materialize(self, client: ReplClient, sid: int) -> int:
        """The REPL id of ``sid`` in ``client``'s process, replaying its path if needed.

        Call with ``_replay_lock`` held.
        """
        if self._ids_client is not client:  # the worker restarted: every REPL id is void
            self._repl_ids = {}
            self._ids_client = client
        if sid in self._repl_ids:
            return self._repl_ids[sid]
        # Walk up to the nearest state the REPL still holds, then replay down from it.
        todo = []
        cur = sid
        while cur not in self._repl_ids and cur != 0:
            todo.append(cur)
            cur = self._parent[cur]
        if cur not in self._repl_ids:
            root = await self._pool._start_goal(client, self.theorem)
            self._pool._counts["replays"] += 1
            self._repl_ids[0] = root.state_id
        repl_id = self._repl_ids[cur]
        for child in reversed(todo):
            r = await client.goal_tactic(repl_id, self._tactic[child])
            self._pool._counts["replays"] += 1
            if not isinstance(r, GoalState):
                raise ReplError(
                    f"{self.theorem.key}: replaying {self._tactic[child]!r} (state {child}) "
                    f"after a restart failed: {r.kind}: {r.message}"
                )
            if render_goals(r.goals) != self._states[child].text:
                # Lean is deterministic up to generated names (?m.N, x✝¹), which can differ in a
                # new process; the session keeps its recorded text.
                log.warning(
                    "%s: replayed state %d differs from the recorded one", self.theorem.key, child
                )
            self._repl_ids[child] = r.state_id
            repl_id = r.state_id
        return repl_id

    def _place(self) -> _Worker:
        """The worker for this session's next request: its own, unless its REPL ids are void there
        (the worker restarted, is restarting or is recycling) and moving to a live worker evens the
        load (:meth:`LeanPool._better`).  Its states are rebuilt by replay wherever it goes, so
        such a move costs nothing extra; a session never leaves states it could still use.  (Moving
        every session off a restarting worker would be worse: it then runs dry until new sessions
        come, ``bench/search.py``.)"""
        w = self._worker
        if self._ids_client is None or self._ids_client is w.client:
            return w  # its ids are valid here, or it has just moved and holds none yet
        pool = self._pool
        best = pool._least_loaded()
        if best is w or best.client is None or not pool._better(best, w):
            return w
        w.sessions -= 1
        best.sessions += 1
        self._worker = best
        self._ids_client, self._repl_ids = None, {}
        pool._counts["moves"] += 1
        log.debug("%s: moved from worker%d to worker%d", self.theorem.key, w.index, best.index)
        return best

    async def apply(self, state: ProofState, tactic: str) -> TacticResult:
        """Run ``tactic`` on ``state`` (guard first; see the module docstring for failures).

        ``lean_time_s`` of the result is the REPL's time on the tactic; for a timeout or a
        protocol error it is the wall time of the call (which includes any wait for the worker).
        """
        if self._closed:
            raise ReplError(f"{self.theorem.key}: the proof session is closed")
        sid = self._own(state)
        if (why := self._pool.guard.check(tactic)) is not None:
            return TacticFailure("guard", why, 0.0)
        known = self._children.get((sid, tactic))
        if known is not None:  # Lean is deterministic: the same step gives the same state
            return TacticSuccess(self._states[known], self._messages[known], 0.0)
        pool = self._pool
        last: ReplError | None = None
        own_failures = 0  # failures of this request (not of ones queued beside it)
        for _ in range(MAX_TRIES):
            # Re-read each try: a concurrent apply of this session may have moved it.
            w = self._place()
            w.queued += 1
            try:
                client = await pool._ready(w)
                try:
                    async with self._replay_lock:
                        repl_id = await self._materialize(client, sid)
                except ReplError as e:  # crash, timeout or garbage while replaying
                    last = e
                    if pool._broken(w, client, f"replaying for {self.theorem.key}: {e}"):
                        own_failures += 1
                        if own_failures == 2:
                            break
                    continue
                t0 = time.perf_counter()
                try:
                    r = await client.goal_tactic(repl_id, tactic)
                except ReplTimeoutError as e:
                    if _poisoned(w, client, e):
                        last = e
                        continue
                    elapsed = time.perf_counter() - t0
                    pool._counts["timeouts"] += 1
                    pool._replace(w, client, f"timeout: {e}")
                    # The timed-out process is gone when the caller hears of it.
                    await client.close()
                    return TacticFailure("timeout", str(e), elapsed)
                except ReplProtocolError as e:
                    if e.kind == "index" and "state index" in e.desc:  # our ids went stale
                        last = e
                        if pool._broken(w, client, f"lost state ids: {e}"):
                            own_failures += 1
                            if own_failures == 2:
                                break
                        continue
                    # A Lean exception inside the tactic (PyPantograph #82): the tactic failed.
                    return TacticFailure("error", e.desc, time.perf_counter() - t0)
                except ReplError as e:
                    last = e
                    if pool._broken(w, client, str(e)):
                        own_failures += 1
                        log.warning(
                            "%s: %r (failure %d): %s", self.theorem.key, tactic, own_failures, e
                        )
                        if own_failures == 2:
                            break
                    continue
                if isinstance(r, TacticRejected):
                    return TacticFailure(r.kind, r.message, r.lean_time_s)
                new = self._record(sid, tactic, r, client)
                return TacticSuccess(new, self._messages[new.sid], r.lean_time_s)
            finally:
                w.queued -= 1
        if own_failures == 2:
            raise ReplError(
                f"{self.theorem.key}: {tactic!r} on state {sid} failed again after restarting "
                f"worker{w.index} and replaying: {last}"
            ) from last
        raise ReplError(
            f"{self.theorem.key}: {tactic!r} on state {sid}: gave up after {MAX_TRIES} tries, "
            f"worker{w.index} kept breaking under other requests: {last}"
        ) from last

    def _record(self, parent: int, tactic: str, r: GoalState, client: ReplClient) -> ProofState:
        known = self._children.get((parent, tactic))
        if known is not None:
            # A concurrent apply of the same step got there first; its state stands (this
            # duplicate REPL state is freed when the process goes).
            return self._states[known]
        state = ProofState(
            sid=len(self._states),
            goals=r.goals,
            text=render_goals(r.goals),
            depth=self._states[parent].depth + 1,
        )
        self._add(state, parent, tactic, tuple(str(m) for m in r.messages))
        if self._ids_client is client:  # else the ids moved to a newer process meanwhile
            self._repl_ids[state.sid] = r.state_id
        return state

    async def close(self) -> None:
        """Free this session's REPL states (``goal.delete``) and release its worker slot."""
        if self._closed:
            return
        self._closed = True
        w = self._worker
        w.sessions -= 1
        client, ids = self._ids_client, list(self._repl_ids.values())
        self._repl_ids = {}
        # Only in the worker's current process: a replaced one is going away with its states.
        if ids and client is not None and client is w.client and client.alive:
            try:
                await client.goal_delete(ids)
            except ReplError as e:  # the next user of the worker finds out and restarts it
                log.warning("%s: goal.delete failed: %s", self.theorem.key, e)


def _poisoned(w: _Worker, client: ReplClient, e: ReplTimeoutError) -> bool:
    """A REPL-side timeout (``interrupt``) from a REPL the worker has already replaced.

    With pipelining, a request can run right after another one timed out in the same process,
    and a timed-out REPL poisons later tactics (``reference/pantograph.md`` §11): its
    ``interrupt`` may not be its own.  It is retried on the fresh process instead of reported.
    """
    return not e.killed and w.client is not client


__all__ = [
    "LeanPool",
    "ProofSession",
    "ProofState",
    "ReplError",
    "StartError",
    "TacticFailure",
    "TacticResult",
    "TacticSuccess",
    "Verdict",
]
