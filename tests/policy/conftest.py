"""Policy-test fixtures: one tiny model per session, built from scratch (no hub)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.policy.corpus import corpus


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from burnqed.policy.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", corpus(), seed=0)


@pytest.fixture(scope="session")
def generator(tiny_model: Path):
    """One in-process generator shared by the tests (loading it is the slow part)."""
    from burnqed.policy.transformers_backend import TransformersGenerator

    gen = TransformersGenerator(tiny_model, pooling="last")
    yield gen
    gen.close()


@pytest.fixture(scope="session")
def teacher_forced(generator):
    """``score(prompt, token_ids) -> float``: sum of token logprobs from one plain forward pass."""
    import torch

    def score(prompt: str, token_ids) -> float:
        prompt_ids = generator.tokenizer(prompt).input_ids
        ids = torch.tensor([prompt_ids + list(token_ids)])
        with torch.inference_mode():
            logits = generator.model(ids).logits[0].float()  # (T, V), unpadded, no cache
        logprobs = torch.log_softmax(logits, dim=-1)
        # The token at position p is predicted by the logits at p - 1.
        return sum(logprobs[len(prompt_ids) - 1 + k, t].item() for k, t in enumerate(token_ids))

    return score
