"""Seeded generator of propositional theorems with known proofs of a controlled depth.

Proofs are built *backwards* from tactic rules, so every theorem is provable by construction and
its proof has exactly the depth asked for (depth = number of tactic steps).  A rule proves a goal
from sub-proofs and from *needed hypotheses*; a rule that introduces hypotheses (``intro``,
``obtain``/``rcases``/``cases``) discharges needs of its sub-proofs, the rest become the theorem's
hypotheses.  Rules cover → ¬ ∧ ∨ ↔ True False with a mix of tactics: ``intro``, ``exact`` (names,
applications, ``⟨a, b⟩``, ``Or.inl``, ``h.1``, ``h.mp``, ``absurd``), ``apply``, ``constructor``,
``left``/``right``, ``cases``/``rcases``/``obtain``, ``assumption``, ``exfalso``, ``contradiction``,
``trivial``.  Statements take one of Lean's two shapes: binders in the signature
(``theorem t (p q : Prop) (h1 : p ∧ q) : q ∧ p := by``) or a closed ``∀`` whose proof opens with one
``intro`` step.

Example::

    >>> ts = generate_theorems(2, seed=0, min_depth=3, max_depth=3, variables=3)
    >>> [len(t.proof) for t in ts], ts[0].name
    ([3, 3], 'prop_00000')
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from burnqed.proplogic.formula import (
    FALSE,
    TRUE,
    And,
    Formula,
    Iff,
    Imp,
    Not,
    Or,
    Var,
    defeq,
    free_uids,
    pp,
)

VARIABLE_NAMES = "pqrstuvw"


@dataclass
class Need:
    """A hypothesis a proof uses."""

    name: str  # a placeholder until the theorem is assembled
    formula: Formula
    named: bool  # referred to by name (so an inaccessible `cases` hypothesis cannot supply it)
    consumed: bool = False  # destructed (cleared) by the proof: never shared with another need


@dataclass
class Proof:
    goal: Formula
    tactics: list[str]
    needs: list[Need] = field(default_factory=list)


class _Builder:
    def __init__(self, rng: random.Random, n_vars: int):
        self.rng = rng
        self.atoms = [Var(n, i + 1) for i, n in enumerate(VARIABLE_NAMES[:n_vars])]
        self._names = 0

    def name(self) -> str:
        self._names += 1
        return f"§{self._names}§"

    # -- formulas --
    def formula(self, depth: int = 2) -> Formula:
        r = self.rng.random()
        if depth <= 0 or r < 0.4:
            return self.rng.choice(self.atoms)
        k = self.rng.random()
        sub = depth - 1
        if k < 0.3:
            return And(self.formula(sub), self.formula(sub))
        if k < 0.55:
            return Or(self.formula(sub), self.formula(sub))
        if k < 0.8:
            return Imp(self.formula(sub), self.formula(sub))
        if k < 0.9:
            return Not(self.formula(sub))
        return Iff(self.formula(sub), self.formula(sub))

    def other(self, not_equal: Formula | None = None) -> Formula:
        for _ in range(8):
            f = self.formula(1)
            if not_equal is None or f != not_equal:
                return f
        return f

    # -- proofs --
    def prove(self, d: int, goal: Formula | None = None) -> Proof:
        """A proof of ``goal`` (any goal when None) with exactly ``d`` tactic steps."""
        rules = self._closers(goal) if d == 1 else self._steps(d, goal)
        names, weights = zip(*rules, strict=True)
        rule = self.rng.choices(names, weights)[0]
        return getattr(self, "r_" + rule)(d, goal)

    def _closers(self, g: Formula | None) -> list[tuple[str, float]]:
        rules = [
            ("exact_hyp", 1.0),
            ("assumption", 1.0),
            ("exact_app", 1.5),
            ("exact_proj", 1.0),
            ("exact_mp", 0.7),
            ("contradiction", 0.4),
            ("absurd", 0.4),
        ]
        if g is None or isinstance(g, And):
            rules.append(("exact_pair", 1.5))
        if g is None or isinstance(g, Or):
            rules.append(("exact_inl", 1.5))
        if g is None or g == TRUE:
            rules.append(("trivial", 0.3 if g is None else 3.0))
        if g is None or g == FALSE:
            rules.append(("exact_neg_app", 0.5 if g is None else 3.0))
        if g is None or (isinstance(g, Imp) and g.left == g.right):
            rules.append(("exact_fun", 0.3 if g is None else 2.0))
        return rules

    def _steps(self, d: int, g: Formula | None) -> list[tuple[str, float]]:
        rules = [("apply_hyp", 1.0), ("and_elim", 1.0)]
        if g is None or isinstance(g, Imp | Not):
            rules.append(("intro", 3.0 if g is not None else 2.0))
        if g is None or isinstance(g, Or):
            rules.append(("left_right", 1.5 if g is None else 4.0))
        if g != FALSE:
            rules.append(("exfalso", 0.3))
        rules.append(("apply_mp", 0.4))
        if d >= 3:
            rules.append(("or_elim", 1.0))
            rules.append(("apply_hyp2", 0.5))
            if g is None or isinstance(g, And):
                rules.append(("constructor", 1.5 if g is None else 5.0))
            if g is None or isinstance(g, Iff):
                rules.append(("iff_intro", 0.7 if g is None else 5.0))
        return rules

    def _goal(self, g: Formula | None) -> Formula:
        return self.formula(2) if g is None else g

    def _split(self, total: int) -> tuple[int, int]:
        a = self.rng.randint(1, total - 1)
        return a, total - a

    # -- closers (one step) --
    def r_exact_hyp(self, d: int, g: Formula | None) -> Proof:
        g, n = self._goal(g), self.name()
        return Proof(g, [f"exact {n}"], [Need(n, g, True)])

    def r_assumption(self, d: int, g: Formula | None) -> Proof:
        g, n = self._goal(g), self.name()
        return Proof(g, ["assumption"], [Need(n, g, False)])

    def r_exact_app(self, d: int, g: Formula | None) -> Proof:
        g = self._goal(g)
        a, f, x = self.other(g), self.name(), self.name()
        return Proof(g, [f"exact {f} {x}"], [Need(f, Imp(a, g), True), Need(x, a, True)])

    def r_exact_proj(self, d: int, g: Formula | None) -> Proof:
        g, h, b = self._goal(g), self.name(), self.other()
        if self.rng.random() < 0.5:
            field_ = self.rng.choice(["1", "left"])
            return Proof(g, [f"exact {h}.{field_}"], [Need(h, And(g, b), True)])
        field_ = self.rng.choice(["2", "right"])
        return Proof(g, [f"exact {h}.{field_}"], [Need(h, And(b, g), True)])

    def r_exact_mp(self, d: int, g: Formula | None) -> Proof:
        g, h, x, a = self._goal(g), self.name(), self.name(), self.other(g)
        if self.rng.random() < 0.5:
            return Proof(g, [f"exact {h}.mp {x}"], [Need(h, Iff(a, g), True), Need(x, a, True)])
        return Proof(g, [f"exact {h}.mpr {x}"], [Need(h, Iff(g, a), True), Need(x, a, True)])

    def r_contradiction(self, d: int, g: Formula | None) -> Proof:
        g, a = self._goal(g), self.formula(1)
        return Proof(
            g, ["contradiction"], [Need(self.name(), a, False), Need(self.name(), Not(a), False)]
        )

    def r_absurd(self, d: int, g: Formula | None) -> Proof:
        g, a, x, n = self._goal(g), self.formula(1), self.name(), self.name()
        return Proof(g, [f"exact absurd {x} {n}"], [Need(x, a, True), Need(n, Not(a), True)])

    def r_exact_pair(self, d: int, g: Formula | None) -> Proof:
        if not isinstance(g, And):
            g = And(self.formula(1), self.formula(1))
        x, y = self.name(), self.name()
        return Proof(g, [f"exact ⟨{x}, {y}⟩"], [Need(x, g.left, True), Need(y, g.right, True)])

    def r_exact_inl(self, d: int, g: Formula | None) -> Proof:
        if not isinstance(g, Or):
            g = Or(self.formula(1), self.formula(1))
        x = self.name()
        if self.rng.random() < 0.5:
            return Proof(g, [f"exact Or.inl {x}"], [Need(x, g.left, True)])
        return Proof(g, [f"exact Or.inr {x}"], [Need(x, g.right, True)])

    def r_trivial(self, d: int, g: Formula | None) -> Proof:
        return Proof(TRUE, [self.rng.choice(["trivial", "exact trivial", "exact True.intro"])])

    def r_exact_neg_app(self, d: int, g: Formula | None) -> Proof:
        a, n, x = self.formula(1), self.name(), self.name()
        return Proof(FALSE, [f"exact {n} {x}"], [Need(n, Not(a), True), Need(x, a, True)])

    def r_exact_fun(self, d: int, g: Formula | None) -> Proof:
        if not (isinstance(g, Imp) and g.left == g.right):
            a = self.formula(1)
            g = Imp(a, a)
        return Proof(g, [self.rng.choice(["exact fun h => h", "exact id"])])

    # -- steps --
    def r_intro(self, d: int, g: Formula | None) -> Proof:
        if isinstance(g, Not):
            sub = self.prove(d - 1, FALSE)
            a: Formula | None = g.arg
        elif isinstance(g, Imp):
            sub = self.prove(d - 1, g.right)
            a = g.left
        else:
            sub = self.prove(d - 1, None)
            a = None
        n = self.name()
        if a is None:
            cands = [x for x in sub.needs if x.formula != sub.goal]
            a = (
                self.rng.choice(cands).formula
                if cands and self.rng.random() < 0.9
                else self.other()
            )
            g = Not(a) if sub.goal == FALSE and self.rng.random() < 0.5 else Imp(a, sub.goal)
        needs, tactics = _discharge(sub.needs, a, n, sub.tactics)
        return Proof(g, [f"intro {n}", *tactics], needs)

    def r_left_right(self, d: int, g: Formula | None) -> Proof:
        left = self.rng.random() < 0.5
        if isinstance(g, Or):
            sub = self.prove(d - 1, g.left if left else g.right)
        else:
            sub = self.prove(d - 1, None)
            other = self.other(sub.goal)
            g = Or(sub.goal, other) if left else Or(other, sub.goal)
        if left:
            tac = self.rng.choice(["left", "apply Or.inl"])
        else:
            tac = self.rng.choice(["right", "apply Or.inr"])
        return Proof(g, [tac, *sub.tactics], sub.needs)

    def r_constructor(self, d: int, g: Formula | None) -> Proof:
        d1, d2 = self._split(d - 1)
        a = self.prove(d1, g.left if isinstance(g, And) else None)
        b = self.prove(d2, g.right if isinstance(g, And) else None)
        tac = self.rng.choice(["constructor", "constructor", "apply And.intro"])
        return Proof(And(a.goal, b.goal), [tac, *a.tactics, *b.tactics], a.needs + b.needs)

    def r_iff_intro(self, d: int, g: Formula | None) -> Proof:
        if not isinstance(g, Iff):
            g = Iff(self.formula(1), self.formula(1))
        d1, d2 = self._split(d - 1)
        a = self.prove(d1, Imp(g.left, g.right))
        b = self.prove(d2, Imp(g.right, g.left))
        tac = self.rng.choice(["constructor", "apply Iff.intro"])
        return Proof(g, [tac, *a.tactics, *b.tactics], a.needs + b.needs)

    def r_exfalso(self, d: int, g: Formula | None) -> Proof:
        g = self._goal(g)
        if g == FALSE:
            g = self.formula(1)
        sub = self.prove(d - 1, FALSE)
        return Proof(g, ["exfalso", *sub.tactics], sub.needs)

    def r_apply_hyp(self, d: int, g: Formula | None) -> Proof:
        g = self._goal(g)
        sub = self.prove(d - 1, None)
        if defeq(sub.goal, g):
            sub = self.prove(d - 1, self.other(g))
        f = self.name()
        return Proof(g, [f"apply {f}", *sub.tactics], [Need(f, Imp(sub.goal, g), True), *sub.needs])

    def r_apply_hyp2(self, d: int, g: Formula | None) -> Proof:
        g = self._goal(g)
        d1, d2 = self._split(d - 1)
        a, b = self.prove(d1, None), self.prove(d2, None)
        f = self.name()
        return Proof(
            g,
            [f"apply {f}", *a.tactics, *b.tactics],
            [Need(f, Imp(a.goal, Imp(b.goal, g)), True), *a.needs, *b.needs],
        )

    def r_apply_mp(self, d: int, g: Formula | None) -> Proof:
        g = self._goal(g)
        sub = self.prove(d - 1, self.other(g))
        h = self.name()
        if self.rng.random() < 0.5:
            return Proof(
                g, [f"apply {h}.mp", *sub.tactics], [Need(h, Iff(sub.goal, g), True), *sub.needs]
            )
        return Proof(
            g, [f"apply {h}.mpr", *sub.tactics], [Need(h, Iff(g, sub.goal), True), *sub.needs]
        )

    def r_and_elim(self, d: int, g: Formula | None) -> Proof:
        sub = self.prove(d - 1, g)
        free = [x for x in sub.needs if not x.consumed]
        self.rng.shuffle(free)
        chosen = free[:2]
        parts: list[Need] = []
        for _ in range(2):
            if chosen:
                parts.append(chosen.pop())
            else:
                parts.append(Need(self.name(), self.other(), False))
        if self.rng.random() < 0.5:
            parts.reverse()
        h = self.name()
        needs = [x for x in sub.needs if x not in parts]
        needs.append(Need(h, And(parts[0].formula, parts[1].formula), True, consumed=True))
        a, b = parts[0].name, parts[1].name
        if not any(x.named for x in parts) and self.rng.random() < 0.5:
            tac = f"cases {h}"
        else:
            tac = self.rng.choice([f"obtain ⟨{a}, {b}⟩ := {h}", f"rcases {h} with ⟨{a}, {b}⟩"])
        return Proof(sub.goal, [tac, *sub.tactics], needs)

    def r_or_elim(self, d: int, g: Formula | None) -> Proof:
        d1, d2 = self._split(d - 1)
        s1 = self.prove(d1, g)
        s2 = self.prove(d2, s1.goal)
        picks: list[Need] = []
        rest: list[Need] = []
        for s in (s1, s2):
            free = [x for x in s.needs if not x.consumed]
            pick = self.rng.choice(free) if free else Need(self.name(), self.other(), False)
            picks.append(pick)
            rest.extend(x for x in s.needs if x is not pick)
        h = self.name()
        rest.append(Need(h, Or(picks[0].formula, picks[1].formula), True, consumed=True))
        a, b = picks[0].name, picks[1].name
        if not any(x.named for x in picks) and self.rng.random() < 0.5:
            tac = f"cases {h}"
        else:
            tac = self.rng.choice([f"rcases {h} with {a} | {b}", f"obtain {a} | {b} := {h}"])
        return Proof(s1.goal, [tac, *s1.tactics, *s2.tactics], rest)


def _discharge(
    needs: list[Need], a: Formula, name: str, tactics: list[str]
) -> tuple[list[Need], list[str]]:
    """Let hypothesis ``name : a`` (from ``intro``) supply the needs for ``a``: every shared need
    (renamed to ``name``), or a single consumed one — a hypothesis destructed in this branch cannot
    serve anything else."""
    shared = [x for x in needs if not x.consumed and x.formula == a]
    consumed = [x for x in needs if x.consumed and x.formula == a]
    supplied = shared if shared or not consumed else consumed[:1]
    rename = {x.name: name for x in supplied}
    return [x for x in needs if x not in supplied], [_rename(t, rename) for t in tactics]


_PLACEHOLDER = re.compile(r"§\d+§")


def _rename(tactic: str, mapping: dict[str, str]) -> str:
    """``tactic`` with placeholder names replaced by ``mapping``."""
    return _PLACEHOLDER.sub(lambda m: mapping.get(m.group(0), m.group(0)), tactic)


def _merge(needs: list[Need]) -> tuple[list[Need], dict[str, str]]:
    """One hypothesis per formula for the shared needs; consumed needs keep their own."""
    out: list[Need] = []
    first: dict[Formula, Need] = {}
    rename: dict[str, str] = {}
    for x in needs:
        if x.consumed:
            out.append(x)
            continue
        if x.formula in first:
            rename[x.name] = first[x.formula].name
        else:
            first[x.formula] = x
            out.append(x)
    return out, rename


@dataclass(frozen=True)
class Theorem:
    """A generated theorem: its Lean statement and the proof it was built with.

    The same field names as :class:`burnqed.theorems.Theorem` (which ``burnqed.data``
    converts it into): this package imports nothing from the rest of burnqed."""

    name: str
    formal_statement: str  # "theorem <name> <binders> : <type> := by\n"
    proof: tuple[str, ...]  # the recorded tactic proof, one tactic per step
    header: str = ""  # always empty: propositional statements need no imports
    informal_prefix: str = ""


def _variables(formulas: list[Formula]) -> list[str]:
    uids = set().union(*(free_uids(f) for f in formulas)) if formulas else set()
    return [VARIABLE_NAMES[u - 1] for u in sorted(uids)]


def make_theorem(rng: random.Random, name: str, depth: int, variables: int) -> Theorem:
    """One theorem whose recorded proof has exactly ``depth`` steps."""
    b = _Builder(rng, variables)
    signature_form = depth == 1 or rng.random() < 0.5
    proof = b.prove(depth if signature_form else depth - 1)
    needs, alias = _merge(proof.needs)
    rng.shuffle(needs)
    final = {x.name: f"h{i}" for i, x in enumerate(needs, 1)}

    def final_name(m: re.Match[str]) -> str:
        ph = alias.get(m.group(0), m.group(0))
        # Names bound inside the proof (intro, obtain) follow the statement's hypotheses.
        return final.setdefault(ph, f"h{len(final) + 1}")

    tactics = [_PLACEHOLDER.sub(final_name, t) for t in proof.tactics]
    vars_ = _variables([proof.goal, *(x.formula for x in needs)])
    if signature_form:
        binders = (f" ({' '.join(vars_)} : Prop)" if vars_ else "") + "".join(
            f" ({final[x.name]} : {pp(x.formula)})" for x in needs
        )
        statement = f"theorem {name}{binders} : {pp(proof.goal)} := by\n"
    else:
        closed: Formula = proof.goal
        for x in reversed(needs):
            closed = Imp(x.formula, closed)
        body = pp(closed)
        prefix = f"∀ ({' '.join(vars_)} : Prop), " if vars_ else ""
        statement = f"theorem {name} : {prefix}{body} := by\n"
        intro_names = [*vars_, *(final[x.name] for x in needs)]
        if not intro_names:  # a variable-free statement: nothing for the intro step to do
            return make_theorem(rng, name, depth, variables)
        tactics = [f"intro {' '.join(intro_names)}", *tactics]
    return Theorem(name=name, formal_statement=statement, proof=tuple(tactics))


def generate_theorems(
    n: int,
    *,
    seed: int,
    min_depth: int = 1,
    max_depth: int = 6,
    variables: int = 4,
    prefix: str = "prop",
) -> list[Theorem]:
    """``n`` distinct theorems ``{prefix}_{i:05d}``; depths uniform in [min_depth, max_depth]."""
    if not 1 <= min_depth <= max_depth:
        raise ValueError(f"need 1 <= min_depth <= max_depth, got {min_depth}, {max_depth}")
    if not 1 <= variables <= len(VARIABLE_NAMES):
        raise ValueError(f"variables must be in 1..{len(VARIABLE_NAMES)}, got {variables}")
    rng = random.Random(seed)
    out: list[Theorem] = []
    seen: set[str] = set()
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise RuntimeError(f"could not generate {n} distinct theorems (got {len(out)})")
        name = f"{prefix}_{len(out):05d}"
        t = make_theorem(rng, name, rng.randint(min_depth, max_depth), variables)
        key = t.formal_statement.split(" ", 2)[2]  # the statement without its name
        if key in seen:
            continue
        seen.add(key)
        out.append(t)
    return out


__all__ = ["Theorem", "generate_theorems", "make_theorem"]
