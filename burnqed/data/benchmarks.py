"""The benchmark registry: every evaluation statement set pinned by sha256, with its Lean/Mathlib
versions and known defects (``reference/datasets.md`` §2, §8); fetching and materialising them.

Outputs of :func:`build_benchmarks`, per benchmark and split (``data/benchmarks/``):

- ``<name>_<split>.jsonl`` — :class:`~burnqed.theorems.Theorem` records;
- ``<name>_<split>.meta.json`` — ``benchmark, split, rows, sha256`` (of the ``.jsonl`` written),
  ``source_sha256, source_url, source_file, lean, mathlib, known_defects`` (the defective names in
  this split), ``known_defect_reasons, notes, created_by``.  Eval results carry these hashes.

A file whose sha256 differs from the registry's is refused (:class:`HashMismatchError`, showing both
hashes) both when it is fetched and when it is built from.  ``proplogic`` (splits ``valid`` and
``test``) is *generated*, not pinned: :func:`build_proplogic_benchmark` writes it with the hash of
what it wrote.

Example::

    >>> REGISTRY["minif2f"].splits, REGISTRY["proofnet"].splits
    (('valid', 'test'), ('valid', 'test'))
    >>> fetch_benchmark("minif2f", Path("data/raw/benchmarks/minif2f.jsonl"))   # doctest: +SKIP
    >>> build_benchmarks(raw={"minif2f": Path("data/raw/benchmarks/minif2f.jsonl")},
    ...                  out_dir=Path("data/benchmarks"), names=["minif2f"])     # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from burnqed import __version__
from burnqed.config import ProplogicConfig
from burnqed.data.readers import STATEMENT_READERS
from burnqed.theorems import Theorem, write_theorems

log = logging.getLogger(__name__)


class HashMismatchError(ValueError):
    """A benchmark file is not the pinned one; the message shows the file and both sha256."""


class BenchmarkError(ValueError):
    """An unknown benchmark, a missing raw file, or a file whose splits are not the registry's."""


@dataclass(frozen=True)
class KnownDefect:
    name: str  # theorem key in the benchmark (burnqed.theorems)
    split: str
    reason: str


@dataclass(frozen=True)
class Benchmark:
    name: str
    url: str  # where `burnqed data fetch` downloads it (a pinned commit, never a branch)
    sha256: str  # of the file at `url`
    filename: str  # default file name under data/raw/benchmarks/
    format: str  # a reader in burnqed.data.readers.STATEMENT_READERS
    lean: str
    mathlib: str
    splits: tuple[str, ...]
    known_defects: tuple[KnownDefect, ...] = ()
    notes: tuple[str, ...] = ()


_BIGOP_ESCAPE = (
    "big-operator body unparenthesised: the binder variable escapes and becomes a phantom "
    "auto-bound argument (DeepSeek-Prover-V1.5 issue #26)"
)

MINIF2F = Benchmark(
    name="minif2f",
    url=(
        "https://raw.githubusercontent.com/deepseek-ai/DeepSeek-Prover-V1.5/"
        "2c4ba9119eef74d0d611f494261b2c5bae98c69a/datasets/minif2f.jsonl"
    ),
    sha256="d6654c88476ff14db19d57dea25bd955a240525fb52171e460f89d98f83d7dd5",
    filename="minif2f.jsonl",
    format="deepseek",
    lean="4.9 (unverified: what DeepSeek-Prover-V1.5/V2 and Goedel-Prover-V2 report for it)",
    mathlib=(
        "https://github.com/xinhjBrant/mathlib4 @ 2f65ba7f1a9144b20c8e7358513548e317d26de1 "
        "(branch deepseek)"
    ),
    splits=("valid", "test"),
    known_defects=(
        KnownDefect("induction_pord1p1on2powklt5on2", "test", _BIGOP_ESCAPE),
        KnownDefect("induction_prod1p1onk3le3m1onn", "test", _BIGOP_ESCAPE),
        KnownDefect("amc12a_2021_p9", "test", _BIGOP_ESCAPE),
        KnownDefect(
            "mathd_algebra_158",
            "test",
            _BIGOP_ESCAPE + "; the hypotheses become contradictory, so it is vacuously true",
        ),
        KnownDefect("mathd_algebra_342", "test", _BIGOP_ESCAPE),
        KnownDefect(
            "mathd_algebra_314",
            "test",
            "stated over ℕ without a real ascription: "
            "(1 / 4) ^ (n + 1) * 2 ^ (2 * n) = 1 / 4 is 0 = 0",
        ),
    ),
    notes=(
        "64 rows (33 valid, 31 test) use the deprecated `∑ x in s, f` / `∏ x in s, f` syntax: "
        "expect warnings or errors on a recent Mathlib",
        "statements differ from other miniF2F copies (yangky11/miniF2F-lean4, Kimina's revision, "
        "Goedel's repaired copy): compare numbers only on the same sha256",
    ),
)

PROOFNET = Benchmark(
    name="proofnet",
    url=(
        "https://raw.githubusercontent.com/deepseek-ai/DeepSeek-Prover-V1.5/"
        "2c4ba9119eef74d0d611f494261b2c5bae98c69a/datasets/proofnet.jsonl"
    ),
    sha256="4a4d4fd69f45d6180830f12a73adb8a7e04915f651f3fa44a2877082fe252132",
    filename="proofnet.jsonl",
    format="deepseek",
    lean=MINIF2F.lean,  # the same DeepSeek-Prover-V1.5 commit and toolchain as its miniF2F
    mathlib=MINIF2F.mathlib,
    splits=("valid", "test"),
    notes=(
        "DeepSeek-Prover-V1.5's copy, on which it reports ProofNet-test (186 theorems): compare "
        "numbers only on the same sha256",
        "19 names repeat (41 rows, different textbook exercises): theorems are keyed "
        "`<name>@<split>:<line>` where the name repeats (burnqed.theorems)",
        "per-row headers (25 distinct); 8 define what the statement uses (`def K : Set ℝ := …`): "
        "the header is part of the trusted statement",
        "statements end with `:=`; burnqed appends ` by` before a tactic proof",
    ),
)

REGISTRY: Mapping[str, Benchmark] = {MINIF2F.name: MINIF2F, PROOFNET.name: PROOFNET}
# Benchmarks burnqed generates itself: not pinned, built by their own function.
GENERATED = ("proplogic",)

# What each split is for (SPEC §4.8b, docs/confirmation.md).  *confirmation*: reported, never
# chosen on; every eval on it is a recorded look (burnqed.eval.ledger).  *development*: where
# choices are made (proplogic's dev split; ProofNet valid for real runs, params.yaml
# data.decontaminate_against).  *pool*: searched for training data (proplogic valid, miniF2F valid
# in real runs), never a confirmation benchmark.
CONFIRMATION, DEVELOPMENT, POOL = "confirmation", "development", "pool"
ROLES: Mapping[str, str] = {
    "proplogic_test": CONFIRMATION,
    "proplogic_dev": DEVELOPMENT,
    "proplogic_valid": POOL,
    "minif2f_test": CONFIRMATION,
    # real runs search miniF2F valid for training data (params.yaml data.search_pool): the pool; their
    # development benchmark is ProofNet valid (data.decontaminate_against)
    "minif2f_valid": POOL,
    "proofnet_test": CONFIRMATION,
    "proofnet_valid": DEVELOPMENT,
}


def benchmark_role(name: str) -> str:
    """The role of benchmark split ``<name>_<split>`` (:data:`ROLES`); :class:`BenchmarkError`
    naming it and the known splits otherwise.

    >>> benchmark_role("proplogic_test"), benchmark_role("minif2f_valid")
    ('confirmation', 'development')
    """
    try:
        return ROLES[name]
    except KeyError:
        raise BenchmarkError(
            f"benchmark split {name!r} has no role; known: {', '.join(sorted(ROLES))}"
        ) from None


def get_benchmark(name: str) -> Benchmark:
    try:
        return REGISTRY[name]
    except KeyError:
        known = sorted(REGISTRY) + [f"{g} (generated)" for g in GENERATED]
        raise BenchmarkError(f"unknown benchmark {name!r}; the registry has {known}") from None


# --------------------------------------------------------------------------------------------
# Hashing and fetching


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_sha256(path: Path, benchmark: Benchmark, *, shown_as: str | Path | None = None) -> None:
    """Raise :class:`HashMismatchError` unless ``path`` is the pinned file of ``benchmark``."""
    actual = sha256_file(path)
    if actual != benchmark.sha256:
        raise HashMismatchError(
            f"{shown_as or path}: sha256 mismatch for benchmark {benchmark.name!r}: "
            f"expected {benchmark.sha256}, actual {actual}. The file is not the pinned copy from "
            f"{benchmark.url}; refusing it."
        )


def fetch_benchmark(name: str, dest: Path, *, local_path: Path | None = None) -> Path:
    """Put the pinned file of benchmark ``name`` at ``dest``: copied from ``local_path`` or
    downloaded from the registry URL.  The copy is checked *before* it reaches ``dest``
    (temporary file, hash, rename): on a mismatch nothing is written at ``dest`` and
    :class:`HashMismatchError` is raised.
    """
    bm = get_benchmark(name)
    dest = Path(dest)
    if dest.exists() and local_path is None and sha256_file(dest) == bm.sha256:
        log.info("%s: already present and verified (sha256 %s)", dest, bm.sha256)
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    try:
        if local_path is not None:
            local_path = Path(local_path)
            if not local_path.is_file():
                raise BenchmarkError(f"{local_path}: no such file (given for benchmark {name!r})")
            shutil.copyfile(local_path, tmp)
            source: Path | str = local_path
        else:
            _download(bm.url, tmp)
            source = bm.url
        verify_sha256(tmp, bm, shown_as=source)
        tmp.replace(dest)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("%s: fetched from %s, sha256 %s verified", dest, source, bm.sha256)
    return dest


def _download(url: str, out: Path) -> None:
    try:
        with urllib.request.urlopen(url, timeout=60) as resp, out.open("wb") as f:
            shutil.copyfileobj(resp, f)
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        raise BenchmarkError(
            f"could not download {url}: {e}. Without a network, download it elsewhere and pass "
            f"the file with `burnqed data fetch NAME --from PATH`."
        ) from None


# --------------------------------------------------------------------------------------------
# Materialising data/benchmarks/


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def benchmark_paths(out_dir: Path, name: str, split: str) -> tuple[Path, Path]:
    """``(<name>_<split>.jsonl, <name>_<split>.meta.json)`` under ``out_dir``."""
    stem = f"{name}_{split}"
    return Path(out_dir) / f"{stem}.jsonl", Path(out_dir) / f"{stem}.meta.json"


def build_benchmarks(
    *,
    raw: Mapping[str, Path],
    out_dir: Path,
    names: Sequence[str],
    proplogic: ProplogicConfig | None = None,
    seed: int = 0,
    splits: Sequence[str] | None = None,
    benchmark_seed: int | None = None,
) -> list[Path]:
    """Write ``out_dir/<name>_<split>.jsonl`` and ``.meta.json`` for each benchmark in ``names``
    (only the given ``splits`` when not None: one Snakemake job builds one split).

    Registry benchmarks are read from ``raw[name]`` after verifying its sha256 again; generated
    ones (``proplogic``) need ``proplogic`` (the data section's config), ``seed`` and
    ``benchmark_seed`` (None: ``seed``; :func:`build_proplogic_benchmark`).
    Returns the ``.jsonl`` paths written.
    """
    written: list[Path] = []
    for name in names:
        if name in GENERATED:
            if proplogic is None:
                raise BenchmarkError(
                    f"benchmark {name!r} is generated: pass its config (proplogic=…)"
                )
            written += build_proplogic_benchmark(
                out_dir=out_dir, cfg=proplogic, seed=seed, splits=splits,
                benchmark_seed=benchmark_seed,
            )  # fmt: skip
            continue
        bm = get_benchmark(name)
        path = raw.get(name)
        if path is None or not Path(path).is_file():
            raise BenchmarkError(
                f"benchmark {name!r}: raw file {path} not found; run `burnqed data fetch {name}` "
                f"(or `burnqed data fetch {name} --from PATH`)"
            )
        path = Path(path)
        verify_sha256(path, bm)
        theorems = STATEMENT_READERS[bm.format](path)
        by_split: dict[str, list[Theorem]] = {s: [] for s in bm.splits}
        for t in theorems:
            if t.split not in by_split:
                raise BenchmarkError(
                    f"{path}: theorem {t.key!r} has split {t.split!r}, not one of {list(bm.splits)}"
                )
            by_split[t.split].append(t)
        for split in _selected(bm.splits, splits, name):
            written.append(_write_split(bm, split, by_split[split], path, Path(out_dir)))
    return written


def _selected(available: Sequence[str], wanted: Sequence[str] | None, name: str) -> list[str]:
    if wanted is None:
        return list(available)
    unknown = [s for s in wanted if s not in available]
    if unknown:
        raise BenchmarkError(
            f"benchmark {name!r} has no split(s) {unknown}; it has {list(available)}"
        )
    return list(wanted)


def _write_split(bm: Benchmark, split: str, rows: list[Theorem], raw: Path, out_dir: Path) -> Path:
    if not rows:
        raise BenchmarkError(f"{raw}: benchmark {bm.name!r} has no rows in split {split!r}")
    jsonl, meta = benchmark_paths(out_dir, bm.name, split)
    n = write_theorems(jsonl, rows)
    present = {t.key for t in rows}
    defects = [d for d in bm.known_defects if d.name in present]
    _write_json(
        meta,
        {
            "benchmark": bm.name,
            "split": split,
            "rows": n,
            "sha256": sha256_file(jsonl),
            "source_sha256": bm.sha256,
            "source_url": bm.url,
            "source_file": raw.name,
            "lean": bm.lean,
            "mathlib": bm.mathlib,
            "known_defects": [d.name for d in defects],
            "known_defect_reasons": {d.name: d.reason for d in defects},
            "notes": list(bm.notes),
            "created_by": f"burnqed {__version__}",
        },
    )
    log.info(
        "benchmark %s_%s: %d theorems → %s (%d known defective)",
        bm.name,
        split,
        n,
        jsonl,
        len(defects),
    )
    return jsonl


def build_proplogic_benchmark(
    *, out_dir: Path, cfg: ProplogicConfig, seed: int, splits: Sequence[str] | None = None,
    benchmark_seed: int | None = None,
) -> list[Path]:  # fmt: skip
    """Write ``proplogic_valid.jsonl``, ``proplogic_test.jsonl`` and ``proplogic_dev.jsonl`` (+
    meta): generated theorems that share no statement with the generated training theorems nor with
    each other (:mod:`burnqed.data.proplogic`).  Their hash is that of the file written (there is no
    upstream file).  ``seed`` draws the training theorems and the pool, ``benchmark_seed`` (None:
    ``seed``) the test and dev sets (params.yaml ``seeds``).  Returns the ``.jsonl`` paths."""
    from burnqed.data.proplogic import (
        DEV_SPLIT,
        HELD_OUT_SPLITS,
        development_split,
        held_out_splits,
    )

    written = []
    bseed = seed if benchmark_seed is None else benchmark_seed
    generated = held_out_splits(cfg, seed=seed, benchmark_seed=bseed)
    for split in _selected((*HELD_OUT_SPLITS, DEV_SPLIT), splits, "proplogic"):
        if split == DEV_SPLIT:
            generated[split] = development_split(
                cfg, seed=seed, benchmark_seed=bseed, held_out=generated
            )
        rows = generated[split]
        if not rows:
            raise BenchmarkError(f"proplogic: the generator produced no {split} theorems")
        jsonl, meta = benchmark_paths(Path(out_dir), "proplogic", split)
        n = write_theorems(jsonl, rows)
        _write_json(
            meta,
            {
                "benchmark": "proplogic",
                "split": split,
                "rows": n,
                "sha256": sha256_file(jsonl),
                "source_sha256": None,
                "source_url": None,
                "source_file": None,
                "lean": "burnqed propositional REPL (no Lean)",
                "mathlib": None,
                "known_defects": [],
                "known_defect_reasons": {},
                "notes": ["generated by burnqed.proplogic.generator"],
                # the benchmark seed only where it is its own (the bytes of every run before it)
                "generator": {
                    **asdict(cfg),
                    "seed": seed,
                    **({} if bseed == seed else {"benchmark_seed": bseed}),
                },
                "created_by": f"burnqed {__version__}",
            },
        )
        log.info("benchmark proplogic_%s: %d theorems → %s", split, n, jsonl)
        written.append(jsonl)
    return written
