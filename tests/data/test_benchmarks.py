"""The benchmark registry on the real pinned miniF2F file (beside the repo, never in it)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil

import pytest

from burnqed import __version__
from burnqed.data import benchmarks
from burnqed.data.benchmarks import (
    REGISTRY,
    BenchmarkError,
    HashMismatchError,
    build_benchmarks,
    fetch_benchmark,
    sha256_file,
)
from burnqed.theorems import read_theorems

PINNED = "d6654c88476ff14db19d57dea25bd955a240525fb52171e460f89d98f83d7dd5"
DEFECTIVE = {
    "induction_pord1p1on2powklt5on2",
    "induction_prod1p1onk3le3m1onn",
    "amc12a_2021_p9",
    "mathd_algebra_158",
    "mathd_algebra_342",
    "mathd_algebra_314",
}


@pytest.fixture
def modified_copy(minif2f_path, tmp_path):
    """The miniF2F file with one byte changed (a digit in the first statement)."""
    data = bytearray(minif2f_path.read_bytes())
    i = data.index(b"2019")
    data[i] = ord("3")
    path = tmp_path / "tampered" / "minif2f.jsonl"
    path.parent.mkdir()
    path.write_bytes(bytes(data))
    return path


def test_registry_pins_the_deepseek_file(minif2f_path):
    bm = REGISTRY["minif2f"]
    assert bm.sha256 == PINNED == sha256_file(minif2f_path)
    assert "2c4ba9119eef74d0d611f494261b2c5bae98c69a" in bm.url
    assert "2f65ba7f" in bm.mathlib and "unverified" in bm.lean
    assert {d.name for d in bm.known_defects} == DEFECTIVE
    assert all(d.reason for d in bm.known_defects)


def test_build_writes_244_per_split_with_the_hash_beside(minif2f_path, tmp_path):
    out = tmp_path / "data" / "benchmarks"
    written = build_benchmarks(raw={"minif2f": minif2f_path}, out_dir=out, names=["minif2f"])
    assert written == [out / "minif2f_valid.jsonl", out / "minif2f_test.jsonl"]
    source = [json.loads(line) for line in minif2f_path.read_text(encoding="utf-8").splitlines()]
    for split in ("valid", "test"):
        rows = list(read_theorems(out / f"minif2f_{split}.jsonl"))
        assert len(rows) == 244
        assert [t.to_json() for t in rows] == [r for r in source if r["split"] == split]
        meta = json.loads((out / f"minif2f_{split}.meta.json").read_text())
        assert meta["rows"] == 244 and meta["split"] == split and meta["benchmark"] == "minif2f"
        assert meta["source_sha256"] == PINNED
        assert meta["sha256"] == sha256_file(out / f"minif2f_{split}.jsonl")
        assert meta["source_url"] == REGISTRY["minif2f"].url
        assert meta["created_by"] == f"burnqed {__version__}"
        expected_defects = DEFECTIVE if split == "test" else set()
        assert set(meta["known_defects"]) == expected_defects
        assert set(meta["known_defect_reasons"]) == expected_defects


def test_a_one_byte_modified_copy_is_refused_with_both_hashes(
    minif2f_path, modified_copy, tmp_path
):
    actual = sha256_file(modified_copy)
    dest = tmp_path / "raw" / "minif2f.jsonl"
    with pytest.raises(HashMismatchError) as err:
        fetch_benchmark("minif2f", dest, local_path=modified_copy)
    msg = str(err.value)
    assert PINNED in msg and actual in msg and str(modified_copy) in msg
    assert not dest.exists() and list(dest.parent.iterdir()) == []  # no partial file either
    out = tmp_path / "benchmarks"
    with pytest.raises(HashMismatchError, match=actual):
        build_benchmarks(raw={"minif2f": modified_copy}, out_dir=out, names=["minif2f"])
    assert not out.exists() or list(out.iterdir()) == []


def test_fetch_from_a_local_path_verifies_and_copies(minif2f_path, tmp_path):
    dest = tmp_path / "raw" / "benchmarks" / "minif2f.jsonl"
    assert fetch_benchmark("minif2f", dest, local_path=minif2f_path) == dest
    assert sha256_file(dest) == PINNED


def test_fetch_downloads_from_the_registry_url(minif2f_path, tmp_path, monkeypatch):
    requested = []

    def fake_urlopen(url, timeout):
        requested.append(url)
        return io.BytesIO(minif2f_path.read_bytes())

    monkeypatch.setattr(benchmarks.urllib.request, "urlopen", fake_urlopen)
    dest = tmp_path / "minif2f.jsonl"
    fetch_benchmark("minif2f", dest)
    assert requested == [REGISTRY["minif2f"].url]
    assert sha256_file(dest) == PINNED
    fetch_benchmark("minif2f", dest)  # already there and verified: no second download
    assert len(requested) == 1


def test_fetch_refuses_a_download_that_is_not_the_pinned_file(tmp_path, monkeypatch):
    monkeypatch.setattr(
        benchmarks.urllib.request, "urlopen", lambda url, timeout: io.BytesIO(b"{}\n")
    )
    dest = tmp_path / "minif2f.jsonl"
    actual = hashlib.sha256(b"{}\n").hexdigest()
    with pytest.raises(HashMismatchError, match=rf"expected {PINNED}, actual {actual}"):
        fetch_benchmark("minif2f", dest)
    assert not dest.exists()


def test_unknown_benchmark_and_missing_raw_file(minif2f_path, tmp_path):
    with pytest.raises(BenchmarkError, match=r"unknown benchmark 'minif2f_v9'.*minif2f"):
        fetch_benchmark("minif2f_v9", tmp_path / "x")
    with pytest.raises(BenchmarkError, match=r"burnqed data fetch minif2f"):
        build_benchmarks(
            raw={"minif2f": tmp_path / "absent.jsonl"}, out_dir=tmp_path, names=["minif2f"]
        )


def test_build_refuses_a_row_with_an_unknown_split(minif2f_path, tmp_path, monkeypatch):
    # A pinned file is never altered; simulate a registry entry for a file whose splits differ.
    copy = tmp_path / "m.jsonl"
    shutil.copyfile(minif2f_path, copy)
    entry = REGISTRY["minif2f"]
    monkeypatch.setitem(
        benchmarks.REGISTRY, "minif2f", type(entry)(**{**entry.__dict__, "splits": ("test",)})
    )
    with pytest.raises(BenchmarkError, match=r"split 'valid', not one of \['test'\]"):
        build_benchmarks(raw={"minif2f": copy}, out_dir=tmp_path / "out", names=["minif2f"])
