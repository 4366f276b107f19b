"""How much a value model moved a search, from the search's own tree rows (issue 30 §3).

- the median **sibling span** (max − min over the open children of one expanded node) of
  ``energy_weight · energy`` beside that of the priority's log-prob term
  (``logprob_weight · cum_logprob / max(depth, 1)^k``): an energy whose span is a small fraction of
  the log-prob's cannot reorder much (where the fit let the energy rank alone, ``logprob_weight``
  is 0: the ratio is unbounded, reported as ``energy_alone``);
- the fraction of **pops whose choice the energy changed**: the recorded priority (weighted
  log-prob term − weighted energy) ranks another open node first than the log-prob term alone
  would — over every pop with at least two open nodes, and over the decisions
  (:mod:`burnqed.value.frontier`).

Example (one expansion with two children whose energies swap the log-prob's order)::

    >>> rows = [
    ...     dict(theorem="t", attempt=0, node_id=0, parent_id=None, state="a", solved=False,
    ...          duplicate_of=None, depth=0, expansion_index=0, step=0, on_proof_path=True,
    ...          cum_logprob=0.0, ebm_energy=None),
    ...     dict(theorem="t", attempt=0, node_id=1, parent_id=0, state="b", solved=False,
    ...          duplicate_of=None, depth=1, expansion_index=1, step=1, on_proof_path=True,
    ...          cum_logprob=-2.0, ebm_energy=-3.0),
    ...     dict(theorem="t", attempt=0, node_id=2, parent_id=0, state="c", solved=False,
    ...          duplicate_of=None, depth=1, expansion_index=None, step=None,
    ...          on_proof_path=False, cum_logprob=-1.0, ebm_energy=0.0)]
    >>> e = value_effect(rows, max_depth=50, depth_normalisation=0.0, logprob_weight=1.0,
    ...                  energy_weight=1.0)
    >>> e["median_sibling_span"], e["pops_changed"]["fraction"]
    ({'energy': 3.0, 'logprob': 1.0, 'ratio': 3.0, 'energy_alone': False, 'parents': 1}, 1.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from burnqed.value.frontier import Row, choice_sets, logprob_term


def value_effect(
    rows: Sequence[Row],
    *,
    max_depth: int,
    depth_normalisation: float,
    logprob_weight: float,
    energy_weight: float,
    baseline_depth_normalisation: float | None = None,
) -> dict[str, Any]:
    """The module docstring's figures for the tree ``rows`` (node rows with ``ebm_energy``).
    ``depth_normalisation``: the searched priority's; ``baseline_depth_normalisation``: the
    configured one a pop without the value would have used (where the value model's fit chose
    another: the depth twin), else the same."""
    k = depth_normalisation
    k0 = k if baseline_depth_normalisation is None else baseline_depth_normalisation

    def term(r: Mapping[str, Any]) -> float:  # the log-prob term without the value, unweighted
        return logprob_term(r["cum_logprob"], r["depth"], k0)

    def lp(r: Mapping[str, Any]) -> float:
        return logprob_weight * logprob_term(r["cum_logprob"], r["depth"], k)

    def en(r: Mapping[str, Any]) -> float:
        e = r["ebm_energy"]
        return 0.0 if e is None else energy_weight * float(e)

    children: dict[tuple, list[Row]] = {}
    for r in rows:
        if (r["parent_id"] is None or r["state"] is None or r["duplicate_of"] is not None
                or r["solved"]):  # fmt: skip
            continue
        children.setdefault((r["theorem"], r["attempt"], r["parent_id"]), []).append(r)
    spans_e, spans_l = [], []
    for kids in children.values():
        if len(kids) >= 2:
            spans_e.append(max(map(en, kids)) - min(map(en, kids)))
            spans_l.append(max(map(lp, kids)) - min(map(lp, kids)))
    med_e = float(np.median(spans_e)) if spans_e else None
    med_l = float(np.median(spans_l)) if spans_l else None

    def changed(on_path_only: bool) -> dict[str, Any]:
        sets = choice_sets(rows, max_depth=max_depth, on_path_only=on_path_only)
        n = 0
        for c in sets:
            by_lp = max(c.open, key=lambda r: (term(r), -r["node_id"]))
            by_all = max(c.open, key=lambda r: (lp(r) - en(r), -r["node_id"]))
            n += by_lp["node_id"] != by_all["node_id"]
        return {"pops": len(sets), "changed": n, "fraction": n / len(sets) if sets else None}

    return {
        "energy_weight": energy_weight,
        "logprob_weight": logprob_weight,
        "median_sibling_span": {
            "energy": med_e,  # of energy_weight · energy
            "logprob": med_l,  # of the priority's log-prob term
            "ratio": med_e / med_l if med_e is not None and med_l else None,
            "energy_alone": logprob_weight == 0 and energy_weight > 0,
            "parents": len(spans_e),
        },
        "pops_changed": changed(False),  # every pop with >= 2 open nodes
        "decisions_changed": changed(True),  # those with an on-path node open
    }


__all__ = ["value_effect"]
