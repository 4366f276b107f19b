"""Tiny-model factory: a locally trained byte-level BPE tokenizer + a small random Llama.

The demo's base model and every policy test's model.  Nothing comes from a hub: the tokenizer is
trained on the given corpus with ``tokenizers``, the weights are a seeded random init, and the result
is a normal Hugging Face directory (``config.json``, ``generation_config.json``,
``model.safetensors``, ``tokenizer.json``, ``tokenizer_config.json``) that the normal
``AutoModelForCausalLM`` / ``AutoTokenizer`` code loads — and that real servers (vLLM, SGLang) serve.

Why these choices (``reference/training-stack.md`` §5, ``reference/inference-servers.md``):

- **Llama, not Qwen2**: transformers maps a ``qwen2`` directory to ``Qwen2Tokenizer``, which swaps in
  Qwen2's pre-tokenizer regex, so reloaded token ids would differ from the trained tokenizer.
- **head_dim in the servers' supported set** (32, 64, …): vLLM's CPU attention accepts only those;
  head_dim 16 passes ``/health`` and kills the engine on the first request.
- ``<|endoftext|>`` is BOS and EOS, ``<|pad|>`` the padding token; the tokenizer adds no BOS, so a
  prompt tokenizes the same in-process and on a server.

Example::

    from burnqed.policy.tiny import build_tiny_model
    path = build_tiny_model("models/tiny", ["intro h", "exact h", "⊢ p → p"] * 50,
                            hidden_size=128, heads=4, intermediate_size=336)
    # AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"
# Head dimensions vLLM's CPU attention backend accepts (verified; see inference-servers.md).
SERVER_HEAD_DIMS = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)


def train_tokenizer(corpus: Iterable[str], *, vocab_size: int = 512):
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``corpus`` (any text encodes)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        # The full byte alphabet, so text unseen in the corpus (Unicode goals) still encodes.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=EOS_TOKEN, eos_token=EOS_TOKEN, pad_token=PAD_TOKEN
    )


def build_tiny_model(
    out_dir: str | Path,
    corpus: Iterable[str],
    *,
    vocab_size: int = 512,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 2,
    kv_heads: int | None = None,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 1024,
    seed: int = 0,
) -> Path:
    """Train the tokenizer, build a seeded random Llama, save both to ``out_dir``; return it.

    ``vocab_size`` is an upper bound: the model's vocabulary is what BPE actually learned (a small
    corpus stops early).  ``kv_heads`` defaults to ``heads`` (no grouped-query attention);
    ``intermediate_size`` to ``2 * hidden_size``.  The SPEC §4.4 demo size is
    ``hidden_size=128, heads=4, intermediate_size=336`` (~0.4M parameters with a <1k vocabulary).
    """
    if hidden_size % heads:
        raise ValueError(f"hidden_size {hidden_size} is not divisible by heads {heads}")
    head_dim = hidden_size // heads
    if head_dim not in SERVER_HEAD_DIMS:
        raise ValueError(
            f"head_dim = hidden_size / heads = {head_dim}; real servers accept only {SERVER_HEAD_DIMS}"
            " (e.g. hidden 64 with 2 heads, or 128 with 4)"
        )
    kv_heads = heads if kv_heads is None else kv_heads
    if heads % kv_heads:
        raise ValueError(f"heads {heads} is not divisible by kv_heads {kv_heads}")

    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    corpus = list(corpus)
    if not corpus:
        raise ValueError("build_tiny_model: the tokenizer corpus is empty")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(corpus, vocab_size=vocab_size)
    eos_id = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    pad_id = tokenizer.convert_tokens_to_ids(PAD_TOKEN)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,  # halves the parameters of a model whose vocab dominates
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    # A generation config with only the special ids: sampling parameters are always explicit
    # (a server reads temperature/top_p defaults from this file otherwise).
    model.generation_config = GenerationConfig(
        bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=pad_id
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    _name_portable_tokenizer_class(out / "tokenizer_config.json")
    params = sum(p.numel() for p in model.parameters())
    log.info(
        "tiny Llama at %s: vocab %d, hidden %d, %d layers, %d heads x %d, ffn %d, %d params",
        out,
        len(tokenizer),
        hidden_size,
        layers,
        heads,
        head_dim,
        config.intermediate_size,
        params,
    )
    return out


def _name_portable_tokenizer_class(path: Path) -> None:
    """Name ``PreTrainedTokenizerFast`` in ``tokenizer_config.json``.

    transformers 5 writes its new ``TokenizersBackend`` class name, which the transformers 4 inside a
    server's environment (vLLM pins <5.20) does not know; both versions load the old name and read the
    same ``tokenizer.json``, so ids stay identical.
    """
    cfg = json.loads(path.read_text(encoding="utf-8"))
    cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
    path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
