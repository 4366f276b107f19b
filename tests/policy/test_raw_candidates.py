"""The backends' per-seed path (``raw_candidates``, what the expansion cache keys candidate by
candidate): ``generate`` is its de-duplication; over HTTP a candidate is a function of its own seed
whatever ``n`` the call asks for, in process it depends on ``n`` too (the class says which)."""

from __future__ import annotations

from burnqed.policy import SamplingParams, candidate_seeds, generation_of
from burnqed.policy.http import OpenAIGenerator, SGLangGenerator
from burnqed.policy.standin import StandinServer
from burnqed.policy.transformers_backend import TransformersGenerator
from tests.policy.corpus import prompts

PARAMS = SamplingParams(n=4, temperature=1.0, top_p=0.9, max_new_tokens=10, stop=("e", "\n"))


def test_in_process_generate_is_the_dedup_of_the_raw_candidates_in_seed_order(generator):
    ps = prompts()[:3]
    seeds = [candidate_seeds(0, "thm", 0, p, 4) for p in ps]
    raw = generator.raw_candidates(ps, PARAMS, seeds)
    assert [len(r) for r in raw] == [4, 4, 4] and all(c is not None for r in raw for c in r)
    assert generator.generate(ps, PARAMS, seeds) == [generation_of(r) for r in raw]
    # Candidate j of a prompt is the same in a call with other prompts (its seed decides it).
    assert generator.raw_candidates([ps[1]], PARAMS, [seeds[1]]) == [raw[1]]
    assert TransformersGenerator.candidates_independent_of_n is False  # n: the batch's shape


def test_over_http_a_candidate_depends_on_its_seed_not_on_n(generator):
    ps = prompts()[:2]
    seeds = [candidate_seeds(0, "thm", 0, p, 4) for p in ps]
    with StandinServer(generator=generator) as server:
        gen = SGLangGenerator(server.url, model_id="tiny", request_timeout_s=30.0)
        try:
            raw = gen.raw_candidates(ps, PARAMS, seeds)
            assert gen.generate(ps, PARAMS, seeds) == [generation_of(r) for r in raw]
            # Candidates 2 and 0 of the second prompt, asked alone with n = 2: the same answers.
            two = SamplingParams(**{**PARAMS.__dict__, "n": 2})
            again = gen.raw_candidates([ps[1]], two, [[seeds[1][2], seeds[1][0]]])
            assert again == [[raw[1][2], raw[1][0]]]
        finally:
            gen.close()
    assert (
        SGLangGenerator.candidates_independent_of_n and OpenAIGenerator.candidates_independent_of_n
    )
