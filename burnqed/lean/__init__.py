"""Lean layer: the Pantograph REPL client, its worker pool, the tactic guard, whole-proof
verification, and burnqed's own propositional REPL (``python -m burnqed.lean.proplogic``)."""
