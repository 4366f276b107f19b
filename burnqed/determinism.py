"""Reproducible training: seeded RNGs, deterministic kernels, a recorded thread count, run records.

Every training stage — the tiny base model, the SFT adapter, the merge, the EBM — runs inside
:func:`deterministic_training`, which

- seeds Python's, NumPy's and torch's global generators with the run's ``seed`` (each stage also
  seeds its own: the base's batch order and init, trl's ``seed``/``data_seed`` for the LoRA init,
  dropout and data order, the EBM's per-step generator);
- turns ``torch.use_deterministic_algorithms`` on — strict by default, so an operation without a
  deterministic kernel raises and names itself; ``BURNQED_DETERMINISTIC=warn`` makes it a warning,
  ``off`` turns the check off (both recorded) — plus cuDNN's deterministic mode;
- on CUDA sets ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` unless it is set (cuBLAS picks reduction
  orders per stream otherwise; it must be set before the first cuBLAS call, which no stage makes
  before entering the block);
- leaves the thread count as the caller set it (a Snakemake job: its rule's ``threads``, fewer when
  ``--cores`` is smaller; ``burnqed train``/``burnqed ebm``: torch's default, ``OMP_NUM_THREADS``
  or the core count) and records it, with the CPU type, kernel level and instruction-set pin (or
  the GPU), in the returned dict that the stage writes into its summary.  The previous settings
  come back on exit.

:func:`machine` is the one record of what made a number — CPU, torch's kernel level, thread count,
the instruction-set pin (:mod:`burnqed.isa`: setting, variables applied, the caller's own values,
whether it held) and the accelerator — as the ``machine`` block of every eval JSON, search
manifest and ``run_info.json``.

What a rerun reproduces.  On CPU, with the same inputs, the same kernel level (any x86 CPU with
AVX2 under the default pin ``cpu_isa: avx2``; under ``native`` the same CPU type), the same torch
thread count and the library versions of ``constraints.txt``, every file of ``models/base/`` and
``models/iter_{i}/{adapter,merged,ebm}/`` is byte-identical except :data:`RUN_SPECIFIC_FILES`:
``run_info.json`` (when and how long: ``created_at``, ``started_at``, ``wall_s`` and the other
``*_wall_s``, ``argv``, ``host``, the ``machine`` block, and for the EBM ``groups_per_s`` and
``resumed_from_step``) and
``metrics.jsonl`` (the per-record wall times ``wall_s``/``elapsed_s`` and the trainer's
``*_runtime``/``*_per_second``).  Paths are recorded as given, so the pipeline's relative paths
keep the summaries identical in another checkout; :func:`reproducible_digests` digests exactly
the files a rerun must repeat.  A wall-clock cap (``model.tiny.max_seconds``)
that fires makes the model depend on the machine's speed: the base stage warns and records it.
On a GPU, ``docs/cloud.md`` says what is and is not guaranteed.

Example::

    >>> with deterministic_training(seed=0, device="cpu") as record:
    ...     (record["deterministic_algorithms"], record["device"], record["seed"])
    ('strict', 'cpu', 0)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from burnqed import isa

log = logging.getLogger(__name__)

RUN_INFO = "run_info.json"
# The files of a model directory that differ between two runs with the same inputs (see above).
RUN_SPECIFIC_FILES = (RUN_INFO, "metrics.jsonl")
MODE_VARIABLE = "BURNQED_DETERMINISTIC"
MODES = ("strict", "warn", "off")
# The larger of the two workspace settings cuBLAS documents as reproducible (the other, ":16:8",
# costs speed); an existing value is kept.
CUBLAS_WORKSPACE = ":4096:8"


def determinism_mode() -> str:
    """``strict`` (default), ``warn`` or ``off``, from ``$BURNQED_DETERMINISTIC``."""
    mode = os.environ.get(MODE_VARIABLE, "strict").strip().lower() or "strict"
    if mode not in MODES:
        raise ValueError(f"${MODE_VARIABLE}={mode!r}: expected one of {', '.join(MODES)}")
    return mode


@contextlib.contextmanager
def deterministic_training(*, seed: int | None, device: str = "cpu") -> Iterator[dict[str, Any]]:
    """Seed, choose deterministic kernels, and yield the record of what decides the numbers.

    ``seed``: the run's seed (``None`` for a stage without randomness, the merge: nothing is
    seeded); ``device``: ``"cpu"`` or ``"cuda"`` (where the stage computes).  The record
    (JSON-ready) is the same on every rerun on the same machine type; the stage stores it in its
    summary.
    """
    import numpy as np
    import torch

    mode = determinism_mode()
    cuda = device.startswith("cuda")
    if cuda and mode != "off":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    before = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.deterministic,
        torch.backends.cudnn.benchmark,
    )
    if seed is not None:
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)  # every device's default generator
    if mode != "off":
        torch.use_deterministic_algorithms(True, warn_only=mode == "warn")
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    record = {
        "seed": seed,
        "deterministic_algorithms": mode,
        "torch_threads": torch.get_num_threads(),
        "device": "cuda" if cuda else "cpu",
        **(_gpu() if cuda else _cpu()),
    }
    # The pin as it decides the bytes; the caller's own values differ between callers that get the
    # same bytes, so they go to run_info.json (its `machine` block), not here.
    pin = machine()["isa_pin"]
    record["isa_pin"] = {k: pin[k] for k in ("setting", "applied", "held")}
    log.info(
        "determinism: seed %s, deterministic algorithms %s, %d torch thread(s), %s",
        seed, mode, record["torch_threads"],
        record.get("gpu") or f"{record['cpu']} ({record['cpu_capability']})",
    )  # fmt: skip
    try:
        yield record
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = before[2:]


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    name = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return name


def _cpu() -> dict[str, Any]:
    """The CPU type and the vector-instruction level torch's kernels dispatch to (AVX2, AVX512 …):
    both change the last bits of a result."""
    import torch

    return {"cpu": cpu_name(), "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def machine() -> dict[str, Any]:
    """The ``machine`` block every eval JSON, search manifest and model ``run_info.json`` carries:
    what made a number, beside the inputs.

    ``{"cpu": model name, "cpu_capability": torch's kernel level in use ("AVX2", "AVX512", …),
    "torch_threads": int, "isa_pin": {"setting", "applied", "caller", "held"}
    (:func:`burnqed.isa.pin_record`), "accelerator": None or {"name", "driver", "cuda"}}``.
    Imports torch (a stage that records it has, or is about to)."""
    import torch

    capability = torch.backends.cpu.get_cpu_capability()
    return {
        "cpu": cpu_name(),
        "cpu_capability": capability,
        "torch_threads": torch.get_num_threads(),
        "isa_pin": isa.pin_record(capability),
        "accelerator": _accelerator() if torch.cuda.is_available() else None,
    }


def _accelerator() -> dict[str, Any]:
    """The GPU: its name, the NVIDIA driver's version (``nvidia-smi``; None without it) and the
    CUDA version torch was built with."""
    import torch

    driver = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10,
        )  # fmt: skip
        driver = out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None
    return {"name": torch.cuda.get_device_name(), "driver": driver, "cuda": torch.version.cuda}


def _gpu() -> dict[str, Any]:
    import torch

    return {
        "gpu": torch.cuda.get_device_name(),
        "cuda": torch.version.cuda,
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def write_run_info(directory: Path, *, started: float, **fields: Any) -> dict[str, Any]:
    """Write ``<directory>/run_info.json``: the facts of this run that a rerun does not repeat.

    ``started``: ``time.time()`` when the stage began; ``fields``: further wall times (named
    ``*_wall_s``) and run facts; the :func:`machine` block is added.  Returns what was written.
    """
    now = time.time()
    info = {
        "created_at": _iso(now),
        "started_at": _iso(started),
        "wall_s": round(now - started, 2),
        **fields,
        "argv": list(sys.argv),
        "host": platform.node(),
        "machine": machine(),
    }
    Path(directory, RUN_INFO).write_text(
        json.dumps(info, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )
    return info


def reproducible_digests(directory: Path) -> dict[str, str]:
    """sha256 of every file under ``directory`` that a rerun reproduces (all but
    :data:`RUN_SPECIFIC_FILES`), by relative path: equal dicts = the same artifact."""
    root = Path(directory)
    return {
        str(f.relative_to(root)): hashlib.sha256(f.read_bytes()).hexdigest()
        for f in sorted(root.rglob("*"))
        if f.is_file() and f.name not in RUN_SPECIFIC_FILES
    }


__all__ = [
    "MODES",
    "RUN_INFO",
    "RUN_SPECIFIC_FILES",
    "determinism_mode",
    "deterministic_training",
    "machine",
    "reproducible_digests",
    "write_run_info",
]
