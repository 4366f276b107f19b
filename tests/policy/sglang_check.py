"""Run inside SGLang's own virtualenv (``sglang_env.py``): check request payloads with SGLang's code.

Reads ``{"vocab_size": V, "requests": [payload, …]}`` as JSON on stdin and writes one JSON line per
payload: every item's ``sampling_params`` through ``SamplingParams(**sp).verify(V)`` — SGLang's own
check, so a field it renames or rejects fails here — and the whole payload through
``GenerateReqInput(**payload).normalize_batch_and_arguments()`` when ``sglang.srt.managers.io_struct``
imports (on a CPU machine it does not: through its model configs it imports torchvision, whose
PyPI wheel does not load beside the CPU torch wheel; the line then says so, and the batch rules that
method applies to a ``text`` list with a ``sampling_params`` list — one params object per text, the
same ``n`` in all — are checked as its source states them).  The last line lists the API fields of
``SamplingParams``, to compare with what burnqed's stand-in server accepts.
"""

import json
import sys

from sglang.srt.sampling.sampling_params import SamplingParams

try:
    from sglang.srt.managers.io_struct import GenerateReqInput

    IO_STRUCT = None
except ImportError as e:  # measured on a CPU machine: torchvision (see the module docstring)
    GenerateReqInput = None
    IO_STRUCT = f"{type(e).__name__}: {e}"


def batch_rules(payload: dict) -> None:
    """``GenerateReqInput._handle_parallel_sampling`` / ``_normalize_batch_inputs`` (0.5.23) for a
    text batch with a list of sampling params."""
    text, sps = payload.get("text"), payload.get("sampling_params")
    if isinstance(sps, list):
        if not isinstance(text, list) or len(sps) != len(text):
            raise ValueError("a sampling_params list needs one object per text item")
        n = sps[0].get("n", 1)
        if any(sp.get("n", 1) != n for sp in sps):
            raise ValueError(
                "The parallel_sample_num should be the same for all samples in sample params."
            )


def check(payload: dict, vocab_size: int) -> dict:
    sps = payload.get("sampling_params")
    items = sps if isinstance(sps, list) else [sps or {}]
    try:
        for sp in items:
            SamplingParams(**sp).verify(vocab_size)
        if GenerateReqInput is not None:
            GenerateReqInput(**payload).normalize_batch_and_arguments()
        else:
            batch_rules(payload)
    except Exception as e:  # what SGLang would answer with 400
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    return {"ok": True, "items": len(items), "seeds": [sp.get("sampling_seed") for sp in items]}


def main() -> None:
    job = json.load(sys.stdin)
    for payload in job["requests"]:
        print(json.dumps(check(payload, int(job["vocab_size"]))))
    internal = {"stop_strs", "stop_regex_strs", "stop_str_max_len", "stop_regex_max_len",
                "is_normalized", "ebnf_full_assistant"}  # fmt: skip
    fields = [f for f in SamplingParams.__struct_fields__ if f not in internal]  # a msgspec.Struct
    print(json.dumps({"fields": fields, "io_struct": IO_STRUCT}))


if __name__ == "__main__":
    main()
