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
  the model's weights and tokenizer (:func:`model_fingerprint`: every file's whole bytes, or a
  served model's name), backend kind, the backend's code, determinism mode, the instruction-set pin
  and the variables it sets (all of them, so under ``native`` the caller's MKL/oneDNN choices too);
  in process the dtype, device, CPU kernel level or GPU, torch thread count and the versions of
  torch, transformers and tokenizers; over HTTP what the server states about itself, queried once
  per run (:func:`burnqed.policy.http.sglang_identity`: SGLang's version, model path and revision,
  the server arguments that decide its tokens, its deterministic-inference flag;
  :func:`~burnqed.policy.http.vllm_identity`: vLLM's version and served model) and, for a server
  this run launched, the launch command, its GPU-selecting variables and the hardware it runs on
  (:func:`local_hardware`) — plus the exact prompt, the candidate's seed (which carries any stage
  salt: :func:`~burnqed.policy.salted_seed`), temperature, top_p, max_new_tokens and stop strings,
  and ``n`` where the backend's candidates depend on it (:func:`candidate_key`) → the text, token
  count and log-probability.  A server that cannot state what decides its answers — an external
  ``server_url`` (neither SGLang nor vLLM states its GPU), one that says it is not deterministic —
  is not cached: counted (``expansions.uncached``), one log line, the block says why;
- a Lean answer: :func:`lean_settings` — the Lean project's toolchain, Mathlib and packages, the
  REPL's ``--version`` (or the code of a burnqed REPL) and its arguments (``--maxHeartbeats=…``,
  imports, options), the Lean environment the REPL runs in, read off the running REPL
  (:func:`burnqed.lean.environment.environment_identity`: the bytes of the process that answers it
  and of the REPL program and any wrapper script, the full ``lean --version`` on its ``PATH``, and
  every ``.olean`` file on its ``LEAN_PATH``, whole), burnqed's Lean client code, imports,
  ``lean.options`` (pretty-printer options), the heartbeat limit and the tactic guard — plus the
  theorem's whole statement (header and all) and, for a tactic, the **tactic path from the root**:
  a tactic's key chains its parent state's key (:func:`start_key` for the root) with the tactic
  (:func:`tactic_key`), so two states Lean prints alike reached by different paths never share a
  key → the new state's printed form, or the failure (kind and message), or for a start the root
  state or Lean's verdict on the statement.  Each row also keeps the digest of the state its tactic
  ran on as Lean printed it (:func:`state_digest`: a check, a path printed otherwise today is a
  disagreement) and its question (the theorem, the tactics from its root, the tactic) for
  ``burnqed cache verify``.

Never stored: infrastructure errors (a ``ReplError`` or server failure raises through the source
and is never an answer), wall-clock timeouts (a ``timeout`` failure: the clock decided), protocol
errors (a ``protocol`` failure: the REPL's error reply, no verdict of Lean's), samples a server
aborted, unseeded sampling and a backend that is not deterministic.  Never served: a stored Lean
answer that cost more than today's ``lean.tactic_timeout_s`` (a live run would have timed out
there; it is asked again).  Whole-proof verification always runs live.

**Live state after cached answers.**  A cached Lean answer leaves no state in any REPL; the first
miss below a chain of hits starts the theorem live (when its root was a hit) and hands the chain to
the pool (:mod:`burnqed.search.answered`: ``ProofSession.adopt``, rebuilt on first use by
``goal.load`` of a saved ancestor and replay).  Rebuilds are counted and their Lean time — the
cached cost of each adopted step, the live start below a cached root — is subtracted from the
saving.

**Answers Lean refutes are evicted, and every attempt that was served one is redone live** (a
key holds what burnqed sees decide an answer; a non-deterministic REPL or a cache moved from a Lean
that differs where no key part looks can still hold a wrong one).  A disagreement evicts the
answer (a tombstone every reader honours), stores Lean's, and marks for a redo with every Lean
question asked live (:meth:`CachedSource.redo`, which the engine calls) the attempt that found it
and every attempt of this run that was served the answer — the engine holds a theorem's attempts
until its last one ends, so none of them is written first; one written before (an answer shared
across theorems, evicted meanwhile by another process) is counted ``stale_attempts``.  The checks:

- *re-checks*: a fraction of the Lean hits (``cache_recheck``; drawn from a hash of the key,
  theorem and attempt seeded by ``recheck_seed`` — the search stage's is the job's — so the
  search's draws do not move, a rerun re-checks the same hits, and the choice does not depend on
  the order questions come in) is asked live — the hit's chain replayed in the pool, then the
  tactic — and the live answer is used; one that differs (another state, success for failure or
  back, another failure kind) is a ``disagreement``;
- *rebuilds*: a cached state the pool cannot rebuild (its step fails) or rebuilds printed otherwise
  (or a cached root Lean prints otherwise) ends the attempt: its true result, never an ``error``;
- *the printed-state check*: a row stored below another printed state than its path prints now;
- *rejected proofs*: a proof Lean rejects whole that went through answers this attempt was served
  has its path asked again live (:meth:`CachedSource._recheck_path`); an answer Lean gives
  otherwise is evicted (all standing: Lean's own verdict on the proof, the search goes on);
- ``burnqed cache verify`` asks a sample of the stored questions again offline.

**The ``cache`` block** (:meth:`CachedSource.stats`, in the search manifest and the eval JSON):
policy hits and misses (per candidate, and per expansion answered whole), Lean hits and misses
(starts apart), answers not stored and not served and why, adopted states, rebuilds,
disagreements, re-checks (asked, agreed, disagreed, inconclusive), evictions by cause, attempts
redone, stale attempts, proofs rejected through the cache (their paths' steps asked, refuted),
conflicts (a key read or put twice with different answers: a non-determinism; a failure message
compares with its metavariables renumbered), and seconds: generation and Lean time saved (the cost
recorded with each hit), the rebuilds' Lean time, and the Lean saving net of it.

Example (``gen`` a backend, ``pool`` a ``LeanPool``, ``lean_cfg`` its config)::

    live = LiveSource(gen, pool)
    source = CachedSource(live, Path("results/cache"), policy=policy_settings(gen, policy_cfg),
                          lean=lean_settings(lean_cfg, repl_version), recheck=0.02,
                          tactic_timeout_s=lean_cfg.tactic_timeout_s)
    try:
        results = await search_from_source(theorems, source, cfg, sampling=…, seed=…)
    finally:
        source.close()                       # flush the new answers as shards
    source.stats()["policy"]["hit_rate"]
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from burnqed.config import LeanConfig, PolicyConfig
from burnqed.determinism import RUN_SPECIFIC_FILES, cpu_name, determinism_mode
from burnqed.isa import VARIABLES as ISA_VARIABLES
from burnqed.isa import pin_in_force
from burnqed.lean.client import repl_argv
from burnqed.lean.environment import environment_identity, observe_repl
from burnqed.lean.errors import ReplError, StartError
from burnqed.lean.pool import TacticFailure
from burnqed.policy import Candidate, Generation, SamplingParams, generation_of
from burnqed.provenance import code_digest, files_digest, launched_modules, lean_project_versions
from burnqed.search.answered import (
    AnsweredSession,
    AnsweredState,
    AnsweredSuccess,
    AnswerRefuted,
)
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

# Part of every key: a new layout starts afresh (v2: server identity, Lean environment, whole-file
# model digests; v3: Lean answers keyed on the tactic path from the root).
KEY_VERSION = "burnqed-expansion-cache-v3"
# Failures the clock decided (a wall-clock backstop) or the REPL's protocol (an error reply that is
# not Lean's verdict on the tactic), not Lean: never stored (burnqed.outcomes).
NOT_STORED = frozenset({"timeout", "protocol"})
DETERMINISTIC_SGLANG = "--enable-deterministic-inference"
REFRESH_S = 30.0  # at most this often, a start reads the shards other processes wrote meanwhile
# The variables of this process a launched server inherits that choose its hardware or kernels:
# these, and every one named with a prefix of the servers' own settings.
SERVER_VARIABLES = ("CUDA_VISIBLE_DEVICES", "VLLM_BATCH_INVARIANT", "VLLM_ATTENTION_BACKEND")
SERVER_PREFIXES = ("SGLANG_", "SGL_", "VLLM_", "FLASHINFER_")


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


def model_files(directory: Path) -> list[Path]:
    """The files of a model directory that hold its weights, tokenizer and config: all but hidden
    ones, burnqed's own records (``burnqed_*``) and a run's :data:`RUN_SPECIFIC_FILES`."""
    return sorted(
        p
        for p in Path(directory).iterdir()
        if p.is_file()
        and not p.name.startswith((".", "burnqed_"))
        and p.name not in RUN_SPECIFIC_FILES  # dates and wall times: not the weights
    )


def model_fingerprint(model: str) -> str:
    """The weights and tokenizer of a local model directory — every file's name and whole bytes
    (:func:`~burnqed.provenance.files_digest`; a file is read once and remembered by its identity
    on disk), so two checkpoints that differ in one tensor anywhere differ — or a served model's
    name: the same weights under another path give the same fingerprint."""
    path = Path(model)
    if not path.is_dir():
        return f"served:{model}"
    return files_digest(model_files(path), path)[:16]


def _code(obj: Any) -> str:
    """The code that produces ``obj``'s answers: a burnqed module's digest (with what it imports),
    else the class's qualified name (a test fake)."""
    module = type(obj).__module__
    if module.startswith("burnqed."):
        return code_digest(module)
    return f"{module}.{type(obj).__qualname__}"


def _gpu_driver() -> str | None:
    """The NVIDIA driver's version (``nvidia-smi``), None without one: the kernels a server's
    CUDA libraries load come with it."""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)  # fmt: skip
        versions = sorted({v.strip() for v in out.stdout.splitlines() if v.strip()})
        if out.returncode == 0 and versions:
            return ",".join(versions)
    return None


def local_hardware() -> dict[str, Any]:
    """What a server launched here computes on: the visible GPUs' names (torch's view, else
    ``nvidia-smi``'s with ``$CUDA_VISIBLE_DEVICES``) and the driver's version, else the CPU (its
    model name and the kernel level torch dispatches to here)."""
    import torch

    if torch.cuda.is_available():
        return {"gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
                "driver": _gpu_driver()}  # fmt: skip
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)  # fmt: skip
        names = [n.strip() for n in out.stdout.splitlines() if n.strip()]
        if out.returncode == 0 and names:
            return {"gpus": names, "visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
                    "driver": _gpu_driver()}  # fmt: skip
    return {"cpu": cpu_name(), "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def server_environment(command: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """The environment a server launched with ``command`` runs in — this process's (the launcher
    passes it on) with what an ``env NAME=VALUE …`` in front of the command sets or unsets — and
    the command after it."""
    env, words = dict(os.environ), list(command)
    if words and Path(words[0]).name == "env":
        words = words[1:]
        while words:
            word = words[0]
            if word in ("-u", "--unset") and len(words) > 1:
                env.pop(words[1], None)
                words = words[2:]
            elif word.startswith("-"):
                words = words[1:]  # -i and the like: not seen in a launch command
            elif "=" in word:
                name, _, value = word.partition("=")
                env[name] = value
                words = words[1:]
            else:
                break
    return env, words


# The packages whose code computes a launched server's tokens (kernels, attention, sampling), as
# its own interpreter has them installed (None: not installed there).
SERVER_PACKAGES = ("sglang", "sgl-kernel", "flashinfer-python", "flashinfer", "vllm", "torch",
                   "triton", "transformers", "xformers")  # fmt: skip
_VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "def v(n):\n"
    "    try:\n        return m.version(n)\n"
    "    except m.PackageNotFoundError:\n        return None\n"
    "print(json.dumps({n: v(n) for n in sys.argv[1:]}))"
)


def _interpreter(program: str, env: Mapping[str, str]) -> str | None:
    """The Python that runs a server's ``program`` (itself, or its script's ``#!`` line's)."""
    exe = shutil.which(program, path=env.get("PATH"))
    if exe is None:
        return None
    if re.fullmatch(r"python[\d.]*", Path(exe).name):
        return exe
    with contextlib.suppress(OSError, UnicodeDecodeError), open(exe, "rb") as f:
        first = f.readline(512).decode()
        words = first[2:].split() if first.startswith("#!") else []
        if len(words) > 1 and Path(words[0]).name == "env":
            return shutil.which(words[1], path=env.get("PATH"))
        if words and re.fullmatch(r"python[\d.]*", Path(words[0]).name):
            return words[0]
    return None


def server_packages(command: Sequence[str]) -> dict[str, str | None] | None:
    """The :data:`SERVER_PACKAGES` versions of the interpreter a launch command runs (its own
    environment: SGLang lives in one of its own), asked of that interpreter; None when the
    command's program is not a Python or a Python script (the key then holds the command only)."""
    env, words = server_environment(command)
    python = _interpreter(words[0], env) if words else None
    if python is None:
        return None
    with contextlib.suppress(OSError, subprocess.SubprocessError, ValueError, IndexError):
        out = subprocess.run([python, "-c", _VERSIONS, *SERVER_PACKAGES], env=env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=120)  # fmt: skip
        if out.returncode == 0:
            versions = json.loads(out.stdout.strip().splitlines()[-1])
            if isinstance(versions, dict):
                return versions
    log.warning("%s: could not ask it for its packages' versions", python)
    return None


def _by_content(identity: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A server's identity with the local model and tokenizer directories it names replaced by
    their content (:func:`model_fingerprint`): another tokenizer under the same path misses, the
    same one under another path hits."""
    if identity is None:
        return None
    out = json.loads(json.dumps(identity, default=str))
    where = [(out.get("args") or {}, k) for k in ("model_path", "tokenizer_path")]
    where.append((out.get("model") or {}, "root"))
    for holder, k in where:
        value = holder.get(k)
        if isinstance(value, str) and Path(value).is_dir():
            holder[k] = f"content:{model_fingerprint(value)}"
    return out


def _server_uncached(
    cfg: PolicyConfig,
    identity: Mapping[str, Any] | None,
    command: list[str] | None,
    env: Mapping[str, str] | None = None,
) -> str | None:
    """Why a server's answers cannot be cached (None: they can): it did not say what it runs, an
    external one states no hardware, it is not deterministic as it states it (SGLang's
    ``enable_deterministic_inference``; a launched SGLang that does not state it: its command), or
    it is a vLLM launched without batch invariance (``VLLM_BATCH_INVARIANT=1`` in ``env``, its
    environment: without it a sample depends on what else is in the batch)."""
    where = cfg.server_url or "the launched server"
    if identity is not None and identity.get("error"):
        return f"{where} did not state what it runs ({identity['error']})"
    if cfg.server_url is not None and (identity is None or identity.get("hardware") is None):
        return (
            f"the external server {cfg.server_url} (policy.server_url) does not state the "
            "hardware it computes on; launch it with policy.server_command to cache its answers"
        )
    stated = None if identity is None else identity.get("deterministic")
    if stated is False:
        return f"{where} states that it does not run deterministic inference"
    # The per-candidate sampling_seed acts only in SGLang's deterministic mode.
    flagged = cfg.server_url is None and DETERMINISTIC_SGLANG in (command or ())
    if cfg.backend == "sglang" and stated is None and not flagged:
        return "the backend's answers are not deterministic (no seeded deterministic mode)"
    vllm = identity is not None and identity.get("server") == "vllm"
    if vllm and (env or {}).get("VLLM_BATCH_INVARIANT") != "1":
        return (
            f"{where} is a vLLM not launched batch-invariant (VLLM_BATCH_INVARIANT=1 in its "
            "environment): its samples depend on what else is in the batch"
        )
    return None


def policy_settings(generator: Any, policy: PolicyConfig | Mapping[str, Any]) -> dict[str, Any]:
    """The run-wide part of a candidate's key: what besides the prompt, seed and sampling decides
    what ``generator`` (opened with the ``policy`` section) samples (module docstring).  Over HTTP
    the server is asked what it runs (once: call this once per run).  ``uncached`` is set, with
    the reason, when the backend's answers cannot be keyed or cannot repeat (the policy is then
    not cached)."""
    import torch

    cfg = policy if isinstance(policy, PolicyConfig) else PolicyConfig.from_dict(dict(policy))
    settings: dict[str, Any] = {
        "model": model_fingerprint(str(generator.model_id)),
        "backend": cfg.backend,
        "code": _code(generator),
        "determinism": determinism_mode(),
        "isa_pin": pin_in_force(),
        # Every variable the pin sets: under `native` the caller's own values choose the kernels.
        "isa_variables": {v: os.environ.get(v) for v in ISA_VARIABLES},
        "uncached": None,
    }
    if cfg.backend == "transformers":  # in process: the arithmetic is this machine's
        device = str(getattr(generator, "device", cfg.device))
        settings["dtype"] = str(getattr(generator, "dtype", cfg.dtype)).removeprefix("torch.")
        settings["device"] = device
        # One prefill row for all candidates, or one per candidate: other bits (policy.shared_prefill).
        settings["shared_prefill"] = bool(getattr(generator, "shared_prefill", False))
        if device.startswith("cuda"):
            settings["gpu"] = torch.cuda.get_device_name(torch.device(device))
        else:
            # The kernel level and the thread count move log-probabilities in their last digits.
            settings["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
            settings["torch_threads"] = torch.get_num_threads()
        from burnqed.provenance import package_versions

        settings["packages"] = package_versions(("torch", "transformers", "tokenizers"))
    else:  # a server computes: what it states about itself, and how this run started it
        command = list(cfg.server_command) if cfg.server_command else None
        ask = getattr(generator, "server_identity", None)
        identity = ask() if callable(ask) else None
        settings["server"] = _by_content(identity)
        env = None
        if cfg.server_url is None:
            env, _ = server_environment(command or [])
            settings["launch"] = command
            settings["hardware"] = local_hardware()
            # What the server's own environment holds: its packages, and the variables (this
            # process's, or set by an `env` in front of the command) that choose its kernels.
            settings["server_packages"] = server_packages(command) if command else None
            named = {*SERVER_VARIABLES, *(k for k in env if k.startswith(SERVER_PREFIXES))}
            settings["server_variables"] = {k: env.get(k) for k in sorted(named)}
        else:
            settings["url"] = cfg.server_url
        settings["uncached"] = _server_uncached(cfg, identity, command, env)
    return settings


def lean_settings(
    lean: LeanConfig | Mapping[str, Any],
    repl_version: str | None,
    *,
    running: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The run-wide part of a Lean answer's key (module docstring): toolchain, Mathlib and packages
    of ``lean.project_path``, the REPL's ``--version`` text ``repl_version`` (the search stage
    reads it), its arguments as the pool starts it (``repl_command`` past the executable, then
    imports and ``lean.options`` as ``--key=value``: a ``--maxHeartbeats=N`` there decides
    answers), the code of a REPL that is a burnqed module, the Lean environment the REPL runs in
    (:func:`~burnqed.lean.environment.environment_identity`, read off ``running`` — a running
    REPL's :func:`~burnqed.lean.environment.repl_process` — or, without it, off one started here
    to look: :func:`~burnqed.lean.environment.observe_repl`), burnqed's Lean client, imports,
    ``lean.options``, the heartbeat limit and the guard's patterns."""
    cfg = lean if isinstance(lean, LeanConfig) else LeanConfig.from_dict(dict(lean))
    launched = launched_modules(cfg.to_dict())
    if running is None and not launched:
        running = _observed(cfg)
    return {
        "lean_project": lean_project_versions(cfg.project_path),
        "repl_version": repl_version,
        "repl_arguments": repl_argv(cfg)[1:],
        "repl_code": code_digest(*launched) if launched else None,
        "environment": environment_identity(cfg, running),
        "client_code": code_digest("burnqed.lean.pool"),  # tactic wrapping, goal printing, guard
        "imports": list(cfg.imports),
        "options": dict(cfg.options),
        "tactic_heartbeats": cfg.tactic_heartbeats,
        "banned_tactics": list(cfg.banned_tactics),
    }


def _observed(cfg: LeanConfig) -> dict[str, Any] | None:
    """:func:`~burnqed.lean.environment.observe_repl` from synchronous code (on a thread of its
    own when an event loop runs here)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(observe_repl(cfg))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, observe_repl(cfg)).result()


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
    """The key of a theorem's start (its root state, or Lean's verdict on the statement): the
    run-wide Lean settings and the theorem's whole statement — and the key every state of the
    theorem chains from (:func:`tactic_key`)."""
    return _digest(KEY_VERSION, "start", settings, statement)


def tactic_key(parent: str, tactic: str) -> str:
    """The key of ``tactic`` on the state the answer keyed ``parent`` made (:func:`start_key` for
    the root): so a tactic's key holds the settings, the statement and the whole tactic path from
    the root, never the printed state alone — two states Lean prints alike (``↑x = ↑y`` over ℤ and
    over ℝ, ``⋯``, ``✝``) reached by different paths have different keys.

    >>> root = start_key("settings", "theorem t : p → p := by")
    >>> tactic_key(tactic_key(root, "intro h"), "exact h") != tactic_key(root, "exact h")
    True
    """
    return _digest(KEY_VERSION, "tactic", parent, tactic)


def path_keys(settings: str, statement: str, path: Sequence[str]) -> list[str]:
    """The keys of a theorem's start and of each step of ``path`` (tactics from its root)."""
    keys = [start_key(settings, statement)]
    for tactic in path:
        keys.append(tactic_key(keys[-1], tactic))
    return keys


def state_digest(text: str) -> str:
    """The check a tactic's row keeps beside its key: the digest of the state it ran on, as Lean
    printed it.  A path that now prints its state otherwise is a disagreement (another Lean, a
    non-determinism), not a hit."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


THEOREM_FIELDS = ("name", "key", "formal_statement", "header", "informal_prefix")


def theorem_record(theorem: Theorem) -> str:
    """The theorem as a Lean row's question keeps it (what starting it needs), as JSON."""
    return json.dumps({f: getattr(theorem, f) for f in THEOREM_FIELDS}, ensure_ascii=False,
                      sort_keys=True)  # fmt: skip


def theorem_of(record: str) -> Theorem:
    """The :class:`Theorem` of a :func:`theorem_record`."""
    return Theorem(**json.loads(record))


def agrees(row: Mapping[str, Any], text: str | None, kind: str | None) -> bool:
    """Whether a stored Lean answer says what Lean says now (the state ``text``, or a failure of
    ``kind``): the same printed state, or a failure of the same kind (a message may name
    generated variables another process numbers otherwise)."""
    if row["text"] is not None or text is not None:
        return row["text"] == text
    return row["error_kind"] == kind


@dataclasses.dataclass(frozen=True)
class CacheSpec:
    """A cache directory and the run-wide key parts a search stores its answers under (what
    :func:`~burnqed.search.stage.search_to_dir` opens a :class:`CachedSource` with), the fraction
    of Lean hits re-checked live (``cache_recheck``) and today's ``lean.tactic_timeout_s``."""

    dir: Path
    policy: Mapping[str, Any] | None  # policy_settings(...); None: the policy is not cached
    lean: Mapping[str, Any] | None  # lean_settings(...); None: Lean is not cached
    recheck: float = 0.0
    recheck_seed: int | None = None  # the re-check draws' seed (None: 0; recorded in the block)
    tactic_timeout_s: float | None = None

    def open(self, live: LiveSource) -> CachedSource:
        return CachedSource(live, self.dir, policy=self.policy, lean=self.lean,
                            recheck=self.recheck, recheck_seed=self.recheck_seed,
                            tactic_timeout_s=self.tactic_timeout_s)  # fmt: skip


# --------------------------------------------------------------------------------------------
# The source


def _candidate(row: Mapping[str, Any]) -> Candidate:
    return Candidate(row["text"], row["logprob"], row["num_tokens"], row["finish_reason"])


class CachedSource:
    """The engine's answer source over a cache directory, reading through to ``live`` (a
    :class:`~burnqed.search.sources.LiveSource`) on a miss (module docstring).

    ``policy`` / ``lean``: the run-wide key parts (:func:`policy_settings`, :func:`lean_settings`);
    None leaves that kind uncached.  ``recheck``: the fraction of Lean hits asked live again (its
    draws seeded by ``recheck_seed``: the search stage derives it from the job, None is 0, so a
    rerun re-checks the same hits); ``tactic_timeout_s``: a stored answer that
    cost more is not served.  :meth:`close` writes what is still buffered and the run's record
    (``runs/``); call it when the search ends, however it ends."""

    kind = "cache"

    def __init__(
        self,
        live: LiveSource,
        cache_dir: str | Path,
        *,
        policy: Mapping[str, Any] | None,
        lean: Mapping[str, Any] | None,
        recheck: float = 0.0,
        recheck_seed: int | None = None,
        tactic_timeout_s: float | None = None,
        refresh_s: float = REFRESH_S,
        flush_rows: int = 1000,
        flush_s: float = 60.0,
    ) -> None:
        if not 0.0 <= recheck <= 1.0:
            raise ValueError(f"cache_recheck must be within [0, 1] (got {recheck})")
        self.live = live
        self.dir = Path(cache_dir)
        self.writer = new_writer_id()
        self.refresh_s = refresh_s
        self.recheck = float(recheck)
        self.recheck_seed = 0 if recheck_seed is None else int(recheck_seed)
        self.tactic_timeout_s = tactic_timeout_s
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
            self.policy_store = ShardStore(self.dir / "policy", POLICY_SCHEMA,
                                           settings=self.policy_settings, description=self.policy,
                                           **opts)  # fmt: skip
        self.lean_store: ShardStore | None = None
        if lean is not None:
            self.lean_store = ShardStore(self.dir / "lean", LEAN_SCHEMA,
                                         settings=self.lean_settings, description=self.lean,
                                         **opts)  # fmt: skip
        self._refreshed = time.monotonic()
        self.counts: dict[str, Counter] = {
            k: Counter()
            for k in ("requests", "candidates", "lean", "starts", "not_stored", "not_served",
                      "states", "verifications", "rechecks", "evicted", "rejected_proofs")
        }  # fmt: skip
        self.seconds: Counter[str] = Counter()  # saved / spent per kind, rebuilds
        # Attempts whose answers Lean refuted (to redo), and those redone with Lean asked live.
        self._redo: set[tuple[str, int]] = set()
        self._live_attempts: set[tuple[str, int]] = set()
        # Which Lean answers were served to which attempts (key → attempts, attempt → keys), the
        # attempts the engine has written, and those written before an answer they used went.
        self._served_to: dict[str, set[tuple[str, int]]] = {}
        self._served_keys: dict[tuple[str, int], set[str]] = {}
        self._settled: set[tuple[str, int]] = set()
        self._stale: set[tuple[str, int]] = set()
        # lookup runs on the event loop, generate on the generator's thread: counts under a lock
        self._count_lock = threading.Lock()
        self._closed = False
        log.info(
            "expansion cache %s: %d policy and %d Lean answers under this run's keys; %g of the "
            "Lean hits re-checked live%s",
            self.dir, len(self.policy_store or ()), len(self.lean_store or ()), self.recheck,
            f"; policy not cached ({self.policy_off})" if self.policy_off else "",
        )  # fmt: skip

    def _policy_off(self, policy: Mapping[str, Any] | None) -> str | None:
        """Why the policy is not cached in this run (None: it is)."""
        if policy is None:
            return "no policy key"
        if policy.get("uncached"):
            return str(policy["uncached"])
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
        """Read what other processes wrote meanwhile (two evals of one model side by side); an
        answer another writer evicted that this run served redoes the attempts that used it."""
        if time.monotonic() - self._refreshed < self.refresh_s:
            return
        self._refreshed = time.monotonic()
        for store in (self.policy_store, self.lean_store):
            if store is not None:
                store.refresh()
        if self.lean_store is not None:
            dropped, self.lean_store.dropped = self.lean_store.dropped, []
            for key in dropped:
                self._refuted_key(key)

    def _recheck_drawn(self, key: str, theorem: str, attempt: int) -> bool:
        """Whether this hit is re-checked: a draw of the run's own seeded hash of (key, theorem,
        attempt) — no state shared with the search's draws, the same whatever order the
        questions come in — below ``recheck``."""
        if self.recheck <= 0.0:
            return False
        if self.recheck >= 1.0:
            return True
        h = hashlib.blake2b(f"{self.recheck_seed}\0{key}\0{theorem}\0{attempt}".encode(),
                            digest_size=8)  # fmt: skip
        return int.from_bytes(h.digest(), "big") / 2.0**64 < self.recheck

    def _why_live(self, row: Mapping[str, Any], key: str, theorem: str, attempt: int,
                  *, live_only: bool, state: str | None = None) -> str | None:  # fmt: skip
        """Why a held answer is asked live instead of served (None: served).  ``state``: the
        printed state a tactic runs on (None for a start), checked against the row's."""
        if live_only:
            return "live"  # the attempt is redone with every Lean question asked live
        if state is not None and row.get("state_digest") not in (None, state_digest(state)):
            self.counts["not_served"]["printed_otherwise"] += 1
            return "printed_otherwise"  # the path printed its state otherwise when it was stored
        limit = self.tactic_timeout_s
        if state is not None and limit is not None and row["cost_s"] > limit:
            self.counts["not_served"]["over_time_limit"] += 1
            return "over_time_limit"  # a live run would time out here today
        if self._recheck_drawn(key, theorem, attempt):
            self.counts["rechecks"]["asked"] += 1
            return "recheck"
        return None

    def _served(self, key: str, theorem: str, attempt: int) -> None:
        """Answer ``key`` was served to ``attempt`` of ``theorem`` (a hit): if it is evicted
        later in this run, that attempt is redone (or, written already, counted stale)."""
        ident = (theorem, attempt)
        self._served_to.setdefault(key, set()).add(ident)
        self._served_keys.setdefault(ident, set()).add(key)

    def _refuted_key(self, key: str) -> None:
        """The answer of ``key`` is gone (evicted here or by another writer): every attempt of
        this run it was served to is redone live — before it is written, since the engine holds
        a theorem's attempts until its last one ends — or, written already (an answer shared
        across theorems, an eviction by another process), counted in ``stale_attempts``."""
        for ident in self._served_to.pop(key, set()):
            if ident in self._settled:
                self._stale.add(ident)
            else:
                self._redo.add(ident)

    def _evict(self, key: str, cause: str, reason: str) -> None:
        """Evict ``key``'s answer (``cause``: what refuted it), and redo what was served it."""
        assert self.lean_store is not None
        if self.lean_store.evict(key, reason):
            self.counts["evicted"][cause] += 1
        self._refuted_key(key)

    def _answered_live(
        self,
        key: str,
        row: Mapping[str, Any] | None,
        why: str | None,
        *,
        text: str | None,
        kind: str | None,
        message: str | None,
        cost_s: float,
        question: Mapping[str, Any],
        ident: tuple[str, int],
        state: str | None,
    ) -> None:
        """Lean answered ``key`` live for attempt ``ident`` (``row``: what the cache held, asked
        again because ``why``): store a new answer; reconcile a held one — the same answer
        stands; a different one (or a row whose printed state is not today's) is a
        disagreement: evicted, the live answer stored, and the attempt redone live, since other
        answers it was served may be as wrong.  A timeout or a protocol error stores and
        refutes nothing."""
        if kind in NOT_STORED:
            self.counts["not_stored"][kind] += 1
            if row is not None and why == "recheck":
                self.counts["rechecks"]["inconclusive"] += 1
            return
        if row is not None:
            # Stored below another printed state than its path prints now: a disagreement
            # whatever it says (found by the check, or by a redo that asked it anyway).
            otherwise = state is not None and row.get("state_digest") not in (
                None, state_digest(state)
            )  # fmt: skip
            if not otherwise and agrees(row, text, kind):
                if why == "recheck":
                    self.counts["rechecks"]["agreed"] += 1
                return
            if why == "recheck":
                self.counts["rechecks"]["disagreed"] += 1
            said = row["text"] if row["text"] is not None else f"{row['error_kind']} failure"
            now = text if text is not None else f"{kind} failure"
            if otherwise:
                reason = f"{why}: stored below another printed state; cached {said!r}"
            else:
                reason = f"{why}: cached {said!r}, Lean now {now!r}"
            self._evict(key, why or "live", reason)
            self._redo.add(ident)
        self._store_lean(key, text, kind, message, cost_s, question, state)

    async def start(self, theorem: Theorem, attempt: int) -> Any:
        self._maybe_refresh()
        store = self.lean_store
        ident = (theorem.key, attempt)
        live_only = ident in self._live_attempts
        if store is None:
            session = CachedSession(self, theorem, attempt, None)
            await session.start_live()
            return session
        statement = statement_digest(theorem)
        key = start_key(self.lean_settings, statement)
        row = store.get(key)
        why = None
        if row is not None:
            why = self._why_live(row, key, theorem.key, attempt, live_only=live_only)
            if why is None:
                self.counts["starts"]["hits"] += 1
                self.seconds["lean_saved"] += row["cost_s"]
                self._served(key, *ident)
                if row["text"] is None:
                    raise StartError(row["error"])
                return CachedSession(self, theorem, attempt, row["text"], statement, row["cost_s"])
        else:
            self.counts["starts"]["misses"] += 1
        session = CachedSession(self, theorem, attempt, None, statement, live_only=live_only)
        question = {"theorem": session.record, "path": [], "tactic": None}
        t0 = time.perf_counter()
        try:
            await session.start_live()
        except StartError as e:  # Lean's verdict on the statement: an answer (ReplError is not)
            self._answered_live(key, row, why, text=None, kind="statement", message=str(e),
                                cost_s=time.perf_counter() - t0, question=question,
                                ident=ident, state=None)  # fmt: skip
            raise
        spent = time.perf_counter() - t0
        self.seconds["lean_spent"] += spent
        self._answered_live(key, row, why, text=session.root.text, kind=None, message=None,
                            cost_s=spent, question=question, ident=ident, state=None)  # fmt: skip
        return session

    def _store_lean(
        self,
        key: str,
        text: str | None,
        kind: str | None,
        error: str | None,
        cost: float,
        question: Mapping[str, Any] | None = None,
        state: str | None = None,
    ) -> None:
        assert self.lean_store is not None
        self.lean_store.put(
            {"key": key, "text": text, "error_kind": kind, "error": error, "cost_s": float(cost),
             "state_digest": None if state is None else state_digest(state), **(question or {})}
        )  # fmt: skip

    def refuted(self, theorem: Theorem, attempt: int, key: str, e: AnswerRefuted) -> None:
        """Lean refuted the cached answer ``key`` an attempt went on from: evict it, and redo the
        attempt (and any other of this run that was served it) with every Lean question asked
        live (:meth:`redo`)."""
        what = "fails" if e.live_text is None else "is printed otherwise"
        self._evict(key, "rebuild", f"rebuild: the cached state {what} in Lean")
        self._redo.add((theorem.key, attempt))

    def redo(self, theorem: str, attempt: int) -> bool:
        """Whether the engine should search ``attempt`` of ``theorem`` again: an answer it was
        served proved wrong (a re-check or a rebuild disagreed, Lean rejected a proof assembled
        from cached steps, another writer evicted it).  The redo asks Lean every question live,
        so it is asked once."""
        ident = (theorem, attempt)
        if ident not in self._redo or ident in self._live_attempts:
            return False
        self._live_attempts.add(ident)
        for key in self._served_keys.pop(ident, set()):  # the redo is served nothing
            self._served_to.get(key, set()).discard(ident)
        self.counts["states"]["redone_attempts"] += 1
        return True

    def settled(self, theorem: str, attempt: int) -> None:
        """The engine wrote ``attempt``'s result: an answer it was served evicted from now on
        makes it stale (counted), no longer redone."""
        self._settled.add((theorem, attempt))

    async def verify(self, theorem: Theorem, tactics: Sequence[str], *, attempt: int) -> Any:
        """Always live: a proof found through cached answers is checked whole by Lean.  When Lean
        rejects one (not for the clock) that went through answers the cache served this attempt,
        the path is asked again live (:meth:`_recheck_path`): an answer Lean now refutes is
        evicted and the attempt redone live; when every answer stands, Lean rejects the proof
        itself (a step-wise success the file check refuses) and the attempt goes on as it would
        live."""
        self.counts["verifications"]["live"] += 1
        verdict = await self.live.verify(theorem, tactics, attempt=attempt)
        ident = (theorem.key, attempt)
        served = self._served_keys.get(ident)
        timed_out = any(str(r).startswith("timeout:") for r in verdict.reasons)
        if verdict.ok is False and not timed_out and served and self.lean_store is not None:
            keys = path_keys(self.lean_settings, statement_digest(theorem), tactics)
            if any(k in served for k in keys):
                self.counts["rejected_proofs"]["through_cache"] += 1
                await self._recheck_path(theorem, attempt, tactics, keys)
        return verdict

    async def _recheck_path(
        self, theorem: Theorem, attempt: int, tactics: Sequence[str], keys: Sequence[str]
    ) -> None:
        """Ask Lean live the start and each step of a rejected proof's path (``keys``: their
        keys) and reconcile the answers the cache holds: one that differs is evicted
        (``rejected_proof``) and the attempt marked for a live redo."""
        assert self.lean_store is not None
        said: list[tuple[str, str | None, str | None]] = []
        try:
            session = await self.live.start(theorem, attempt)
        except ReplError as e:  # it started before: infrastructure, nothing to reconcile
            log.warning("%s: the rejected proof's path could not be asked again: %s",
                        theorem.key, e)  # fmt: skip
            return
        try:
            state = session.root
            said.append((keys[0], state.text, None))
            for tactic, key in zip(tactics, keys[1:], strict=True):
                r = await session.apply(state, tactic)
                self.counts["rejected_proofs"]["steps_asked"] += 1
                self.seconds["lean_spent"] += float(r.lean_time_s)
                st = getattr(r, "state", None)
                if st is None and r.kind in NOT_STORED:
                    break  # the clock or the protocol decided: nothing to reconcile from here
                said.append((key, None if st is None else st.text, None if st else r.kind))
                if st is None:
                    break
                state = st
        except ReplError as e:  # what was answered before it stands
            log.warning("%s: asking the rejected proof's path again failed: %s", theorem.key, e)
        finally:
            await session.close()
        for key, text, kind in said:
            row = self.lean_store.get(key)
            if row is not None and not agrees(row, text, kind):
                was = row["text"] if row["text"] is not None else f"{row['error_kind']} failure"
                now = text if text is not None else f"{kind} failure"
                self._evict(key, "rejected_proof",
                            f"rejected_proof: cached {was!r}, Lean now {now!r}")  # fmt: skip
                self._redo.add((theorem.key, attempt))
                self.counts["rejected_proofs"]["refuted"] += 1

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
            "not_served": dict(sorted(c["not_served"].items())),
            "states": {
                k: states[k] for k in ("adopted", "rebuilds", "disagreements", "redone_attempts")
            },
            # attempts written before an answer they were served was evicted: not redone, their
            # results may be wrong (compare.md flags them)
            "stale_attempts": len(self._stale),
            # proofs Lean rejected whole that went through answers the cache served, and those
            # whose path Lean then answered otherwise than the cache (evicted, redone)
            "rejected_proofs": {
                k: c["rejected_proofs"][k] for k in ("through_cache", "steps_asked", "refuted")
            },
            "rechecks": {
                "fraction": self.recheck,
                "seed": self.recheck_seed,
                **{k: c["rechecks"][k] for k in ("asked", "agreed", "disagreed", "inconclusive")},
            },
            "evicted": dict(sorted(c["evicted"].items())),
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
    below them (:mod:`burnqed.search.answered`), and what live answered stored.  Strict: an answer
    Lean refutes while rebuilding ends the attempt, evicted, for a redo (:meth:`CachedSource.redo`).
    ``live_only``: the redo, every question asked live and reconciled with what the cache held."""

    def __init__(
        self,
        source: CachedSource,
        theorem: Theorem,
        attempt: int,
        root: str | None,
        statement: str | None = None,
        root_cost_s: float = 0.0,
        *,
        live_only: bool = False,
    ) -> None:
        super().__init__(theorem, attempt, root, live=source.live, counts=source.counts,
                         root_cost_s=root_cost_s, strict=True)  # fmt: skip
        self.source = source
        self.statement = statement or statement_digest(theorem)
        self.live_only = live_only
        self.record = theorem_record(theorem)
        self._keys: dict[int, str] = {}  # answered state → the key of the answer that made it

    def _step_key(self, sid: int) -> str:
        """The cache key of the answer that made answered state ``sid`` (0: the start): the start's
        key chained through the tactics from the root (:func:`tactic_key`), remembered."""
        chain = []
        while sid not in self._keys:
            parent, _ = self.step(sid)
            if parent is None:
                self._keys[sid] = start_key(self.source.lean_settings, self.statement)
                break
            chain.append(sid)
            sid = parent.sid
        key = self._keys[sid]
        for s in reversed(chain):
            key = tactic_key(key, self.step(s)[1])
            self._keys[s] = key
        return key

    async def _ask_lean(self, state: AnsweredState, tactic: str) -> Any:
        try:
            return await self.apply_live(state, tactic)
        except AnswerRefuted as e:
            if self.source.lean_store is not None:
                self.source.refuted(self.theorem, self.attempt, self._step_key(e.sid), e)
            raise

    async def apply(self, state: AnsweredState, tactic: str) -> Any:
        src = self.source
        store = src.lean_store
        if store is None:
            return await self._ask_lean(state, tactic)
        key = tactic_key(self._step_key(state.sid), tactic)
        row = store.get(key)
        why = None
        if row is not None:
            why = src._why_live(row, key, self.theorem.key, self.attempt,
                                live_only=self.live_only, state=state.text)  # fmt: skip
            if why is None:
                src.counts["lean"]["hits"] += 1
                src.seconds["lean_saved"] += row["cost_s"]
                src._served(key, self.theorem.key, self.attempt)
                if row["text"] is None:
                    return TacticFailure(row["error_kind"], row["error"], 0.0)
                child = self.add(state.sid, tactic, row["text"], row["cost_s"])
                self._keys[child.sid] = key
                return AnsweredSuccess(child, (), 0.0)
        else:
            src.counts["lean"]["misses"] += 1
        r = await self._ask_lean(state, tactic)  # an infrastructure error raises: never stored
        src.seconds["lean_spent"] += float(r.lean_time_s)
        st = getattr(r, "state", None)
        if st is not None:
            self._keys[st.sid] = key
        question = {"theorem": self.record, "path": self.path(state.sid), "tactic": tactic}
        src._answered_live(
            key, row, why, text=None if st is None else st.text,
            kind=None if st is not None else r.kind, message=None if st is not None else r.message,
            cost_s=float(r.lean_time_s), question=question,
            ident=(self.theorem.key, self.attempt), state=state.text,
        )  # fmt: skip
        return r

    async def close(self) -> None:
        self.source.seconds["rebuild"] += self.rebuild_s
        await super().close()


__all__ = [
    "KEY_VERSION",
    "CacheSpec",
    "CachedSession",
    "CachedSource",
    "agrees",
    "candidate_key",
    "lean_settings",
    "local_hardware",
    "model_fingerprint",
    "path_keys",
    "policy_settings",
    "settings_digest",
    "start_key",
    "state_digest",
    "statement_digest",
    "tactic_key",
    "theorem_of",
    "theorem_record",
]
