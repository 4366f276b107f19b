"""What the instruction-set pin costs: the demo's tiny model trained and sampled under ``cpu_isa:
avx2`` and ``native`` (``burnqed/isa.py``), each in fresh processes, alternating.

The pin must be in the environment before torch is imported, so every measurement is a child
process (``--child SETTING``) that applies the setting, builds the demo-sized tiny Llama (SPEC §4.4:
hidden 128, 2 layers, 4 heads, FFN 336) in a temporary directory, trains it ``--steps`` steps of
the real loop (``burnqed.train.base.train_from_scratch``, batch 32) and samples ``--states`` ×
``--n`` candidates through the search's backend (``TransformersGenerator``, best of
``--repeats``), on ``--threads`` torch threads.  The parent runs ``--rounds`` rounds of both
settings, interleaved so a load change hits both, and reports medians.  On a CPU whose best level
is AVX2 the two settings run the same kernels (the figures differ by noise only); on an AVX-512
CPU ``avx2`` gives up the wider vectors.

Prints (the kernel level each setting ran at first; these figures last, one ``name=value`` a line):

- ``avx2_train_step_ms``: median milliseconds per training step under ``avx2``
- ``native_train_step_ms``: the same under ``native``
- ``avx2_candidates_per_s``: median sampled candidates per second under ``avx2``
- ``native_candidates_per_s``: the same under ``native``
- ``train_cost``: ``avx2`` over ``native`` step time (1.00: the pin costs nothing)
- ``sampling_cost``: ``native`` over ``avx2`` candidate rate (1.00: the pin costs nothing)

Example::

    python bench/isa.py                  # 40 steps, 8 states x 4 candidates, 3 rounds, 1 thread
    python bench/isa.py --smoke          # a 32-wide model, a few steps: that it runs (CI)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STATES = "pqrs"
TACTICS = ("intro h", "exact h", "constructor", "cases h with hp hq", "left", "right", "assumption")


def states(count: int) -> list[str]:
    """Distinct propositional proof states, printed the way Lean prints them."""
    out = []
    for i in range(count):
        a, b = STATES[i % 4], STATES[(i + 1) % 4]
        hyps = "".join(f"h{k} : {a} → {b}\n" for k in range(i % 5))
        out.append(f"{a} {b} : Prop\n{hyps}⊢ {a} ∧ {b} → {b} ∨ {a}")
    return out


def child(setting: str, args: argparse.Namespace) -> dict:
    """One measurement under ``setting``, in this fresh process (torch not yet imported)."""
    from burnqed.isa import apply_pin

    apply_pin(setting)  # before torch
    import torch

    from burnqed.config import TinyBaseConfig
    from burnqed.data.prompt import format_example, format_prompt
    from burnqed.policy import SamplingParams, candidate_seeds
    from burnqed.policy.tiny import build_tiny_model
    from burnqed.policy.transformers_backend import TransformersGenerator
    from burnqed.train.base import train_from_scratch
    from burnqed.train.loop import load_tokenizer

    torch.set_num_threads(args.threads)
    examples = [format_example(s, t) for s in states(64) for t in TACTICS]
    cfg = TinyBaseConfig(hidden_size=args.hidden, heads=args.heads, intermediate_size=args.ffn,
                         steps=args.steps, warmup_steps=1, eval_pairs=0)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = build_tiny_model(Path(tmp) / "tiny", [e["prompt"] + e["completion"] for e in examples],
                                hidden_size=args.hidden, heads=args.heads,
                                intermediate_size=args.ffn)  # fmt: skip
        gen = TransformersGenerator(path)
        # Training takes transformers' tokenizer, as the train stage does.
        trained = train_from_scratch(gen.model, load_tokenizer(path), examples, cfg, seed=0)
        gen.model.eval()
        prompts = [format_prompt(s) for s in states(args.states)]
        sampling = SamplingParams(n=args.n, temperature=1.0, max_new_tokens=args.max_new_tokens)
        rates = []
        for r in range(args.repeats):
            seeds = [candidate_seeds(r, "bench", 0, p, args.n) for p in prompts]
            started = time.perf_counter()
            got = sum(g.raw_count for g in gen.generate(prompts, sampling, seeds))
            rates.append(got / (time.perf_counter() - started))
    return {
        "capability": torch.backends.cpu.get_cpu_capability(),
        "train_step_ms": 1e3 * trained.seconds / trained.steps,
        "candidates_per_s": max(rates),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40, help="training steps per measurement")
    p.add_argument("--states", type=int, default=8)
    p.add_argument("--n", type=int, default=4, help="candidates per state")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3, help="best of this many sampling calls")
    p.add_argument("--rounds", type=int, default=3, help="measurements of each setting")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--ffn", type=int, default=336)
    p.add_argument("--smoke", action="store_true", help="tiny sizes: that it runs (CI)")
    p.add_argument("--child", choices=("avx2", "native"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.smoke:
        args.hidden, args.heads, args.ffn, args.steps = 32, 1, 64, 3
        args.states, args.n, args.max_new_tokens, args.repeats, args.rounds = 2, 2, 4, 1, 1
    if args.child:
        print(json.dumps(child(args.child, args)))
        return
    argv = sys.argv[1:]  # the children take the same sizes (--smoke included)
    # The children take the pin from their setting alone, not from this process's environment.
    env = {k: v for k, v in os.environ.items() if not k.startswith("BURNQED_")}
    runs: dict[str, list[dict]] = {"avx2": [], "native": []}
    for _ in range(args.rounds):
        for setting in runs:
            out = subprocess.run(
                [sys.executable, __file__, *argv, "--child", setting],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            runs[setting].append(json.loads(out.stdout.strip().splitlines()[-1]))
    median = {
        s: {k: statistics.median(r[k] for r in rs) for k in ("train_step_ms", "candidates_per_s")}
        for s, rs in runs.items()
    }
    print(f"model: hidden {args.hidden}, 2 layers, {args.heads} heads, FFN {args.ffn}; "
          f"{args.threads} torch thread(s); {args.rounds} round(s) of each setting")  # fmt: skip
    for s, rs in runs.items():
        steps = ", ".join(f"{r['train_step_ms']:.1f}" for r in rs)
        rates = ", ".join(f"{r['candidates_per_s']:.1f}" for r in rs)
        print(f"{s}: kernel level {rs[0]['capability']}; ms/step {steps}; candidates/s {rates}")
    print(f"avx2_train_step_ms={median['avx2']['train_step_ms']:.2f}")
    print(f"native_train_step_ms={median['native']['train_step_ms']:.2f}")
    print(f"avx2_candidates_per_s={median['avx2']['candidates_per_s']:.1f}")
    print(f"native_candidates_per_s={median['native']['candidates_per_s']:.1f}")
    print(f"train_cost={median['avx2']['train_step_ms'] / median['native']['train_step_ms']:.2f}")
    rate = median["native"]["candidates_per_s"] / median["avx2"]["candidates_per_s"]
    print(f"sampling_cost={rate:.2f}")


if __name__ == "__main__":
    main()
