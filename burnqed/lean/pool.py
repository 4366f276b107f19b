"""A pool of REPL workers shared by many proof searches, whose states survive worker restarts.

:class:`LeanPool` starts ``lean.workers`` REPL processes (:class:`~burnqed.lean.client.ReplClient`).
Each :class:`ProofSession` (one proof search) is pinned to the least-loaded worker when it starts — a
live one with the fewest sessions, then the fewest requests under way — so many searches (6–64)
share few workers.  There is no lock per worker: the sessions' requests go to
its client together, which pipelines them (:data:`~burnqed.lean.client.PIPELINE_DEPTH`), so the REPL
goes from one request to the next without waiting for Python.  A session hands out
:class:`ProofState`\\ s with session-local ids (``sid``) and remembers, for each, the parent and
tactic that produced it.

**A tactic's result is decided by its heartbeat limit** (``lean.tactic_heartbeats``, sent by the
client as ``set_option maxHeartbeats N in <tactic>``): hitting it is an ordinary failure of kind
``heartbeats``, the same on every run.  The wall-clock limits behind it are backstops, and a firing
fails that one tactic (kind ``timeout``, which the search counts as a non-deterministic event):

- **a cooperative interrupt keeps the REPL.**  The REPL's own ``timeout`` (``lean.tactic_timeout_s``)
  answers ``interrupt``; the process and every state stay (``interrupts``): Pantograph's own test
  runs the next tactic on the same state (``reference/pantograph.md`` §8).  Only when the same
  state's next tactic in the same process also times out is the worker restarted (LeanDojo's
  "timed-out state poisons the next tactic", issue #218, guarded against, not assumed);
- **a hard hang kills it**: no reply within ``lean.hang_grace_s`` after the REPL's timeout
  (``hard_hangs``).

An error reply to ``goal.tactic`` (``{"error": kind, "desc": …}``) is one of three things: the
REPL's interrupt (any wording of it: :func:`~burnqed.lean.errors.is_interrupt`), a ``timeout``
above; a Lean exception raised inside the tactic (``core``, ``exception``: some tactics a file
accepts fail so, PyPantograph #82), a failed tactic of kind ``error`` like any other; or the
protocol's own (a malformed request, an index that is not a state's: ``protocol_errors``), a
failure of kind ``protocol`` — no verdict of Lean's on the tactic, so the expansion cache never
keeps it — except a stale state index, which restarts the worker and retries.

Workers also restart after EOF, a crash or garbage on stdout (``crashes``; the request is retried
once after the restart, then :class:`ReplError` quotes the cause), and are recycled after
``recycle_after_requests`` requests or ``recycle_after_s`` seconds (``recycles``: the old process
finishes the requests in flight and takes no new ones).

**A warm spare takes over.**  ``lean.spares`` REPLs are started ahead (imports loaded); a killed or
recycled worker's place goes to one at once (``spare_takeovers``), so no import is on the critical
path, and the next spare starts in the background once the old process is gone (the memory budget:
``workers + spares`` search processes).  Idle spares are recycled after ``recycle_after_s`` like
workers.  Without a spare ready, the worker starts a new process in the background and its requests
wait for it.

**Restore, don't replay.**  A restart voids the REPL ids of every state of the sessions on that
worker.  A state is written with ``goal.save`` when it is made if replaying it would cost at least
``lean.save_factor`` saves — its path's Lean time from the root or its nearest saved ancestor, next
to the mean time a save has taken so far (``saves``; to a per-pool temporary directory removed on
close): a save is insurance against a rare restart, worth buying where a replay is dear.  A session
rebuilds the states it is asked about lazily, on next use, in the new process: by ``goal.load`` of
the state or its nearest saved ancestor (``loads``) and replay of the tactics below it
(``replays``); the theorem is started again (``reopens``) only when a replay must begin at the root.
A saved state needs the same imports, and Pantograph pickles with it the constants its file added
(a ProofNet header's definitions: ``goalStatePickle`` stores ``env.constants.map₂`` and
``goal.load`` replays them), so no header is re-run before a load.  A load that fails
(``load_failures``) falls back to the next saved ancestor, then to replay from the root.  Since its
states must be rebuilt anyway, a session whose worker restarted first moves to the least-loaded live
worker when that evens the load (``moves``).

**Adopted states.**  An answer that did not come from this session's REPL — a recorded search's
tree (``burnqed replay``), the expansion cache — is added with :meth:`ProofSession.adopt` (parent,
tactic, the printed state): no Lean runs, and the state has no REPL id in any process, exactly like
a state whose worker restarted.  Its first live use rebuilds it the same way (``goal.load`` of the
nearest saved ancestor, replay of the tactics below it; a chain of adopted states replays from the
nearest state the REPL holds), counted as ``rebuilds`` (one per adopted state); a rebuilt state whose
printed form differs from the adopted one counts as a ``disagreement``, and the live state is what
later tactics run on.

Requests that were queued behind the one that broke a REPL, or sent to a REPL another session had
just restarted, never ran: they are retried on the new process without counting as failures
(``crashes`` counts each broken process once).  Replay requests count towards recycling, so
``recycle_after_requests`` should stay well above the search's ``max_depth`` (default 1000 vs 50).

**Verification off the critical path**: :meth:`LeanPool.verify` checks a found proof as a whole
file in a fresh process that was started ahead (``lean.verifiers`` of them warm; each is used for one
check, then discarded, and the next starts in the background), at most ``lean.verifiers`` checks at
once, overlapping the other theorems' searches.

Theorems become goals by the route the REPL's ``--version`` selects (:attr:`ReplVersion.start_route`):
``frontend.process`` with ``sorrys`` (v0.3.4) or ``frontend.distil`` (later), on the file
``header-without-imports + statement + sorry``.  Only Lean's own verdict on that file is a
:class:`StartError` (the statement's defect); a timeout, interrupt or crash while it elaborates is a
:class:`ReplError` (infrastructure, retried by ``--resume``).

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
import contextlib
import itertools
import logging
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from burnqed.config import LeanConfig
from burnqed.lean.client import (
    GoalState,
    ReplClient,
    ReplVersion,
    TacticRejected,
    read_version,
)
from burnqed.lean.errors import (
    LEAN_EXCEPTION_KINDS,
    ReplError,
    ReplProtocolError,
    ReplTimeoutError,
    StartError,
)
from burnqed.lean.goals import NO_GOALS, Goal, render_goals
from burnqed.lean.guard import TacticGuard
from burnqed.lean.verify import Verdict, theorem_file, verify_file, verify_proof
from burnqed.outcomes import POOL_COUNTERS
from burnqed.theorems import Theorem

log = logging.getLogger(__name__)

# `{"error": kind}` replies to a start that say nothing about the statement: the REPL's own
# failure (an exception in a command, IO) or ours (a request it could not decode).
_INFRASTRUCTURE_KINDS = frozenset({"internal", "io", "main", "command"})


@dataclass(frozen=True)
class ProofState:
    """A proof state of one session."""

    sid: int  # session-local id (root = 0), stable across worker restarts
    # None for a state adopted from an answer that carried only its text (ProofSession.adopt)
    goals: tuple[Goal, ...] | None
    text: str  # render_goals(goals): what the policy sees
    depth: int  # tactic steps from the root

    @property
    def solved(self) -> bool:
        return self.text == NO_GOALS if self.goals is None else not self.goals


@dataclass(frozen=True)
class TacticSuccess:
    state: ProofState
    messages: tuple[str, ...]  # Lean's warnings/infos for the tactic
    lean_time_s: float  # REPL time of the goal.tactic request (0 when answered from the session)


@dataclass(frozen=True)
class TacticFailure:
    # heartbeats: the deterministic per-tactic limit; timeout: a wall-clock backstop fired;
    # protocol: the REPL answered an error reply of its protocol's, no verdict of Lean's
    kind: Literal["error", "parse", "guard", "sorry", "heartbeats", "timeout", "protocol"]
    message: str
    lean_time_s: float  # REPL time; for a timeout or protocol error, the call's wall time


TacticResult = TacticSuccess | TacticFailure


class AdoptedStateError(ReplError):
    """An adopted state (:meth:`ProofSession.adopt`) could not be rebuilt: Lean rejects a tactic of
    its path that the answer adopted said succeeded.  Counted as a disagreement; the attempt cannot
    go on from that state (an infrastructure-class error: ``--resume`` or a live run redoes it; the
    expansion cache evicts the answer and redoes the attempt live).  ``sid``: the adopted state
    whose step Lean rejects; ``tactic``: that step."""

    def __init__(self, message: str, *, sid: int | None = None, tactic: str | None = None) -> None:
        super().__init__(message)
        self.sid = sid
        self.tactic = tactic


MAX_TRIES = 6  # per apply/start: tries, counting retries of requests that never ran


@contextlib.contextmanager
def _leaves(starts: set[asyncio.Task[None]]) -> Iterator[None]:
    """The running start task leaves ``starts`` as it ends, in the step that publishes its process.

    A done callback would remove it one loop turn later: a take in between counted the new
    process twice (published and still starting) and started no successor.
    """
    try:
        yield
    finally:
        starts.discard(asyncio.current_task())  # type: ignore[arg-type]


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
        self._names = itertools.count()  # process names: spare<n>, verifier<n>
        self._session_numbers = itertools.count()  # names of saved-state files
        self._state_dir: Path | None = None  # goal.save files; removed on close
        # Warm spares (started, imports loaded, never used), spares starting, their recycle timers.
        self._spares: list[ReplClient] = []
        self._spare_starts: set[asyncio.Task[None]] = set()
        self._spare_timers: dict[ReplClient, asyncio.TimerHandle] = {}
        # Warm verifiers: each checks one proof, then goes.  A start's outcome (a client or the
        # error) is queued, so a check never waits on a start that failed.
        self._verifiers: asyncio.Queue[ReplClient | ReplError] = asyncio.Queue()
        self._warm_verifiers: set[ReplClient] = set()  # those in the queue
        self._verifier_starts: set[asyncio.Task[None]] = set()
        self._verify_slots = asyncio.Semaphore(cfg.verifiers)
        self._background: set[asyncio.Task[Any]] = set()  # closing retired processes, refills
        self._starting: set[ReplClient] = set()  # processes between spawn and `ready.`
        self._counts = dict.fromkeys(POOL_COUNTERS, 0)
        # The mean REPL time of a goal.save so far; None until one is measured (until then one
        # state at a time is saved, which measures it).
        self._save_cost_s: float | None = None
        self._saves_in_flight = 0
        self._retired_requests = 0  # requests and REPL time of clients already closed
        self._retired_lean_s = 0.0

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> LeanPool:
        self.version = await read_version(self.cfg)
        self._route = self.version.start_route
        log.info(
            "Pantograph %s: starting %d worker(s), %d spare(s), %d verifier(s); start route %s",
            self.version.text,
            self.cfg.workers,
            self.cfg.spares,
            self.cfg.verifiers,
            self._route,
        )
        self._state_dir = Path(tempfile.mkdtemp(prefix="burnqed-states-"))
        self._workers = [_Worker(i) for i in range(self.cfg.workers)]
        try:
            # Spares and verifiers start beside the workers: ready before the first restart and
            # the first proof, and the start-up costs one import's wall time, not three.
            self._fill_spares()
            self._fill_verifiers()
            await asyncio.gather(
                *(self._spawn(w) for w in self._workers),
                *self._spare_starts,
                *self._verifier_starts,
            )
        except BaseException:
            await self.close()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Kill every REPL process group (idempotent); requests in flight fail with ReplError."""
        if not self._closed and self._save_cost_s is not None:
            # What a save costs on this REPL: bench/search.py's --save-s, measured for real.
            log.info(
                "goal.save: %d states, %.2f ms each on average",
                self._counts["saves"],
                self._save_cost_s * 1000,
            )
        self._closed = True
        tasks = [w.starting for w in self._workers if w.starting is not None]
        tasks += [*self._spare_starts, *self._verifier_starts, *self._background]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)  # clients being started close themselves when cancelled
        for w in self._workers:
            w.starting = None
            client, w.client = w.client, None
            if client is not None:
                self._retiring.add(client)
        for timer in self._spare_timers.values():
            timer.cancel()
        self._spare_timers.clear()
        others = self._spares
        self._spares = []
        others += self._warm_verifiers
        self._warm_verifiers = set()
        while not self._verifiers.empty():
            self._verifiers.get_nowait()
        for _ in range(
            self.cfg.verifiers
        ):  # wake the checks waiting for a verifier (at most this many)
            self._verifiers.put_nowait(ReplError("the Lean pool is closed"))
        for client in [*self._retiring, *others]:  # kill all at once, then reap
            client.kill("the Lean pool was closed")
        for client in list(self._retiring):
            await client.close()
            self._retired(client)
        for client in others:
            await client.close()
        if self._state_dir is not None:
            shutil.rmtree(self._state_dir, ignore_errors=True)
            self._state_dir = None

    def worker_pids(self) -> list[int | None]:
        """The current REPL pid of each worker (None while one is down or starting)."""
        return [w.client.pid if w.client is not None else None for w in self._workers]

    def spare_pids(self) -> list[int | None]:
        """The pids of the warm spares (started, not yet used)."""
        return [c.pid for c in self._spares]

    def pids(self) -> list[int]:
        """Every REPL process the pool holds now: workers, retiring ones, spares, warm verifiers and
        those starting (not a verifier checking a proof)."""
        clients = [w.client for w in self._workers if w.client is not None]
        clients += [*self._retiring, *self._spares, *self._warm_verifiers, *self._starting]
        return sorted({c.pid for c in clients if c.pid is not None and c.alive})

    def repl_process(self) -> dict | None:
        """Where a worker's REPL runs — the executable, working directory and environment of the
        process that answers it (:func:`~burnqed.lean.environment.repl_process`): what the
        expansion cache keys Lean answers on; None when no worker is running."""
        from burnqed.lean.environment import repl_process

        for w in self._workers:
            if w.client is not None and w.client.alive:
                return repl_process(w.client.pid)
        return None

    def stats(self) -> dict:
        """:data:`~burnqed.outcomes.POOL_COUNTERS` since the pool started, with ``workers``,
        ``requests``, ``sessions_open`` and ``lean_seconds`` (the time worker REPLs spent
        working)."""
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

    def _state_path(self, session: int, sid: int) -> Path:
        assert self._state_dir is not None
        return self._state_dir / f"s{session}-{sid}.state"

    def _in_background(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _spawn(self, w: _Worker) -> ReplClient:
        client = ReplClient(
            self.cfg, name=f"worker{w.index}", stderr_log=self._log_file(f"worker{w.index}")
        )
        await self._start(client)
        w.client = client
        return client

    async def _start(self, client: ReplClient) -> None:
        self._starting.add(client)
        try:
            await client.start()
        finally:
            self._starting.discard(client)

    def _retired(self, client: ReplClient) -> None:
        """``client`` is closed: fold its counters into the pool's (once)."""
        if client in self._retiring:
            self._retiring.discard(client)
            self._retired_requests += client.requests
            self._retired_lean_s += client.lean_time_s

    # -- spares ------------------------------------------------------------------------------

    def _fill_spares(self) -> None:
        """Start spares until ``lean.spares`` are ready or starting."""
        while not self._closed and len(self._spares) + len(self._spare_starts) < self.cfg.spares:
            task = asyncio.create_task(self._start_spare())
            self._spare_starts.add(task)
            task.add_done_callback(self._spare_starts.discard)

    async def _start_spare(self) -> None:
        with _leaves(self._spare_starts):
            name = f"spare{next(self._names)}"
            client = ReplClient(self.cfg, name=name, stderr_log=self._log_file(name))
            try:
                await self._start(client)
            except ReplError as e:  # the next takeover finds no spare and starts one itself
                log.warning("%s did not start: %s", name, e)
                return
            if self._closed:
                await client.close()
                return
            self._spares.append(client)
            loop = asyncio.get_running_loop()
            self._spare_timers[client] = loop.call_later(
                self.cfg.recycle_after_s, self._expire_spare, client
            )

    def _expire_spare(self, client: ReplClient) -> None:
        """A spare idle for ``recycle_after_s``: replaced like a worker would be."""
        self._spare_timers.pop(client, None)
        if client in self._spares and not self._closed:
            self._spares.remove(client)
            self._counts["recycles"] += 1
            self._in_background(self._close_then_refill(client))

    def _take_spare(self) -> ReplClient | None:
        while self._spares:
            client = self._spares.pop(0)
            timer = self._spare_timers.pop(client, None)
            if timer is not None:
                timer.cancel()
            if client.alive:
                return client
            log.warning("%s died while waiting (pid %s)", client.name, client.pid)
            self._counts["crashes"] += 1
            self._in_background(self._close_then_refill(client))
        return None

    async def _close_then_refill(self, client: ReplClient, *, drain: bool = False) -> None:
        """Close a process that left service, then start the spare that keeps the count (after,
        not before: the memory budget is workers + spares)."""
        await (client.drain_and_close() if drain else client.close())
        self._retired(client)
        self._fill_spares()

    # -- restarts ----------------------------------------------------------------------------

    def _replace(self, w: _Worker, old: ReplClient, why: str, *, drain: bool = False) -> bool:
        """Take ``old`` out of service: a warm spare takes its place, or a new process starts.

        ``drain=False`` (restart) kills ``old`` now: its requests in flight fail and are retried.
        ``drain=True`` (recycle) lets them finish first; no new request reaches ``old`` either way.
        Returns False, doing nothing, when ``old`` is no longer the worker's client: another
        request's failure got there first, and one restart is enough.
        """
        if w.client is not old:
            return False
        self._retiring.add(old)
        self._counts["restarts"] += 1
        if not drain:
            old.kill(f"restarting worker{w.index}")
        spare = None if self._closed else self._take_spare()
        if spare is not None:
            log.info(
                "worker%d: %s (pid %s) takes over from pid %s: %s",
                w.index,
                spare.name,
                spare.pid,
                old.pid,
                why,
            )
            spare.name = f"worker{w.index}"
            w.client = spare
            self._counts["spare_takeovers"] += 1
            self._in_background(self._close_then_refill(old, drain=drain))
            return True
        log.info("worker%d: restarting (pid %s), no spare ready: %s", w.index, old.pid, why)
        w.client = None
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

    def _failed(self, w: _Worker, client: ReplClient, e: ReplError, why: str) -> bool:
        """A request on ``client`` failed with ``e`` (not a cooperative interrupt): count it and
        restart the worker if ``client`` is still its REPL, and return True (this request's
        failure is the news).  False when the worker already moved on: the request was
        collateral — queued behind another one that broke the REPL, or sent to a REPL another
        session had already restarted — and is simply retried."""
        if isinstance(e, ReplTimeoutError):  # whoever sent it, the clock fired on this request
            self._counts["hard_hangs" if e.killed else "interrupts"] += 1
        elif w.client is client:
            self._counts["crashes"] += 1
        if w.client is not client:
            log.debug("worker%d: collateral failure, retried: %s", w.index, e)
            return False
        return self._replace(w, client, why)

    @contextlib.asynccontextmanager
    async def _leased(self, w: _Worker) -> AsyncIterator[ReplClient]:
        """The worker's live client (:meth:`_ready`), leased for the caller's sequence of requests
        (:meth:`ReplClient.lease`): a recycle that begins meanwhile waits for it to end."""
        client = await self._ready(w)
        with client.lease():
            yield client

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
            if client is None:  # after a failed start: a spare, or one more start
                if (spare := self._take_spare()) is not None:
                    spare.name = f"worker{w.index}"
                    w.client = spare
                    self._counts["spare_takeovers"] += 1
                    self._fill_spares()
                else:
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
        """The root state of ``theorem`` in ``client``'s REPL (the route depends on the version).

        :class:`StartError` only for Lean's own verdict on the statement; a timeout, an interrupt,
        a crash or an error reply of the REPL's own (:data:`_INFRASTRUCTURE_KINDS`) propagate as
        the :class:`ReplError` they are.
        """
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
                if e.kind in _INFRASTRUCTURE_KINDS:
                    raise
                raise StartError(f"{theorem.key}: the statement does not elaborate: {e}") from e
            if not targets:
                raise StartError(f"{theorem.key}: frontend.distil found no goal in {file!r:.300}")
            return targets[-1]
        try:
            units = await client.frontend_process(file, sorrys=True)
        except ReplProtocolError as e:
            if e.kind in _INFRASTRUCTURE_KINDS:
                raise
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
        """Open a proof session on the least-loaded worker.

        :class:`StartError` if Lean rejects the statement; :class:`ReplError` if the REPL could
        not say (a timeout, interrupt or crash while it elaborated: infrastructure).
        """
        if self._closed:
            raise ReplError("the Lean pool is closed")
        w = self._least_loaded()
        w.sessions += 1
        session = ProofSession(self, theorem, w, next(self._session_numbers))
        try:
            await session._open()
        except BaseException:
            w.sessions -= 1
            raise
        self._counts["sessions"] += 1
        return session

    def _should_save(self, replay_s: float) -> bool:
        """Does a state that would take ``replay_s`` to replay pay its save (``lean.save_factor``)?"""
        factor = self.cfg.save_factor
        if factor is None:
            return False
        if factor == 0:  # every state
            return True
        if self._save_cost_s is None:  # nothing measured yet: one save at a time measures it
            return self._saves_in_flight == 0
        return replay_s >= factor * self._save_cost_s

    def _saved(self, lean_s: float | None) -> None:
        """A goal.save ended: it took ``lean_s`` of the REPL's time (None: it failed)."""
        self._saves_in_flight -= 1
        if lean_s is None:
            return
        self._counts["saves"] += 1
        mean = self._save_cost_s or 0.0
        self._save_cost_s = mean + (lean_s - mean) / self._counts["saves"]

    # -- verification --------------------------------------------------------------------------

    def _fill_verifiers(self) -> None:
        """Start verifiers until ``lean.verifiers`` are warm or starting."""
        while (
            not self._closed
            and self._verifiers.qsize() + len(self._verifier_starts) < self.cfg.verifiers
        ):
            task = asyncio.create_task(self._start_verifier())
            self._verifier_starts.add(task)
            task.add_done_callback(self._verifier_starts.discard)

    async def _start_verifier(self) -> None:
        with _leaves(self._verifier_starts):
            name = f"verifier{next(self._names)}"
            client = ReplClient(self.cfg, name=name, stderr_log=self._log_file("verifier"))
            try:
                await self._start(client)
            except ReplError as e:
                self._verifiers.put_nowait(e)  # the check waiting for it fails, not hangs
                return
            if self._closed:
                await client.close()
                return
            self._warm_verifiers.add(client)
            self._verifiers.put_nowait(client)

    async def _take_verifier(self) -> ReplClient:
        """A warm verifier (waiting for one to start if none is warm); the next one starts now."""
        while True:
            self._fill_verifiers()
            got = await self._verifiers.get()
            self._fill_verifiers()  # its successor starts while it checks
            if isinstance(got, ReplError):
                raise got
            self._warm_verifiers.discard(got)
            if got.alive:
                return got
            log.warning("%s died while waiting (pid %s)", got.name, got.pid)
            await got.close()

    async def verify(self, theorem: Theorem, tactics: Sequence[str]) -> Verdict:
        """Check the whole proof in a fresh REPL process (see :mod:`burnqed.lean.verify`)."""
        return await self._verify(
            lambda: verify_proof(self.cfg, theorem, tactics, repl=self._take_verifier)
        )

    async def verify_file(self, theorem: Theorem, file: str) -> Verdict:
        """Check a whole Lean file claimed to prove ``theorem`` (statement must be unchanged)."""
        return await self._verify(
            lambda: verify_file(self.cfg, theorem, file, repl=self._take_verifier)
        )

    async def _verify(self, check: Callable[[], Awaitable[Verdict]]) -> Verdict:
        if self._closed:
            raise ReplError("the Lean pool is closed")
        async with self._verify_slots:
            self._counts["verifications"] += 1
            return await check()


class ProofSession:
    """One proof search's view of the pool: states by session id, restored after restarts.

    Invariants: ``_parent[sid]``/``_tactic[sid]`` give the path of every state from the root (sid 0);
    ``_children[(parent, tactic)]`` maps each successful step to its sid, so a path names exactly one
    state; ``_repl_ids`` holds REPL ids valid only in ``_ids_client``'s process; ``_saved[sid]`` is a
    ``goal.save`` file of state ``sid``, valid in any process with the same imports.

    ``apply`` may be called concurrently (a search applies all candidates of a step at once): the
    tactics go to the worker's REPL pipelined, and only restores take turns (``_replay_lock``).
    """

    def __init__(self, pool: LeanPool, theorem: Theorem, worker: _Worker, number: int) -> None:
        self.theorem = theorem
        self._pool = pool
        self._worker = worker
        self._number = number  # names its goal.save files
        self._states: list[ProofState] = []
        self._parent: list[int] = []  # -1 for the root
        self._tactic: list[str] = []
        self._messages: list[tuple[str, ...]] = []
        self._children: dict[tuple[int, str], int] = {}
        self._repl_ids: dict[int, int] = {}
        self._ids_client: ReplClient | None = None  # the process _repl_ids belong to
        self._replay_lock = asyncio.Lock()  # one restore at a time: they share _repl_ids
        self._saved: dict[int, Path] = {}  # sid -> goal.save file (written and acknowledged)
        # sid -> Lean seconds to replay it from the root or its nearest saved ancestor
        self._replay_s: list[float] = []
        self._saving: set[int] = set()  # sids whose goal.save is under way
        self._save_replies: set[asyncio.Future[dict]] = set()  # goal.save replies to come
        # sid -> the process in which its last tactic was interrupted: a second interrupt on the
        # same state there restarts the worker (a state that keeps timing out may be poisoned).
        self._timed_out: dict[int, ReplClient] = {}
        self._adopted: set[int] = set()  # sids added by adopt() and not rebuilt in Lean yet
        # sid -> called with the live text when that adopted state is rebuilt printed otherwise
        self._on_disagreement: dict[int, Callable[[str], None]] = {}
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

    def adopt(
        self,
        parent: ProofState,
        tactic: str,
        text: str,
        *,
        goals: tuple[Goal, ...] | None = None,
        lean_s: float = 0.0,
        on_disagreement: Callable[[str], None] | None = None,
    ) -> ProofState:
        """Add the state ``tactic`` makes from ``parent`` as an answer from elsewhere (a recording,
        a cache) says — printed as ``text`` — without running Lean (module docstring).

        The state is rebuilt in the REPL on its first live use (``rebuilds``; a different printed
        form is a ``disagreement``, and the live state wins; ``on_disagreement`` is then called
        with the live text, so the answer's owner can drop it).  ``goals`` when the answer has
        them; ``lean_s`` is what the tactic cost where it was answered (the replay-cost estimate
        that decides saves).  Adopting a step the session already knows returns the known state.
        """
        if self._closed:
            raise ReplError(f"{self.theorem.key}: the proof session is closed")
        sid = self._own(parent)
        known = self._children.get((sid, tactic))
        if known is not None:
            return self._states[known]
        if goals is not None and render_goals(goals) != text:
            raise ValueError(f"{self.theorem.key}: adopted goals do not print as {text!r}")
        state = ProofState(len(self._states), goals, text, self._states[sid].depth + 1)
        self._add(state, sid, tactic, (), lean_s)
        self._adopted.add(state.sid)
        if on_disagreement is not None:
            self._on_disagreement[state.sid] = on_disagreement
        self._pool._counts["adopted"] += 1
        return state

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
            async with pool._leased(w) as client:  # a recycle waits for the start and its save
                t0 = time.perf_counter()
                try:
                    root = await pool._start_goal(client, self.theorem)
                except StartError:
                    raise  # Lean's verdict on the statement: a result
                except ReplTimeoutError as e:
                    # The clock, not Lean, stopped the statement: an infrastructure error
                    # (retried by --resume), never the statement's defect.
                    if e.killed:
                        pool._failed(w, client, e, f"hard hang starting {self.theorem.key}: {e}")
                    else:
                        pool._counts["interrupts"] += 1
                    raise ReplError(
                        f"{self.theorem.key}: the statement did not finish elaborating: {e}"
                    ) from e
                except ReplError as e:
                    last = e
                    if pool._failed(w, client, e, f"starting {self.theorem.key}: {e}"):
                        own_failures += 1
                        if own_failures == 2:
                            break
                    continue
                self._ids_client = client
                self._repl_ids = {0: root.state_id}
                state = ProofState(0, root.goals, render_goals(root.goals), 0)
                self._add(state, -1, "", (), time.perf_counter() - t0)
                await self._save(client, 0, root.state_id)
                return
        raise ReplError(
            f"{self.theorem.key}: could not start on worker{w.index} after a restart: {last}"
        ) from last

    def _add(
        self,
        state: ProofState,
        parent: int,
        tactic: str,
        messages: tuple[str, ...],
        lean_s: float,
    ) -> None:
        """Record a new state made by ``tactic`` on ``parent`` in ``lean_s`` seconds of Lean."""
        self._states.append(state)
        self._parent.append(parent)
        self._tactic.append(tactic)
        self._messages.append(messages)
        # What replaying it would cost: its own tactic, and its parent's path unless the parent
        # is (being) saved and would come back with one goal.load.
        behind = parent >= 0 and parent not in self._saved and parent not in self._saving
        self._replay_s.append(lean_s + (self._replay_s[parent] if behind else 0.0))
        if parent >= 0:
            self._children[(parent, tactic)] = state.sid

    async def _materialize(self, client: ReplClient, sid: int) -> int:
        """The REPL id of ``sid`` in ``client``'s process, restoring it if needed: ``goal.load`` of
        the nearest saved state on its path, then replay of the tactics below it (from the root,
        started again, when nothing on the path is saved).  Call with ``_replay_lock`` held."""
        pool = self._pool
        if self._ids_client is not client:  # the worker restarted: every REPL id is void
            self._repl_ids = {}
            self._timed_out.clear()
            self._ids_client = client
        if sid in self._repl_ids:
            return self._repl_ids[sid]
        # Walk up to the nearest state the REPL holds or can load, then replay down from it.
        todo = []
        cur = sid
        while cur not in self._repl_ids and cur not in self._saved and cur != 0:
            todo.append(cur)
            cur = self._parent[cur]
        if cur in self._repl_ids:
            repl_id = self._repl_ids[cur]
        elif cur in self._saved:
            try:
                repl_id = await client.goal_load(self._saved[cur])
            except ReplProtocolError as e:  # the file or the environment did not do: go higher
                pool._counts["load_failures"] += 1
                log.warning(
                    "%s: goal.load of state %d failed (%s); restoring from higher up",
                    self.theorem.key,
                    cur,
                    e,
                )
                del self._saved[cur]
                return await self._materialize(client, sid)
            pool._counts["loads"] += 1
            self._repl_ids[cur] = repl_id
        else:
            try:
                root = await pool._start_goal(client, self.theorem)
            except StartError as e:  # it started before: the REPL, not the statement, changed
                raise ReplError(f"{self.theorem.key}: restarting the statement failed: {e}") from e
            pool._counts["reopens"] += 1
            self._repl_ids[0] = repl_id = root.state_id
        for child in reversed(todo):
            r = await client.goal_tactic(repl_id, self._tactic[child])
            pool._counts["replays"] += 1
            if not isinstance(r, GoalState):
                if child in self._adopted:  # the answer adopted is not what Lean says here
                    pool._counts["rebuilds"] += 1
                    pool._counts["disagreements"] += 1
                    raise AdoptedStateError(
                        f"{self.theorem.key}: the adopted state {child} cannot be rebuilt: Lean "
                        f"rejects {self._tactic[child]!r} ({r.kind}: {r.message})",
                        sid=child,
                        tactic=self._tactic[child],
                    )
                raise ReplError(
                    f"{self.theorem.key}: replaying {self._tactic[child]!r} (state {child}) "
                    f"after a restart failed: {r.kind}: {r.message}"
                )
            differs = render_goals(r.goals) != self._states[child].text
            if child in self._adopted:  # first live use of an answer from elsewhere
                self._adopted.discard(child)
                pool._counts["rebuilds"] += 1
                if differs:  # the printed state is a lossy key (⋯, ✝, metavariables)
                    pool._counts["disagreements"] += 1
                    log.warning(
                        "%s: adopted state %d differs from the live one; the live one stands:\n"
                        "adopted: %s\nlive: %s",
                        self.theorem.key, child, self._states[child].text, render_goals(r.goals),
                    )  # fmt: skip
                    notify = self._on_disagreement.pop(child, None)
                    if notify is not None:  # the answer's owner (a cache) evicts it
                        notify(render_goals(r.goals))
                self._on_disagreement.pop(child, None)
            elif differs:
                # Lean is deterministic up to generated names (?m.N, x✝¹), which can differ in a
                # new process; the session keeps its recorded text.
                log.warning(
                    "%s: replayed state %d differs from the recorded one", self.theorem.key, child
                )
            self._repl_ids[child] = r.state_id
            repl_id = r.state_id
            await self._save(client, child, repl_id)  # saved once, loadable after any restart
        return repl_id

    async def _save(self, client: ReplClient, sid: int, repl_id: int) -> None:
        """``goal.save`` state ``sid`` if the policy says so and it is not saved yet.

        The request is written before this returns (so it runs before anything this session sends
        next), and its reply is handled when it comes: a save never delays a search.
        """
        pool = self._pool
        if sid in self._saved or sid in self._saving or not pool._should_save(self._replay_s[sid]):
            return
        path = pool._state_path(self._number, sid)
        try:
            reply = await client.submit("goal.save", {"id": repl_id, "path": str(path)})
        except ReplError:  # the process is going away: the state will be replayed if needed
            return
        self._saving.add(sid)
        pool._saves_in_flight += 1
        self._save_replies.add(reply)
        reply.add_done_callback(lambda f: self._saved_when(f, sid, path))

    def _saved_when(self, reply: asyncio.Future[tuple[dict, float]], sid: int, path: Path) -> None:
        self._save_replies.discard(reply)
        self._saving.discard(sid)
        if reply.cancelled() or (e := reply.exception()) is not None:
            # killed with its process, refused, or its session closed: replay stays the way back
            if not reply.cancelled():
                log.debug("%s: goal.save of state %d failed: %s", self.theorem.key, sid, e)
            self._pool._saved(None)
            return
        self._pool._saved(reply.result()[1])
        if not self._closed:
            self._saved[sid] = path

    def _place(self) -> _Worker:
        """The worker for this session's next request: its own, unless its REPL ids are void there
        (the worker restarted, is restarting or is recycling) and moving to a live worker evens the
        load (:meth:`LeanPool._better`).  Its states are restored wherever it goes, so such a move
        costs nothing extra; a session never leaves states it could still use.  (Moving every
        session off a restarting worker would be worse: it then runs dry until new sessions come,
        ``bench/search.py``.)"""
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
                async with pool._leased(w) as client:  # a recycle waits for this restore-and-run
                    try:
                        if self._ids_client is client and sid in self._repl_ids:
                            repl_id = self._repl_ids[sid]  # the common case: nothing to restore
                        else:
                            async with self._replay_lock:
                                repl_id = await self._materialize(client, sid)
                    except AdoptedStateError:
                        raise  # Lean's answer, not the REPL's health: no restart would change it
                    except ReplError as e:  # crash, hang or garbage while restoring
                        last = e
                        if pool._failed(w, client, e, f"restoring for {self.theorem.key}: {e}"):
                            own_failures += 1
                            if own_failures == 2:
                                break
                        continue
                    t0 = time.perf_counter()
                    try:
                        r = await client.goal_tactic(repl_id, tactic)
                    except ReplTimeoutError as e:
                        elapsed = time.perf_counter() - t0
                        if e.killed:  # a hard hang: the client killed it; a spare takes over
                            pool._failed(w, client, e, f"hard hang: {e}")
                            await client.close()  # gone (reaped) when the caller hears of it
                        else:  # a cooperative interrupt: a failed tactic, the REPL stays
                            pool._counts["interrupts"] += 1
                            if self._timed_out.get(sid) is client:
                                del self._timed_out[sid]
                                pool._replace(
                                    w, client, f"{self.theorem.key}: state {sid} timed out twice"
                                )
                            else:
                                self._timed_out[sid] = client
                        return TacticFailure("timeout", str(e), elapsed)
                    except ReplProtocolError as e:
                        if e.kind == "index" and "state index" in e.desc:  # our ids went stale
                            last = e
                            if pool._failed(w, client, e, f"lost state ids: {e}"):
                                own_failures += 1
                                if own_failures == 2:
                                    break
                            continue
                        elapsed = time.perf_counter() - t0
                        if e.kind in LEAN_EXCEPTION_KINDS:  # Lean's, inside the tactic (#82)
                            return TacticFailure("error", e.desc, elapsed)
                        # The protocol's: no verdict on the tactic (never cached, not a result).
                        pool._counts["protocol_errors"] += 1
                        log.warning("%s: %r: %s", self.theorem.key, tactic, e)
                        return TacticFailure("protocol", f"{e.kind}: {e.desc}", elapsed)
                    except ReplError as e:
                        last = e
                        if pool._failed(w, client, e, str(e)):
                            own_failures += 1
                            log.warning(
                                "%s: %r (failure %d): %s", self.theorem.key, tactic, own_failures, e
                            )
                            if own_failures == 2:
                                break
                        continue
                    self._timed_out.pop(sid, None)  # it answered: the state is not stuck
                    if isinstance(r, TacticRejected):
                        return TacticFailure(r.kind, r.message, r.lean_time_s)
                    new = self._record(sid, tactic, r, client)
                    if self._ids_client is client and self._repl_ids.get(new.sid) == r.state_id:
                        await self._save(client, new.sid, r.state_id)
                    return TacticSuccess(new, self._messages[new.sid], r.lean_time_s)
            finally:
                w.queued -= 1
        if own_failures == 2:
            raise ReplError(
                f"{self.theorem.key}: {tactic!r} on state {sid} failed again after restarting "
                f"worker{w.index} and restoring: {last}"
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
        self._add(state, parent, tactic, tuple(str(m) for m in r.messages), r.lean_time_s)
        if self._ids_client is client:  # else the ids moved to a newer process meanwhile
            self._repl_ids[state.sid] = r.state_id
        return state

    async def close(self) -> None:
        """Free this session's REPL states (``goal.delete``), its saved files and its worker slot."""
        if self._closed:
            return
        self._closed = True
        w = self._worker
        w.sessions -= 1
        for reply in list(self._save_replies):
            reply.cancel()
        for path in self._saved.values():
            path.unlink(missing_ok=True)
        self._saved.clear()
        client, ids = self._ids_client, list(self._repl_ids.values())
        self._repl_ids = {}
        # Only in the worker's current process: a replaced one is going away with its states.
        if ids and client is not None and client is w.client and client.alive:
            try:
                await client.goal_delete(ids)
            except ReplError as e:  # the next user of the worker finds out and restarts it
                log.warning("%s: goal.delete failed: %s", self.theorem.key, e)


__all__ = [
    "AdoptedStateError",
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
