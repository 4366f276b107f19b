"""The search stage: resume after SIGTERM and kill -9 (subprocesses), the manifest, ``run`` and the
``burnqed search`` command wired to fakes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from burnqed.cli import main as cli_main
from burnqed.data.prompt import format_prompt
from burnqed.policy import candidate_seeds, salted_seed
from burnqed.search.stage import run
from burnqed.theorems import write_theorems
from burnqed.trajectory import finished_attempts, read_nodes, read_summary
from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems

REPO = Path(__file__).resolve().parents[2]
N = 40
KEEP = [
    "theorem",
    "attempt",
    "status",
    "proof",
    "verified",
    "proof_expansion",
    "nodes_expanded",
    "nodes_total",
]


def _start(out: Path, log: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.search.toy_search_main",
            str(out),
            "--theorems",
            str(N),
            *extra,
        ],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )


def _wait_for_parts(out: Path, n: int, proc: subprocess.Popen, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(list((out / "summary").glob("part-*.parquet"))) >= n:
            return
        assert proc.poll() is None, "the search ended before it could be interrupted"
        time.sleep(0.01)
    raise AssertionError(f"no {n} checkpoint(s) within {timeout} s")


def _rows(out: Path) -> list[dict]:
    read = read_summary(out)
    assert read.skipped == []
    return sorted((read.table.select(KEEP).to_pylist()), key=lambda d: (d["theorem"], d["attempt"]))


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("ref")
    proc = _start(out, out.parent / "ref.log")
    assert proc.wait(60) == 0
    rows = _rows(out)
    assert len(rows) == N and any(r["status"] == "proved" for r in rows)
    assert json.loads((out / "manifest.json").read_text())["attempts"] == N
    return rows


def test_sigterm_flushes_and_resume_completes_the_same_run(tmp_path, reference):
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = _start(out, log, "--latency", "0.004")
    _wait_for_parts(out, 1, proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 143
    done, skipped = finished_attempts(out)
    assert skipped == [] and 0 < len(done) < N
    assert not (out / "manifest.json").exists(), "an interrupted run must not look finished"
    # What finished before SIGTERM was flushed, even if it was less than a checkpoint interval.
    finished_logged = log.read_text().count("DEBUG burnqed.search.stage: finished ")
    assert len(done) == finished_logged
    resumed = _start(out, tmp_path / "resume.log", "--resume")
    assert resumed.wait(60) == 0
    assert f"{N - len(done)} to do" in (tmp_path / "resume.log").read_text()
    assert _rows(out) == reference  # same set, same outcomes, no duplicates
    assert read_nodes(out).table.num_rows == sum(r["nodes_total"] for r in reference)


def test_kill_9_loses_at_most_the_last_checkpoint_interval(tmp_path, reference):
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = _start(out, log, "--latency", "0.004", "--checkpoint-every", "5")
    _wait_for_parts(out, 2, proc)
    time.sleep(0.1)
    proc.kill()
    proc.wait(30)
    done, _ = finished_attempts(out)
    finished_logged = log.read_text().count("DEBUG burnqed.search.stage: finished ")
    assert len(done) % 5 == 0 and len(done) >= 10
    assert finished_logged - len(done) <= 5 - 1, (finished_logged, len(done))
    resumed = _start(out, tmp_path / "resume.log", "--resume")
    assert resumed.wait(60) == 0
    assert _rows(out) == reference


def test_existing_output_needs_resume(tmp_path):
    import asyncio

    from burnqed.config import SearchConfig
    from burnqed.policy import SamplingParams
    from burnqed.search.stage import search_to_dir

    cfg = SearchConfig(max_nodes=5, num_candidates=2, concurrency=2, attempts=2)
    ths = toy_theorems(3, seed=1)

    def go(resume: bool):
        return asyncio.run(
            search_to_dir(
                ths,
                RandomToyPolicy(),
                ToyEnv(),
                cfg,
                tmp_path,
                sampling=SamplingParams(n=2),
                resume=resume,
            )
        )

    manifest = go(False)
    assert manifest["attempts"] == 6 and sum(manifest["statuses"].values()) == 6
    with pytest.raises(FileExistsError, match="--resume"):
        go(False)
    assert go(True)["attempts"] == 6  # nothing left to do, nothing duplicated


@contextmanager
def _fake_backends(monkeypatch, policy, env):
    """Stand-ins for the modules `run` opens: the policy backend and the Lean pool."""
    backend = types.ModuleType("burnqed.policy.backend")
    opened = {}

    @contextmanager
    def open_generator(cfg, model, *, embeddings=False):
        opened["model"] = model
        yield policy

    backend.open_generator = open_generator

    class Pool:
        def __init__(self, cfg, *, log_dir=None):
            opened["workers"] = cfg.workers

        async def __aenter__(self):
            return env

        async def __aexit__(self, *exc):
            return None

    pool = types.ModuleType("burnqed.lean.pool")
    pool.LeanPool = Pool
    monkeypatch.setitem(sys.modules, "burnqed.policy.backend", backend)
    monkeypatch.setitem(sys.modules, "burnqed.lean.pool", pool)
    monkeypatch.setattr("burnqed.search.stage.check_repl", lambda cfg: "fake")  # no REPL at all
    yield opened


def test_cli_search_runs_the_stage(tmp_path, monkeypatch, repo_root):
    theorems = tmp_path / "theorems.jsonl"
    write_theorems(theorems, toy_theorems(7, seed=2, low=2, high=6))
    policy = RandomToyPolicy(seed=4)
    with _fake_backends(monkeypatch, policy, ToyEnv()) as opened:
        rc = cli_main(
            [
                "search",
                "--params",
                str(repo_root / "params.yaml"),
                "--theorems",
                str(theorems),
                "--model",
                "models/x",
                "--out",
                str(tmp_path / "out"),
                "--max-nodes",
                "9",
                "--num-candidates",
                "3",
                "--concurrency",
                "2",
                "--temperature",
                "0.5",
                "--shard",
                "1/2",
            ]
        )
    assert rc == 0 and opened["model"] == "models/x"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["attempts"] == 3  # shard 1 of 2 of 7 theorems: indices 1, 3, 5
    assert manifest["config"]["max_nodes"] == 9 and manifest["sampling"]["temperature"] == 0.5
    assert manifest["order"] == "priority"  # best-first (burnqed search --order)
    assert {p.n for p in policy.calls} == {3}
    names = set(read_summary(tmp_path / "out").table.column("theorem").to_pylist())
    assert names == {"toy0001", "toy0003", "toy0005"}
    assert all(
        r <= 9 for r in read_summary(tmp_path / "out").table.column("nodes_expanded").to_pylist()
    )


def test_cli_rejects_a_bad_override(tmp_path, repo_root, capsys):
    rc = cli_main(
        [
            "search",
            "--params",
            str(repo_root / "params.yaml"),
            "--theorems",
            "x.jsonl",
            "--model",
            "m",
            "--out",
            str(tmp_path),
            "--max-nodes",
            "0",
        ]
    )
    assert rc == 2
    assert "search.max_nodes" in capsys.readouterr().err


@dataclass
class _SeedRecorder(RandomToyPolicy):
    """Records the seeds each prompt (a proof state) was sampled with."""

    by_prompt: dict[str, set[tuple[int, ...]]] = field(default_factory=dict)

    def generate(self, prompts, params, seeds=None):
        for p, s in zip(prompts, seeds, strict=True):
            self.by_prompt.setdefault(p, set()).add(tuple(s))
        return super().generate(prompts, params, seeds)


def test_a_search_with_a_salt_of_its_own_draws_new_seeds_for_the_same_states(tmp_path, monkeypatch):
    """The noise search (salt "search_noise/iter_0") against iteration 0's pool search (no salt):
    the same theorems, the same root states, other draws; each manifest says how they were drawn.
    The unsalted search draws exactly candidate_seeds(seed, theorem, attempt, state hash, j)."""
    theorems = tmp_path / "theorems.jsonl"
    write_theorems(theorems, toy_theorems(6, seed=3, low=2, high=6))
    cfg = {"max_nodes": 6, "num_candidates": 3, "concurrency": 2, "attempts": 1}
    runs = {}
    for salt in (None, "search_noise/iter_0"):
        policy = _SeedRecorder(seed=4)
        with _fake_backends(monkeypatch, policy, ToyEnv()):
            manifest = run(theorems=theorems, model="m", out=tmp_path / str(salt), cfg=cfg,
                           lean={"repl_command": ["unused"]}, policy={"backend": "transformers"},
                           seed=7, seed_salt=salt)  # fmt: skip
        runs[salt] = (policy.by_prompt, manifest)
    (pool, pool_manifest), (noise, noise_manifest) = runs[None], runs["search_noise/iter_0"]
    nodes = read_nodes(tmp_path / "None").table.to_pylist()
    shared = pool.keys() & noise.keys()
    assert {format_prompt(r["state"]) for r in nodes if r["depth"] == 0} <= shared  # the roots
    for prompt in shared:
        assert not pool[prompt] & noise[prompt], prompt  # not one draw in common
    assert (pool_manifest["seed"], pool_manifest["seed_salt"]) == (7, None)
    assert pool_manifest["sampling"]["seed"] == 7
    assert (noise_manifest["seed"], noise_manifest["seed_salt"]) == (7, "search_noise/iter_0")
    assert noise_manifest["sampling"]["seed"] == salted_seed(7, "search_noise/iter_0") != 7
    expected = {candidate_seeds(7, r["theorem"], r["attempt"], r["state_hash"], 3)
                for r in nodes if r["expansion_index"] is not None}  # fmt: skip
    assert set().union(*pool.values()) == expected
