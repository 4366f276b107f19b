"""What a replay must share with its recording, checked before anything is read from a model or
written: each refusal is one line (:class:`ReplayRefused`, ``burnqed`` exits 2) naming the field.

- **order**: a recording that popped its frontier in a seeded random order (a noise search) cannot
  be replayed as its own priority;
- **sampling** (temperature, candidates, top_p, max_new_tokens): the recording's answers are those
  of the eval (or search) the priority stands for only when it sampled like it
  (:func:`check_sampling`);
- **model**: the policy the replay loads (for embeddings, or ``--live`` expansions) must be the
  recording's — the same content digest (:func:`burnqed.eval.stage.path_digest`) as the recording's
  ``provenance.model``, or, where the recording records none (a search's trajectory directory, a
  served model), the same path or name (:func:`check_model`);
- **search**: the settings that decide which states a search pops besides its priority
  (:data:`REPLAYED_SEARCH`: budget, depth limit, pops per step, attempts; for the ``recorded``
  priority also the priority's own depth normalisation and log-prob weight) must equal the
  recording's, compared by their digest (:func:`check_search`).

A model or search mismatch can be allowed (``--allow-mismatch model,search``): the replay then runs,
and its provenance records both sides (:func:`mismatch_record`) — what it used and what the
recording had — so no reader takes it for a replay of that recording.

Example::

    >>> check_search({"max_nodes": 4, "max_depth": 8, "expansions_per_step": 1, "attempts": 1},
    ...              {"max_nodes": 4, "max_depth": 8, "expansions_per_step": 1, "attempts": 1},
    ...              REPLAYED_SEARCH, what="r", allow=False) is None
    True
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from burnqed.config import EvalConfig, InputError, PolicyConfig, SearchConfig

log = logging.getLogger(__name__)

# What --allow-mismatch may name.
MISMATCHES = ("model", "search")
# The search settings that decide which states a search pops, besides its priority and sampling.
REPLAYED_SEARCH = ("max_nodes", "max_depth", "expansions_per_step", "attempts")
# The priority's own settings: checked too when the replay stands for the recording's own priority.
PRIORITY_SEARCH = ("depth_normalisation", "logprob_weight")


class ReplayRefused(InputError):
    """The recording cannot stand for what the replay would run (the message names the field)."""


def parse_mismatches(text: str | Collection[str] | None) -> frozenset[str]:
    """``"model,search"`` (or a collection of names) → the mismatches a replay may run with.

    >>> sorted(parse_mismatches("search, model")), parse_mismatches(None)
    (['model', 'search'], frozenset())
    """
    if not text:
        return frozenset()
    names = text.split(",") if isinstance(text, str) else list(text)
    out = frozenset(n.strip() for n in names if n.strip())
    unknown = sorted(out - set(MISMATCHES))
    if unknown:
        raise InputError(
            f"--allow-mismatch {','.join(unknown)}: expected a comma-separated list of "
            f"{', '.join(MISMATCHES)}"
        )
    return out


def intended_sampling(
    kind: str,
    *,
    eval_cfg: EvalConfig,
    search: SearchConfig,
    policy: PolicyConfig,
    with_value: bool,
) -> dict[str, tuple[float, str]]:
    """Field → (value, the setting it comes from) of the sampling a live run with the priority uses:
    an eval's (``kind == "eval"``) or a search's."""
    if kind == "eval":
        temp, n = (eval_cfg.temperature, "eval.temperature"), (eval_cfg.num_candidates, "eval.num_candidates")  # fmt: skip
    elif with_value:
        temp = (search.temperature_with_ebm, "search.temperature_with_ebm")
        n = (search.num_candidates, "search.num_candidates")
    else:
        temp, n = (search.temperature, "search.temperature"), (search.num_candidates, "search.num_candidates")  # fmt: skip
    return {
        "temperature": temp,
        "candidates": n,
        "top_p": (policy.top_p, "policy.top_p"),
        "max_new_tokens": (policy.max_new_tokens, "policy.max_new_tokens"),
    }


def check_sampling(
    recorded: Mapping[str, Any] | None, intended: Mapping[str, tuple[float, str]], *, what: str
) -> None:
    """Raise :class:`ReplayRefused`, naming the first field where the recording's sampling (its
    manifest's ``sampling`` block) differs from ``intended``."""
    recorded = recorded or {}
    keys = {"candidates": "n"}
    for name, (want, setting) in intended.items():
        got = recorded.get(keys.get(name, name))
        if got is None or float(got) != float(want):
            raise ReplayRefused(
                f"{what}: the recording sampled with {name} {got}, a live run with this priority "
                f"samples with {name} {want} ({setting}); its answers are not that run's"
            )


def _short(model: Mapping[str, Any]) -> str:
    sha = model.get("sha256")
    return f"sha256 {sha[:12]}…" if sha else "no digest"


def check_model(
    recorded: Mapping[str, Any], used: Mapping[str, Any], *, what: str, allow: bool
) -> dict | None:
    """None when ``used`` (``{"path", "sha256"}`` of the model the replay loads) is the recording's
    model; else the :func:`mismatch_record` when ``allow``, else :class:`ReplayRefused`.  The
    digests decide where the recording has one (a model rewritten in place is another model);
    without one, the path or name."""
    if recorded.get("sha256"):
        same = recorded["sha256"] == used.get("sha256")
    else:
        same = str(recorded.get("path")) == str(used.get("path"))
        if same:
            log.info("%s: the recording records no model digest; its model checked by path", what)
    if same:
        return None
    if not allow:
        raise ReplayRefused(
            f"{what}: model {used.get('path')} ({_short(used)}) is not the recording's "
            f"{recorded.get('path')} ({_short(recorded)}); --allow-mismatch model replays anyway"
        )
    log.warning("%s: model %s is not the recording's %s (allowed)", what, used.get("path"),
                recorded.get("path"))  # fmt: skip
    return mismatch_record(recorded, used)


def search_settings(cfg: Mapping[str, Any] | None, fields: Sequence[str]) -> dict[str, Any]:
    """``fields`` of a search section (None where it does not record one)."""
    cfg = cfg or {}
    return {f: cfg.get(f) for f in fields}


def settings_digest(settings: Mapping[str, Any]) -> str:
    """sha256 of the settings as canonical JSON (numbers as floats: 4 and 4.0 are one setting).

    >>> settings_digest({"max_nodes": 4}) == settings_digest({"max_nodes": 4.0})
    True
    """

    def norm(x: Any) -> Any:
        return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else x

    canon = json.dumps({k: norm(v) for k, v in settings.items()}, sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()


def check_search(
    recorded: Mapping[str, Any] | None,
    used: Mapping[str, Any],
    fields: Sequence[str],
    *,
    what: str,
    allow: bool,
) -> dict | None:
    """None when the replay's search section ``used`` and the recording's (its manifest's
    ``config``) agree on ``fields`` (their :func:`settings_digest`); else the mismatch record when
    ``allow``, else :class:`ReplayRefused` naming the first field that differs."""
    rec, use = search_settings(recorded, fields), search_settings(used, fields)
    rd, ud = settings_digest(rec), settings_digest(use)
    if rd == ud:
        return None
    field = next(f for f in fields if settings_digest({f: rec[f]}) != settings_digest({f: use[f]}))
    if not allow:
        raise ReplayRefused(
            f"{what}: search.{field} is {use[field]}, the recording searched with {rec[field]} "
            f"(settings digest {ud[:12]}… vs {rd[:12]}…): not a replay of its search; "
            "--allow-mismatch search replays anyway"
        )
    log.warning(
        "%s: search.%s %s, the recording's %s (allowed)", what, field, use[field], rec[field]
    )
    return mismatch_record({**rec, "digest": rd}, {**use, "digest": ud})


def mismatch_record(recorded: Mapping[str, Any], used: Mapping[str, Any]) -> dict:
    """What an allowed mismatch leaves in the replay's provenance: both sides."""
    return {"recording": dict(recorded), "replay": dict(used)}


__all__ = [
    "MISMATCHES",
    "PRIORITY_SEARCH",
    "REPLAYED_SEARCH",
    "ReplayRefused",
    "check_model",
    "check_sampling",
    "check_search",
    "intended_sampling",
    "parse_mismatches",
    "search_settings",
    "settings_digest",
]
