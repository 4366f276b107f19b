"""The EBM stage for iteration ``i`` ≥ 1: embed, train, measure (SPEC §3, §4.6).

- :func:`run_embed`: every unique state (roots = the theorems' goals included) of the trajectories of
  iterations ``< i`` → ``results/iter_{i}/embeddings/`` (append-only cache, see
  :mod:`burnqed.ebm.embeddings`; ``manifest.json`` written last).
- :func:`run_train`: InfoNCE groups from the same trajectories, the head trained on them →
  ``models/iter_{i}/ebm/``, with the energy's weight fitted on the searches' decisions
  (:mod:`burnqed.ebm.fit`, ``ebm.json``'s ``energy_weight``) (checkpoints in ``ebm.partial/`` until it is done), under
  :func:`burnqed.determinism.deterministic_training`: a rerun (or a resumed run) writes the same
  ``ebm.safetensors`` and ``ebm.json``; throughput and whether it resumed go to ``run_info.json``.
- :func:`run_metrics`: embedding-quality metrics + plots → ``results/iter_{i}/ebm_metrics.json`` and
  ``results/iter_{i}/ebm_plots/``.

Example::

    searches = [Path("results/iter_0/search"), Path("results/iter_0/search_noise")]
    run_embed(searches=searches, model="models/iter_1/merged", out=Path("results/iter_1/embeddings"),
              cfg=params["ebm"], policy=params["policy"])
    run_train(searches=searches, embeddings=Path("results/iter_1/embeddings"),
              out=Path("models/iter_1/ebm"), cfg=params["ebm"], seed=0)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import shutil
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from burnqed.config import EBMConfig, PolicyConfig, SplitConfig
from burnqed.data.prompt import embed_states
from burnqed.determinism import deterministic_training, write_run_info
from burnqed.ebm.embeddings import (
    EmbeddingError,
    embedding_key,
    embedding_model_digest,
    embedding_settings,
    lookup,
    precompute,
    read_cache,
)
from burnqed.ebm.groups import build_groups, decontaminate_states, load_states, trajectory_dirs
from burnqed.provenance import git_commit
from burnqed.split import TheoremSplit

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


def _provenance() -> dict[str, Any]:
    import torch

    return {"git_commit": git_commit(), "python": platform.python_version(),
            "torch": torch.__version__}  # fmt: skip


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _dirs(searches: Sequence[str | Path]) -> list[Path]:
    if not searches:
        raise ValueError("no search output given: the EBM learns from earlier iterations' searches")
    return [d for s in searches for d in trajectory_dirs(s)]


# What a search decided, not when: the tree's columns without the clock-time ones, in tree order.
_TREE_COLUMNS = ("theorem", "attempt", "node_id", "parent_id", "depth", "state_hash", "tactic",
                 "llm_logprob", "ebm_energy", "status", "on_proof_path", "solved", "error",
                 "duplicate_of", "expansion_index")  # fmt: skip


def _search_hashes(dirs: Sequence[Path]) -> dict[str, str | None]:
    """A content digest of each trajectory directory's trees (:data:`_TREE_COLUMNS`, sorted by
    theorem, attempt and node): equal for two runs that searched alike, whatever their timing."""
    import pyarrow as pa

    from burnqed.trajectory import read_nodes

    out = {}
    for d in dirs:
        t = read_nodes(d).table.select(list(_TREE_COLUMNS))
        t = t.sort_by(
            [("theorem", "ascending"), ("attempt", "ascending"), ("node_id", "ascending")]
        )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, t.schema) as writer:
            writer.write_table(t.combine_chunks())
        out[str(d)] = hashlib.sha256(sink.getvalue().to_pybytes()).hexdigest()[:16]
    return out


def decontaminated(
    data, eval_benchmarks: Sequence[str | Path], mode: str, dirs: Sequence[Path]
) -> tuple[Any, dict | None]:
    """``data`` without the theorems whose states state an ``eval_benchmarks`` theorem (refused or
    dropped per ``mode``, :func:`~burnqed.ebm.groups.decontaminate_states`), and the check's JSON."""
    if not eval_benchmarks:
        log.warning(
            "no evaluation benchmark given: the EBM's training states are not decontaminated"
        )
        return data, None
    from burnqed.data.decontam import BenchmarkIndex

    index = BenchmarkIndex.load(eval_benchmarks)
    data, check = decontaminate_states(data, index, mode=mode, where=", ".join(map(str, dirs)))
    return data, check.to_json()


def read_embeddings_manifest(embeddings: Path) -> dict:
    path = Path(embeddings) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no embeddings manifest (run `burnqed ebm embed` first)")
    return json.loads(path.read_text(encoding="utf-8"))


def run_embed(
    *,
    searches: Sequence[str | Path],
    model: str | Path,
    out: Path,
    cfg: Mapping[str, Any],
    policy: Mapping[str, Any],
) -> dict:
    """Embed the missing states of ``searches`` with ``model``; write ``out/manifest.json``."""
    ebm_cfg = EBMConfig.from_dict(cfg)
    policy_cfg = PolicyConfig.from_dict(policy)
    dirs = _dirs(searches)
    data = load_states(dirs)  # bad trajectories fail here, before a model is loaded
    out = Path(out)
    (out / MANIFEST).unlink(missing_ok=True)  # unfinished until this run completes
    from burnqed.policy.backend import open_generator

    with open_generator(policy_cfg, str(model), embeddings=True) as gen:
        digest = embedding_model_digest(gen)
        settings = embedding_settings(gen, policy)
        key = embedding_key(settings)
        stats = precompute(data.texts, partial(embed_states, gen), out, key=key,
                           checkpoint_every=ebm_cfg.checkpoint_every,
                           batch_size=ebm_cfg.embed_batch_size)  # fmt: skip
    manifest = {
        "embedding_model": str(model),
        "embedding_model_digest": digest,
        "embedding_key": key,  # the cache rows these embeddings are (embedding_settings' digest)
        "embedding_settings": settings,
        "pooling": policy_cfg.pooling if policy_cfg.backend == "transformers" else "server",
        "states": stats.requested,
        "cached_before": stats.cached,
        "embedded_this_run": stats.embedded,
        "parts_written": stats.parts_written,
        "corrupt_parts_moved_aside": list(stats.corrupt_parts),
        "dim": stats.dim,
        "theorems": len(data.goal),
        "trajectories": _search_hashes(dirs),
        "skipped_trajectory_parts": data.skipped_parts,
        **_provenance(),
    }
    _write_json(out / MANIFEST, manifest)
    log.info("embeddings: %d states (%d embedded now) → %s", stats.requested, stats.embedded, out)
    return manifest


def _vectors_for(embeddings: Path, data) -> tuple[dict, dict]:
    manifest = read_embeddings_manifest(embeddings)
    if "embedding_key" not in manifest:
        raise EmbeddingError(
            f"{embeddings}: the manifest predates embedding keys: run `burnqed ebm embed` again"
        )
    vectors, bad = read_cache(embeddings, manifest["embedding_key"])
    lookup(vectors, list(data.texts), where=str(embeddings))  # every state must be there
    if bad:
        raise EmbeddingError(
            f"{embeddings}: unreadable part(s) {bad}: run `burnqed ebm embed` again"
        )
    return vectors, manifest


def run_train(
    *,
    searches: Sequence[str | Path],
    embeddings: Path,
    out: Path,
    cfg: Mapping[str, Any],
    split: Mapping[str, Any] | None = None,
    seed: int = 0,
    device: str = "auto",
    eval_benchmarks: Sequence[str | Path] = (),
    decontamination: str = "refuse",
) -> dict:
    """Train the EBM into ``out`` (resuming ``<out>.partial/``); return its metadata.

    Every state of the searches is checked against ``eval_benchmarks`` (up to renaming); a theorem
    with a benchmark goal among its states is refused or dropped (``decontamination``).  The
    held-out theorems are the run's one split's (``split``, :mod:`burnqed.split`)."""
    from burnqed.ebm.fit import fit_energy_weight
    from burnqed.ebm.scorer import save_ebm
    from burnqed.ebm.train import groups_digest, resolve_device, train_head

    started = time.time()
    ebm_cfg = EBMConfig.from_dict(cfg)
    dirs = _dirs(searches)
    data, decontamination_check = decontaminated(
        load_states(dirs), eval_benchmarks, decontamination, dirs
    )
    vectors, emb_manifest = _vectors_for(Path(embeddings), data)
    theorem_split = TheoremSplit.of(split, seed)
    groups = build_groups(data, negatives=ebm_cfg.negatives, split=theorem_split, seed=seed)
    out = Path(out)
    work = out.with_name(out.name + ".partial")
    # The resume key's data part: the groups and the very vectors (their cache key; the code and
    # config are train_head's part of the key).
    data_hash = hashlib.sha256(
        (groups_digest(groups) + emb_manifest["embedding_key"]).encode()
    ).hexdigest()[:16]
    with deterministic_training(seed=seed, device=resolve_device(device).type) as determinism:
        result = train_head(vectors, groups, ebm_cfg, work_dir=work, seed=seed, device=device,
                            data_hash=data_hash)  # fmt: skip
        # search.energy_weight: fitted — out-of-fold energies on the pool's decisions.
        weight = fit_energy_weight(vectors, data, groups, ebm_cfg, dirs=dirs, work=work / "folds",
                                   split=theorem_split, device=device)  # fmt: skip
    meta = {
        "config": ebm_cfg.to_dict(),
        "split": SplitConfig.from_dict(split).to_dict(),
        "seed": seed,
        "dim": result.head.dim,
        "embedding_model": emb_manifest["embedding_model"],
        "embedding_model_digest": emb_manifest["embedding_model_digest"],
        "embedding_key": emb_manifest["embedding_key"],
        "data": {
            "groups_sha256": groups_digest(groups),
            "data_hash": data_hash,
            "trajectories": _search_hashes(dirs),
            # groups, train/held-out groups, dropped positives, negatives by kind
            **groups.counts(),
            "heldout_theorems": sorted(
                set(t for t, h in zip(groups.theorem, groups.heldout, strict=True) if h)
            ),
            "decontamination": decontamination_check,
        },
        "train": result.train,
        "heldout": result.heldout,
        "chance": result.chance,
        "temperature": result.temperature,
        "energy_weight": weight,
        "determinism": determinism,
        **_provenance(),
    }
    save_ebm(work, result.head.cpu(), meta)
    write_run_info(work, started=started, groups_per_s=round(result.groups_per_s, 1),
                   resumed_from_step=result.resumed_from)  # fmt: skip
    for name in ("checkpoint.safetensors", "checkpoint.json"):
        (work / name).unlink(missing_ok=True)
    if out.exists():
        shutil.rmtree(out)
    os.replace(work, out)
    log.info(
        "EBM → %s: held-out rank-1 %s (tie rate %s) vs chance %.3f (%d groups), energy gap %s, "
        "temperature %.3f",
        out, result.heldout["rank1"], result.heldout["tie_rate"], result.chance,
        result.heldout["groups"], result.heldout["energy_gap"], result.temperature,
    )  # fmt: skip
    return meta


def joint_energy_weight(
    head: Any, head_meta: Mapping[str, Any], *, searches: Sequence[str | Path], embeddings: Path,
    embedding_model_digest: str, warm_head: Path | None, seed: int, split: Mapping[str, Any] | None,
    eval_benchmarks: Sequence[str | Path] = (), decontamination: str = "refuse",
) -> dict:  # fmt: skip
    """``search.energy_weight: fitted`` for the head joint training exported (configuration C).

    Fold heads would each be a joint training of the whole adapter, so instead the head scores only
    the pool decisions of theorems it never trained on: held out of joint training
    (``heldout_theorems`` of its meta) and of its warm start's training (configuration A's EBM,
    ``data.heldout_theorems`` of its ``ebm.json``) — both the run's one split (``split``), so one
    set: SFT's validation and test theorems.  Those states are embedded by the merged joint model
    (``embeddings``, checked by digest) as the scorer will embed them
    (:func:`burnqed.ebm.fit.fit_heldout_energy_weight`).
    """
    from burnqed.ebm.fit import fit_heldout_energy_weight
    from burnqed.ebm.scorer import META

    if head_meta.get("heldout_theorems") is None:
        why = "the joint head's meta does not list its held-out theorems (an older adapter)"
        log.warning("energy weight: %s: no fit", why)
        return {"priority": None, "reason": why}
    joint_held = set(head_meta["heldout_theorems"])
    held, warm_held = joint_held, None
    if warm_head is not None:
        warm_meta = json.loads((Path(warm_head) / META).read_text(encoding="utf-8"))
        warm_held = set(warm_meta["data"]["heldout_theorems"])
        held = joint_held & warm_held
    dirs = _dirs(searches)
    data, _ = decontaminated(load_states(dirs), eval_benchmarks, decontamination, dirs)
    vectors, manifest = _vectors_for(Path(embeddings), data)
    if manifest["embedding_model_digest"] != embedding_model_digest:
        # Another model's vectors would give the head energies it never gives in search.
        why = (f"{embeddings} holds embeddings of model digest "
               f"{manifest['embedding_model_digest']}, the head is exported for "
               f"{embedding_model_digest}")  # fmt: skip
        log.warning("energy weight: %s: no fit", why)
        return {"priority": None, "reason": why}
    block = fit_heldout_energy_weight(
        head, vectors, data, EBMConfig.from_dict(head_meta["config"]), dirs=dirs, heldout=held,
        split=TheoremSplit.of(split, seed),
    )  # fmt: skip
    block["heldout_sets"] = {
        "joint_training": len(joint_held),
        "warm_start": None if warm_held is None else len(warm_held),
        "both": len(held),
    }
    return block


def run_fit_features(
    *, searches: Sequence[str | Path], model: str | Path, out: Path, cfg: Mapping[str, Any],
    split: Mapping[str, Any] | None = None, seed: int = 0,
    eval_benchmarks: Sequence[str | Path] = (),
    decontamination: str = "refuse", twin: str | None = None,
) -> dict:  # fmt: skip
    """The feature value of iteration ``i`` (:mod:`burnqed.value.features`): its weights fitted on
    the pool ``searches``' decisions (decontaminated as the EBM's data), tokens counted by
    ``model``'s tokenizer (the policy it will search with), cross-fitted in ``ebm.fit_folds`` folds
    of theorems (the run's split) → ``out/features.json``.  ``twin="depth"``: the depth twin
    instead — the number of open goals and the priority's depth term, fitted the same way
    (:data:`burnqed.value.fit.DEPTH_GRID`)."""
    from burnqed.ebm.fit import decisions_source, pool_decisions
    from burnqed.policy.lean_load import load_tokenizer
    from burnqed.value.features import (
        FEATURES,
        fit_features,
        token_counter,
        write_feature_value,
    )
    from burnqed.value.fit import DEPTH_GRID

    ebm_cfg = EBMConfig.from_dict(cfg)
    dirs = _dirs(searches)
    data, check = decontaminated(load_states(dirs), eval_benchmarks, decontamination, dirs)
    sets, settings = pool_decisions(dirs, set(data.goal))
    tokenizer = load_tokenizer(model)
    if twin not in (None, "depth"):
        raise ValueError(f"twin must be None or 'depth', got {twin!r}")
    depth = twin == "depth"
    block = fit_features(
        sets, token_counter(tokenizer), folds=ebm_cfg.fit_folds,
        split=TheoremSplit.of(split, seed),
        depth_normalisation=settings["depth_normalisation"],
        features=("goals",) if depth else FEATURES, depth_grid=DEPTH_GRID if depth else None,
    )  # fmt: skip
    block["energy_weight"].update(decisions_source(settings))
    meta = write_feature_value(Path(out), {**block, "seed": seed, "twin": twin, "trajectories":
                               _search_hashes(dirs), "decontamination": check}, model=model)  # fmt: skip
    log.info("feature value → %s: weights %s, held-out frontier top-1 %s", out, block["weights"],
             {k: v["rate"] for k, v in block["energy_weight"]["heldout_frontier_top1"].items()})  # fmt: skip
    return meta


def _rank1_where(credit, tied, mask) -> dict:
    """Rank-1 credit and tie rate over the held-out groups ``mask`` selects."""
    n = int(mask.sum())
    return {
        "groups": n,
        "rank1": float(credit[mask].mean()) if n else None,
        "tie_rate": float(tied[mask].mean()) if n else None,
    }


def _rank1_by_depth(credit, tied, depth) -> dict:
    from burnqed.ebm.groups import DEPTH_BUCKETS, depth_bucket

    buckets = np.array([depth_bucket(int(d)) for d in depth])
    return {b: _rank1_where(credit, tied, buckets == b) for b in DEPTH_BUCKETS}


def run_metrics(
    *,
    searches: Sequence[str | Path],
    embeddings: Path,
    out: Path,
    plots: Path,
    cfg: Mapping[str, Any],
    split: Mapping[str, Any] | None = None,
    ebm: Path | None = None,
    seed: int = 0,
) -> dict:
    """Embedding-quality metrics (+ the EBM's held-out energies) → ``out`` JSON and ``plots``."""
    from burnqed.ebm.quality import embedding_metrics, group_energies, plot
    from burnqed.ebm.train import rank1_credit

    ebm_cfg = EBMConfig.from_dict(cfg)
    dirs = _dirs(searches)
    data = load_states(dirs)
    vectors, emb_manifest = _vectors_for(Path(embeddings), data)
    theorem_split = TheoremSplit.of(split, seed)
    metrics, arrays = embedding_metrics(vectors, data, seed=seed, split=theorem_split)
    energies = None
    if ebm is not None:
        from burnqed.ebm.scorer import load_ebm

        head, meta = load_ebm(Path(ebm))
        if meta["embedding_model_digest"] != emb_manifest["embedding_model_digest"]:
            raise ValueError(
                f"{ebm}: trained on model digest {meta['embedding_model_digest']}, the embeddings "
                f"{embeddings} are of {emb_manifest['embedding_model_digest']}"
            )
        groups = build_groups(data, negatives=ebm_cfg.negatives, split=theorem_split, seed=seed)
        held = groups.subset(groups.heldout)
        energies = group_energies(head, vectors, held)
        credit, tied = rank1_credit(energies) if len(held) else (None, None)
        metrics["ebm"] = {
            "path": str(ebm),
            "heldout_groups": len(held),
            # a tie among t candidates counts 1/t (burnqed.ebm.train.rank1_credit)
            "heldout_rank1": float(credit.mean()) if len(held) else None,
            "heldout_tie_rate": float(tied.mean()) if len(held) else None,
            "chance": 1 / (ebm_cfg.negatives + 1),
            "positive_energy_mean": float(energies[:, 0].mean()) if len(held) else None,
            "negative_energy_mean": float(energies[:, 1:].mean()) if len(held) else None,
            "temperature": head.temperature.item(),
            # by the positive's depth (burnqed.ebm.groups.DEPTH_BUCKETS), and depth >= 4 apart:
            # the states the reproduced system measured its value model on (value-model-v2.md §5)
            "heldout_rank1_by_depth": _rank1_by_depth(credit, tied, held.depth)
            if len(held)
            else {},
            "heldout_rank1_depth_ge4": _rank1_where(credit, tied, np.asarray(held.depth) >= 4)
            if len(held)
            else {"groups": 0, "rank1": None, "tie_rate": None},
        }
    metrics["embedding_model"] = emb_manifest["embedding_model"]
    metrics["embedding_model_digest"] = emb_manifest["embedding_model_digest"]
    metrics["trajectories"] = [str(d) for d in dirs]
    metrics["plots"] = [str(p) for p in plot(arrays, energies, Path(plots))]
    metrics.update(_provenance())
    _write_json(Path(out), metrics)
    log.info(
        "embedding metrics → %s: centroid separation %s (raw centroid_l2 %s), probe balanced "
        "accuracy %s, effective rank %.1f",
        out, metrics["centroid_separation"], metrics["centroid_l2"],
        metrics["linear_probe"]["balanced_accuracy"],
        metrics["variance_spectrum"]["effective_rank"],
    )  # fmt: skip
    return metrics
