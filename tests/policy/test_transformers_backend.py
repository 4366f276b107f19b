"""In-process backend: real logprobs, grouping per prompt, stop handling, seeding, embeddings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from burnqed.policy import SamplingParams, TacticGenerator
from burnqed.policy.transformers_backend import TransformersGenerator
from tests.policy.corpus import prompts

# Common one-character stops, so a random model hits them often: both stop kinds get exercised.
STOPS = ("e", "t", "\n")


def test_is_a_tactic_generator(generator):
    assert isinstance(generator, TacticGenerator)
    assert generator.model_id.endswith("model")


@pytest.mark.parametrize(("temperature", "top_p"), [(1.0, 1.0), (1.7, 0.8)])
def test_logprob_equals_teacher_forced_forward_pass(generator, teacher_forced, temperature, top_p):
    """Raw model logprobs, whatever the temperature/top-p used to sample (those reshape only the
    sampling distribution); grouped so that group i really continues prompt i."""
    ps = prompts()[:3]
    params = SamplingParams(
        n=4, temperature=temperature, top_p=top_p, max_new_tokens=12, stop=STOPS, seed=3
    )
    groups = generator.sample(ps, params)
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
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=8, stop=STOPS, seed=0)
    groups = generator.generate(ps, params)
    samples = generator.sample(ps, params)  # same seed: the same raw draws
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


def test_seed_reproduces_and_leaves_global_rng_alone(generator):
    params = SamplingParams(n=4, temperature=1.0, max_new_tokens=8, seed=11)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = generator.generate(prompts()[:2], params)
    after = torch.rand(1)
    b = generator.generate(prompts()[:2], params)
    c = generator.generate(
        prompts()[:2], SamplingParams(n=4, temperature=1.0, max_new_tokens=8, seed=12)
    )
    assert a == b
    assert a != c
    assert torch.equal(before, after)


def test_batch_chunks_give_the_same_groups(tiny_model, generator):
    """max_batch splits prompts × n into several forward batches; grouping must not change."""
    small = TransformersGenerator(tiny_model, max_batch=4)
    params = SamplingParams(n=2, temperature=0.0, max_new_tokens=5)
    assert small.generate(prompts(), params) == generator.generate(prompts(), params)


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


def test_last_token_embedding_is_normalised_and_padding_invariant(generator):
    texts = ["⊢ p", prompts()[2], "h : p ∧ q"]
    vectors = generator.embed(texts)
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Padded in a batch or alone: the same vector (left padding keeps the last token last).
    for i, text in enumerate(texts):
        np.testing.assert_allclose(generator.embed([text])[0], vectors[i], atol=1e-5)
    # And it is the final layer's last-token state.
    ids = torch.tensor([generator.tokenizer(texts[1]).input_ids])
    with torch.inference_mode():
        h = generator.model(ids, output_hidden_states=True).hidden_states[-1][0, -1]
    np.testing.assert_allclose(vectors[1], (h / h.norm()).numpy(), atol=1e-5)


def test_mean_pooling_is_mask_aware(tiny_model, generator):
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
