"""The stand-in prover: a propositional-logic REPL that speaks Pantograph's protocol.

**What it is.** A separate program, not part of the Lean client: ``python -m burnqed.proplogic``
stands in for Lean 4 + Pantograph on machines that have neither (CPU runs, the demo, the tests).
It speaks Pantograph's line protocol (v0.3.4) exactly — same commands, JSON keys, omissions, error
kinds and texts, ``ready.`` line, ``--version``, REPL-side timeouts (cooperative, as Lean's),
Lean's heartbeat limits (``set_option maxHeartbeats N in``), ``goal.save``/``goal.load`` — so the
client, worker pool, verification, search and the workflow are the real ones, configured exactly
like the real REPL (``lean.repl_command``).  Goals print as Lean prints them (``p q : Prop\nh : p ∧ q\n⊢ q ∧ p``).

**What it does not model.** Only intuitionistic propositional logic with a small tactic set
(``intro(s)``, ``exact``, ``apply``, ``constructor``, ``left``/``right``, ``cases``/``rcases``/
``obtain``, ``assumption``, ``exfalso``, ``contradiction``, ``trivial``, combinators): no
arithmetic, no Mathlib, no type classes or universes, no elaboration of arbitrary terms; root
expressions in ``goal.print`` are approximated; ``apply`` that would leave metavariables fails
explicitly; some Lean error texts are unverified against Lean itself; Lean's latency is not
modelled (a tactic takes microseconds, not milliseconds to seconds); heartbeats are counted per
tactic step (1000 each), not per allocation; a file's own theorems are usable by later proofs with
their ``Prop`` binders implicit; and a saved state's file is Python's pickle, not Lean's.

**Boundary.** This package imports nothing else from burnqed, and the rest of burnqed reaches it
only through the protocol — except the demo's data generator (:mod:`burnqed.data.proplogic`,
:mod:`burnqed.data.proplogic_trace`), which generates theorems here and traces their proofs
in-process.  ``lint-imports`` checks both directions.

Modules: :mod:`.formula` (formulas, Lean-style printing, unification), :mod:`.syntax` (parsers),
:mod:`.tactics` (goals, elaborator, tactics), :mod:`.display` (goal printing), :mod:`.state`
(proof states, messages), :mod:`.frontend` (``frontend.process``), :mod:`.repl` (the protocol),
:mod:`.generator` (theorems of controlled proof depth with their proofs).  Everything imports only
the standard library, so a worker starts in well under a second.

Example::

    >>> from burnqed.proplogic.repl import Repl
    >>> Repl().handle_line('goal.start {"expr": "∀ (p : Prop), p → p"}')
    '{"root":"_uniq.1","stateId":0}'
"""
