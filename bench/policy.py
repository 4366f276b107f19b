"""Batched vs one-at-a-time generation throughput of the in-process policy on the tiny model.

Search batches the generation requests of all active proof searches into one call
(``search.batch_generate_size``); this measures what that buys: candidates per second for one call
of 16 states × 4 candidates against 64 calls of 1 state × 1 candidate, on the demo-sized tiny Llama
(SPEC §4.4), built in a temporary directory.

Prints (parameters first; these figures last, one ``name=value`` a line):

- ``batched_candidates_per_s``: candidates per second, one call of all states
- ``single_candidates_per_s``: candidates per second, one call per candidate
- ``batched_tokens_per_s``: generated tokens per second, batched
- ``single_tokens_per_s``: generated tokens per second, one at a time
- ``batched_speedup``: the ratio of the two candidate rates

Example::

    python bench/policy.py                       # demo size, 32 new tokens, best of 3
    python bench/policy.py --hidden 64 --heads 2 --max-new-tokens 16
    python bench/policy.py --smoke               # a 32-wide model, 4 states: that it runs (CI)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from pathlib import Path

from burnqed.data.prompt import STOP, format_example, format_prompt
from burnqed.policy import SamplingParams
from burnqed.policy.tiny import build_tiny_model
from burnqed.policy.transformers_backend import TransformersGenerator

VARIABLES = "pqrs"
TACTICS = ("intro h", "exact h", "constructor", "cases h with hp hq", "left", "right", "assumption")


def states(count: int) -> list[str]:
    """Distinct propositional proof states of varying length, printed the way Lean prints them."""
    out = []
    for i in range(count):
        a, b = VARIABLES[i % 4], VARIABLES[(i + 1) % 4]
        hyps = "".join(f"h{k} : {a} → {b}\n" for k in range(i % 5))
        out.append(f"{a} {b} : Prop\n{hyps}⊢ {a} ∧ {b} → {b} ∨ {a}")
    return out


def measure(
    gen: TransformersGenerator, batches: list[tuple[list[str], SamplingParams]]
) -> tuple[float, int, int]:
    """Wall seconds, raw candidates and generated tokens over the given generate calls."""
    started = time.perf_counter()
    candidates = tokens = 0
    for prompts, params in batches:
        for group in gen.generate(prompts, params):
            candidates += group.raw_count
            tokens += group.tokens
    return time.perf_counter() - started, candidates, tokens


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--ffn", type=int, default=336)
    p.add_argument("--states", type=int, default=16)
    p.add_argument("--n", type=int, default=4, help="candidates per state in the batched call")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3, help="best of this many runs of each mode")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: that it runs (CI)")
    args = p.parse_args()
    if args.smoke:
        args.hidden, args.heads, args.ffn, args.states = 32, 1, 64, 4
        args.n, args.max_new_tokens, args.repeats = 2, 8, 1
    logging.basicConfig(level=logging.WARNING)

    prompts = [format_prompt(s) for s in states(args.states)]
    corpus = [
        ex["prompt"] + ex["completion"]
        for s in states(64)
        for ex in (format_example(s, t) for t in TACTICS)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(
            Path(tmp) / "tiny",
            corpus,
            hidden_size=args.hidden,
            heads=args.heads,
            layers=args.layers,
            intermediate_size=args.ffn,
        )
        gen = TransformersGenerator(path)
        params = sum(p.numel() for p in gen.model.parameters())

        def sampling(n: int, seed: int) -> SamplingParams:
            return SamplingParams(
                n=n,
                temperature=args.temperature,
                max_new_tokens=args.max_new_tokens,
                stop=STOP,
                seed=seed,
            )

        total = args.states * args.n
        batched_plan = [(prompts, sampling(args.n, 0))]
        # The same states, each asked for one candidate at a time.
        single_plan = [([prompts[k % args.states]], sampling(1, k)) for k in range(total)]
        measure(gen, [(prompts[:2], sampling(2, 0))])  # warm-up (first-call allocations)
        batched, single = [], []
        for _ in range(args.repeats):
            batched.append(measure(gen, batched_plan))
            single.append(measure(gen, single_plan))

    def best(runs: list[tuple[float, int, int]]) -> tuple[float, float]:
        secs, cands, toks = min(runs)
        return cands / secs, toks / secs

    b_cps, b_tps = best(batched)
    s_cps, s_tps = best(single)
    print(
        f"model: tiny Llama, {params} params, hidden {args.hidden}, {args.layers} layers, {args.heads} heads"
    )
    print(
        f"batched: 1 call of {args.states} states x {args.n} candidates; single: {total} calls of 1 x 1"
    )
    print(
        f"max_new_tokens {args.max_new_tokens}, temperature {args.temperature}, best of {args.repeats}"
    )
    print(
        f"median batched seconds {statistics.median(r[0] for r in batched):.3f}, "
        f"single seconds {statistics.median(r[0] for r in single):.3f}"
    )
    print(f"batched_candidates_per_s={b_cps:.1f}")
    print(f"single_candidates_per_s={s_cps:.1f}")
    print(f"batched_tokens_per_s={b_tps:.1f}")
    print(f"single_tokens_per_s={s_tps:.1f}")
    print(f"batched_speedup={b_cps / s_cps:.2f}")


if __name__ == "__main__":
    main()
