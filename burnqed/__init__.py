"""burnqed: Lean 4 theorem proving by expert iteration, as a reproducible pipeline.

Importing the package is cheap (no torch, no transformers): heavy dependencies are imported by the
stage modules that need them, so the command line and the propositional REPL start fast.
"""

__version__ = "0.1.0"
