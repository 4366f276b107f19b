"""OpenAI-compatible client (/v1/completions, /v1/embeddings) against the stand-in's OpenAI routes.

The same client against a real vLLM server: test_vllm_server.py (marked ``server``).
"""

from __future__ import annotations

import numpy as np
import pytest

from burnqed.policy import SamplingParams
from burnqed.policy.http import OpenAIGenerator, ServerError
from burnqed.policy.standin import StandinServer
from tests.policy.corpus import prompts

PARAMS = SamplingParams(n=4, temperature=1.0, top_p=0.95, max_new_tokens=10, stop=("e",), seed=7)


@pytest.fixture
def server(generator):
    with StandinServer(generator=generator) as s:
        yield s


def client(url: str, **kw) -> OpenAIGenerator:
    return OpenAIGenerator(url, model_id=kw.pop("model_id", "whatever"), retry_total_s=5.0, **kw)


def test_prompts_times_n_grouped_by_index(server, teacher_forced):
    ps = prompts()[:3]
    groups = client(server.url).generate(ps, PARAMS)
    req = server.requests[-1]
    # The request: a prompt list, n, logprobs, seed and every sampling parameter, explicitly.
    assert req.body == {
        "model": server.model_dir,
        "prompt": ps,
        "n": 4,
        "max_tokens": 10,
        "temperature": 1.0,
        "top_p": 0.95,
        "stop": ["e"],
        "logprobs": 1,
        "seed": 7,
    }
    choices = req.response["choices"]
    assert [c["index"] for c in choices] == list(range(12))
    assert len(groups) == 3
    # The seed makes the stand-in's draws repeatable, so the raw samples (with token ids) are known.
    samples = server.generator.sample(ps, PARAMS)
    for i, gen in enumerate(groups):
        assert gen.raw_count == 4
        mine = choices[i * 4 : (i + 1) * 4]
        for choice, s in zip(mine, samples[i], strict=True):
            assert choice["text"] == s.text
            assert choice["logprobs"]["token_logprobs"] == list(s.token_logprobs)
            assert sum(s.token_logprobs) == pytest.approx(
                teacher_forced(ps[i], s.token_ids), abs=1e-4
            )
        sums = [sum(c["logprobs"]["token_logprobs"]) for c in mine]
        for c in gen.candidates:
            k = next(k for k, t in enumerate(sums) if t == pytest.approx(c.logprob, abs=1e-9))
            assert (
                c.num_tokens == len(samples[i][k].token_ids)
                and c.text == samples[i][k].text.strip()
            )


def test_choices_out_of_order_are_regrouped(server, monkeypatch):
    real = server.completions

    def shuffled(body):
        out = real(body)
        out["choices"] = out["choices"][::-1]
        return out

    monkeypatch.setattr(server, "completions", shuffled)
    ps = prompts()[:2]
    a = client(server.url).generate(ps, PARAMS)
    monkeypatch.setattr(server, "completions", real)
    b = client(server.url).generate(ps, PARAMS)
    assert a == b


def test_seed_reproduces(server):
    gen = client(server.url)
    a = gen.generate(prompts()[:2], PARAMS)
    b = gen.generate(prompts()[:2], PARAMS)
    c = gen.generate(prompts()[:2], SamplingParams(n=4, temperature=1.0, max_new_tokens=10, seed=8))
    assert a == b and a != c


def test_served_model_name_resolution(server):
    gen = client(server.url, model_id="not-served")
    gen.generate(prompts()[:1], SamplingParams(n=1, max_new_tokens=2))
    assert server.requests[-1].body["model"] == server.model_dir  # the only model served


def test_missing_choices_are_an_error(server, monkeypatch):
    real = server.completions
    monkeypatch.setattr(
        server, "completions", lambda body: {**real(body), "choices": real(body)["choices"][:-1]}
    )
    with pytest.raises(ServerError, match=r"expected choice indices 0\.\.7 for 2 × 4"):
        client(server.url).generate(prompts()[:2], PARAMS)


def test_embeddings(generator):
    with StandinServer(generator=generator, is_embedding=True) as s:
        gen = client("http://127.0.0.1:9", embedding_url=s.url)
        texts = ["⊢ p", prompts()[0], "hp : p"]
        vectors = gen.embed(texts)
        assert s.requests[-1].body == {"model": s.model_dir, "input": texts}
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, generator.embed(texts), atol=1e-6)


def test_greedy_asks_for_one_sample_and_repeats_it(server):
    """vLLM answers 400 to n > 1 with temperature 0; the n greedy samples are identical anyway."""
    (gen,) = client(server.url).generate(
        prompts()[1:2], SamplingParams(n=3, temperature=0.0, max_new_tokens=5)
    )
    req = server.requests[-1]
    assert req.body["n"] == 1 and len(req.response["choices"]) == 1
    choice = req.response["choices"][0]
    assert gen.raw_count == 3 and gen.tokens == 3 * len(choice["logprobs"]["token_logprobs"])
    assert [c.text for c in gen.candidates] == [t for t in [choice["text"].strip()] if t]
