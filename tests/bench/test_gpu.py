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


def test_compare_names_its_before_package_or_refuses_in_one_line(tmp_path):
    env = dict(_env(), OUT=str(tmp_path / "out"), PYTHON=sys.executable)
    script = str(REPO / "bench" / "gpu-device.sh")
    for args, says in (([], "name the directory"), ([str(tmp_path)], "no burnqed/ package")):
        r = subprocess.run(["bash", script, "compare", *args], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=60)  # fmt: skip
        assert r.returncode == 2 and says in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()  # refused before anything ran


@pytest.mark.bench
def test_device_script_compare_smoke_measures_before_and_after(tmp_path):
    """``compare DIR --smoke``: the check, then the training sections with the burnqed in DIR
    (here the branch point's layout stand-in: this tree's own package, so both sides run) and with
    this tree's, the ratios last."""
    import shutil

    before = tmp_path / "before"
    shutil.copytree(REPO / "burnqed", before / "burnqed",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    out = tmp_path / "out"
    env = dict(_env(), OUT=str(out), PYTHON=sys.executable)
    r = subprocess.run(["bash", str(REPO / "bench" / "gpu-device.sh"), "compare", str(before),
                        "--smoke"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=400)  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    for name in ("check.txt", "before.txt", "after.txt", "profile.txt", "env.txt"):
        assert (out / name).is_file(), name
    after = dict(line.split("=", 1) for line in (out / "after.txt").read_text().splitlines()
                 if "=" in line)  # fmt: skip
    assert after["sections"] == "checkpoint,joint,sft" and after["sections_failed"] == "0"
    assert after["layout"] == "packed" and after["checkpoint_reused"] == "1"
    assert "joint_profiled_micro_step_s" in after
    assert "checks_passed=1" in (out / "check.txt").read_text()
    assert "Self CPU" in (out / "profile.txt").read_text()  # the kernel table
    speedups = dict(line.split("=", 1) for line in r.stdout.splitlines()
                    if line.endswith(tuple("0123456789")) and "_speedup=" in line)  # fmt: skip
    assert set(speedups) == {"joint_speedup", "sft_speedup"}
    assert all(float(v) > 0 for v in speedups.values())


@pytest.mark.bench
def test_device_script_lengths_smoke_checks_then_measures_real_lengths(tmp_path):
    """``lengths --smoke`` (issue 62's one command, on the CPU): the checks pass first, then the
    full-length step, the real-length step packed into rows of its own tokens (profiled) and the
    same micro-batches padded in float32, and the acceptance figures last."""
    out = tmp_path / "out"
    env = dict(_env(), OUT=str(out), PYTHON=sys.executable)
    r = subprocess.run(["bash", str(REPO / "bench" / "gpu-device.sh"), "lengths", "--smoke"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=400)  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "checks_passed=1" in (out / "check.txt").read_text()
    got = dict(line.split("=", 1) for line in (out / "gpu.txt").read_text().splitlines()
               if "=" in line)  # fmt: skip
    assert got["sections"] == "checkpoint,joint,joint_real,padded" and got["sections_failed"] == "0"
    packed, padded = (got[f"{k}_positions_per_step"] for k in ("joint_real", "joint_real_padded"))
    tokens = int(got["joint_real_tokens_per_step"])
    assert tokens == int(got["joint_real_padded_tokens_per_step"])  # the same micro-batches
    assert tokens <= int(packed) < int(got["joint_positions_per_step"])  # rows sized to tokens
    assert int(packed) != int(padded)
    assert float(got["joint_real_speedup"]) > 0
    assert (
        "Self CPU" in (out / "profile.txt").read_text()
        and "joint_real" in (out / "profile.txt").read_text().splitlines()[0]
    )
    for key in ("real_lengths_speedup", "full_length_tokens_per_s_vs_published",
                "full_length_peak_reserved_gib"):  # fmt: skip
        assert re.search(rf"^{key}=[\d.]+ \(target", r.stdout, re.M), r.stdout[-1500:]
