"""bench/gpu.py and its prepared device run (bench/gpu-device.sh), on a machine without CUDA.

The full-size figures need a GPU (docs/cloud.md §8–§9 hold them, with the device and command);
here: the full size refuses in one line without CUDA, and the device script's ``--smoke`` path —
size check, wheel handling, every section at a tiny size on the CPU, output under ``$OUT`` — runs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.test_smoke import documented
from tests.conftest import REPO

GPU = REPO / "bench" / "gpu.py"


def _env() -> dict[str, str]:
    bin_dir = Path(sys.executable).parent
    return dict(os.environ, PYTHONPATH=str(REPO), PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def test_full_size_without_cuda_exits_non_zero_with_one_line():
    r = subprocess.run([sys.executable, str(GPU)], cwd=REPO, env=_env(), capture_output=True,
                       text=True, timeout=120)  # fmt: skip
    assert r.returncode != 0
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no CUDA device" in lines[0], r.stderr


@pytest.mark.bench
def test_device_script_smoke_writes_every_figure_under_out(tmp_path):
    out = tmp_path / "out"
    env = dict(_env(), OUT=str(out), PYTHON=sys.executable)
    r = subprocess.run(["bash", str(REPO / "bench" / "gpu-device.sh"), "run", "--smoke"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    size = re.search(r"^travelling tree: ([\d.]+) MiB \(limit 64\)$", r.stdout, re.M)
    assert size and 0 < float(size.group(1)) < 64, r.stdout[:500]
    printed = dict(
        line.split("=", 1) for line in (out / "gpu.txt").read_text().splitlines() if "=" in line
    )
    for name in documented(GPU):
        assert name in printed, f"{name} missing from $OUT/gpu.txt"
        assert float(printed[name].split()[0]) >= 0
    assert printed["sections_failed"] == "0" and printed["device"] == "cpu"
    assert int(printed["bench_wall_s"]) >= 0
    assert (out / "env.txt").is_file() and (out / "gpu.log").is_file()
