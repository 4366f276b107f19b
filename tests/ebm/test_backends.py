"""The EBM over real policy backends: in-process pooling and SGLang ``/encode`` agree, digests too.

An EBM trained on in-process embeddings (``pooling="last"``) must score the same through an SGLang
embedding server of the same weights — and be refused by a policy with other weights or pooling.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from burnqed.config import EBMConfig
from burnqed.ebm.embeddings import embedding_model_digest
from burnqed.ebm.scorer import EBMValueModel, IncompatibleEmbeddings, load_value_model, save_ebm
from burnqed.ebm.train import build_head
from burnqed.policy.http import SGLangGenerator
from burnqed.policy.standin import StandinServer
from burnqed.policy.transformers_backend import TransformersGenerator
from tests.policy.corpus import corpus

STATES = [
    "p q : Prop\nh : p ∧ q\n⊢ q ∧ p",
    "p : Prop\n⊢ p → p",
    "case left\np q : Prop\nhp : p\n⊢ p",
]
GOAL = "p q : Prop\n⊢ p ∧ q → q ∧ p"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from burnqed.policy.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", corpus(), seed=0)


@pytest.fixture(scope="module")
def ebm_dir(tiny, tmp_path_factory):
    """An (untrained) EBM stamped with the in-process tiny model's embedding digest."""
    gen = TransformersGenerator(tiny, pooling="last")
    cfg = EBMConfig(hidden_sizes=(32, 16), negatives=3)
    torch.manual_seed(0)
    head = build_head(gen.hidden_size, cfg)
    out = tmp_path_factory.mktemp("ebm")
    save_ebm(out, head, {"config": cfg.to_dict(), "dim": gen.hidden_size,
                         "embedding_model_digest": embedding_model_digest(gen)})  # fmt: skip
    return out


def test_sglang_encode_scores_like_the_in_process_backend(tiny, ebm_dir):
    local = TransformersGenerator(tiny, pooling="last")
    with StandinServer(tiny, is_embedding=True) as server:
        remote = SGLangGenerator("http://127.0.0.1:9", model_id=str(tiny),
                                 embedding_url=server.url)  # fmt: skip
        assert embedding_model_digest(remote) == embedding_model_digest(local)
        e_remote = load_value_model(ebm_dir, remote, device="cpu").energies(STATES, [GOAL] * 3)
        assert len(server.requests) == 1  # states and the goal in one /encode batch
    e_local = load_value_model(ebm_dir, local, device="cpu").energies(STATES, [GOAL] * 3)
    np.testing.assert_allclose(e_remote, e_local, rtol=1e-4, atol=1e-5)
    assert len(set(np.round(e_local, 6))) == 3  # the states are told apart


def test_other_pooling_or_weights_are_refused(tiny, ebm_dir, tmp_path):
    mean = TransformersGenerator(tiny, pooling="mean")
    with pytest.raises(IncompatibleEmbeddings, match="retrain"):
        load_value_model(ebm_dir, mean, device="cpu")
    import shutil

    changed = tmp_path / "merged"
    shutil.copytree(tiny, changed)
    weights = next(changed.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of one weight: a different model
    weights.write_bytes(bytes(data))
    other = TransformersGenerator(changed, pooling="last")
    with pytest.raises(IncompatibleEmbeddings) as exc:
        load_value_model(ebm_dir, other, device="cpu")
    assert embedding_model_digest(other) in str(exc.value)
    assert isinstance(load_value_model(ebm_dir, TransformersGenerator(tiny), device="cpu"),
                      EBMValueModel)  # fmt: skip


def test_embedding_key_follows_the_resolved_dtype_of_the_in_process_backend(tiny):
    """The key holds what the weights run in, not what was asked: on a CPU ``auto`` is float32 (one
    key), bfloat16 another; a server's vectors are keyed by how it was started, not by this CPU."""
    from burnqed.ebm.embeddings import embedding_key, embedding_settings

    def key(dtype: str) -> str:
        gen = TransformersGenerator(tiny, device="cpu", dtype=dtype)
        return embedding_key(embedding_settings(gen, {"backend": "transformers", "dtype": dtype}))

    assert key("auto") == key("float32") != key("bfloat16")
    remote = SGLangGenerator("http://127.0.0.1:9", model_id=str(tiny),
                             embedding_url="http://127.0.0.1:10")  # fmt: skip
    served = {"backend": "sglang", "server_url": "http://127.0.0.1:9"}
    settings = embedding_settings(remote, served)
    assert "hardware" not in settings and settings["server"][:3] == [
        "python",
        "-m",
        "sglang.launch_server",
    ]
    assert embedding_key(settings) != embedding_key(
        embedding_settings(remote, {**served, "embedding_server_url": "http://127.0.0.1:10"})
    )
