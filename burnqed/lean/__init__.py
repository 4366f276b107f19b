"""Lean layer: the Pantograph REPL client, its worker pool, the tactic guard and whole-proof
verification.  It talks to any REPL that speaks Pantograph's protocol — the real one, or the
stand-in prover :mod:`burnqed.proplogic` — and imports neither."""
