"""Filters (each with its drop count), token counting and the split by theorem."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from burnqed.config import ConfigError
from burnqed.data.filters import (
    count_bytes,
    filter_pairs,
    is_val_theorem,
    keep_clean_theorems,
    keep_short,
    load_token_counter,
    split_by_theorem,
)
from burnqed.data.prompt import format_prompt
from burnqed.data.schema import TACTIC_PAIR_SCHEMA


def pairs(rows: list[tuple[str, str, str]]) -> pa.Table:
    """(theorem, state_before, tactic) rows of one source "s"."""
    return pa.table(
        {
            "source": ["s"] * len(rows),
            "theorem": [f"s:{r[0]}" for r in rows],
            "state_before": [r[1] for r in rows],
            "tactic": [r[2] for r in rows],
            "state_after": ["no goals"] * len(rows),
            "depth": list(range(len(rows))),
        },
        schema=TACTIC_PAIR_SCHEMA,
    )


def test_banned_word_rejects_the_whole_theorem_and_only_whole_words():
    t = pairs(
        [
            ("a", "⊢ p", "intro h"),
            ("a", "⊢ q", "sorry"),  # one sorry taints the theorem
            ("b", "⊢ p", "exact sorryAx _"),
            ("c", "⊢ p", "exact h_admit"),  # not the word
            ("d", "⊢ p", "cases h <;> admit"),
            ("e", "⊢ p", "first | cheat | simp"),
        ]
    )
    keep = keep_clean_theorems(t, ["sorry", "admit", "cheat"])
    assert keep == [False, False, True, True, False, False]
    assert keep_clean_theorems(t, []) == [True] * 6


def test_filter_pairs_counts_each_filter(caplog):
    caplog.set_level(logging.INFO, logger="burnqed.data")
    t = pairs(
        [
            ("a", "⊢ p", "intro h"),
            ("a", "⊢ q", "sorry"),
            ("b", "⊢ p", "exact h"),
            ("b", "⊢ p", "exact h"),  # duplicate
            ("c", "   ", "simp"),
            ("c", "⊢ r", " "),  # both empty: theorem c disappears
            ("d", "⊢ " + "x" * 500, "simp"),  # too long
            ("e", "⊢ s", "rfl"),
        ]
    )
    kept, steps = filter_pairs(t, banned_words=["sorry"], max_tokens=200, count_tokens=count_bytes)
    assert kept.column("theorem").to_pylist() == ["s:b", "s:e"]
    got = {s.name: (s.rows_dropped, s.theorems_dropped, s.rows_left) for s in steps}
    assert got == {
        "banned_words": (2, 1, 6),
        "empty": (2, 1, 4),
        "dedup": (1, 0, 3),
        "max_tokens": (1, 1, 2),
    }
    assert [s.name for s in steps] == ["banned_words", "empty", "dedup", "max_tokens"]
    for line in (
        "filter banned_words: dropped 2 rows (1 theorems), 6 left",
        "filter empty: dropped 2 rows (1 theorems), 4 left",
        "filter dedup: dropped 1 rows (0 theorems), 3 left",
        "filter max_tokens: dropped 1 rows (1 theorems), 2 left",
    ):
        assert line in caplog.text


def test_token_length_filter_with_a_real_tokenizer(tiny_tokenizer_dir):
    from transformers import AutoTokenizer

    count = load_token_counter(str(tiny_tokenizer_dir))
    tok = AutoTokenizer.from_pretrained(tiny_tokenizer_dir)
    short, long = (
        ("p q : Prop\nh : p ∧ q\n⊢ q ∧ p", "exact h"),
        ("p q : Prop\n⊢ " + "q ∧ " * 40 + "p", "simp"),
    )
    texts = [format_prompt(s) + t for s, t in (short, long)]
    ids = [tok(x)["input_ids"] for x in texts]
    assert all(x[0] == tok.bos_token_id for x in ids)  # the BOS is counted
    expected = [len(x) + 1 for x in ids]  # + the EOS training appends
    assert count(texts) == expected
    assert expected[0] < count_bytes(texts)[:1][0]  # merges learned: fewer tokens than bytes
    t = pairs([("a", *short), ("b", *long)])
    assert keep_short(t, expected[0], count) == [True, False]
    # The same limit counted in bytes would drop both: the tokenizer really is used.
    assert keep_short(t, expected[0], count_bytes) == [False, False]


def test_missing_tokenizer_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match=r"data.tokenizer: cannot load tokenizer .*bytes"):
        load_token_counter(str(tmp_path / "no-such-tokenizer"))


def test_split_is_by_theorem_and_stable_under_other_rows():
    rows = [(f"thm{i}", f"⊢ p{j}", f"tac{j}") for i in range(200) for j in range(3)]
    t = pairs(rows)
    train, val = split_by_theorem(t, val_fraction=0.25, seed=7)
    train_thms, val_thms = (
        set(train.column("theorem").to_pylist()),
        set(val.column("theorem").to_pylist()),
    )
    assert not train_thms & val_thms
    assert len(train_thms) + len(val_thms) == 200
    assert 25 <= len(val_thms) <= 75  # about a quarter
    assert val.num_rows == 3 * len(val_thms)  # all of a theorem's rows travel together
    # A theorem's side depends on its name and the seed only, not on the other rows.
    sub_train, sub_val = split_by_theorem(t.slice(0, 30), val_fraction=0.25, seed=7)
    assert set(sub_val.column("theorem").to_pylist()) == {x for x in val_thms if int(x[5:]) < 10}
    assert set(sub_train.column("theorem").to_pylist()) == {
        x for x in train_thms if int(x[5:]) < 10
    }
    assert {is_val_theorem(x, val_fraction=0.25, seed=8) for x in val_thms} == {True, False}
