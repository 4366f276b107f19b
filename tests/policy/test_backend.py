"""open_generator: the configured backend, with servers launched for the span of a stage."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import psutil
import pytest

from burnqed.config import PolicyConfig
from burnqed.policy import SamplingParams, TacticGenerator, candidate_seeds, trim_completion
from burnqed.policy.backend import open_generator
from burnqed.policy.http import OpenAIGenerator, SGLangGenerator
from burnqed.policy.launcher import ServerLaunchError
from burnqed.policy.standin import StandinServer
from burnqed.policy.transformers_backend import TransformersGenerator
from tests.policy.corpus import prompts

# How a user points burnqed at a server in another environment: the full command, interpreter first.
STANDIN = (sys.executable, "-m", "burnqed.policy.standin", "--model", "{model}", "--port", "{port}")
PARAMS = SamplingParams(n=3, temperature=1.0, max_new_tokens=6, stop=("```",))
SEEDS = [candidate_seeds(1, "thm", 0, f"node{i}", 3) for i in range(2)]


def test_trim_completion():
    assert trim_completion("  intro h\n```\nmore", ("```",)) == "intro h"
    assert trim_completion("a;b|c", ("|", ";")) == "a"
    assert trim_completion(" exact h ", ()) == "exact h"


def test_transformers_backend(tiny_model):
    cfg = PolicyConfig(backend="transformers", pooling="mean")
    with open_generator(cfg, str(tiny_model)) as gen:
        assert isinstance(gen, TransformersGenerator) and gen.pooling == "mean"
        groups = gen.generate(prompts()[:2], PARAMS, SEEDS)
        assert [g.raw_count for g in groups] == [3, 3]
        assert gen.embed(["⊢ p"]).shape == (1, 64)
    assert gen.model is None  # closed


def test_sglang_backend_launches_both_servers_and_stops_them(tiny_model, tmp_path, generator):
    cfg = PolicyConfig(
        backend="sglang",
        server_command=STANDIN,
        embedding_server_command=(*STANDIN, "--is-embedding"),
        health_timeout_s=120,
        retry_total_s=10,
    )
    log_file = tmp_path / "stage.log"
    with open_generator(cfg, str(tiny_model), embeddings=True, log_to=log_file) as gen:
        assert isinstance(gen, SGLangGenerator) and isinstance(gen, TacticGenerator)
        assert gen.model_id == str(tiny_model)
        servers = psutil.Process().children(recursive=True)
        assert len(servers) == 2
        groups = gen.generate(prompts()[:2], PARAMS, SEEDS)
        assert [g.raw_count for g in groups] == [3, 3]
        # Seeded per candidate, the server (deterministic mode) repeats itself exactly.
        assert groups == gen.generate(prompts()[:2], PARAMS, SEEDS)
        vectors = gen.embed(["⊢ p", prompts()[0]])
        np.testing.assert_allclose(vectors, generator.embed(["⊢ p", prompts()[0]]), atol=1e-5)
    gone = [not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in servers]
    assert all(gone)
    text = log_file.read_text()
    assert "burnqed.policy.standin" in text and "ready to roll" in text
    assert text.count("POST /generate") >= 2  # the warm-up request, then ours


def test_configured_url_is_used_without_launching(generator, tiny_model):
    with StandinServer(generator=generator) as server:
        cfg = PolicyConfig(backend="openai", server_url=server.url, server_command=None)
        with open_generator(cfg, str(tiny_model)) as gen:
            assert isinstance(gen, OpenAIGenerator)
            assert psutil.Process().children() == []
            assert len(gen.generate(prompts()[:1], PARAMS, SEEDS[:1])) == 1
        # One request per candidate, and no warm-up.
        assert [r.path for r in server.requests] == ["/v1/completions"] * 3


def test_server_that_dies_on_start_fails_the_stage(tiny_model, tmp_path):
    cfg = PolicyConfig(backend="sglang", server_command=(*STANDIN[:4], str(tmp_path / "missing")))
    with (
        pytest.raises(ServerLaunchError, match="exited with code 2"),
        open_generator(cfg, str(tiny_model)),
    ):
        pytest.fail("must not yield")


def test_unknown_backend_and_missing_command(tiny_model):
    bad = dataclasses.replace(PolicyConfig(), backend="vllm")
    with (
        pytest.raises(ValueError, match="unknown backend 'vllm'"),
        open_generator(bad, str(tiny_model)),
    ):
        pass
    cfg = PolicyConfig(
        backend="sglang", server_url="http://127.0.0.1:9", embedding_server_command=None
    )
    with (
        pytest.raises(ValueError, match=r"policy\.embedding_server_command"),
        open_generator(cfg, str(tiny_model), embeddings=True),
    ):
        pass
