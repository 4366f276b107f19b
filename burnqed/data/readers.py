"""Readers for the public Lean 4 data formats (``reference/datasets.md``): local files in, tactic
pairs (:data:`~burnqed.data.schema.TACTIC_PAIR_SCHEMA`) or :class:`~burnqed.theorems.Theorem`
statements out.

Readers never touch the network: the user downloads a dataset, ``params.yaml`` names the local copy.
Malformed input raises :class:`DataFormatError` naming the file and the line or record.

=================  ==========================================  ===============  ==================
format             input                                       tactic pairs     statements
=================  ==========================================  ===============  ==================
``leandojo``       Benchmark 4 dir of ``{train,val,test}.json``  yes              no (no statements)
``lean_github``    ``lean-github.parquet`` (one row per tactic)  yes              no
``lean_workbook``  JSON array, JSONL or parquet                proved records   yes
``goedel``         parquet/JSONL of ``problem_id, full_proof``  no (no states)   yes, with proofs
``numina``         parquet/JSONL of NuminaMath-LEAN records     no               yes
``deepseek``       DeepSeek ``minif2f.jsonl``/``proofnet.jsonl``  no               yes
``goedel_v2``      Goedel-Prover-V2 ``dataset/*.jsonl``         no               yes
=================  ==========================================  ===============  ==================

(``minif2f`` is another name of ``deepseek``; it also reads the miniF2F-style files other provers
publish, whose rows may carry only ``name``, ``header`` and ``formal_statement``.)  Statement readers give every theorem a ``key``
(:func:`burnqed.theorems.assign_keys`: the name, qualified by ``@<split>:<line>`` when it repeats in
the file) and keep the Lean declaration's own name in ``name``; a trailing ``sorry`` is stripped.

Pair tables name each theorem ``"<source>:<name>"`` so identical names from two sources never merge.

Example::

    >>> parts = split_lean_file("import Mathlib\\n\\ntheorem t (x : ℕ) : x = x := by\\n  rfl\\n")
    >>> parts.header, parts.formal_statement, parts.proof
    ('import Mathlib\\n\\n', 'theorem t (x : ℕ) : x = x := by\\n', 'rfl')
    >>> read_minif2f("minif2f.jsonl")[0].split                    # doctest: +SKIP
    'valid'
"""

from __future__ import annotations

import json
import logging
import re
import textwrap
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from burnqed.data.schema import TACTIC_PAIR_SCHEMA
from burnqed.theorems import (
    Theorem,
    TheoremFileError,
    assign_keys,
    jsonl_objects,
    strip_sorry,
)

log = logging.getLogger(__name__)

# DeepSeek-Prover-V1.5's LEAN4_DEFAULT_HEADER (prover/utils.py), also the header of every miniF2F
# row: the header of the Lean Workbook / Goedel lineage when a record carries none of its own.
DEFAULT_HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\n"
    "open BigOperators Real Nat Topology Rat\n\n"
)

# The DeepSeek miniF2F file's keys, exactly and in this order (datasets.md §2.2).
MINIF2F_KEYS = ("name", "split", "informal_prefix", "formal_statement", "goal", "header")

LEANDOJO_SPLIT_FILES = ("train.json", "val.json", "test.json")


class DataFormatError(ValueError):
    """Input that does not have the documented format; the message names the file and record."""


# --------------------------------------------------------------------------------------------
# Generic record loading


def _iter_json_records(path: Path) -> Iterator[tuple[str, Any]]:
    """``(where, record)`` for a JSON array file or a JSONL file (sniffed from the first byte)."""
    with path.open(encoding="utf-8") as f:
        head = f.read(4096).lstrip()
    if head.startswith("["):
        try:
            records = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
        for i, rec in enumerate(records):
            yield f"{path}: record {i}", rec
        return
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataFormatError(f"{path}:{lineno}: not JSON ({e.msg})") from None
            yield f"{path}:{lineno}", rec


def _iter_records(path: Path) -> Iterator[tuple[str, Any]]:
    """Records of a parquet, JSON-array or JSONL file, each with a ``where`` for error messages."""
    if not path.exists():
        raise DataFormatError(f"{path}: no such file")
    if path.suffix == ".parquet":
        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as e:
            raise DataFormatError(f"{path}: not a readable parquet file ({e})") from None
        for i, rec in enumerate(table.to_pylist()):
            yield f"{path}: row {i}", rec
        return
    yield from _iter_json_records(path)


def _require_str(rec: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(rec, dict):
        raise DataFormatError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    bad = [k for k in keys if not isinstance(rec.get(k), str)]
    if bad:
        raise DataFormatError(f"{where}: missing or non-string key(s) {bad}")


def _pairs_table(rows: dict[str, list]) -> pa.Table:
    return pa.table(rows, schema=TACTIC_PAIR_SCHEMA)


def _empty_columns() -> dict[str, list]:
    return {name: [] for name in TACTIC_PAIR_SCHEMA.names}


# --------------------------------------------------------------------------------------------
# Splitting a whole Lean file: header / docstring / statement / proof

_DECL = re.compile(r"^(?:theorem|lemma)\s+([^\s:({\[]+)", re.MULTILINE)
_BY = re.compile(r":=\s*by\b")


@dataclass(frozen=True)
class LeanFileParts:
    header: str  # everything before the declaration (imports, options, opens)
    informal_prefix: str  # the declaration's "/-- … -/\n" docstring, or ""
    formal_statement: str  # "theorem <name> … := by\n"
    proof: str | None  # the tactic block, dedented; None when it is only `sorry`
    decl_name: str  # the name the Lean declaration itself carries


def split_lean_file(text: str, *, name: str | None = None, where: str = "text") -> LeanFileParts:
    """Split a whole Lean file into header, docstring, statement and tactic proof.

    The declaration is the ``theorem``/``lemma`` called ``name`` when there is one, else the first.
    Only tactic proofs (``:= by``) are understood; anything else raises :class:`DataFormatError`.
    """
    decls = list(_DECL.finditer(text))
    if not decls:
        raise DataFormatError(f"{where}: no `theorem`/`lemma` declaration at the start of a line")
    decl = next((m for m in decls if m.group(1) == name), decls[0])
    # The declaration extends to the next one: its `:= by` and its proof lie before that.
    end = next((m.start() for m in decls if m.start() > decl.start()), len(text))
    by = _BY.search(text, decl.start(), end)
    if by is None:
        raise DataFormatError(
            f"{where}: declaration {decl.group(1)!r} has no tactic proof (`:= by`)"
        )
    before = text[: decl.start()]
    header, informal_prefix = before, ""
    # A docstring belongs to the declaration only if nothing but whitespace separates them.
    doc_start = before.rfind("/--")
    doc_end = before.find("-/", doc_start + 3) if doc_start >= 0 else -1
    if doc_end >= 0 and not before[doc_end + 2 :].strip():
        header = before[:doc_start]
        informal_prefix = before[doc_start:].rstrip() + "\n"
    statement = text[decl.start() : by.end()] + "\n"
    first_line, _, rest = text[by.end() : end].partition("\n")
    body = textwrap.dedent(rest).strip()
    first_line = first_line.strip()
    proof = (first_line + ("\n" + body if body else "")) if first_line else body
    return LeanFileParts(
        header, informal_prefix, statement, None if proof in ("", "sorry") else proof, decl.group(1)
    )


# --------------------------------------------------------------------------------------------
# Tactic-pair readers

_PREMISE_MARK = re.compile(r"</?a>")


def read_leandojo(path: str | Path, *, source: str = "leandojo") -> pa.Table:
    """LeanDojo Benchmark 4: ``path`` is a split directory (``random/``, ``novel_premises/``)
    holding ``train.json``/``val.json``/``test.json`` (each one JSON array of theorems), or one
    such file.

    All files are read: burnqed re-splits by theorem name itself.  ``depth`` is the tactic's index
    in ``traced_tactics``; premise marks ``<a>…</a>`` are stripped if a tactic carries them.
    """
    path = Path(path)
    if path.is_dir():
        files = [path / f for f in LEANDOJO_SPLIT_FILES if (path / f).exists()]
        if not files:
            raise DataFormatError(f"{path}: no {'/'.join(LEANDOJO_SPLIT_FILES)} in this directory")
        _log_leandojo_metadata(path)
    elif path.exists():
        files = [path]
    else:
        raise DataFormatError(f"{path}: no such file or directory")
    cols = _empty_columns()
    for file in files:
        try:
            theorems = json.loads(file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{file}:{e.lineno}: not valid JSON ({e.msg})") from None
        if not isinstance(theorems, list):
            raise DataFormatError(f"{file}: expected one JSON array of theorems")
        for i, thm in enumerate(theorems):
            where = f"{file}: theorem {i}"
            _require_str(thm, ("full_name",), where)
            tactics = thm.get("traced_tactics")
            if not isinstance(tactics, list):
                raise DataFormatError(
                    f"{where} ({thm['full_name']}): `traced_tactics` is not a list"
                )
            for depth, tac in enumerate(tactics):
                _require_str(
                    tac, ("tactic", "state_before", "state_after"), f"{where} tactic {depth}"
                )
                cols["source"].append(source)
                cols["theorem"].append(f"{source}:{thm['full_name']}")
                cols["state_before"].append(tac["state_before"])
                cols["tactic"].append(_PREMISE_MARK.sub("", tac["tactic"]))
                cols["state_after"].append(tac["state_after"])
                cols["depth"].append(depth)
        log.info("%s: %d theorems from %s", source, len(theorems), file)
    return _pairs_table(cols)


def _log_leandojo_metadata(split_dir: Path) -> None:
    """Log which mathlib4 commit the benchmark was traced from (``metadata.json``, one level up)."""
    for meta in (split_dir / "metadata.json", split_dir.parent / "metadata.json"):
        if meta.exists():
            try:
                repo = json.loads(meta.read_text(encoding="utf-8")).get("from_repo", {})
            except (json.JSONDecodeError, AttributeError):
                log.warning("%s: unreadable metadata.json", meta)
                return
            log.info("LeanDojo benchmark traced from %s @ %s", repo.get("url"), repo.get("commit"))
            return


LEAN_GITHUB_COLUMNS = ("url", "file_path", "full_name", "tactic", "state_before", "state_after")


def read_lean_github(path: str | Path, *, source: str = "lean_github") -> pa.Table:
    """internlm/Lean-Github parquet: LeanDojo's layout flattened to one row per tactic.

    Rows are grouped into theorems by ``(url, file_path, full_name)`` — 100+ repositories share
    short names — and ``depth`` is a row's position within its theorem, in file order.
    """
    path = Path(path)
    try:
        table = pq.read_table(path)
    except FileNotFoundError:
        raise DataFormatError(f"{path}: no such file") from None
    except (pa.ArrowInvalid, OSError) as e:
        raise DataFormatError(f"{path}: not a readable parquet file ({e})") from None
    missing = [c for c in LEAN_GITHUB_COLUMNS if c not in table.column_names]
    if missing:
        raise DataFormatError(f"{path}: missing column(s) {missing} (have {table.column_names})")
    cols = _empty_columns()
    next_depth: dict[tuple[str, str, str], int] = {}
    data = {c: table.column(c).to_pylist() for c in LEAN_GITHUB_COLUMNS}
    for i in range(table.num_rows):
        row = {c: data[c][i] for c in LEAN_GITHUB_COLUMNS}
        bad = [c for c in ("full_name", "tactic", "state_before", "state_after") if row[c] is None]
        if bad:
            raise DataFormatError(f"{path}: row {i}: null value(s) in {bad}")
        key = (row["url"] or "", row["file_path"] or "", row["full_name"])
        depth = next_depth.get(key, 0)
        next_depth[key] = depth + 1
        cols["source"].append(source)
        cols["theorem"].append(f"{source}:{row['full_name']}")
        cols["state_before"].append(row["state_before"])
        cols["tactic"].append(_PREMISE_MARK.sub("", row["tactic"]))
        cols["state_after"].append(row["state_after"])
        cols["depth"].append(depth)
    log.info(
        "%s: %d tactic rows, %d theorems from %s", source, table.num_rows, len(next_depth), path
    )
    return _pairs_table(cols)


# --------------------------------------------------------------------------------------------
# Lean Workbook: statements, and pairs from proved records


def _workbook_records(path: Path) -> Iterator[tuple[str, dict]]:
    for where, rec in _iter_records(path):
        _require_str(rec, ("id", "formal_statement"), where)
        yield where, rec


def _workbook_proof(rec: dict) -> str | None:
    """The found proof of a proved record (``tactic`` in the JSON, ``proof`` in other dumps)."""
    if rec.get("status") not in (None, "proved"):
        return None
    for key in ("tactic", "proof"):
        value = rec.get(key)
        if isinstance(value, str) and value.strip() and value.strip() != "sorry":
            return value
    return None


def read_lean_workbook(path: str | Path) -> list[Theorem]:
    """internlm/Lean-Workbook records (JSON array, JSONL or parquet) as theorem statements.

    ``formal_statement`` ends ``:= by sorry``; the ``sorry`` is cut so the statement ends
    ``:= by\\n`` like miniF2F's.  Proved records keep their proof; the natural-language statement
    becomes the docstring.
    """
    path = Path(path)
    out = []
    for where, rec in _workbook_records(path):
        text = rec["formal_statement"]
        parts = split_lean_file(text, where=f"{where} ({rec['id']})")
        nl = rec.get("natural_language_statement")
        prefix = parts.informal_prefix or (
            f"/-- {nl.strip()} -/\n" if isinstance(nl, str) and nl.strip() else ""
        )
        proof = _workbook_proof(rec)
        out.append(
            Theorem(
                name=parts.decl_name,
                key=rec["id"],
                formal_statement=parts.formal_statement,
                header=parts.header or DEFAULT_HEADER,
                informal_prefix=prefix,
                split=rec.get("split") or "",
                proof=(proof.strip(),) if proof else None,
            )
        )
    log.info("lean_workbook: %d statements from %s", len(out), path)
    return out


def read_lean_workbook_pairs(path: str | Path, *, source: str = "lean_workbook") -> pa.Table:
    """Pairs of the Lean Workbook records that are proved and carry ``state_before``/``state_after``
    (the whole found proof is one step from the initial state, ``depth`` 0)."""
    path = Path(path)
    cols = _empty_columns()
    for _where, rec in _workbook_records(path):
        proof = _workbook_proof(rec)
        before, after = rec.get("state_before"), rec.get("state_after")
        if proof is None or not isinstance(before, str) or not isinstance(after, str):
            continue
        cols["source"].append(source)
        cols["theorem"].append(f"{source}:{rec['id']}")
        cols["state_before"].append(before)
        cols["tactic"].append(proof.strip())
        cols["state_after"].append(after)
        cols["depth"].append(0)
    log.info("%s: %d proved records with states in %s", source, len(cols["source"]), path)
    return _pairs_table(cols)


# --------------------------------------------------------------------------------------------
# Whole-proof and statement-only sources


def read_goedel(path: str | Path) -> list[Theorem]:
    """Goedel-LM/Lean-workbook-proofs (``problem_id``, ``full_proof``: a whole Lean file) as
    statements with their proofs.  Records without a tactic proof are skipped (counted in a
    warning)."""
    path = Path(path)
    out, skipped = [], 0
    for where, rec in _iter_records(path):
        _require_str(rec, ("problem_id", "full_proof"), where)
        try:
            parts = split_lean_file(rec["full_proof"], name=rec["problem_id"], where=where)
        except DataFormatError as e:
            skipped += 1
            log.debug("skipping %s", e)
            continue
        out.append(
            Theorem(
                name=parts.decl_name,
                key=rec["problem_id"],
                formal_statement=parts.formal_statement,
                header=parts.header or DEFAULT_HEADER,
                informal_prefix=parts.informal_prefix,
                proof=(parts.proof,) if parts.proof else None,
            )
        )
    if skipped:
        log.warning(
            "goedel: skipped %d record(s) of %s without a `:= by` tactic proof", skipped, path
        )
    log.info("goedel: %d statements from %s", len(out), path)
    return out


def read_numina(path: str | Path) -> list[Theorem]:
    """AI-MO/NuminaMath-LEAN records as statements, keyed by ``uuid`` (the Lean declaration keeps
    its own name).  A ``complete`` ``formal_ground_truth`` supplies the proof."""
    path = Path(path)
    out = []
    for where, rec in _iter_records(path):
        _require_str(rec, ("uuid", "formal_statement"), where)
        parts = split_lean_file(rec["formal_statement"], where=f"{where} ({rec['uuid']})")
        proof = None
        truth = rec.get("formal_ground_truth")
        if rec.get("ground_truth_type") == "complete" and isinstance(truth, str) and truth.strip():
            try:
                proof = split_lean_file(truth, name=parts.decl_name, where=where).proof
            except DataFormatError as e:
                log.warning("numina: ignoring the ground truth of %s", e)
        out.append(
            Theorem(
                name=parts.decl_name,
                key=rec["uuid"],
                formal_statement=parts.formal_statement,
                header=parts.header or DEFAULT_HEADER,
                informal_prefix=parts.informal_prefix,
                proof=(proof,) if proof else None,
            )
        )
    log.info("numina: %d statements from %s", len(out), path)
    return out


def _jsonl_rows(path: Path) -> Iterator[tuple[int, dict]]:
    """``(line, record)`` of a JSONL file of objects; a bad line raises naming it."""
    if not path.is_file():
        raise DataFormatError(f"{path}: no such file")
    yield from jsonl_objects(path, error=DataFormatError)


def _keyed(rows: list[tuple[int, Theorem]], path: Path) -> list[Theorem]:
    try:
        return assign_keys(rows, where=path)
    except TheoremFileError as e:
        raise DataFormatError(str(e)) from None


def _log_ignored(path: Path, fmt: str, ignored: set[str]) -> None:
    if ignored:
        log.info(
            "%s: %s format; ignoring key(s) %s (not used by burnqed)", path, fmt, sorted(ignored)
        )


def _missing(rec: dict, keys: tuple[str, ...]) -> list[str]:
    return [k for k in keys if not isinstance(rec.get(k), str)]


# Leading header lines of a statement that is a whole file; the last declaration of a statement.
_HEADER_LINE = re.compile(r"(?:[ \t]*(?:import|set_option|open)\b[^\n]*\n|[ \t]*\n)*")
_LAST_DECL = re.compile(r"^(?:theorem|lemma)\s+([^\s:({\[]+)", re.MULTILINE)
_IMPORT_FIRST = re.compile(r"\s*import\b")


def read_deepseek(path: str | Path) -> list[Theorem]:
    """DeepSeek-Prover-V1.5's statement files (``datasets/minif2f.jsonl``, ``proofnet.jsonl``, the
    few-shot files) and the many miniF2F-style files other provers publish: keys ``name, split,
    informal_prefix, formal_statement, goal, header`` (datasets.md §2.2), of which only a
    statement is required.

    - ``formal_statement`` (a non-empty string) is required; a trailing ``sorry`` is stripped.
    - ``name`` is the Lean name; a row without one takes the name of the statement's
      ``theorem``/``lemma``.  A row with neither statement nor name raises :class:`DataFormatError`
      naming the file, line and what is missing.
    - A row without ``header`` gets :data:`DEFAULT_HEADER` (DeepSeek's own code does the same;
      logged once) — unless its statement is a whole file that starts with ``import`` lines: then
      its leading ``import``/``set_option``/``open`` lines are the header.  ProofNet's per-row
      headers — imports, ``open``s and the definitions its statements use — are kept as given.
    - ``split``, ``informal_prefix`` and ``goal`` default to ``""``.
    - Other keys (the few-shot file's ``formal_proof``, tags, informal statements) are ignored with
      one log line.  Names may repeat (ProofNet): keys are qualified as
      :func:`burnqed.theorems.assign_keys` describes.
    """
    path = Path(path)
    rows: list[tuple[int, Theorem]] = []
    ignored: set[str] = set()
    defaulted = 0
    for lineno, rec in _jsonl_rows(path):
        where = f"{path}:{lineno}"
        statement = rec.get("formal_statement")
        if not isinstance(statement, str) or not statement.strip():
            raise DataFormatError(
                f"{where}: no statement: `formal_statement` is missing, empty or not a string "
                f"(the record has {sorted(rec)})"
            )
        for k in ("name", "split", "informal_prefix", "goal", "header"):
            if k in rec and not isinstance(rec[k], str):
                raise DataFormatError(f"{where}: key {k!r} is not a string")
        statement = strip_sorry(statement)
        header = rec.get("header")
        if header is None and _IMPORT_FIRST.match(statement):
            lead = _HEADER_LINE.match(statement).end()  # a whole file: its header is its own
            header, statement = statement[:lead], statement[lead:]
        if header is None:
            defaulted += 1
            header = DEFAULT_HEADER
        decls = _LAST_DECL.findall(statement)
        name = rec.get("name") or (decls[-1] if decls else "")
        if not name:
            raise DataFormatError(
                f"{where}: no Lean name: no `name` key and no `theorem <name>` in "
                f"`formal_statement` (the record has {sorted(rec)})"
            )
        ignored |= set(rec) - set(MINIF2F_KEYS)
        theorem = Theorem(
            name=name,
            split=rec.get("split", ""),
            informal_prefix=rec.get("informal_prefix", ""),
            formal_statement=statement,
            goal=rec.get("goal", ""),
            header=header,
        )
        rows.append((lineno, theorem))
    if defaulted:
        log.info(
            "%s: %d row(s) without `header`: given DeepSeek's default header (%r)",
            path,
            defaulted,
            DEFAULT_HEADER,
        )
    _log_ignored(path, "DeepSeek", ignored)
    return _keyed(rows, path)


read_minif2f = read_deepseek  # the name it had when miniF2F was its only file

# Goedel-Prover-V2's evaluation files (dataset/minif2f.jsonl, dataset/MOBench.jsonl).
GOEDEL_V2_KEYS = ("name", "formal_statement", "lean4_code")
_SORRY_END = re.compile(r"\s*\bsorry\s*$")


def _ws(text: str) -> str:
    return " ".join(text.split())


def read_goedel_v2(path: str | Path) -> list[Theorem]:
    """Goedel-Prover-V2's evaluation format: keys ``name, problem_id, informal_prefix,
    formal_statement, split, lean4_code`` (MOBench adds ``header, solved, tags, category``).

    ``lean4_code`` is the whole file up to the proof: header, informal prefix, statement,
    ``sorry``.  ``formal_statement`` ends ``:= by sorry`` (MOBench) or ``:= by\\n`` (miniF2F), may
    carry a preamble before ``theorem`` (``def``, ``abbrev``, ``noncomputable abbrev solution : ℝ :=
    …``, docstrings) — kept, it is the statement — and in the miniF2F file begins with the header
    itself.  So: the statement is ``formal_statement`` without its trailing ``sorry`` and without
    leading ``import``/``set_option``/``open`` lines (those join the header); ``lean4_code`` must end
    with it up to whitespace and a trailing ``sorry`` (else the row is an error naming it); the
    header is what precedes it in ``lean4_code`` less the informal prefix.  ``name`` is the key;
    the Lean name is the last ``theorem``/``lemma`` of the statement.
    """
    path = Path(path)
    rows: list[tuple[int, Theorem]] = []
    ignored: set[str] = set()
    for lineno, rec in _jsonl_rows(path):
        where = f"{path}:{lineno}"
        if missing := _missing(rec, GOEDEL_V2_KEYS):
            hint = (
                "; rows of `name`, `header`, `formal_statement` read as format `deepseek`"
                if missing == ["lean4_code"]
                else ""
            )
            raise DataFormatError(
                f"{where}: not a Goedel-Prover-V2 statement: missing or non-string key(s) "
                f"{missing} (the record has {sorted(rec)}){hint}"
            )
        ignored |= set(rec) - {*GOEDEL_V2_KEYS, "informal_prefix", "split", "problem_id"}
        statement = strip_sorry(rec["formal_statement"])
        lead = _HEADER_LINE.match(statement).end()
        statement = statement[lead:]  # header lines inside the statement join the header
        prefix = rec.get("informal_prefix") if isinstance(rec.get("informal_prefix"), str) else ""
        if prefix.strip() and statement.lstrip().startswith(prefix.strip()):
            # the docstring is inside formal_statement (Goedel's miniF2F): keep it in place
            prefix = ""
        code = _SORRY_END.sub("", rec["lean4_code"])
        before = _before_statement(code, statement)
        if before is None:
            raise DataFormatError(
                f"{where} ({rec['name']}): `lean4_code` does not end with `formal_statement` "
                f"(up to whitespace and a trailing `sorry`)"
            )
        header = before
        if prefix.strip():
            at = before.rfind(prefix.strip())
            if at < 0 or before[at + len(prefix.strip()) :].strip():
                raise DataFormatError(
                    f"{where} ({rec['name']}): `informal_prefix` is not what precedes the "
                    f"statement in `lean4_code`"
                )
            header, prefix = before[:at], before[at:].rstrip() + "\n"
        decls = _LAST_DECL.findall(statement)
        if not decls:
            raise DataFormatError(f"{where} ({rec['name']}): no `theorem`/`lemma` in the statement")
        theorem = Theorem(
            name=decls[-1],
            key=rec["name"],
            formal_statement=statement,
            header=header,
            informal_prefix=prefix,
            split=rec.get("split") or "",
        )
        rows.append((lineno, theorem))
    _log_ignored(path, "Goedel-Prover-V2", ignored)
    out = _keyed(rows, path)
    log.info("goedel_v2: %d statements from %s", len(out), path)
    return out


def _before_statement(code: str, statement: str) -> str | None:
    """What precedes ``statement`` in ``code`` when ``code`` ends with it up to whitespace (the
    statement's first character starts it), else None."""
    body = statement.strip()
    if not body:
        return None
    at = code.rfind(body)
    if at >= 0 and not code[at + len(body) :].strip():
        return code[:at]
    want = _ws(body)
    at = code.rfind(body[0])
    while at >= 0:
        if _ws(code[at:]) == want:
            return code[:at]
        at = code.rfind(body[0], 0, at)
    return None


# --------------------------------------------------------------------------------------------
# Formats by name (the `format` of a `data.sources` entry)

PairReader = Callable[..., pa.Table]
StatementReader = Callable[[str | Path], list[Theorem]]

PAIR_READERS: Mapping[str, PairReader] = {
    "leandojo": read_leandojo,
    "lean_github": read_lean_github,
    "lean_workbook": read_lean_workbook_pairs,
}
STATEMENT_READERS: Mapping[str, StatementReader] = {
    "lean_workbook": read_lean_workbook,
    "goedel": read_goedel,
    "numina": read_numina,
    "deepseek": read_deepseek,
    "minif2f": read_deepseek,
    "goedel_v2": read_goedel_v2,
}
