"""A conditional-logit fit of per-node features to the search's decisions, cross-fitted by theorem.

Each decision (:mod:`burnqed.value.frontier`) is a choice among its open nodes; node ``j`` has a
feature vector ``x_j`` and utility ``u_j = w · x_j``; the decision's likelihood is the probability
that a softmax over the open nodes picks *an* on-path node, ``Σ_{on path} e^{u_j} / Σ_open e^{u_j}``
(a step can leave several on-path nodes open only through duplicates of one proof state; usually
exactly one).  The weights maximise the summed log-likelihood with a small ridge (separable
decisions would otherwise send them to infinity), by damped Newton steps.

A priority ranks the open nodes by ``α · (log-prob term) − β · energy`` with ``α, β ≥ 0``, so
the fit is constrained to the weights such a priority can express (``signs``: the log-prob term's
weight ≥ 0, the value's toward "better" ≥ 0; a weight that would cross its bound is fixed at 0 and
the others refitted — the maximum of a concave likelihood over that quadrant).  Only the weights'
ratios matter to the search: :func:`priority_weights` turns them into the priority's two weights
per unit of ``search.logprob_weight``.  A fit that gives the log-prob term weight 0 is the limit
of a small positive one: the value ranks alone (``α = 0``) rather than not at all.

**Cross-fitting by theorem** (:func:`cross_fit`, folds from the run's one split,
:meth:`burnqed.split.TheoremSplit.folds`): theorems are dealt into k folds; fold ``f``'s decisions
are judged by weights fitted on the other folds only, so a held-out figure never scores a decision
with a weight fitted on its theorem.  The weight the search uses is the fit on every decision.
:func:`heldout_figures` reports them on the split's held-out theorems only (SFT's validation and
test theorems), so a held-out decision's theorem was outside the SFT data of the policy too.

Example (one feature that always marks the chosen node: its weight is large and positive)::

    >>> import numpy as np
    >>> X = [np.array([[1.0], [0.0]]), np.array([[0.0], [1.0], [0.0]])]
    >>> chosen = [np.array([True, False]), np.array([False, True, False])]
    >>> fit = fit_conditional_logit(X, chosen)
    >>> bool(fit.weights[0] > 2) and fit.decisions
    2
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

RIDGE = 1e-3  # per decision: a separable feature's weight stays finite


@dataclass(frozen=True)
class LogitFit:
    weights: np.ndarray  # (F,)
    log_likelihood: float  # summed over the decisions, at the weights (ridge not included)
    decisions: int
    iterations: int

    def to_json(self, names: Sequence[str]) -> dict:
        return {
            "weights": {n: float(w) for n, w in zip(names, self.weights, strict=True)},
            "log_likelihood": self.log_likelihood,
            "log_likelihood_per_decision": self.log_likelihood / max(self.decisions, 1),
            "decisions": self.decisions,
        }


def _pad(X: Sequence[np.ndarray], chosen: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    n, m = len(X), max((len(x) for x in X), default=0)
    f = X[0].shape[1] if n else 0
    xs = np.zeros((n, m, f))
    is_open = np.zeros((n, m), bool)
    ch = np.zeros((n, m), bool)
    for i, (x, c) in enumerate(zip(X, chosen, strict=True)):
        xs[i, : len(x)] = x
        is_open[i, : len(x)] = True
        ch[i, : len(x)] = c
    if n and not ch.any(1).all():
        raise ValueError("a decision without a chosen (on-path) node")
    return xs, is_open, ch


def _moments(u: np.ndarray, mask: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per decision: logsumexp of ``u`` over ``mask``, and the softmax's mean and covariance of x."""
    v = np.where(mask, u, -np.inf)
    top = v.max(1, keepdims=True)
    e = np.where(mask, np.exp(v - top), 0.0)
    z = e.sum(1, keepdims=True)
    p = e / z  # (D, M)
    mean = np.einsum("dm,dmf->df", p, xs)
    second = np.einsum("dm,dmf,dmg->dfg", p, xs, xs)
    cov = second - np.einsum("df,dg->dfg", mean, mean)
    return (np.log(z[:, 0]) + top[:, 0]), mean, cov


def log_likelihoods(
    X: Sequence[np.ndarray], chosen: Sequence[np.ndarray], w: np.ndarray
) -> np.ndarray:
    """Per-decision log-likelihood of the chosen node(s) under weights ``w``."""
    if not X:
        return np.zeros(0)
    xs, is_open, ch = _pad(X, chosen)
    u = xs @ np.asarray(w, float)
    return _moments(u, ch, xs)[0] - _moments(u, is_open, xs)[0]


def fit_conditional_logit(
    X: Sequence[np.ndarray], chosen: Sequence[np.ndarray], *, ridge: float = RIDGE,
    signs: Sequence[int] | None = None, max_iter: int = 100, tol: float = 1e-9,
) -> LogitFit:  # fmt: skip
    """Weights maximising the decisions' log-likelihood (module docstring); ``X[i]`` is decision
    ``i``'s ``(open nodes, features)`` matrix, ``chosen[i]`` its on-path mask.  ``signs[f]``: +1
    (weight ≥ 0), −1 (≤ 0) or 0 (free); a constrained fit is the best, by penalised likelihood, of
    the fits with each set of bounded weights fixed at 0 that keeps every weight in bounds."""
    if not X:
        raise ValueError("no decisions to fit")
    if signs is not None and any(signs):
        return _fit_within(X, chosen, [int(x) for x in signs], ridge=ridge, max_iter=max_iter,
                           tol=tol)  # fmt: skip
    xs, is_open, ch = _pad(X, chosen)
    d, f = len(X), xs.shape[2]
    lam = ridge * d

    def objective(w: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        u = xs @ w
        lc, mc, cc = _moments(u, ch, xs)
        la, ma, ca = _moments(u, is_open, xs)
        ll = float((lc - la).sum())
        grad = (mc - ma).sum(0) - lam * w
        hess = (ca - cc).sum(0) + lam * np.eye(f)  # minus the Hessian
        return ll - 0.5 * lam * float(w @ w), grad, hess

    w = np.zeros(f)
    obj, grad, hess = objective(w)
    it = 0
    while it < max_iter:
        it += 1
        damping = 0.0
        while True:  # Levenberg damping: a step that does not improve is shortened
            try:
                step = np.linalg.solve(hess + damping * np.eye(f), grad)
            except np.linalg.LinAlgError:
                step = grad
            new = w + step
            new_obj, new_grad, new_hess = objective(new)
            if new_obj >= obj - 1e-12 or damping > 1e12:
                break
            damping = max(1e-6, 10 * damping) if damping else 1e-3 * (1 + np.trace(np.abs(hess)))
        done = abs(new_obj - obj) < tol * (1 + abs(obj))
        w, obj, grad, hess = new, new_obj, new_grad, new_hess
        if done:
            break
    ll = float(log_likelihoods(X, chosen, w).sum())
    return LogitFit(weights=w, log_likelihood=ll, decisions=d, iterations=it)


def _fit_within(
    X: Sequence[np.ndarray], chosen: Sequence[np.ndarray], signs: list[int], *, ridge: float,
    max_iter: int, tol: float,
) -> LogitFit:  # fmt: skip
    """:func:`fit_conditional_logit` with the weights in the bounds ``signs`` gives (its docstring)."""
    f = X[0].shape[1]
    if len(signs) != f:
        raise ValueError(f"{len(signs)} signs for {f} features")
    bounded = [j for j in range(f) if signs[j]]
    best: tuple[float, LogitFit] | None = None
    for fixed in itertools.chain.from_iterable(
        itertools.combinations(bounded, n) for n in range(len(bounded) + 1)
    ):
        free = [j for j in range(f) if j not in fixed]
        w = np.zeros(f)
        it = 0
        if free:
            sub = fit_conditional_logit([x[:, free] for x in X], chosen, ridge=ridge,
                                        max_iter=max_iter, tol=tol)  # fmt: skip
            w[free], it = sub.weights, sub.iterations
        if any(signs[j] * w[j] < 0 for j in free):
            continue  # a weight out of its bounds: another set of fixed weights holds the optimum
        ll = float(log_likelihoods(X, chosen, w).sum())
        penalised = ll - 0.5 * ridge * len(X) * float(w @ w)
        if best is None or penalised > best[0] + 1e-12:
            best = (penalised, LogitFit(weights=w, log_likelihood=ll, decisions=len(X),
                                        iterations=it))  # fmt: skip
    assert best is not None  # every bounded weight fixed at 0 is always in bounds
    return best[1]


@dataclass(frozen=True)
class CrossFit:
    fit: LogitFit  # on every decision: the weights the search uses
    heldout_log_likelihood: float  # each decision under the weights of the folds without it
    heldout_weights: list[np.ndarray]  # per fold
    decision_fold: np.ndarray  # (D,)


def cross_fit(
    X: Sequence[np.ndarray], chosen: Sequence[np.ndarray], theorems: Sequence[str],
    folds: dict[str, int], *, ridge: float = RIDGE, signs: Sequence[int] | None = None,
) -> CrossFit:  # fmt: skip
    """:func:`fit_conditional_logit` (within ``signs``) on all decisions, and per fold on the
    others (module docstring); a fold without decisions, or whose complement has none, keeps the
    full fit's weights for nothing (it has no decision to judge)."""
    fold_of = np.array([folds[t] for t in theorems])
    full = fit_conditional_logit(X, chosen, ridge=ridge, signs=signs)
    held = 0.0
    per_fold = []
    for f in range(max(folds.values(), default=-1) + 1):
        inside = np.flatnonzero(fold_of == f)
        outside = np.flatnonzero(fold_of != f)
        if len(inside) == 0 or len(outside) == 0:
            per_fold.append(full.weights if len(inside) == 0 else np.zeros_like(full.weights))
            if len(inside):
                held += float(log_likelihoods([X[i] for i in inside], [chosen[i] for i in inside],
                                              per_fold[-1]).sum())  # fmt: skip
            continue
        w = fit_conditional_logit([X[i] for i in outside], [chosen[i] for i in outside],
                                  ridge=ridge, signs=signs).weights  # fmt: skip
        per_fold.append(w)
        held += float(log_likelihoods([X[i] for i in inside], [chosen[i] for i in inside], w).sum())
    return CrossFit(full, held, per_fold, fold_of)


# The grid for a priority's depth normalisation k (cum_logprob / max(depth, 1)^k) where a fit
# chooses it: 0 ranks by the cumulative log-prob, which falls with every tactic and so holds a search
# near the root; 1 by the mean log-prob per tactic; above 1 deeper nodes are favoured.
DEPTH_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)


def fit_depth_normalisation(
    design: Callable[[float], list[np.ndarray]], chosen: Sequence[np.ndarray],
    theorems: Sequence[str], folds: dict[str, int], *, grid: Sequence[float],
    signs: Sequence[int] | None = None,
) -> tuple[float, list[np.ndarray], CrossFit, dict[str, float]]:  # fmt: skip
    """:func:`cross_fit` of the features ``design(k)`` gives at each depth normalisation ``k`` of
    ``grid``: the ``k`` whose fit on every decision has the highest log-likelihood (ties: the
    smaller ``k``), its design and cross-fit, and each ``k``'s log-likelihood (keyed by
    ``str(k)``)."""
    fits = {}
    for k in grid:
        X = design(float(k))
        fits[float(k)] = (X, cross_fit(X, chosen, theorems, folds, signs=signs))
    best = max(fits, key=lambda k: (fits[k][1].fit.log_likelihood, -k))
    X, cf = fits[best]
    return best, X, cf, {str(k): fits[k][1].fit.log_likelihood for k in sorted(fits)}


def heldout_decisions(theorems: Sequence[str], heldout: set[str] | None) -> np.ndarray:
    """Which decisions (by theorem) the held-out figures are measured on: those of the split's
    held-out theorems (``None``: every decision)."""
    return np.array([heldout is None or t in heldout for t in theorems], bool)


def heldout_log_likelihood(
    X: Sequence[np.ndarray], chosen: Sequence[np.ndarray], cf: CrossFit, keep: np.ndarray
) -> float:
    """The summed log-likelihood of the decisions ``keep`` selects, each under the weights fitted
    without its fold."""
    total = 0.0
    for i in np.flatnonzero(keep):
        w = cf.heldout_weights[int(cf.decision_fold[i])]
        total += float(log_likelihoods([X[i]], [chosen[i]], w).sum())
    return total


def priority_weights(w_logprob: float, w_value: float) -> dict[str, float]:
    """The priority's weights per unit of ``search.logprob_weight`` — ``logprob`` multiplies the
    log-prob term, ``energy`` the energy (subtracted) — from a fit's weight of the log-prob term
    and of the value toward "better" (minus the energy's; both fitted ≥ 0, ``signs``):
    ``α · L − β · E`` ranks like ``w_L · L + w_V · (−E)`` when ``β / α = w_V / w_L``.  A log-prob
    weight of 0 with a positive value weight is the limit ``β / α → ∞``: the value ranks alone
    (``logprob`` 0, ``energy`` 1); a value weight of 0 gives the energy none.

    >>> priority_weights(2.0, 1.0), priority_weights(0.0, 0.3), priority_weights(2.0, 0.0)
    ({'logprob': 1.0, 'energy': 0.5}, {'logprob': 0.0, 'energy': 1.0}, {'logprob': 1.0, 'energy': 0.0})
    """
    w_l, w_v = float(w_logprob), max(0.0, float(w_value))
    if w_l > 0:
        return {"logprob": 1.0, "energy": w_v / w_l}
    if w_v > 0:
        return {"logprob": 0.0, "energy": 1.0}
    return {"logprob": 1.0, "energy": 0.0}


__all__ = ["DEPTH_GRID", "CrossFit", "LogitFit", "cross_fit", "fit_conditional_logit",
           "fit_depth_normalisation", "heldout_decisions", "heldout_log_likelihood",
           "log_likelihoods", "priority_weights"]  # fmt: skip
