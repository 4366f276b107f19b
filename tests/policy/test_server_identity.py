"""What an inference server states about itself keys the expansion cache (issue 48): an SGLang
server's version, model and deterministic-inference flag as its ``/server_info`` states them (the
stand-in speaks SGLang's wire format), so a server upgrade misses where the launch command alone
(d670ec8's key) hit; a server that states itself not deterministic, or an external ``server_url``
that states no hardware, is not cached — counted, and said once in the log."""

from __future__ import annotations

import logging

from burnqed.config import PolicyConfig
from burnqed.policy import SamplingParams, candidate_seeds
from burnqed.policy.http import SGLANG_KEYED_ARGS, SGLangGenerator, sglang_identity
from burnqed.policy.standin import StandinServer
from burnqed.search.cache import CachedSource, policy_settings
from burnqed.search.sources import ExpandRequest, LiveSource

COMMAND = ("python", "-m", "sglang.launch_server", "--model-path", "{model}", "--port", "{port}",
           "--enable-deterministic-inference")  # fmt: skip
LAUNCHED = PolicyConfig(backend="sglang", server_command=COMMAND)
PARAMS = SamplingParams(n=2, temperature=1.0, max_new_tokens=6)
PROMPTS = ["⊢ p → p", "h : p\n⊢ p ∧ p"]


def requests() -> list[ExpandRequest]:
    return [ExpandRequest("t", 0, str(i), p, candidate_seeds(0, "t", 0, str(i), PARAMS.n))
            for i, p in enumerate(PROMPTS)]  # fmt: skip


def ask(cache, gen: SGLangGenerator, cfg: PolicyConfig = LAUNCHED) -> dict:
    """One CachedSource over ``gen``'s server: the requests looked up, the misses generated."""
    source = CachedSource(LiveSource(gen, None), cache, policy=policy_settings(gen, cfg), lean=None)
    reqs = requests()
    missed = [r for r in reqs if source.lookup(r, PARAMS) is None]
    if missed:
        source.generate(missed, PARAMS)
    source.close()
    return source.stats()["policy"]


def test_the_server_states_its_version_model_and_determinism(generator):
    with StandinServer(generator=generator, version="0.5.22") as server:
        gen = SGLangGenerator(server.url, model_id=str(generator.model_id))
        identity = sglang_identity(gen._client)
        gen.close()
    assert identity["version"] == "0.5.22" and identity["deterministic"] is True
    assert set(identity["args"]) == set(SGLANG_KEYED_ARGS)
    assert identity["args"]["model_path"] == str(generator.model_id)
    assert identity["hardware"] is None  # SGLang names no device: only a launched one is cached


def test_a_new_server_version_misses_and_the_same_one_hits(generator, tmp_path):
    cache = tmp_path / "cache"
    model = str(generator.model_id)
    with StandinServer(generator=generator, version="0.5.22") as server:
        gen = SGLangGenerator(server.url, model_id=model)
        first = ask(cache, gen)
        gen.close()
    with StandinServer(generator=generator, version="0.5.22") as server:  # another port
        gen = SGLangGenerator(server.url, model_id=model)
        same = ask(cache, gen)
        gen.close()
    with StandinServer(generator=generator, version="0.5.23") as server:  # an upgrade
        gen = SGLangGenerator(server.url, model_id=model)
        upgraded = ask(cache, gen)
        gen.close()
    n = len(PROMPTS) * PARAMS.n
    assert first["cached"] and first["candidates"] == {"hits": 0, "misses": n}
    assert same["candidates"] == {"hits": n, "misses": 0}
    assert upgraded["candidates"] == {"hits": 0, "misses": n}


def test_a_server_that_is_not_deterministic_or_external_is_not_cached(generator, tmp_path, caplog):
    model = str(generator.model_id)
    with StandinServer(generator=generator, deterministic=False) as server:
        gen = SGLangGenerator(server.url, model_id=model)
        with caplog.at_level(logging.INFO, logger="burnqed.search.cache"):
            off = ask(tmp_path / "a", gen)
        gen.close()
    assert not off["cached"] and "does not run deterministic inference" in off["why_not"]
    assert off["expansions"]["uncached"] == len(PROMPTS)
    said = [r.message for r in caplog.records if "policy not cached" in r.message]
    assert len(said) == 1
    with StandinServer(generator=generator) as server:
        gen = SGLangGenerator(server.url, model_id=model)
        external = ask(tmp_path / "b", gen, PolicyConfig(backend="sglang", server_url=server.url))
        gen.close()
    assert not external["cached"] and "does not state the hardware" in external["why_not"]
    assert external["expansions"]["uncached"] == len(PROMPTS)
    assert not (tmp_path / "b" / "policy").exists()  # nothing stored
