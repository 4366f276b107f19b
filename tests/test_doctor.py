"""``burnqed doctor``: passes on the CPU demo config in a clean checkout, and a missing REPL or a
version mismatch is one clear ``fail`` line and a non-zero exit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from burnqed.doctor import (
    Check,
    check_dvc,
    dvc_remote,
    mem_fraction,
    profile_gpus,
    repl_lean_version,
    run_checks,
    version_tuple,
    versions_agree,
)
from burnqed.lean.client import ReplVersion

REPO = Path(__file__).resolve().parents[1]


def _doctor(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # `python` in the demo's lean.repl_command is the interpreter running the tests.
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "burnqed.cli", "doctor", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(REPO), PATH=path),
    )


@pytest.fixture
def checkout(tmp_path) -> Path:
    """What a clean clone holds for the CLI: params.yaml and config/ (no data, models, remote)."""
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(REPO / "config", tmp_path / "config")
    return tmp_path


def _lines(r: subprocess.CompletedProcess) -> dict[str, str]:
    """check name -> status, from the one line each check prints."""
    out = {}
    for line in r.stdout.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("ok", "fail", "skip"):
            out[rest.strip().partition(": ")[0]] = status
    return out


def test_demo_config_passes_in_a_clean_checkout(checkout):
    r = _doctor(["--configfile", "config/demo.yaml"], checkout)
    assert r.returncode == 0, r.stdout + r.stderr
    status = _lines(r)
    assert status["config"] == status["repl"] == status["proof"] == status["versions"] == "ok"
    assert status["disk"] == "ok"
    # Not built yet / nothing asked for: skipped, each with its reason.
    assert status["benchmark proplogic_test"] == "skip"
    assert status["policy"] == "skip" and "not built yet" in r.stdout
    assert status["gpu"] == "skip" and status["dvc remote"] == "skip"
    assert "Pantograph 0.3.4" in r.stdout
    assert r.stdout.strip().splitlines()[-1].startswith("doctor: ")


def test_training_names_the_layout_attention_and_loss_kernel(checkout, monkeypatch):
    """On a machine without CUDA: the padded float32 step it trains with, and what a GPU run of
    this install would run under each sft.gpu_layout (here: no liger-kernel installed, so the
    chunked loss, and how to install the fused one); a bad layout is one config line naming it."""
    monkeypatch.chdir(checkout)
    demo = [checkout / "config" / "demo.yaml"]
    checks = _by_name(run_checks(checkout / "params.yaml", demo))
    assert "training" in checks, sorted(checks)
    c = checks["training"]
    assert c.status == "ok", c.reason
    assert c.reason.startswith("no CUDA here: training runs right-padded batches, SDPA"), c.reason
    assert "sft.gpu_layout packed_bf16 would run packed rows, flex attention" in c.reason
    assert "the chunked loss (liger-kernel not installed" in c.reason and "'.[gpu]'" in c.reason
    padded = checkout / "padded.yaml"
    padded.write_text(yaml.safe_dump({"sft": {"gpu_layout": "padded_fp32"}}))
    c = _by_name(run_checks(checkout / "params.yaml", [*demo, padded]))["training"]
    assert "sft.gpu_layout padded_fp32 would run right-padded batches" in c.reason, c.reason
    bad = checkout / "bad.yaml"
    bad.write_text(yaml.safe_dump({"sft": {"gpu_layout": "packed"}}))
    [config] = run_checks(checkout / "params.yaml", [*demo, bad])
    assert config.status == "fail" and "gpu_layout" in config.reason, config.reason
    assert "\n" not in config.reason


def test_missing_repl_binary_is_one_fail_line(checkout):
    overlay = checkout / "missing.yaml"
    overlay.write_text(yaml.safe_dump({"lean": {"repl_command": ["/nonexistent/pantograph-repl"]}}))
    r = _doctor(["--configfile", "config/demo.yaml", "--configfile", str(overlay)], checkout)
    assert r.returncode == 1
    fails = [line for line in r.stdout.splitlines() if line.startswith("fail")]
    assert len(fails) == 1, r.stdout
    assert fails[0].startswith("fail repl: ") and "/nonexistent/pantograph-repl" in fails[0]
    assert "No such file" in fails[0]
    # What needs the REPL is skipped, not failed a second time.
    assert _lines(r)["proof"] == "skip"


def _meta(cwd: Path, name: str, lean: str, mathlib: str | None = None) -> None:
    d = cwd / "data" / "benchmarks"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{name}.meta.json").write_text(
        json.dumps({"benchmark": name, "lean": lean, "mathlib": mathlib})
    )


def _by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_benchmark_recorded_for_lean_but_stand_in_repl_fails(checkout, monkeypatch):
    monkeypatch.chdir(checkout)
    _meta(checkout, "proplogic_test", "v4.9.0")
    lean = {"lean": {"repl_command": [sys.executable, "-m", "burnqed.proplogic"]}}
    (checkout / "o.yaml").write_text(yaml.safe_dump(lean))
    checks = _by_name(run_checks("params.yaml", ["config/demo.yaml", "o.yaml"]))
    c = checks["benchmark proplogic_test"]
    assert c.status == "fail" and "4.9.0" in c.reason and "stand-in" in c.reason
    assert checks["repl"].status == checks["proof"].status == "ok"


@pytest.fixture
def lean_repl(checkout) -> Path:
    """The stand-in REPL behind a `--version` a Pantograph build on Lean 4.22 prints."""
    script = checkout / "pantograph_repl.py"
    script.write_text(
        "import sys\n"
        "if '--version' in sys.argv:\n"
        "    print('0.3.7/v4.22.0')\n"
        "    sys.exit(0)\n"
        "from burnqed.proplogic.__main__ import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    (checkout / "o.yaml").write_text(
        yaml.safe_dump({"lean": {"repl_command": [sys.executable, str(script)]}})
    )
    return script


def test_benchmark_lean_version_mismatch_fails(checkout, lean_repl, monkeypatch):
    monkeypatch.chdir(checkout)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    _meta(checkout, "proplogic_test", "4.9 (what DeepSeek reports)")
    _meta(checkout, "proplogic_valid", "leanprover/lean4:v4.22.0")
    checks = _by_name(run_checks("params.yaml", ["config/demo.yaml", "o.yaml"]))
    assert checks["repl"].status == "ok" and "0.3.7/v4.22.0" in checks["repl"].reason
    bad = checks["benchmark proplogic_test"]
    assert bad.status == "fail"
    assert "Lean 4.9" in bad.reason and "Lean 4.22.0" in bad.reason
    good = checks["benchmark proplogic_valid"]
    assert good.status == "ok" and "4.22.0" in good.reason
    assert checks["proof"].status == "ok"  # the same REPL proves the tiny theorem


def test_version_parsing_and_agreement():
    assert version_tuple("leanprover/lean4:v4.21.0") == (4, 21, 0)
    assert version_tuple("4.9 (unverified: …)") == (4, 9)
    assert version_tuple("burnqed propositional REPL (no Lean)") is None
    assert versions_agree((4, 9), (4, 9, 0)) and not versions_agree((4, 9), (4, 21, 0))
    assert repl_lean_version(ReplVersion.parse("0.3.7/v4.22.0"))[0] == (4, 22, 0)
    assert repl_lean_version(ReplVersion.parse("0.3.4"))[0] == (4, 21, 0)  # release table
    assert repl_lean_version(ReplVersion.parse("0.3.99"))[0] is None


def test_profile_gpus_and_server_memory_fraction():
    assert profile_gpus(REPO / "workflow" / "profiles" / "gpu") == 1
    assert profile_gpus(REPO / "workflow" / "profiles" / "local") == 0
    assert profile_gpus(None) is None
    assert (
        mem_fraction(["python", "-m", "sglang.launch_server", "--mem-fraction-static", "0.7"])
        == 0.7
    )
    assert mem_fraction(["python", "-m", "burnqed.policy.standin"]) is None


def test_dvc_remote(tmp_path):
    assert dvc_remote(tmp_path) is None
    (tmp_path / ".dvc").mkdir()
    (tmp_path / ".dvc" / "config").write_text(
        "[core]\n    remote = store\n['remote \"store\"']\n    url = ../store\n"
    )
    assert dvc_remote(tmp_path) == ("store", "../store")
    c = check_dvc(None, tmp_path)  # type: ignore[arg-type]
    assert c.status == "fail" and "store" in c.reason
    (tmp_path / "store").mkdir()
    assert check_dvc(None, tmp_path).status == "ok"  # type: ignore[arg-type]


@pytest.fixture
def base_model(checkout, monkeypatch) -> Path:
    """`models/base` of the checkout: the policy tests' tiny model."""
    from burnqed.policy.tiny import build_tiny_model
    from tests.policy.corpus import corpus

    monkeypatch.chdir(checkout)
    return build_tiny_model(checkout / "models" / "base", corpus(), seed=0)


def _policy_check(checkout: Path, policy: dict, *, launch: bool = False) -> Check:
    from burnqed.config import load_params
    from burnqed.doctor import _Context, check_policy

    (checkout / "p.yaml").write_text(yaml.safe_dump({"policy": policy}))
    params = load_params(
        checkout / "params.yaml", [checkout / "config/demo.yaml", checkout / "p.yaml"]
    )
    return check_policy(_Context(params=params, launch=launch, profile=None))


def test_policy_in_process_answers_one_token(checkout, base_model):
    c = _policy_check(checkout, {"backend": "transformers"})
    assert c.status == "ok" and "one-token" in c.reason and "models/base" in c.reason


def test_policy_server_is_launched_only_when_asked(checkout, base_model):
    standin = [
        sys.executable,
        "-m",
        "burnqed.policy.standin",
        "--model",
        "{model}",
        "--port",
        "{port}",
    ]
    policy = {
        "backend": "sglang",
        "server_url": None,
        "server_command": standin,
        "health_timeout_s": 120,
    }
    skipped = _policy_check(checkout, policy)
    assert skipped.status == "skip" and "--launch" in skipped.reason
    c = _policy_check(checkout, policy, launch=True)
    assert c.status == "ok" and "launched" in c.reason, c.reason


def test_policy_server_url_that_does_not_answer_fails(checkout, monkeypatch):
    from burnqed.policy.launcher import free_port

    monkeypatch.chdir(checkout)
    c = _policy_check(
        checkout, {"backend": "openai", "server_url": f"http://127.0.0.1:{free_port()}"}
    )
    assert c.status == "fail" and "127.0.0.1" in c.reason


@pytest.mark.parametrize(("free_mib", "status"), [(80000, "ok"), (20000, "fail")])
def test_gpu_against_the_profile_and_the_servers_memory_fraction(
    checkout, monkeypatch, free_mib, status
):
    """A fake `nvidia-smi`: one 80 GB GPU; SGLang's --mem-fraction-static 0.7 needs 70 % free."""
    from burnqed.config import load_params
    from burnqed.doctor import _Context, check_gpu

    bin_dir = checkout / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 81559, {free_mib}'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    params = load_params(checkout / "params.yaml", [checkout / "config" / "a100-7b.yaml"])
    profile = REPO / "workflow" / "profiles" / "gpu"
    c = check_gpu(_Context(params=params, launch=False, profile=profile))
    assert c.status == status and "H100" in c.reason, c.reason
    # The demo asks for none.
    demo = load_params(checkout / "params.yaml", [checkout / "config" / "demo.yaml"])
    assert check_gpu(_Context(params=demo, launch=False, profile=None)).status == "skip"
