"""Start an inference server for the span of a stage, and never leave it behind.

SGLang lives in its own GPU environment (its pins clash with the training stack), so the command is
configured in full — interpreter included — e.g. ``[/opt/sglang/bin/python, -m,
sglang.launch_server, --model-path, "{model}", --port, "{port}"]``.  :func:`launch_server` fills in
``{model}`` and ``{port}`` (a free port when none is given), starts the command in a new session
(its own process group), streams its output line by line to the stage log, waits for ``/health``
to answer 200 — failing fast with the log tail if the process exits first — and on leaving the
``with`` block, normally or by an exception, sends SIGTERM to the whole group, then SIGKILL to
whatever is still alive after the grace period (children that left the group included).

Example (the stand-in server plays SGLang here; a real run names SGLang's interpreter)::

    from pathlib import Path
    from burnqed.policy.launcher import launch_server

    cmd = ["python", "-m", "burnqed.policy.standin", "--model", "{model}", "--port", "{port}"]
    with launch_server(cmd, model="models/base", health_timeout_s=60, log=Path("logs/search.log")) as url:
        ...  # SGLangGenerator(url, model_id="models/base"); stopped when the block ends

:class:`ServerProcess` is the same in three steps (start, wait, stop), so a stage that needs two
servers starts both before waiting for either.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import psutil

from burnqed.policy.http import ServerError, wait_for_health

logger = logging.getLogger(__name__)

TAIL_LINES = 40  # server log lines quoted in an error


class ServerLaunchError(ServerError):
    """The server command could not start, exited early, or never became healthy."""


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def fill_command(command: Sequence[str], *, model: str, port: int) -> list[str]:
    """``command`` with ``{model}`` and ``{port}`` replaced (other braces are left alone)."""
    return [str(a).replace("{model}", model).replace("{port}", str(port)) for a in command]


class _LogPump(threading.Thread):
    """Copies the server's merged stdout/stderr to the stage log, keeping a tail for errors."""

    def __init__(self, stream, sink: Path | logging.Logger, name: str) -> None:
        super().__init__(name=f"server-log-{name}", daemon=True)
        self.stream, self.sink = stream, sink
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)

    def run(self) -> None:
        out = self.sink.open("a", encoding="utf-8") if isinstance(self.sink, Path) else None
        try:
            for raw in iter(self.stream.readline, b""):
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                self.tail.append(line)
                if out is not None:
                    out.write(line + "\n")
                    out.flush()  # the stage log shows progress while the server starts
                else:
                    self.sink.info("[server] %s", line)
        finally:
            if out is not None:
                out.close()

    def text(self) -> str:
        return "\n".join(self.tail) or "(no output)"


class ServerProcess:
    """One launched server: :meth:`start` it, :meth:`wait_healthy`, :meth:`stop` it.

    Split in three so a stage that needs two servers (generation + embeddings) starts both before
    waiting for either; :func:`launch_server` is the one-server context manager.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        model: str,
        port: int | None = None,
        health_path: str = "/health",
        log: Path | logging.Logger,
        env: Mapping[str, str | None] | None = None,
        stop_grace_s: float = 15.0,
    ) -> None:
        self.port = free_port() if port is None else port
        self.argv = fill_command(command, model=model, port=self.port)
        self.url = f"http://127.0.0.1:{self.port}"
        self.health_path = health_path
        self.log, self.env, self.stop_grace_s = log, env, stop_grace_s
        self.proc: subprocess.Popen | None = None
        self._pump: _LogPump | None = None

    def start(self) -> None:
        proc_env = dict(os.environ)
        for k, v in (self.env or {}).items():
            if v is None:
                proc_env.pop(k, None)
            else:
                proc_env[k] = v
        if isinstance(self.log, Path):
            self.log.parent.mkdir(parents=True, exist_ok=True)
        _log_launch(self.log, self.argv)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=proc_env,
                start_new_session=True,  # its own process group: one killpg stops the whole tree
            )
        except OSError as e:
            raise ServerLaunchError(f"cannot start server command {self.argv}: {e}") from e
        self._started = time.monotonic()
        self._pump = _LogPump(self.proc.stdout, self.log, name=str(self.proc.pid))
        self._pump.start()

    def _output(self) -> str:
        return f"command: {self.argv}\n--- last server output ---\n{self._pump.text() if self._pump else ''}"

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            if self._pump is not None:
                self._pump.join(timeout=2)  # collect the last lines it printed
            raise ServerLaunchError(
                f"server exited with code {self.proc.returncode} before {self.url}{self.health_path} "
                f"was healthy\n{self._output()}"
            )

    def wait_healthy(self, timeout_s: float) -> None:
        """Block until ``/health`` answers 200; raise with the log tail if it dies or times out."""
        try:
            wait_for_health(
                self.url, timeout_s=timeout_s, path=self.health_path, alive=self._check_alive
            )
        except ServerLaunchError:
            raise
        except ServerError as e:
            raise ServerLaunchError(f"{e}\n{self._output()}") from e
        logger.info(
            "server pid %d healthy at %s after %.1f s",
            self.proc.pid,
            self.url,
            time.monotonic() - self._started,
        )

    def stop(self) -> None:
        if self.proc is None:
            return
        stop_process_tree(self.proc, grace_s=self.stop_grace_s)
        if self._pump is not None:
            self._pump.join(timeout=5)


@contextlib.contextmanager
def launch_server(
    command: Sequence[str],
    *,
    model: str,
    port: int | None = None,
    health_path: str = "/health",
    health_timeout_s: float = 900.0,
    log: Path | logging.Logger,
    env: Mapping[str, str | None] | None = None,
    stop_grace_s: float = 15.0,
) -> Iterator[str]:
    """Run ``command`` as a server; yield its base URL once healthy; stop its process group on exit.

    ``env`` entries override the inherited environment; a ``None`` value unsets a variable (some
    servers treat an empty value differently from an absent one).
    """
    server = ServerProcess(
        command,
        model=model,
        port=port,
        health_path=health_path,
        log=log,
        env=env,
        stop_grace_s=stop_grace_s,
    )
    server.start()
    try:
        server.wait_healthy(health_timeout_s)
        yield server.url
    finally:
        server.stop()


def stop_process_tree(proc: subprocess.Popen, *, grace_s: float = 15.0) -> None:
    """SIGTERM the process group, wait up to ``grace_s``, then SIGKILL every survivor."""
    try:
        # Remember the descendants now: once the leader exits they are re-parented, and a child
        # that called setsid() would escape a group kill.
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        children = []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    deadline = time.monotonic() + grace_s
    # The leader is reaped through Popen (psutil would reap it behind Popen's back).
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    alive = _wait_gone(children, deadline)
    if proc.poll() is None or alive:
        logger.warning("server pid %d ignored SIGTERM for %g s; killing", proc.pid, grace_s)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        for child in alive:
            with contextlib.suppress(psutil.Error):
                child.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        _wait_gone(alive, time.monotonic() + 5)
    logger.info("server pid %d stopped (exit code %s)", proc.pid, proc.returncode)


def _wait_gone(procs: list[psutil.Process], deadline: float) -> list[psutil.Process]:
    """Wait until every process has exited; return those still alive at ``deadline``.

    A zombie counts as gone: an orphan is reaped by whatever adopted it, which may be slow in a
    container whose PID 1 does not reap.
    """

    def running(p: psutil.Process) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    alive = [p for p in procs if running(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if running(p)]
    return alive


def _log_launch(sink: Path | logging.Logger, argv: list[str]) -> None:
    message = f"starting server: {' '.join(argv)}"
    logger.info(message)
    if isinstance(sink, Path):
        with sink.open("a", encoding="utf-8") as f:
            f.write(message + "\n")
