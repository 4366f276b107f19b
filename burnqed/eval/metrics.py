"""Solve rates at every budget, pass@k and anytime curves from ONE search run, in DuckDB SQL.

A search at the largest budget logs, per node, the expansion that produced it and, per attempt, the
expansion that produced the proof's last state (``proof_expansion``, burnqed.trajectory).  A run with
``max_nodes = b`` expands the same nodes in the same order up to ``b`` (best-first is deterministic
given the policy's answers), so the attempt is solved at budget ``b`` exactly when
``proof_expansion < b``; its nodes and time at ``b`` are those spent until the proof or until the
b-th expansion (the latest child created by the first ``b`` expansions).

Accounting (what the eval JSON and every table say):

- a *proof* is a summary row with ``status = 'proved'`` and ``verified`` (whole-file check);
- attempts with ``status = 'error'`` are infrastructure failures, never results: a theorem counts
  (is *evaluated*) only when all its ``pass_n`` attempts finished without error; the others are
  listed apart (``errors``), and the eval is ``partial n/N`` unless every theorem was evaluated;
- rows for theorems not in the benchmark, or attempts >= ``pass_n``, are ignored and counted.

Example::

    >>> m = score_trajectories(Path("results/iter_0/eval"), expected=names, budgets=[100, 300],
    ...                        pass_n=1)                                  # doctest: +SKIP
    >>> m["status"]["label"], m["by_budget"][-1]["rate"]                  # doctest: +SKIP
    ('complete 244/244', 0.41)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from burnqed.eval.passk import mean_ci, pass_at_k_table
from burnqed.trajectory import open_duckdb

log = logging.getLogger(__name__)


def status_label(evaluated: int, expected: int) -> str:
    """``complete N/N`` or ``partial n/N``: printed wherever a number of this eval appears."""
    return f"{'complete' if evaluated == expected else 'partial'} {evaluated}/{expected}"


_VIEWS = """
create or replace temp table att as
select s.theorem, s.attempt, s.status, s.status = 'error' as errored,
       coalesce(s.status = 'proved' and s.verified and s.proof_expansion is not null, false)
           as proved,
       case when s.status = 'proved' and s.verified then s.proof_expansion end as pe,
       s.nodes_expanded, s.wall_s, s.lean_s, s.tokens, s.proof, s.reasons
from summary s semi join expected_theorems e on s.theorem = e.theorem
where s.attempt < {pass_n};

create or replace temp table thm as
select e.theorem,
       count(a.attempt) filter (where not a.errored) as ok_attempts,
       count(a.attempt) filter (where a.errored) as error_attempts
from expected_theorems e left join att a on a.theorem = e.theorem
group by e.theorem;

create or replace temp table eval_att as
select a.* from att a join thm t on a.theorem = t.theorem
where t.ok_attempts = {pass_n} and not a.errored;

create or replace temp table proof_cost as
select n.theorem, n.attempt,
       coalesce(sum(n.expand_lean_s) filter (where n.expansion_index <= a.pe), 0) as lean_s,
       coalesce(sum(n.tokens) filter (where n.expansion_index <= a.pe), 0) as tokens,
       max(n.created_s) filter (where n.on_proof_path and n.solved) as time_s
from nodes n join eval_att a on n.theorem = a.theorem and n.attempt = a.attempt
where a.proved
group by n.theorem, n.attempt;

create or replace temp table t_at_budget as
select c.theorem, c.attempt, b.budget, max(c.created_s) as time_s
from nodes c
join nodes p on c.theorem = p.theorem and c.attempt = p.attempt and c.parent_id = p.node_id
join eval_att a on a.theorem = c.theorem and a.attempt = c.attempt
join budget_list b on p.expansion_index < b.budget and a.nodes_expanded > b.budget
group by c.theorem, c.attempt, b.budget;

create or replace temp table att_budget as
select a.theorem, a.attempt, b.budget,
       coalesce(a.proved and a.pe < b.budget, false) as solved,
       case when a.proved and a.pe < b.budget then a.pe + 1
            when a.nodes_expanded <= b.budget then a.nodes_expanded
            else b.budget end as nodes,
       case when a.proved and a.pe < b.budget then coalesce(pc.time_s, a.wall_s)
            when a.nodes_expanded <= b.budget then a.wall_s
            else coalesce(t.time_s, a.wall_s) end as time_s
from eval_att a cross join budget_list b
left join proof_cost pc on pc.theorem = a.theorem and pc.attempt = a.attempt
left join t_at_budget t on t.theorem = a.theorem and t.attempt = a.attempt and t.budget = b.budget;

create or replace temp table thm_budget as
select budget, theorem, count(*) filter (where solved) as c
from att_budget group by budget, theorem;
"""

_BY_BUDGET = """
with s as (select budget, count(*) filter (where c > 0) as solved from thm_budget group by budget),
     a as (select budget, avg(nodes) as avg_nodes, median(nodes) as median_nodes,
                  avg(time_s) as avg_time_s, median(time_s) as median_time_s
           from att_budget group by budget)
select b.budget, coalesce(s.solved, 0), a.avg_nodes, a.median_nodes, a.avg_time_s, a.median_time_s
from budget_list b left join s on s.budget = b.budget left join a on a.budget = b.budget
order by b.budget
"""

_PER_THEOREM = """
with per as (
    select t.theorem,
           t.ok_attempts = $pass_n as evaluated,
           t.ok_attempts as attempts, t.error_attempts as errored_attempts,
           count(a.attempt) filter (where a.proved and a.pe < $max_budget) as proved_attempts,
           min(a.pe) filter (where a.pe < $max_budget) as first_proof_expansion,
           avg(a.nodes_expanded) as mean_nodes,
           avg(a.wall_s) as mean_time_s,
           arg_min(a.proof, a.pe) filter (where a.proved and a.pe < $max_budget) as proof
    from thm t left join eval_att a on a.theorem = t.theorem
    group by t.theorem, t.ok_attempts, t.error_attempts
)
select per.* exclude (proof),
       (select min(budget) from budget_list b where b.budget > per.first_proof_expansion)
           as budget_at_proof,
       per.proof
from per order by per.theorem
"""

_ANYTIME = """
select a.theorem,
       min(a.pe + 1) as nodes,
       min(pc.lean_s) as lean_s,
       min(pc.tokens) as tokens,
       min(coalesce(pc.time_s, a.wall_s)) as wall_s
from eval_att a join proof_cost pc on pc.theorem = a.theorem and pc.attempt = a.attempt
where a.proved and a.pe < $max_budget
group by a.theorem
"""


def _curve(values: np.ndarray, denominator: int) -> list[list[float]]:
    """Step curve ``[[x, rate], …]``: the fraction of theorems proved with a cost of at most x."""
    if denominator == 0 or len(values) == 0:
        return []
    xs, counts = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
    return [[float(x), float(r)] for x, r in zip(xs, np.cumsum(counts) / denominator, strict=True)]


def score_trajectories(
    trajectories: Path,
    *,
    expected: Sequence[str],
    budgets: Sequence[int],
    pass_n: int,
    previous: Mapping[str, Any] | None = None,
) -> dict:
    """The metrics part of an eval JSON from the trajectory directory of one search run.

    ``expected`` are the benchmark's theorem identities as the search wrote them in the ``theorem``
    column; ``previous`` is the previous iteration's eval JSON (for newly solved theorems).
    """
    budgets = sorted(int(b) for b in budgets)
    if not budgets:
        raise ValueError("no budgets given")
    con, skipped = open_duckdb(trajectories)
    con.register("expected_theorems", pa.table({"theorem": pa.array(list(expected), pa.string())}))
    con.register("budget_list", pa.table({"budget": pa.array(budgets, pa.int64())}))
    params = {"pass_n": pass_n, "max_budget": budgets[-1]}
    con.execute(_VIEWS.format(pass_n=int(pass_n)))
    ignored = con.execute(
        "select count(*) filter (where theorem not in (select theorem from expected_theorems)),"
        " count(*) filter (where attempt >= $pass_n) from summary",
        {"pass_n": pass_n},
    ).fetchone()
    if ignored[0] or ignored[1]:
        log.warning(
            "%s: ignored %d attempt rows of theorems not in the benchmark and %d with attempt >= "
            "pass_n %d",
            trajectories,
            ignored[0],
            ignored[1],
            pass_n,
        )
    counts = con.execute(
        "select count(*) filter (where ok_attempts = $pass_n), count(*),"
        " coalesce(sum(ok_attempts), 0), coalesce(sum(error_attempts), 0) from thm",
        {"pass_n": pass_n},
    ).fetchone()
    evaluated, n_expected, ok_attempts, error_attempts = (int(x) for x in counts)
    attempts_expected = n_expected * pass_n
    status = {
        "complete": evaluated == n_expected and n_expected > 0,
        "label": status_label(evaluated, n_expected),
        "evaluated_theorems": evaluated,
        "expected_theorems": n_expected,
        "attempts_expected": attempts_expected,
        "attempts_finished": ok_attempts,
        "attempts_errored": error_attempts,
        "attempts_missing": attempts_expected - ok_attempts - error_attempts,
        "ignored_rows": {"not_in_benchmark": int(ignored[0]), "attempt_ge_pass_n": int(ignored[1])},
        "skipped_parts": skipped,
        "denominator": "theorems whose pass_n attempts all finished without an error",
    }

    hist = con.execute(
        "select budget, c, count(*) from thm_budget group by budget, c order by budget, c"
    ).fetchall()
    by_budget = []
    for row in con.execute(_BY_BUDGET).fetchall():
        budget, solved, avg_nodes, med_nodes, avg_t, med_t = row
        solved = int(solved or 0)
        counts_c = [(pass_n, int(c), int(w)) for b, c, w in hist if b == budget]
        by_budget.append(
            {
                "budget": int(budget),
                "solved": solved,
                "theorems": evaluated,
                "rate": solved / evaluated if evaluated else None,
                "ci95": list(mean_ci(np.repeat([1.0, 0.0], [solved, evaluated - solved])))
                if evaluated
                else None,
                "avg_nodes": avg_nodes,
                "median_nodes": med_nodes,
                "avg_time_s": avg_t,
                "median_time_s": med_t,
                "pass_at_k": pass_at_k_table(counts_c, pass_n),
            }
        )
    per_theorem = con.sql(_PER_THEOREM, params=params).to_arrow_table().to_pylist()
    solved_theorems = sorted(
        r["theorem"] for r in per_theorem if r["evaluated"] and r["proved_attempts"]
    )  # a list comprehension over the ≤ benchmark-size result, not over trajectory rows
    costs = con.execute(_ANYTIME, {"max_budget": budgets[-1]}).fetchnumpy()
    anytime = {
        key: _curve(costs[key], evaluated) for key in ("nodes", "lean_s", "tokens", "wall_s")
    }
    errors = (
        con.sql("select theorem, attempt, reasons from att where errored order by theorem, attempt")
        .to_arrow_table()
        .to_pylist()
    )
    last = by_budget[-1]
    result = {
        "status": status,
        "budgets": budgets,
        "pass_n": pass_n,
        "by_budget": by_budget,
        "cumulative": {
            "description": "solved by any attempt at any budget (= the largest budget: one run)",
            "solved": last["solved"],
            "theorems": evaluated,
            "rate": last["rate"],
            "ci95": last["ci95"],
        },
        "pass_at_k": last["pass_at_k"],
        "anytime": {
            "description": "fraction of evaluated theorems proved by some attempt within x of: "
            "node expansions, summed Lean seconds, generated tokens, wall seconds",
            **anytime,
        },
        "per_theorem": per_theorem,
        "solved_theorems": solved_theorems,
        "errors": errors,
        "previous": compare_with_previous(
            solved_theorems,
            previous,
            evaluated=[r["theorem"] for r in per_theorem if r["evaluated"]],
        ),
    }
    con.close()
    return result


def compare_with_previous(
    solved: Sequence[str], previous: Mapping[str, Any] | None, *, evaluated: Sequence[str]
) -> dict | None:
    """Theorems solved now but not by ``previous`` (an eval JSON), and the reverse among the
    theorems evaluated now (one not evaluated now is not "lost": it is listed apart)."""
    if previous is None:
        return None
    before, now, seen = set(previous.get("solved_theorems", [])), set(solved), set(evaluated)
    return {
        "label": previous.get("label"),
        "status": previous.get("status", {}).get("label"),
        "newly_solved": sorted(now - before),
        "no_longer_solved": sorted((before & seen) - now),
        "previously_solved_not_evaluated_now": sorted(before - seen),
    }
