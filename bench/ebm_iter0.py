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

Example::

    python bench/ebm_iter0.py --configfile config/demo.yaml
    python bench/ebm_iter0.py --configfile config/demo.yaml --limit 30 --out results/ebm_check
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from burnqed.config import load_params
from burnqed.ebm.stage import run_embed, run_metrics, run_train
from burnqed.search.stage import run as run_search
from burnqed.theorems import read_theorems, write_theorems


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
    args = p.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    params = load_params(args.params, args.configfile)
    seed = int(params.get("seed", 0))
    out = args.out
    searches = [args.iteration_dir / "search", args.iteration_dir / "search_noise"]
    searches = [s for s in searches if s.exists()]

    emb = run_embed(searches=searches, model=args.model, out=out / "embeddings",
                    cfg=params["ebm"], policy=params["policy"])  # fmt: skip
    meta = run_train(searches=searches, embeddings=out / "embeddings", out=out / "ebm",
                     cfg=params["ebm"], seed=seed, device=args.device)  # fmt: skip
    metrics = run_metrics(searches=searches, embeddings=out / "embeddings",
                          out=out / "ebm_metrics.json", plots=out / "ebm_plots", cfg=params["ebm"],
                          ebm=out / "ebm", seed=seed)  # fmt: skip

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
