"""``resume="auto"``, how the workflow runs searches: a rerun of the same job continues its parts,
a rerun of a changed job (knob, model, theorem file, search code, REPL) starts afresh."""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest
import yaml

from burnqed.config import SearchConfig
from burnqed.policy import SamplingParams
from burnqed.search.stage import (
    RUN_RECORD,
    _listing_digest,
    job_fingerprint,
    prepare_auto_resume,
    run,
    search_to_dir,
)
from burnqed.theorems import write_theorems
from burnqed.trajectory import finished_attempts
from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems
from tests.search.test_stage import _fake_backends


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

    def fingerprint(**inputs):
        return job_fingerprint(lean={}, policy={}, repl_version="0.3.4", **inputs)

    a = fingerprint(search={"max_nodes": 8}, model=_listing_digest(model))
    assert a == fingerprint(search={"max_nodes": 8}, model=_listing_digest(model))
    assert a != fingerprint(search={"max_nodes": 9}, model=_listing_digest(model))
    (model / "model.safetensors").write_bytes(b"y" * 11)  # rebuilt: new size and time
    assert a != fingerprint(search={"max_nodes": 8}, model=_listing_digest(model))
    assert _listing_digest(None) is None and _listing_digest("org/hub-id") == "org/hub-id"


def test_fingerprint_follows_the_repl_and_the_lean_project(tmp_path):
    project = tmp_path / "mathlib-project"
    project.mkdir()
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.9.0\n", encoding="utf-8")
    manifest = {"name": "demo", "packages": [{"name": "mathlib", "rev": "2f65ba7f"}]}
    (project / "lake-manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    lean = {"repl_command": ["repl"], "project_path": str(project)}

    def fingerprint(repl_version="0.3.4"):
        return job_fingerprint(lean=lean, policy={}, repl_version=repl_version, seed=0)

    a = fingerprint()
    assert a == fingerprint() and a != fingerprint("0.3.5")
    (project / "lean-toolchain").write_text("leanprover/lean4:v4.10.0\n", encoding="utf-8")
    b = fingerprint()
    assert b != a
    manifest["packages"][0]["rev"] = "0123abcd"  # another Mathlib
    (project / "lake-manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    assert fingerprint() not in (a, b)


class _CountingEnv(ToyEnv):
    """The toy environment, counting the attempts started in it."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []

    async def start(self, theorem):
        self.started.append(theorem.name)
        return await super().start(theorem)


def test_an_edit_of_the_search_code_redoes_every_attempt(tmp_path, monkeypatch, repo_root):
    """The fingerprint digests the code that runs (here a copy of the package, which the test
    edits): after an edit under burnqed/search/ (or of the REPL program the config launches) the
    rerun of the same job redoes every attempt; without an edit, or after an edit of code the
    search does not run, it keeps them all."""
    src = tmp_path / "src"
    shutil.copytree(repo_root / "burnqed", src / "burnqed",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    monkeypatch.setattr("burnqed.provenance.SOURCE_ROOT", src)
    params = yaml.safe_load((repo_root / "params.yaml").read_text(encoding="utf-8"))
    cfg = {**params["search"], "max_nodes": 8, "concurrency": 2, "attempts": 1}
    lean = {**params["lean"], "repl_command": ["python", "-m", "burnqed.proplogic"]}
    theorems = tmp_path / "theorems.jsonl"
    write_theorems(theorems, toy_theorems(5, seed=4))
    out = tmp_path / "out"

    def rerun() -> list[str]:
        env = _CountingEnv()
        with _fake_backends(monkeypatch, RandomToyPolicy(seed=2), env):
            manifest = run(theorems=theorems, model="models/x", out=out, cfg=cfg, lean=lean,
                           policy=params["policy"], resume="auto")  # fmt: skip
        assert manifest["attempts"] == 5 and len(finished_attempts(out)[0]) == 5
        return sorted(env.started)

    def edit(path: str) -> None:
        with (src / path).open("a", encoding="utf-8") as f:
            f.write("\n# edited\n")

    everything = rerun()
    assert len(everything) == 5
    assert rerun() == []  # the same job, the same code: every attempt kept
    edit("burnqed/search/engine.py")
    assert rerun() == everything  # the search code changed: every attempt redone
    assert rerun() == []
    edit("burnqed/proplogic/tactics.py")  # the REPL program lean.repl_command runs
    assert rerun() == everything
    edit("burnqed/params.schema.yaml")  # package data, not Python: read by burnqed.config
    assert rerun() == everything
    edit("burnqed/report/stage.py")  # not run by a search
    assert rerun() == []


def test_a_resume_under_another_kernel_level_or_thread_count_is_refused(
    tmp_path, monkeypatch, repo_root
):
    """The run record keeps torch's kernel level and thread count (not the CPU model): a killed
    search continued under others would mix two computations in one result, so it is refused with
    one line naming both; the same job under the same ones resumes, and another pin setting is
    another job (started afresh)."""
    import torch

    from burnqed import isa
    from burnqed.config import InputError
    from burnqed.search import stage

    params = yaml.safe_load((repo_root / "params.yaml").read_text(encoding="utf-8"))
    cfg = {**params["search"], "max_nodes": 8, "concurrency": 2, "attempts": 1}
    lean = {**params["lean"], "repl_command": ["python", "-m", "burnqed.proplogic"]}
    theorems = tmp_path / "theorems.jsonl"
    write_theorems(theorems, toy_theorems(4, seed=4))
    out = tmp_path / "out"

    def search(resume="auto") -> list[str]:
        env = _CountingEnv()
        with _fake_backends(monkeypatch, RandomToyPolicy(seed=2), env):
            run(theorems=theorems, model="models/x", out=out, cfg=cfg, lean=lean,
                policy=params["policy"], resume=resume)  # fmt: skip
        (out / "manifest.json").unlink()  # as if killed before the manifest: parts remain
        return env.started

    def refused(resume="auto") -> str:
        with pytest.raises(InputError) as e:
            search(resume)
        assert "\n" not in str(e.value)
        return str(e.value)

    threads = torch.get_num_threads()
    level = torch.backends.cpu.get_cpu_capability()
    assert len(search()) == 4
    record = json.loads((out / RUN_RECORD).read_text())
    assert record["machine"] == {"cpu_capability": level, "torch_threads": threads}
    other = 2 if threads == 1 else 1
    torch.set_num_threads(other)
    try:
        for resume in ("auto", True):  # the workflow's resume and `burnqed search --resume`
            text = refused(resume)
            assert f"{threads} torch thread(s)" in text and f"{other} torch thread(s)" in text
    finally:
        torch.set_num_threads(threads)
    real = stage._machine
    monkeypatch.setattr(stage, "_machine", lambda: {**real(), "cpu_capability": "AVX512"})
    text = refused()
    assert f"cpu_capability {level}," in text and "cpu_capability AVX512," in text
    monkeypatch.setattr(stage, "_machine", real)
    monkeypatch.setattr(stage, "_machine", lambda: {**real(), "cpu": "another CPU model"})
    assert search() == []  # the same level and threads on another CPU type: resumed
    monkeypatch.setattr(stage, "_machine", real)
    monkeypatch.setenv(isa.SETTING_VARIABLE, "native")  # another pin setting: another job
    assert len(search()) == 4
