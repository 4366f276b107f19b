"""Snakemake's command line for the tests, each command a fork of a process that imported it.

The default suite starts Snakemake about fifty times, nearly all to plan (``-n``, ``--summary``,
``--dag``, ``--lint``), and more than half of a 2.9 s dry run of the demo was Python importing
Snakemake and finding its plugins.  :func:`run` sends each command to a server process (one per
test process, started on first use) that did both once; the server forks, and the child runs the
console script's entry point (``snakemake.cli.main``) with the command's argv, working directory,
environment and standard streams, and exits with its status: about 1.3 s instead of 2.9 s.

Snakemake's own test suite runs its API inside the test process; a fork keeps what a fresh process
has: nothing of an earlier command survives, the Snakefile imports the ``burnqed`` of the workflow
it is in (the tests' copies), and the command may run jobs, be killed at its timeout with
everything it started, or fail.  The server imports nothing of burnqed and nothing that reads the
instruction-set pin's variables (torch); its ``sys.path[0]`` is the console script's, and the one
value Snakemake takes from the process at import (the run directory its log header shows) is set
again in the child.

The commands that a test kills or interrupts mid-run (the slow loops) start real processes
(:mod:`tests.workflow.loops`); so does
``tests/workflow/test_workflow.py::test_a_forked_plan_is_a_fresh_processs_plan``, which checks
that the two give the same plan.

Example::

    r = run([SNAKEMAKE, "-n", "--quiet", "rules"], cwd=workdir, env=env, timeout=300)
    r.returncode, r.stdout, r.stderr  # as subprocess.run(..., capture_output=True, text=True)
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NoReturn

BIN = Path(sys.executable).parent
SNAKEMAKE = shutil.which("snakemake", path=str(BIN)) or "snakemake"

_lock = threading.Lock()
_server: subprocess.Popen | None = None


def _started() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen(
            [sys.executable, __file__, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )
    return _server


def run(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 600,
) -> subprocess.CompletedProcess:
    """``snakemake`` with ``argv[1:]`` (``argv[0]``: :data:`SNAKEMAKE`) to the end, as
    ``subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)``
    would: :class:`subprocess.TimeoutExpired` at the timeout (the command and what it started
    killed)."""
    argv = [str(a) for a in argv]
    if Path(argv[0]).name != "snakemake":
        raise ValueError(f"not a snakemake command: {argv[0]}")
    with _lock, tempfile.TemporaryDirectory(prefix="snakemake-cli-") as tmp:
        out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
        request = {
            "argv": argv,
            "cwd": str(Path(cwd).resolve()),
            "env": dict(os.environ if env is None else env),
            "stdout": str(out),
            "stderr": str(err),
            "timeout": timeout,
        }
        server = _started()
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        line = server.stdout.readline()
        if not line:
            raise RuntimeError(f"the Snakemake server (pid {server.pid}) exited: see stderr above")
        reply = json.loads(line)
        stdout = out.read_text(encoding="utf-8", errors="replace")
        stderr = err.read_text(encoding="utf-8", errors="replace")
    if reply["timed_out"]:
        raise subprocess.TimeoutExpired(argv, timeout, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(argv, reply["returncode"], stdout, stderr)


# --------------------------------------------------------------------------------------------
# The server (``python tests/snakemake_cli.py --serve``): requests on stdin, replies on stdout,
# one JSON line each.


def _child(request: dict, channel: int) -> NoReturn:
    """In the fork: become the command.  It ends as a fresh process does: its ``SystemExit`` (or an
    uncaught exception) leaves :func:`serve`, and the interpreter exits with its status, running
    the atexit handlers (logging's, Snakemake's) and flushing the streams."""
    os.close(channel)
    os.setsid()  # its own process group: a timeout kills the jobs it started too
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    streams = (os.open(os.devnull, os.O_RDONLY),
               os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
               os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC))  # fmt: skip
    for fd, stream in enumerate(streams):
        os.dup2(stream, fd)
    sys.argv = list(request["argv"])
    from snakemake.cli import main
    from snakemake.workflow import Workflow

    Workflow._rundir = os.getcwd()  # set when a fresh process imports Snakemake: its cwd
    main()
    raise SystemExit(0)


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    """The child's exit status (negative: the signal), and whether it ran past ``timeout`` and
    was killed with its process group."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status), True
        time.sleep(0.01)


def serve() -> None:
    channel = os.dup(1)  # replies only; anything printed goes to stderr
    os.dup2(2, 1)
    sys.path[0] = str(BIN)  # what the console script's interpreter has there
    import snakemake.cli  # noqa: F401  (the point of the server)

    # Snakemake's plugin registries find the installed plugins once per process: 0.4 s more.
    with contextlib.suppress(ImportError):  # (only a saving)
        from snakemake_interface_executor_plugins.registry import ExecutorPluginRegistry
        from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry
        from snakemake_interface_report_plugins.registry import ReportPluginRegistry
        from snakemake_interface_storage_plugins.registry import StoragePluginRegistry

        for registry in (ExecutorPluginRegistry, LoggerPluginRegistry, ReportPluginRegistry,
                         StoragePluginRegistry):  # fmt: skip
            registry()

    gc.freeze()  # the imported modules stay shared with each fork
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(request, channel)
        timeout = request["timeout"]
        returncode, timed_out = _wait(pid, float("inf") if timeout is None else float(timeout))
        reply = {"returncode": returncode, "timed_out": timed_out}
        os.write(channel, (json.dumps(reply) + "\n").encode())


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    serve()
