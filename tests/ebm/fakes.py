"""A fake embedding backend for the EBM tests, over the search tests' toy "countdown" logic.

``ToyEmbedder.embed`` maps a toy state (``⊢ reach n`` goals) to a vector whose first two coordinates
carry what makes it provable (the remaining total and the number of goals, scaled) and whose others
are a deterministic hash of the text: something for an EBM to learn, and noise.  It counts the texts
it embedded; ``delay_s`` slows it down so a test can kill it midway.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tests.search.fakes import RandomToyPolicy

DIM = 16


def toy_vector(text: str) -> np.ndarray:
    goals = [int(x) for x in re.findall(r"reach (\d+)", text)]
    seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32) * 0.5
    v[0] = sum(goals) / 4.0
    v[1] = len(goals)
    return v


@dataclass
class ToyEmbedder(RandomToyPolicy):
    """RandomToyPolicy's generation plus toy embeddings; ``model_id`` names the "weights"."""

    model_id: str = "toy-embedder"
    pooling: str = "last"
    delay_s: float = 0.0
    embedded: list[str] = field(default_factory=list)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.delay_s:
            time.sleep(self.delay_s)
        self.embedded.extend(texts)
        return np.stack([toy_vector(t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)
