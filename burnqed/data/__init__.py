"""The data stage (SPEC §4.2): public datasets and benchmarks in, tactic pairs, benchmarks and the
search pool out.

Modules (import them directly; this package imports nothing heavy, because the propositional REPL
imports :mod:`burnqed.theorems` and must start fast):

- :mod:`~burnqed.data.readers` — one reader per public format (LeanDojo, Lean-Github, Lean Workbook,
  Goedel, NuminaMath-LEAN, DeepSeek miniF2F);
- :mod:`~burnqed.data.filters` — filters with drop counts, the train/val split by theorem;
- :mod:`~burnqed.data.benchmarks` — the sha256-pinned benchmark registry, fetch and build;
- :mod:`~burnqed.data.proplogic` — the generated propositional source and test set;
- :mod:`~burnqed.data.stage` — the stage's ``run`` and its pieces;
- :mod:`~burnqed.data.schema`, :mod:`~burnqed.theorems`, :mod:`~burnqed.data.prompt` — the
  shared tactic-pair schema, theorem records and the one prompt format.

Example::

    >>> from burnqed.theorems import Theorem
    >>> Theorem(name="t", formal_statement="theorem t : True := by\\n").lean_file(["trivial"])
    'theorem t : True := by\\n  trivial\\n'
"""
