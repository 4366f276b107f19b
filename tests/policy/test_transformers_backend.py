"""In-process backend: real logprobs, grouping per prompt, stop handling, per-candidate seeds and
batch invariance, embeddings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from burnqed.policy import SamplingParams, TacticGenerator, candidate_seeds
from burnqed.policy.transformers_backend import TransformersGenerator
from tests.policy.corpus import prompts

# Common one-character stops, so a random model hits them often: both stop kinds get exercised.
STOPS = ("e", "t", "\n")


def seeds_for(ps, n, run_seed=0):
    return [candidate_seeds(run_seed, "thm", 0, p, n) for p in ps]


def test_is_a_tactic_generator(generator):
    assert isinstance(generator, TacticGenerator)
    assert generator.model_id.endswith("model")


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (1.7, 0.8)])
def test_logprob_equals_teacher_forced_forward_pass(generator, teacher_forced, temperature, top_p):
    """Raw model logprobs, whatever the temperature/top-p used to sample (those reshape only the
    sampling distribution); grouped so that group i really continues prompt i."""
    ps = prompts()[:3]
    params = SamplingParams(
        n=4, temperature=temperature, top_p=top_p, max_new_tokens=12, stop=STOPS
    )
    groups = generator.sample(ps, params, seeds_for(ps, 4, run_seed=3))
    assert [len(g) for g in groups] == [4, 4, 4]
    finishes = set()
    for prompt, samples in zip(ps, groups, strict=True):
        for s in samples:
            assert 1 <= len(s.token_ids) <= 12 and len(s.token_logprobs) == len(s.token_ids)
            assert sum(s.token_logprobs) == pytest.approx(
                teacher_forced(prompt, s.token_ids), abs=1e-4
            )
            assert not any(stop in s.text for stop in STOPS)
            finishes.add(s.finish_reason)
    assert finishes == {"stop", "length"}  # both endings covered by the check above


def test_generate_groups_dedups_and_reports_counts(generator):
    ps = prompts()
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=8, stop=STOPS)
    groups = generator.generate(ps, params, seeds_for(ps, 4))
    samples = generator.sample(ps, params, seeds_for(ps, 4))  # same seeds: the same raw draws
    assert len(groups) == len(ps)
    for gen, raw in zip(groups, samples, strict=True):
        assert gen.raw_count == 4
        assert gen.tokens == sum(len(s.token_ids) for s in raw)
        texts = [c.text for c in gen.candidates]
        assert len(texts) == len(set(texts))
        assert [c.logprob for c in gen.candidates] == sorted(
            (c.logprob for c in gen.candidates), reverse=True
        )
        for c in gen.candidates:
            assert c.text == c.text.strip() and c.text
            # Each candidate is one of the raw samples, with its summed logprob and token count.
            assert any(
                c.logprob == pytest.approx(sum(s.token_logprobs))
                and c.num_tokens == len(s.token_ids)
                for s in raw
            )


def test_greedy_samples_collapse_to_one_candidate(generator):
    params = SamplingParams(n=4, temperature=0.0, max_new_tokens=6)
    (samples,) = generator.sample(prompts()[3:4], params)
    assert len(samples) == 4 and len(set(samples)) == 1
    assert samples[0].finish_reason == "length" and len(samples[0].token_ids) == 6
    (gen,) = generator.generate(prompts()[3:4], params)
    assert gen.raw_count == 4 and gen.tokens == 24
    # One candidate, unless the greedy text is only whitespace (then none: empty is dropped).
    assert [c.text for c in gen.candidates] == [t for t in [samples[0].text.strip()] if t]


def test_seeds_reproduce_and_leave_global_rng_alone(generator):
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=8)
    ps = prompts()[:2]
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = generator.generate(ps, params, seeds_for(ps, 4, run_seed=11))
    after = torch.rand(1)
    b = generator.generate(ps, params, seeds_for(ps, 4, run_seed=11))
    c = generator.generate(ps, params, seeds_for(ps, 4, run_seed=12))
    assert a == b
    assert a != c
    assert torch.equal(before, after)


def test_a_prompts_candidates_are_identical_alone_and_inside_a_batch_of_32(generator):
    """Batch invariance by construction: bit-identical tokens and logprobs (not within a tolerance)
    for a prompt sampled alone, at any position of a batch of 32 other prompts, and whatever its
    neighbours' lengths."""
    ps = [p + "h" * (i % 7) for i, p in enumerate(prompts() * 8)][:32]
    params = SamplingParams(n=4, temperature=1.3, top_p=0.9, max_new_tokens=10, stop=("\n",))
    seeds = seeds_for(ps, 4)
    batch = generator.sample(ps, params, seeds)
    for i in (0, 5, 17, 31):
        (alone,) = generator.sample([ps[i]], params, [seeds[i]])
        assert alone == batch[i], i  # Sample equality: token ids, logprobs, text, finish
    # A candidate is keyed by its own seed: reorder the batch, the same candidates come back.
    rev = generator.sample(ps[::-1], params, seeds[::-1])
    assert rev[::-1] == batch
    # And different seeds give different draws (the comparison above is not vacuous).
    other = generator.sample(ps[:4], params, seeds_for(ps[:4], 4, run_seed=1))
    assert other != batch[:4]


def test_a_candidate_is_keyed_by_its_own_seed_not_the_other_candidates(generator):
    """Candidate j's tokens come from its own random stream: changing the other candidates' seeds
    leaves it as it was (its slot j is part of the construction: shape (n, ·), row j)."""
    p = prompts()[1]
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=8)
    a, b, c, d = candidate_seeds(0, "t", 0, "x", 4)
    e, _, g, h = candidate_seeds(1, "t", 0, "x", 4)
    (first,) = generator.sample([p], params, [[a, b, c, d]])
    (second,) = generator.sample([p], params, [[e, b, g, h]])
    assert first[1] == second[1]
    assert first[0] != second[0]


def test_seeds_must_match_the_prompts_and_candidates(generator):
    with pytest.raises(ValueError, match="one per candidate"):
        generator.generate(prompts()[:2], SamplingParams(n=4), [[1, 2, 3, 4]])
    with pytest.raises(ValueError, match="one per candidate"):
        generator.generate(prompts()[:1], SamplingParams(n=4), [[1, 2, 3]])


def test_cut_rules(generator):
    """EOS ends a sample (counted); a stop string ends it at the token that completes it."""
    eos = next(iter(generator.eos_ids))
    tok = generator.tokenizer
    ids = tok("abc").input_ids
    s = generator._cut([*ids, eos, *ids], [-1.0] * (2 * len(ids) + 1), ())
    assert s.token_ids == (*ids, eos) and s.finish_reason == "stop" and s.matched == eos
    assert s.text == "abc" and sum(s.token_logprobs) == -(len(ids) + 1)

    ids = tok("ab```c\nmore").input_ids
    s = generator._cut(ids, [-0.5] * len(ids), ("```",))
    assert s.text == "ab" and s.finish_reason == "stop" and s.matched == "```"
    assert "```" in tok.decode(list(s.token_ids)) and "```" not in tok.decode(
        list(s.token_ids[:-1])
    )

    s = generator._cut(ids, [-0.5] * len(ids), ())
    assert s.finish_reason == "length" and s.matched is None and len(s.token_ids) == len(ids)


def test_empty_batch(generator):
    assert generator.generate([], SamplingParams()) == []
    assert generator.embed([]).shape == (0, 64)


def test_last_token_embedding_is_normalised_and_batch_invariant(generator):
    texts = ["⊢ p", prompts()[2], "h : p ∧ q"]
    vectors = generator.embed(texts)
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # In a batch or alone, in any order: bit-identical (one forward per text).
    for i, text in enumerate(texts):
        assert np.array_equal(generator.embed([text])[0], vectors[i])
    assert np.array_equal(generator.embed(texts[::-1])[::-1], vectors)
    # And it is the final layer's last-token state.
    ids = torch.tensor([generator.tokenizer(texts[1]).input_ids])
    with torch.inference_mode():
        h = generator.model(ids, output_hidden_states=True).hidden_states[-1][0, -1]
    np.testing.assert_allclose(vectors[1], (h / h.norm()).numpy(), atol=1e-5)


def test_mean_pooling_averages_the_texts_tokens(tiny_model, generator):
    mean = TransformersGenerator(tiny_model, pooling="mean")
    texts = ["⊢ p", prompts()[2]]
    vectors = mean.embed(texts)
    assert vectors.shape == (2, 64)
    for i, text in enumerate(texts):
        ids = torch.tensor([generator.tokenizer(text).input_ids])
        with torch.inference_mode():
            h = generator.model(ids, output_hidden_states=True).hidden_states[-1][0]
        np.testing.assert_allclose(vectors[i], h.mean(0).numpy(), atol=1e-5)


def test_rejects_bad_settings(tiny_model):
    with pytest.raises(ValueError, match="pooling"):
        TransformersGenerator(tiny_model, pooling="cls")
    with pytest.raises(ValueError, match="dtype"):
        TransformersGenerator(tiny_model, dtype="float8")


def test_stop_strings_are_looked_for_only_after_tokens_that_can_end_them(generator, monkeypatch):
    """A row's text is decoded to look for a stop string only after a token that can complete
    one; ``done`` decides only when the loop ends, so the samples are those of decoding after
    every token — and here, where several stop strings end candidates, equal to them."""
    stop = ("e", "t;", "``")
    triggers = generator._stop_triggers(stop)
    tok = generator.tokenizer
    texts = [tok.decode([i], skip_special_tokens=True) for i in range(len(tok))]
    assert triggers == {
        i for i, t in enumerate(texts) if not t or "\ufffd" in t or set(t) & set("et;`")
    }
    assert len(triggers) < len(tok)  # some tokens are skipped, or nothing is saved
    assert generator._stop_triggers(("\n",)) is None  # whitespace: after every token
    ps = prompts()[:6]
    params = SamplingParams(n=8, temperature=1.5, max_new_tokens=16, stop=stop)
    seeds = seeds_for(ps, 8)
    fast = generator.sample(ps, params, seeds)
    monkeypatch.setattr(generator, "_stop_triggers", lambda stop: None)
    assert generator.sample(ps, params, seeds) == fast
    ended = {s.matched for g in fast for s in g if s.finish_reason == "stop"}
    assert {"e", "``"} <= ended  # the stop strings did end candidates
