"""The lean Llama forward (burnqed.policy.decoder) is the model's own forward, bit for bit, and the
in-process backend's samples and embeddings do not depend on whether it runs (or on its prefill
cache): the demo's numbers must not move with it."""

from __future__ import annotations

import pytest
import torch

from burnqed.data.prompt import STOP, embed_states, format_prompt
from burnqed.policy import SamplingParams, candidate_seeds
from burnqed.policy.decoder import LlamaDecoder, unsupported
from burnqed.policy.transformers_backend import PrefillCache, TransformersGenerator

STATES = [
    "p q : Prop\nh : p ∧ q\n⊢ q ∧ p",
    "p : Prop\n⊢ p → p",
    "p q r : Prop\nh₁ : p → q\nh₂ : q → r\n⊢ p → r",
    "⊢ True",
]


@pytest.fixture(scope="module")
def pair(tiny_model):
    """Two generators of one model directory: the lean forward, and the model's own."""
    fast = TransformersGenerator(tiny_model)
    slow = TransformersGenerator(tiny_model)
    slow.decoder = None
    assert fast.decoder is not None
    yield fast, slow
    fast.close()
    slow.close()


def test_logits_and_cache_are_the_models_bitwise(pair):
    fast, _ = pair
    model, dec = fast.model, fast.decoder
    torch.manual_seed(0)
    with torch.inference_mode():
        for rows, state in zip((1, 8, 16, 3), STATES, strict=True):  # the demo: 8 and 16
            ids = fast.tokenizer(format_prompt(state), return_tensors="pt").input_ids
            ids = ids.expand(rows, -1).contiguous()
            out = model(input_ids=ids, use_cache=True)
            logits, cache = dec.forward(ids)
            assert torch.equal(out.logits, logits)
            hf_cache = out.past_key_values
            state = dec.begin(cache, ids.shape[1] + 6)  # in place, from the same prefill
            for step in range(6):
                nxt = torch.randint(2, model.config.vocab_size, (rows, 1))
                out = model(input_ids=nxt, past_key_values=hf_cache, use_cache=True)
                hf_cache = out.past_key_values
                logits, cache = dec.forward(nxt, cache)
                assert torch.equal(out.logits, logits), (rows, step)
                assert torch.equal(out.logits, dec.step(nxt, state)), (rows, step)
            for layer, (keys, values) in enumerate(cache):
                assert torch.equal(hf_cache.layers[layer].keys, keys)
                assert torch.equal(hf_cache.layers[layer].values, values)
            hidden = model.base_model(input_ids=ids[:1]).last_hidden_state
            assert torch.equal(hidden, dec.hidden(ids[:1]))


@pytest.mark.parametrize(("n", "temperature"), [(8, 1.2), (4, 0.0)])
def test_samples_are_the_same_with_and_without_it(pair, n, temperature):
    fast, slow = pair
    # Repeated prompts: the second time a prompt is sampled its prefill comes from the cache.
    prompts = [format_prompt(s) for s in STATES] * 2
    params = SamplingParams(n=n, temperature=temperature, max_new_tokens=16, stop=STOP)
    seeds = [candidate_seeds(0, "t", i, str(i % 3), n) for i in range(len(prompts))]
    hits = fast.prefills.hits
    assert fast.raw_candidates(prompts, params, seeds) == slow.raw_candidates(
        prompts, params, seeds
    )
    assert fast.prefills.hits >= hits + len(STATES)  # the repeats were served from the cache


def test_embeddings_are_the_same_with_and_without_it(pair):
    fast, slow = pair
    assert embed_states(fast, STATES).tobytes() == embed_states(slow, STATES).tobytes()


def test_unsupported_models_keep_their_own_forward(tiny_model):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    assert unsupported(model.eval()) is None
    assert "training mode" in unsupported(model.train())
    model.eval()
    model.config._attn_implementation = "eager"
    assert "sdpa" in unsupported(model)
    assert LlamaDecoder.for_model(model) is None


def test_prefill_cache_keeps_the_recent_within_its_bytes():
    def value(kb: int):
        return torch.zeros(kb * 256), ((torch.zeros(0), torch.zeros(0)),)  # kb KiB of logits

    cache = PrefillCache(max_bytes=10 * 1024)
    for k in range(4):
        cache.put(k, value(3))
    assert cache.get(0) is None and cache.get(1) is not None  # 4 × 3 KiB > 10 KiB: 0 went
    cache.put(4, value(3))  # 1 was used last: 2 goes
    assert cache.get(2) is None and cache.get(1) is not None
    cache.put(5, value(11))  # larger than the whole cache: not kept
    assert cache.get(5) is None and cache.bytes <= 10 * 1024


def test_a_shared_prefill_gives_every_candidate_the_one_rows_numbers(tiny_model):
    """policy.shared_prefill: the prompt is prefilled in one row and each candidate continues
    it — what the candidates would get from n rows but for the prefill's last bits.  Its samples
    are those of decoding from that one row copied n times, and they are keyed apart in the
    prefill cache (a one-row prefill serves n = 8 and n = 16 alike)."""
    shared = TransformersGenerator(tiny_model, shared_prefill=True)
    rows = TransformersGenerator(tiny_model)
    assert shared.shared_prefill and not rows.shared_prefill
    params = SamplingParams(n=8, temperature=1.2, max_new_tokens=16, stop=STOP)
    prompts = [format_prompt(s) for s in STATES]
    seeds = [candidate_seeds(0, "t", i, "root", 8) for i in range(len(prompts))]
    got = shared.raw_candidates(prompts, params, seeds)
    assert [len(g) for g in got] == [8] * len(prompts)
    with torch.inference_mode():
        ids = shared.tokenizer(prompts[0], return_tensors="pt").input_ids
        _, cache = shared.decoder.forward(ids)  # the one row
        state = shared.decoder.begin(cache, ids.shape[1] + 4, rows=8)
        assert all(k.shape[0] == 8 and torch.equal(k[:, :, : ids.shape[1]], c[0].expand(8, -1, -1, -1))
                   for (k, _), c in zip(state.layers, cache, strict=True))  # fmt: skip
    # The same samples again from the cache (n = 16 reuses the n = 8 prefill's one row).
    hits = shared.prefills.hits
    assert shared.raw_candidates(prompts, params, seeds) == got
    shared.raw_candidates(prompts[:1], SamplingParams(n=16, temperature=1.2, max_new_tokens=8,
                                                      stop=STOP), [list(range(16))])  # fmt: skip
    assert shared.prefills.hits == hits + len(prompts) + 1
    shared.close()
    rows.close()
