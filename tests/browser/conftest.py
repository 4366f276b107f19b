"""Headless Chromium for the ``browser`` tests: Debian's ``chromium`` (``.ci/run`` installs it with
apt), run without a sandbox (CI runs as root) and without a network."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

# Clicks the menu entries in turn once the report's app has rendered (the report has no URL routes).
WALK = """<script>
(function () {
  const steps = %s;
  function next(k) {
    if (k >= steps.length) return;
    for (const x of document.querySelectorAll("*"))
      if (x.children.length === 0 && x.textContent.trim() === steps[k]) { x.click(); break; }
    setTimeout(() => next(k + 1), 400);
  }
  window.addEventListener("load", () => setTimeout(() => next(0), 400));
})();
</script>"""


def find_chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.fail("chromium not found: apt-get install -y chromium (as .ci/run does)")
    return exe


@pytest.fixture(scope="session")
def chromium() -> str:
    return find_chromium()


def _run(exe: str, *args: str) -> subprocess.CompletedProcess:
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--proxy-server=127.0.0.1:9", "--virtual-time-budget=5000", *args]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def screenshot(exe: str, url: str, out: Path, size: tuple[int, int] = (1200, 900)) -> np.ndarray:
    """The page at ``url`` rendered to ``out``; its pixels as an (H, W, 3) float array in 0..1."""
    r = _run(exe, f"--screenshot={out}", f"--window-size={size[0]},{size[1]}", url)
    assert out.is_file(), r.stderr[-2000:]
    return np.asarray(Image.open(out).convert("RGB"), dtype=np.float32) / 255.0


def keep_screenshot(shot: Path, name: str) -> None:
    """Copy ``shot`` to ``$BURNQED_SCREENSHOTS/name`` when that is set (relative to the checkout):
    ``BURNQED_SCREENSHOTS=docs python -m pytest -m browser tests/browser`` writes docs/' screenshots."""
    where = os.environ.get("BURNQED_SCREENSHOTS")
    if where:
        dest = Path(__file__).resolve().parents[2] / where / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, dest)


def dump_dom(exe: str, url: str) -> str:
    """The DOM of ``url`` after its scripts ran."""
    r = _run(exe, "--dump-dom", url)
    assert r.returncode == 0 and r.stdout, r.stderr[-2000:]
    return r.stdout
