"""Training the energy head: InfoNCE over (1 positive, K negatives), health metrics, aborts, resume.

The loss is cross-entropy over ``−energy`` of each group with the positive as the target: the head's
temperature is the only scale (no InfoNCE temperature of its own); beside it, with weight
``ebm.remaining_steps_weight``, the Huber error between the positive's energy plus a learned level
and its remaining proof steps (:func:`value_loss`, shared with joint training): a distance-to-proof
target, as HunyuanProver's distance critic and LeanProgress use.  InfoNCE alone only asks the
positive to sit below its group, and the groups' negatives are mostly dead ends, so the head
learned "proof path or dead end" — which ranked the search's same-depth choices worse than the
log-prob; the second term asks every proof-path state for its distance to the proof in energy
units of one step, which orders states of one depth by how far each is from done
(docs/value-model.md has the measurements).  The level
(:meth:`~burnqed.ebm.head.GoalConditionedEnergyHead.remaining_steps`, learning at the
temperature's rate) is free because InfoNCE is blind to it: regressed on the steps with no level
of its own, the energy held the temperature where the steps' level put it, and joint training's
toy energy span stayed at 0.7 nats where 1 is needed.  Every ``log_every`` steps a record
goes to ``metrics.jsonl``: the batch loss, and on up to 1,024 training groups (eval mode) the energy
gap (mean negative − positive energy), rank-1 accuracy (the positive has the lowest energy; when it
shares the lowest energy with others, ``t`` candidates in all, it counts ``1/t`` — what a random
tie-break would score, so collapsed or truncated embeddings score chance, not 100 %) and the tie
rate (groups whose lowest energy is shared), overall and by depth bucket, plus the temperature; the
held-out groups are measured the same way.

Health: the temperature learns at its own rate (:func:`make_optimizer`) and is bounded by
``temperature_min`` and ``temperature_max`` (pinned there: its gradient is zero).  At its **floor** it
is a warning, recorded as ``temperature_pinned``: a head that ranks its groups drives the temperature
down (issue 30 §3), and what it learned — or over-fitted — is what the held-out metrics and the
report's gates judge; energies bounded by the floor cannot blow up (a non-finite loss stops training).
At its **ceiling** (the energies collapsing: nothing ranked) training stops with
:class:`EBMTrainingError`, naming the step and the last checkpoint (left as it was), when at a metrics
record the held-out InfoNCE loss (the training groups' without held-out ones) has not fallen since the
previous record and its rank-1 is no better than chance (``1/(1+K)`` plus two binomial standard
errors); otherwise that too is a warning.  Steps are seeded by ``(seed, step)`` (batch draw and dropout), so a run
resumed from a checkpoint (weights and AdamW state, safetensors, every ``save_every`` steps) continues
exactly as the uninterrupted run would; a checkpoint of other data, config, seed or code (the
:func:`~burnqed.provenance.code_digest` of this module) is not resumed.  bf16 autocast on CUDA,
float32 on CPU.

Example::

    result = train_head(vectors, groups, EBMConfig(steps=200), work_dir=Path("models/iter_1/ebm.partial"))
    result.heldout["rank1"], result.chance
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from burnqed.config import EBMConfig
from burnqed.ebm.groups import DEPTH_BUCKETS, Groups, chance_bound, depth_bucket
from burnqed.ebm.head import GoalConditionedEnergyHead
from burnqed.provenance import code_digest

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.safetensors"
CHECKPOINT_META = "checkpoint.json"
METRICS = "metrics.jsonl"
EVAL_GROUPS = 1024


class EBMTrainingError(RuntimeError):
    """Training stopped for a health reason (pinned temperature); the message names the step."""


def resolve_device(device: str = "auto") -> torch.device:
    return torch.device("cuda" if device == "auto" and torch.cuda.is_available() else
                        ("cpu" if device == "auto" else device))  # fmt: skip


def build_head(dim: int, cfg: EBMConfig) -> GoalConditionedEnergyHead:
    return GoalConditionedEnergyHead(
        dim,
        hidden_sizes=cfg.hidden_sizes,
        dropout=cfg.dropout,
        temperature_init=cfg.temperature_init,
        temperature_min=cfg.temperature_min,
        temperature_max=cfg.temperature_max,
    )


def make_optimizer(head: GoalConditionedEnergyHead, cfg: EBMConfig) -> torch.optim.AdamW:
    """AdamW over the head: the layers at ``cfg.learning_rate``, the parameters outside spectral
    norm (``log_temperature``, the remaining-steps level ``remaining_bias``) at their own
    ``cfg.temperature_learning_rate`` without weight decay.

    Why its own rate: Adam moves a parameter by about one learning rate per step, so at the layers'
    rate the temperature (the energy's only scale, outside spectral norm) could move ``log T`` by
    0.2 in the demo's 200 steps — the energies stayed at a few hundredths of a nat while the
    log-prob spans nats (issue 30 §3).  Parameter order (and so the optimiser state's order in a
    checkpoint) is ``head.parameters()``'s.

    >>> head = build_head(4, EBMConfig(hidden_sizes=(8,)))
    >>> [g["lr"] for g in make_optimizer(head, EBMConfig(hidden_sizes=(8,))).param_groups]
    [0.0001, 0.05]
    """
    rest, temp = head.parameter_groups()
    return torch.optim.AdamW(
        [{"params": rest}, {"params": temp, "lr": cfg.temperature_learning_rate,
                            "weight_decay": 0.0}],
        lr=cfg.learning_rate,
    )  # fmt: skip


@dataclass(frozen=True)
class IndexedGroups:
    """Groups as row indices into one embedding matrix."""

    states: torch.Tensor  # (G, 1 + K) long
    goals: torch.Tensor  # (G,) long
    depth: np.ndarray  # (G,)
    remaining: torch.Tensor | None = None  # (G,) float: the positive's remaining proof steps

    def __len__(self) -> int:
        return len(self.goals)


def index_groups(groups: Groups, row: Mapping[str, int]) -> IndexedGroups:
    return IndexedGroups(
        states=torch.tensor([[row[h] for h in g] for g in groups.states], dtype=torch.long),
        goals=torch.tensor([row[h] for h in groups.goals], dtype=torch.long),
        depth=np.asarray(groups.depth),
        remaining=torch.from_numpy(np.asarray(groups.remaining, dtype=np.float32))
        if len(groups.remaining) == len(groups)
        else None,
    )


def remaining_correlation(energies: torch.Tensor, remaining: torch.Tensor) -> torch.Tensor:
    """Pearson correlation between positives' energies ``(G,)`` and their remaining proof steps
    ``(G,)`` (0 where either is constant).

    >>> round(float(remaining_correlation(torch.tensor([0.5, 1.0, 2.0]), torch.tensor([1.0, 2.0, 3.0]))), 4)
    0.982
    """
    x = energies.float() - energies.float().mean()
    y = remaining.to(x.device).float()
    y = y - y.mean()
    return (x * y).sum() / (x.norm() * y.norm()).clamp(min=1e-8)


def value_loss(
    head: GoalConditionedEnergyHead, energies: torch.Tensor, remaining: torch.Tensor | None,
    weight: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """``(loss, infonce, remaining_error)`` of groups' energies ``(G, 1 + K)`` by ``head`` (column
    0 the positive): InfoNCE over ``−energy`` plus ``weight`` × the Huber error (smooth L1) of
    the remaining steps ``head`` reads from the positives' energies
    (:meth:`~burnqed.ebm.head.GoalConditionedEnergyHead.remaining_steps`) against their
    remaining proof steps ``(G,)``; None, or a weight of 0: InfoNCE alone.  The decoupled head and
    joint training both train on it.

    >>> head = GoalConditionedEnergyHead(4, hidden_sizes=(8,))
    >>> e = torch.tensor([[1.0, 3.0], [2.0, 0.0]])
    >>> [round(float(x), 4) for x in value_loss(head, e, torch.tensor([1.0, 4.0]), 0.5)]
    [1.5019, 1.1269, 0.75]
    """
    nce = F.cross_entropy(-energies.float(), torch.zeros(len(energies), dtype=torch.long,
                                                         device=energies.device))  # fmt: skip
    if not weight or remaining is None:
        return nce, nce, None
    err = F.smooth_l1_loss(
        head.remaining_steps(energies[:, 0].float()), remaining.to(energies.device).float()
    )
    return nce + weight * err, nce, err


def groups_digest(groups: Groups) -> str:
    h = hashlib.sha256()
    for s, g, t in zip(groups.states, groups.goals, groups.theorem, strict=True):
        h.update(json.dumps([s, g, t]).encode())
    return h.hexdigest()[:16]


def rank1_credit(energies: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group of ``energies`` (G, 1 + K), column 0 the positive: its rank-1 credit (1 when its
    energy is the only lowest, ``1/t`` when ``t`` candidates share the lowest, else 0) and whether
    the lowest energy is shared.

    >>> credit, tied = rank1_credit(np.array([[0.1, 0.5, 0.7], [0.2, 0.2, 0.9], [0.3, 0.3, 0.3]]))
    >>> credit.tolist(), tied.tolist()
    ([1.0, 0.5, 0.3333333333333333], [False, True, True])
    """
    e = np.asarray(energies)
    at_min = e == e.min(1, keepdims=True)  # (G, 1 + K)
    t = np.maximum(at_min.sum(1), 1)  # a NaN row has no minimum: credit 0
    return at_min[:, 0] / t, t > 1


@torch.no_grad()
def evaluate(
    head: GoalConditionedEnergyHead,
    emb: torch.Tensor,
    ig: IndexedGroups,
    *,
    limit: int | None = None,
) -> dict[str, Any]:
    """Rank-1 accuracy and tie rate (overall, by depth bucket) and energy gap of ``ig`` (eval
    mode); ties count as :func:`rank1_credit` says."""
    n = len(ig) if limit is None else min(limit, len(ig))
    if n == 0:
        return {"groups": 0, "rank1": None, "tie_rate": None, "energy_gap": None,
                "loss": None, "sibling_span": None, "rank1_by_depth": {},
                "remaining_corr": None}  # fmt: skip
    was = head.training
    head.eval()
    try:
        energies = head(emb[ig.states[:n]], emb[ig.goals[:n]].unsqueeze(1)).float()  # (n, 1+K)
    finally:
        head.train(was)
    credit, tied = rank1_credit(energies.cpu().numpy())
    gap = (energies[:, 1:].mean(1) - energies[:, 0]).mean().item()
    loss = F.cross_entropy(-energies, torch.zeros(n, dtype=torch.long, device=energies.device))
    # the median as numpy takes it (the mean of the middle two of an even count; torch's is the lower)
    span = float(np.median((energies.max(1).values - energies.min(1).values).cpu().numpy()))
    corr = (None if ig.remaining is None or n < 2 else
            remaining_correlation(energies[:, 0], ig.remaining[:n]).item())  # fmt: skip
    buckets = np.array([depth_bucket(int(d)) for d in ig.depth[:n]])
    by_depth = {
        b: {
            "rank1": float(credit[buckets == b].mean()),
            "tie_rate": float(tied[buckets == b].mean()),
            "groups": int((buckets == b).sum()),
        }
        for b in DEPTH_BUCKETS
        if (buckets == b).any()
    }
    return {
        "groups": n,
        "loss": loss.item(),  # InfoNCE, the training loss in eval mode
        "sibling_span": span,  # median over groups of max − min energy (nats)
        "rank1": float(credit.mean()),
        "tie_rate": float(tied.mean()),
        "energy_gap": gap,
        "rank1_by_depth": by_depth,
        "positive_energy": energies[:, 0].mean().item(),
        "negative_energy": energies[:, 1:].mean().item(),
        # the positives' energies' correlation with their remaining proof steps (value_loss)
        "remaining_corr": corr,
    }


def _optimizer_tensors(opt: torch.optim.Optimizer, params: list[torch.nn.Parameter]) -> dict:
    out = {}
    for i, p in enumerate(params):
        st = opt.state.get(p, {})
        for k, v in st.items():
            out[f"opt.{i}.{k}"] = v.detach().cpu().reshape(-1) if k == "step" else v.detach().cpu()
    return out


def _load_optimizer(opt: torch.optim.Optimizer, params: list, tensors: Mapping) -> None:
    for i, p in enumerate(params):
        st = {k.split(".", 2)[2]: v for k, v in tensors.items() if k.startswith(f"opt.{i}.")}
        if st:
            if "step" in st:
                st["step"] = st["step"].reshape(())
            opt.state[p] = {k: v.to(p.device) for k, v in st.items()}


def save_checkpoint(work_dir: Path, head, opt, step: int, meta: Mapping[str, Any]) -> None:
    params = list(head.parameters())
    tensors = {f"model.{k}": v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    tensors.update(_optimizer_tensors(opt, params))
    tmp = work_dir / f".{CHECKPOINT}.tmp"
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(tmp))
    tmp.replace(work_dir / CHECKPOINT)
    (work_dir / f".{CHECKPOINT_META}.tmp").write_text(json.dumps({**meta, "step": step}, indent=2))
    (work_dir / f".{CHECKPOINT_META}.tmp").replace(work_dir / CHECKPOINT_META)


def load_checkpoint(work_dir: Path, device: str = "cpu") -> tuple[dict, dict, dict]:
    """``(meta, model state_dict, optimizer tensors)`` of the checkpoint in ``work_dir``."""
    meta = json.loads((work_dir / CHECKPOINT_META).read_text())
    tensors = load_file(str(work_dir / CHECKPOINT), device=device)
    model = {k[6:]: v for k, v in tensors.items() if k.startswith("model.")}
    opt = {k: v for k, v in tensors.items() if k.startswith("opt.")}
    return meta, model, opt


def _watched_at(kept: list[str], head, emb, train_g, held_g) -> float:
    """The loss the pin rule watches (held-out, else training) at the last kept record, or of
    ``head`` as it is (a fresh start)."""
    key = "heldout_loss" if len(held_g) else "eval_loss"
    if kept and (v := json.loads(kept[-1]).get(key)) is not None:
        return float(v)
    ev = evaluate(
        head, emb, held_g if len(held_g) else train_g, limit=None if len(held_g) else EVAL_GROUPS
    )
    return float(ev["loss"]) if ev["loss"] is not None else math.inf


def above_chance(ev: Mapping[str, Any], k: int) -> bool:
    """Whether groups of 1 + ``k`` ranked by :func:`evaluate` (``ev``) put the positive first more
    often than chance by two binomial standard errors.

    >>> above_chance({"rank1": 0.5, "groups": 100}, 7), above_chance({"rank1": 0.15, "groups": 100}, 7)
    (True, False)
    """
    n = ev.get("groups") or 0
    return bool(n) and ev["rank1"] > chance_bound(1.0 / (k + 1), n)


def _pinned_error(work_dir: Path, cfg: EBMConfig, done: int, pinned: str, loss: float,
                  before: float, rank1: float) -> EBMTrainingError:  # fmt: skip
    last = work_dir / CHECKPOINT_META
    where = (f"last checkpoint: {work_dir / CHECKPOINT} (step "
             f"{json.loads(last.read_text())['step']})" if last.exists()
             else "no checkpoint was written yet")  # fmt: skip
    bound = cfg.temperature_min if pinned == "floor" else cfg.temperature_max
    return EBMTrainingError(
        f"EBM step {done}: the temperature pinned to its {pinned} ({bound:g}; healthy 0.5–3.0) and "
        f"the watched loss did not fall ({loss:.4f}, {before:.4f} at the previous record), its "
        f"rank-1 ({rank1:.3f}) no better than chance: the "
        f"energies collapsed; {where}. Lower "
        "ebm.learning_rate or check the embeddings (burnqed ebm metrics: centroid_separation)"
    )


@dataclass(frozen=True)
class TrainResult:
    head: GoalConditionedEnergyHead
    steps: int
    train: dict  # evaluate() on the training groups (first 1,024)
    heldout: dict  # evaluate() on every held-out group
    chance: float  # 1 / (K + 1)
    temperature: float
    groups_per_s: float
    resumed_from: int | None


def train_head(
    vectors: Mapping[str, np.ndarray],
    groups: Groups,
    cfg: EBMConfig,
    *,
    work_dir: Path,
    seed: int = 0,
    device: str = "auto",
    data_hash: str | None = None,
) -> TrainResult:
    """Train on ``groups`` (held-out ones measured, never trained on); see the module docstring."""
    work_dir = Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    dev = resolve_device(device)
    hashes = sorted({h for g in groups.states for h in g} | set(groups.goals))
    row = {h: i for i, h in enumerate(hashes)}
    emb = torch.from_numpy(np.stack([vectors[h] for h in hashes]).astype(np.float32)).to(dev)
    train_g = index_groups(groups.subset(~groups.heldout), row)
    held_g = index_groups(groups.subset(groups.heldout), row)
    if len(train_g) == 0:
        raise ValueError("no training groups: every group belongs to a held-out theorem")
    k = train_g.states.shape[1] - 1
    data_hash = data_hash or groups_digest(groups)
    # The resume key: a checkpoint continues only the same data, config and seed under the same
    # code (this module and what it imports: the head, the loss, the optimiser's set-up).
    meta = {"config": cfg.to_dict(), "seed": seed, "data_hash": data_hash, "dim": emb.shape[1],
            "code": code_digest(__name__)}  # fmt: skip

    # The init (weights, spectral-norm vectors) comes from the seed, not from whatever drew from
    # torch's global generator before.
    torch.manual_seed(seed)
    head = build_head(emb.shape[1], cfg).to(dev)
    train_rows = torch.unique(torch.cat([train_g.states.reshape(-1), train_g.goals])).to(dev)
    head.set_input_stats(emb[train_rows])
    if train_g.remaining is not None:
        head.set_remaining_level(train_g.remaining)
    params = list(head.parameters())
    opt = make_optimizer(head, cfg)
    start, resumed = 0, None
    metrics_path = work_dir / METRICS
    if (work_dir / CHECKPOINT_META).exists():
        old, state, opt_tensors = load_checkpoint(work_dir, device=str(dev))
        same = {k: old.get(k) for k in meta} == meta
        if same and old["step"] <= cfg.steps:
            head.load_state_dict(state)
            _load_optimizer(opt, params, opt_tensors)
            start = resumed = int(old["step"])
            log.info("EBM: resuming from the checkpoint at step %d in %s", start, work_dir)
        else:
            log.warning("EBM: %s holds a checkpoint of other data/config: starting over", work_dir)
    # Records after the checkpoint are replayed by this run; keep the file free of duplicates.
    kept = []
    if start and metrics_path.exists():
        kept = [ln for ln in metrics_path.read_text().splitlines()
                if ln.strip() and json.loads(ln).get("step", 0) <= start]  # fmt: skip
    metrics_path.write_text("".join(ln + "\n" for ln in kept))

    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=dev.type == "cuda")
    head.train()
    t0 = time.perf_counter()
    from burnqed.progress import Progress

    bar = Progress(log, "ebm", total=cfg.steps, unit="steps", initial=start)
    loss_v = math.nan
    # The pin rule's reference: the watched loss at the previous record (or at the start).
    watched_before = _watched_at(kept, head, emb, train_g, held_g)
    with metrics_path.open("a", encoding="utf-8") as metrics:
        for step in bar.iter(range(start, cfg.steps)):
            done = step + 1
            g = torch.Generator().manual_seed(seed * 1_000_003 + step)
            batch = torch.randint(len(train_g), (cfg.batch_size,), generator=g)
            torch.manual_seed(seed * 1_000_003 + step)  # dropout
            idx = train_g.states[batch].to(dev)  # (B, 1+K)
            goal = train_g.goals[batch].to(dev)  # (B,)
            with autocast:
                energies = head(emb[idx], emb[goal].unsqueeze(1))  # (B, 1+K)
            rem = None if train_g.remaining is None else train_g.remaining[batch]
            loss, _, _ = value_loss(head, energies, rem, cfg.remaining_steps_weight)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_v = loss.item()
            if not math.isfinite(loss_v):
                raise EBMTrainingError(f"EBM step {done}: loss is {loss_v}")
            if done % cfg.log_every == 0 or done == cfg.steps:
                tr = evaluate(head, emb, train_g, limit=EVAL_GROUPS)
                ho = evaluate(head, emb, held_g)
                watched = ho["loss"] if ho["groups"] else tr["loss"]
                pinned = head.pinned()
                ranks = ho if ho["groups"] else tr
                learned = watched < watched_before or above_chance(ranks, k)
                if pinned == "ceiling" and not learned:
                    raise _pinned_error(work_dir, cfg, done, pinned, watched, watched_before,
                                        ranks["rank1"])  # fmt: skip
                if pinned:
                    log.warning(
                        "EBM step %d: the temperature sits at its %s (%s loss %.4f, %.4f at the "
                        "previous record; rank-1 %.3f): going on", done, pinned,
                        "held-out" if ho["groups"] else "training", watched, watched_before,
                        ranks["rank1"],
                    )  # fmt: skip
                watched_before = watched
                rec = {
                    "step": done,
                    "loss": loss_v,
                    "energy_gap": tr["energy_gap"],
                    "rank1": tr["rank1"],
                    "rank1_by_depth": {b: v["rank1"] for b, v in tr["rank1_by_depth"].items()},
                    "tie_rate": tr["tie_rate"],
                    "tie_rate_by_depth": {
                        b: v["tie_rate"] for b, v in tr["rank1_by_depth"].items()
                    },
                    "heldout_rank1": ho["rank1"],
                    "heldout_tie_rate": ho["tie_rate"],
                    "heldout_energy_gap": ho["energy_gap"],
                    "heldout_loss": ho["loss"],
                    "eval_loss": tr["loss"],
                    "remaining_corr": tr["remaining_corr"],
                    "heldout_remaining_corr": ho["remaining_corr"],
                    "sibling_span": tr["sibling_span"],
                    "temperature": head.temperature.item(),
                    "temperature_pinned": pinned,
                    "elapsed_s": time.perf_counter() - t0,
                }
                metrics.write(json.dumps(rec) + "\n")
                metrics.flush()
                log.info(
                    "EBM step %d: loss %.4f gap %.3f rank-1 %.3f (ties %.1f%%; held-out %s) T %.3f",
                    done, loss_v, tr["energy_gap"], tr["rank1"], 100 * tr["tie_rate"],
                    "—" if ho["rank1"] is None else f"{ho['rank1']:.3f}", rec["temperature"],
                )  # fmt: skip
            if done % cfg.save_every == 0 and done < cfg.steps:
                save_checkpoint(work_dir, head, opt, done, meta)
    bar.close()
    elapsed = time.perf_counter() - t0
    ran = cfg.steps - start
    head.eval()
    return TrainResult(
        head=head,
        steps=cfg.steps,
        train=evaluate(head, emb, train_g, limit=EVAL_GROUPS),
        heldout=evaluate(head, emb, held_g),
        chance=1.0 / (k + 1),
        temperature=head.temperature.item(),
        groups_per_s=ran * cfg.batch_size / max(elapsed, 1e-9),
        resumed_from=resumed,
    )
