"""Generation throughput of the in-process policy on the tiny model: what batching buys, and what
batch invariance costs.

Search batches the generation requests of all active proof searches into one call
(``search.batch_generate_size``).  The in-process backend samples each prompt of a call with its own
forward passes (its candidates as the batch) and each candidate from its own seeded stream, so a
prompt's candidates do not depend on the other prompts in the call (batch invariance by
construction; ``burnqed/policy/transformers_backend.py``).  Three ways to get the same number of
candidates, on the demo-sized tiny Llama (SPEC §4.4) built in a temporary directory:

- ``invariant``: one call of S states × n candidates through the backend (what search does);
- ``padded``: one left-padded batch of all S·n sequences through ``model.generate`` with one global
  random stream — how the backend sampled before (fast, but a prompt's candidates changed with the
  other prompts in the batch);
- ``single``: S·n calls of 1 state × 1 candidate through the backend (one prompt at a time).

Like for like: no stop strings, so every sample runs to ``max_new_tokens`` or EOS in every mode
(the untrained model rarely emits EOS: the token counts are printed and match).

Prints (parameters first; these figures last, one ``name=value`` a line):

- ``invariant_candidates_per_s``: candidates per second, batch-invariant, one call of all states
- ``padded_candidates_per_s``: candidates per second, one padded batch (the previous sampler)
- ``single_candidates_per_s``: candidates per second, one call per candidate
- ``invariant_tokens_per_s``: generated tokens per second, batch-invariant
- ``padded_tokens_per_s``: generated tokens per second, padded batch
- ``single_tokens_per_s``: generated tokens per second, one at a time
- ``batched_speedup``: invariant over single candidate rates (what batching a call buys)
- ``padded_speedup``: padded over single candidate rates (what the previous sampler bought)
- ``invariance_cost``: padded over invariant candidate rates (how much slower invariance is)

Example::

    python bench/policy.py                       # demo size, 16 states x 4, 32 new tokens, best of 3
    python bench/policy.py --states 32 --n 8     # a demo search's full generation batch
    python bench/policy.py --smoke               # a 32-wide model, 4 states: that it runs (CI)
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from burnqed.data.prompt import format_example, format_prompt
from burnqed.policy import SamplingParams, candidate_seeds
from burnqed.policy.tiny import build_tiny_model
from burnqed.policy.transformers_backend import TransformersGenerator
from burnqed.train.loop import load_tokenizer

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
    gen: TransformersGenerator,
    calls: list[tuple[list[str], SamplingParams, list[list[int]]]],
) -> tuple[float, int, int]:
    """Wall seconds, raw candidates and generated tokens over the given generate calls."""
    started = time.perf_counter()
    candidates = tokens = 0
    for prompts, params, seeds in calls:
        for group in gen.generate(prompts, params, seeds):
            candidates += group.raw_count
            tokens += group.tokens
    return time.perf_counter() - started, candidates, tokens


@torch.inference_mode()
def measure_padded(
    gen: TransformersGenerator, tok: Any, prompts: list[str], params: SamplingParams, seed: int
) -> tuple[float, int, int]:
    """The previous sampler: all prompts left-padded into one batch, ``num_return_sequences = n``,
    one global random stream, ``model.generate``; tokens counted up to the first EOS.  ``tok`` is
    transformers' tokenizer (padding), as that sampler had."""
    started = time.perf_counter()
    enc = tok(prompts, return_tensors="pt", padding=True)
    torch.manual_seed(seed)
    out = gen.model.generate(
        **enc,
        do_sample=True,
        temperature=params.temperature,
        top_p=None,
        top_k=None,
        max_new_tokens=params.max_new_tokens,
        num_return_sequences=params.n,
        eos_token_id=sorted(gen.eos_ids),
        pad_token_id=tok.pad_token_id,
        return_dict_in_generate=True,
    )
    generated = out.sequences[:, enc.input_ids.shape[1] :].tolist()
    tokens = 0
    for row in generated:
        ends = [k for k, t in enumerate(row) if t in gen.eos_ids]
        tokens += ends[0] + 1 if ends else len(row)
    return time.perf_counter() - started, len(generated), tokens


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
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
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
        hf_tok = load_tokenizer(path)  # transformers' own, for the padded sampler
        hf_tok.padding_side = "left"
        params = sum(p.numel() for p in gen.model.parameters())
        torch.set_num_threads(args.threads)
        sampling = SamplingParams(
            n=args.n, temperature=args.temperature, max_new_tokens=args.max_new_tokens
        )
        one = dataclasses.replace(sampling, n=1)

        def seeds(run: int, n: int) -> list[list[int]]:
            return [candidate_seeds(run, "bench", 0, p, n) for p in prompts]

        total = args.states * args.n
        # The same states, each asked for one candidate at a time (the same seeds as the batch).
        single_plan = [
            (
                [prompts[k % args.states]],
                one,
                [[seeds(0, args.n)[k % args.states][k // args.states]]],
            )
            for k in range(total)
        ]
        measure(gen, [(prompts[:2], sampling, seeds(0, args.n)[:2])])  # warm-up (allocations)
        measure_padded(gen, hf_tok, prompts[:2], sampling, 0)
        invariant, padded, single = [], [], []
        for r in range(args.repeats):
            invariant.append(measure(gen, [(prompts, sampling, seeds(r, args.n))]))
            padded.append(measure_padded(gen, hf_tok, prompts, sampling, r))
            single.append(measure(gen, single_plan))

    def best(runs: list[tuple[float, int, int]]) -> tuple[float, float]:
        secs, cands, toks = min(runs)
        return cands / secs, toks / secs

    i_cps, i_tps = best(invariant)
    p_cps, p_tps = best(padded)
    s_cps, s_tps = best(single)
    print(
        f"model: tiny Llama, {params} params, hidden {args.hidden}, {args.layers} layers, "
        f"{args.heads} heads; torch threads {torch.get_num_threads()}"
    )
    print(
        f"invariant and padded: 1 call of {args.states} states x {args.n} candidates; "
        f"single: {total} calls of 1 x 1"
    )
    print(
        f"max_new_tokens {args.max_new_tokens}, temperature {args.temperature}, no stop strings, "
        f"best of {args.repeats}"
    )
    for name, runs in (("invariant", invariant), ("padded", padded), ("single", single)):
        print(
            f"{name}: median {statistics.median(r[0] for r in runs):.3f} s, "
            f"{runs[0][1]} candidates, {runs[0][2]} tokens"
        )
    print(f"invariant_candidates_per_s={i_cps:.1f}")
    print(f"padded_candidates_per_s={p_cps:.1f}")
    print(f"single_candidates_per_s={s_cps:.1f}")
    print(f"invariant_tokens_per_s={i_tps:.1f}")
    print(f"padded_tokens_per_s={p_tps:.1f}")
    print(f"single_tokens_per_s={s_tps:.1f}")
    print(f"batched_speedup={i_cps / s_cps:.2f}")
    print(f"padded_speedup={p_cps / s_cps:.2f}")
    print(f"invariance_cost={p_cps / i_cps:.2f}")


if __name__ == "__main__":
    main()
