"""Proof goals as Pantograph sends them, and their rendering as Lean prints them.

Pantograph returns one ``vars`` entry per hypothesis; Lean's own pretty-printer (and LeanDojo's
``state_before``/``state_after``, which models are trained on) groups consecutive hypotheses of the
same type (``p q : Prop``), prefixes tagged goals with ``case <tag>`` and separates goals with a blank
line.  :func:`render_goals` reproduces that, so the text a model sees at search time is the text it
was trained on.  This module imports only the standard library: the propositional REPL uses it.

Example::

    >>> g = Goal.from_json({"name": "_uniq.14", "fragment": "tactic", "target": {"pp": "q ∨ p"},
    ...                     "vars": [{"name": "_uniq.1", "userName": "p", "isInaccessible": False,
    ...                               "type": {"pp": "Prop"}},
    ...                              {"name": "_uniq.2", "userName": "q", "isInaccessible": False,
    ...                               "type": {"pp": "Prop"}}]})
    >>> print(render_goals([g]))
    p q : Prop
    ⊢ q ∨ p
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

NO_GOALS = "no goals"  # what Lean (and LeanDojo) print for a finished proof


@dataclass(frozen=True)
class Variable:
    """One hypothesis of a goal (Pantograph ``Variable``)."""

    name: str  # internal fvar id, "_uniq.N"; never stable across Lean versions
    user_name: str  # "h", or "h✝" when inaccessible
    type: str  # pretty-printed type
    is_inaccessible: bool = False
    value: str | None = None  # let-bound hypotheses only

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Variable:
        return cls(
            name=d.get("name", ""),
            user_name=d["userName"],
            type=(d.get("type") or {}).get("pp", ""),
            is_inaccessible=bool(d.get("isInaccessible", False)),
            value=(d.get("value") or {}).get("pp"),
        )


@dataclass(frozen=True)
class Goal:
    """One goal of a proof state (Pantograph ``Goal``)."""

    name: str  # "_uniq.N" metavariable id
    target: str  # pretty-printed target
    variables: tuple[Variable, ...] = ()
    case: str | None = None  # the case tag ("inl"); None when untagged
    fragment: str = "tactic"  # "tactic" | "conv" | "calc"

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Goal:
        return cls(
            name=d.get("name", ""),
            target=(d.get("target") or {}).get("pp", ""),
            variables=tuple(Variable.from_json(v) for v in d.get("vars", ())),
            case=d.get("userName"),
            fragment=d.get("fragment", "tactic"),
        )

    def render(self) -> str:
        """The goal as Lean prints it: grouped hypotheses, ``⊢ target`` (``| target`` in conv)."""
        lines: list[str] = []
        if self.case:
            lines.append(f"case {self.case}")
        group: list[str] = []
        group_type: str | None = None

        def flush() -> None:
            if group:
                lines.append(f"{' '.join(group)} : {group_type}")

        for v in self.variables:
            if v.value is not None:  # let-bound hypotheses never group
                flush()
                group, group_type = [], None
                lines.append(f"{v.user_name} : {v.type} := {v.value}")
                continue
            if group and v.type == group_type:
                group.append(v.user_name)
            else:
                flush()
                group, group_type = [v.user_name], v.type
        flush()
        turnstile = "|" if self.fragment == "conv" else "⊢"
        lines.append(f"{turnstile} {self.target}")
        return "\n".join(lines)


def render_goals(goals: Iterable[Goal]) -> str:
    """A whole proof state: goals separated by a blank line; ``no goals`` when there are none."""
    rendered = [g.render() for g in goals]
    return "\n\n".join(rendered) if rendered else NO_GOALS
