"""The model-directory check and the no-hub rule for path-like model arguments."""

from __future__ import annotations

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from burnqed.policy.model_files import ModelFilesError, check_model_dir, is_path_like


@pytest.mark.parametrize(
    ("model", "path_like"),
    [
        ("models/base", True),
        ("models/iter_0/merged", True),
        ("./m", True),
        ("/abs/model", True),
        ("~/m", True),
        ("deepseek-ai/DeepSeek-Prover-V2-7B", False),
        ("gpt2", False),
    ],
)
def test_is_path_like(model, path_like):
    assert is_path_like(model) is path_like


def test_sharded_checkpoint_with_a_missing_shard_names_it(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (tmp_path / "tokenizer.json").write_text("{}")
    save_file(
        {"a": np.ones(4, dtype=np.float32)}, str(tmp_path / "model-00001-of-00002.safetensors")
    )
    index = {"weight_map": {"a": "model-00001-of-00002.safetensors",
                            "b": "model-00002-of-00002.safetensors"}}  # fmt: skip
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(ModelFilesError, match=r"model-00002-of-00002\.safetensors: missing"):
        check_model_dir(tmp_path)
    save_file(
        {"b": np.ones(4, dtype=np.float32)}, str(tmp_path / "model-00002-of-00002.safetensors")
    )
    check_model_dir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    with pytest.raises(ModelFilesError, match=r"config\.json: no `model_type`"):
        check_model_dir(tmp_path)


def test_the_in_process_backend_never_looks_up_a_hub(tmp_path, monkeypatch):
    import transformers

    from burnqed.policy import transformers_backend

    calls = []
    real = transformers.AutoTokenizer.from_pretrained

    def spy(*args, **kwargs):
        calls.append(kwargs.get("local_files_only"))
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", spy)  # imported on use
    with pytest.raises(ModelFilesError, match="no such model directory"):
        transformers_backend.TransformersGenerator(tmp_path / "absent")
    assert calls == []  # refused before transformers was asked
    with pytest.raises(OSError):  # a hub id resolves from the local cache only: none here
        transformers_backend.TransformersGenerator("burnqed-test/not-cached-anywhere")
    assert calls == [True]
