"""Traced-looking propositional tactic pairs for the training tests, made without a REPL.

A theorem is ``P1 → … → Pk → G`` over atoms ``p q r s``: premises are atoms or conjunctions of
atoms, the goal an atom, conjunction or disjunction of atoms the premises give.  A fixed proof
strategy (intro the premises, destructure conjunctions, split/choose the goal, close with ``exact``)
yields one pair per step, with states rendered by :func:`burnqed.lean.goals.render_goals` exactly as
the propositional REPL prints them.  The tactic is a function of the state, so a model can learn it.

Example::

    >>> rows = make_pair_rows(2, seed=0)
    >>> rows[0]["tactic"].split()[0]
    'intro'
"""

from __future__ import annotations

import random
from pathlib import Path

from burnqed.lean.goals import NO_GOALS, Goal, Variable, render_goals

ATOMS = ("p", "q", "r", "s")
PREC = {"imp": 25, "or": 30, "and": 35}
SYMBOL = {"imp": "→", "or": "∨", "and": "∧"}


def show(f: tuple, parent: int = 0, right: bool = False) -> str:
    """Lean's printing: ∧ over ∨ over →, all right-associative."""
    if f[0] == "atom":
        return f[1]
    prec = PREC[f[0]]
    text = f"{show(f[1], prec, False)} {SYMBOL[f[0]]} {show(f[2], prec, True)}"
    needs = prec < parent or (prec == parent and not right)
    return f"({text})" if needs else text


def _atom(name: str) -> tuple:
    return ("atom", name)


def _theorem(rng: random.Random) -> tuple[list[tuple], tuple, list[str]]:
    atoms = rng.sample(ATOMS, rng.randint(2, 4))
    premises, known = [], []
    for _ in range(rng.randint(1, 3)):
        if rng.random() < 0.4 and len(atoms) >= 2:
            a, b = rng.sample(atoms, 2)
            premises.append(("and", _atom(a), _atom(b)))
            known += [a, b]
        else:
            a = rng.choice(atoms)
            premises.append(_atom(a))
            known.append(a)
    kind = rng.choice(("atom", "and", "or"))
    if kind == "atom":
        goal = _atom(rng.choice(known))
    elif kind == "and":
        goal = ("and", _atom(rng.choice(known)), _atom(rng.choice(known)))
    else:
        other = rng.choice([a for a in ATOMS if a not in known] or ATOMS)
        sides = [_atom(rng.choice(known)), _atom(other)]
        rng.shuffle(sides)
        goal = ("or", *sides)
    return premises, goal, sorted(set(atoms) | set(known))


def _render(goals: list[dict], atoms: list[str]) -> str:
    out = []
    for i, g in enumerate(goals):
        vars_ = [Variable(name=f"_uniq.{a}", user_name=a, type="Prop") for a in atoms]
        vars_ += [Variable(name=f"_uniq.{n}", user_name=n, type=show(f)) for n, f in g["hyps"]]
        out.append(Goal(name=f"_uniq.g{i}", target=show(g["target"]), variables=tuple(vars_),
                        case=g.get("case")))  # fmt: skip
    return render_goals(out)


def _step(goal: dict, counter: list[int]) -> tuple[str, list[dict]]:
    """The strategy's tactic for the first goal and the goals it leaves in its place."""
    hyps, target = goal["hyps"], goal["target"]

    def fresh() -> str:
        counter[0] += 1
        return f"h{counter[0]}"

    if target[0] == "imp":
        h = fresh()
        return f"intro {h}", [{"hyps": [*hyps, (h, target[1])], "target": target[2]}]
    for i, (name, f) in enumerate(hyps):
        if f[0] == "and":
            a, b = fresh(), fresh()
            rest = [*hyps[:i], (a, f[1]), (b, f[2]), *hyps[i + 1 :]]
            return f"obtain ⟨{a}, {b}⟩ := {name}", [{"hyps": rest, "target": target}]
    for name, f in hyps:
        if f == target:
            return f"exact {name}", []
    if target[0] == "and":
        return "constructor", [
            {"hyps": hyps, "target": target[1], "case": "left"},
            {"hyps": hyps, "target": target[2], "case": "right"},
        ]
    if target[0] == "or":
        have = {f for _, f in hyps}
        side, sub = ("left", target[1]) if target[1] in have else ("right", target[2])
        return side, [{"hyps": hyps, "target": sub, "case": "h"}]
    raise AssertionError(f"strategy stuck on {show(target)}")


def make_pair_rows(theorems: int, *, seed: int = 0, prefix: str = "t") -> list[dict]:
    """Tactic-pair rows (the normalised schema) for ``theorems`` generated theorems."""
    rng = random.Random(seed)
    rows = []
    for t in range(theorems):
        premises, goal, atoms = _theorem(rng)
        statement = goal
        for p in reversed(premises):
            statement = ("imp", p, statement)
        goals, counter, depth = [{"hyps": [], "target": statement}], [0], 0
        while goals:
            before = _render(goals, atoms)
            tactic, replacement = _step(goals[0], counter)
            goals = replacement + goals[1:]
            rows.append({
                "source": "proplogic", "theorem": f"proplogic:{prefix}{t}",
                "state_before": before, "tactic": tactic,
                "state_after": _render(goals, atoms) if goals else NO_GOALS, "depth": depth,
            })  # fmt: skip
            depth += 1
    return rows


def write_pairs(path: Path, theorems: int, *, seed: int = 0, prefix: str = "t") -> Path:
    """Write :func:`make_pair_rows` as a tactic-pair Parquet file; return ``path``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from burnqed.data.schema import TACTIC_PAIR_SCHEMA

    rows = make_pair_rows(theorems, seed=seed, prefix=prefix)
    table = pa.Table.from_pylist(rows, schema=TACTIC_PAIR_SCHEMA)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path
