"""Statement files as other provers publish them: only ``name``, ``header``, ``formal_statement``
per row (no ``split``, no ``informal_prefix``, extra keys), read by the ``deepseek`` format and by
burnqed's own theorem files; a row without a Lean name or a statement is named by file and line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from burnqed.cli import main as cli_main
from burnqed.config import DataConfig
from burnqed.data.readers import DEFAULT_HEADER, STATEMENT_READERS, DataFormatError
from burnqed.data.stage import build_search_pool
from burnqed.theorems import TheoremFileError, read_theorems
from tests.conftest import REPO

from .conftest import HEADER

# Rows the way e.g. Kimina's or PutnamBench-style miniF2F copies carry them: a name, a header, the
# statement, plus keys burnqed does not use.
ROWS = [
    {
        "name": "mathd_algebra_10",
        "header": HEADER,
        "formal_statement": "theorem mathd_algebra_10 : abs ((120 : ℝ) / 100 * 30 - 130) = 94 := by\n",
        "tags": ["algebra", "amc"],
        "informal_statement": "Compute |1.2 · 30 − 130|.",
    },
    {
        "name": "amc12a_2019_p21",
        "header": "import Mathlib\n\nopen Complex\n\n",
        "formal_statement": "theorem amc12a_2019_p21 (z : ℂ) (h₀ : z = (1 + Complex.I) / Real.sqrt 2) :"
        " z ^ 2 = Complex.I := by sorry",
        "informal_statement": "…",
    },
]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def test_name_header_statement_rows_read_with_extra_keys_ignored(tmp_path, caplog):
    path = write_jsonl(tmp_path / "other.jsonl", ROWS)
    with caplog.at_level(logging.INFO, logger="burnqed.data.readers"):
        a, b = STATEMENT_READERS["deepseek"](path)
    assert (a.name, a.key, a.header, a.split, a.informal_prefix, a.goal) == (
        "mathd_algebra_10", "mathd_algebra_10", HEADER, "", "", "",
    )  # fmt: skip
    assert a.formal_statement == ROWS[0]["formal_statement"]
    assert b.header == "import Mathlib\n\nopen Complex\n\n"
    assert b.formal_statement.endswith(":= by\n") and "sorry" not in b.formal_statement
    assert b.lean_file(["simp [h₀]"]).startswith("import Mathlib\n\nopen Complex\n\ntheorem amc12a")
    assert "ignoring key(s) ['informal_statement', 'tags']" in caplog.text
    # burnqed's own theorem files (`burnqed search --theorems F`) read such rows too.
    mine = list(read_theorems(path))
    assert [(t.name, t.header) for t in mine] == [(a.name, a.header), (b.name, b.header)]


def test_missing_header_gets_the_default_and_missing_name_comes_from_the_statement(tmp_path):
    rows = [
        {"formal_statement": "theorem t1 (x : ℕ) : x + 0 = x := by\n", "id": 7},
        # A whole file as the statement: its own import/open lines are its header.
        {
            "name": "t2",
            "formal_statement": "import Mathlib\nopen Real\n\ntheorem t2 : π > 3 := by sorry",
        },
        # A preamble before the theorem: the Lean name is the last declaration's.
        {"formal_statement": "lemma aux : 1 = 1 := rfl\n\ntheorem t3 : 2 = 2 := by\n"},
    ]
    t1, t2, t3 = STATEMENT_READERS["deepseek"](write_jsonl(tmp_path / "f.jsonl", rows))
    assert (t1.name, t1.header) == ("t1", DEFAULT_HEADER)
    assert (t2.header, t2.formal_statement) == (
        "import Mathlib\nopen Real\n\n",
        "theorem t2 : π > 3 := by\n",
    )
    assert (t3.name, t3.header) == ("t3", DEFAULT_HEADER)
    assert t3.formal_statement.startswith("lemma aux")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"name": "x", "header": HEADER}, "no statement: `formal_statement` is missing"),
        ({"name": "x", "formal_statement": "  \n"}, "no statement: `formal_statement` is missing"),
        ({"name": "x", "formal_statement": ["theorem x"]}, "no statement"),
        ({"header": HEADER, "formal_statement": "example : True := by\n"}, "no Lean name"),
        ({"name": 3, "formal_statement": "theorem x : True := by\n"}, "key 'name' is not a string"),
    ],
    ids=["no-statement", "blank-statement", "statement-not-text", "no-name", "name-not-text"],
)
def test_a_row_without_name_or_statement_fails_naming_file_and_line(tmp_path, bad, message):
    path = write_jsonl(tmp_path / "other.jsonl", [ROWS[0], ROWS[1], bad])
    with pytest.raises(DataFormatError) as e:
        STATEMENT_READERS["deepseek"](path)
    text = str(e.value)
    assert text.startswith(f"{path}:3: ") and message in text and "\n" not in text


def test_own_theorem_files_name_the_line_of_a_row_without_name_or_statement(tmp_path):
    for bad, missing in (
        ({"name": "x"}, "formal_statement"),
        ({"formal_statement": "theorem x"}, "name"),
    ):
        path = write_jsonl(tmp_path / "t.jsonl", [ROWS[0], bad])
        with pytest.raises(
            TheoremFileError, match=rf"^{path}:2: missing or empty key\(s\) \['{missing}'\]$"
        ):
            list(read_theorems(path))


def test_goedel_v2_points_such_rows_to_the_deepseek_format(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", ROWS)
    with pytest.raises(
        DataFormatError, match=r"g\.jsonl:1: .*\['lean4_code'\].*read as format `deepseek`"
    ):
        STATEMENT_READERS["goedel_v2"](path)


def test_search_pool_from_such_a_file_and_the_command_names_a_bad_line(tmp_path, capsys):
    good = write_jsonl(tmp_path / "other.jsonl", ROWS)
    source = {"name": "other", "format": "deepseek", "path": str(good)}
    cfg = DataConfig.from_dict({"sources": [source], "search_pool": [{"source": "other"}]})
    assert build_search_pool(cfg=cfg, out=tmp_path / "pool.jsonl", seed=0) == 2
    pool = list(read_theorems(tmp_path / "pool.jsonl"))
    assert [t.name for t in pool] == ["mathd_algebra_10", "amc12a_2019_p21"]
    assert pool[0].header == HEADER  # written with its header, so every later stage has it

    bad = write_jsonl(tmp_path / "bad.jsonl", [ROWS[0], {"name": "y", "tags": []}])
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        json.dumps(
            {
                "data": {
                    "sources": [{**source, "path": str(bad)}],
                    "benchmarks": [],
                    "search_pool": [{"source": "other"}],
                    "decontaminate_against": ["minif2f_test"],
                }
            }
        ),
        encoding="utf-8",
    )
    # The evaluation benchmark the pool is decontaminated against (an empty one will do here).
    (tmp_path / "data" / "benchmarks").mkdir(parents=True)
    (tmp_path / "data" / "benchmarks" / "minif2f_test.jsonl").write_text("")
    rc = cli_main(["data", "--params", str(REPO / "params.yaml"), "--configfile", str(overlay),
                   "--data-dir", str(tmp_path / "data"), "pool"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"burnqed data: {bad}:2: no statement"), err
