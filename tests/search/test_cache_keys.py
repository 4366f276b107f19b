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
from burnqed.search.cache import lean_settings, model_fingerprint, policy_settings, settings_digest
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
    base, tuned, copy = (model_fingerprint(d) for d in one_byte_apart(tmp_path, 65 << 20))
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


# -- issue 63: every model cache on whole files, launched servers, the REPL as it runs ------------


def one_byte_apart(tmp_path, size: int) -> tuple[str, str, str]:
    """Three model directories of one ``size``-byte weights file: ``base``, ``tuned`` (one byte
    other, between cb4cd23's first two sampled 1 MiB windows) and ``copy`` (base's bytes)."""
    dirs = []
    for name, byte in (("base", b"\x00"), ("tuned", b"\x01"), ("copy", b"\x00")):
        d = tmp_path / name
        d.mkdir()
        with (d / "model.safetensors").open("wb") as f:
            f.truncate(size)
            f.seek((2 << 20) + 12345)  # window 0 is [0, 1 MiB), window 1 starts past 4 MiB
            f.write(byte)
        (d / "tokenizer.json").write_text("{}")
        dirs.append(str(d))
    return dirs[0], dirs[1], dirs[2]


def test_a_67_mib_model_differing_outside_the_old_windows_misses_every_model_cache(tmp_path):
    """cb4cd23 still sampled 16 × 1 MiB windows of a file over 64 MiB for the embedding cache, the
    EBM↔policy check and joint training's resume key: a fine-tune that touched no window kept
    all three."""
    from burnqed.ebm.embeddings import model_digest, weights_digest

    base, tuned, copy = one_byte_apart(tmp_path, 67 << 20)
    caches = {
        "the expansion cache's policy key": model_fingerprint,
        "the embedding cache's key and the EBM's check against the policy": lambda d: model_digest(
            d, "last"
        ),
        "joint training's resume key": weights_digest,
    }
    for what, digest in caches.items():
        assert digest(base) != digest(tuned), f"{what}: a one-byte fine-tune hits"
        assert digest(base) == digest(copy), f"{what}: the same bytes under another path miss"


@dataclass
class LaunchedServer:
    """A backend over a launched server that states what it runs (``server_identity``)."""

    identity: dict
    model_id: str = "models/x"

    def server_identity(self) -> dict:
        return dict(self.identity)

    def raw_candidates(self, prompts, params, seeds=None):  # pragma: no cover - not asked here
        raise NotImplementedError


VLLM = {"server": "vllm", "version": "0.32.0", "deterministic": None, "hardware": None,
        "model": {"id": "models/x", "root": "models/x"}}  # fmt: skip
VLLM_COMMAND = ("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "{model}",
                "--port", "{port}")  # fmt: skip


def test_a_vllm_launch_without_batch_invariance_is_not_cached(monkeypatch):
    """vLLM's sample of a seeded request depends on the batch unless it runs batch-invariant
    (``VLLM_BATCH_INVARIANT=1``, reference/inference-servers.md §3.3); cb4cd23 cached it all the
    same."""
    monkeypatch.delenv("VLLM_BATCH_INVARIANT", raising=False)
    cfg = PolicyConfig(backend="openai", server_command=VLLM_COMMAND)
    plain = policy_settings(LaunchedServer(VLLM), cfg)
    assert plain["uncached"] is not None, "a vLLM launched without VLLM_BATCH_INVARIANT=1 is cached"
    assert "batch-invariant" in plain["uncached"]
    # Set in the environment it inherits, or by an `env` in front of its command: cached.
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "1")
    assert policy_settings(LaunchedServer(VLLM), cfg)["uncached"] is None
    monkeypatch.delenv("VLLM_BATCH_INVARIANT")
    prefixed = PolicyConfig(backend="openai",
                            server_command=("env", "VLLM_BATCH_INVARIANT=1", *VLLM_COMMAND))  # fmt: skip
    settings = policy_settings(LaunchedServer(VLLM), prefixed)
    assert settings["uncached"] is None
    assert settings["server_variables"]["VLLM_BATCH_INVARIANT"] == "1"


def test_a_launched_server_is_keyed_by_its_packages_environment_and_tokenizer_content(
    tmp_path, monkeypatch
):
    """Its own interpreter's torch/flashinfer/sgl-kernel/triton, its ``SGLANG_*`` variables, and
    the tokenizer it names by content (another tokenizer at the same path misses, the same one
    elsewhere hits)."""
    bin_dir = tmp_path / "sglang-env" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python3"

    def interpreter(torch: str) -> None:  # answers the version query as that environment would
        python.write_text(f'#!/bin/sh\necho \'{{"sglang": "0.5.22", "torch": "{torch}"}}\'\n')
        python.chmod(0o755)

    tokenizers = [tmp_path / "tok-a", tmp_path / "tok-b"]
    for d in tokenizers:  # one tokenizer's bytes at two paths
        d.mkdir()
        (d / "tokenizer.json").write_text('{"v": 0}')
    identity = {"server": "sglang", "version": "0.5.22", "deterministic": True, "hardware": None,
                "args": {"model_path": "models/x", "tokenizer_path": str(tokenizers[0])}}  # fmt: skip
    cfg = PolicyConfig(backend="sglang", server_command=(str(python), "-m", "sglang.launch_server",
                                                         "--enable-deterministic-inference"))  # fmt: skip

    def digest(ident=identity) -> str:
        return settings_digest(policy_settings(LaunchedServer(ident), cfg))

    interpreter("2.9.1")
    monkeypatch.delenv("SGLANG_ENABLE_TORCH_COMPILE", raising=False)
    first = digest()
    packages = policy_settings(LaunchedServer(identity), cfg).get("server_packages") or {}
    assert packages.get("torch") == "2.9.1", "the server interpreter's torch is in the key"
    interpreter("2.9.2")
    assert digest() != first, "another torch in the server's environment"
    interpreter("2.9.1")
    assert digest() == first
    monkeypatch.setenv("SGLANG_ENABLE_TORCH_COMPILE", "1")
    assert digest() != first, "an SGLANG_ variable the server inherits"
    monkeypatch.delenv("SGLANG_ENABLE_TORCH_COMPILE")
    moved = {**identity, "args": {**identity["args"], "tokenizer_path": str(tokenizers[1])}}
    assert digest(moved) == first, "the same tokenizer under another path"
    (tokenizers[0] / "tokenizer.json").write_text('{"v": 1}')
    assert digest() != first, "another tokenizer under the same path"


def lean_digest(lean: LeanConfig) -> str:
    return settings_digest(lean_settings(lean, "0.3.4"))


def test_a_changed_max_heartbeats_in_the_repl_command_misses(tmp_path):
    """``--maxHeartbeats=N`` among ``repl_command``'s arguments decides what a tactic answers;
    cb4cd23 keyed the command's files, not its arguments."""
    low = LeanConfig(repl_command=("repl", "--maxHeartbeats=200000"), imports=())
    high = LeanConfig(repl_command=("repl", "--maxHeartbeats=400000"), imports=())
    cache = tmp_path / "cache"
    search(tmp_path / "low", SeededToyPolicy(seed=1), ToyEnv(), cache,
           key=keys(SeededToyPolicy(seed=1), lean=low))  # fmt: skip
    again = search(tmp_path / "again", SeededToyPolicy(seed=1), ToyEnv(), cache,
                   key=keys(SeededToyPolicy(seed=1), lean=low))["cache"]  # fmt: skip
    changed = search(tmp_path / "high", SeededToyPolicy(seed=1), ToyEnv(), cache,
                     key=keys(SeededToyPolicy(seed=1), lean=high))["cache"]  # fmt: skip
    assert again["lean"]["hit_rate"] == 1.0
    assert changed["lean"]["hits"] == 0 and changed["starts"]["hits"] == 0, "heartbeats changed"
    assert changed["policy"]["hit_rate"] == 1.0


def wrapped_repl(tmp_path, body: str) -> LeanConfig:
    """A REPL started through a wrapper script (``body`` sets up its environment, then the
    propositional REPL runs): where it runs is the wrapper's business, not the caller's."""
    import sys

    wrapper = tmp_path / "repl.sh"
    wrapper.write_text(f'#!/bin/sh\n{body}\nexec "{sys.executable}" -m burnqed.proplogic "$@"\n')
    wrapper.chmod(0o755)
    return LeanConfig(repl_command=(str(wrapper),), imports=(), workers=1, spares=0,
                      ready_timeout_s=30.0)  # fmt: skip


def test_a_fake_lean_on_the_repls_path_with_another_version_misses(tmp_path, monkeypatch):
    """The ``lean`` a REPL's sysroot comes from is the one on *its* ``PATH`` — here a wrapper's —
    not the caller's (``_toolchain`` read the caller's on cb4cd23)."""
    fake = tmp_path / "fake-bin"
    fake.mkdir()
    lean = fake / "lean"

    def version(v: str) -> None:
        lean.write_text("#!/bin/sh\ncase \"$1\" in\n"
                        f"  --version) echo 'Lean (version {v}, x86_64-unknown-linux-gnu, "
                        "commit 0123abcd, Release)';;\n"
                        "  --print-prefix) echo /opt/lean;;\nesac\n")  # fmt: skip
        lean.chmod(0o755)

    monkeypatch.delenv("LEAN_SYSROOT", raising=False)
    cfg = wrapped_repl(tmp_path, f'export PATH="{fake}:$PATH"')
    version("4.9.0")
    first = lean_settings(cfg, "0.3.4")
    assert "4.9.0" in str((first["environment"]["toolchain"] or {}).get("version")), (
        "the toolchain is read where the REPL runs"
    )
    assert lean_digest(cfg) == settings_digest(first)
    version("4.10.0")
    assert lean_digest(cfg) != settings_digest(first), "another lean on the REPL's PATH hits"


def test_a_wrapper_that_runs_the_repl_in_another_project_is_keyed_by_that_projects_oleans(
    tmp_path,
):
    """``cd ../project && lake env repl``: the ``LEAN_PATH`` the REPL gets is the wrapper's (here
    set by hand, as ``lake env`` would), its ``.olean`` files are what the key holds."""
    project = tmp_path / "project"
    lib = project / ".lake" / "build" / "lib" / "lean"
    lib.mkdir(parents=True)
    olean = lib / "Mathlib.olean"
    olean.write_bytes(b"olean v1" * 100)
    cfg = wrapped_repl(tmp_path, f'cd "{project}" && export LEAN_PATH="{lib}"')
    first = lean_settings(cfg, "0.3.4")
    assert list(first["environment"]["lean_path"] or {}) == [str(lib)], (
        "the LEAN_PATH is read where the REPL runs"
    )
    olean.write_bytes(b"olean v2" * 100)  # rebuilt: same size, other bytes
    assert lean_digest(cfg) != settings_digest(first), "a rebuilt .olean of the REPL's project hits"
