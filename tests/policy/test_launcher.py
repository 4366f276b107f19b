"""Launcher: start a server command, wait for health, stream its log, leave no process behind."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from burnqed.policy.launcher import ServerLaunchError, fill_command, launch_server

# A stdlib-only fake server: fast to start, and able to misbehave on request.
FAKE_SERVER = r"""
import os, signal, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

port, mode, model = int(sys.argv[1]), sys.argv[2], sys.argv[3]
print(f"fake server for {model} on {port}, FAKE_VAR={os.environ.get('FAKE_VAR')}, "
      f"UNSET_ME={os.environ.get('UNSET_ME')}", flush=True)
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)"]
    subprocess.Popen(sleeper)                          # a child in the server's group
    subprocess.Popen(sleeper, start_new_session=True)  # a child that left the group
polls = 0

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        global polls
        polls += 1
        healthy = mode != "never" and polls > 2  # 503 while "starting"
        self.send_response(200 if healthy else 503)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        print("GET", self.path, flush=True)

HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


@pytest.fixture
def fake(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    return [sys.executable, str(script), "{port}"]


def descendants() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def assert_all_gone(procs: list[psutil.Process]) -> None:
    alive = [p for p in procs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not alive, f"left behind: {alive}"


def test_fill_command():
    cmd = ["srv", "--model-path", "{model}", "--port={port}", '{"json": 1}']
    assert fill_command(cmd, model="m/dir", port=8) == [
        "srv",
        "--model-path",
        "m/dir",
        "--port=8",
        '{"json": 1}',
    ]


def test_starts_waits_for_health_streams_log_and_stops(fake, tmp_path):
    log_file = tmp_path / "logs" / "stage.log"
    env = {"FAKE_VAR": "set", "UNSET_ME": None}
    with launch_server(
        [*fake, "plain", "{model}"], model="models/x", health_timeout_s=30, log=log_file, env=env
    ) as url:
        assert httpx.get(url + "/health").status_code == 200
        procs = descendants()
        assert len(procs) == 1
    assert_all_gone(procs)
    text = log_file.read_text()
    assert "starting server:" in text and "fake_server.py" in text
    assert (
        f"fake server for models/x on {url.rsplit(':', 1)[1]}, FAKE_VAR=set, UNSET_ME=None" in text
    )
    assert text.count("GET /health") >= 3  # it waited through the 503s


def test_exception_inside_the_stage_stops_the_whole_tree(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("UNSET_ME", "x")
    started = time.monotonic()
    with (
        pytest.raises(RuntimeError, match="stage failed"),
        launch_server(
            [*fake, "stubborn", "m"],
            model="m",
            health_timeout_s=30,
            log=tmp_path / "s.log",
            stop_grace_s=1.0,
        ),
    ):
        deadline = time.monotonic() + 10
        while len(descendants()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the server, its child, and the child that left the group
        procs = descendants()
        assert len(procs) == 3
        raise RuntimeError("stage failed")
    assert_all_gone(procs)  # SIGTERM ignored: SIGKILL after the grace period
    assert time.monotonic() - started < 15


def test_exit_before_healthy_fails_fast_with_the_log_tail(tmp_path):
    cmd = [sys.executable, "-c", "print('error: unknown flag --bogus'); raise SystemExit(3)"]
    started = time.monotonic()
    with (
        pytest.raises(ServerLaunchError, match=r"(?s)exited with code 3.*unknown flag --bogus"),
        launch_server(cmd, model="m", health_timeout_s=60, log=tmp_path / "s.log"),
    ):
        pytest.fail("must not yield")
    assert time.monotonic() - started < 10


def test_never_healthy_times_out_and_stops(fake, tmp_path):
    before = {p.pid for p in descendants()}
    with (
        pytest.raises(ServerLaunchError, match=r"(?s)not healthy within 1 s.*fake server for m"),
        launch_server([*fake, "never", "m"], model="m", health_timeout_s=1, log=tmp_path / "s.log"),
    ):
        pytest.fail("must not yield")
    assert {p.pid for p in descendants()} <= before


def test_missing_executable(tmp_path):
    with (
        pytest.raises(ServerLaunchError, match="cannot start server command"),
        launch_server([str(tmp_path / "no-such-server")], model="m", log=tmp_path / "s.log"),
    ):
        pass


def test_log_to_a_logger(fake, caplog):
    with (
        caplog.at_level(logging.INFO),
        launch_server(
            [*fake, "plain", "m"], model="m", health_timeout_s=30, log=logging.getLogger("stage")
        ),
    ):
        pass
    assert any(
        r.name == "stage" and r.getMessage().startswith("[server] fake server for m")
        for r in caplog.records
    )
