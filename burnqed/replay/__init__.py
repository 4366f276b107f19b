"""Replay (``burnqed replay``, issue 30 §1-2): a recorded eval's search run again under another
priority, its answers from the recording (:mod:`burnqed.search.recorded`), scored like an eval.

- :mod:`burnqed.replay.stage` — ``run``: the sampling check, the replay, the oracle ceiling, the
  eval JSON of ``kind: burnqed replay``;
- :mod:`burnqed.replay.decisions` — decisions and frontier top-1 with a bootstrap standard error.
"""
