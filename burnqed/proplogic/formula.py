"""Propositional formulas: the AST, Lean 4's pretty-printing of them, and first-order unification.

Formulas are immutable trees over Prop variables.  A variable is identified by the ``uid`` of the
hypothesis (``p : Prop``) or binder that introduced it, so ``intro x`` renaming a ``∀ (p : Prop)``
binder is a substitution of one uid by another and the printed name follows the user's choice.
``¬a`` is its own node (Lean prints it as ``¬a``) but unifies with ``a → False``: ``Not`` is a
definition that Lean unfolds during unification and ``intro``.

Printing follows Lean 4's notation table: ``¬`` is ``notation:max "¬" p:40``, ``∧`` is ``infixr:35``,
``∨`` ``infixr:30``, ``→`` right-associative at 25 and ``↔`` ``infix:20`` (non-associative, binding
*looser* than ``→``: Lean prints ``a → b ↔ c`` for ``(a → b) ↔ c``).  A binder (``∀``) extends as far
right as possible, so it is parenthesised only when something follows it.

Example::

    >>> p, q = Var("p", 1), Var("q", 2)
    >>> pp(Imp(And(p, q), And(q, p)))
    'p ∧ q → q ∧ p'
    >>> pp(Imp(Imp(p, q), p)), pp(Not(Or(p, q))), pp(Iff(Imp(p, q), q))
    ('(p → q) → p', '¬(p ∨ q)', 'p → q ↔ q')
    >>> pp(Forall("p", 1, Forall("q", 2, Imp(Or(p, q), Or(q, p)))))
    '∀ (p q : Prop), p ∨ q → q ∨ p'
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

# Formula nodes are immutable by convention, hashable and compared by value.  They are not
# `frozen`: a frozen dataclass's __init__ sets each field through object.__setattr__, about three
# times slower, and the REPL builds many nodes per tactic (substitution, unification).  Each has a
# docstring, else `dataclass` computes one from the signature (import time, at every REPL start).
_node = dataclass(slots=True, eq=True, unsafe_hash=True)

# Precedences of Lean 4's notations (Init/Prelude, Init/Core); MAX is an atom's.
MAX = 1024
PREC_NOT_ARG = 40
PREC_AND = 35
PREC_OR = 30
PREC_IMP = 25
PREC_IFF = 20


@_node
class Var:
    """A Prop variable: the fvar (hypothesis ``name : Prop``) or binder with id ``uid``."""

    name: str
    uid: int


@_node
class MVar:
    """A unification variable (an implicit argument of a constant), printed ``?name``."""

    name: str
    uid: int


@_node
class Const:
    """``True`` or ``False``."""

    value: bool


@_node
class Not:
    """``¬arg``."""

    arg: Formula


@_node
class And:
    """``left ∧ right``."""

    left: Formula
    right: Formula


@_node
class Or:
    """``left ∨ right``."""

    left: Formula
    right: Formula


@_node
class Imp:
    """``left → right``."""

    left: Formula
    right: Formula


@_node
class Iff:
    """``left ↔ right``."""

    left: Formula
    right: Formula


@_node
class Forall:
    """``∀ (name : Prop), body``; ``implicit`` binders print as ``{name : Prop}``."""

    name: str
    uid: int
    body: Formula
    implicit: bool = False


Formula = Var | MVar | Const | Not | And | Or | Imp | Iff | Forall
TRUE = Const(True)
FALSE = Const(False)
BINARY = (And, Or, Imp, Iff)


# ---------------------------------------------------------------------------------------------
# Printing


def pp(f: Formula, names: dict[int, str] | None = None) -> str:
    """``f`` as Lean prints it; ``names`` overrides the printed name of some variable uids
    (shadowed hypotheses print as ``x✝``)."""
    if names:
        return _pp(f, names)[0]
    hit = _PRINTED.get(id(f))
    if hit is not None and hit[0] is f:
        return hit[1]
    text = _pp_cached(f)
    _remember_printed(f, text)
    return text


# Formulas printed before, by identity: (the formula, its text).  Goals share their hypotheses'
# formulas with the goals they came from, and finding the same object needs no hashing (which for
# a formula walks the whole tree).  The entry keeps the formula alive, so its id is not reused.
_PRINTED: dict[int, tuple[Formula, str]] = {}
_PRINTED_LIMIT = 65536


def _remember_printed(f: Formula, text: str) -> None:
    if len(_PRINTED) >= _PRINTED_LIMIT:
        _PRINTED.clear()
    _PRINTED[id(f)] = (f, text)


@lru_cache(maxsize=65536)
def _pp_cached(f: Formula) -> str:
    return _pp(f, None)[0]


def _wrap(child: tuple[str, int, bool], need: int, last: bool) -> tuple[str, bool]:
    """The child's text, parenthesised where Lean's parenthesiser would; (text, still open)."""
    text, prec, open_end = child
    if prec == 0 and last:
        return text, True  # a binder in trailing position extends to the end: no parentheses
    # A trailing binder swallows everything after it, so it needs parentheses unless it is last.
    if prec < need or (open_end and not last):
        return f"({text})", False
    return text, open_end


def _pp(f: Formula, names: dict[int, str] | None) -> tuple[str, int, bool]:
    """(text, precedence of the text, whether it ends in an unparenthesised binder)."""
    match f:
        case Var(name, uid):
            return (names.get(uid, name) if names else name), MAX, False
        case MVar(name, _):
            return f"?{name}", MAX, False
        case Const(value):
            return ("True" if value else "False"), MAX, False
        case Not(arg):
            text, open_end = _wrap(_pp(arg, names), PREC_NOT_ARG, True)
            return "¬" + text, MAX, open_end
        case And(a, b):
            return _infix(a, b, " ∧ ", PREC_AND, PREC_AND + 1, PREC_AND, names)
        case Or(a, b):
            return _infix(a, b, " ∨ ", PREC_OR, PREC_OR + 1, PREC_OR, names)
        case Imp(a, b):
            return _infix(a, b, " → ", PREC_IMP, PREC_IMP + 1, PREC_IMP, names)
        case Iff(a, b):
            return _infix(a, b, " ↔ ", PREC_IFF, PREC_IFF + 1, PREC_IFF + 1, names)
        case Forall():
            return _pp_forall(f, names)
    raise TypeError(f"not a formula: {f!r}")


def _infix(
    a: Formula, b: Formula, op: str, prec: int, lhs: int, rhs: int, names: dict[int, str] | None
) -> tuple[str, int, bool]:
    left, _ = _wrap(_pp(a, names), lhs, False)
    right, open_end = _wrap(_pp(b, names), rhs, True)
    return left + op + right, prec, open_end


def _pp_forall(f: Forall, names: dict[int, str] | None) -> tuple[str, int, bool]:
    # A binder the body does not mention prints as an arrow (`Prop → p`), as Lean's delaborator does.
    if f.uid not in free_uids(f.body):
        body, open_end = _wrap(_pp(f.body, names), PREC_IMP, True)
        return "Prop → " + body, PREC_IMP, open_end
    group = [f.name]
    implicit = f.implicit
    body: Formula = f.body
    while (
        isinstance(body, Forall) and body.implicit == implicit and body.uid in free_uids(body.body)
    ):
        group.append(body.name)
        body = body.body
    binder = "{" + " ".join(group) + " : Prop}" if implicit else "(" + " ".join(group) + " : Prop)"
    # Consecutive binder groups of different kinds print together: `∀ {a b : Prop} (h : a), …`
    # only arises for constants, whose full types are kept as text; here a group ends the binder.
    return f"∀ {binder}, " + _pp(body, names)[0], 0, True


# ---------------------------------------------------------------------------------------------
# Structure


@lru_cache(maxsize=65536)
def free_uids(f: Formula) -> frozenset[int]:
    """Uids of the variables occurring free in ``f``."""
    match f:
        case Var(_, uid):
            return frozenset((uid,))
        case MVar() | Const():
            return frozenset()
        case Not(a):
            return free_uids(a)
        case And(a, b) | Or(a, b) | Imp(a, b) | Iff(a, b):
            return free_uids(a) | free_uids(b)
        case Forall(_, uid, body, _):
            return free_uids(body) - {uid}
    raise TypeError(f"not a formula: {f!r}")


def subst(f: Formula, uid: int, by: Formula) -> Formula:
    """``f`` with variable ``uid`` replaced by ``by`` (no capture: uids are unique)."""
    match f:
        case Var(_, u):
            return by if u == uid else f
        case MVar() | Const():
            return f
        case Not(a):
            return Not(subst(a, uid, by))
        case And(a, b):
            return And(subst(a, uid, by), subst(b, uid, by))
        case Or(a, b):
            return Or(subst(a, uid, by), subst(b, uid, by))
        case Imp(a, b):
            return Imp(subst(a, uid, by), subst(b, uid, by))
        case Iff(a, b):
            return Iff(subst(a, uid, by), subst(b, uid, by))
        case Forall(name, u, body, implicit):
            return Forall(name, u, subst(body, uid, by), implicit)
    raise TypeError(f"not a formula: {f!r}")


def shift_uids(f: Formula, lo: int, hi: int, by: int) -> Formula:
    """``f`` with the uids in ``lo..hi`` moved by ``by``.

    The caller guarantees that no moved uid lands on another uid of ``f``: the result is then ``f``
    with its variables renamed one-to-one, which prints exactly as ``f`` does (printing looks at
    uids only to compare them), so a text already known for ``f`` is known for the result.
    """
    out = _shift(f, lo, hi, by)
    hit = _PRINTED.get(id(f))
    if hit is not None and hit[0] is f:
        _remember_printed(out, hit[1])
    return out


def _shift(f: Formula, lo: int, hi: int, by: int) -> Formula:
    match f:
        case Var(name, uid):
            return Var(name, uid + by) if lo <= uid <= hi else f
        case MVar() | Const():
            return f
        case Not(a):
            return Not(_shift(a, lo, hi, by))
        case And(a, b):
            return And(_shift(a, lo, hi, by), _shift(b, lo, hi, by))
        case Or(a, b):
            return Or(_shift(a, lo, hi, by), _shift(b, lo, hi, by))
        case Imp(a, b):
            return Imp(_shift(a, lo, hi, by), _shift(b, lo, hi, by))
        case Iff(a, b):
            return Iff(_shift(a, lo, hi, by), _shift(b, lo, hi, by))
        case Forall(name, uid, body, implicit):
            moved = uid + by if lo <= uid <= hi else uid
            return Forall(name, moved, _shift(body, lo, hi, by), implicit)
    raise TypeError(f"not a formula: {f!r}")


def subst_many(f: Formula, mapping: dict[int, Formula]) -> Formula:
    """``f`` with each variable whose uid is in ``mapping`` replaced (one traversal)."""
    if not mapping:
        return f
    match f:
        case Var(_, u):
            return mapping.get(u, f)
        case MVar() | Const():
            return f
        case Not(a):
            return Not(subst_many(a, mapping))
        case And(a, b):
            return And(subst_many(a, mapping), subst_many(b, mapping))
        case Or(a, b):
            return Or(subst_many(a, mapping), subst_many(b, mapping))
        case Imp(a, b):
            return Imp(subst_many(a, mapping), subst_many(b, mapping))
        case Iff(a, b):
            return Iff(subst_many(a, mapping), subst_many(b, mapping))
        case Forall(name, u, body, implicit):
            return Forall(name, u, subst_many(body, mapping), implicit)
    raise TypeError(f"not a formula: {f!r}")


def unfold_not(f: Formula) -> Formula:
    """One step of ``whnf``: ``¬a`` ↦ ``a → False``; anything else unchanged."""
    return Imp(f.arg, FALSE) if isinstance(f, Not) else f


def pi_arity(f: Formula) -> int:
    """Binders of ``f`` seen through ``¬`` (Lean's ``forallTelescopeReducing`` count)."""
    n = 0
    while True:
        f = unfold_not(f)
        if isinstance(f, Imp):
            f = f.right
        elif isinstance(f, Forall):
            f = f.body
        else:
            return n
        n += 1


def evaluate(f: Formula) -> bool | None:
    """The truth value of a variable-free formula (what ``decide`` computes), else None."""
    match f:
        case Const(value):
            return value
        case Not(a):
            v = evaluate(a)
            return None if v is None else not v
        case And(a, b) | Or(a, b) | Imp(a, b) | Iff(a, b):
            x, y = evaluate(a), evaluate(b)
            if x is None or y is None:
                return None
            if isinstance(f, And):
                return x and y
            if isinstance(f, Or):
                return x or y
            if isinstance(f, Imp):
                return (not x) or y
            return x == y
    return None


# ---------------------------------------------------------------------------------------------
# Unification


class Unifier:
    """First-order unification with metavariables, ``¬a`` ≡ ``a → False`` (definitional).

    Assignments accumulate in ``assignment``; :meth:`snapshot`/:meth:`restore` undo failed tries.
    """

    __slots__ = ("assignment",)

    def __init__(self) -> None:
        self.assignment: dict[int, Formula] = {}

    def snapshot(self) -> dict[int, Formula]:
        return dict(self.assignment)

    def restore(self, saved: dict[int, Formula]) -> None:
        self.assignment = saved

    def resolve(self, f: Formula) -> Formula:
        """``f`` with every assigned metavariable replaced (recursively)."""
        if not self.assignment:
            return f
        match f:
            case MVar(_, uid):
                if uid in self.assignment:
                    return self.resolve(self.assignment[uid])
                return f
            case Var() | Const():
                return f
            case Not(a):
                return Not(self.resolve(a))
            case And(a, b):
                return And(self.resolve(a), self.resolve(b))
            case Or(a, b):
                return Or(self.resolve(a), self.resolve(b))
            case Imp(a, b):
                return Imp(self.resolve(a), self.resolve(b))
            case Iff(a, b):
                return Iff(self.resolve(a), self.resolve(b))
            case Forall(name, uid, body, implicit):
                return Forall(name, uid, self.resolve(body), implicit)
        raise TypeError(f"not a formula: {f!r}")

    def has_mvars(self, f: Formula) -> bool:
        match f:
            case MVar(_, uid):
                return uid not in self.assignment or self.has_mvars(self.assignment[uid])
            case Var() | Const():
                return False
            case Not(a):
                return self.has_mvars(a)
            case And(a, b) | Or(a, b) | Imp(a, b) | Iff(a, b):
                return self.has_mvars(a) or self.has_mvars(b)
            case Forall(_, _, body, _):
                return self.has_mvars(body)
        raise TypeError(f"not a formula: {f!r}")

    def unify(self, a: Formula, b: Formula) -> bool:
        """Make ``a`` and ``b`` equal by assigning metavariables; False (partly assigned) if not."""
        if a == b and not self.assignment:
            return True
        a, b = self._head(a), self._head(b)
        if a == b:
            return True
        if isinstance(a, MVar):
            return self._assign(a, b)
        if isinstance(b, MVar):
            return self._assign(b, a)
        if type(a) is not type(b):
            # `¬x` against `x → False`: unfold and compare as implications.
            if isinstance(a, Not) or isinstance(b, Not):
                a2, b2 = unfold_not(a), unfold_not(b)
                if isinstance(a2, Imp) and isinstance(b2, Imp):
                    return self.unify(a2, b2)
            return False
        match a:
            case Not(x):
                return self.unify(x, b.arg)
            case And(x, y) | Or(x, y) | Imp(x, y) | Iff(x, y):
                return self.unify(x, b.left) and self.unify(y, b.right)
            case Forall(_, uid, body, _):
                # Alpha-equivalence: rename b's binder to a's.
                return self.unify(body, subst(b.body, b.uid, Var(a.name, uid)))
        return False

    def _head(self, f: Formula) -> Formula:
        while isinstance(f, MVar) and f.uid in self.assignment:
            f = self.assignment[f.uid]
        return f

    def _assign(self, m: MVar, f: Formula) -> bool:
        if self._occurs(m.uid, f):
            return False
        self.assignment[m.uid] = f
        return True

    def _occurs(self, uid: int, f: Formula) -> bool:
        f = self._head(f)
        match f:
            case MVar(_, u):
                return u == uid
            case Var() | Const():
                return False
            case Not(a):
                return self._occurs(uid, a)
            case And(a, b) | Or(a, b) | Imp(a, b) | Iff(a, b):
                return self._occurs(uid, a) or self._occurs(uid, b)
            case Forall(_, _, body, _):
                return self._occurs(uid, body)
        return False


def defeq(a: Formula, b: Formula) -> bool:
    """Definitional equality of closed formulas (structural, up to ``¬a`` ≡ ``a → False``)."""
    return a == b or Unifier().unify(a, b)
