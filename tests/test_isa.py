"""The instruction-set pin (burnqed/isa.py): what it writes, what it records, and that it decides the
bytes — the tiny model trained a few steps and searched through the ``burnqed`` command, in fresh
processes whose caller environment asks for two different instruction sets."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from burnqed import isa
from burnqed.cli import build_parser, pin_setting
from burnqed.config import ProplogicConfig
from burnqed.data.benchmarks import build_proplogic_benchmark
from burnqed.trajectory import read_nodes, read_summary
from tests.train.pairs import write_pairs

REPO = Path(__file__).resolve().parents[1]
AVX2 = frozenset({"avx2", "fma", "sse4_2"})
# A caller that lowers every variable the pin sets below this machine's level (where each one
# changed results here: burnqed/isa.py), and one that leaves all of them to the machine.
LOWERED = {
    "ATEN_CPU_CAPABILITY": "default",
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3",
}


def test_the_pin_overrides_the_caller_and_keeps_its_values():
    env = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OTHER": "x"}
    record = isa.apply_pin("avx2", environ=env, flags=AVX2, machine="x86_64")
    assert {v: env[v] for v in isa.PINS["avx2"]} == isa.PINS["avx2"] == record["applied"]
    assert record["caller"] == {
        "ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE",
        "NPY_DISABLE_CPU_FEATURES": None, "ONEDNN_MAX_CPU_ISA": None,
    }  # fmt: skip
    assert json.loads(env[isa.CALLER_VARIABLE]) == record["caller"]
    assert env[isa.SETTING_VARIABLE] == "avx2" and env["OTHER"] == "x"
    # A child process applying it again records the user's values, not the pin's.
    child = dict(env)
    assert isa.apply_pin("avx2", environ=child, flags=AVX2, machine="x86_64") == record
    # `native` gives the caller's own environment back (no earlier pin left behind).
    native = isa.apply_pin("native", environ=child, flags=AVX2, machine="x86_64")
    assert native["applied"] == {} and child["ATEN_CPU_CAPABILITY"] == "default"
    assert "ONEDNN_MAX_CPU_ISA" not in child and child[isa.SETTING_VARIABLE] == "native"


@pytest.mark.parametrize(
    ("machine", "flags"),
    [("aarch64", None), ("x86_64", frozenset({"sse4_2", "avx"}))],
    ids=["arm", "x86-without-avx2"],
)
def test_a_cpu_that_cannot_honour_the_pin_runs_on_and_records_it(machine, flags, caplog):
    env: dict[str, str] = {}
    assert isa.apply_pin("avx2", environ=env, flags=flags, machine=machine)["applied"] == {}
    assert not set(env) & set(isa.VARIABLES)  # nothing written: the libraries keep their own level
    isa._warned = False
    with caplog.at_level(logging.WARNING, logger="burnqed.isa"):
        first = isa.pin_record("DEFAULT", environ=env, flags=flags, machine=machine)
        isa.pin_record("DEFAULT", environ=env, flags=flags, machine=machine)
    assert first == {"setting": "avx2", "applied": {}, "caller": dict.fromkeys(isa.VARIABLES),
                     "held": False}  # fmt: skip
    assert len([r for r in caplog.records if "did not hold" in r.message]) == 1


def test_the_pin_holds_only_at_its_level_with_its_variables():
    env: dict[str, str] = {}
    isa.apply_pin("avx2", environ=env, flags=AVX2, machine="x86_64")
    assert isa.pin_record("AVX2", environ=env, flags=AVX2, machine="x86_64")["held"] is True
    isa._warned = True  # (the warning is tested above)
    assert isa.pin_record("AVX512", environ=env, flags=AVX2, machine="x86_64")["held"] is False
    env["MKL_CBWR"] = "AUTO"  # changed after the pin
    assert isa.pin_record("AVX2", environ=env, flags=AVX2, machine="x86_64")["held"] is False
    isa.apply_pin("native", environ=env, flags=AVX2, machine="x86_64")
    assert isa.pin_record("AVX2", environ=env)["held"] is None  # no pin: nothing to hold


def test_a_pin_after_torch_is_imported_is_refused_naming_what_it_would_change(monkeypatch):
    import torch  # noqa: F401  (what an early importer does)

    for v in (*isa.VARIABLES, isa.CALLER_VARIABLE, isa.SETTING_VARIABLE):
        monkeypatch.delenv(v, raising=False)  # restored afterwards
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    if not isa.can_honour("avx2"):
        pytest.skip("this CPU cannot honour the pin: apply_pin writes nothing")
    with pytest.raises(
        isa.PinTooLate,
        match=r"torch was imported before .*ATEN_CPU_CAPABILITY=avx2, .* would have no effect",
    ):
        isa.apply_pin("avx2")
    assert os.environ["ATEN_CPU_CAPABILITY"] == "default"  # untouched
    isa.apply_pin("native")  # changes nothing: allowed


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma\n\nprocessor\t: 1\n")
    assert isa.cpu_flags(info) == frozenset({"fpu", "sse4_2", "avx", "avx2", "fma"})
    assert isa.cpu_flags(tmp_path / "absent") is None
    (tmp_path / "bare").write_text("processor\t: 0\n")  # no flags line: unknown, not "none"
    assert isa.cpu_flags(tmp_path / "bare") is None
    assert isa.can_honour("avx2", flags=None, machine="AMD64")  # no cpuinfo: torch decides


def test_the_cli_takes_the_setting_from_its_config_then_the_environment(tmp_path, monkeypatch):
    overlay = tmp_path / "native.yaml"
    overlay.write_text("cpu_isa: native\n", encoding="utf-8")
    parser = build_parser()
    params = ["--params", str(REPO / "params.yaml")]
    monkeypatch.setenv(isa.SETTING_VARIABLE, "native")
    assert pin_setting(parser.parse_args(["doctor", *params])) == "avx2"  # params.yaml's
    args = parser.parse_args(["doctor", *params, "--configfile", str(overlay)])
    assert pin_setting(args) == "native"
    # No config of its own (compare), or none readable: what a parent applied, else the default.
    assert pin_setting(parser.parse_args(["doctor", "--params", "nope.yaml"])) == "native"
    monkeypatch.delenv(isa.SETTING_VARIABLE)
    assert pin_setting(parser.parse_args(["doctor", "--params", "nope.yaml"])) == isa.DEFAULT


def test_the_tests_run_pinned():
    # tests/conftest.py: $BURNQED_CPU_ISA, else avx2.
    assert os.environ[isa.SETTING_VARIABLE] in isa.SETTINGS
    from burnqed.determinism import machine

    block = machine()
    assert set(block) == {"cpu", "cpu_capability", "torch_threads", "isa_pin", "accelerator"}
    assert block["isa_pin"]["setting"] == os.environ[isa.SETTING_VARIABLE]
    if block["isa_pin"]["setting"] == "avx2":
        assert block["isa_pin"]["held"] is isa.can_honour("avx2")
        assert (block["cpu_capability"] == "AVX2") is isa.can_honour("avx2")


# --------------------------------------------------------------------------------------------
# Acceptance: the pin decides the bytes, whatever the caller exported.

# A few training steps of a 32-wide model, then one search of 3 theorems at 4 nodes, one attempt
# each (the demo's 4 would only repeat the comparison with other seeds): seconds.
OVERLAY = {
    "lean": {"workers": 1},
    "model": {"tiny": {"hidden_size": 32, "heads": 1, "intermediate_size": 64, "steps": 6,
                       "warmup_steps": 1, "log_every": 3, "eval_pairs": 0, "batch_size": 8,
                       "max_proof_steps": None}},
    "search": {"max_nodes": 4, "num_candidates": 4, "concurrency": 1, "checkpoint_every": 2,
               "attempts": 1},
}  # fmt: skip
# The search's per-node fields that are clock times (or REPL state names), not results.
TIMINGS = {"created_s", "lean_s", "expand_wall_s", "expand_lean_s", "state"}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pin_inputs")
    write_pairs(root / "train.parquet", 40, seed=0, prefix="t")
    cfg = ProplogicConfig(theorems=30, max_depth=2, test_theorems=3)
    (bench,) = build_proplogic_benchmark(out_dir=root / "bench", cfg=cfg, seed=0, splits=["test"])
    (root / "theorems.jsonl").write_bytes(Path(bench).read_bytes())
    return root


def train_and_search(inputs: Path, work: Path, setting: str, caller: dict[str, str]) -> Path:
    """``burnqed train base`` then ``burnqed search`` in one fresh process (one torch start), with
    ``cpu_isa: setting`` in its config and ``caller`` exported: the user's environment, nothing of
    this test process's pin."""
    work.mkdir()
    (work / "overlay.yaml").write_text(yaml.safe_dump({**OVERLAY, "cpu_isa": setting}))
    config = ["--params", str(REPO / "params.yaml"), "--configfile", str(REPO / "config/demo.yaml"),
              "--configfile", "overlay.yaml"]  # fmt: skip
    train = ["train", *config, "base", "--pairs", str(inputs / "train.parquet"), "--no-val",
             "--out", "base"]  # fmt: skip
    search = ["search", *config, "--theorems", str(inputs / "theorems.jsonl"), "--model", "base",
              "--out", "search"]  # fmt: skip
    code = (
        f"import sys; from burnqed.cli import main; sys.exit(main({train!r}) or main({search!r}))"
    )
    env = {k: v for k, v in os.environ.items()
           if k not in isa.VARIABLES and not k.startswith("BURNQED_")}  # fmt: skip
    env.update(caller, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-4000:]
    return work


def results(work: Path) -> tuple[bytes, list[dict], list[dict]]:
    """The weights, the search's nodes (timings aside) and its per-attempt outcomes."""
    nodes = read_nodes(work / "search").table
    nodes = nodes.drop_columns(sorted(TIMINGS & set(nodes.column_names))).to_pylist()
    summary = read_summary(work / "search").table
    outcomes = summary.select(["theorem", "attempt", "status", "proof", "nodes_total"]).to_pylist()
    key = lambda r: (r["theorem"], r["attempt"], r.get("node_id", 0))  # noqa: E731
    return (work / "base/model.safetensors").read_bytes(), sorted(nodes, key=key), outcomes


@pytest.fixture(scope="module")
def runs(inputs, tmp_path_factory) -> dict[str, Path]:
    if not isa.can_honour("avx2"):
        pytest.skip("this CPU cannot run at AVX2: the pin does not hold here (docs: README)")
    root = tmp_path_factory.mktemp("pin_runs")
    return {
        "avx2 lowered": train_and_search(inputs, root / "a", "avx2", LOWERED),
        "avx2 best": train_and_search(inputs, root / "b", "avx2", {}),
        "native lowered": train_and_search(inputs, root / "c", "native", LOWERED),
    }


def test_under_the_pin_two_callers_get_the_same_bytes(runs):
    lowered, best = results(runs["avx2 lowered"]), results(runs["avx2 best"])
    assert lowered[0] == best[0]  # the weights
    assert lowered[1] == best[1] and lowered[2] == best[2]  # every node (log-probs too), outcome
    # (the trees are not trivial: several nodes with log-probabilities from the model)
    assert len(lowered[1]) > 3 and any(n["llm_logprob"] < 0 for n in lowered[1])


def test_without_the_pin_the_callers_environment_changes_the_bytes(runs):
    """The same lowered caller with ``cpu_isa: native``: the libraries follow it, and the weights
    and the search differ from the pinned runs (so the test above can fail)."""
    native, pinned = results(runs["native lowered"]), results(runs["avx2 lowered"])
    assert native[0] != pinned[0]
    logprobs = [[n["llm_logprob"] for n in r[1]] for r in (native, pinned)]
    assert logprobs[0] != logprobs[1]


def test_the_records_name_the_pin_and_the_callers_values(runs):
    for name, work in runs.items():
        setting, caller = name.split()
        info = json.loads((work / "base/run_info.json").read_text())
        manifest = json.loads((work / "search/manifest.json").read_text())
        summary = json.loads((work / "base/burnqed_model.json").read_text())
        exported = LOWERED if caller == "lowered" else {}
        for block in (info["machine"], manifest["machine"]):
            pin = block["isa_pin"]
            assert pin["setting"] == setting
            assert pin["caller"] == {v: exported.get(v) for v in isa.VARIABLES}
            assert block["torch_threads"] == 1 and block["accelerator"] is None
        want = "AVX2" if setting == "avx2" or caller == "best" else "DEFAULT"
        assert info["machine"]["cpu_capability"] == manifest["machine"]["cpu_capability"] == want
        assert info["machine"]["isa_pin"]["held"] is (True if setting == "avx2" else None)
        # The model's summary keeps what decides its bytes, not the caller's values.
        assert summary["determinism"]["isa_pin"] == {
            k: info["machine"]["isa_pin"][k] for k in ("setting", "applied", "held")
        }
