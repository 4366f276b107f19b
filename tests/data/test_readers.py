"""Each reader on a small fixture written in its dataset's exact format."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from burnqed.config import LeanConfig
from burnqed.data.readers import (
    DEFAULT_HEADER,
    DataFormatError,
    read_goedel,
    read_goedel_v2,
    read_lean_github,
    read_lean_workbook,
    read_lean_workbook_pairs,
    read_leandojo,
    read_minif2f,
    read_numina,
    split_lean_file,
)
from burnqed.data.schema import TACTIC_PAIR_SCHEMA
from burnqed.lean.guard import TacticGuard
from burnqed.lean.verify import (
    proof_file,
    split_proof_file,
    theorem_file,
    verify_file,
    verify_proof,
)
from burnqed.theorems import TheoremFileError, read_theorems, write_theorems
from tests.conftest import REPO

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
    assert (a.key, b.key) == ("0f3a-1", "0f3a-2")  # the record's id keys it
    assert (a.name, b.name) == ("algebra_12", "algebra_13")  # `#print axioms` needs the Lean name
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
    assert all(t.key == t.name for t in theorems)  # no name repeats: keys are the names


DS_REC = {
    "name": "t",
    "split": "test",
    "informal_prefix": "",
    "formal_statement": "theorem t : True := by\n",
    "goal": "⊢ True",
    "header": DEFAULT_HEADER,
}


def test_deepseek_reader_tolerates_missing_goal_header_and_extra_keys(tmp_path, caplog):
    few_shot = {k: v for k, v in DS_REC.items() if k not in ("goal", "header")}
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(DS_REC) + "\n" + json.dumps({**few_shot, "name": "u",
                    "formal_statement": "theorem u : True := by sorry", "formal_proof": "trivial"}) + "\n")  # fmt: skip
    with caplog.at_level("INFO", logger="burnqed.data.readers"):
        t, u = read_minif2f(path)
    assert t.goal == "⊢ True" and u.goal == ""
    assert u.header == DEFAULT_HEADER and u.formal_statement == "theorem u : True := by\n"
    assert "1 row(s) without `header`: given DeepSeek's default header" in caplog.text
    assert "ignoring key(s) ['formal_proof']" in caplog.text
    path.write_text(json.dumps({"id": 1, "statement": "x"}) + "\n")
    with pytest.raises(DataFormatError, match=r"m\.jsonl:1: no statement: `formal_statement` is "
                       r"missing, empty or not a string \(the record has \['id', 'statement'\]\)"):  # fmt: skip
        read_minif2f(path)


def test_repeated_names_get_keys_and_repeated_keys_are_errors(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(DS_REC) + "\n\n" + json.dumps({**DS_REC, "split": "valid"}) + "\n")
    a, b = read_minif2f(path)
    assert (a.key, b.key) == ("t@test:1", "t@valid:3") and a.name == b.name == "t"
    # Written and read back, the keys are kept; two records with one key name both lines.
    out = tmp_path / "out.jsonl"
    write_theorems(out, [a, b])
    assert [t.key for t in read_theorems(out)] == ["t@test:1", "t@valid:3"]
    out.write_text(json.dumps(a.to_json()) + "\n" + json.dumps(a.to_json()) + "\n")
    with pytest.raises(TheoremFileError, match=r"out\.jsonl:2: duplicate theorem key "
                       r"'t@test:1' \(also at line 1\)"):  # fmt: skip
        list(read_theorems(out))


PROOFNET = REPO.parent / "shared" / "data" / "proofnet" / "proofnet.jsonl"


def test_proofnet_as_published(tmp_path):
    """DeepSeek's ProofNet: 371 rows, 19 names repeated (41 rows), per-row headers."""
    theorems = read_minif2f(PROOFNET)
    assert len(theorems) == 371
    keys = [t.key for t in theorems]
    assert len(set(keys)) == 371 and keys == [t.key for t in read_minif2f(PROOFNET)]
    rows = [json.loads(line) for line in PROOFNET.open(encoding="utf-8")]
    counts = Counter(r["name"] for r in rows)
    repeated = {n for n, c in counts.items() if c > 1}
    assert len(repeated) == 19 and sum(counts[n] for n in repeated) == 41
    for i, (t, r) in enumerate(zip(theorems, rows, strict=True)):
        assert t.name == r["name"] and t.header == r["header"]  # each with its own header
        assert t.key == (
            f"{r['name']}@{r['split']}:{i + 1}" if r["name"] in repeated else r["name"]
        )
    with_k = next(t for t in theorems if "def K : Set ℝ" in t.header)
    file = proof_file(with_k, ["sorry"])
    assert file.index("def K : Set ℝ") < file.index(f"theorem {with_k.name}")
    assert "import" not in file and file.endswith(
        f":= by\n  sorry\n\n#print axioms {with_k.name}\n"
    )


# Small fixtures in the shape of Goedel-Prover-V2's dataset/MOBench.jsonl and dataset/minif2f.jsonl
# (keys, header inside lean4_code, `:= by sorry` / `:= by\n` endings, preambles); our own text.
GV2_HEADER = "\nimport Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen Real\n"
GV2_DOC = "/-!\n# A made-up answer problem\n\nFind the least $M$.\n-/"
GV2_STMT = (
    "/-- the answer -/\nnoncomputable abbrev solution : ℝ := 9 / 32\n\n"
    "def f (x : ℝ) : ℝ := x ^ 2\n\ntheorem made_up_p3 : f solution ≥ 0 := by sorry"
)
GV2_ROWS = [
    {"name": "MadeUpP3", "solved": False, "tags": ["algebra"], "problem_id": "MadeUpP3",
     "header": GV2_HEADER, "informal_prefix": GV2_DOC, "formal_statement": GV2_STMT,
     "split": "test", "lean4_code": GV2_HEADER + "\n" + GV2_DOC + "\n" + GV2_STMT,
     "category": "algebra"},
    {"name": "tiny_1", "informal_prefix": "/-- Show 1 = 1.-/\n",
     "formal_statement": "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
     "/-- Show 1 = 1.-/\ntheorem tiny_1 : (1 : ℕ) = 1 := by\n", "split": "test",
     "lean4_code": "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
     "/-- Show 1 = 1.-/\ntheorem tiny_1 : (1 : ℕ) = 1 := by sorry", "problem_id": "tiny_1"},
]  # fmt: skip


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def test_goedel_v2_format_keeps_preambles_and_strips_sorry(tmp_path, caplog):
    path = _write_jsonl(tmp_path / "MOBench.jsonl", GV2_ROWS)
    with caplog.at_level("INFO", logger="burnqed.data.readers"):
        answer, tiny = read_goedel_v2(path)
    assert "ignoring key(s) ['category', 'header', 'solved', 'tags']" in caplog.text
    assert (answer.key, answer.name) == ("MadeUpP3", "made_up_p3")
    assert answer.header == GV2_HEADER + "\n" and answer.informal_prefix == GV2_DOC + "\n"
    assert answer.formal_statement == GV2_STMT.removesuffix(" sorry") + "\n"
    file = proof_file(answer, ["norm_num [f]"])
    for preamble in ("noncomputable abbrev solution : ℝ := 9 / 32", "def f (x : ℝ) : ℝ := x ^ 2"):
        assert file.index(preamble) < file.index("theorem made_up_p3")
    assert "sorry" not in file and file.endswith("#print axioms made_up_p3\n")
    assert tiny.header == "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
    assert tiny.formal_statement == "/-- Show 1 = 1.-/\ntheorem tiny_1 : (1 : ℕ) = 1 := by\n"
    assert tiny.lean_file(["sorry"]) == GV2_ROWS[1]["lean4_code"].replace(" sorry", "\n  sorry\n")


def test_goedel_v2_guard_trusts_the_preamble_not_the_proof(tmp_path):
    (answer, _) = read_goedel_v2(_write_jsonl(tmp_path / "g.jsonl", GV2_ROWS))
    cfg = LeanConfig(repl_command=("/nonexistent",))  # refused before any Lean process
    in_proof = asyncio.run(verify_proof(cfg, answer, ["def g := 1", "norm_num"]))
    assert in_proof.reasons[0].startswith("tactic 1 'def g := 1': banned by pattern")
    good = proof_file(answer, ["norm_num [f]"])
    trusted, proof = split_proof_file(answer, good)
    assert trusted == theorem_file(answer, []).lstrip("\n") and proof.rstrip() == "  norm_num [f]"
    assert "def f" in trusted and TacticGuard.from_config(cfg).check(trusted) is not None
    assert TacticGuard.from_config(cfg).check("  norm_num [f]\n") is None
    one_char = good.replace("9 / 32", "9 / 31")
    assert (
        asyncio.run(verify_file(cfg, answer, one_char)).reasons[0].startswith("statement changed")
    )


def test_goedel_v2_row_whose_lean4_code_lacks_the_statement_is_named(tmp_path):
    bad = {**GV2_ROWS[0], "lean4_code": GV2_HEADER + GV2_STMT.replace("≥ 0", "> 0")}
    path = _write_jsonl(tmp_path / "g.jsonl", [GV2_ROWS[1], bad])
    with pytest.raises(DataFormatError, match=r"g\.jsonl:2 \(MadeUpP3\): `lean4_code` does not "
                       r"end with `formal_statement`"):  # fmt: skip
        read_goedel_v2(path)
    path = _write_jsonl(tmp_path / "g.jsonl", [{"name": "x", "formal_statement": "theorem x"}])
    with pytest.raises(DataFormatError, match=r"g\.jsonl:1: not a Goedel-Prover-V2 statement: "
                       r"missing or non-string key\(s\) \['lean4_code'\]"):  # fmt: skip
        read_goedel_v2(path)


def test_split_lean_file_keeps_a_separated_comment_in_the_header():
    text = (
        "import Mathlib\n/-- doc of something else -/\ndef f := 1\n\ntheorem t : f = 1 := by\n  rfl"
    )
    parts = split_lean_file(text)
    assert parts.informal_prefix == ""
    assert parts.header == "import Mathlib\n/-- doc of something else -/\ndef f := 1\n\n"
    assert parts.proof == "rfl"
