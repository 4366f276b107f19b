"""Solve rates at every budget, pass@k and anytime curves from ONE search run, in DuckDB SQL.

A search at the largest budget logs, per node, the expansion and the scheduler step that expanded
it and, per attempt, the expansion that produced the proof's last state (``proof_expansion``,
burnqed.trajectory).  A run with ``max_nodes = b`` performs exactly the first ``b`` expansions of
the larger run (best-first is deterministic given the policy's answers; its last step is cut at
``b``), so the attempt is solved at budget ``b`` exactly when ``proof_expansion < b``.  What that run
*spends* is counted as it would spend it: a search pops ``k = search.expansions_per_step`` nodes per
step and finishes the step before it looks for a proof, so a proof found at expansion ``pe`` costs
every expansion of ``pe``'s step (up to ``b``), with their Lean seconds and tokens, and the time at
which that step ended; an unsolved run spends ``min(b, nodes_expanded)`` expansions.  Why such a
run stops (``ended_by``: proof, budget, frontier, timeout, statement, fault) is counted per budget
(:func:`burnqed.outcomes.ended_by_at`), as are the events the clock decided.

Accounting (what the eval JSON and every table say; statuses are :mod:`burnqed.outcomes`'):

- a *proof* is a summary row with ``status = 'proved'`` and ``verified`` (whole-file check);
- a statement Lean rejects (``statement_error``) is the benchmark row's defect: the theorem stays in
  the denominator, unsolved, and is listed (``statement_defects``);
- attempts with ``status = 'error'`` are infrastructure failures, never results: they are listed
  apart (``errors``) and retried by ``--resume``.  A theorem counts (is *evaluated*) when at least
  one of its ``pass_n`` attempts finished; it keeps its finished attempts, pass@k is computed over
  theorems with at least ``k`` finished attempts, and the eval is ``partial n/N`` (n: theorems whose
  every attempt finished) unless every attempt of every theorem finished;
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


def status_label(evaluated: int, expected: int, *, some: int = 0) -> str:
    """``complete N/N`` or ``partial n/N`` (n: theorems whose every attempt finished; ``some`` more
    finished only some of theirs): printed wherever a number of this eval appears."""
    label = f"{'complete' if evaluated == expected else 'partial'} {evaluated}/{expected}"
    return f"{label} (+{some} with some attempts)" if some else label


_VIEWS = """
create or replace temp table att as
select s.theorem, s.attempt, s.status, s.ended_by, s.status = 'error' as errored,
       coalesce(s.status = 'proved' and s.verified and s.proof_expansion is not null, false)
           as proved,
       case when s.status = 'proved' and s.verified then s.proof_expansion end as pe,
       s.nodes_expanded, s.wall_s, s.lean_s, s.tokens, s.proof, s.reasons
from summary s semi join expected_theorems e on s.theorem = e.theorem
where s.attempt < {pass_n};

create or replace temp table thm as
select e.theorem,
       count(a.attempt) filter (where not a.errored) as ok_attempts,
       count(a.attempt) filter (where a.errored) as error_attempts,
       coalesce(bool_or(a.status = 'statement_error'), false) as statement_defect
from expected_theorems e left join att a on a.theorem = e.theorem
group by e.theorem;

-- Every finished attempt counts (an errored attempt beside it is retried, not a reason to drop it).
create or replace temp table eval_att as
select a.* from att a where not a.errored;

create or replace temp table expansion as
select n.theorem, n.attempt, n.expansion_index as ix, n.step, n.expand_lean_s as lean_s,
       n.tokens
from nodes n semi join eval_att a on n.theorem = a.theorem and n.attempt = a.attempt
where n.expansion_index is not null;

-- The last expansion of the step that produced the proof: a run with a budget b > pe performs that
-- whole step (cut at b), so it spends up to there, not just up to pe.
create or replace temp table proof_step as
select a.theorem, a.attempt, max(x.ix) as step_end
from eval_att a
join expansion p on p.theorem = a.theorem and p.attempt = a.attempt and p.ix = a.pe
join expansion x on x.theorem = a.theorem and x.attempt = a.attempt and x.step = p.step
where a.proved
group by a.theorem, a.attempt;

-- What a separate run with max_nodes = budget does: solved or not, why it stops, the expansions
-- it performs (n_spent), and from them its Lean seconds, tokens and wall time.
create or replace temp table att_budget as
select a.theorem, a.attempt, b.budget,
       coalesce(a.proved and a.pe < b.budget, false) as solved,
       case when a.proved and a.pe < b.budget then 'proof'
            when a.nodes_expanded >= b.budget then 'budget'
            else a.ended_by end as ended_by,
       case when a.proved and a.pe < b.budget then least(b.budget, ps.step_end + 1)
            else least(b.budget, a.nodes_expanded) end as n_spent,
       a.nodes_expanded, a.wall_s
from eval_att a cross join budget_list b
left join proof_step ps on ps.theorem = a.theorem and ps.attempt = a.attempt;

create or replace temp table spent as
select ab.theorem, ab.attempt, ab.budget,
       coalesce(sum(x.lean_s), 0) as lean_s, coalesce(sum(x.tokens), 0) as tokens
from att_budget ab
left join expansion x on x.theorem = ab.theorem and x.attempt = ab.attempt and x.ix < ab.n_spent
group by ab.theorem, ab.attempt, ab.budget;

-- Children created by the expansions a run performs: when its last step ended, and how many of its
-- tactic calls a wall-clock backstop failed (node error kind `timeout`: non-deterministic).
create or replace temp table created as
select ab.theorem, ab.attempt, ab.budget, max(c.created_s) as time_s,
       count(*) filter (where c.error like 'timeout:%' or c.error like 'verification: timeout:%')
           as wall_timeouts
from att_budget ab
join nodes p on p.theorem = ab.theorem and p.attempt = ab.attempt and p.expansion_index < ab.n_spent
join nodes c on c.theorem = p.theorem and c.attempt = p.attempt and c.parent_id = p.node_id
group by ab.theorem, ab.attempt, ab.budget;

create or replace temp table cost as
select ab.*, s.lean_s, s.tokens,
       case when not ab.solved and ab.n_spent = ab.nodes_expanded then ab.wall_s
            else coalesce(c.time_s, ab.wall_s) end as time_s,
       coalesce(c.wall_timeouts, 0) as wall_timeouts
from att_budget ab
join spent s using (theorem, attempt, budget)
left join created c using (theorem, attempt, budget);

create or replace temp table thm_budget as
select budget, theorem, count(*) filter (where solved) as c, count(*) as n
from cost group by budget, theorem;
"""

_BY_BUDGET = """
with s as (select budget, count(*) filter (where c > 0) as solved from thm_budget group by budget),
     a as (select budget, avg(n_spent) as avg_nodes, median(n_spent) as median_nodes,
                  avg(time_s) as avg_time_s, median(time_s) as median_time_s,
                  avg(lean_s) as avg_lean_s, avg(tokens) as avg_tokens,
                  sum(wall_timeouts) as wall_timeouts,
                  count(*) filter (where ended_by = 'timeout') as attempt_timeouts
           from cost group by budget)
select b.budget, coalesce(s.solved, 0), a.avg_nodes, a.median_nodes, a.avg_time_s,
       a.median_time_s, a.avg_lean_s, a.avg_tokens, coalesce(a.wall_timeouts, 0),
       coalesce(a.attempt_timeouts, 0)
from budget_list b left join s on s.budget = b.budget left join a on a.budget = b.budget
order by b.budget
"""

_PER_THEOREM = """
with per as (
    select t.theorem,
           t.ok_attempts > 0 as evaluated,
           t.ok_attempts as attempts, t.error_attempts as errored_attempts,
           t.statement_defect,
           count(a.attempt) filter (where a.proved and a.pe < $max_budget) as proved_attempts,
           min(a.pe) filter (where a.pe < $max_budget) as first_proof_expansion,
           avg(a.nodes_expanded) as mean_nodes,
           avg(a.wall_s) as mean_time_s,
           -- ties on the expansion go to the lowest attempt: the parts' row order is the order
           -- the attempts finished in, which a concurrent run does not fix
           arg_min(a.proof, (a.pe, a.attempt)) filter (where a.proved and a.pe < $max_budget) as proof
    from thm t left join eval_att a on a.theorem = t.theorem
    group by t.theorem, t.ok_attempts, t.error_attempts, t.statement_defect
)
select per.* exclude (proof),
       (select min(budget) from budget_list b where b.budget > per.first_proof_expansion)
           as budget_at_proof,
       per.proof
from per order by per.theorem
"""

# One attempt per theorem on every axis: the one whose proof came after the fewest expansions
# (then the lowest attempt index), with the cost a run that stops at that proof spends — on the
# node axis too: the whole step that found it (n_spent, as the per-budget figures count), not the
# proof's own expansion.
_ANYTIME = """
with first as (
    select a.theorem, arg_min(a.attempt, a.pe * 1000000 + a.attempt) as attempt
    from eval_att a where a.proved and a.pe < $max_budget group by a.theorem
)
select f.theorem, c.n_spent as nodes, c.lean_s, c.tokens, c.time_s as wall_s
from first f
join eval_att a on a.theorem = f.theorem and a.attempt = f.attempt
join cost c on c.theorem = f.theorem and c.attempt = f.attempt and c.budget = $max_budget
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
    params = {"max_budget": budgets[-1]}
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
        "select count(*) filter (where ok_attempts = $pass_n), count(*) filter (where ok_attempts"
        " > 0), count(*), coalesce(sum(ok_attempts), 0), coalesce(sum(error_attempts), 0) from thm",
        {"pass_n": pass_n},
    ).fetchone()
    full, evaluated, n_expected, ok_attempts, error_attempts = (int(x) for x in counts)
    attempts_expected = n_expected * pass_n
    status = {
        "complete": full == n_expected and n_expected > 0,
        "label": status_label(full, n_expected, some=evaluated - full),
        "evaluated_theorems": evaluated,
        "fully_evaluated_theorems": full,
        "expected_theorems": n_expected,
        "attempts_expected": attempts_expected,
        "attempts_finished": ok_attempts,
        "attempts_errored": error_attempts,
        "attempts_missing": attempts_expected - ok_attempts - error_attempts,
        "ignored_rows": {"not_in_benchmark": int(ignored[0]), "attempt_ge_pass_n": int(ignored[1])},
        "skipped_parts": skipped,
        "denominator": "theorems with at least one finished attempt (a statement Lean rejects "
        "counts, unsolved; infrastructure errors do not); pass@k over theorems with at least k",
    }

    hist = con.execute(
        "select budget, n, c, count(*) from thm_budget group by budget, n, c order by all"
    ).fetchall()
    ended = con.execute(
        "select budget, ended_by, count(*) from cost group by all order by all"
    ).fetchall()
    by_budget = []
    for row in con.execute(_BY_BUDGET).fetchall():
        budget, solved, avg_nodes, med_nodes, avg_t, med_t, avg_lean, avg_tok, wall_to, att_to = row
        solved = int(solved or 0)
        counts_c = [(int(n), int(c), int(w)) for b, n, c, w in hist if b == budget]
        by_budget.append(
            {
                "budget": int(budget),
                "solved": solved,
                "theorems": evaluated,
                "rate": solved / evaluated if evaluated else None,
                "ci95": list(mean_ci(np.repeat([1.0, 0.0], [solved, evaluated - solved])))
                if evaluated
                else None,
                # what a separate run with this budget spends per attempt (nodes = expansions)
                "avg_nodes": avg_nodes,
                "median_nodes": med_nodes,
                "avg_time_s": avg_t,
                "median_time_s": med_t,
                "avg_lean_s": avg_lean,
                "avg_tokens": avg_tok,
                # why such a run stops (burnqed.outcomes.END_REASONS): attempts per reason
                "ended_by": {reason: int(k) for b, reason, k in ended if b == budget},
                "nondeterministic_events": {
                    "tactic_wall_timeouts": int(wall_to),
                    "attempt_timeouts": int(att_to),
                },
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
    defects = (
        con.sql(
            "select theorem, any_value(reasons[1]) as reason from att "
            "where status = 'statement_error' group by theorem order by theorem"
        )
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
            "description": "fraction of evaluated theorems proved within x of: node expansions, "
            "summed Lean seconds, generated tokens, wall seconds — one attempt per theorem on "
            "every axis (the one proving it with the fewest expansions), at the cost a run that "
            "stops at that proof spends (every expansion of the step that found it)",
            **anytime,
        },
        "ended_by": last["ended_by"],
        "nondeterministic_events": last["nondeterministic_events"],
        "per_theorem": per_theorem,
        "solved_theorems": solved_theorems,
        "statement_defects": defects,
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
