"""Replay (``burnqed replay``, issue 30 §1-2, issue 44 §6): a recorded eval's search run again under
another priority, its answers from the recording (:mod:`burnqed.search.recorded`), scored like an
eval.

- :mod:`burnqed.replay.stage` — ``run``, a recipe of steps: setup, load the recording, check,
  replay (the search, the decisions, the oracle ceiling), score, write the eval JSON of
  ``kind: burnqed replay``;
- :mod:`burnqed.replay.checks` — what a replay must share with its recording (order, sampling,
  model digest, search settings digest), each refused in one line unless allowed;
- :mod:`burnqed.replay.coverage` — what a replay without ``--live`` can say: its coverage, its effect
  on the covered theorems, and the bound (it cannot gain at the recording's budget);
- :mod:`burnqed.replay.decisions` — decisions and frontier top-1 with a bootstrap standard error.
"""
