"""Synthetic EBM data: random state embeddings with a planted linear signal, as InfoNCE groups."""

from __future__ import annotations

import numpy as np

from burnqed.ebm.groups import KINDS, Groups


def planted(
    *, theorems: int = 60, per_theorem: int = 8, negatives: int = 7, dim: int = 16,
    margin: float = 3.0, shuffled: bool = False, seed: int = 0,
) -> tuple[dict[str, np.ndarray], Groups]:  # fmt: skip
    """Positives are ``N(0, I) + margin · w`` (``w`` a fixed unit direction), negatives ``N(0, I)``.

    With ``shuffled`` the positive slot holds a state drawn like the negatives: no signal at all.
    The last 20 % of theorems are held out.
    """
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(dim)
    w /= np.linalg.norm(w)
    vectors: dict[str, np.ndarray] = {}
    states, goals, theorem, held, depth = [], [], [], [], []
    for t in range(theorems):
        goal = f"g{t}"
        vectors[goal] = rng.standard_normal(dim).astype(np.float32)
        for j in range(per_theorem):
            row = []
            for slot in range(negatives + 1):
                h = f"s{t}_{j}_{slot}"
                v = rng.standard_normal(dim)
                if slot == 0 and not shuffled:
                    v = v + margin * w
                vectors[h] = v.astype(np.float32)
                row.append(h)
            states.append(row)
            goals.append(goal)
            theorem.append(f"t{t}")
            held.append(t >= int(0.8 * theorems))
            depth.append(j % 6)
    groups = Groups(
        states=states, goals=goals, depth=np.array(depth), theorem=theorem,
        heldout=np.array(held), kind_counts={k: 0 for k in KINDS},
    )  # fmt: skip
    return vectors, groups
