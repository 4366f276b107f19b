"""SGLang native client against the stand-in server (real tiny model behind SGLang's wire format)."""

from __future__ import annotations

import time

import httpx
import numpy as np
import pytest

from burnqed.policy import SamplingParams, candidate_seeds
from burnqed.policy.http import ServerError, SGLangGenerator
from burnqed.policy.launcher import free_port
from burnqed.policy.standin import StandinServer
from tests.policy.corpus import prompts

PARAMS = SamplingParams(n=4, temperature=1.0, top_p=0.9, max_new_tokens=10, stop=("e", "\n"))


def seeds_for(ps, n=4, run_seed=0):
    return [candidate_seeds(run_seed, "thm", 0, p, n) for p in ps]


@pytest.fixture
def server(generator):
    with StandinServer(generator=generator) as s:
        yield s


@pytest.fixture
def embed_server(generator):
    with StandinServer(generator=generator, is_embedding=True) as s:
        yield s


def client(url: str, **kw) -> SGLangGenerator:
    kw.setdefault("retry_total_s", 10.0)
    return SGLangGenerator(url, model_id="tiny", request_timeout_s=30.0, **kw)


def test_one_item_per_candidate_comes_back_grouped_in_prompt_order(server, teacher_forced):
    ps = prompts()[:3]
    groups = client(server.url).generate(ps, PARAMS, seeds_for(ps))
    (req,) = server.requests
    items = req.response
    assert isinstance(items, list) and len(items) == 3 * 4  # one result per item, in order
    assert len(groups) == 3
    for i, (prompt, gen) in enumerate(zip(ps, groups, strict=True)):
        mine = items[i * 4 : (i + 1) * 4]
        # The server's logprobs are real: they match a teacher-forced pass over prompt i.
        sums = []
        for item in mine:
            ids = [t[1] for t in item["meta_info"]["output_token_logprobs"]]
            assert ids == item["output_ids"]
            sums.append(sum(t[0] for t in item["meta_info"]["output_token_logprobs"]))
            assert sums[-1] == pytest.approx(teacher_forced(prompt, ids), abs=1e-4)
        # ...and group i holds exactly prompt i's samples, with those sums and token counts.
        assert gen.raw_count == 4
        for c in gen.candidates:
            k = next(k for k, s in enumerate(sums) if s == pytest.approx(c.logprob, abs=1e-9))
            assert c.num_tokens == len(mine[k]["output_ids"])
            assert c.text == mine[k]["text"].strip()


def test_sampling_params_are_sent_explicitly_with_a_seed_per_candidate(server):
    ps = prompts()[:2]
    seeds = seeds_for(ps)
    client(server.url).generate(ps, PARAMS, seeds)
    body = server.requests[-1].body
    # One item per candidate: SGLang gives the n copies of one item the same sampling_seed.
    assert body["text"] == [p for p in ps for _ in range(4)]
    assert body["sampling_params"] == [
        {
            "n": 1,
            "temperature": 1.0,
            "top_p": 0.9,
            "max_new_tokens": 10,
            "stop": ["e", "\n"],
            "sampling_seed": s,
        }
        for own in seeds
        for s in own
    ]
    assert body["return_logprob"] is True and body["logprob_start_len"] == -1


def test_a_prompts_candidates_do_not_depend_on_its_batch(server):
    ps = prompts()[:4]
    gen = client(server.url)
    batch = gen.generate(ps, PARAMS, seeds_for(ps))
    (alone,) = gen.generate(ps[1:2], PARAMS, seeds_for(ps)[1:2])
    assert alone == batch[1]
    assert gen.generate(ps, PARAMS, seeds_for(ps, run_seed=1)) != batch


def test_unseeded_calls_still_draw_distinct_candidates(server):
    """Without seeds the client draws fresh ones per candidate: in deterministic mode, n copies of
    one unseeded item would all be SGLang's default seed 42, hence identical."""
    client(server.url).generate(prompts()[:1], SamplingParams(n=4, max_new_tokens=10))
    seeds = [sp["sampling_seed"] for sp in server.requests[-1].body["sampling_params"]]
    assert len(set(seeds)) == 4


def test_standin_follows_sglang_seed_semantics(server):
    """The stand-in as SGLang in deterministic mode: a string with n == 1 is one object; the n copies
    of one item share its seed (42 when absent), so they come out identical."""
    url = server.url + "/generate"
    sp = {"n": 3, "temperature": 1.0, "max_new_tokens": 8}
    one = httpx.post(url, json={"text": prompts()[0], "sampling_params": {**sp, "n": 1}}).json()
    assert isinstance(one, dict) and "meta_info" in one
    copies = httpx.post(url, json={"text": prompts()[0], "sampling_params": sp}).json()
    assert len(copies) == 3 and len({tuple(c["output_ids"]) for c in copies}) == 1
    seeded = httpx.post(
        url, json={"text": prompts()[0], "sampling_params": {**sp, "sampling_seed": 42}}
    ).json()
    assert [c["output_ids"] for c in seeded] == [c["output_ids"] for c in copies]
    bad = httpx.post(
        url, json={"text": prompts()[0], "sampling_params": {**sp, "sampling_seed": "x"}}
    )
    assert bad.status_code == 400 and "sampling_seed" in bad.text


def test_two_503s_then_success(server):
    server.inject(fail=2)
    groups = client(server.url).generate(prompts()[:2], PARAMS, seeds_for(prompts()[:2]))
    assert [r.status for r in server.requests] == [503, 503, 200]
    assert len(groups) == 2 and all(g.raw_count == 4 for g in groups)


def test_dropped_connection_is_retried(server):
    server.inject(drop=1)
    groups = client(server.url).generate(prompts()[:1], PARAMS)
    assert [r.status for r in server.requests] == [None, 200]
    assert groups[0].raw_count == 4


def test_server_gone_fails_clearly_within_the_bound():
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(
        ServerError, match=r"127\.0\.0\.1.*unavailable after \d+ attempts.*ConnectError"
    ):
        client(url, retry_total_s=1.5).generate(prompts()[:1], PARAMS)
    assert 1.5 <= time.monotonic() - started < 5.0


def test_persistent_503_fails_within_the_bound(server):
    server.inject(fail=10_000)
    started = time.monotonic()
    with pytest.raises(ServerError, match="last failure: HTTP 503"):
        client(server.url, retry_total_s=1.0).generate(prompts()[:1], PARAMS)
    assert time.monotonic() - started < 4.0
    assert len(server.requests) >= 3  # it did back off and retry


def test_bad_request_is_not_retried(server):
    with pytest.raises(ServerError, match=r"HTTP 400.*embedding model"):
        client(server.url, embedding_url=server.url).embed(["⊢ p"])
    assert [r.status for r in server.requests] == [400]


def test_embed_single_and_batch_shapes(embed_server, generator):
    gen = client("http://127.0.0.1:9", embedding_url=embed_server.url)  # generation unused
    one = gen.embed(["⊢ p"])
    many = gen.embed(["⊢ p", prompts()[1], "h : q"])
    single, batch = embed_server.requests
    assert isinstance(single.body["text"], str) and isinstance(single.response, dict)
    assert isinstance(batch.body["text"], list) and isinstance(batch.response, list)
    assert one.shape == (1, 64) and many.shape == (3, 64) and many.dtype == np.float32
    np.testing.assert_allclose(many, generator.embed(["⊢ p", prompts()[1], "h : q"]), atol=1e-6)
    np.testing.assert_allclose(one[0], many[0], atol=1e-6)


def test_embed_without_embedding_server_says_what_to_configure(server):
    with pytest.raises(ServerError, match="embedding_server_url"):
        client(server.url).embed(["⊢ p"])


def test_aborted_samples_are_dropped():
    item = {"text": "x", "meta_info": {"finish_reason": {"type": "abort", "message": "oom"}}}
    assert SGLangGenerator._candidate(item, PARAMS, "here") is None
    item = {
        "text": " intro h ",
        "meta_info": {
            "finish_reason": {"type": "stop", "matched": "\n"},
            "output_token_logprobs": [[-0.5, 7, None], [-0.25, 8, None]],
        },
    }
    c = SGLangGenerator._candidate(item, PARAMS, "here")
    assert (c.text, c.logprob, c.num_tokens, c.finish_reason) == ("intro h", -0.75, 2, "stop")


def test_wrong_result_count_is_an_error(server, monkeypatch):
    monkeypatch.setattr(server, "generate", lambda body: [])
    with pytest.raises(ServerError, match=r"expected 2 × 4 results, got 0"):
        client(server.url).generate(prompts()[:2], PARAMS)


# --------------------------------------------------------------------------------------------
# The stand-in's own wire format


def test_standin_wire_format(server):
    with httpx.Client(base_url=server.url) as http:
        health = http.get("/health")
        assert health.status_code == 200 and health.content == b""
        info = http.get("/get_model_info").json()
        assert info["is_generation"] is True and {"model_path", "tokenizer_path"} <= set(info)
        sp = {"n": 1, "temperature": 0.0, "max_new_tokens": 3}
        one = http.post(
            "/generate", json={"text": "⊢ p", "sampling_params": sp, "return_logprob": True}
        )
        assert one.headers["content-type"] == "application/json"
        obj = one.json()
        assert set(obj) == {"text", "output_ids", "meta_info"}
        meta = obj["meta_info"]
        assert {
            "id",
            "finish_reason",
            "prompt_tokens",
            "completion_tokens",
            "cached_tokens",
            "output_token_logprobs",
            "input_token_logprobs",
            "e2e_latency",
        } <= set(meta)
        assert meta["finish_reason"] == {"type": "length", "length": 3}
        assert meta["input_token_logprobs"] == [] and meta["completion_tokens"] == 3
        assert all(len(t) == 3 and t[2] is None for t in meta["output_token_logprobs"])
        # n > 1 with one prompt: a list, even for a single string.
        two = http.post("/generate", json={"text": "⊢ p", "sampling_params": {**sp, "n": 2}}).json()
        assert (
            isinstance(two, list)
            and len(two) == 2
            and "output_token_logprobs" not in two[0]["meta_info"]
        )
        bad = http.post("/generate", json={"text": "⊢ p", "sampling_params": {"nn": 1}})
        assert bad.status_code == 400 and "nn" in bad.json()["error"]["message"]


def test_standin_health_is_503_while_starting(generator):
    with StandinServer(generator=generator, startup_s=2.0) as s:
        started = time.monotonic()
        assert httpx.get(s.url + "/health").status_code == 503
        # /generate is refused while starting, as SGLang does.
        assert httpx.post(s.url + "/generate", json={"text": "x"}).status_code == 503
        while httpx.get(s.url + "/health").status_code != 200:
            assert time.monotonic() - started < 10
            time.sleep(0.1)
        assert time.monotonic() - started >= 1.5


def test_standin_delay_switch(server):
    server.inject(delay_s=0.3)
    started = time.monotonic()
    client(server.url).generate(prompts()[:1], SamplingParams(n=1, max_new_tokens=2))
    assert time.monotonic() - started >= 0.3
