"""Goals as Lean's goal display prints them (``Lean.Meta.ppGoal``): the REPL side of the protocol.

Hypotheses of the same type in a row are grouped (``p q : Prop``), a tagged goal starts with
``case <tag>``, goals are separated by a blank line, and a finished proof prints ``no goals``.  The
Pantograph client (:mod:`burnqed.lean.goals`) renders the JSON it receives with the same rules; the
two are kept apart on purpose — this package is the server and imports nothing else from burnqed —
and ``tests/proplogic`` checks that the client's rendering of the REPL's JSON equals this text.

Example::

    >>> g = Goal("_uniq.3", "q ∨ p", (Variable("_uniq.1", "p", "Prop"), Variable("_uniq.2", "q", "Prop")))
    >>> print(render_goals([g]))
    p q : Prop
    ⊢ q ∨ p
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

NO_GOALS = "no goals"  # what Lean prints for a finished proof


@dataclass(frozen=True, slots=True)
class Variable:
    """One hypothesis as the REPL sends it (Pantograph ``Variable``)."""

    name: str  # "_uniq.N"
    user_name: str  # "h", or "h✝" when inaccessible
    type: str  # pretty-printed type
    is_inaccessible: bool = False


@dataclass(frozen=True, slots=True)
class Goal:
    """One goal as the REPL sends it (Pantograph ``Goal``)."""

    name: str  # "_uniq.N"
    target: str  # pretty-printed target
    variables: tuple[Variable, ...] = ()
    case: str | None = None  # the case tag ("inl"); None when untagged

    def render(self) -> str:
        lines = [f"case {self.case}"] if self.case else []
        group: list[str] = []
        group_type: str | None = None
        for v in self.variables:
            if group and v.type == group_type:
                group.append(v.user_name)
                continue
            if group:
                lines.append(f"{' '.join(group)} : {group_type}")
            group, group_type = [v.user_name], v.type
        if group:
            lines.append(f"{' '.join(group)} : {group_type}")
        lines.append(f"⊢ {self.target}")
        return "\n".join(lines)


def render_goals(goals: Iterable[Goal]) -> str:
    """A whole proof state: goals separated by a blank line; ``no goals`` when there are none."""
    rendered = [g.render() for g in goals]
    return "\n\n".join(rendered) if rendered else NO_GOALS
