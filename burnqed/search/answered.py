"""Proof sessions answered elsewhere, with a live Lean session behind them for the rest.

A recorded search's tree (:mod:`burnqed.search.recorded`) and the expansion cache
(:mod:`burnqed.search.cache`) answer tactic applications without running Lean.  Their sessions
(the engine's ``ProofSessionLike``) share this class: it hands out :class:`AnsweredState`\\ s (the
printed state, as the answer gave it) and remembers each one's parent and tactic, so that the first
question no answer covers can go to Lean:

- the theorem is started live then (:meth:`AnsweredSession.start_live`; a live root printed
  otherwise than the answered one is a ``disagreement``);
- the chain of answered states from the nearest state the live session holds down to the one asked
  about is handed to the live session (:meth:`AnsweredSession.live_state`): with a ``LeanPool``
  session by :meth:`~burnqed.lean.pool.ProofSession.adopt` (``adopted``; the pool rebuilds the chain
  in the REPL on first use — ``goal.load`` of a saved ancestor, replay below it — and counts
  ``rebuilds`` and ``disagreements``: a rebuilt state Lean prints otherwise; the live one stands),
  with an environment that cannot adopt (a test fake) by applying the chain's tactics at once,
  counted the same way here;
- the tactic runs live (:meth:`AnsweredSession.apply_live`) and a success becomes an answered
  state like any other, whose live counterpart is known.

A session opened ``strict`` (the expansion cache's) does not go on past an answer Lean refutes —
a step of the chain that fails live, or a rebuilt state (or root) Lean prints otherwise — but raises
:class:`AnswerRefuted` naming the answered state, so its owner can drop that answer and redo the
attempt; a replay (not strict) counts the disagreement and goes on from the live state.

What a rebuild costs is kept in :attr:`AnsweredSession.rebuild_s`: the Lean seconds of the replays
done here, and for adopted states the seconds their answers cost where they were made (the replay
the pool will do), plus a live start below an answered root.  The expansion cache reports its
saving net of it.

Example (``live`` a :class:`~burnqed.search.sources.LiveSource`)::

    session = AnsweredSession(theorem, 0, "p : Prop\\n⊢ p → p", live=live, counts=counts)
    child = session.add(session.root.sid, "intro h", "p : Prop\\nh : p\\n⊢ p")   # answered
    result = await session.apply_live(child, "exact h")   # starts live, adopts the chain, runs
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from burnqed.lean.errors import ReplError
from burnqed.lean.goals import NO_GOALS
from burnqed.lean.pool import AdoptedStateError
from burnqed.theorems import Theorem

log = logging.getLogger(__name__)


class AnswerRefuted(ReplError):
    """Lean refutes an answer the session was given: the step that made answered state ``sid``
    fails live (``live_text`` None), or Lean prints its state otherwise (``live_text``); ``sid``
    0 is the root.  An infrastructure-class error for the attempt (it went on from a state Lean
    does not reach): the expansion cache evicts the answer and redoes the attempt live."""

    def __init__(self, message: str, *, sid: int, live_text: str | None) -> None:
        super().__init__(message)
        self.sid = sid
        self.live_text = live_text


@dataclass(frozen=True)
class AnsweredState:
    """A state handed out by an :class:`AnsweredSession` (the engine's ``ProofStateLike``)."""

    sid: int  # session-local id, root 0
    text: str  # the printed state, as answered (or as live printed it, below a live answer)
    depth: int

    @property
    def solved(self) -> bool:
        return self.text == NO_GOALS


@dataclass(frozen=True)
class AnsweredSuccess:
    """A successful tactic application (the engine reads ``state`` and ``lean_time_s``)."""

    state: AnsweredState
    messages: tuple[str, ...]
    lean_time_s: float  # the Lean seconds this application spent here (0 for a cached answer)


class AnsweredSession:
    """One attempt's states, answered elsewhere or live (module docstring).

    ``live`` is the :class:`~burnqed.search.sources.LiveSource` behind the answers (None: nothing
    can go live); ``counts`` the owner's counters: ``counts["starts"]["live"]`` and
    ``counts["states"]`` (``adopted``, and ``rebuilds`` / ``disagreements`` of chains applied here
    because the live session cannot adopt).
    """

    def __init__(
        self,
        theorem: Theorem,
        attempt: int,
        root: str | None,
        *,
        live: Any,
        counts: Mapping[str, Counter],
        root_cost_s: float = 0.0,
        strict: bool = False,
    ) -> None:
        self.theorem = theorem
        self.attempt = attempt
        self.live = live
        self.counts = counts
        self.strict = strict  # raise AnswerRefuted instead of going on from the live state
        self.rebuild_s = 0.0  # Lean seconds the rebuilds took or will take (module docstring)
        self._states: list[AnsweredState] = []
        self._parent: list[int] = []
        self._tactic: list[str] = []
        self._cost: list[float] = []  # Lean seconds each state's answer cost where it was made
        if root is not None:
            self.add(-1, "", root, root_cost_s)
        self._live: Any = None  # the live session, started on the first live question
        self._live_states: dict[int, Any] = {}  # sid → its live state (ProofStateLike)
        self._answered_of: dict[int, int] = {}  # an adopted live state's sid → the answered sid
        self._refuted: list[tuple[int, str]] = []  # (sid, live text) of rebuilt states that differ
        self._live_lock = asyncio.Lock()  # a step's candidates run concurrently

    @property
    def root(self) -> AnsweredState:
        return self._states[0]

    @property
    def is_live(self) -> bool:
        """Whether the theorem was started live."""
        return self._live is not None

    def step(self, sid: int) -> tuple[AnsweredState | None, str]:
        """The parent state (None for the root) and the tactic that made state ``sid``."""
        parent = self._parent[sid]
        return (self._states[parent] if parent >= 0 else None), self._tactic[sid]

    def path(self, sid: int) -> list[str]:
        """The tactics from the root to state ``sid``."""
        out = []
        while self._parent[sid] >= 0:
            out.append(self._tactic[sid])
            sid = self._parent[sid]
        return out[::-1]

    def add(self, parent: int, tactic: str, text: str, cost_s: float = 0.0) -> AnsweredState:
        """A new state: ``tactic`` on state ``parent`` (-1: the root) prints ``text``; its answer
        cost ``cost_s`` Lean seconds where it was made (what rebuilding it would cost)."""
        depth = self._states[parent].depth + 1 if parent >= 0 else 0
        state = AnsweredState(len(self._states), text, depth)
        self._states.append(state)
        self._parent.append(parent)
        self._tactic.append(tactic)
        self._cost.append(cost_s)
        return state

    async def start_live(self) -> None:
        """Start the theorem live (the first live question, or a root no answer gave)."""
        if self.live is None:
            raise ReplError(f"{self.theorem.key}: no live source to start the theorem")
        t0 = time.perf_counter()
        self._live = await self.live.start(self.theorem, self.attempt)
        self.counts["starts"]["live"] += 1
        root = self._live.root
        if not self._states:
            self.add(-1, "", root.text)
        else:  # the root was answered: this start is a rebuild
            self.rebuild_s += time.perf_counter() - t0
            if root.text != self._states[0].text:
                self.counts["states"]["disagreements"] += 1
                log.warning("%s: the live root differs from the answered one", self.theorem.key)
                if self.strict:
                    raise AnswerRefuted(
                        f"{self.theorem.key}: the answered root is not what Lean prints",
                        sid=0, live_text=root.text,
                    )  # fmt: skip
        self._live_states[0] = root

    async def live_state(self, state: AnsweredState) -> Any:
        """``state``'s live counterpart: the chain of answers above it, handed to the live session
        (adopted, rebuilt by the pool on first use; or applied, without ``adopt``)."""
        async with self._live_lock:
            if self._live is None:
                await self.start_live()
            chain, sid = [], state.sid
            while sid not in self._live_states:
                chain.append(sid)
                sid = self._parent[sid]
            live = self._live_states[sid]
            adopt = getattr(self._live, "adopt", None)
            counts = self.counts["states"]
            for sid in reversed(chain):
                tactic, text = self._tactic[sid], self._states[sid].text
                if adopt is not None:
                    live = adopt(live, tactic, text, lean_s=self._cost[sid],
                                 on_disagreement=functools.partial(self._differs, sid))  # fmt: skip
                    self._answered_of[live.sid] = sid
                    counts["adopted"] += 1
                    self.rebuild_s += self._cost[sid]  # the pool replays it on the next apply
                else:  # an environment without adopt: rebuild the step now
                    r = await self._live.apply(live, tactic)
                    counts["rebuilds"] += 1
                    self.rebuild_s += float(getattr(r, "lean_time_s", 0.0))
                    if getattr(r, "state", None) is None:
                        counts["disagreements"] += 1
                        raise AnswerRefuted(
                            f"{self.theorem.key}: the answered step {tactic!r} (state {sid}) fails "
                            f"live: {r.kind}: {r.message}",
                            sid=sid, live_text=None,
                        )  # fmt: skip
                    if r.state.text != text:
                        counts["disagreements"] += 1
                        self._differs(sid, r.state.text)
                    live = r.state
                self._live_states[sid] = live
            self._raise_refuted()
            return live

    def _differs(self, sid: int, live_text: str) -> None:
        """Answered state ``sid`` was rebuilt and Lean prints it as ``live_text``."""
        self._refuted.append((sid, live_text))

    def _raise_refuted(self) -> None:
        if self.strict and self._refuted:
            sid, live_text = self._refuted[0]
            raise AnswerRefuted(
                f"{self.theorem.key}: the answered state {sid} is printed otherwise by Lean",
                sid=sid, live_text=live_text,
            )  # fmt: skip

    async def apply_live(self, state: AnsweredState, tactic: str) -> Any:
        """Run ``tactic`` on ``state`` in Lean: the live failure as it is, or a success as an
        :class:`AnsweredSuccess` whose new state's live counterpart is known."""
        live_state = await self.live_state(state)
        try:
            r = await self._live.apply(live_state, tactic)
        except AdoptedStateError as e:  # a step of the chain fails where the pool rebuilds it
            sid = self._answered_of.get(e.sid) if e.sid is not None else None
            if sid is None:
                raise
            raise AnswerRefuted(str(e), sid=sid, live_text=None) from e
        self._raise_refuted()  # a rebuilt state printed otherwise (the pool called _differs)
        st = getattr(r, "state", None)
        if st is None:
            return r
        child = self.add(state.sid, tactic, st.text, float(r.lean_time_s))
        self._live_states[child.sid] = st
        return AnsweredSuccess(child, tuple(getattr(r, "messages", ())), r.lean_time_s)

    async def close(self) -> None:
        if self._live is not None:
            await self._live.close()


__all__ = ["AnswerRefuted", "AnsweredSession", "AnsweredState", "AnsweredSuccess"]
