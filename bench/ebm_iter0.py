"""The EBM on an iteration's trajectories, end to end: embed → train → metrics → search with/without.

One command after the CPU demo has produced iteration 0 (``results/iter_0/search``,
``results/iter_0/search_noise``, ``models/iter_0/merged``):

1. embeds every state of those searches with the iteration's policy (``burnqed.ebm.stage.run_embed``),
2. trains the EBM on them (``run_train``) and prints its held-out rank-1 accuracy against chance
   (``1 / (K + 1)``) and the energy gap,
3. computes the embedding-quality metrics (``run_metrics``): ``centroid_separation`` (and the raw
   ``centroid_l2``), the linear probe, the sibling distance, the effective rank,
4. searches the same theorems (the first ``--limit`` of ``--theorems``) twice with the same seed —
   without the EBM at ``search.temperature`` and with it at ``search.temperature_with_ebm`` (or both at
   ``--temperature``) — and prints both solve rates.

Everything goes under ``--out`` (default ``results/ebm_check``); figures are printed last, one
``name=value`` a line.  The EBM has seen these theorems' proof paths (it was trained on their
iteration-0 search), so the comparison measures ranking, not generalisation to new theorems.

``--smoke`` needs no demo: it builds a tiny iteration 0 of its own in a temporary directory —
generated propositional theorems with known proofs, traced through burnqed's REPL; a tiny random
Llama (``burnqed.policy.tiny``); the real search engine over the real Lean pool (the propositional
REPL), with a stand-in policy that proposes each state's known next tactic among wrong ones — and
runs the four steps on it with ``config/demo.yaml`` shrunk (``SMOKE``), in well under a minute.
Its figures check that the pipeline runs, not what it measures.

Prints (last, one ``name=value`` a line; also ``statuses_no_ebm``/``statuses_ebm`` as JSON):

- ``states_embedded``: unique states of the searches embedded
- ``groups``: InfoNCE groups (one positive, ``ebm.negatives`` negatives)
- ``heldout_groups``: groups of held-out theorems
- ``heldout_rank1``: fraction of held-out groups whose positive has the lowest energy
- ``chance_rank1``: ``1 / (negatives + 1)``
- ``heldout_energy_gap``: mean negative minus positive energy, held-out groups
- ``train_rank1``: rank-1 accuracy on the training groups
- ``temperature``: the head's learned InfoNCE temperature
- ``centroid_l2``: L2 distance between the proof-path and off-path states' embedding centroids
- ``probe_balanced_accuracy``: linear probe (proof path vs off path), on held-out theorems
- ``sibling_distance_ratio``: mean distance of states sharing a parent over that of random pairs
- ``effective_rank``: effective rank of the embeddings' variance spectrum
- ``solve_rate_no_ebm``: solve rate of the search without the EBM
- ``temperature_no_ebm``: its sampling temperature
- ``solve_rate_ebm``: solve rate of the search with the EBM
- ``temperature_ebm``: its sampling temperature

Example::

    python bench/ebm_iter0.py --configfile config/demo.yaml
    python bench/ebm_iter0.py --configfile config/demo.yaml --limit 30 --out results/ebm_check
    python bench/ebm_iter0.py --smoke     # no demo needed: a tiny input of its own (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml

from burnqed.config import LeanConfig, SearchConfig, load_params
from burnqed.data.prompt import STOP, format_example, format_prompt
from burnqed.ebm.stage import run_embed, run_metrics, run_train
from burnqed.policy import Candidate, Generation, SamplingParams, dedup_candidates
from burnqed.search.stage import run as run_search
from burnqed.search.stage import search_to_dir
from burnqed.theorems import read_theorems, write_theorems

# --smoke: config/demo.yaml shrunk to seconds (validated like any overlay).
SMOKE = {
    "lean": {"workers": 1},
    "policy": {"max_new_tokens": 16},
    "search": {"max_nodes": 6, "num_candidates": 4, "concurrency": 8, "batch_generate_size": 8,
               "checkpoint_every": 8},
    "ebm": {"hidden_sizes": [32, 16], "negatives": 3, "steps": 30, "batch_size": 8,
            "log_every": 10, "save_every": 10, "embed_batch_size": 16},
}  # fmt: skip
SMOKE_THEOREMS = 24


class KnownProofs:
    """A stand-in policy for the smoke input: at a state whose next step it traced it proposes
    that tactic (with probability ``p``) among wrong ones; elsewhere wrong ones only.  Seeded."""

    def __init__(self, pairs: list[tuple[str, str]], *, seed: int, p: float = 0.7) -> None:
        self.next = {format_prompt(state): tactic for state, tactic in pairs}
        self.tactics = sorted({tactic for _, tactic in pairs})
        self.rng = random.Random(seed)
        self.p = p

    def generate(
        self, prompts: Sequence[str], params: SamplingParams, seeds=None
    ) -> list[Generation]:
        out = []
        for prompt in prompts:
            wrong = self.rng.sample(self.tactics, k=min(params.n, len(self.tactics)))
            raw = [Candidate(t, -1.0 - self.rng.random(), 4) for t in wrong]
            if prompt in self.next and self.rng.random() < self.p:
                raw.append(Candidate(self.next[prompt], -0.5 * self.rng.random(), 4))
            out.append(dedup_candidates(raw))
        return out

    def embed(self, texts: Sequence[str]):
        raise NotImplementedError("the smoke's searches need no embeddings")

    def close(self) -> None:
        pass


def smoke_input(root: Path, params: dict, seed: int) -> tuple[Path, Path, Path]:
    """A tiny iteration 0 under ``root``: (iteration dir with search/ and search_noise/, policy
    model, theorem file).  See the module docstring."""
    from burnqed.data.proplogic import generate_theorems, traced_pairs
    from burnqed.lean.pool import LeanPool
    from burnqed.policy.tiny import build_tiny_model

    theorems = generate_theorems(SMOKE_THEOREMS, seed=seed, min_depth=2, max_depth=4)
    table = traced_pairs(theorems, source="smoke")
    pairs = list(zip(table.column("state_before").to_pylist(),
                     table.column("tactic").to_pylist(), strict=True))  # fmt: skip
    write_theorems(root / "theorems.jsonl", theorems)
    corpus = [ex["prompt"] + ex["completion"] for ex in (format_example(s, t) for s, t in pairs)]
    model = build_tiny_model(root / "model", corpus, hidden_size=32, heads=1,
                             intermediate_size=64, seed=seed)  # fmt: skip
    cfg = SearchConfig.from_dict(params["search"])
    sampling = SamplingParams(n=cfg.num_candidates, temperature=1.0, stop=STOP)

    async def search(out: Path, policy_seed: int) -> None:
        async with LeanPool(LeanConfig.from_dict(params["lean"])) as env:
            await search_to_dir(theorems, KnownProofs(pairs, seed=policy_seed), env, cfg, out,
                                sampling=sampling)  # fmt: skip

    iteration = root / "iter_0"
    asyncio.run(search(iteration / "search", seed))
    asyncio.run(search(iteration / "search_noise", seed + 1))
    return iteration, model, root / "theorems.jsonl"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--params", default="params.yaml")
    p.add_argument("--configfile", action="append", default=[])
    p.add_argument("--iteration-dir", type=Path, default=Path("results/iter_0"),
                   help="holds search/ and search_noise/ (default: %(default)s)")  # fmt: skip
    p.add_argument("--model", default="models/iter_0/merged", help="policy (default: %(default)s)")
    p.add_argument("--theorems", type=Path, default=Path("data/theorems/search_pool.jsonl"))
    p.add_argument("--limit", type=int, default=30, help="theorems searched twice (default: 30)")
    p.add_argument("--temperature", type=float, default=None,
                   help="one sampling temperature for both searches (default: the configured "
                   "search.temperature / search.temperature_with_ebm)")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("results/ebm_check"))
    p.add_argument("--device", default="auto", help="EBM training device")
    p.add_argument("--smoke", action="store_true",
                   help="a tiny input of its own in a temporary directory, no demo needed (CI)")  # fmt: skip
    args = p.parse_args()
    logging.basicConfig(
        level=logging.WARNING if args.smoke else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.smoke:
        bench(args, load_params(args.params, args.configfile))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "smoke.yaml").write_text(yaml.safe_dump(SMOKE), encoding="utf-8")
        overlays = [*(args.configfile or ["config/demo.yaml"]), str(root / "smoke.yaml")]
        params = load_params(args.params, overlays)
        args.iteration_dir, args.model, args.theorems = smoke_input(
            root, params, int(params.get("seed", 0))
        )
        args.model, args.out, args.limit = str(args.model), root / "ebm_check", min(args.limit, 4)
        bench(args, params)


def bench(args: argparse.Namespace, params: dict) -> None:
    """The four steps (module docstring) on ``args``' inputs; prints the figures."""
    seed = int(params.get("seed", 0))
    out = args.out
    searches = [args.iteration_dir / "search", args.iteration_dir / "search_noise"]
    searches = [s for s in searches if s.exists()]

    emb = run_embed(searches=searches, model=args.model, out=out / "embeddings",
                    cfg=params["ebm"], policy=params["policy"])  # fmt: skip
    meta = run_train(searches=searches, embeddings=out / "embeddings", out=out / "ebm",
                     cfg=params["ebm"], split=params["split"], seed=seed,
                     device=args.device)  # fmt: skip
    metrics = run_metrics(searches=searches, embeddings=out / "embeddings",
                          out=out / "ebm_metrics.json", plots=out / "ebm_plots", cfg=params["ebm"],
                          split=params["split"], ebm=out / "ebm", seed=seed)  # fmt: skip

    theorems = list(read_theorems(args.theorems))[: args.limit]
    write_theorems(out / "theorems.jsonl", theorems)
    rates = {}
    for name, ebm in (("no_ebm", None), ("ebm", out / "ebm")):
        target = out / f"search_{name}"
        manifest = run_search(theorems=out / "theorems.jsonl", model=args.model, out=target,
                              cfg=params["search"], lean=params["lean"], policy=params["policy"],
                              ebm=ebm, temperature=args.temperature, seed=seed,
                              resume=target.exists(), log_dir=out / "logs" / name)  # fmt: skip
        rates[name] = manifest

    figures = {
        "states_embedded": emb["states"],
        "groups": meta["data"]["groups"],
        "heldout_groups": meta["heldout"]["groups"],
        "heldout_rank1": meta["heldout"]["rank1"],
        "heldout_tie_rate": meta["heldout"]["tie_rate"],
        "chance_rank1": meta["chance"],
        "heldout_energy_gap": meta["heldout"]["energy_gap"],
        "train_rank1": meta["train"]["rank1"],
        "temperature": meta["temperature"],
        "centroid_separation": metrics["centroid_separation"],
        "centroid_l2": metrics["centroid_l2"],
        "probe_balanced_accuracy": metrics["linear_probe"]["balanced_accuracy"],
        "sibling_distance_ratio": metrics["sibling_distance"]["ratio"],
        "effective_rank": metrics["variance_spectrum"]["effective_rank"],
    }
    for name, m in rates.items():
        figures[f"solve_rate_{name}"] = m["solve_rate"]
        figures[f"temperature_{name}"] = m["sampling"]["temperature"]
        figures[f"statuses_{name}"] = json.dumps(m["statuses"], sort_keys=True)
    (out / "summary.json").write_text(json.dumps(figures, indent=2) + "\n")
    for k, v in figures.items():
        print(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}")


if __name__ == "__main__":
    main()
