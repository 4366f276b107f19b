"""The expansion cache: an answer source that keeps what the policy and Lean answered (issue 31).

Every comparison burnqed makes — with and without the value model, the configurations A/S/B/C, the
search-longer control, a rerun after a crash — searches the same theorems from the same states with
the same model and the same per-candidate seeds, so it asks the same questions again.  The answers
are deterministic (per-candidate seeds, batch-invariant backends, a heartbeat limit deciding each
tactic), so :class:`CachedSource` keeps them, content-addressed, in a cache directory
(:mod:`burnqed.search.cache_store`), and answers from there on the search's answer-source interface
(:mod:`burnqed.search.sources`), reading through to the live source on a miss and storing what live
returned.  Sources change cost, never results: trees, proofs and eval JSONs are the same with and
without the cache, except clock fields, per-node Lean times and the ``cache`` block.

**Keys** — everything that decides an answer; a changed part gives other keys, so no hits:

- a policy candidate (one per seed, below the backends' de-duplication): :func:`policy_settings` —
  the model's weights and tokenizer (:func:`~burnqed.ebm.embeddings.weights_digest`, or a served
  model's name), backend kind, the backend's code, determinism mode, the instruction-set pin, and
  in process the dtype, device, CPU kernel level or GPU, torch thread count and library versions
  (over HTTP: the server's URL or launch command) — plus the exact prompt, the candidate's seed
  (which carries any stage salt: :func:`~burnqed.policy.salted_seed`), temperature, top_p,
  max_new_tokens and stop strings, and ``n`` where the backend's candidates depend on it
  (:func:`candidate_key`) → the text, token count and log-probability;
- a Lean answer: :func:`lean_settings` — the Lean project's toolchain, Mathlib and packages,
  Pantograph's ``--version`` (or the code of a burnqed REPL), burnqed's Lean client code, imports,
  ``lean.options`` (pretty-printer options), the heartbeat limit and the tactic guard — plus the
  theorem's whole statement (header and all) and, for a tactic, the state as the REPL printed it
  and the tactic (:func:`tactic_key`, :func:`start_key`) → the new state's printed form, or the
  failure (kind and message), or for a start the root state or Lean's verdict on the statement.

Never stored: infrastructure errors (a ``ReplError`` or server failure raises through the source
and is never an answer), wall-clock timeouts (a ``timeout`` failure: the clock decided), samples a
server aborted, unseeded sampling and a backend that is not deterministic (an SGLang command without
``--enable-deterministic-inference``: the policy is then not cached at all, and the block says why).
Whole-proof verification always runs live.

**Live state after cached answers.**  A cached Lean answer leaves no state in any REPL; the first
miss below a chain of hits starts the theorem live (when its root was a hit) and hands the chain to
the pool (:mod:`burnqed.search.answered`: ``ProofSession.adopt``, rebuilt on first use by
``goal.load`` of a saved ancestor and replay).  Rebuilds are counted and their Lean time — the
cached cost of each adopted step, the live start below a cached root — is subtracted from the
saving; a rebuilt state Lean prints otherwise than the cached one (the printed state is a lossy key
on real Lean: ``⋯``, ``✝``, metavariable context) is a ``disagreement``: counted, reported, and the
live state is what later tactics run on.

**The ``cache`` block** (:meth:`CachedSource.stats`, in the search manifest and the eval JSON):
policy hits and misses (per candidate, and per expansion answered whole), Lean hits and misses
(starts apart), answers not stored and why, adopted states, rebuilds, disagreements, conflicts (a
key read twice with different answers: a non-determinism), and seconds: generation and Lean time
saved (the cost recorded with each hit), the rebuilds' Lean time, and the Lean saving net of it.

Example (``gen`` a backend, ``pool`` a ``LeanPool``, ``lean_cfg`` its config)::

    live = LiveSource(gen, pool)
    source = CachedSource(live, Path("results/cache"), policy=policy_settings(gen, policy_cfg),
                          lean=lean_settings(lean_cfg, repl_version))
    try:
        results = await search_from_source(theorems, source, cfg, sampling=…, seed=…)
    finally:
        source.close()                       # flush the new answers as shards
    source.stats()["policy"]["hit_rate"]
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.config import LeanConfig, PolicyConfig
from burnqed.determinism import determinism_mode
from burnqed.isa import pin_in_force
from burnqed.lean.errors import StartError
from burnqed.lean.pool import TacticFailure
from burnqed.policy import Candidate, Generation, SamplingParams, generation_of
from burnqed.provenance import code_digest, launched_modules, lean_project_versions
from burnqed.search.answered import AnsweredSession, AnsweredState, AnsweredSuccess
from burnqed.search.cache_store import (
    LEAN_SCHEMA,
    POLICY_SCHEMA,
    ShardStore,
    hit_rate,
    new_writer_id,
    write_run_record,
)
from burnqed.search.sources import ExpandRequest, LiveSource
from burnqed.theorems import Theorem

log = logging.getLogger(__name__)

KEY_VERSION = "burnqed-expansion-cache-v1"  # part of every key: a new layout starts afresh
# Failures the clock decided, not Lean: never stored (burnqed.outcomes: non-deterministic events).
NOT_STORED = frozenset({"timeout"})
DETERMINISTIC_SGLANG = "--enable-deterministic-inference"
REFRESH_S = 30.0  # at most this often, a start reads the shards other processes wrote meanwhile


# --------------------------------------------------------------------------------------------
# Keys


def _digest(*parts: Any, size: int = 16) -> str:
    text = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.blake2b(text.encode(), digest_size=size).hexdigest()


def settings_digest(settings: Mapping[str, Any]) -> str:
    """The 16-hex-digit digest of a run-wide key part (:func:`policy_settings`,
    :func:`lean_settings`): the ``settings`` column, and part of every key.

    >>> settings_digest({"a": 1}) == settings_digest({"a": 1}) != settings_digest({"a": 2})
    True
    """
    return _digest(KEY_VERSION, dict(settings), size=8)


def model_fingerprint(model: str) -> str:
    """The weights and tokenizer of a local model directory (its files' sizes and bytes, large
    files by 16 sampled windows: :func:`~burnqed.ebm.embeddings.weights_digest`), or a served
    model's name: the same weights under another path give the same fingerprint."""
    from burnqed.ebm.embeddings import weights_digest

    path = Path(model)
    return weights_digest(path) if path.is_dir() else f"served:{model}"


def _code(obj: Any) -> str:
    """The code that produces ``obj``'s answers: a burnqed module's digest (with what it imports),
    else the class's qualified name (a test fake)."""
    module = type(obj).__module__
    if module.startswith("burnqed."):
        return code_digest(module)
    return f"{module}.{type(obj).__qualname__}"


def policy_settings(generator: Any, policy: PolicyConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The run-wide part of a candidate's key: what besides the prompt, seed and sampling decides
    what ``generator`` (opened with the ``policy`` section) samples (module docstring).
    ``deterministic`` is False when the backend's answers cannot repeat (the policy is then not
    cached)."""
    import torch

    cfg = policy if isinstance(policy, PolicyConfig) else PolicyConfig.from_dict(dict(policy))
    settings: dict[str, Any] = {
        "model": model_fingerprint(str(generator.model_id)),
        "backend": cfg.backend,
        "code": _code(generator),
        "determinism": determinism_mode(),
        "isa_pin": pin_in_force(),
        "deterministic": True,
    }
    if cfg.backend == "transformers":  # in process: the arithmetic is this machine's
        device = str(getattr(generator, "device", cfg.device))
        settings["dtype"] = str(getattr(generator, "dtype", cfg.dtype)).removeprefix("torch.")
        settings["device"] = device
        if device.startswith("cuda"):
            settings["gpu"] = torch.cuda.get_device_name(torch.device(device))
        else:
            # The kernel level and the thread count move log-probabilities in their last digits.
            settings["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
            settings["torch_threads"] = torch.get_num_threads()
        from burnqed.provenance import package_versions

        settings["packages"] = package_versions(("torch", "transformers"))
    else:  # a server computes: how it was started is what this process knows of it
        command = list(cfg.server_command) if cfg.server_command else None
        settings["server"] = cfg.server_url or command
        if cfg.backend == "sglang" and cfg.server_url is None:
            # The per-candidate sampling_seed acts only in SGLang's deterministic mode.
            settings["deterministic"] = DETERMINISTIC_SGLANG in (command or ())
    return settings


def lean_settings(lean: LeanConfig | Mapping[str, Any], repl_version: str | None) -> dict[str, Any]:
    """The run-wide part of a Lean answer's key (module docstring): toolchain, Mathlib and packages
    of ``lean.project_path``, Pantograph's ``--version`` text ``repl_version`` (the search stage
    reads it), the code of a REPL that is a burnqed module and of burnqed's Lean client, imports,
    ``lean.options``, the heartbeat limit and the guard's patterns."""
    cfg = lean if isinstance(lean, LeanConfig) else LeanConfig.from_dict(dict(lean))
    launched = launched_modules(cfg.to_dict())
    return {
        "lean_project": lean_project_versions(cfg.project_path),
        "repl_version": repl_version,
        "repl_code": code_digest(*launched) if launched else None,
        "client_code": code_digest("burnqed.lean.pool"),  # tactic wrapping, goal printing, guard
        "imports": list(cfg.imports),
        "options": dict(cfg.options),
        "tactic_heartbeats": cfg.tactic_heartbeats,
        "banned_tactics": list(cfg.banned_tactics),
    }


def candidate_key(
    settings: str, prompt: str, seed: int, params: SamplingParams, n: int | None
) -> str:
    """The key of one candidate: the settings digest, the exact prompt, the candidate's seed,
    the sampling parameters (``n`` only where the backend's candidates depend on it, else None).

    >>> p = SamplingParams(n=4, temperature=1.0)
    >>> candidate_key("s", "⊢ p", 7, p, None) == candidate_key("s", "⊢ p", 7, p, None)
    True
    >>> candidate_key("s", "⊢ p", 7, p, None) != candidate_key("s", "⊢ p", 8, p, None)
    True
    """
    sampling = [params.temperature, params.top_p, params.max_new_tokens, list(params.stop), n]
    return _digest(KEY_VERSION, "policy", settings, prompt, int(seed), sampling)


def statement_digest(theorem: Theorem) -> str:
    """The theorem's whole trusted text (header, docstring, statement): what Lean elaborates."""
    return hashlib.sha256(theorem.statement().encode()).hexdigest()


def start_key(settings: str, statement: str) -> str:
    """The key of a theorem's start (its root state, or Lean's verdict on the statement)."""
    return _digest(KEY_VERSION, "start", settings, statement)


def tactic_key(settings: str, statement: str, state: str, tactic: str) -> str:
    """The key of ``tactic`` on the state printed as ``state`` in the theorem ``statement``."""
    return _digest(KEY_VERSION, "tactic", settings, statement, state, tactic)


@dataclasses.dataclass(frozen=True)
class CacheSpec:
    """A cache directory and the run-wide key parts a search stores its answers under (what
    :func:`~burnqed.search.stage.search_to_dir` opens a :class:`CachedSource` with)."""

    dir: Path
    policy: Mapping[str, Any] | None  # policy_settings(...); None: the policy is not cached
    lean: Mapping[str, Any] | None  # lean_settings(...); None: Lean is not cached

    def open(self, live: LiveSource) -> CachedSource:
        return CachedSource(live, self.dir, policy=self.policy, lean=self.lean)


# --------------------------------------------------------------------------------------------
# The source


def _candidate(row: Mapping[str, Any]) -> Candidate:
    return Candidate(row["text"], row["logprob"], row["num_tokens"], row["finish_reason"])


class CachedSource:
    """The engine's answer source over a cache directory, reading through to ``live`` (a
    :class:`~burnqed.search.sources.LiveSource`) on a miss (module docstring).

    ``policy`` / ``lean``: the run-wide key parts (:func:`policy_settings`, :func:`lean_settings`);
    None leaves that kind uncached.  :meth:`close` writes what is still buffered and the run's
    record (``runs/``); call it when the search ends, however it ends."""

    kind = "cache"

    def __init__(
        self,
        live: LiveSource,
        cache_dir: str | Path,
        *,
        policy: Mapping[str, Any] | None,
        lean: Mapping[str, Any] | None,
        refresh_s: float = REFRESH_S,
        flush_rows: int = 1000,
        flush_s: float = 60.0,
    ) -> None:
        self.live = live
        self.dir = Path(cache_dir)
        self.writer = new_writer_id()
        self.refresh_s = refresh_s
        self.policy_off = self._policy_off(policy)
        self.policy = dict(policy or {})
        self.lean = dict(lean or {})
        self.policy_settings = settings_digest(self.policy)
        self.lean_settings = settings_digest(self.lean)
        # Backends whose candidate j depends on n (in process): n is part of its key.
        self._keyed_by_n = not getattr(live.generator, "candidates_independent_of_n", False)
        opts = {"writer": self.writer, "flush_rows": flush_rows, "flush_s": flush_s}
        self.policy_store: ShardStore | None = None
        if self.policy_off is None:
            self.policy_store = ShardStore(
                self.dir / "policy", POLICY_SCHEMA, settings=self.policy_settings, **opts
            )
        self.lean_store: ShardStore | None = None
        if lean is not None:
            self.lean_store = ShardStore(
                self.dir / "lean", LEAN_SCHEMA, settings=self.lean_settings, **opts
            )
        self._refreshed = time.monotonic()
        self.counts: dict[str, Counter] = {
            k: Counter()
            for k in ("requests", "candidates", "lean", "starts", "not_stored", "states",
                      "verifications")
        }  # fmt: skip
        self.seconds: Counter[str] = Counter()  # saved / spent per kind, rebuilds
        # lookup runs on the event loop, generate on the generator's thread: counts under a lock
        self._count_lock = threading.Lock()
        self._closed = False
        log.info(
            "expansion cache %s: %d policy and %d Lean answers under this run's keys%s",
            self.dir, len(self.policy_store or ()), len(self.lean_store or ()),
            f"; policy not cached ({self.policy_off})" if self.policy_off else "",
        )  # fmt: skip

    def _policy_off(self, policy: Mapping[str, Any] | None) -> str | None:
        """Why the policy is not cached in this run (None: it is)."""
        if policy is None:
            return "no policy key"
        if not policy.get("deterministic", True):
            return "the backend's answers are not deterministic (no seeded deterministic mode)"
        if not callable(getattr(self.live.generator, "raw_candidates", None)):
            return "the backend gives no per-candidate answers"
        return None

    # -- policy ------------------------------------------------------------------------------

    def _keys(self, request: ExpandRequest, params: SamplingParams) -> list[str]:
        assert request.seeds is not None
        n = params.n if self._keyed_by_n else None
        return [
            candidate_key(self.policy_settings, request.prompt, s, params, n) for s in request.seeds
        ]

    def lookup(self, request: ExpandRequest, params: SamplingParams) -> Generation | None:
        if self.policy_store is None or request.seeds is None:
            return None  # counted in generate
        rows = [self.policy_store.get(k) for k in self._keys(request, params)]
        if any(r is None for r in rows):
            return None  # a miss: generate asks the model for what is missing
        with self._count_lock:
            self.counts["requests"]["hits"] += 1
            self.counts["candidates"]["hits"] += len(rows)
            self.seconds["policy_saved"] += sum(r["cost_s"] for r in rows)  # type: ignore[index]
        return generation_of(_candidate(r) for r in rows)  # type: ignore[arg-type]

    def generate(
        self, requests: Sequence[ExpandRequest], params: SamplingParams
    ) -> list[Generation]:
        """The model's answers for the requests :meth:`lookup` could not answer whole: per
        candidate, the cached answer or a new sample (asked one seed at a time where the
        backend's candidates do not depend on ``n``, else the request's whole ``n``)."""
        store = self.policy_store
        if store is None or not requests or requests[0].seeds is None:
            with self._count_lock:
                self.counts["requests"]["uncached"] += len(requests)
            return self.live.generate(requests, params)
        gen = self.live.generator
        keys = [self._keys(r, params) for r in requests]
        rows = [[store.get(k) for k in ks] for ks in keys]
        # (request index, candidate indices) still to sample
        todo = [(i, [j for j, r in enumerate(rs) if r is None]) for i, rs in enumerate(rows)]
        todo = [(i, js) for i, js in todo if js]
        if self._keyed_by_n:
            todo = [(i, list(range(params.n))) for i, _ in todo]
        fresh: dict[tuple[int, int], Candidate | None] = {}
        by_count: dict[int, list[tuple[int, list[int]]]] = {}
        for i, js in todo:
            by_count.setdefault(len(js), []).append((i, js))
        for count, group in sorted(by_count.items()):
            sub = params if count == params.n else dataclasses.replace(params, n=count)
            t0 = time.perf_counter()
            raw = gen.raw_candidates(
                [requests[i].prompt for i, _ in group],
                sub,
                [[requests[i].seeds[j] for j in js] for i, js in group],  # type: ignore[index]
            )
            spent = time.perf_counter() - t0
            share = spent / max(1, count * len(group))
            with self._count_lock:
                self.seconds["policy_spent"] += spent
            for (i, js), cands in zip(group, raw, strict=True):
                for j, c in zip(js, cands, strict=True):
                    fresh[i, j] = c
                    if c is None:  # aborted by the server: an infrastructure event, asked again
                        with self._count_lock:
                            self.counts["not_stored"]["aborted_samples"] += 1
                        continue
                    store.put(
                        {"key": keys[i][j], "model": self.policy["model"], "text": c.text,
                         "logprob": float(c.logprob), "num_tokens": int(c.num_tokens),
                         "finish_reason": c.finish_reason, "cost_s": share}
                    )  # fmt: skip
        out = []
        with self._count_lock:
            for i, rs in enumerate(rows):
                cands: list[Candidate | None] = []
                for j, r in enumerate(rs):
                    if (i, j) in fresh:
                        cands.append(fresh[i, j])
                        self.counts["candidates"]["misses"] += 1
                    else:
                        cands.append(_candidate(r))  # type: ignore[arg-type]
                        self.counts["candidates"]["hits"] += 1
                        self.seconds["policy_saved"] += r["cost_s"]  # type: ignore[index]
                self.counts["requests"]["misses"] += 1
                out.append(generation_of(cands))
        return out

    # -- Lean --------------------------------------------------------------------------------

    def _maybe_refresh(self) -> None:
        """Read what other processes wrote meanwhile (two evals of one model side by side)."""
        if time.monotonic() - self._refreshed < self.refresh_s:
            return
        self._refreshed = time.monotonic()
        for store in (self.policy_store, self.lean_store):
            if store is not None:
                store.refresh()

    async def start(self, theorem: Theorem, attempt: int) -> Any:
        self._maybe_refresh()
        store = self.lean_store
        if store is None:
            session = CachedSession(self, theorem, attempt, None)
            await session.start_live()
            return session
        statement = statement_digest(theorem)
        key = start_key(self.lean_settings, statement)
        row = store.get(key)
        if row is not None:
            self.counts["starts"]["hits"] += 1
            self.seconds["lean_saved"] += row["cost_s"]
            if row["text"] is None:
                raise StartError(row["error"])
            return CachedSession(self, theorem, attempt, row["text"], statement, row["cost_s"])
        self.counts["starts"]["misses"] += 1
        session = CachedSession(self, theorem, attempt, None, statement)
        t0 = time.perf_counter()
        try:
            await session.start_live()
        except StartError as e:  # Lean's verdict on the statement: an answer (ReplError is not)
            self._store_lean(key, None, "statement", str(e), time.perf_counter() - t0)
            raise
        spent = time.perf_counter() - t0
        self.seconds["lean_spent"] += spent
        self._store_lean(key, session.root.text, None, None, spent)
        return session

    def _store_lean(
        self, key: str, text: str | None, kind: str | None, error: str | None, cost: float
    ) -> None:
        assert self.lean_store is not None
        self.lean_store.put(
            {"key": key, "text": text, "error_kind": kind, "error": error, "cost_s": float(cost)}
        )

    async def verify(self, theorem: Theorem, tactics: Sequence[str], *, attempt: int) -> Any:
        """Always live: a proof found through cached answers is checked whole by Lean."""
        self.counts["verifications"]["live"] += 1
        return await self.live.verify(theorem, tactics, attempt=attempt)

    # -- accounting ----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The ``cache`` block (module docstring): JSON-able counts and seconds of this run."""
        c, sec = self.counts, self.seconds
        env = getattr(self.live, "env", None)
        pool = env.stats() if callable(getattr(env, "stats", None)) else {}
        states = Counter(c["states"])
        for k in ("rebuilds", "disagreements"):
            states[k] += int(pool.get(k, 0))
        conflicts = sum(s.conflicts for s in (self.policy_store, self.lean_store) if s)
        return {
            "source": self.kind,
            "dir": str(self.dir),
            "policy": {
                "cached": self.policy_off is None,
                "why_not": self.policy_off,
                "candidates": {k: c["candidates"][k] for k in ("hits", "misses")},
                "hit_rate": hit_rate(c["candidates"]["hits"], c["candidates"]["misses"]),
                # expansions answered whole from the cache (no model call) / asked the model
                "expansions": {k: c["requests"][k] for k in ("hits", "misses", "uncached")},
                "saved_s": sec["policy_saved"],
                "spent_s": sec["policy_spent"],
            },
            "lean": {
                "cached": self.lean_store is not None,
                "hits": c["lean"]["hits"],
                "misses": c["lean"]["misses"],
                "hit_rate": hit_rate(c["lean"]["hits"], c["lean"]["misses"]),
                "saved_s": sec["lean_saved"],
                "spent_s": sec["lean_spent"],
                "rebuild_s": sec["rebuild"],
                "net_saved_s": sec["lean_saved"] - sec["rebuild"],
            },
            "starts": {k: c["starts"][k] for k in ("hits", "misses")},
            "not_stored": dict(sorted(c["not_stored"].items())),
            "states": {k: states[k] for k in ("adopted", "rebuilds", "disagreements")},
            "conflicts": conflicts,
            "written": {
                "policy": self.policy_store.written if self.policy_store else 0,
                "lean": self.lean_store.written if self.lean_store else 0,
            },
        }

    def flush(self) -> None:
        """Write the buffered answers now (a shard per kind that has any): before a search's
        checkpoint, so every attempt it commits has its answers on disk."""
        for store in (self.policy_store, self.lean_store):
            if store is not None:
                store.flush()

    def close(self) -> None:
        """Write the buffered answers and this run's record (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.flush()
        write_run_record(self.dir, self.writer, self.stats())


class CachedSession(AnsweredSession):
    """One attempt's proof session over the cache: cached outcomes where the cache has them, live
    below them (:mod:`burnqed.search.answered`), and what live answered stored."""

    def __init__(
        self,
        source: CachedSource,
        theorem: Theorem,
        attempt: int,
        root: str | None,
        statement: str | None = None,
        root_cost_s: float = 0.0,
    ) -> None:
        super().__init__(theorem, attempt, root, live=source.live, counts=source.counts,
                         root_cost_s=root_cost_s)  # fmt: skip
        self.source = source
        self.statement = statement or statement_digest(theorem)

    async def apply(self, state: AnsweredState, tactic: str) -> Any:
        src = self.source
        store = src.lean_store
        if store is None:
            return await self.apply_live(state, tactic)
        key = tactic_key(src.lean_settings, self.statement, state.text, tactic)
        row = store.get(key)
        if row is not None:
            src.counts["lean"]["hits"] += 1
            src.seconds["lean_saved"] += row["cost_s"]
            if row["text"] is None:
                return TacticFailure(row["error_kind"], row["error"], 0.0)
            return AnsweredSuccess(self.add(state.sid, tactic, row["text"], row["cost_s"]), (), 0.0)
        src.counts["lean"]["misses"] += 1
        r = await self.apply_live(state, tactic)  # an infrastructure error raises: never stored
        src.seconds["lean_spent"] += float(r.lean_time_s)
        st = getattr(r, "state", None)
        if st is not None:
            src._store_lean(key, st.text, None, None, r.lean_time_s)
        elif r.kind in NOT_STORED:
            src.counts["not_stored"][r.kind] += 1
        else:
            src._store_lean(key, None, r.kind, r.message, r.lean_time_s)
        return r

    async def close(self) -> None:
        self.source.seconds["rebuild"] += self.rebuild_s
        await super().close()


__all__ = [
    "KEY_VERSION",
    "CacheSpec",
    "CachedSession",
    "CachedSource",
    "candidate_key",
    "lean_settings",
    "model_fingerprint",
    "policy_settings",
    "settings_digest",
    "start_key",
    "statement_digest",
    "tactic_key",
]
