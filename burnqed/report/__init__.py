"""Reports (SPEC §4.8): markdown + PNG plots from DuckDB SQL over trajectories and eval JSONs, with
go/no-go gates flagged at the top.

- :mod:`burnqed.report.stage` — ``run_iteration`` (``results/iter_{i}/report/``) and ``run_cross``
  (``results/report/``);
- :mod:`burnqed.report.gates` — targets and red lines (``params.yaml`` ``report``), EBM metrics;
- :mod:`burnqed.report.plots` — matplotlib (Agg) figures that render on empty runs too.
"""
