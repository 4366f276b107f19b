"""EBM throughput: training groups per second, and states scored per second with embedding included.

- ``train_groups_per_s``: InfoNCE groups (1 positive + ``ebm.negatives``) per second of
  ``burnqed.ebm.train.train_head`` with the ``ebm`` section of the given parameters (default: the
  shipped ``params.yaml``: head 2048 → 1024 → 512, batch 128, K 7), on synthetic embeddings of the
  policy's width.
- ``score_states_per_s``: states per second through search's value model
  (``EBMValueModel.energies``: the policy's ``embed`` + the head) in batches of
  ``search.batch_encode_size`` new states against cached goal embeddings — what search pays per node.
- ``embed_states_per_s``: the embedding alone, for comparison.

The policy is the demo-sized tiny Llama (SPEC §4.4) built in a temporary directory, in-process.
On a machine with CUDA the same figures are measured on the GPU too (its name printed, then each
figure again as ``gpu_<name>``); otherwise ``gpu=none``.

Prints (parameters first; these figures last, one ``name=value`` a line):

- ``train_groups_per_s``: InfoNCE groups per second of training
- ``score_states_per_s``: states per second through the value model (embedding included)
- ``embed_states_per_s``: states per second through the embedding alone

Example::

    python bench/ebm.py                                  # shipped params.yaml sizes, CPU
    python bench/ebm.py --configfile config/demo.yaml    # the demo's small head
    python bench/ebm.py --smoke     # a 32-wide policy, a small head, 2 steps: that it runs (CI)
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from burnqed.config import EBMConfig, SearchConfig, load_params
from burnqed.ebm.groups import KINDS, Groups
from burnqed.ebm.scorer import EBMValueModel
from burnqed.ebm.train import build_head, train_head
from burnqed.policy.tiny import build_tiny_model
from burnqed.policy.transformers_backend import TransformersGenerator

VARIABLES = "pqrs"


def states(count: int, offset: int = 0) -> list[str]:
    """Distinct propositional proof states of varying length, printed the way Lean prints them."""
    out = []
    for i in range(offset, offset + count):
        a, b = VARIABLES[i % 4], VARIABLES[(i // 4 + 1) % 4]
        hyps = "".join(f"h{k} : {a} → {b}\n" for k in range(i % 7))
        out.append(f"{a} {b} : Prop\n{hyps}⊢ {a} ∧ {b} → {b} ∨ {a} -- {i}")
    return out


def synthetic_groups(dim: int, cfg: EBMConfig, n_groups: int) -> tuple[dict, Groups]:
    rng = np.random.default_rng(0)
    k = cfg.negatives
    vectors = {
        f"s{i}": rng.standard_normal(dim).astype(np.float32) for i in range(n_groups * (k + 1))
    }
    vectors.update({f"g{i}": rng.standard_normal(dim).astype(np.float32) for i in range(50)})
    groups = Groups(
        states=[[f"s{g * (k + 1) + j}" for j in range(k + 1)] for g in range(n_groups)],
        goals=[f"g{g % 50}" for g in range(n_groups)],
        depth=np.arange(n_groups) % 6,
        theorem=[f"t{g % 50}" for g in range(n_groups)],
        heldout=np.arange(n_groups) % 50 >= 45,
        kind_counts={x: 0 for x in KINDS},
    )
    return vectors, groups


def bench_device(device: str, gen: TransformersGenerator, cfg: EBMConfig, search: SearchConfig,
                 steps: int, score_states: int) -> dict[str, float]:  # fmt: skip
    dim = gen.hidden_size
    vectors, groups = synthetic_groups(dim, cfg, 2000)
    bench_cfg = EBMConfig.from_dict({**cfg.to_dict(), "steps": steps, "log_every": steps,
                                     "save_every": steps + 1})  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        train_head(vectors, groups, bench_cfg, work_dir=Path(tmp), device=device)  # warm-up
    with tempfile.TemporaryDirectory() as tmp:
        r = train_head(vectors, groups, bench_cfg, work_dir=Path(tmp), device=device)
    head = build_head(dim, cfg).to(device).eval()
    value = EBMValueModel(head, gen, batch_size=cfg.embed_batch_size)
    goals = [s.replace("⊢", "⊢ ¬¬") for s in states(20, 10_000)]
    value.energies(states(search.batch_encode_size, 50_000), goals[: search.batch_encode_size])
    todo = states(score_states)
    t0 = time.perf_counter()
    for i in range(0, len(todo), search.batch_encode_size):
        batch = todo[i : i + search.batch_encode_size]
        value.energies(batch, [goals[j % len(goals)] for j in range(len(batch))])
    score = len(todo) / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(0, len(todo), search.batch_encode_size):
        gen.embed(todo[i : i + search.batch_encode_size])
    embed = len(todo) / (time.perf_counter() - t0)
    return {"train_groups_per_s": r.groups_per_s, "score_states_per_s": score,
            "embed_states_per_s": embed}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--configfile", action="append", default=[])
    p.add_argument("--steps", type=int, default=30, help="training steps timed")
    p.add_argument("--states", type=int, default=256, help="states scored")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: that it runs (CI)")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    torch.set_num_threads(args.threads)
    params = load_params(args.params, args.configfile)
    cfg = EBMConfig.from_dict(params["ebm"])
    search = SearchConfig.from_dict(params["search"])
    hidden, heads, ffn = 128, 4, 336  # the demo's policy (SPEC §4.4)
    if args.smoke:
        hidden, heads, ffn, args.steps, args.states = 32, 1, 64, 2, 8
        cfg = EBMConfig.from_dict({**cfg.to_dict(), "hidden_sizes": [64, 32], "batch_size": 16})
    with tempfile.TemporaryDirectory() as tmp:
        corpus = [*states(200), "intro h", "exact h", "constructor", "cases h", "left", "right"]
        model = build_tiny_model(Path(tmp) / "tiny", corpus, hidden_size=hidden, heads=heads,
                                 intermediate_size=ffn, seed=0)  # fmt: skip
        print(f"policy=tiny Llama hidden {hidden}, 2 layers (in-process, pooling last); "
              f"head={list(cfg.hidden_sizes)} negatives={cfg.negatives} batch={cfg.batch_size} "
              f"batch_encode_size={search.batch_encode_size} steps={args.steps} "
              f"states={args.states} cpu_threads={args.threads}")  # fmt: skip
        gen = TransformersGenerator(model, device="cpu", pooling="last")
        figures = bench_device("cpu", gen, cfg, search, args.steps, args.states)
        for k, v in figures.items():
            print(f"{k}={v:.1f}")
        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            gpu_gen = TransformersGenerator(model, device="cuda", pooling="last")
            print(f"gpu={name}")
            for k, v in bench_device("cuda", gpu_gen, cfg, search, args.steps, args.states).items():
                print(f"gpu_{k}={v:.1f}")
        else:
            print("gpu=none (no CUDA device on this machine; GPU figures not measured)")


if __name__ == "__main__":
    main()
