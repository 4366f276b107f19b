"""Evaluation (SPEC §4.8): a pinned benchmark searched once at the largest node budget, scored at
every budget with pass@k and confidence intervals, compared across iterations.

- :mod:`burnqed.eval.stage` — ``run``: benchmark check, search, scoring, the self-describing JSON;
- :mod:`burnqed.eval.metrics` — DuckDB SQL over the trajectories: budgets, pass@k, anytime curves;
- :mod:`burnqed.eval.passk` — the unbiased pass@k estimator and its interval;
- :mod:`burnqed.eval.paired` — the exact McNemar test every judged comparison uses, and its verdicts;
- :mod:`burnqed.eval.compare` — iterations × budgets, delta row, newly solved, the learning check;
- :mod:`burnqed.eval.summary` — statistics of any search output (``burnqed summary``);
- :mod:`burnqed.eval.table` — terminal (rich) and markdown tables, labelled complete/partial.
"""
