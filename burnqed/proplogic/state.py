"""The REPL's shared records: proof states, theorems in the environment, Lean messages.

A leaf module, so :mod:`.repl` (the protocol) and :mod:`.frontend` (``frontend.process``) both
import it and neither imports the other back.

Example::

    >>> message("unknown identifier 'x'", pos=(1, 8))["pos"]
    {'column': 8, 'line': 1}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from burnqed.proplogic.formula import Formula
from burnqed.proplogic.tactics import MGoal


@dataclass(frozen=True)
class ProofState:
    """A goal state (Pantograph ``GoalState``): what a state id names."""

    goals: tuple[MGoal, ...]  # the visible goals, main goal first
    dormant: tuple[MGoal, ...]  # goals set aside in manual mode (`goal.continue` resumes them)
    root: int  # the root goal's mvar id
    has_sorry: bool  # a sorry was used on the way here
    parent: int | None  # the state this one was derived from
    # The theorems its terms may use beyond the built-in constants: the declarations of the file
    # it came from (Lean keeps the environment in each goal state's saved state).
    env: Mapping[str, TheoremInfo] = field(default_factory=dict)


@dataclass
class TheoremInfo:
    """A theorem added to the environment by ``frontend.process``."""

    statement: Formula  # closed: binders as ∀ / →
    uses_sorry: bool


def message(
    data: str,
    *,
    severity: str = "error",
    file_name: str = "<Pantograph>",
    pos: tuple[int, int] = (0, 0),
    end_pos: tuple[int, int] | None = None,
    kind: str = "[anonymous]",
) -> dict[str, Any]:
    """A Lean ``SerialMessage`` (positions are (line, column))."""
    return {
        "caption": "",
        "data": data,
        "endPos": None if end_pos is None else {"column": end_pos[1], "line": end_pos[0]},
        "fileName": file_name,
        "isSilent": False,
        "keepFullRange": False,
        "kind": kind,
        "pos": {"column": pos[1], "line": pos[0]},
        "severity": severity,
    }
