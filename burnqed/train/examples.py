"""Tactic-pair Parquet files → prompt/completion training examples (the one prompt format, §4.2).

Both the from-scratch base training and the SFT read their data through :func:`read_examples`, so
the text a model is trained on is exactly what :func:`burnqed.data.prompt.format_prompt` produces
at search time.

Example::

    >>> import tempfile, pyarrow as pa, pyarrow.parquet as pq
    >>> from pathlib import Path
    >>> from burnqed.data.schema import TACTIC_PAIR_SCHEMA
    >>> path = Path(tempfile.mkdtemp()) / "train.parquet"
    >>> pq.write_table(pa.table({"source": ["proplogic"], "theorem": ["proplogic:t0"],
    ...     "state_before": ["p : Prop\\n⊢ p → p"], "tactic": ["intro h"],
    ...     "state_after": ["p : Prop\\nh : p\\n⊢ p"], "depth": [0]}, schema=TACTIC_PAIR_SCHEMA), path)
    >>> read_examples(path)[0]["completion"]
    'intro h'
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

from burnqed.data.prompt import format_example
from burnqed.data.schema import SchemaError, validate_tactic_pairs

log = logging.getLogger(__name__)


class TrainingDataError(ValueError):
    """A training input is missing, malformed or empty; the message names the file."""


def read_examples(
    path: Path,
    *,
    limit: int | None = None,
    seed: int = 0,
    what: str = "tactic pairs",
    max_proof_steps: int | None = None,
) -> list[dict[str, str]]:
    """``{"prompt", "completion"}`` dicts for the pairs in ``path``.

    ``limit`` keeps a seeded random subsample (the iteration > 0 base-pair subsample); order is
    otherwise the file's.  ``max_proof_steps`` keeps only the pairs of theorems whose traced proof
    has at most that many steps (its deepest pair's ``depth`` + 1).  Raises :class:`TrainingDataError` naming ``path`` when it is missing,
    not a tactic-pair table, or has no rows.
    """
    import pyarrow.parquet as pq

    path = Path(path)
    if not path.exists():
        raise TrainingDataError(f"{path}: no such file ({what})")
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several unrelated types for a bad file
        raise TrainingDataError(f"{path}: not a readable Parquet file ({what}): {e}") from None
    try:
        validate_tactic_pairs(table, where=str(path))
    except SchemaError as e:
        raise TrainingDataError(str(e)) from None
    if max_proof_steps is not None:
        import pyarrow.compute as pc

        lengths = table.group_by("theorem").aggregate([("depth", "max")])
        short = lengths.filter(pc.less(lengths.column("depth_max"), max_proof_steps))
        keep = pc.is_in(table.column("theorem"), value_set=short.column("theorem"))
        log.info(
            "%s: %d of %d pairs come from proofs of at most %d steps (%s)",
            path, pc.sum(keep).as_py() or 0, table.num_rows, max_proof_steps, what,
        )  # fmt: skip
        table = table.filter(keep)
    if table.num_rows == 0:
        raise TrainingDataError(f"{path}: no rows ({what})")
    states = table.column("state_before").to_pylist()
    tactics = table.column("tactic").to_pylist()
    examples = [format_example(s, t) for s, t in zip(states, tactics, strict=True)]
    empty = sum(1 for e in examples if not e["completion"])
    if empty:
        # The data stage drops these; a hand-made file may not have.  An empty completion would
        # teach the model to stop at once.
        log.warning("%s: dropped %d pairs with an empty tactic", path, empty)
        examples = [e for e in examples if e["completion"]]
    if limit is not None and len(examples) > limit:
        examples = random.Random(seed).sample(examples, limit)
        log.info("%s: subsampled %d of %d pairs (seed %d)", path, limit, table.num_rows, seed)
    log.info("%s: %d prompt/completion examples (%s)", path, len(examples), what)
    return examples
