"""Filters over a tactic-pair table, each counting what it drops; the train/val split by theorem.

In the order :func:`filter_pairs` applies them (SPEC §4.2):

1. ``banned_words`` — a *whole theorem* goes when any of its tactics contains a banned word
   (``sorry``, ``admit``, ``cheat``) as a word: a proof with one ``sorry`` proves nothing, so its
   other steps are not evidence of good tactics either.
2. ``empty`` — rows whose ``state_before`` or ``tactic`` is empty or whitespace.
3. ``dedup`` — repeated ``(theorem, state_before, tactic)``; ``theorem`` is source-prefixed
   (``"leandojo:Nat.add_comm"``), so the same name in two sources is two theorems.
4. ``max_tokens`` — rows whose training text, ``format_prompt(state_before) + tactic``, is longer
   than ``max_tokens`` tokens (the training length: nothing is silently truncated).

Each filter logs ``filter <name>: dropped N rows (M theorems), K left`` where M counts theorems
that lost their last row.  :func:`split_by_theorem` then assigns each *theorem* (never a pair) to
train or val by a hash of its name and the seed, so a theorem's side does not depend on the rows
around it (nor on which source it came from: the source prefix is not hashed).

Example::

    >>> import pyarrow as pa
    >>> from burnqed.data.schema import TACTIC_PAIR_SCHEMA
    >>> t = pa.table({"source": ["s", "s"], "theorem": ["s:a", "s:b"],
    ...               "state_before": ["⊢ p", "⊢ q"], "tactic": ["sorry", "exact h"],
    ...               "state_after": ["no goals"] * 2, "depth": [0, 0]}, schema=TACTIC_PAIR_SCHEMA)
    >>> kept, steps = filter_pairs(t, banned_words=["sorry"], max_tokens=100,
    ...                            count_tokens=count_bytes)
    >>> kept.column("theorem").to_pylist(), steps[0].rows_dropped
    (['s:b'], 1)
"""

from __future__ import annotations

import hashlib
import logging
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from burnqed.config import ConfigError
from burnqed.data.prompt import format_prompt

log = logging.getLogger(__name__)

# Counts the tokens of each text in a batch.
TokenCounter = Callable[[Sequence[str]], list[int]]


@dataclass(frozen=True)
class FilterStep:
    """What one filter did: recorded in ``filter_report.json`` and logged."""

    name: str
    rows_in: int
    rows_dropped: int
    theorems_dropped: int  # theorems whose every remaining row this filter removed
    rows_left: int
    theorems_left: int

    def to_json(self) -> dict:
        return asdict(self)


def apply_mask(name: str, table: pa.Table, keep: Sequence[bool]) -> tuple[pa.Table, FilterStep]:
    """Keep the rows where ``keep`` is true; log and return the counts under ``name``."""
    kept = table.filter(pa.array(keep, type=pa.bool_()))
    theorems_in = set(table.column("theorem").to_pylist())
    theorems_left = set(kept.column("theorem").to_pylist())
    step = FilterStep(
        name=name,
        rows_in=table.num_rows,
        rows_dropped=table.num_rows - kept.num_rows,
        theorems_dropped=len(theorems_in - theorems_left),
        rows_left=kept.num_rows,
        theorems_left=len(theorems_left),
    )
    log.info(
        "filter %s: dropped %d rows (%d theorems), %d left",
        name,
        step.rows_dropped,
        step.theorems_dropped,
        step.rows_left,
    )
    return kept, step


def banned_word_pattern(words: Sequence[str]) -> re.Pattern[str]:
    """A regex matching any of ``words`` as a whole word: ``sorry``, not ``sorryAx``/``h_sorry``."""
    return re.compile(r"\b(?:" + "|".join(re.escape(w) for w in words) + r")\b")


def keep_clean_theorems(table: pa.Table, words: Sequence[str]) -> list[bool]:
    """False on every row of a theorem any of whose tactics contains a banned word."""
    if not words:
        return [True] * table.num_rows
    pattern = banned_word_pattern(words)
    theorems = table.column("theorem").to_pylist()
    tainted = {
        thm
        for thm, tac in zip(theorems, table.column("tactic").to_pylist(), strict=True)
        if pattern.search(tac)
    }
    return [thm not in tainted for thm in theorems]


def keep_nonempty(table: pa.Table) -> list[bool]:
    return [
        bool(s.strip()) and bool(t.strip())
        for s, t in zip(
            table.column("state_before").to_pylist(),
            table.column("tactic").to_pylist(),
            strict=True,
        )
    ]


def keep_first_occurrence(table: pa.Table) -> list[bool]:
    """True on the first row of each ``(theorem, state_before, tactic)``."""
    seen: set[tuple[str, str, str]] = set()
    keep = []
    for key in zip(
        table.column("theorem").to_pylist(),
        table.column("state_before").to_pylist(),
        table.column("tactic").to_pylist(),
        strict=True,
    ):
        keep.append(key not in seen)
        seen.add(key)
    return keep


def keep_short(table: pa.Table, max_tokens: int, count_tokens: TokenCounter) -> list[bool]:
    """True where ``format_prompt(state_before) + tactic`` has at most ``max_tokens`` tokens."""
    texts = [
        format_prompt(s) + t
        for s, t in zip(
            table.column("state_before").to_pylist(),
            table.column("tactic").to_pylist(),
            strict=True,
        )
    ]
    from tqdm import tqdm

    keep: list[bool] = []
    batch = 1024
    # Tokenizing a few hundred thousand states with a real tokenizer takes a while: show it.
    with tqdm(
        total=len(texts), desc="token lengths", unit="pair", disable=not sys.stderr.isatty()
    ) as bar:
        for i in range(0, len(texts), batch):
            chunk = texts[i : i + batch]
            keep.extend(n <= max_tokens for n in count_tokens(chunk))
            bar.update(len(chunk))
    return keep


def filter_pairs(
    table: pa.Table, *, banned_words: Sequence[str], max_tokens: int, count_tokens: TokenCounter
) -> tuple[pa.Table, list[FilterStep]]:
    """Apply the four filters in order; return the kept rows and each filter's counts."""
    steps = []
    table, step = apply_mask("banned_words", table, keep_clean_theorems(table, banned_words))
    steps.append(step)
    table, step = apply_mask("empty", table, keep_nonempty(table))
    steps.append(step)
    table, step = apply_mask("dedup", table, keep_first_occurrence(table))
    steps.append(step)
    table, step = apply_mask("max_tokens", table, keep_short(table, max_tokens, count_tokens))
    steps.append(step)
    return table, steps


# --------------------------------------------------------------------------------------------
# Token counting


def count_bytes(texts: Sequence[str]) -> list[int]:
    """UTF-8 byte length: an upper bound on the token count of a byte-level BPE tokenizer."""
    return [len(t.encode("utf-8")) for t in texts]


def load_token_counter(spec: str) -> TokenCounter:
    """``"bytes"`` → :func:`count_bytes`; otherwise a local HF tokenizer directory or a hub id
    already in the local cache (``local_files_only``: no hub access at run time).

    Counts include the special tokens the tokenizer adds (BOS) plus one for the EOS that trl appends
    to each completion, so the figure is the length training will see.
    """
    if spec == "bytes":
        return count_bytes
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(spec, local_files_only=True)
    except (OSError, ValueError) as e:
        where = "directory" if Path(spec).exists() else "hub id (not in the local cache)"
        raise ConfigError(
            f"data.tokenizer: cannot load tokenizer {spec!r} from local files ({where}): {e}. "
            f'Download it first, point at a local directory, or use "bytes".'
        ) from None
    extra = 1 if tokenizer.eos_token_id is not None else 0

    def count(texts: Sequence[str]) -> list[int]:
        ids = tokenizer(list(texts), add_special_tokens=True)["input_ids"]
        return [len(x) + extra for x in ids]

    return count


# --------------------------------------------------------------------------------------------
# Train/val split by theorem


def is_val_theorem(name: str, *, val_fraction: float, seed: int) -> bool:
    """Whether theorem ``name`` is held out: a hash of ``seed`` and the name alone, so the answer
    does not change when other theorems come or go."""
    digest = hashlib.sha256(f"{seed}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < val_fraction


def unprefixed(theorem: str) -> str:
    """``"leandojo:Nat.add_comm"`` → ``"Nat.add_comm"``."""
    return theorem.partition(":")[2] or theorem


def split_by_theorem(
    table: pa.Table, *, val_fraction: float, seed: int
) -> tuple[pa.Table, pa.Table]:
    """``(train, val)``: every row of a theorem lands on the same side.

    The side is decided by the name *without* its source prefix, so a theorem that two sources
    both contain (Mathlib in LeanDojo and in Lean-Github) cannot leak from train into val.
    """
    theorems = table.column("theorem").to_pylist()
    side = {
        t: is_val_theorem(unprefixed(t), val_fraction=val_fraction, seed=seed)
        for t in set(theorems)
    }
    val_mask = pa.array([side[t] for t in theorems], type=pa.bool_())
    train, val = table.filter(pc.invert(val_mask)), table.filter(val_mask)
    n_val = sum(side.values())
    log.info(
        "split: train %d rows (%d theorems), val %d rows (%d theorems)",
        train.num_rows,
        len(side) - n_val,
        val.num_rows,
        n_val,
    )
    if val_fraction > 0 and n_val == 0 and side:
        log.warning(
            "split: no theorem fell into val (val_fraction=%s, %d theorems)",
            val_fraction,
            len(side),
        )
    return train, val
