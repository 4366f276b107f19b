"""Joint training's value half (issue 30 §3, §5): the state rows it pools are the scorer's embedding
of the state's prompt, and the head it trains can reach the log-prob's scale."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from burnqed.config import EBMConfig
from burnqed.data.prompt import embed_states, format_prompt, state_ids
from burnqed.ebm.groups import KINDS, Groups
from burnqed.ebm.train import build_head
from burnqed.policy.embedding import context_limit
from burnqed.train import joint
from burnqed.train.joint import collate, joint_forward, tokenize_example

STATES = [
    "p q : Prop\n⊢ p ∧ q → q",
    "p q : Prop\nh : p ∧ q\n⊢ q",
    "p : Prop\n⊢ p",
]
GOAL = "p q : Prop\n⊢ p ∧ q → q ∧ p"


@pytest.fixture(scope="module")
def peft_model(tiny_base, lora_adapter):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, str(lora_adapter), is_trainable=True)
    tok = AutoTokenizer.from_pretrained(tiny_base)
    tok.pad_token = tok.pad_token or tok.eos_token
    return model, tok


def test_joint_trainings_pooled_row_for_a_state_is_embed_states(
    peft_model, tiny_base, lora_adapter, tmp_path
):
    """A group's rows go through joint training's own tokenisation (``group_texts``) into a right-
    padded mixed batch; each pooled row equals what every backend's one call
    (:func:`embed_states`: the state's prompt, last token, L2-normalised) gives for the merged
    model — a state longer than the model's context truncated alike, the tokenizer's BOS kept."""
    from burnqed.policy.transformers_backend import TransformersGenerator
    from burnqed.train.export import merge_adapter

    model, tok = peft_model
    limit = context_limit(model.get_base_model().config)
    assert limit is not None
    long_state = "p q : Prop\n⊢ " + " ∧ ".join(["(p ∨ q)"] * limit)  # far past the context
    states = [*STATES, long_state]
    texts = {f"s{i}": s for i, s in enumerate(states)} | {"g": GOAL}
    groups = Groups(
        states=[[f"s{i}" for i in range(len(states))]], goals=["g"], depth=np.array([1]),
        theorem=["t"], heldout=np.array([False]), kind_counts=dict.fromkeys(KINDS, 0),
    )  # fmt: skip
    gt = joint.group_texts(groups, texts, tok, limit)
    rows = gt.states[0]
    full = tok(format_prompt(long_state)).input_ids
    assert len(full) > limit and rows[-1] == full[:limit]  # truncated at the context
    assert rows[0] == tok(format_prompt(STATES[0])).input_ids  # the tokenizer's specials kept
    if tok.bos_token_id is not None and tok("x").input_ids[0] == tok.bos_token_id:
        assert all(r[0] == tok.bos_token_id for r in rows)
    assert rows == [state_ids(tok, s, limit) for s in states]
    assert len({len(r) for r in rows}) > 1  # the batch is padded

    head = build_head(model.get_base_model().config.hidden_size, EBMConfig(hidden_sizes=(32, 16)))
    ex = {"prompt": format_prompt("⊢ p → p"), "completion": "intro h"}
    batch = collate(tok, [tokenize_example(tok, ex, 128)], rows, gt.goals, len(rows))
    model.eval()
    with torch.no_grad():
        pooled = joint_forward(model, head, batch, "last")["pooled"].numpy()
    merged = tmp_path / "merged"
    merge_adapter(base=tiny_base, adapter=lora_adapter, out=merged)
    gen = TransformersGenerator(merged, pooling="last")
    scorer = embed_states(gen, [*states, GOAL])
    np.testing.assert_allclose(pooled, scorer, atol=2e-5)
    # The prompt, not the raw state: the vector the policy reads differs from the raw text's.
    raw = gen.embed(STATES[:1])
    assert not np.allclose(raw[0], scorer[0], atol=1e-3)
    np.testing.assert_allclose(np.linalg.norm(scorer, axis=1), 1.0, atol=1e-5)


def test_the_embedding_cache_key_and_model_digest_change_with_the_embedded_text(monkeypatch):
    """A vector of another text (the raw state) is never reused: the prompt format is in the cache
    key's code digest and the text embedded is in the model digest the EBM is checked against."""
    from burnqed.data import prompt
    from burnqed.ebm import embeddings
    from burnqed.provenance import code_files

    files = {f.name for f in code_files("burnqed.policy.backend", "burnqed.data.prompt")}
    assert {"prompt.py", "embedding.py", "transformers_backend.py", "http.py"} <= files

    class Served:
        model_id, pooling = "served-model", "last"

    policy = {"backend": "sglang", "server_url": "http://h:1", "embedding_server_url": "http://h:2"}
    before = embeddings.embedding_model_digest(Served())
    key = embeddings.embedding_key(embeddings.embedding_settings(Served(), policy))
    monkeypatch.setattr(prompt, "EMBEDDED_TEXT", "state")
    assert embeddings.embedding_model_digest(Served()) != before
    assert embeddings.embedding_key(embeddings.embedding_settings(Served(), policy)) != key


def test_joint_training_reaches_a_one_nat_energy_span_without_aborting(
    tiny_base, lora_adapter, pairs, tmp_path
):
    """On separable toy groups (each proof-path state against dead ends that differ from it in a
    marker hypothesis), the head's scale — its own constant learning rate, no cosine — lets the
    held-out energy span reach 1 nat within ``sft.later_max_steps``, the temperature free to move
    without aborting.  At the old setting (the scale on the head's rate under the cosine) it
    cannot: the temperature moves ~one rate a step.

    That is InfoNCE's scale, so it is measured with InfoNCE alone.  The remaining-steps term
    (``ebm.remaining_steps_weight``, on by default) anchors the energy at one unit per proof step,
    and this toy's embeddings do not carry the steps (its held-out ``remaining_corr`` stays near
    0), so with it the span ends near 1 nat, above or below by the thread count (0.9–1.2 at 1–3
    threads): there the run must still train without aborting and its span grow from ~0."""
    from tests.train.test_joint import EBM, JOINT, SPLIT
    from tests.train.trajectories import Proof, write_search

    # Each step's dead end is its state with "⊢ False" added (tests/train/trajectories.py).
    proofs = [
        Proof(f"sep{t}", [(f"x{t} : Prop\n⊢ goal{t} {d}", "tac") for d in range(4)])
        for t in range(16)
    ]
    search = write_search(tmp_path / "iter_0" / "search", proofs)
    cfg = {**JOINT, "later_max_steps": 30, "joint_lambda": 1.0, "joint_head_learning_rate": 3e-3,
           "joint_scale_learning_rate": 0.05, "joint_monitor_every": 10, "joint_save_every": 30,
           "joint_state_max_length": 256}  # fmt: skip

    def run(out: str, weight: float) -> dict:
        ebm = {**EBM, "temperature_min": 0.01, "remaining_steps_weight": weight}
        return joint.train_joint(
            base=tiny_base, train=pairs["train"], val=pairs["val"], out=tmp_path / out, cfg=cfg,
            ebm=ebm, pooling="last", iteration=1, previous_adapter=lora_adapter,
            trajectories=[search], seed=0, split=SPLIT,
        )  # fmt: skip

    with_steps = run("with_steps", 1.0)
    start, end = with_steps["joint"]["heldout_start"], with_steps["joint"]["heldout_end"]
    assert with_steps["steps"] == 30 and end["energy_span"] > 20 * start["energy_span"]
    assert -1.0 <= end["remaining_corr"] <= 1.0  # monitored beside rank-1 (the groups carry steps)
    summary = run("a", 0.0)
    start, end = summary["joint"]["heldout_start"], summary["joint"]["heldout_end"]
    assert summary["steps"] == 30 and summary["joint"]["groups"]["heldout"] > 0
    assert start["energy_span"] < 1.0 <= end["energy_span"], (start, end)
    assert end["rank1"] >= start["rank1"]
    last = summary["joint"]["last"]
    # The scale's rate is constant while the others end the cosine at 0.
    assert last["lr_head_scale"] == 0.05 and last["lr_head"] == 0.0
