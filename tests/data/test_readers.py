"""Each reader on a small fixture written in its dataset's exact format."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from burnqed.data.readers import (
    DEFAULT_HEADER,
    DataFormatError,
    read_goedel,
    read_lean_github,
    read_lean_workbook,
    read_lean_workbook_pairs,
    read_leandojo,
    read_minif2f,
    read_numina,
    split_lean_file,
)
from burnqed.data.schema import TACTIC_PAIR_SCHEMA

from .conftest import HEADER, lean_github_row, leandojo_theorem, write_lean_github, write_leandojo


def test_leandojo_directory_gives_pairs_from_all_split_files(tmp_path, caplog):
    caplog.set_level("INFO", logger="burnqed.data")
    split_dir = write_leandojo(
        tmp_path / "leandojo_benchmark_4",
        {
            "train": [
                leandojo_theorem(
                    "Nat.foo",
                    [
                        ("n m : ℕ\n⊢ n + m = m + n", "rw [Nat.add_comm]", "no goals"),
                    ],
                ),
                leandojo_theorem(
                    "Nat.bar",
                    [
                        ("a b : ℕ\nh : a = b\n⊢ b = a", "symm", "a b : ℕ\nh : a = b\n⊢ a = b"),
                        ("a b : ℕ\nh : a = b\n⊢ a = b", "exact h", "no goals"),
                    ],
                ),
            ],
            "val": [leandojo_theorem("Nat.baz", [("⊢ True", "trivial", "no goals")])],
        },
    )
    table = read_leandojo(split_dir, source="ld")
    assert table.schema == TACTIC_PAIR_SCHEMA
    rows = table.to_pylist()
    assert [r["theorem"] for r in rows] == ["ld:Nat.foo", "ld:Nat.bar", "ld:Nat.bar", "ld:Nat.baz"]
    assert [r["depth"] for r in rows] == [0, 0, 1, 0]
    assert rows[0]["tactic"] == "rw [Nat.add_comm]"
    assert rows[2] == {
        "source": "ld",
        "theorem": "ld:Nat.bar",
        "state_before": "a b : ℕ\nh : a = b\n⊢ a = b",
        "tactic": "exact h",
        "state_after": "no goals",
        "depth": 1,
    }
    assert "29dcec074de168ac2bf835a77ef68bbe069194c5" in caplog.text  # provenance logged


def test_leandojo_strips_premise_marks_and_names_a_bad_record(tmp_path):
    thm = leandojo_theorem("X.y", [("⊢ p", "exact <a>foo</a>", "no goals")])
    (tmp_path / "train.json").write_text(json.dumps([thm]))
    assert read_leandojo(tmp_path / "train.json").column("tactic").to_pylist() == ["exact foo"]
    del thm["traced_tactics"][0]["state_before"]
    (tmp_path / "train.json").write_text(
        json.dumps([{"full_name": "ok", "traced_tactics": []}, thm])
    )
    with pytest.raises(DataFormatError, match=r"train\.json: theorem 1 tactic 0.*state_before"):
        read_leandojo(tmp_path / "train.json")
    (tmp_path / "train.json").write_text('[{"full_name": "a",')
    with pytest.raises(DataFormatError, match=r"train\.json:1: not valid JSON"):
        read_leandojo(tmp_path)


def test_lean_github_groups_by_repo_and_name_with_depth_in_file_order(tmp_path):
    path = write_lean_github(
        tmp_path / "lean-github.parquet",
        [
            lean_github_row(
                "a/one", "foo", "⊢ p ∧ q", "constructor", "case left\n⊢ p\n\ncase right\n⊢ q"
            ),
            lean_github_row("b/two", "foo", "⊢ r", "simp", "no goals"),  # same name, other repo
            lean_github_row(
                "a/one", "foo", "case left\n⊢ p\n\ncase right\n⊢ q", "exact hp", "case right\n⊢ q"
            ),
            lean_github_row("a/one", "foo", "case right\n⊢ q", "exact hq", "no goals"),
        ],
    )
    table = read_lean_github(path, source="gh")
    assert table.schema == TACTIC_PAIR_SCHEMA
    assert table.column("depth").to_pylist() == [0, 0, 1, 2]
    assert set(table.column("theorem").to_pylist()) == {"gh:foo"}
    pq.write_table(pa.table({"full_name": ["x"], "tactic": ["simp"]}), tmp_path / "bad.parquet")
    with pytest.raises(DataFormatError, match=r"bad\.parquet: missing column"):
        read_lean_github(tmp_path / "bad.parquet")


@pytest.mark.parametrize("layout", ["json_array", "jsonl", "parquet"])
def test_lean_workbook_statements_and_proved_pairs(tmp_path, workbook_records, layout):
    if layout == "json_array":
        path = tmp_path / "lean_workbook.json"
        path.write_text(json.dumps(workbook_records, ensure_ascii=False), encoding="utf-8")
    elif layout == "jsonl":
        path = tmp_path / "lean_workbook.json"
        path.write_text(
            "\n".join(json.dumps(r, ensure_ascii=False) for r in workbook_records) + "\n",
            encoding="utf-8",
        )
    else:
        path = tmp_path / "wkbk.parquet"
        pq.write_table(pa.Table.from_pylist(workbook_records), path)
    theorems = read_lean_workbook(path)
    assert [t.name for t in theorems] == ["lean_workbook_7032", "lean_workbook_plus_49452"]
    first = theorems[0]
    assert (
        first.formal_statement
        == "theorem lean_workbook_7032 (a b : ℝ) : a ^ 2 + b ^ 2 ≥ 2 * a * b := by\n"
    )
    assert "sorry" not in first.formal_statement
    assert first.header == DEFAULT_HEADER
    assert first.informal_prefix == "/-- Prove that $a^2 + b^2 \\ge 2ab$. -/\n"
    assert first.proof == ("nlinarith [sq_nonneg (a - b)]",)
    assert theorems[1].proof is None  # status "open"
    pairs = read_lean_workbook_pairs(path, source="wb").to_pylist()
    assert pairs == [
        {
            "source": "wb",
            "theorem": "wb:lean_workbook_7032",
            "state_before": "a b : ℝ\n⊢ a ^ 2 + b ^ 2 ≥ 2 * a * b",
            "tactic": "nlinarith [sq_nonneg (a - b)]",
            "state_after": "no goals",
            "depth": 0,
        }
    ]


def test_lean_workbook_names_the_bad_line(tmp_path, workbook_records):
    path = tmp_path / "lw.jsonl"
    path.write_text(json.dumps(workbook_records[0]) + "\n" + json.dumps({"id": "x"}) + "\n")
    with pytest.raises(
        DataFormatError, match=r"lw\.jsonl:2: missing or non-string key\(s\) \['formal_statement'\]"
    ):
        read_lean_workbook(path)


def test_goedel_whole_proofs_split_into_header_statement_proof(tmp_path):
    rows = [
        {
            "problem_id": "lean_workbook_10009",
            "full_proof": HEADER + "/-- Show that $a^2 \\ge 0$. -/\n"
            "theorem lean_workbook_10009 (a : ℝ) : a ^ 2 ≥ 0 := by\n"
            "  have h : 0 ≤ a ^ 2 := by\n    positivity\n  linarith\n",
        },
        # Proof on the `by` line, and an auxiliary lemma before the main theorem.
        {
            "problem_id": "lean_workbook_plus_1",
            "full_proof": HEADER + "lemma aux (x : ℝ) : 0 ≤ x ^ 2 := by positivity\n\n"
            "theorem lean_workbook_plus_1 (x : ℝ) : 0 ≤ x ^ 2 + 1 := by nlinarith [aux x]\n",
        },
        # A term-mode proof (a later lemma's `:= by` is not its): no tactic proof, skipped.
        {
            "problem_id": "lean_workbook_2",
            "full_proof": HEADER
            + "theorem lean_workbook_2 : 1 = 1 := rfl\n\nlemma later : 2 = 2 := by\n  rfl\n",
        },
    ]
    path = tmp_path / "goedel.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    theorems = read_goedel(path)
    assert [t.name for t in theorems] == ["lean_workbook_10009", "lean_workbook_plus_1"]
    a, b = theorems
    assert a.header == HEADER
    assert a.informal_prefix == "/-- Show that $a^2 \\ge 0$. -/\n"
    assert a.formal_statement == "theorem lean_workbook_10009 (a : ℝ) : a ^ 2 ≥ 0 := by\n"
    assert a.proof == ("have h : 0 ≤ a ^ 2 := by\n  positivity\nlinarith",)
    # Reassembling the parts gives back the original file.
    assert a.lean_file(a.proof) == rows[0]["full_proof"]
    assert b.formal_statement == "theorem lean_workbook_plus_1 (x : ℝ) : 0 ≤ x ^ 2 + 1 := by\n"
    assert b.proof == ("nlinarith [aux x]",)
    assert b.header.endswith("lemma aux (x : ℝ) : 0 ≤ x ^ 2 := by positivity\n\n")


def test_numina_statements_with_complete_ground_truth(tmp_path):
    stmt = HEADER + "theorem algebra_12 (x : ℝ) (h : 2 * x = 4) : x = 2 := by sorry"
    rows = [
        {
            "uuid": "0f3a-1",
            "problem": "Solve 2x = 4.",
            "formal_statement": stmt,
            "formal_proof": "",
            "formal_ground_truth": stmt.replace("by sorry", "by\n  linarith"),
            "ground_truth_type": "complete",
        },
        {
            "uuid": "0f3a-2",
            "problem": "p",
            "formal_statement": stmt.replace("algebra_12", "algebra_13"),
            "formal_proof": "",
            "formal_ground_truth": "",
            "ground_truth_type": "statement",
        },
    ]
    path = tmp_path / "numina.jsonl"
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    a, b = read_numina(path)
    assert (a.name, b.name) == ("0f3a-1", "0f3a-2")
    assert a.header == HEADER
    assert a.formal_statement == "theorem algebra_12 (x : ℝ) (h : 2 * x = 4) : x = 2 := by\n"
    assert a.proof == ("linarith",) and b.proof is None
    path.write_text(
        json.dumps({"uuid": "z", "formal_statement": "import Mathlib\n-- nothing here"}) + "\n"
    )
    with pytest.raises(DataFormatError, match=r"numina\.jsonl:1 \(z\): no `theorem`"):
        read_numina(path)


def test_minif2f_reader_on_the_real_file(minif2f_path):
    theorems = read_minif2f(minif2f_path)
    assert len(theorems) == 488
    assert [t.split for t in theorems].count("valid") == 244
    first = json.loads(minif2f_path.open(encoding="utf-8").readline())
    assert theorems[0].to_json() == first  # keys and values exactly as in the file


def test_minif2f_reader_rejects_other_keys_and_duplicates(tmp_path):
    rec = {
        "name": "t",
        "split": "test",
        "informal_prefix": "",
        "formal_statement": "theorem t : True := by\n",
        "goal": "⊢ True",
        "header": DEFAULT_HEADER,
    }
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "extra": 1}) + "\n")
    with pytest.raises(DataFormatError, match=r"m\.jsonl:2: unexpected key\(s\) \['extra'\]"):
        read_minif2f(path)
    path.write_text(json.dumps(rec) + "\n\n" + json.dumps(rec) + "\n")
    with pytest.raises(DataFormatError, match=r"m\.jsonl:3: duplicate name 't'"):
        read_minif2f(path)


def test_split_lean_file_keeps_a_separated_comment_in_the_header():
    text = (
        "import Mathlib\n/-- doc of something else -/\ndef f := 1\n\ntheorem t : f = 1 := by\n  rfl"
    )
    parts = split_lean_file(text)
    assert parts.informal_prefix == ""
    assert parts.header == "import Mathlib\n/-- doc of something else -/\ndef f := 1\n\n"
    assert parts.proof == "rfl"
