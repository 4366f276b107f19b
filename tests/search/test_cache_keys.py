"""What the expansion cache's keys hold beyond d670ec8's (issue 48): the Lean environment a REPL
runs in — the ``.olean`` files on its ``LEAN_PATH``, the bytes of a wrapper script that starts it —
every byte of a large weights file, ``n`` where a backend's candidates depend on it, the tokenizers
version, and the instruction-set variables the caller sets under the ``native`` pin.  Each test
changes one part and expects misses of its kind (hits of the other), or an equal search."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass

from burnqed.config import LeanConfig, PolicyConfig
from burnqed.isa import SETTING_VARIABLE
from burnqed.isa import VARIABLES as ISA_VARIABLES
from burnqed.policy import Candidate, SamplingParams, generation_of
from burnqed.search.cache import model_fingerprint, policy_settings, settings_digest
from tests.replay.test_replay import rows
from tests.search.fakes import RandomToyPolicy, ToyEnv, _seed
from tests.search.test_cache import SeededToyPolicy, keys, search


def fill_and_change(tmp_path, lean: LeanConfig, change) -> tuple[dict, dict]:
    """A search into the cache, one with the same keys, then one after ``change()``: the second
    and third runs' blocks."""
    cache = tmp_path / "cache"
    search(tmp_path / "first", SeededToyPolicy(seed=1), ToyEnv(), cache,
           key=keys(SeededToyPolicy(seed=1), lean=lean))  # fmt: skip
    same = search(tmp_path / "same", SeededToyPolicy(seed=1), ToyEnv(), cache,
                  key=keys(SeededToyPolicy(seed=1), lean=lean))["cache"]  # fmt: skip
    change()
    changed = search(tmp_path / "changed", SeededToyPolicy(seed=1), ToyEnv(), cache,
                     key=keys(SeededToyPolicy(seed=1), lean=lean))["cache"]  # fmt: skip
    return same, changed


def test_a_changed_olean_on_lean_path_gives_no_lean_hits(tmp_path, monkeypatch):
    """``lean.project_path: null`` (the default): Mathlib comes through ``LEAN_PATH``; rebuilding
    one module (same size, other bytes) must not keep the keys."""
    lib = tmp_path / "lib"
    (lib / "Mathlib" / "Logic").mkdir(parents=True)
    olean = lib / "Mathlib" / "Logic" / "Basic.olean"
    olean.write_bytes(b"olean v1" * 1000)
    (lib / "Mathlib" / "Logic" / "Basic.ilean").write_text("not read by an import")
    monkeypatch.setenv("LEAN_PATH", str(lib))
    same, changed = fill_and_change(
        tmp_path, LeanConfig(repl_command=("toy",), imports=()),
        lambda: olean.write_bytes(b"olean v2" * 1000),
    )  # fmt: skip
    assert same["lean"]["hit_rate"] == 1.0
    assert changed["lean"]["hits"] == 0 and changed["starts"]["hits"] == 0
    assert changed["policy"]["hit_rate"] == 1.0


def test_another_lean_path_gives_no_lean_hits(tmp_path, monkeypatch):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "Init.olean").write_bytes(name.encode() * 64)
    monkeypatch.setenv("LEAN_PATH", str(tmp_path / "a"))
    same, changed = fill_and_change(
        tmp_path, LeanConfig(repl_command=("toy",), imports=()),
        lambda: monkeypatch.setenv("LEAN_PATH", str(tmp_path / "b")),
    )  # fmt: skip
    assert same["lean"]["hit_rate"] == 1.0 and changed["lean"]["hits"] == 0


def test_a_changed_wrapper_script_gives_no_lean_hits(tmp_path):
    """A REPL started through a wrapper (whose ``--version`` may be a constant, like the
    stand-in's): the script's own bytes are keyed."""
    wrapper = tmp_path / "repl.sh"
    wrapper.write_text('#!/bin/sh\nexec repl Mathlib "$@"\n')
    for command in ((str(wrapper),), ("sh", str(wrapper))):
        wrapper.write_text('#!/bin/sh\nexec repl Mathlib "$@"\n')
        sub = tmp_path / str(len(command))
        sub.mkdir()
        same, changed = fill_and_change(
            sub, LeanConfig(repl_command=command, imports=()),
            lambda: wrapper.write_text("#!/bin/sh\nexec repl-4.22 Mathlib \"$@\"\n"),
        )  # fmt: skip
        assert same["lean"]["hit_rate"] == 1.0, command
        assert changed["lean"]["hits"] == 0 and changed["policy"]["hit_rate"] == 1.0, command


def test_a_large_weights_file_is_fingerprinted_whole(tmp_path):
    """Two 65 MiB files that differ in one byte between d670ec8's sampled 1 MiB windows."""
    size = 65 << 20
    dirs = []
    for name, byte in (("base", b"\x00"), ("tuned", b"\x01"), ("copy", b"\x00")):
        d = tmp_path / name
        d.mkdir()
        with (d / "model.safetensors").open("wb") as f:
            f.truncate(size)
            f.seek((2 << 20) + 12345)  # between window 0 ([0, 1 MiB)) and window 1 (~4.3 MiB)
            f.write(byte)
        (d / "tokenizer.json").write_text("{}")
        dirs.append(d)
    base, tuned, copy = (model_fingerprint(str(d)) for d in dirs)
    assert base != tuned
    assert base == copy  # the same bytes under another path


@dataclass
class NDependentPolicy(RandomToyPolicy):
    """An in-process backend's contract: candidate ``j`` depends on (prompt, its seed) *and* on
    ``n`` (batched sampling draws them together), so ``n`` must be part of its key."""

    def raw_candidates(self, prompts: Sequence[str], params: SamplingParams, seeds=None):
        assert seeds is not None and all(len(s) == params.n for s in seeds)
        pool = list(self.tactics)
        out = []
        for p, ss in zip(prompts, seeds, strict=True):
            rngs = [random.Random(_seed(self.seed, p, s, params.n)) for s in ss]
            out.append([Candidate(r.choice(pool), -r.random() * 3, r.randint(1, 5)) for r in rngs])
        return out

    def generate(self, prompts, params, seeds=None):
        return [generation_of(r) for r in self.raw_candidates(prompts, params, seeds)]


def test_candidates_that_depend_on_n_are_keyed_by_it(tmp_path):
    """A search with n = 3 through a cache a search with n = 4 filled equals the live n = 3 one:
    the first three seeds are the same (burnqed.policy.candidate_seeds), the candidates are not.
    (Without ``n`` in the key this test fails; the fakes of tests/search/test_cache.py cannot
    tell.)"""
    cache = tmp_path / "cache"
    four, three = SamplingParams(n=4, temperature=1.0), SamplingParams(n=3, temperature=1.0)
    search(tmp_path / "fill", NDependentPolicy(seed=2), ToyEnv(), cache, sampling=four)
    search(tmp_path / "live", NDependentPolicy(seed=2), ToyEnv(), None, sampling=three)
    block = search(tmp_path / "cached", NDependentPolicy(seed=2), ToyEnv(), cache,
                   sampling=three)["cache"]  # fmt: skip
    assert rows(tmp_path / "cached") == rows(tmp_path / "live")
    assert block["policy"]["candidates"]["hits"] == 0
    again = search(tmp_path / "again", NDependentPolicy(seed=2), ToyEnv(), cache,
                   sampling=three)["cache"]  # fmt: skip
    assert again["policy"]["hit_rate"] == 1.0 and rows(tmp_path / "again") == rows(
        tmp_path / "live"
    )


def digest_of_policy() -> str:
    return settings_digest(policy_settings(SeededToyPolicy(seed=1),
                                           PolicyConfig(backend="transformers", device="cpu")))  # fmt: skip


def test_the_tokenizers_version_is_keyed(monkeypatch):
    import importlib.metadata as metadata

    before = digest_of_policy()
    real = metadata.version
    monkeypatch.setattr(metadata, "version",
                        lambda name: "0.99.0" if name == "tokenizers" else real(name))  # fmt: skip
    assert digest_of_policy() != before


def test_under_the_native_pin_the_callers_kernel_variables_are_keyed(monkeypatch):
    monkeypatch.setenv(SETTING_VARIABLE, "native")
    variable = next(v for v in ISA_VARIABLES if v.startswith("ONEDNN"))
    monkeypatch.delenv(variable, raising=False)
    before = digest_of_policy()
    monkeypatch.setenv(variable, "AVX512_CORE")
    assert digest_of_policy() != before
    assert os.environ[SETTING_VARIABLE] == "native"
