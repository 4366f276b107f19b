"""``resume="auto"``, how the workflow runs searches: a rerun of the same job continues its parts,
a rerun of a changed job (knob, model or theorem file) starts afresh."""

from __future__ import annotations

import asyncio
import json

from burnqed.config import SearchConfig
from burnqed.policy import SamplingParams
from burnqed.search.stage import (
    RUN_RECORD,
    _listing_digest,
    job_fingerprint,
    prepare_auto_resume,
    search_to_dir,
)
from burnqed.trajectory import finished_attempts
from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems


def _search(out, theorems, *, resume=False):
    cfg = SearchConfig(max_nodes=20, max_depth=20, num_candidates=4, concurrency=4, timeout_s=60)
    return asyncio.run(
        search_to_dir(
            theorems, RandomToyPolicy(seed=3), ToyEnv(), cfg, out,
            sampling=SamplingParams(n=4, temperature=1.0), resume=resume,
        )
    )  # fmt: skip


def test_same_job_resumes_and_a_changed_job_starts_afresh(tmp_path):
    out = tmp_path / "shard_0"
    theorems = toy_theorems(10, seed=1)
    assert prepare_auto_resume(out, "job-a") is False  # nothing there yet
    _search(out, theorems[:6])  # "killed" after 6 attempts: their parts are written
    (out / "manifest.json").unlink()
    done_before, _ = finished_attempts(out)
    assert len(done_before) == 6

    assert prepare_auto_resume(out, "job-a") is True  # the same job: keep and resume
    manifest = _search(out, theorems, resume=True)
    assert manifest["attempts"] == 10
    assert finished_attempts(out)[0] == {(t.name, 0) for t in theorems}
    assert json.loads((out / RUN_RECORD).read_text())["fingerprint"] == "job-a"

    assert prepare_auto_resume(out, "job-b") is False  # a changed job: the old parts go
    assert finished_attempts(out)[0] == set() and not (out / "manifest.json").exists()
    assert json.loads((out / RUN_RECORD).read_text())["fingerprint"] == "job-b"


def test_fingerprint_follows_knobs_and_a_rebuilt_model(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"x" * 10)
    a = job_fingerprint(search={"max_nodes": 8}, model=_listing_digest(model))
    assert a == job_fingerprint(search={"max_nodes": 8}, model=_listing_digest(model))
    assert a != job_fingerprint(search={"max_nodes": 9}, model=_listing_digest(model))
    (model / "model.safetensors").write_bytes(b"y" * 11)  # rebuilt: new size and time
    assert a != job_fingerprint(search={"max_nodes": 8}, model=_listing_digest(model))
    assert _listing_digest(None) is None and _listing_digest("org/hub-id") == "org/hub-id"
