"""One theorem split for every consumer: SFT's trajectory train / validation / test sets, the held-out
theorems of every value-model check, and the cross-fit folds (SPEC §4.8b; issue 44 §4).

A theorem's side is decided by a hash of the run seed and its name alone (:func:`theorem_key`, a
number in [0, 1)): ``val`` below ``val_fraction``, ``test`` in the next ``test_fraction``, ``train``
above.  So a theorem sits on one side in every iteration and in every stage, whatever else is in the
list: a theorem SFT validates or tests on is never trained on by SFT at a later iteration, and the
**held-out** theorems of the value model — those no head and no fitted weight trains on, on which
its held-out checks are measured — are exactly SFT's validation and test theorems, so they are also
outside the SFT training data of the policy that embeds them (before issue 44 the EBM drew its own
split, and about four in five of its "held-out" theorems were SFT training theorems).

Cross-fit folds (:meth:`TheoremSplit.folds`) deal the theorems, sorted by the same key, round-robin
into ``k`` folds: balanced, and a theorem's fold does not depend on the order it came in.

Only SFT applies the two small-set rules of :meth:`TheoremSplit.sides` (a validation theorem when
there are two and none hashed there, a test theorem when there are three; one theorem left to train
on): they only ever *add* held-out theorems, or give back to training one that only such a rule held
out, so a theorem held out by the hash is held out by every consumer.

Example::

    >>> s = TheoremSplit(val_fraction=0.25, test_fraction=0.25, seed=0)
    >>> sides = s.sides([f"t{i}" for i in range(8)])
    >>> sorted(sides["val"] | sides["test"]) == sorted(s.held_out([f"t{i}" for i in range(8)]))
    True
    >>> s.folds(["a", "b", "c", "d"], 2) == s.folds(["d", "c", "b", "a"], 2)
    True
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from burnqed.config import SplitConfig

log = logging.getLogger(__name__)

SIDES = ("train", "val", "test")


def theorem_key(theorem: str, seed: int) -> float:
    """The theorem's place in [0, 1) under ``seed``: what decides its side and its fold."""
    digest = hashlib.sha256(f"{seed}\0trajectory\0{theorem}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class TheoremSplit:
    """The run's split of theorems (``split`` in params.yaml, the run ``seed``)."""

    val_fraction: float
    test_fraction: float
    seed: int

    def __post_init__(self) -> None:
        if not (self.val_fraction >= 0 and self.test_fraction >= 0
                and self.val_fraction + self.test_fraction < 1):  # fmt: skip
            raise ValueError(
                f"split: val_fraction + test_fraction must lie in [0, 1) (got "
                f"{self.val_fraction:g} + {self.test_fraction:g}): some theorems must be left to "
                "train on"
            )

    @classmethod
    def of(cls, split: Mapping[str, Any] | SplitConfig | None, seed: int) -> TheoremSplit:
        """The split of a run: params.yaml's ``split`` section (a dict, as a rule passes it, or
        its :class:`~burnqed.config.SplitConfig`; None: the section's defaults) and its seed."""
        cfg = split if isinstance(split, SplitConfig) else SplitConfig.from_dict(split)
        return cls(val_fraction=cfg.val_fraction, test_fraction=cfg.test_fraction, seed=seed)

    def side(self, theorem: str) -> str:
        """``train``, ``val`` or ``test`` by the hash alone."""
        key = theorem_key(theorem, self.seed)
        if key < self.val_fraction:
            return "val"
        if key < self.val_fraction + self.test_fraction:
            return "test"
        return "train"

    def held_out(self, theorems: Iterable[str]) -> set[str]:
        """The theorems no value head or fitted weight trains on: SFT's validation and test ones."""
        return {t for t in theorems if self.side(t) != "train"}

    def sides(self, theorems: Iterable[str]) -> dict[str, set[str]]:
        """SFT's sides of ``theorems``: :meth:`side`, plus the small-set rules (module docstring) —
        at least one validation theorem when there are two or more and a validation fraction, at
        least one test theorem when three or more remain and a test fraction; one theorem given back
        to training only if a small-set rule held it out (a theorem the hash holds out stays out)."""
        names = sorted(set(theorems))
        key = {t: theorem_key(t, self.seed) for t in names}
        out = {side: {t for t in names if self.side(t) == side} for side in SIDES}
        forced: set[str] = set()
        if self.val_fraction > 0 and not out["val"] and len(names) >= 2:
            t = min(names, key=key.__getitem__)
            out[self.side(t)].discard(t)
            out["val"].add(t)
            forced.add(t)
        rest = [t for t in names if t not in out["val"]]
        if self.test_fraction > 0 and not out["test"] and len(rest) >= 2:
            t = min(rest, key=key.__getitem__)
            out[self.side(t)].discard(t)
            out["test"].add(t)
            forced.add(t)
        if names and not out["train"]:
            if forced:
                back = max(forced, key=key.__getitem__)
                for side in ("val", "test"):
                    out[side].discard(back)
                out["train"].add(back)
            else:
                log.warning("split: every one of the %d theorems is held out by its hash: "
                            "nothing of them is trained on", len(names))  # fmt: skip
        return out

    def folds(self, theorems: Sequence[str], k: int) -> dict[str, int]:
        """Theorem → cross-fit fold in ``0..k-1`` (module docstring)."""
        if k < 2:
            raise ValueError(f"cross-fitting needs at least 2 folds, got {k}")
        order = sorted(set(theorems), key=lambda t: (theorem_key(t, self.seed), t))
        return {t: i % k for i, t in enumerate(order)}


__all__ = ["SIDES", "TheoremSplit", "theorem_key"]
