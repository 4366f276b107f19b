"""OpenAI-compatible client (/v1/completions, /v1/embeddings) against the stand-in's OpenAI routes.

The same client against a real vLLM server: test_vllm_server.py (marked ``server``).
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from burnqed.policy import SEED_BITS, SamplingParams, candidate_seeds
from burnqed.policy.http import OpenAIGenerator, ServerError
from burnqed.policy.standin import StandinServer
from tests.policy.corpus import prompts

PARAMS = SamplingParams(n=4, temperature=1.0, top_p=0.95, max_new_tokens=10, stop=("e",))


def seeds_for(ps, n=4, run_seed=7):
    return [candidate_seeds(run_seed, "thm", 0, p, n) for p in ps]


@pytest.fixture
def server(generator):
    with StandinServer(generator=generator) as s:
        yield s


def client(url: str, **kw) -> OpenAIGenerator:
    return OpenAIGenerator(url, model_id=kw.pop("model_id", "whatever"), retry_total_s=5.0, **kw)


def test_one_request_per_candidate_with_its_own_seed(server, teacher_forced):
    ps = prompts()[:3]
    seeds = seeds_for(ps)
    groups = client(server.url).generate(ps, PARAMS, seeds)
    reqs = [r for r in server.requests if r.path == "/v1/completions"]
    assert len(reqs) == 12  # 3 prompts × 4 candidates, each its own request
    # Each request: one prompt, n = 1, the candidate's seed and every sampling parameter, explicitly.
    bodies = sorted((r.body for r in reqs), key=lambda b: (ps.index(b["prompt"]), b["seed"]))
    expected = sorted(
        (
            {
                "model": server.model_dir,
                "prompt": p,
                "n": 1,
                "max_tokens": 10,
                "temperature": 1.0,
                "top_p": 0.95,
                "stop": ["e"],
                "logprobs": 1,
                "seed": s,
            }
            for p, own in zip(ps, seeds, strict=True)
            for s in own
        ),
        key=lambda b: (ps.index(b["prompt"]), b["seed"]),
    )
    assert bodies == expected
    assert len(groups) == 3
    by_seed = {r.body["seed"]: r.response["choices"][0] for r in reqs}
    for i, gen in enumerate(groups):
        assert gen.raw_count == 4
        choices = [by_seed[s] for s in seeds[i]]
        for c in choices:
            # The stand-in follows vLLM: a request's seed seeds its own draws (known here).
            (sample,) = server.generator.sample(
                [ps[i]],
                SamplingParams(n=1, temperature=1.0, top_p=0.95, max_new_tokens=10, stop=("e",)),
                [
                    [
                        random.Random(next(s for s in seeds[i] if by_seed[s] is c)).getrandbits(
                            SEED_BITS
                        )
                    ]
                ],
            )[0]
            assert c["text"] == sample.text
            assert c["logprobs"]["token_logprobs"] == list(sample.token_logprobs)
            assert sum(sample.token_logprobs) == pytest.approx(
                teacher_forced(ps[i], sample.token_ids), abs=1e-4
            )
        sums = [sum(c["logprobs"]["token_logprobs"]) for c in choices]
        for cand in gen.candidates:
            assert any(t == pytest.approx(cand.logprob, abs=1e-9) for t in sums)


def test_seeds_reproduce_alone_or_among_other_prompts(server):
    gen = client(server.url)
    ps = prompts()[:4]
    a = gen.generate(ps, PARAMS, seeds_for(ps))
    b = gen.generate(ps[::-1], PARAMS, seeds_for(ps)[::-1])[::-1]
    (alone,) = gen.generate(ps[2:3], PARAMS, seeds_for(ps)[2:3])
    c = gen.generate(ps, PARAMS, seeds_for(ps, run_seed=8))
    assert a == b and a[2] == alone and a != c


def test_served_model_name_resolution(server):
    gen = client(server.url, model_id="not-served")
    gen.generate(prompts()[:1], SamplingParams(n=1, max_new_tokens=2))
    assert server.requests[-1].body["model"] == server.model_dir  # the only model served


def test_a_request_without_its_choice_is_an_error(server, monkeypatch):
    real = server.completions
    monkeypatch.setattr(server, "completions", lambda body: {**real(body), "choices": []})
    with pytest.raises(ServerError, match="expected one choice per request"):
        client(server.url).generate(prompts()[:2], PARAMS, seeds_for(prompts()[:2]))


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
    assert len(server.requests) == 1 and "seed" not in req.body  # one request, no seed needed
    assert req.body["n"] == 1 and len(req.response["choices"]) == 1
    choice = req.response["choices"][0]
    assert gen.raw_count == 3 and gen.tokens == 3 * len(choice["logprobs"]["token_logprobs"])
    assert [c.text for c in gen.candidates] == [t for t in [choice["text"].strip()] if t]
