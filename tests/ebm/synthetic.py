"""Synthetic EBM data: random state embeddings with a planted linear signal, as InfoNCE groups."""

from __future__ import annotations

import numpy as np

from burnqed.ebm.groups import KINDS, Groups


def planted(
    *, theorems: int = 60, per_theorem: int = 8, negatives: int = 7, dim: int = 16,
    margin: float = 3.0, shuffled: bool = False, seed: int = 0, remaining: bool = False,
) -> tuple[dict[str, np.ndarray], Groups]:  # fmt: skip
    """Positives are ``N(0, I) + margin · w`` (``w`` a fixed unit direction), negatives ``N(0, I)``.

    With ``shuffled`` the positive slot holds a state drawn like the negatives: no signal at all.
    With ``remaining`` each group's positive has ``1 + depth % 6`` remaining proof steps, planted
    as ``margin · steps · u`` (``u`` another unit direction; each negative gets 1–6 such steps at
    random), and ``Groups.remaining`` holds them.
    The last 20 % of theorems are held out.
    """
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(dim)
    w /= np.linalg.norm(w)
    u = rng.standard_normal(dim)
    u -= (u @ w) * w
    u /= np.linalg.norm(u)
    steps: list[float] = []
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
                if remaining:  # the negatives' at random: u tells nothing of positive or not
                    v = v + margin * (1 + (j % 6 if slot == 0 else rng.integers(6))) * u
                vectors[h] = v.astype(np.float32)
                row.append(h)
            states.append(row)
            goals.append(goal)
            theorem.append(f"t{t}")
            held.append(t >= int(0.8 * theorems))
            depth.append(j % 6)
            steps.append(float(1 + j % 6))
    groups = Groups(
        states=states, goals=goals, depth=np.array(depth), theorem=theorem,
        heldout=np.array(held), kind_counts={k: 0 for k in KINDS},
        remaining=np.array(steps if remaining else [], dtype=np.float32),
    )  # fmt: skip
    return vectors, groups
