"""One Pantograph REPL process, spoken to over its one-line JSON protocol (``reference/pantograph.md``).

:class:`ReplClient` owns its process: it starts ``lean.repl_command`` (+ ``imports``, ``--key=value``
options, ``LEAN_PATH``/cwd of a Mathlib project) in a new process group with memory and CPU limits,
waits for ``ready.``, sets the REPL's own ``timeout`` option, and then sends one compact JSON line per
request, bounding every read with a wall-clock timeout (the REPL's timeout + ``lean.hang_grace_s``).
Tactics go under the per-tactic heartbeat limit, ``set_option maxHeartbeats N in <tactic>``
(``lean.tactic_heartbeats``, :func:`with_heartbeats`): Lean's "maximum number of heartbeats" failure
is a rejection of kind ``heartbeats``, deterministic; the REPL's ``interrupt`` reply is a
:class:`~burnqed.lean.errors.ReplTimeoutError` that leaves the process and its states usable.  Requests from concurrent tasks are
pipelined: up to :data:`PIPELINE_DEPTH` lines are written ahead of their replies, which one reader
task matches to them in order, so the REPL never waits for Python between two requests.  stderr is
drained to a log file (a full stderr pipe would deadlock the REPL).  Replies become frozen
dataclasses; anything that breaks the protocol (EOF, a line that is not JSON, a read that times out)
kills the process group and raises :class:`~burnqed.lean.errors.ReplError` quoting the cause, and
fails the requests queued behind it as never run.  Restarting and replaying is the pool's job
(:mod:`burnqed.lean.pool`).

No orphans: every process group this module starts is recorded, and killed at interpreter exit
(``atexit``), on SIGTERM (a handler that kills them, then hands the signal on to the previous handler),
and, on Linux, by the kernel when the parent dies (``PR_SET_PDEATHSIG``), which covers ``kill -9``.
(The kernel ties that signal to the *thread* that forked: run the event loop that owns the REPLs in
a thread that outlives them, as ``asyncio.run`` in the main thread does.)

Example (with burnqed's propositional REPL, which speaks the same protocol)::

    >>> import asyncio, sys
    >>> from burnqed.config import LeanConfig
    >>> cfg = LeanConfig(repl_command=(sys.executable, "-m", "burnqed.proplogic"), imports=())
    >>> async def demo():
    ...     async with ReplClient(cfg) as repl:
    ...         root = await repl.goal_start("∀ (p : Prop), p → p")
    ...         return await repl.goal_tactic(root.state_id, "intro p h")
    >>> print(render_goals(asyncio.run(demo()).goals))   # doctest: +SKIP
    p : Prop
    h : p
    ⊢ p
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import errno
import json
import logging
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from burnqed.config import LeanConfig
from burnqed.lean.errors import (
    ReplError,
    ReplProtocolError,
    ReplTimeoutError,
    ReplVersionError,
    is_interrupt,
)
from burnqed.lean.goals import Goal, render_goals

log = logging.getLogger(__name__)

MIN_VERSION = (0, 3, 4)  # first protocol with messages as objects and hasSorry/hasUnsafe
LINE_LIMIT = (
    64 * 2**20
)  # bytes per reply line: env.catalog or a big goal list can exceed asyncio's 64 KiB
STDERR_TAIL = 4096  # bytes of stderr kept for error messages
DRAIN_ABOVE = 2**16  # bytes buffered for the REPL's stdin past which a sender waits for it


def read_timeout_for(tactic_timeout_s: float, hang_grace_s: float) -> float:
    """Client-side read timeout: the REPL's own timeout plus the grace for it to answer ``interrupt``.

    Cancellation inside Lean is cooperative, so a tactic can outlive the REPL timeout; past this
    bound (a hard hang) the client kills the process instead of waiting forever.
    """
    return tactic_timeout_s + hang_grace_s


# Lean's message when a limit counted in heartbeats is reached: the elaborator's "(deterministic)
# timeout at `whnf`, maximum number of heartbeats (N) has been reached" and the kernel's
# "(kernel) deterministic timeout".
_HEARTBEATS = re.compile(r"maximum number of heartbeats|\(kernel\) deterministic timeout")


def with_heartbeats(tactic: str, heartbeats: int | None) -> str:
    """The text sent for ``tactic`` under the per-tactic limit: ``set_option maxHeartbeats N in``.

    The option's scope is a tactic sequence (``set_option … in tacticSeq``), so a tactic of several
    lines goes on the lines after ``in``, where its own layout holds.  ``None``: the tactic alone.

    >>> with_heartbeats("simp", 200000)
    'set_option maxHeartbeats 200000 in simp'
    >>> with_heartbeats("constructor\\nexact h", 400)
    'set_option maxHeartbeats 400 in\\nconstructor\\nexact h'
    """
    if heartbeats is None:
        return tactic
    sep = "\n" if "\n" in tactic else " "
    return f"set_option maxHeartbeats {heartbeats} in{sep}{tactic}"


# --------------------------------------------------------------------------------------------
# Replies


@dataclass(frozen=True)
class Message:
    """A Lean message (``SerialMessage``): severity, text and start position (1-based line)."""

    severity: str  # "error" | "warning" | "information"
    text: str
    line: int | None = None
    column: int | None = None

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | str) -> Message:
        if isinstance(d, str):  # Pantograph 0.3.2-0.3.3 sent bare strings (tactic errors)
            return cls("error", d)
        pos = d.get("pos") or {}
        return cls(
            severity=str(d.get("severity", "error")),
            text=str(d.get("data", "")),
            line=pos.get("line"),
            column=pos.get("column"),
        )

    def __str__(self) -> str:
        where = f"{self.line}:{self.column}: " if self.line else ""
        return f"{where}{self.severity}: {self.text}"


@dataclass(frozen=True)
class GoalState:
    """A proof state the REPL holds: its id (valid until the process dies) and its goals."""

    state_id: int
    goals: tuple[Goal, ...]
    messages: tuple[Message, ...] = ()  # warnings/infos of the tactic that produced it
    lean_time_s: float = field(default=0.0, compare=False)  # REPL time of that tactic

    @property
    def text(self) -> str:
        return render_goals(self.goals)


@dataclass(frozen=True)
class TacticRejected:
    """A tactic Lean did not accept: an elaboration error, a parse error, or a result using sorry."""

    kind: Literal["error", "parse", "sorry", "heartbeats"]  # heartbeats: the per-tactic limit
    message: str
    messages: tuple[Message, ...] = ()
    lean_time_s: float = field(default=0.0, compare=False)  # REPL time of the tactic


@dataclass(frozen=True)
class CompilationUnit:
    """One command of a ``frontend.process`` reply."""

    boundary: tuple[int, int]  # UTF-8 byte offsets into the file
    messages: tuple[Message, ...]
    goal_state_id: int | None = None  # with sorrys: the state holding the `sorry` goals
    goals: tuple[Goal, ...] = ()

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CompilationUnit:
        b = d.get("boundary") or (0, 0)
        return cls(
            boundary=(int(b[0]), int(b[1])),
            messages=tuple(Message.from_json(m) for m in d.get("messages", ())),
            goal_state_id=d.get("goalStateId"),
            goals=tuple(Goal.from_json(g) for g in d.get("goals", ())),
        )


@dataclass(frozen=True, order=True)
class ReplVersion:
    """A Pantograph version as ``repl --version`` prints it (``0.3.4`` or ``0.3.7/v4.21.0``)."""

    major: int
    minor: int
    patch: int
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> ReplVersion:
        m = re.match(r"\s*v?(\d+)\.(\d+)\.(\d+)", text)
        if not m:
            raise ReplVersionError(f"cannot read a version from `--version` output {text[:200]!r}")
        return cls(int(m[1]), int(m[2]), int(m[3]), text.strip())

    @property
    def start_route(self) -> Literal["process", "distil"]:
        """How a ``theorem … := by`` statement becomes a goal (``reference/pantograph.md`` §9).

        Up to v0.3.4 ``frontend.process`` turns ``sorry``s into goals (``sorrys: true``); later
        versions dropped that and moved it to ``frontend.distil``.  The one place this is decided.
        """
        return "process" if (self.major, self.minor, self.patch) <= (0, 3, 4) else "distil"


# --------------------------------------------------------------------------------------------
# Process groups: limits, registry, no orphans

_groups: dict[int, int] = {}  # pgid -> pid of the Python process that started it
_terminating = False  # set by SIGTERM: no new REPLs while the process goes down
_previous_sigterm: Any = None
_installed = False
_install_lock = threading.Lock()
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def live_process_groups() -> list[int]:
    """The REPL process groups this process started and has not yet reaped."""
    me = os.getpid()
    return [g for g, owner in _groups.items() if owner == me]


def kill_all_groups() -> int:
    """SIGKILL every REPL process group this process started; return how many were signalled."""
    me = os.getpid()
    n = 0
    for pgid, owner in list(_groups.items()):
        if owner != me:  # inherited through fork(): the parent owns it
            continue
        _killpg(pgid)
        _groups.pop(pgid, None)
        n += 1
    return n


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _on_sigterm(signum: int, frame: Any) -> None:
    global _terminating
    _terminating = True
    n = kill_all_groups()
    if n:
        log.warning("SIGTERM: killed %d REPL process group(s)", n)
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
    else:  # SIG_DFL, or a handler not set from Python: die by SIGTERM as we would have
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _install_handlers() -> None:
    global _installed, _previous_sigterm
    with _install_lock:
        if _installed:
            return
        _installed = True
        atexit.register(kill_all_groups)
        if threading.current_thread() is threading.main_thread():
            _previous_sigterm = signal.getsignal(signal.SIGTERM)
            # A process that ignores SIGTERM keeps its REPLs too.
            if _previous_sigterm != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, _on_sigterm)
        else:  # signal handlers can only be set from the main thread; PDEATHSIG and atexit remain
            log.debug("not in the main thread: no SIGTERM handler installed for REPL clean-up")


def _child_setup(memory_limit_mb: int | None, cpu_limit_s: float | None) -> Callable[[], None]:
    """What the forked child runs before exec: die with the parent, then apply the limits."""
    parent = os.getpid()
    libc = _libc
    mem = None if memory_limit_mb is None else int(memory_limit_mb) * 2**20
    cpu = None if cpu_limit_s is None else max(1, math.ceil(cpu_limit_s))

    def setup() -> None:  # runs between fork and exec: no logging, no locks
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)
        if mem is not None:
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        if cpu is not None:  # SIGXCPU at the soft limit, SIGKILL a little later
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))

    return setup


@cache
def _lake_lean_path(project_path: str) -> str:
    try:
        out = subprocess.run(
            ["lake", "env", "printenv", "LEAN_PATH"],
            cwd=project_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    except FileNotFoundError:
        raise ReplError(
            f"lean.project_path={project_path!r}: `lake` is not on PATH (it gives LEAN_PATH)"
        ) from None
    except subprocess.CalledProcessError as e:
        raise ReplError(
            f"lean.project_path={project_path!r}: `lake env printenv LEAN_PATH` failed: "
            f"{e.stderr.strip()[-500:]}"
        ) from None
    return out.stdout.strip()  # the trailing newline is not part of the path


def repl_environment(cfg: LeanConfig) -> tuple[dict[str, str], str | None]:
    """The environment and working directory of a REPL: ``LEAN_PATH`` and cwd of a Lean project."""
    env = dict(os.environ)
    if cfg.project_path is None:
        return env, None
    if not Path(cfg.project_path).is_dir():
        raise ReplError(f"lean.project_path={cfg.project_path!r}: not a directory")
    env["LEAN_PATH"] = _lake_lean_path(cfg.project_path)
    return env, cfg.project_path


def repl_argv(cfg: LeanConfig) -> list[str]:
    """``repl_command`` + modules to import + Lean options as ``--key=value``."""
    options = []
    for k, v in cfg.options.items():
        value = str(v).lower() if isinstance(v, bool) else str(v)  # Lean spells booleans lowercase
        options.append(f"--{k}={value}")
    return [*cfg.repl_command, *cfg.imports, *options]


@cache
def _launchers() -> tuple[str, str] | None:
    """util-linux's ``setpriv`` and ``prlimit`` (Linux; both on PATH), or None."""
    if not sys.platform.startswith("linux"):
        return None
    setpriv, prlimit = shutil.which("setpriv"), shutil.which("prlimit")
    return (setpriv, prlimit) if setpriv and prlimit else None


def _launched(argv: Sequence[str], memory_limit_mb: int | None, cpu_limit_s: float | None):
    """``argv`` behind ``setpriv --pdeathsig KILL`` and ``prlimit``: what :func:`_child_setup`
    does between fork and exec, done by two small programs that exec the REPL in turn, so the
    spawn needs no Python in the child and Python can ``vfork``.  A fork copies the page tables
    of the whole search process (torch, the model) and the child then tears them down again at
    exec: ~40 ms of the event loop's time per REPL, and the propositional demo starts one per
    found proof (``verifiers``).  None where the two programs are missing: :func:`_child_setup`
    then.  The one thing lost is :func:`_child_setup`'s check that the parent did not die before
    the death signal was armed; a REPL orphaned that way reads EOF on its stdin and exits."""
    tools = _launchers()
    if tools is None:
        return None
    setpriv, prlimit = tools
    limits = []
    if memory_limit_mb is not None:
        limits.append(f"--as={int(memory_limit_mb) * 2**20}")
    if cpu_limit_s is not None:  # SIGXCPU at the soft limit, SIGKILL a little later
        cpu = max(1, math.ceil(cpu_limit_s))
        limits.append(f"--cpu={cpu}:{cpu + 5}")
    wrapped = [setpriv, "--pdeathsig", "KILL", "--"]
    if limits:
        wrapped += [prlimit, *limits, "--"]
    return [*wrapped, *argv]


def _unrunnable(program: str, path: str | None, cwd: str | None) -> str | None:
    """Why exec would not run ``program`` as ``create_subprocess_exec`` runs it (after ``cwd``),
    in the words of the OSError it would raise; None when it would."""
    if os.sep not in program:
        if shutil.which(program, path=path) is not None:
            return None
        return f"[Errno {errno.ENOENT}] {os.strerror(errno.ENOENT)}: {program!r}"
    full = Path(cwd, program) if cwd is not None else Path(program)
    if not full.exists():
        return f"[Errno {errno.ENOENT}] {os.strerror(errno.ENOENT)}: {program!r}"
    if not full.is_file() or not os.access(full, os.X_OK):
        return f"[Errno {errno.EACCES}] {os.strerror(errno.EACCES)}: {program!r}"
    return None


async def _spawn(cfg: LeanConfig, argv: Sequence[str]) -> asyncio.subprocess.Process:
    if _terminating:
        raise ReplError("not starting a REPL: this process is shutting down (SIGTERM)")
    env, cwd = repl_environment(cfg)
    _install_handlers()
    launched = _launched(argv, cfg.memory_limit_mb, cfg.cpu_limit_s)
    why = None if launched is None else _unrunnable(argv[0], env.get("PATH"), cwd)
    if why is not None:  # behind the launchers it would fail only when they exec it
        raise ReplError(f"lean.repl_command: cannot run {list(argv)!r}: {why}")
    try:
        proc = await asyncio.create_subprocess_exec(
            *(argv if launched is None else launched),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            env=env,
            start_new_session=True,  # its own process group, so the whole tree can be killed
            preexec_fn=(
                _child_setup(cfg.memory_limit_mb, cfg.cpu_limit_s) if launched is None else None
            ),
            limit=LINE_LIMIT,
        )
    except OSError as e:
        raise ReplError(f"lean.repl_command: cannot run {list(argv)!r}: {e}") from None
    _groups[proc.pid] = os.getpid()  # start_new_session: pgid == pid
    return proc


async def read_version(cfg: LeanConfig) -> ReplVersion:
    """Run ``repl_command --version``; raise :class:`ReplVersionError` below :data:`MIN_VERSION`."""
    argv = [*cfg.repl_command, "--version"]
    proc = await _spawn(cfg, argv)
    try:
        async with asyncio.timeout(cfg.ready_timeout_s):
            out, err = await proc.communicate()
    except TimeoutError:
        _killpg(proc.pid)
        await proc.wait()
        raise ReplVersionError(f"{argv!r}: no answer within {cfg.ready_timeout_s} s") from None
    finally:
        _killpg(proc.pid)
        _groups.pop(proc.pid, None)
    text = out.decode("utf-8", "replace").strip()
    if proc.returncode != 0 or not text:
        raise ReplVersionError(
            f"{argv!r} exited with {proc.returncode}: "
            f"{(text or err.decode('utf-8', 'replace')).strip()[-500:]!r}"
        )
    version = ReplVersion.parse(text.splitlines()[0])
    if (version.major, version.minor, version.patch) < MIN_VERSION:
        raise ReplVersionError(
            f"{argv[0]} is Pantograph {version.text}; burnqed speaks Pantograph "
            f"{'.'.join(map(str, MIN_VERSION))} or later (messages as objects, hasSorry/hasUnsafe). "
            "Point lean.repl_command at a newer build."
        )
    return version


def _quote(raw: bytes, limit: int = 300) -> str:
    text = raw.decode("utf-8", "replace").rstrip("\n")
    return repr(text if len(text) <= limit else text[:limit] + "…")


# --------------------------------------------------------------------------------------------
# The client

PIPELINE_DEPTH = 4
"""Requests a client writes to the REPL's stdin ahead of their replies.

Pipelining is safe because the REPL reads stdin one line at a time and answers every line, in
order, before it reads the next: a request written early just waits in the pipe, and the replies
can be matched to the requests first-in first-out.  It pays because the REPL then starts on the
next request the moment it has answered one, instead of idling through the client's round trip
(asyncio wake-ups, JSON, the pool's bookkeeping) — with the propositional REPL that round trip is
longer than the tactic itself.  It is bounded because a line in the pipe cannot be taken back:
when the request at the head hangs or kills the REPL, every request behind it fails unrun and
must be retried on a fresh process, and 2–4 are enough to keep the REPL busy.
"""


@dataclass(eq=False)
class _Pending:
    """A request written to the REPL and not yet answered (the client's ``_pending`` queue)."""

    cmd: str
    timeout: float  # seconds the REPL may work on it, from `started`
    future: asyncio.Future[tuple[dict[str, Any], float]]  # (reply, REPL seconds)
    started: float | None = None  # time.perf_counter() when the REPL reached it; None while queued
    deadline: float = math.inf  # loop.time() at which its read timeout fires, once started


class ReplClient:
    """One REPL process; an async context manager.  Pipelined: up to ``depth`` requests in flight.

    ``request`` raises :class:`ReplTimeoutError` (read timeout: process killed; or the REPL's own
    ``interrupt``: the request failed, the process and its states are fine), :class:`ReplProtocolError` for an ``{"error": …}``
    reply (process still usable), and :class:`ReplError` for EOF or a reply that is not JSON (process
    killed).  When a request breaks the process, the requests written behind it fail with a
    :class:`ReplError` saying that they never ran.  After a kill the client is dead (``alive`` is
    False); start a new one.

    Concurrency: any number of tasks may call ``request`` at once.  Each request's line is written
    at once if fewer than ``depth`` are in flight (else it waits for a slot), and one reader task
    hands each reply line to the oldest request in flight.  The read timeout of a request runs from
    the moment the REPL starts on it — when the reply before it arrived, or when it was written to
    an idle REPL — so time spent queued behind a slow request does not count against it.
    """

    def __init__(
        self,
        cfg: LeanConfig,
        *,
        name: str = "repl",
        stderr_log: Path | None = None,
        read_timeout_s: float | None = None,
        depth: int = PIPELINE_DEPTH,
    ) -> None:
        if depth < 1:
            raise ValueError(f"pipeline depth must be >= 1 (got {depth})")
        self.cfg = cfg
        self.name = name
        self.stderr_log = stderr_log
        self.read_timeout_s = (
            read_timeout_for(cfg.tactic_timeout_s, cfg.hang_grace_s)
            if read_timeout_s is None
            else read_timeout_s
        )
        self.depth = depth
        self.requests = 0  # requests written to the REPL (whatever became of them)
        self.lean_time_s = 0.0  # seconds the REPL worked on requests (start of work to reply)
        self.started_at: float | None = None  # time.monotonic() at `ready.`
        self._proc: asyncio.subprocess.Process | None = None
        self._dead = False  # killed, or its stdout ended: no more requests
        self._closing = False  # draining for a recycle: no new requests, in-flight ones finish
        self._leases = 0  # holders of :meth:`lease`: their requests still go out while draining
        self._unleased = asyncio.Event()  # set while nobody holds a lease
        self._unleased.set()
        self._closed: asyncio.Future[None] | None = None  # close() under way or done
        self._reaped = False  # close() has seen the process exit
        self._pending: deque[_Pending] = deque()  # in flight, oldest (the one running) first
        self._slots = asyncio.Semaphore(depth)  # one per request in flight
        self._idle = asyncio.Event()  # set while nothing is in flight
        self._idle.set()
        self._reader_task: asyncio.Task | None = None
        self._stderr_task: asyncio.Task | None = None
        self._watchdog: asyncio.TimerHandle | None = None  # the read timeout of the head request
        self._outbox = bytearray()  # request lines of this event-loop turn, not yet written
        self._flush_scheduled = False
        self._stderr_tail = bytearray()

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> ReplClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and not self._dead and self._proc.returncode is None

    @property
    def in_flight(self) -> int:
        """Requests written to the REPL and not yet answered."""
        return len(self._pending)

    @property
    def age_s(self) -> float:
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at

    async def start(self) -> None:
        """Start the process, wait for ``ready.``, set the REPL's ``timeout`` option."""
        if self._proc is not None:
            raise RuntimeError(f"{self.name}: already started (a client runs one process)")
        argv = repl_argv(self.cfg)
        self._proc = await _spawn(self.cfg, argv)
        log.debug("%s: started pid %d: %s", self.name, self._proc.pid, argv)
        self._stderr_task = asyncio.create_task(self._drain_stderr(self._proc))
        try:
            async with asyncio.timeout(self.cfg.ready_timeout_s):
                await self._wait_ready(argv)
        except TimeoutError:
            await self.close()
            raise ReplError(
                f"{self.name}: no `ready.` from {argv!r} within {self.cfg.ready_timeout_s} s "
                f"(lean.ready_timeout_s); stderr: {self.stderr_tail()!r}"
            ) from None
        except BaseException:
            await self.close()
            raise
        self.started_at = time.monotonic()
        self._reader_task = asyncio.create_task(self._read_replies(self._proc))
        if self.cfg.tactic_timeout_s > 0:
            await self.request("options.set", {"timeout": int(self.cfg.tactic_timeout_s * 1000)})

    async def _wait_ready(self, argv: Sequence[str]) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        while True:
            raw = await self._proc.stdout.readline()
            if not raw:
                rc = await self._exit_code()
                self._dead = True
                raise ReplError(
                    f"{self.name}: {argv!r} exited (code {rc}) before printing `ready.` "
                    f"(wrong LEAN_PATH/imports, or Lean and Mathlib built with different "
                    f"toolchains?); stderr: {self.stderr_tail()!r}"
                )
            if raw.strip() == b"ready.":
                return
            log.warning("%s: ignoring output before `ready.`: %s", self.name, _quote(raw))

    async def close(self) -> None:
        """Kill the process group and reap the process (idempotent; every caller waits for it).

        Requests still in flight fail with :class:`ReplError` (closed before their reply).
        """
        if self._proc is None:
            return
        if self._closed is None:
            self._closed = asyncio.ensure_future(self._close(self._proc))
        await asyncio.shield(self._closed)

    async def _close(self, proc: asyncio.subprocess.Process) -> None:
        self.kill("the client was closed")
        try:
            async with asyncio.timeout(5):
                await proc.wait()
            self._reaped = True
        except TimeoutError:
            log.warning("%s: pid %d did not exit after SIGKILL", self.name, proc.pid)
        for task in (self._reader_task, self._stderr_task):
            if task is None:
                continue
            try:
                async with asyncio.timeout(1):
                    await task
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()
        _groups.pop(proc.pid, None)

    @contextlib.contextmanager
    def lease(self) -> Iterator[ReplClient]:
        """Hold the REPL for a sequence of requests that only means something whole (restore a
        state, then run a tactic on it): a :meth:`drain_and_close` that begins meanwhile lets the
        holder send the rest of its sequence and waits for it to let go.  Without this, a recycle
        between two requests of a sequence voids the first ones, and under load every retry can
        land on a REPL that is recycled again before the sequence ends.  A lease is refused with
        :class:`ReplError` once draining or dead.
        """
        if self._closing or not self.alive:
            why = "is being recycled" if self._closing and self.alive else "is not running"
            raise ReplError(f"{self.name}: the REPL {why} (cannot lease it)")
        self._leases += 1
        self._unleased.clear()
        try:
            yield self
        finally:
            self._leases -= 1
            if self._leases == 0:
                self._unleased.set()

    async def drain_and_close(self) -> None:
        """Stop taking requests, let the ones in flight and the holders of a :meth:`lease` finish,
        then :meth:`close`.

        For recycling a healthy REPL.  It ends: a lease holder's requests are bounded like any
        other (each gets its reply or hits its read timeout, which kills the process), and every
        request in flight either gets its reply or hits its read timeout.  Requests made meanwhile
        fail with :class:`ReplError` without being sent, once no lease is held.
        """
        self._closing = True
        if self.alive:
            await self._unleased.wait()
            await self._idle.wait()
        await self.close()

    def kill(self, why: str = "killed") -> None:
        """SIGKILL the process group now and fail every request in flight (saying ``why``)."""
        if self._proc is None:
            return
        pid = self._proc.pid
        self._break(
            lambda cmd: ReplError(f"{self.name}: {why} before the reply to {cmd}; killed pid {pid}")
        )

    def _break(self, head_error: Callable[[str], ReplError]) -> None:
        """Kill the process group; fail the oldest request in flight with ``head_error(cmd)`` and
        the ones written behind it as never run.

        The REPL answers in order, so when the oldest request breaks it (hang, crash, garbage) the
        later ones were still waiting in its stdin — or, after garbage, ran in a process that is
        now gone: either way nothing of theirs survives, and the caller may safely send them again
        to a new process (the pool replays and retries them).
        """
        self._dead = True
        self._disarm()
        self._outbox.clear()
        if self._proc is not None and not self._reaped:  # a reaped pgid may belong to another
            _killpg(self._proc.pid)
        pending, self._pending = list(self._pending), deque()
        now = time.perf_counter()
        first: ReplError | None = None
        for p in pending:
            if p.started is not None:  # the one the REPL was working on
                self.lean_time_s += now - p.started
            if first is None:
                err = first = head_error(p.cmd)
            else:
                err = ReplError(
                    f"{self.name}: {p.cmd} never ran: it was queued behind {pending[0].cmd} "
                    f"({first})"
                )
            if not p.future.done():
                p.future.set_exception(err)
        # Slots last, so the head's caller hears first (the pool blames the first to hear), then
        # those queued, then callers waiting for a slot, who find the client dead.
        for _ in pending:
            self._slots.release()
        self._idle.set()

    async def _exit_code(self) -> int | None:
        assert self._proc is not None
        try:
            async with asyncio.timeout(2):
                rc = await self._proc.wait()
            if self._stderr_task is not None:  # let the last stderr lines arrive for the message
                async with asyncio.timeout(1):
                    await asyncio.shield(self._stderr_task)
            return rc
        except TimeoutError:
            return None

    async def _drain_stderr(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        sink = None
        if self.stderr_log is not None:
            self.stderr_log.parent.mkdir(parents=True, exist_ok=True)
            sink = self.stderr_log.open("ab")
            sink.write(f"=== {self.name}: pid {proc.pid} started ===\n".encode())
            sink.flush()
        try:
            while True:
                chunk = await proc.stderr.read(65536)
                if not chunk:
                    return
                self._stderr_tail += chunk
                del self._stderr_tail[:-STDERR_TAIL]
                if sink is not None:
                    sink.write(chunk)
                    sink.flush()
                else:
                    log.debug("%s stderr: %s", self.name, chunk.decode("utf-8", "replace").rstrip())
        finally:
            if sink is not None:
                sink.close()

    def stderr_tail(self) -> str:
        """The last few KiB the REPL wrote to stderr (for error messages)."""
        return self._stderr_tail.decode("utf-8", "replace").strip()[-1000:]

    # -- the pipeline ----------------------------------------------------------------------------

    def _begin(self, p: _Pending, now: float) -> None:
        """The REPL has reached ``p``: start its clock and its read timeout."""
        p.started = now
        loop = asyncio.get_running_loop()
        p.deadline = loop.time() + p.timeout
        # One watchdog per client, not a timer per request: it is moved only when this deadline
        # comes before the one it is set for, and when it fires it looks at the request the REPL
        # is on now (replies in between cost nothing).
        if self._watchdog is None or p.deadline < self._watchdog.when():
            self._disarm()
            self._watchdog = loop.call_at(p.deadline, self._on_watchdog)

    def _disarm(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def _on_watchdog(self) -> None:
        self._watchdog = None
        if self._dead or not self._pending:
            return  # answered or failed meanwhile
        p = self._pending[0]
        loop = asyncio.get_running_loop()
        if p.deadline > loop.time():  # the request it was set for was answered: watch this one
            self._watchdog = loop.call_at(p.deadline, self._on_watchdog)
            return
        pid = self.pid
        self._break(
            lambda cmd: ReplTimeoutError(
                f"{self.name}: no reply to {cmd} within {p.timeout:.1f} s; killed pid {pid}",
                killed=True,
            )
        )

    def _flush(self) -> None:
        """Write the request lines queued in this turn of the event loop, in one system call."""
        self._flush_scheduled = False
        if not self._outbox:
            return
        data = bytes(self._outbox)
        self._outbox.clear()
        proc = self._proc
        if proc is None or proc.stdin is None or self._dead:
            return  # their requests have failed (the process is gone)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(data)  # a process gone meanwhile: the reader reports its exit

    async def _read_replies(self, proc: asyncio.subprocess.Process) -> None:
        """The one reader of the REPL's stdout: each line answers the oldest request in flight.

        It runs for the life of the process.  Whatever breaks the stream — EOF, a line that is not
        a JSON object, a line past :data:`LINE_LIMIT`, a line nobody asked for — kills the process
        and fails the requests in flight (:meth:`_break`); after a kill it stops reading.
        """
        assert proc.stdout is not None
        pid = proc.pid
        try:
            while not self._dead:
                try:
                    raw = await proc.stdout.readline()
                except ValueError:  # asyncio's line limit
                    self._break(
                        lambda cmd: ReplError(
                            f"{self.name}: reply to {cmd} is longer than {LINE_LIMIT} bytes; "
                            f"killed pid {pid}"
                        )
                    )
                    return
                now = time.perf_counter()
                if self._dead:  # killed (timeout, close) while this line was on its way
                    return
                if not raw:
                    await self._on_eof(pid)
                    return
                if not self._pending:  # nothing asked: the stream is out of step
                    log.warning("%s: unsolicited output %s; killing it", self.name, _quote(raw))
                    self.kill("unsolicited output")
                    return
                try:
                    reply = json.loads(raw)
                except ValueError:
                    reply = None
                if not isinstance(reply, dict):
                    self._garbage(raw, pid)
                    return
                p = self._pending.popleft()
                assert p.started is not None
                self._slots.release()
                lean_s = now - p.started
                self.lean_time_s += lean_s
                if self._pending:  # the REPL goes straight on to the next line in its stdin
                    self._begin(self._pending[0], now)
                else:
                    self._idle.set()
                if not p.future.done():  # done: its caller was cancelled; the reply is dropped
                    p.future.set_result((reply, lean_s))
        finally:
            if self._pending:  # cancelled (close) or a bug: no request may wait forever
                self._break(lambda cmd: ReplError(f"{self.name}: stopped reading before {cmd}"))

    def _garbage(self, raw: bytes, pid: int) -> None:
        """A reply that is not a JSON object: the stream is out of step with our requests, and
        nothing after it is usable."""
        quoted = _quote(raw)
        self._break(
            lambda cmd: ReplError(
                f"{self.name}: reply to {cmd} is not a JSON object: {quoted}; killed pid {pid}"
            )
        )

    async def _on_eof(self, pid: int) -> None:
        """stdout ended: the process exited (crash, memory or CPU limit, kill -9 from outside)."""
        self._dead = True  # no new requests while we wait for the exit code
        self._disarm()  # and no read timeout: the failure is the exit
        rc = await self._exit_code()
        if not self._pending:
            log.warning("%s: pid %d exited (code %s) while idle", self.name, pid, rc)
        self._break(
            lambda cmd: ReplError(
                f"{self.name}: pid {pid} exited (code {rc}) during {cmd}; "
                f"stderr: {self.stderr_tail()!r}"
            )
        )

    async def _send(
        self, cmd: str, payload: Mapping[str, Any] | None, timeout: float | None
    ) -> _Pending:
        """Write one request line (waiting for a pipeline slot); its reply comes to the returned
        record's future.  Lines are written in call order, so the REPL runs them in that order."""
        if not cmd or len(cmd.split()) != 1 or cmd.strip() != cmd:
            raise ValueError(f"not a REPL command name: {cmd!r}")
        # Compact JSON on one line after a non-blank command name: json.dumps escapes newlines,
        # and a blank line would end the REPL.
        line = f"{cmd} {json.dumps(payload or {}, ensure_ascii=False)}\n".encode()
        timeout = self.read_timeout_s if timeout is None else timeout
        await self._slots.acquire()
        proc = self._proc
        if proc is None or not self.alive or (self._closing and not self._leases):
            self._slots.release()  # wakes the next waiter, which finds the same
            why = "is being recycled" if self._closing and self.alive else "is not running"
            raise ReplError(f"{self.name}: the REPL {why} (cannot send {cmd})")
        assert proc.stdin is not None
        loop = asyncio.get_running_loop()
        p = _Pending(cmd, timeout, loop.create_future())
        # Queue it and its line with no await in between, so the order of `_pending` is the order
        # of the lines in the REPL's stdin.  The lines of one turn of the event loop go out in one
        # write (the REPL wakes once for them, as a raw loop that flushes once would).
        self._pending.append(p)
        self._idle.clear()
        if len(self._pending) == 1:  # the REPL is idle: it starts on this line right away
            self._begin(p, time.perf_counter())
        self.requests += 1
        self._outbox += line
        if not self._flush_scheduled:
            self._flush_scheduled = True
            loop.call_soon(self._flush)
        return p

    async def _receive(self, p: _Pending) -> tuple[dict[str, Any], float]:
        """The reply to a request :meth:`_send` wrote, and the seconds the REPL spent on it."""
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        try:
            if proc.stdin.transport.get_write_buffer_size() > DRAIN_ABOVE:
                await proc.stdin.drain()  # the REPL is not reading: wait for the pipe
            reply, lean_s = await p.future
        except (BrokenPipeError, ConnectionResetError):
            # The process is gone; the reader reports its exit to every request in flight.
            reply, lean_s = await p.future
        except asyncio.CancelledError:
            # The line is in the pipe, so the REPL will still answer it: the reader drops the reply.
            p.future.cancel()
            raise
        if "error" in reply and "desc" in reply:
            if is_interrupt(str(reply["error"]), str(reply["desc"])):
                raise ReplTimeoutError(
                    f"{self.name}: {p.cmd} interrupted by the REPL's timeout "
                    f"({self.cfg.tactic_timeout_s} s, lean.tactic_timeout_s)",
                    killed=False,
                )
            raise ReplProtocolError(p.cmd, str(reply["error"]), str(reply["desc"]))
        return reply, lean_s

    async def _exchange(
        self, cmd: str, payload: Mapping[str, Any] | None, timeout: float | None
    ) -> tuple[dict[str, Any], float]:
        """Send one request; return its reply and the seconds the REPL spent on it."""
        return await self._receive(await self._send(cmd, payload, timeout))

    async def submit(
        self, cmd: str, payload: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> asyncio.Future[tuple[dict[str, Any], float]]:
        """Write ``cmd payload`` now and return a future of its reply and the seconds the REPL
        spent on it, without waiting for it.

        For requests whose reply nobody needs before going on (``goal.save``): by the time this
        returns the line is queued, in order, before any request made after it.  The future fails
        with the errors of :meth:`request`; cancelling it drops the reply.
        """
        p = await self._send(cmd, payload, timeout)

        return asyncio.ensure_future(self._receive(p))

    # -- requests ----------------------------------------------------------------------------

    async def request(
        self, cmd: str, payload: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Send ``cmd payload`` as one line and return the reply object (see the class docstring)."""
        reply, _ = await self._exchange(cmd, payload, timeout)
        return reply

    async def goal_start(self, expr: str) -> GoalState:
        """Start a proof of the type ``expr`` (e.g. ``∀ (p : Prop), p → p``)."""
        reply = await self.request("goal.start", {"expr": expr})
        return await self.goal_print(int(reply["stateId"]))

    async def goal_print(self, state_id: int) -> GoalState:
        reply = await self.request("goal.print", {"stateId": state_id, "goals": True})
        return GoalState(state_id, tuple(Goal.from_json(g) for g in reply.get("goals", ())))

    async def goal_tactic(self, state_id: int, tactic: str) -> GoalState | TacticRejected:
        """Run ``tactic`` on ``state_id`` (automatic mode, no goalId: it acts on the first goal).

        It is sent under the per-tactic heartbeat limit (:func:`with_heartbeats`,
        ``lean.tactic_heartbeats``); hitting it is a rejection of kind ``heartbeats``.  A result
        with ``hasSorry``/``hasUnsafe`` is rejected (kind ``sorry``) and its state deleted.
        """
        text = with_heartbeats(tactic, self.cfg.tactic_heartbeats)
        reply, lean_s = await self._exchange(
            "goal.tactic", {"stateId": state_id, "tactic": text}, None
        )
        if "parseError" in reply:
            return TacticRejected("parse", str(reply["parseError"]), lean_time_s=lean_s)
        messages = tuple(Message.from_json(m) for m in reply.get("messages") or ())
        messages += tuple(Message.from_json(m) for m in reply.get("tacticErrors") or ())
        if "nextStateId" in reply:
            next_id = int(reply["nextStateId"])
            if reply.get("hasSorry") or reply.get("hasUnsafe"):
                await self.goal_delete([next_id])
                what = "sorry" if reply.get("hasSorry") else "unsafe code"
                return TacticRejected(
                    "sorry", f"the tactic's result uses {what}", messages, lean_time_s=lean_s
                )
            goals = tuple(Goal.from_json(g) for g in reply.get("goals") or ())
            return GoalState(next_id, goals, messages, lean_time_s=lean_s)
        if not messages:
            raise ReplError(f"{self.name}: goal.tactic reply of unknown shape: {reply!r:.300}")
        errors = [m.text for m in messages if m.severity == "error"] or [m.text for m in messages]
        kind: Literal["error", "heartbeats"] = (
            "heartbeats" if any(_HEARTBEATS.search(e) for e in errors) else "error"
        )
        return TacticRejected(kind, "\n".join(errors), messages, lean_time_s=lean_s)

    async def goal_delete(self, state_ids: Iterable[int]) -> None:
        ids = list(state_ids)
        if ids:
            await self.request("goal.delete", {"stateIds": ids})

    async def goal_save(self, state_id: int, path: str | Path) -> None:
        """Write state ``state_id`` to ``path`` (``goal.save``; §4: ``{"id", "path"}`` → ``{}``)."""
        await self.request("goal.save", {"id": state_id, "path": str(path)})

    async def goal_load(self, path: str | Path) -> int:
        """A new state id holding the state ``goal.save`` wrote to ``path`` (``{"path"}`` → ``{"id"}``).

        Pantograph pickles a state with the constants its file added beyond the imports and replays
        them on load, so the loading REPL needs the same imports (``reference/pantograph.md`` §4).
        """
        return int((await self.request("goal.load", {"path": str(path)}))["id"])

    async def stat(self) -> int:
        """The number of states the REPL holds."""
        return int((await self.request("stat", {}))["nGoals"])

    async def frontend_process(
        self, file: str, *, sorrys: bool, inherit_env: bool = False, timeout: float | None = None
    ) -> tuple[CompilationUnit, ...]:
        """Elaborate a Lean file's commands (imports come from the command line, not the file);
        ``timeout``: this request's read timeout (default: the client's)."""
        # Every non-Option field is sent explicitly: Lean's FromJson ignores struct defaults.
        payload = {
            "file": file,
            "readHeader": False,
            "inheritEnv": inherit_env,
            "sorrys": sorrys,
            "typeErrorsAsGoals": False,
            "newConstants": False,
        }
        reply = await self.request("frontend.process", payload, timeout=timeout)
        return tuple(CompilationUnit.from_json(u) for u in reply.get("units", ()))

    async def frontend_distil(self, file: str) -> tuple[GoalState, ...]:
        """The ``sorry`` goals of a file as states (Pantograph after v0.3.4)."""
        reply = await self.request("frontend.distil", {"file": file, "ignoreValues": False})
        return tuple(
            GoalState(int(t["stateId"]), tuple(Goal.from_json(g) for g in t.get("goals", ())))
            for t in reply.get("targets", ())
        )


__all__ = [
    "MIN_VERSION",
    "PIPELINE_DEPTH",
    "CompilationUnit",
    "GoalState",
    "Message",
    "ReplClient",
    "ReplVersion",
    "TacticRejected",
    "kill_all_groups",
    "live_process_groups",
    "read_timeout_for",
    "read_version",
    "repl_argv",
    "repl_environment",
    "with_heartbeats",
]
