"""Headless Chromium for the ``browser`` tests: Debian's ``chromium`` (``.ci/run`` installs it with
apt), run without a sandbox (CI runs as root) and without a network."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image


@pytest.fixture(scope="session")
def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium not found: apt-get install -y chromium (as .ci/run does)")
    return exe


def _run(exe: str, *args: str) -> subprocess.CompletedProcess:
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--proxy-server=127.0.0.1:9", "--virtual-time-budget=5000", *args]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def screenshot(exe: str, url: str, out: Path, size: tuple[int, int] = (1200, 900)) -> np.ndarray:
    """The page at ``url`` rendered to ``out``; its pixels as an (H, W, 3) float array in 0..1."""
    r = _run(exe, f"--screenshot={out}", f"--window-size={size[0]},{size[1]}", url)
    assert out.is_file(), r.stderr[-2000:]
    return np.asarray(Image.open(out).convert("RGB"), dtype=np.float32) / 255.0


def dump_dom(exe: str, url: str) -> str:
    """The DOM of ``url`` after its scripts ran."""
    r = _run(exe, "--dump-dom", url)
    assert r.returncode == 0 and r.stdout, r.stderr[-2000:]
    return r.stdout
