"""The LeanConfig every Lean-layer test starts from: burnqed's propositional REPL as the REPL."""

from __future__ import annotations

import sys

from burnqed.config import LeanConfig

PROPLOGIC = (sys.executable, "-m", "burnqed.proplogic")


def proplogic_config(**overrides) -> LeanConfig:
    """One worker running the propositional REPL, small limits; ``overrides`` replace any field."""
    base = dict(
        repl_command=PROPLOGIC,
        imports=(),
        workers=1,
        ready_timeout_s=20.0,
        tactic_timeout_s=0.5,
        hang_grace_s=1.0,  # the propositional REPL answers an interrupt within milliseconds
        save_factor=None,  # no goal.save unless a test asks: its policy depends on timings
        memory_limit_mb=2048,
    )
    return LeanConfig(**{**base, **overrides})
