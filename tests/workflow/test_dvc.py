"""DVC round trip with the real ``dvc`` CLI and a local-directory remote: the shrunken loop's
clean run (clone A, tests/workflow/loops.py) is pushed, a fresh clone B pulls it and Snakemake has
nothing to do there; a second push uploads nothing; a remote missing a file makes the pull name
it; after an edit (a shim, the search code) the pulled clone plans exactly the jobs the same edit
plans on the machine that built them.  The tests on the loop are marked ``slow`` with it (until
the CI speed-up of issue 33 they pushed a run of iteration 0 alone, built in the default suite)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.workflow.conftest import DEMO_TARGETS, snakemake, tiny_env

TARGET = DEMO_TARGETS[0]
# The session fixture ``loop`` runs the shrunken loop (twice at once) when no test before did:
# every test that pushes or pulls it is slow (the two that need no run stay in the default suite).
pytestmark = pytest.mark.timeout(5400)
on_the_loop = pytest.mark.slow


def burnqed(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "burnqed.cli", "artifacts", *args],
        cwd=workdir,
        env=tiny_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def git(workdir: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=workdir, env=tiny_env(), check=True, capture_output=True)


def remote_files(remote: Path) -> set[str]:
    return {p.relative_to(remote).as_posix() for p in remote.rglob("*") if p.is_file()}


def planned(workdir: Path) -> dict[str, int]:
    """``{rule: jobs}`` that ``snakemake -n`` plans for TARGET in ``workdir``."""
    r = snakemake(workdir, "-n", TARGET, "--quiet", "rules")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    if "Job stats:" not in out:
        assert "Nothing to be done" in out, out[-3000:]
        return {}
    table = out.split("Job stats:")[1]
    return {
        rule: int(n) for rule, n in re.findall(r"(?m)^(\w+)\s+(\d+)$", table) if rule != "total"
    }


def edit(path: Path) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write("\n# edited\n")


def planned_after_local_edit(a: Path, rel: str) -> dict[str, int]:
    """What ``snakemake -n`` plans on A, the machine that built the artifacts, with ``rel``
    edited there (put back afterwards, bytes and time)."""
    f = a / rel
    data, st = f.read_bytes(), f.stat()
    try:
        edit(f)
        return planned(a)
    finally:
        f.write_bytes(data)
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.fixture(scope="module")
def pushed(loop, tmp_path_factory) -> tuple[Path, Path]:
    """Clone A after the shrunken loop's clean run (tests/workflow/loops.py: TARGET among its
    outputs), pushed and committed; and its remote."""
    a = loop
    remote = tmp_path_factory.mktemp("dvc") / "remote"
    subprocess.run(
        [sys.executable, "-m", "dvc", "remote", "add", "-d", "store", str(remote)],
        cwd=a, env=tiny_env(), check=True, capture_output=True,
    )  # fmt: skip
    r = burnqed(a, "push")
    assert r.returncode == 0, r.stderr
    git(a, "add", "-A")
    git(a, "commit", "-qm", "artifacts")
    return a, remote


@on_the_loop
def test_fresh_clone_pulls_and_snakemake_has_nothing_to_do(pushed, tmp_path):
    a, _ = pushed
    b = tmp_path / "b"
    git(a.parent, "clone", "-q", str(a), str(b))
    assert not (b / "models").exists() and not (b / ".snakemake").exists()
    r = burnqed(b, "pull")
    assert r.returncode == 0, r.stderr
    assert (b / "models/iter_0/merged/config.json").read_bytes() == (
        a / "models/iter_0/merged/config.json"
    ).read_bytes()
    r = snakemake(b, "-n", TARGET)
    assert r.returncode == 0, r.stderr
    assert "Nothing to be done" in r.stdout + r.stderr, r.stdout + r.stderr
    # Snakemake's records came along: a changed search knob reruns the search, nothing upstream.
    tiny = yaml.safe_load((b / "tiny.yaml").read_text(encoding="utf-8"))
    tiny["search"]["max_nodes"] = 4
    (b / "tiny.yaml").write_text(yaml.safe_dump(tiny), encoding="utf-8")
    r = snakemake(b, "-n", TARGET, "--quiet", "rules")
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "search_shard" in out, out
    for untouched in ("tactic_pairs", "base_model", "sft", "merge"):
        assert f"\n{untouched} " not in out, out


@pytest.mark.parametrize(
    ("rel", "rules"),
    [
        # A shim: its jobs and what depends on them rerun, nothing upstream.
        ("workflow/scripts/search_shard.py", {"search_shard", "search"}),
        ("workflow/scripts/data_pairs.py", {"tactic_pairs", "base_model", "sft", "merge",
                                            "search_shard", "search"}),
    ],
)  # fmt: skip
@on_the_loop
def test_an_edit_after_the_push_plans_in_the_pulled_clone_what_it_plans_locally(
    pushed, tmp_path, rel, rules
):
    a, _ = pushed
    local = planned_after_local_edit(a, rel)
    assert set(local) == rules, local
    b = tmp_path / "b"  # the edit, committed after the push
    git(a.parent, "clone", "-q", str(a), str(b))
    edit(b / rel)
    git(b, "commit", "-qam", f"edit {rel}")
    c = tmp_path / "c"  # a fresh clone of that commit
    git(b.parent, "clone", "-q", str(b), str(c))
    r = burnqed(c, "pull")
    assert r.returncode == 0, r.stderr
    assert planned(c) == local


@on_the_loop
def test_an_output_stale_on_the_pushing_machine_stays_stale_after_the_pull(pushed, tmp_path):
    """B pulls, edits a shim and pushes without rerunning: its search is stale, and so it is
    in C, a fresh clone that pulls B's push."""
    a, _ = pushed
    b = tmp_path / "b"
    git(a.parent, "clone", "-q", str(a), str(b))
    assert burnqed(b, "pull").returncode == 0
    edit(b / "workflow/scripts/search_shard.py")
    stale = planned(b)
    assert set(stale) == {"search_shard", "search"}, stale
    r = burnqed(b, "push")
    assert r.returncode == 0, r.stderr
    git(b, "add", "-A")
    git(b, "commit", "-qm", "edit the shim, push without a rerun")
    c = tmp_path / "c"
    git(b.parent, "clone", "-q", str(b), str(c))
    assert burnqed(c, "pull").returncode == 0
    assert planned(c) == stale


def test_restore_names_tracked_inputs_that_changed_since_the_outputs_were_built(tmp_path):
    """A file outside the artifacts that an output was built from (here ``config/pool.txt``) and
    whose bytes differ from Snakemake's recorded checksum is one that restore stamps after the
    artifacts, so Snakemake reruns its readers; unchanged ones and artifacts are not."""
    from burnqed.artifacts.sync import changed_sources

    (tmp_path / "config").mkdir()
    same, edited = tmp_path / "config/pool.txt", tmp_path / "config/extra.txt"
    same.write_text("a\n", encoding="utf-8")
    edited.write_text("b\n", encoding="utf-8")
    sha = {p: "sha256:" + hashlib.sha256(p.read_bytes()).hexdigest() for p in (same, edited)}
    records = [{"output": "results/x", "file": "x", "record": {
        "input": ["config/pool.txt", "config/extra.txt", "config/gone.txt", "data/in.jsonl",
                  "config/big.bin"],
        "input_checksums": {"config/pool.txt": sha[same], "config/extra.txt": sha[edited],
                            "data/in.jsonl": "sha256:00"},
    }}]  # fmt: skip
    (tmp_path / "config/big.bin").write_bytes(b"no checksum recorded")
    assert changed_sources(tmp_path, records, ["data", "results"]) == ["config/big.bin",
                                                                      "config/gone.txt"]  # fmt: skip
    edited.write_text("b, edited\n", encoding="utf-8")
    assert changed_sources(tmp_path, records, ["data", "results"]) == [
        "config/big.bin", "config/extra.txt", "config/gone.txt"]  # fmt: skip


@on_the_loop
def test_pushing_twice_uploads_nothing(pushed):
    a, remote = pushed
    before = remote_files(remote)
    r = burnqed(a, "push")
    assert r.returncode == 0, r.stderr
    assert "Everything is up to date" in r.stdout + r.stderr
    assert remote_files(remote) == before
    state = json.loads((a / "snakemake-state.json").read_text(encoding="utf-8"))
    assert state["roots"] == ["data", "models", "results"]
    assert any(m["output"] == TARGET for m in state["metadata"])


@on_the_loop
def test_pulling_from_a_partial_remote_names_what_is_missing(pushed, tmp_path):
    a, remote = pushed
    partial = tmp_path / "partial"
    shutil.copytree(remote, partial)
    lost = TARGET  # a file no other artifact shares bytes with
    import hashlib

    md5 = hashlib.md5((a / lost).read_bytes()).hexdigest()
    (partial / "files/md5" / md5[:2] / md5[2:]).unlink()
    b = tmp_path / "b"
    git(a.parent, "clone", "-q", str(a), str(b))
    subprocess.run(
        [sys.executable, "-m", "dvc", "remote", "modify", "--local", "store", "url", str(partial)],
        cwd=b, env=tiny_env(), check=True, capture_output=True,
    )  # fmt: skip
    r = burnqed(b, "pull")
    assert r.returncode == 1
    assert "not on the remote" in r.stderr and lost in r.stderr, r.stderr
    assert "nothing restored" in r.stderr
    assert not (b / ".snakemake/metadata").exists()


@on_the_loop
def test_restore_refuses_files_that_differ_from_the_dvc_records(pushed, tmp_path):
    a, _ = pushed
    b = tmp_path / "b"
    git(a.parent, "clone", "-q", str(a), str(b))
    assert burnqed(b, "pull").returncode == 0
    (b / "data/theorems/search_pool.jsonl").write_text("{}\n", encoding="utf-8")
    r = burnqed(b, "restore")
    assert r.returncode == 1
    assert "differs from the .dvc files" in r.stderr and "data" in r.stderr, r.stderr


def test_push_refuses_while_snakemake_marks_an_output_incomplete(tmp_path):
    from base64 import urlsafe_b64encode

    from burnqed.artifacts.sync import ArtifactError, push

    (tmp_path / ".dvc").mkdir()
    (tmp_path / "results/iter_0/search/shard_0").mkdir(parents=True)
    key = urlsafe_b64encode(b"results/iter_0/search/shard_0").decode()
    (tmp_path / ".snakemake/incomplete").mkdir(parents=True)
    (tmp_path / ".snakemake/incomplete" / key).write_text("{}", encoding="utf-8")
    with pytest.raises(ArtifactError, match=r"incomplete \(results/iter_0/search/shard_0\)"):
        push(tmp_path)
