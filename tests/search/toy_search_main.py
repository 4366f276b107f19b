"""Run the search stage's directory logic (``search_to_dir`` under ``run_until_signalled``) with the
toy fakes, as a separate process the resume tests can SIGTERM or kill -9.

Example::

    python -m tests.search.toy_search_main OUT --theorems 40 --latency 0.002 [--resume]
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from burnqed.config import SearchConfig
from burnqed.policy import SamplingParams
from burnqed.search.stage import SearchTerminated, run_until_signalled, search_to_dir
from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--theorems", type=int, default=40)
    p.add_argument("--latency", type=float, default=0.0)
    p.add_argument("--checkpoint-every", type=int, default=5)
    p.add_argument("--resume", action="store_true")
    args = p.parse_args()
    logging.basicConfig(
        level=logging.DEBUG, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    cfg = SearchConfig(
        max_nodes=40,
        max_depth=30,
        num_candidates=4,
        concurrency=4,
        checkpoint_every=args.checkpoint_every,
        timeout_s=600,
        expansions_per_step=1,
    )
    theorems = toy_theorems(args.theorems, seed=5, low=3, high=14)
    coro = search_to_dir(
        theorems,
        RandomToyPolicy(seed=9),
        ToyEnv(latency_s=args.latency),
        cfg,
        args.out,
        sampling=SamplingParams(n=cfg.num_candidates, temperature=cfg.temperature),
        resume=args.resume,
    )
    try:
        run_until_signalled(coro)
    except SearchTerminated as e:
        return e.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
