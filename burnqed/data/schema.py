"""The one normalised tactic-pair schema every data source is converted to.

Example::

    >>> import pyarrow as pa
    >>> t = pa.table({"source": ["leandojo"], "theorem": ["leandojo:Nat.add_comm"],
    ...               "state_before": ["n m : ℕ\\n⊢ n + m = m + n"], "tactic": ["omega"],
    ...               "state_after": ["no goals"], "depth": [0]}, schema=TACTIC_PAIR_SCHEMA)
    >>> validate_tactic_pairs(t)
"""

from __future__ import annotations

import pyarrow as pa

TACTIC_PAIR_SCHEMA = pa.schema(
    [
        # dataset name, e.g. "leandojo", "proplogic"
        pa.field("source", pa.string(), nullable=False),
        pa.field("theorem", pa.string(), nullable=False),  # source-prefixed name: "<source>:<name>"
        pa.field("state_before", pa.string(), nullable=False),  # Lean-printed state (grouped hyps)
        pa.field("tactic", pa.string(), nullable=False),  # the tactic applied to state_before
        pa.field("state_after", pa.string(), nullable=False),  # "no goals" when the proof closed
        pa.field("depth", pa.int32(), nullable=False),  # index of the step within its proof, from 0
    ]
)


class SchemaError(ValueError):
    """A table does not have the tactic-pair schema."""


def validate_tactic_pairs(table: pa.Table, *, where: str = "table") -> None:
    """Raise :class:`SchemaError` naming ``where`` and the offending column unless ``table`` conforms."""
    for field in TACTIC_PAIR_SCHEMA:
        if field.name not in table.column_names:
            raise SchemaError(f"{where}: missing column {field.name!r}")
        actual = table.schema.field(field.name).type
        if actual != field.type:
            raise SchemaError(
                f"{where}: column {field.name!r} has type {actual}, expected {field.type}"
            )
        if table.column(field.name).null_count:
            raise SchemaError(f"{where}: column {field.name!r} has null values")
    extra = set(table.column_names) - set(TACTIC_PAIR_SCHEMA.names)
    if extra:
        raise SchemaError(f"{where}: unexpected columns {sorted(extra)}")
