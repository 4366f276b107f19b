"""``models/iter_{i}/merged/``: base + adapter merged into one plain model for search and serving (§4.7).

The base is reloaded **unquantized** — merging into a 4-bit base stays 4-bit, lossy and not a plain
checkpoint (``reference/training-stack.md`` §3) — then ``PeftModel.from_pretrained(base, adapter)
.merge_and_unload()`` folds the LoRA deltas into the weights, and the result is saved as sharded
safetensors with the tokenizer and generation config: a normal Hugging Face directory that
``AutoModelForCausalLM``, vLLM and SGLang load.

Before it is published the saved directory is checked: it is reloaded, its logits on a sample
prompt are compared with the unmerged base+adapter's, and it must generate a tactic (logged, and
recorded in ``burnqed_merge.json``).  Any failure fails the stage and leaves only ``<out>.tmp``.
An adapter whose training a guard stopped (its ``training_summary.json``'s ``stopped``: the previous
iteration's adapter, :func:`burnqed.train.joint.stop_record`) passes that on as
``training_stopped``, which every eval of the merged model copies into its provenance.

The merge is arithmetic on fixed weights (no randomness); it runs under
:func:`burnqed.determinism.deterministic_training` like the training stages, so on the same CPU
type, thread count and library versions every file but ``run_info.json`` (when, how long, the
command line) is the same on a rerun.

Example::

    from pathlib import Path
    from burnqed.train.export import merge_adapter
    merge_adapter(base=Path("models/base"), adapter=Path("models/iter_0/adapter"),
                  out=Path("models/iter_0/merged"))
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from burnqed.data.prompt import format_prompt, parse_completion
from burnqed.determinism import deterministic_training, write_run_info
from burnqed.policy.model_files import check_model_dir
from burnqed.train.artifacts import provenance, quiet_progress_bars, staged_dir, write_json
from burnqed.train.examples import TrainingDataError

log = logging.getLogger(__name__)

SUMMARY_FILE = "burnqed_merge.json"
# Files that make up a Hugging Face tokenizer (fast, slow/SentencePiece, chat template).
TOKENIZER_PATTERNS = (
    "tokenizer*",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.*",
    "merges.txt",
    "*.model",
    "*.tiktoken",
    "chat_template*",
)
# A state every propositional and Mathlib-trained policy can say something about.
SAMPLE_STATE = "p q : Prop\nh : p ∧ q\n⊢ q ∧ p"
# Largest logit difference between the merged model and base+adapter that still counts as equal:
# float32 merges agree to ~1e-6; bf16 weights round each merged weight to 8 bits of mantissa.
LOGIT_TOLERANCE = {"float32": 1e-3, "bfloat16": 0.5, "float16": 0.25}


class MergeError(RuntimeError):
    """The merged model does not load, differs from base+adapter, or cannot generate."""


@dataclass(frozen=True)
class MergeCheck:
    """What the post-merge check saw."""

    prompt_state: str
    tactic: str  # greedy tactic from the reloaded merged model
    max_logit_diff: float  # merged vs base+adapter on the sample prompt
    tolerance: float
    dtype: str


def training_stopped(adapter: Path) -> dict[str, Any] | None:
    """The ``stopped`` block of ``adapter``'s ``training_summary.json`` (None: its training
    finished, or no summary)."""
    path = Path(adapter) / "training_summary.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("stopped")


def merge_adapter(
    *, base: Path, adapter: Path, out: Path, max_shard_size: str | int = "2GB"
) -> MergeCheck:
    """Merge ``adapter`` into the unquantized ``base`` and save it to ``out``; return the check."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base, adapter, out = Path(base), Path(adapter), Path(out)
    for path, what, marker in ((base, "base model", "config.json"),
                               (adapter, "adapter", "adapter_config.json")):  # fmt: skip
        if not (path / marker).exists():
            raise TrainingDataError(f"{path}: not a {what} directory (no {marker})")
    check_model_dir(base)  # a broken base fails here naming the file, not inside transformers
    started = time.time()
    quiet_progress_bars()
    cuda = torch.cuda.is_available()
    tokenizer = AutoTokenizer.from_pretrained(base, local_files_only=True)
    prompt = format_prompt(SAMPLE_STATE)
    enc = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)

    # dtype "auto": the checkpoint's own (bf16 for the real models, float32 for the tiny one) —
    # never 4-bit, whatever the adapter was trained on.
    with (
        deterministic_training(seed=None, device="cuda" if cuda else "cpu") as determinism,
        staged_dir(out) as staging,
    ):
        model = AutoModelForCausalLM.from_pretrained(
            base, dtype="auto", device_map={"": 0} if cuda else None, local_files_only=True
        )
        dtype = str(model.dtype).removeprefix("torch.")
        model = PeftModel.from_pretrained(model, str(adapter))
        model.eval()
        with torch.no_grad():
            reference = model(**enc.to(model.device)).logits.float().cpu()  # (1, T, V)
        merged = model.merge_and_unload()
        merged.save_pretrained(staging, max_shard_size=max_shard_size)
        copy_tokenizer_files(base, staging)
        del model, merged  # the check reloads from disk: what search will load
        check = _check_merged(staging, enc, reference, dtype=dtype, cuda=cuda)
        shards = sorted(p.name for p in staging.glob("*.safetensors"))
        stopped = training_stopped(adapter)
        write_json(
            staging / SUMMARY_FILE,
            {
                "base": str(base),
                "adapter": str(adapter),
                # only when a guard stopped the adapter's training: every other merge's file is
                # as it was
                **({"training_stopped": stopped} if stopped else {}),
                "dtype": dtype,
                "max_shard_size": max_shard_size,
                "shards": shards,
                "check": asdict(check),
                "determinism": determinism,
                **provenance(),
            },
        )
        write_run_info(staging, started=started)
    log.info(
        "merged %s + %s into %s (%d shard(s), %s); check tactic %r, max logit diff %.2e",
        base, adapter, out, len(shards), dtype, check.tactic, check.max_logit_diff,
    )  # fmt: skip
    return check


def copy_tokenizer_files(src: Path, dst: Path) -> list[str]:
    """Copy the tokenizer files of ``src`` byte for byte; return their names.

    Copied rather than re-saved: re-saving rewrites ``tokenizer_config.json`` with transformers 5's
    class name, which the transformers 4 inside a vLLM/SGLang environment cannot load.
    """
    names = sorted(
        {p.name for pattern in TOKENIZER_PATTERNS for p in src.glob(pattern) if p.is_file()}
    )
    if "tokenizer_config.json" not in names:
        raise TrainingDataError(f"{src}: no tokenizer_config.json: the base has no tokenizer")
    for name in names:
        shutil.copy2(src / name, dst / name)
    return names


def _check_merged(path: Path, enc: Any, reference: Any, *, dtype: str, cuda: bool) -> MergeCheck:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype="auto", device_map={"": 0} if cuda else None, local_files_only=True
        )
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as e:  # any load failure means the export is unusable
        raise MergeError(f"{path}: the merged model does not reload: {e}") from e
    model.eval()
    enc = enc.to(model.device)
    with torch.no_grad():
        logits = model(**enc).logits.float().cpu()  # (1, T, V)
        diff = float((logits - reference).abs().max())
        tolerance = LOGIT_TOLERANCE.get(dtype, 0.5)
        if diff > tolerance:
            raise MergeError(
                f"{path}: merged logits differ from base+adapter by {diff:.3g} (> {tolerance} for {dtype})"
            )
        try:
            generated = model.generate(
                **enc, max_new_tokens=32, do_sample=False,
                pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )  # fmt: skip
        except Exception as e:
            raise MergeError(f"{path}: the merged model cannot generate: {e}") from e
    text = tokenizer.decode(generated[0, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    tactic = parse_completion(text)
    if tactic:
        log.info("merged model's tactic for %r: %r", SAMPLE_STATE, tactic)
    else:
        # Loading and generation work (the export is sound); the model just has nothing to say.
        log.warning("merged model generated an empty tactic for %r (raw %r)", SAMPLE_STATE, text)
    return MergeCheck(
        prompt_state=SAMPLE_STATE,
        tactic=tactic,
        max_logit_diff=diff,
        tolerance=tolerance,
        dtype=dtype,
    )
