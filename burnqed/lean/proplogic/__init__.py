"""burnqed's propositional-logic REPL: the offline stand-in for Lean + Pantograph.

``python -m burnqed.lean.proplogic`` speaks Pantograph's line protocol (v0.3.4) exactly — same
commands, JSON keys, omissions, error kinds and texts, ``ready.`` line and timeouts — for
intuitionistic propositional logic, so the Lean client, worker pool, search and the CPU demo run
end to end without Lean.  Goals print as Lean prints them (``p q : Prop\\nh : p ∧ q\\n⊢ q ∧ p``).

Modules: :mod:`.formula` (formulas, Lean-style printing, unification), :mod:`.syntax` (parsers),
:mod:`.tactics` (goals, elaborator, tactics), :mod:`.frontend` (``frontend.process``),
:mod:`.repl` (the protocol), :mod:`.generator` (theorems of controlled proof depth with their
proofs), :mod:`.tracer` (tactic pairs by replaying proofs; imports pyarrow).  The REPL path imports
only the standard library and :mod:`burnqed.lean.goals`, so a worker starts in well under a second.

Example::

    >>> from burnqed.lean.proplogic.repl import Repl
    >>> Repl().handle_line('goal.start {"expr": "∀ (p : Prop), p → p"}')
    '{"root":"_uniq.1","stateId":0}'
"""
