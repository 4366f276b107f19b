"""Infrastructure errors are not results: a REPL that dies on every request after its 4th.

The search runs through ``burnqed search`` against the real ``LeanPool`` (burnqed's propositional
REPL behind ``tests/search/dying_repl.py``) with a fixed policy; then ``--resume`` with a healthy
REPL must retry exactly the attempts that errored and keep every finished one.
"""

from __future__ import annotations

import json
import logging
import sys
import types
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import yaml

from burnqed.cli import main as cli_main
from burnqed.policy import Candidate, Generation, SamplingParams, dedup_candidates
from burnqed.theorems import Theorem, write_theorems
from burnqed.trajectory import finished_attempts, read_nodes, read_summary

DYING = Path(__file__).with_name("dying_repl.py")
KEEP = ["theorem", "attempt", "status", "proof", "nodes_expanded", "nodes_total", "reasons"]


class RulePolicy:
    """One candidate per state, by the shape of its first goal: ``intros`` for an implication,
    ``constructor`` for a conjunction, else ``assumption`` — which proves every theorem below."""

    model_id = "fake-rules"

    def generate(
        self, prompts: Sequence[str], params: SamplingParams, seeds=None
    ) -> list[Generation]:
        out = []
        for p in prompts:
            goal = next(line for line in p.splitlines() if line.lstrip().startswith("⊢"))
            tactic = "intros" if "→" in goal else "constructor" if "∧" in goal else "assumption"
            out.append(dedup_candidates([Candidate(tactic, -0.1, 1)]))
        return out

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.zeros((len(texts), 2), dtype=np.float32)

    def close(self) -> None:
        pass


@contextmanager
def fake_policy(monkeypatch):
    backend = types.ModuleType("burnqed.policy.backend")

    @contextmanager
    def open_generator(cfg, model, *, embeddings=False):
        yield RulePolicy()

    backend.open_generator = open_generator
    monkeypatch.setitem(sys.modules, "burnqed.policy.backend", backend)
    yield


# Shallow ones need 3 requests in one process (start, intros, assumption): they finish even when
# the REPL dies after 4 (the pool restarts it and replays).  The conjunctions need at least 5, and
# replaying their path after a restart takes 4, so they keep dying: `error` attempts.
SHALLOW = [
    "(p : Prop) : p → p",
    "(p q : Prop) : p → q → p",
    "(p q : Prop) : p → q → q",
    "(p q r : Prop) : p → q → r → q",
    "(p q r : Prop) : p → q → r → r",
]
DEEP = ["(p q : Prop) : p → q → p ∧ q", "(p q r : Prop) : p → q → r → r ∧ p"]
STATEMENTS = SHALLOW + DEEP


def search(tmp_path: Path, repl: list[str], *extra: str) -> int:
    theorems = tmp_path / "theorems.jsonl"
    write_theorems(
        theorems,
        [
            Theorem(name=f"t{i}", formal_statement=f"theorem t{i} {s} := by\n")
            for i, s in enumerate(STATEMENTS)
        ],
    )
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        yaml.safe_dump(
            {
                "lean": {
                    "repl_command": repl,
                    "imports": [],
                    "workers": 1,
                    "ready_timeout_s": 20,
                    "tactic_timeout_s": 5,
                    "memory_limit_mb": 2048,
                },
                "policy": {"backend": "transformers"},
                "search": {"max_nodes": 8, "num_candidates": 1, "concurrency": 1},
            }
        )
    )
    repo = Path(__file__).resolve().parents[2]
    return cli_main(
        [
            "search",
            "--params",
            str(repo / "params.yaml"),
            "--configfile",
            str(overlay),
            "--theorems",
            str(theorems),
            "--model",
            "fake",
            "--out",
            str(tmp_path / "out"),
            *extra,
        ]
    )


def rows(out: Path) -> dict[tuple[str, int], dict]:
    read = read_summary(out)
    assert read.skipped == []
    return {(r["theorem"], r["attempt"]): r for r in read.table.select(KEEP).to_pylist()}


def test_errors_are_apart_fail_the_stage_and_resume_retries_exactly_them(
    tmp_path, monkeypatch, caplog
):
    out = tmp_path / "out"
    with fake_policy(monkeypatch):
        rc = search(tmp_path, [sys.executable, str(DYING), "4"])
    assert rc == 1  # errors above search.max_error_fraction (0.05) fail the stage
    manifest = json.loads((out / "manifest.json").read_text())
    first = rows(out)
    errored = {k for k, r in first.items() if r["status"] == "error"}
    finished = {k: r for k, r in first.items() if r["status"] != "error"}
    assert len(first) == len(STATEMENTS) and errored and finished, first
    # Errors are reported apart, with reasons, and are not in the solve rate's denominator.
    assert manifest["error_limit_exceeded"] is True
    assert manifest["errors"]["count"] == len(errored) == manifest["statuses"]["error"]
    assert {(e["theorem"], e["attempt"]) for e in manifest["errors"]["attempts"]} == errored
    assert all(e["reason"] for e in manifest["errors"]["attempts"])
    assert sum(manifest["errors"]["by_reason"].values()) == len(errored)
    proved = sum(r["status"] == "proved" for r in finished.values())
    assert manifest["results"] == len(finished)
    assert manifest["solve_rate"] == pytest.approx(proved / len(finished))
    assert finished_attempts(out)[0] == set(finished)

    caplog.clear()
    with fake_policy(monkeypatch), caplog.at_level(logging.INFO, logger="burnqed.search.stage"):
        rc = search(tmp_path, [sys.executable, "-m", "burnqed.proplogic"], "--resume")
    assert rc == 0
    assert f"{len(errored)} to do ({len(errored)} errors retried)" in caplog.text
    second = rows(out)
    assert set(second) == set(first)
    assert {k: second[k] for k in finished} == finished  # finished attempts kept as they were
    assert all(second[k]["status"] != "error" for k in errored)
    assert all(second[k]["status"] == "proved" for k in errored)  # a healthy REPL proves them
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["errors"]["count"] == 0 and manifest["error_limit_exceeded"] is False
    assert manifest["results"] == len(STATEMENTS)
    # The superseded error rows' partial trees are gone from the node rows too.
    nodes = read_nodes(out).table
    assert nodes.num_rows == sum(r["nodes_total"] for r in second.values())
    keys = set(
        zip(nodes.column("theorem").to_pylist(), nodes.column("attempt").to_pylist(), strict=True)
    )
    assert keys <= set(second)


class DownServer:
    """A policy server that answers its first ``up`` calls, then refuses connections."""

    model_id = "fake-down"

    def __init__(self, up: int) -> None:
        from tests.search.fakes import RandomToyPolicy

        self.policy, self.up = RandomToyPolicy(seed=1, allow_cheat=False), up

    def generate(
        self, prompts: Sequence[str], params: SamplingParams, seeds=None
    ) -> list[Generation]:
        if self.up == 0:
            raise ConnectionError("policy server: connection refused")
        self.up -= 1
        return self.policy.generate(prompts, params)


def test_a_server_that_goes_down_fails_the_stage_with_its_errors_apart(tmp_path, monkeypatch):
    import asyncio

    from burnqed.config import SearchConfig
    from burnqed.search.stage import TooManyErrors, search_to_dir
    from tests.search.fakes import ToyEnv, toy_theorems

    monkeypatch.setattr("burnqed.search.engine.BATCH_RETRY_S", 0.01)
    cfg = SearchConfig(max_nodes=6, num_candidates=2, concurrency=1, max_error_fraction=0.25)
    out = tmp_path / "out"
    with pytest.raises(TooManyErrors, match=r"infrastructure error.*--resume"):
        asyncio.run(
            search_to_dir(
                toy_theorems(6, seed=2, low=2, high=4),
                DownServer(up=3),
                ToyEnv(),
                cfg,
                out,
                sampling=SamplingParams(n=2),
            )
        )
    manifest = json.loads((out / "manifest.json").read_text())
    errors = manifest["errors"]
    assert errors["count"] >= 2 and errors["by_reason"] == {"ConnectionError": errors["count"]}
    assert errors["fraction"] > 0.25 and manifest["error_limit_exceeded"]
    assert manifest["results"] == 6 - errors["count"]
    assert manifest["statuses"].get("error") == errors["count"]


def test_a_failed_value_batch_is_retried_not_turned_into_attempt_errors(monkeypatch):
    """A value-model (EBM) call that fails once is tried again: no attempt errors, and the trees
    are those of a run where nothing failed (the same states get the same energies)."""
    import asyncio

    import burnqed.search.engine as engine
    from burnqed.config import SearchConfig
    from burnqed.search import search_all
    from tests.search.fakes import RandomToyPolicy, ToyEnv, ToyValue, toy_theorems

    monkeypatch.setattr(engine, "BATCH_RETRY_S", 0.01)

    class FlakyValue(ToyValue):
        def __init__(self, failures: int) -> None:
            super().__init__()
            self.failures = failures

        def energies(self, states, goals):
            if self.failures:
                self.failures -= 1
                raise RuntimeError("embedding server: connection reset")
            return super().energies(states, goals)

    theorems = toy_theorems(5, seed=4, low=3, high=9)
    cfg = SearchConfig(max_nodes=10, num_candidates=3, concurrency=2)

    def run(value):
        results = asyncio.run(
            search_all(theorems, RandomToyPolicy(seed=2), ToyEnv(), cfg, value_model=value)
        )
        return {r.theorem: (r.status, r.proof, r.nodes_expanded) for r in results}

    flaky = FlakyValue(failures=engine.BATCH_TRIES - 1)
    assert run(flaky) == run(ToyValue())
    assert flaky.failures == 0  # it did fail, and the batch was tried again
    assert all(status != "error" for status, _, _ in run(FlakyValue(failures=1)).values())
