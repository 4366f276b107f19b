"""SGLang's own request checks on the payloads burnqed's native backend builds.

Marked ``server`` (run by ``.ci/run``'s server step): SGLang's wheel lives in its own cached
virtualenv (``sglang_env.py``), and ``sglang_check.py`` runs there, passing every payload through
``SamplingParams(**sp).verify(vocab_size)`` — a field SGLang renames or rejects fails here instead
of on a rented GPU.  The payloads are the ones :meth:`SGLangGenerator.payload` sends for the
sampling settings burnqed uses: per-candidate ``sampling_seed``, the real stop strings, several ``n``
and temperatures (greedy included), the launcher's one-token warm-up.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from burnqed.data.prompt import STOP
from burnqed.policy import SamplingParams, candidate_seeds
from burnqed.policy.http import SGLangGenerator
from burnqed.policy.standin import KNOWN_SAMPLING_KEYS
from tests.policy.sglang_env import ensure_sglang_venv

pytestmark = [pytest.mark.server, pytest.mark.timeout(1800)]

CHECK = Path(__file__).with_name("sglang_check.py")
PROMPTS = ["```lean4\n/- tactic state:\n  p q : Prop\n  ⊢ p → p\n-/\n```\n", "⊢ q", "⊢ p ∧ q"]


def sglang_check(payloads: list[dict], vocab_size: int = 512) -> tuple[list[dict], dict]:
    python = ensure_sglang_venv()
    proc = subprocess.run(
        [str(python), str(CHECK)],
        input=json.dumps({"vocab_size": vocab_size, "requests": payloads}),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.strip()]
    return lines[:-1], lines[-1]


def our_payloads() -> list[dict]:
    out = []
    for n in (1, 4, 8, 16):
        for temperature, top_p in ((0.8, 0.95), (1.2, 1.0), (1.5, 0.9), (0.0, 1.0)):
            for max_new in (1, 32, 128):
                params = SamplingParams(
                    n=n, temperature=temperature, top_p=top_p, max_new_tokens=max_new, stop=STOP
                )
                seeds = [candidate_seeds(7, "thm", a, p, n) for a, p in enumerate(PROMPTS)]
                out.append(SGLangGenerator.payload(PROMPTS, params, seeds))
                out.append(SGLangGenerator.payload(PROMPTS[:1], params))  # unseeded: fresh seeds
    # The launcher's warm-up request.
    out.append(
        SGLangGenerator.payload(["warm-up"], SamplingParams(n=1, temperature=0.0, max_new_tokens=1))
    )
    return out


def test_every_payload_the_native_backend_builds_passes_sglangs_checks():
    payloads = our_payloads()
    results, info = sglang_check(payloads)
    assert len(results) == len(payloads)
    bad = [(p, r) for p, r in zip(payloads, results, strict=True) if not r["ok"]]
    assert not bad, bad[:3]
    # The seeds arrive as SGLang reads them: one per item, distinct per candidate.
    seeded = payloads[0]
    assert results[0]["seeds"] == [sp["sampling_seed"] for sp in seeded["sampling_params"]]
    # The whole-request check ran, or the reason it could not is an import, said out loud.
    assert info["io_struct"] is None or "torchvision" in info["io_struct"], info["io_struct"]


def test_sglangs_checks_reject_what_sglang_rejects():
    """The check can fail: SGLang's own verify refuses these (so a renamed field would show)."""
    good = SGLangGenerator.payload(PROMPTS[:1], SamplingParams(n=2, temperature=1.0))
    broken = [
        {
            **good,
            "sampling_params": [{**sp, "sampling_seed": "7"} for sp in good["sampling_params"]],
        },
        {**good, "sampling_params": [{**sp, "top_p": 0.0} for sp in good["sampling_params"]]},
        {**good, "sampling_params": [{**sp, "seed": 7} for sp in good["sampling_params"]]},
        {**good, "sampling_params": [{"n": 1}, {"n": 2}]},  # items must share n
    ]
    results, _ = sglang_check(broken)
    assert [r["ok"] for r in results] == [False] * len(broken), results


def test_the_standin_accepts_exactly_sglangs_sampling_fields():
    _, info = sglang_check([])
    assert set(KNOWN_SAMPLING_KEYS) == set(info["fields"])
