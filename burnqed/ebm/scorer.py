"""The trained EBM on disk (``models/iter_{i}/ebm/``) and as search's value model.

Directory: ``ebm.safetensors`` (the head's weights and buffers), ``ebm.json`` (hyperparameters,
embedding width, the embedding model's digest, data hashes, training and held-out metrics,
determinism settings, provenance), ``metrics.jsonl`` (the training curve) and ``run_info.json``
(when, how long, throughput: the one file besides the metrics that a rerun does not repeat).

:func:`load_value_model` refuses an EBM trained on another model's embeddings — a new LoRA means new
embeddings, and scoring them with an old head gives confident nonsense — with both digests in the
message.  The returned :class:`EBMValueModel` embeds a batch of states through the policy backend
(goal embeddings cached per goal) and returns their energies.  A state's energy is the same alone
or in any batch, by construction: the in-process backend embeds one text per forward, and the head
scores one state per forward (a batched matrix product's rows change with the batch's shape on a
CPU, and search must not depend on how its states were batched).  The goal cache holds exactly what
embedding the goal alone gives, so the order in which goals arrive changes nothing.

Example::

    value = load_value_model(Path("models/iter_1/ebm"), generator)
    value.energies(["⊢ p ∧ q", "⊢ q"], ["⊢ p ∧ q → q ∧ p"] * 2)   # array([e1, e2], dtype=float32)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch.nn.utils import parametrize

from burnqed.config import EBMConfig
from burnqed.data.prompt import embed_states
from burnqed.ebm.embeddings import embedding_model_digest
from burnqed.ebm.head import GoalConditionedEnergyHead
from burnqed.ebm.train import build_head, resolve_device

log = logging.getLogger(__name__)

WEIGHTS = "ebm.safetensors"
META = "ebm.json"


class IncompatibleEmbeddings(ValueError):
    """The EBM was trained on embeddings of another model than the policy in use."""


def save_ebm(out: Path, head: GoalConditionedEnergyHead, meta: Mapping[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    save_file(state, str(out / WEIGHTS))
    (out / META).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")


def load_ebm(path: Path, device: str = "cpu") -> tuple[GoalConditionedEnergyHead, dict]:
    """The head (eval mode) and its metadata from an EBM directory.  A head written before the
    remaining-steps term has no ``remaining_bias``: it only trains (the energy does not read it),
    so such a head loads with the bias at 0; any other missing or unknown weight is an error."""
    path = Path(path)
    for name in (META, WEIGHTS):
        if not (path / name).is_file():
            raise FileNotFoundError(f"{path}: not an EBM directory (no {name})")
    meta = json.loads((path / META).read_text())
    cfg = EBMConfig.from_dict(meta["config"])
    head = build_head(int(meta["dim"]), cfg)
    weights = load_file(str(path / WEIGHTS))
    weights.setdefault("remaining_bias", head.remaining_bias.detach().clone())
    head.load_state_dict(weights)
    return head.to(resolve_device(device)).eval(), meta


class EBMValueModel:
    """:class:`~burnqed.search.value.ValueModel` over a policy backend's ``embed`` and a head."""

    def __init__(
        self,
        head: GoalConditionedEnergyHead,
        generator: Any,
        *,
        batch_size: int = 64,
        meta: Mapping[str, Any] | None = None,
    ):
        self.head = head.eval()
        self.meta = dict(meta or {})  # ebm.json: the fitted energy weight among it
        self.generator = generator
        self.batch_size = batch_size
        self.device = next(head.parameters()).device
        self._goals: dict[str, np.ndarray] = {}  # goal text → embedding, one per theorem
        self.embedded = 0  # states embedded so far (for benchmarks and tests)

    def _embed(self, texts: list[str]) -> np.ndarray:
        """The states' embeddings, each as the policy's prompt for it (burnqed.policy.embedding)."""
        out = [
            embed_states(self.generator, texts[i : i + self.batch_size])
            for i in range(0, len(texts), self.batch_size)
        ]
        self.embedded += len(texts)
        return np.concatenate(out) if out else np.zeros((0, self.head.dim), np.float32)

    @torch.no_grad()
    def energies(self, states: Sequence[str], goals: Sequence[str]) -> np.ndarray:
        if len(states) != len(goals):
            raise ValueError(f"{len(states)} states but {len(goals)} goals")
        if not states:
            return np.zeros(0, np.float32)
        new_goals = sorted({g for g in goals if g not in self._goals})
        uniq = list(dict.fromkeys(states))
        vecs = self._embed(uniq + new_goals)
        self._goals.update(zip(new_goals, vecs[len(uniq) :], strict=True))
        pos = {s: i for i, s in enumerate(uniq)}
        zs = torch.from_numpy(vecs[[pos[s] for s in states]]).to(self.device)  # (n, d)
        zg = torch.from_numpy(np.stack([self._goals[g] for g in goals])).to(self.device)  # (n, d)
        out = np.empty(len(states), np.float32)
        # One state per forward (module docstring); the spectral norms are computed once per call.
        with parametrize.cached():
            for i in range(len(states)):
                out[i] = self.head(zs[i : i + 1], zg[i : i + 1]).float().item()
        return out


def load_value_model(path: Path, generator: Any, *, device: str = "auto") -> EBMValueModel:
    """The EBM at ``path`` as a value model over ``generator``'s embeddings (digests must match)."""
    head, meta = load_ebm(Path(path), device=device)
    trained_on = meta.get("embedding_model_digest")
    policy = embedding_model_digest(generator)
    if trained_on != policy:
        raise IncompatibleEmbeddings(
            f"--ebm {path}: trained on embeddings of model digest {trained_on} "
            f"({meta.get('embedding_model', '?')}), but the policy {generator.model_id} has digest "
            f"{policy}: retrain the EBM on this model's embeddings (burnqed ebm embed + train)"
        )
    log.info(
        "EBM %s: held-out rank-1 %s (chance %s), temperature %.3f",
        path,
        meta.get("heldout", {}).get("rank1"),
        meta.get("chance"),
        head.temperature.item(),
    )
    return EBMValueModel(
        head, generator, batch_size=int(meta["config"].get("embed_batch_size", 64)), meta=meta
    )
