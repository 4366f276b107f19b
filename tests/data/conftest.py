"""Fixtures that write small files in the exact public formats (``reference/datasets.md``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\n"
    "open BigOperators Real Nat Topology Rat\n\n"
)


def leandojo_theorem(
    full_name: str, steps: list[tuple[str, str, str]], file_path: str = "Mathlib/Foo.lean"
) -> dict:
    """A LeanDojo Benchmark 4 theorem record; ``steps``: (state_before, tactic, state_after)."""
    return {
        "url": "https://github.com/leanprover-community/mathlib4",
        "commit": "29dcec074de168ac2bf835a77ef68bbe069194c5",
        "file_path": file_path,
        "full_name": full_name,
        "start": [10, 1],
        "end": [14, 20],
        "traced_tactics": [
            {
                "tactic": tactic,
                # The annotated form marks premises; the plain `tactic` is what burnqed keeps.
                "annotated_tactic": [
                    tactic.replace("Nat.add_comm", "<a>Nat.add_comm</a>"),
                    [
                        {
                            "full_name": "Nat.add_comm",
                            "def_path": "Mathlib/Init.lean",
                            "def_pos": [3, 9],
                            "def_end_pos": [3, 21],
                        }
                    ]
                    if "Nat.add_comm" in tactic
                    else [],
                ],
                "state_before": before,
                "state_after": after,
            }
            for before, tactic, after in steps
        ],
    }


def write_leandojo(root: Path, splits: dict[str, list[dict]]) -> Path:
    """A Benchmark 4 layout: root/metadata.json, root/random/{train,val,test}.json (arrays)."""
    (root / "random").mkdir(parents=True, exist_ok=True)
    (root / "metadata.json").write_text(
        json.dumps(
            {
                "from_repo": {
                    "url": "https://github.com/leanprover-community/mathlib4",
                    "commit": "29dcec074de168ac2bf835a77ef68bbe069194c5",
                },
                "leandojo_version": "2.0.0",
            }
        )
    )
    for split in ("train", "val", "test"):
        (root / "random" / f"{split}.json").write_text(
            json.dumps(splits.get(split, []), ensure_ascii=False, indent=1), encoding="utf-8"
        )
    return root / "random"


def write_lean_github(path: Path, rows: list[dict]) -> Path:
    """internlm/Lean-Github parquet: one row per tactic, `start`/`end` as strings."""
    cols = [
        "url",
        "commit",
        "file_path",
        "full_name",
        "start",
        "end",
        "tactic",
        "state_before",
        "state_after",
    ]
    pq.write_table(pa.table({c: [r[c] for r in rows] for c in cols}), path)
    return path


def lean_github_row(repo: str, full_name: str, before: str, tactic: str, after: str) -> dict:
    return {
        "url": f"https://github.com/{repo}",
        "commit": "abc123",
        "file_path": "Src/Basic.lean",
        "full_name": full_name,
        "start": "(3, 1)",
        "end": "(7, 10)",
        "tactic": tactic,
        "state_before": before,
        "state_after": after,
    }


@pytest.fixture
def workbook_records() -> list[dict]:
    return [
        {
            "id": "lean_workbook_7032",
            "split": "lean_workbook",
            "natural_language_statement": "Prove that $a^2 + b^2 \\ge 2ab$.",
            "answer": "",
            "tags": ["inequality"],
            "formal_statement": (
                "theorem lean_workbook_7032 (a b : ℝ) : a ^ 2 + b ^ 2 ≥ 2 * a * b := by sorry"
            ),
            "status": "proved",
            "tactic": "nlinarith [sq_nonneg (a - b)]",
            "state_before": "a b : ℝ\n⊢ a ^ 2 + b ^ 2 ≥ 2 * a * b",
            "state_after": "no goals",
        },
        {
            "id": "lean_workbook_plus_49452",
            "split": "lean_workbook_plus",
            "natural_language_statement": "Show that x = x.",
            "answer": "",
            "tags": [],
            "formal_statement": "theorem lean_workbook_plus_49452 (x : ℕ) : x = x := by sorry",
            "status": "open",
            "tactic": "",
            "state_before": "x : ℕ\n⊢ x = x",
            "state_after": "",
        },
    ]


@pytest.fixture(scope="session")
def tiny_tokenizer_dir(tmp_path_factory) -> Path:
    """A byte-level BPE tokenizer trained on a few Lean-like strings, saved as an HF directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    texts = [
        "```lean4\n/- tactic state:\n  p q : Prop\n  h : p ∧ q\n  ⊢ q ∧ p\n-/\n```\n",
        "intro h",
        "exact h",
        "constructor",
        "rw [Nat.add_comm]",
        "simp only [foo]",
    ] * 20
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(texts, trainer)
    # Prepend BOS like Llama-family tokenizers do, so counts must include special tokens.
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    out = tmp_path_factory.mktemp("tokenizer")
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>"
    ).save_pretrained(out)
    return out
