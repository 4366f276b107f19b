"""Goals, the term elaborator and the tactics of the propositional REPL.

A goal (:class:`MGoal`) is immutable: a metavariable id, hypotheses and a target.  A tactic maps the
goal list to a new goal list, the way Lean's tactic framework does: atomic tactics act on the first
(main) goal and leave the others in place.  Failures raise :class:`TacticFailure` whose text reads
like Lean 4's (``unknown identifier 'x'``, ``type mismatch …``, ``tactic 'apply' failed, could not
unify the conclusion of …``), followed by the goal as Lean prints it when Lean appends it.

Names follow Lean: ``intro`` with no name gives ``a✝`` for an implication and ``p✝`` for a ``∀ (p :
Prop)`` binder; ``cases`` gives ``left✝ right✝`` (∧, case ``intro``) and ``h✝`` (∨, cases ``inl`` and
``inr``); ``apply`` tags new goals with the constant's binder names (``left``/``right`` for
``And.intro``, ``h`` for ``Or.inl``), appended to the goal's own tag (``inl.h``), and a single new goal
inherits the tag (``Lean.Meta.appendParentTag``).

Example::

    >>> import itertools
    >>> from burnqed.proplogic.syntax import parse_formula, parse_tactic
    >>> engine = Engine(fresh=itertools.count(1).__next__)
    >>> goal = engine.start(parse_formula("∀ (p q : Prop), p ∧ q → q ∧ p"))
    >>> goals, _ = engine.run(parse_tactic("intro p q h"), [goal], "intro p q h")
    >>> print(render(goals[0]))
    p q : Prop
    h : p ∧ q
    ⊢ q ∧ p
    >>> goals, _ = engine.run(parse_tactic("exact ⟨h.2, h.1⟩"), goals, "exact ⟨h.2, h.1⟩")
    >>> goals
    []
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from burnqed.proplogic.display import Goal, Variable, render_goals
from burnqed.proplogic.formula import (
    FALSE,
    TRUE,
    And,
    Const,
    Forall,
    Formula,
    Iff,
    Imp,
    MVar,
    Not,
    Or,
    Unifier,
    Var,
    defeq,
    evaluate,
    pi_arity,
    pp,
    subst,
    subst_many,
    unfold_not,
)
from burnqed.proplogic.syntax import (
    Apply,
    Cases,
    Combinator,
    DebugHeartbeats,
    Exact,
    First,
    Have,
    Intro,
    Intros,
    Obtain,
    PAlts,
    Pattern,
    PClear,
    PName,
    PTuple,
    Rcases,
    Seq,
    SetOption,
    Show,
    Simple,
    Sleep,
    Specialize,
    Tactic,
    TAnon,
    TApp,
    TBy,
    Term,
    TFun,
    Then,
    THole,
    TIdent,
    TProj,
    Trace,
    TTyped,
    UnknownIdentifier,
    Unsupported,
    parse_formula,
    resolve,
)

DEBUG_ENV = "BURNQED_PROPLOGIC_DEBUG"  # "1" enables the debug_* tactics (tests and benches)
# Heartbeats (Lean's raw units) one atomic tactic step costs: deterministic stand-in for Lean's
# allocation count.  `set_option maxHeartbeats 1 in t` (1000) allows one step.
HEARTBEATS_PER_STEP = 1000


@dataclass(frozen=True, slots=True)
class Hyp:
    """A hypothesis (Lean local declaration)."""

    uid: int  # fvar id, printed "_uniq.<uid>"
    name: str  # user name as typed (no ✝)
    type: Formula | None  # None: a proposition variable `name : Prop`
    inaccessible: bool = (
        False  # introduced without a name: prints as `name✝`, cannot be referred to
    )

    @property
    def display(self) -> str:
        return self.name + "✝" if self.inaccessible else self.name


@dataclass(frozen=True, slots=True)
class MGoal:
    """One goal (Lean metavariable): hypotheses ⊢ target, with an optional case tag."""

    uid: int  # mvar id, printed "_uniq.<uid>"
    hyps: tuple[Hyp, ...]
    target: Formula
    tag: str | None = None


class TacticFailure(Exception):
    """The tactic failed; ``str()`` is the Lean-style message text."""


class HeartbeatLimit(Exception):
    """Lean's ``maxHeartbeats`` exception: the tactic's deterministic work budget is spent.

    A runtime exception in Lean: ``try``, ``first``, ``repeat`` and ``any_goals`` do not catch it
    (``Core.tryCatchRuntimeEx``), so it is not a :class:`TacticFailure`; the REPL reports it as the
    tactic's error message, with Lean's text.
    """

    def __init__(self, limit: int):
        super().__init__(
            f"(deterministic) timeout at `elaborator`, maximum number of heartbeats "
            f"({limit // 1000}) has been reached\n"
            "Use `set_option maxHeartbeats <num>` to set the limit.\n"
            "Additional diagnostic information may be available using the "
            "`set_option diagnostics true` command."
        )
        self.limit = limit


class Interrupt(Exception):
    """The REPL-side ``timeout`` expired (Pantograph answers ``{"error":"internal","desc":"interrupt"}``)."""


class DebugGarbage(Exception):
    """``debug_garbage``: the REPL must print a line that is not JSON (client tests)."""


# ---------------------------------------------------------------------------------------------
# Printing goals


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def display_names(hyps: tuple[Hyp, ...]) -> dict[int, str]:
    """Printed names that differ from the plain ones, as Lean's goal display sanitises them: a
    hypothesis hidden by a later one of the same name prints as ``x✝``, and several hidden or
    inaccessible ones of one name are numbered from the most recent: ``a✝¹ : p``, ``a✝ : q``."""
    hidden: dict[str, int] = {}  # name -> how many hidden/inaccessible ones seen (from the end)
    visible: set[str] = set()
    out: dict[int, str] = {}
    for h in reversed(hyps):
        if not h.inaccessible and h.name not in visible:
            visible.add(h.name)
            continue
        k = hidden.get(h.name, 0)
        hidden[h.name] = k + 1
        shown = h.name + "✝" + (str(k).translate(_SUPERSCRIPT) if k else "")
        if shown != h.display:
            out[h.uid] = shown
    return out


# Goals already printed, by uid: (the goal, its Goal, its text or None).  A search prints the same
# goal again and again (every failing candidate's message ends with it, and a new state's goals go
# out as JSON).  A goal is immutable, and a hit must be the very same object: uids are unique per
# engine only.  Cleared when full.
_PRINTED: dict[int, tuple[MGoal, Goal, str | None]] = {}
_PRINTED_LIMIT = 16384


def to_goal(goal: MGoal) -> Goal:
    """The :class:`~burnqed.proplogic.display.Goal` of ``goal``."""
    hit = _PRINTED.get(goal.uid)
    if hit is not None and hit[0] is goal:
        return hit[1]
    out = _to_goal(goal)
    if len(_PRINTED) >= _PRINTED_LIMIT:
        _PRINTED.clear()
    _PRINTED[goal.uid] = (goal, out, None)
    return out


_Context = tuple[dict[int, str], dict[str, Hyp], dict[str, Formula]]
_CONTEXTS: dict[int, tuple[MGoal, _Context]] = {}


def _context(goal: MGoal) -> _Context:
    """What terms see of ``goal``'s hypotheses: :func:`display_names`, the accessible hypotheses by
    name, and the proposition variables by name (as formulas).  Cached as :data:`_PRINTED` is."""
    hit = _CONTEXTS.get(goal.uid)
    if hit is not None and hit[0] is goal:
        return hit[1]
    hyps = {h.name: h for h in goal.hyps if not h.inaccessible}
    scope: dict[str, Formula] = {
        n: Var(h.display, h.uid) for n, h in hyps.items() if h.type is None
    }
    out = (display_names(goal.hyps), hyps, scope)
    if len(_CONTEXTS) >= _PRINTED_LIMIT:
        _CONTEXTS.clear()
    _CONTEXTS[goal.uid] = (goal, out)
    return out


def _to_goal(goal: MGoal) -> Goal:
    names = _context(goal)[0]
    variables = tuple(
        Variable(
            name=f"_uniq.{h.uid}",
            user_name=names.get(h.uid, h.display),
            type="Prop" if h.type is None else pp(h.type, names),
            is_inaccessible=h.inaccessible,
        )
        for h in goal.hyps
    )
    return Goal(
        name=f"_uniq.{goal.uid}", target=pp(goal.target, names), variables=variables, case=goal.tag
    )


def render(goal: MGoal) -> str:
    """``goal`` as Lean's goal display prints it."""
    hit = _PRINTED.get(goal.uid)
    if hit is not None and hit[0] is goal and hit[2] is not None:
        return hit[2]
    g = to_goal(goal)
    text = g.render()
    _PRINTED[goal.uid] = (goal, g, text)
    return text


def _fail(msg: str, goal: MGoal) -> TacticFailure:
    """Lean's ``throwTacticEx``: the message, then the goal."""
    return TacticFailure(f"{msg}\n{render(goal)}")


def _append_tag(parent: str | None, name: str | None) -> str | None:
    if parent and name:
        return f"{parent}.{name}"
    return parent or name


# ---------------------------------------------------------------------------------------------
# The environment: constants with their types


@dataclass(frozen=True)
class Constant:
    """A constant of the environment (Lean's ``ConstantInfo``): name and type."""

    name: str
    type: Formula  # implicit arguments as implicit ∀ binders over Prop
    explicit: tuple[str, ...]  # binder names of the explicit arguments (goal tags for `apply`)
    display: str  # the full type as Lean prints it (Sort-polymorphic ones differ from `type`)


def _const(
    name: str, typ: str, explicit: tuple[str, ...] = (), display: str | None = None
) -> Constant:
    return Constant(name, parse_formula(typ), explicit, display or typ)


CONSTANTS: dict[str, Constant] = {
    c.name: c
    for c in (
        _const("trivial", "True"),
        _const("True.intro", "True"),
        _const("And.intro", "∀ {a b : Prop}, a → b → a ∧ b", ("left", "right")),
        _const("And.left", "∀ {a b : Prop}, a ∧ b → a", ("self",)),
        _const("And.right", "∀ {a b : Prop}, a ∧ b → b", ("self",)),
        _const("And.symm", "∀ {a b : Prop}, a ∧ b → b ∧ a", ("self",)),
        _const("And.comm", "∀ {a b : Prop}, a ∧ b ↔ b ∧ a"),
        _const("Or.inl", "∀ {a b : Prop}, a → a ∨ b", ("h",)),
        _const("Or.inr", "∀ {a b : Prop}, b → a ∨ b", ("h",)),
        _const(
            "Or.elim", "∀ {a b c : Prop}, a ∨ b → (a → c) → (b → c) → c", ("h", "left", "right")
        ),
        _const("Or.symm", "∀ {a b : Prop}, a ∨ b → b ∨ a", ("self",)),
        _const("Or.comm", "∀ {a b : Prop}, a ∨ b ↔ b ∨ a"),
        _const("Or.resolve_left", "∀ {a b : Prop}, a ∨ b → ¬a → b", ("h", "na")),
        _const("Or.resolve_right", "∀ {a b : Prop}, a ∨ b → ¬b → a", ("h", "nb")),
        _const("Iff.intro", "∀ {a b : Prop}, (a → b) → (b → a) → (a ↔ b)", ("mp", "mpr")),
        _const("Iff.mp", "∀ {a b : Prop}, (a ↔ b) → a → b", ("self", "a")),
        _const("Iff.mpr", "∀ {a b : Prop}, (a ↔ b) → b → a", ("self", "a")),
        _const("Iff.symm", "∀ {a b : Prop}, (a ↔ b) → (b ↔ a)", ("h",)),
        _const("Iff.rfl", "∀ {a : Prop}, a ↔ a"),
        _const("False.elim", "∀ {C : Prop}, False → C", ("h",), "∀ {C : Sort u}, False → C"),
        _const(
            "absurd",
            "∀ {a b : Prop}, a → ¬a → b",
            ("h₁", "h₂"),
            "∀ {a : Prop} {b : Sort v}, a → ¬a → b",
        ),
        _const(
            "Not.elim",
            "∀ {a b : Prop}, ¬a → a → b",
            ("H1", "H2"),
            "∀ {a : Prop} {α : Sort u_1}, ¬a → a → α",
        ),
        _const("Not.intro", "∀ {a : Prop}, (a → False) → ¬a", ("h",)),
        _const("mt", "∀ {a b : Prop}, (a → b) → ¬b → ¬a", ("h₁", "h₂")),
        _const("not_not_intro", "∀ {p : Prop}, p → ¬¬p", ("h",)),
        _const("id", "∀ {a : Prop}, a → a", ("a",), "∀ {α : Sort u}, α → α"),
    )
}
CONSTANTS["Function.mt"] = CONSTANTS["mt"]


@lru_cache(maxsize=4096)
def theorem_constant(name: str, statement: Formula) -> Constant:
    """A theorem the file declared, as a constant terms can use.

    Approximation: its ``(p q : Prop)`` binders become implicit (``helper h``, where Lean wants
    ``helper p q h`` or ``helper _ _ h``): the term elaborator here applies only implicit ∀.
    """
    t, binders = statement, []
    while isinstance(t, Forall):
        binders.append((t.name, t.uid))
        t = t.body
    for bname, uid in reversed(binders):
        t = Forall(bname, uid, t, implicit=True)
    return Constant(name, t, (), pp(statement))


# Generalised field notation `h.f` (h : H …) resolves to `H.f h`; `.1`/`.2` are the structure
# projections.
_PROJECTIONS = {
    ("And", "1"): "left",
    ("And", "2"): "right",
    ("Iff", "1"): "mp",
    ("Iff", "2"): "mpr",
}


@dataclass(frozen=True)
class ForeignConstant:
    """A non-propositional constant of Lean's library: known only so that `apply` fails exactly as
    Lean's does (the integration test applies ``Nat.le_of_succ_le`` to a propositional goal)."""

    name: str
    display: str  # the full type
    conclusions: tuple[str, ...]  # the type after instantiating k = 0, 1, … leading binders


FOREIGN: dict[str, ForeignConstant] = {
    c.name: c
    for c in (
        ForeignConstant(
            "Nat.le_of_succ_le",
            "∀ {n m : Nat}, n.succ ≤ m → n ≤ m",
            (
                "∀ {n m : Nat}, n.succ ≤ m → n ≤ m",
                "∀ {m : Nat}, Nat.succ ?n ≤ m → ?n ≤ m",
                "Nat.succ ?n ≤ ?m → ?n ≤ ?m",
                "?n ≤ ?m",
            ),
        ),
        ForeignConstant(
            "Nat.succ_le_succ",
            "∀ {n m : Nat}, n ≤ m → n.succ ≤ m.succ",
            (
                "∀ {n m : Nat}, n ≤ m → n.succ ≤ m.succ",
                "∀ {m : Nat}, ?n ≤ m → Nat.succ ?n ≤ m.succ",
                "?n ≤ ?m → Nat.succ ?n ≤ Nat.succ ?m",
                "Nat.succ ?n ≤ Nat.succ ?m",
            ),
        ),
        ForeignConstant(
            "Nat.add_comm",
            "∀ (n m : Nat), n + m = m + n",
            ("∀ (n m : Nat), n + m = m + n", "∀ (m : Nat), ?n + m = m + ?n", "?n + ?m = ?m + ?n"),
        ),
        ForeignConstant("Nat.le_refl", "∀ (n : Nat), n ≤ n", ("∀ (n : Nat), n ≤ n", "?n ≤ ?n")),
        ForeignConstant(
            "Eq.refl",
            "∀ {α : Sort u_1} (a : α), a = a",
            ("∀ {α : Sort u_1} (a : α), a = a", "∀ (a : ?α), a = a", "?a = ?a"),
        ),
        ForeignConstant(
            "rfl",
            "∀ {α : Sort u} {a : α}, a = a",
            ("∀ {α : Sort u} {a : α}, a = a", "∀ {a : ?α}, a = a", "?a = ?a"),
        ),
    )
}


# ---------------------------------------------------------------------------------------------
# Elaboration of proof terms


class Elab:
    """Elaborates proof terms against a goal's context (bidirectionally, with metavariables)."""

    def __init__(self, engine: Engine, goal: MGoal, text: str):
        self.engine = engine
        self.goal = goal
        self.text = text  # the tactic source, for quoting terms in messages
        self.u = Unifier()
        self.mvar_ids = itertools.count(1)
        self.locals: list[tuple[str, Formula]] = []  # `fun` binders in scope, innermost last
        self.holes: list[Formula] = []  # types of `?_` holes (become goals for `apply`)
        self.used_sorry = False
        self._checking_arg = False
        # Shared by every Elab of this goal (a search tries several tactics on each): read only.
        self.names, self._hyps, self.scope = _context(goal)

    # -- helpers --
    def src(self, t: Term) -> str:
        return self.text[t.start : t.end]

    def pp(self, f: Formula) -> str:
        return pp(self.u.resolve(f), self.names)

    def formula(self, f: Formula) -> Formula:
        try:
            return resolve(f, self.scope)
        except UnknownIdentifier as e:
            raise TacticFailure(str(e)) from None

    def instantiate(self, c: Constant) -> Formula:
        """``c``'s type with its implicit arguments replaced by fresh metavariables."""
        t = c.type
        while isinstance(t, Forall) and t.implicit:
            t = subst(t.body, t.uid, MVar(t.name, next(self.mvar_ids)))
        return t

    def mismatch(self, t: Term, actual: Formula, expected: Formula) -> TacticFailure:
        return TacticFailure(
            f"type mismatch\n  {self.src(t)}\nhas type\n  {self.pp(actual)} : Prop\n"
            f"but is expected to have type\n  {self.pp(expected)} : Prop"
        )

    def lookup(self, t: TIdent) -> Formula:
        name = t.name
        for lname, ltype in reversed(self.locals):
            if lname == name:
                return ltype
        hyp = self._hyps.get(name)
        if hyp is not None:
            if hyp.type is None:
                raise TacticFailure(
                    f"type mismatch\n  {name}\nhas type\n  Prop : Type\nbut is expected to have type\n"
                    "  a proof of a proposition"
                )
            return hyp.type
        c = self.engine.constant(name)
        if c is not None:
            return self.instantiate(c)
        if name == "sorry":
            self.used_sorry = True
            return MVar("sorry", next(self.mvar_ids))
        if name in FOREIGN:
            raise TacticFailure(
                f"type mismatch\n  {name}\nhas type\n  {FOREIGN[name].display} : Prop\n"
                "but is expected to have type\n  a proposition of the goal"
            )
        # `h.mp`, `h.1.2` written as one identifier: a local head followed by fields.
        if "." in name:
            head, *fields = name.split(".")
            if any(lname == head for lname, _ in self.locals) or head in self._hyps:
                base: Term = TIdent(head, t.start, t.start + len(head))
                for f in fields:
                    base = TProj(base, f, t.start, t.end)
                return self.infer(base)
        raise TacticFailure(f"unknown identifier '{name}'")

    # -- inference --
    def infer(self, t: Term) -> Formula:
        match t:
            case TIdent():
                return self.lookup(t)
            case TApp(fn, args):
                return self._app(t, fn, args, None)
            case TProj(base, field):
                return self._proj(t, base, field)
            case TTyped(inner, typ):
                f = self.formula(typ)
                self.check(inner, f)
                return f
            case TFun(binders, body):
                if any(typ is None for _, typ in binders):
                    raise TacticFailure(f"failed to infer binder type\n  {self.src(t)}")
                n = len(self.locals)
                types = [self.formula(typ) for _, typ in binders]  # type: ignore[arg-type]
                self.locals.extend(
                    (name, typ) for (name, _), typ in zip(binders, types, strict=True)
                )
                try:
                    result = self.infer(body)
                finally:
                    del self.locals[n:]
                for typ in reversed(types):
                    result = Imp(typ, result)
                return result
            case TAnon():
                raise TacticFailure(
                    f"invalid constructor ⟨...⟩, expected type must be known\n  {self.src(t)}"
                )
            case THole():
                m = MVar("m", next(self.mvar_ids))
                if t.synthetic:
                    self.holes.append(m)
                return m
            case TBy():
                raise TacticFailure("invalid 'by' tactic, expected type has not been provided")
        raise TacticFailure(f"unsupported term\n  {self.src(t)}")

    def _field_const(self, t: Term, base: Term, field: str, btype: Formula) -> Constant:
        r = self.u.resolve(btype)
        head = {And: "And", Or: "Or", Iff: "Iff", Not: "Not"}.get(type(r))
        if isinstance(r, Const) and not r.value:
            head = "False"
        if head is None:
            raise TacticFailure(
                "invalid field notation, type is not of the form (C ...) where C is a constant"
                f"\n  {self.src(base)}\nhas type\n  {self.pp(r)}"
            )
        field = _PROJECTIONS.get((head, field), field)
        name = f"{head}.{field}"
        if name not in CONSTANTS:
            raise TacticFailure(
                f"invalid field '{field}', the environment does not contain '{name}'"
                f"\n  {self.src(base)}\nhas type\n  {self.pp(r)}"
            )
        return CONSTANTS[name]

    def _proj(self, t: Term, base: Term, field: str) -> Formula:
        btype = self.infer(base)
        c = self._field_const(t, base, field, btype)
        ctype = unfold_not(self.instantiate(c))
        assert isinstance(ctype, Imp)  # every field constant takes the structure first
        if not self.u.unify(ctype.left, btype):
            raise self.mismatch(base, btype, ctype.left)
        return ctype.right

    def _app(self, t: TApp, fn: Term, args: tuple[Term, ...], expected: Formula | None) -> Formula:
        ftype = self.infer(fn)
        # Peel one arrow per argument; unify the result with the expected type *before*
        # elaborating the arguments, as Lean's app elaborator propagates the expected type.
        domains: list[Formula] = []
        cur = ftype
        for _ in args:
            cur = unfold_not(self.u.resolve(cur))
            if isinstance(cur, MVar):
                # `sorry a` and the like: an unknown function type.
                dom = MVar("α", next(self.mvar_ids))
                res = MVar("β", next(self.mvar_ids))
                self.u.unify(cur, Imp(dom, res))
                cur = Imp(dom, res)
            if not isinstance(cur, Imp):
                raise TacticFailure(
                    f"function expected\n  {self.src(t)}\nterm has type\n  {self.pp(ftype)}"
                )
            domains.append(cur.left)
            cur = cur.right
        if expected is not None:
            saved = self.u.snapshot()
            if not self.u.unify(cur, expected):
                self.u.restore(saved)
        for i, (arg, dom) in enumerate(zip(args, domains, strict=True)):
            try:
                self._checking_arg = True
                self.check(arg, dom)
            except _ArgMismatch as e:
                prefix = self.text[t.start : args[i].end]
                raise TacticFailure(
                    f"application type mismatch\n  {prefix}\nargument\n  {self.src(arg)}\n"
                    f"has type\n  {self.pp(e.actual)} : Prop\nbut is expected to have type\n"
                    f"  {self.pp(dom)} : Prop"
                ) from None
            finally:
                self._checking_arg = False
        return cur

    # -- checking --
    def check(self, t: Term, expected: Formula) -> None:
        """Elaborate ``t`` against ``expected``; raise :class:`TacticFailure` on mismatch."""
        exp = self.u.resolve(expected)
        # An argument's own mismatch is reported for the whole application (by `_app`); parts of
        # the argument (constructor fields, lambda bodies) report their own.
        as_argument, self._checking_arg = self._checking_arg, False
        match t:
            case TIdent("sorry"):
                self.used_sorry = True
                return
            case THole(synthetic):
                if synthetic:
                    self.holes.append(exp)
                    return
                raise TacticFailure(
                    f"don't know how to synthesize placeholder\ncontext:\n{render(self.goal)}"
                )
            case TAnon(items):
                self._anon(t, items, exp)
                return
            case TFun(binders, body):
                self._fun(t, binders, body, exp)
                return
            case TBy(tactic):
                self._by(tactic, exp)
                return
            case TApp(fn, args):
                actual = self._app(t, fn, args, exp)
            case _:
                actual = self.infer(t)
        if not self.u.unify(actual, exp):
            if as_argument:
                raise _ArgMismatch(actual)
            raise self.mismatch(t, actual, exp)

    def _anon(self, t: TAnon, items: tuple[Term, ...], exp: Formula) -> None:
        if isinstance(exp, And | Iff):
            fields = (
                (exp.left, exp.right)
                if isinstance(exp, And)
                else (Imp(exp.left, exp.right), Imp(exp.right, exp.left))
            )
            if len(items) < 2:
                raise TacticFailure(
                    f"invalid constructor ⟨...⟩, insufficient number of arguments, constructs "
                    f"'{'And' if isinstance(exp, And) else 'Iff'}.intro' has #2 explicit fields, "
                    f"but only #{len(items)} provided"
                )
            self.check(items[0], fields[0])
            rest = items[1] if len(items) == 2 else TAnon(items[1:], items[1].start, t.end)
            self.check(rest, fields[1])
            return
        if exp == TRUE and not items:
            return
        if isinstance(exp, Or):
            raise TacticFailure(
                "invalid constructor ⟨...⟩, expected type must be an inductive type with only one "
                f"constructor \n  {self.pp(exp)}"
            )
        raise TacticFailure(
            f"invalid constructor ⟨...⟩, expected type must be an inductive type \n  {self.pp(exp)}"
        )

    def _fun(
        self, t: TFun, binders: tuple[tuple[str, Formula | None], ...], body: Term, exp: Formula
    ) -> None:
        n = len(self.locals)
        try:
            cur = exp
            for name, typ in binders:
                cur = unfold_not(self.u.resolve(cur))
                if not isinstance(cur, Imp):
                    raise TacticFailure(
                        f"type mismatch\n  {self.src(t)}\nhas type\n  a function\n"
                        f"but is expected to have type\n  {self.pp(exp)} : Prop"
                    )
                if typ is not None:
                    declared = self.formula(typ)
                    if not self.u.unify(declared, cur.left):
                        raise TacticFailure(
                            f"type mismatch\n  {name}\nhas type\n  {self.pp(cur.left)} : Prop\n"
                            f"but is expected to have type\n  {self.pp(declared)} : Prop"
                        )
                self.locals.append((name, cur.left))
                cur = cur.right
            self.check(body, cur)
        finally:
            del self.locals[n:]

    def _by(self, tactic: Tactic, exp: Formula) -> None:
        if self.u.has_mvars(exp):
            raise TacticFailure("invalid 'by' tactic, expected type has not been provided")
        hyps = self.goal.hyps + tuple(
            Hyp(self.engine.fresh(), name, self.u.resolve(typ)) for name, typ in self.locals
        )
        sub = MGoal(self.engine.fresh(), hyps, exp, None)
        goals, used_sorry = self.engine.run(tactic, [sub], self.text)
        self.used_sorry |= used_sorry
        if goals:
            raise TacticFailure(f"unsolved goals\n{render_goals(to_goal(g) for g in goals)}")


class _ArgMismatch(Exception):
    def __init__(self, actual: Formula):
        self.actual = actual


# ---------------------------------------------------------------------------------------------
# Tactics


class Engine:
    """Runs tactics on goal lists.  ``fresh`` numbers new goals and hypotheses (``_uniq.N``)."""

    def __init__(self, fresh: Callable[[], int], *, debug: bool | None = None):
        self.fresh = fresh
        self.debug = os.environ.get(DEBUG_ENV) == "1" if debug is None else debug
        self.deadline: float | None = None  # monotonic time at which `sleep` is interrupted
        # Deterministic work, counted like Lean's heartbeats (raw units: `maxHeartbeats N` allows
        # N·1000): every atomic tactic step costs HEARTBEATS_PER_STEP.  The caller resets
        # `heartbeats` per request (goal.tactic) or declaration, and sets `max_heartbeats` (0: none).
        self.heartbeats = 0
        self.max_heartbeats = 0
        # Theorems of the state's environment (a file's own declarations) the terms may use.
        self.env: Mapping[str, Any] = {}
        # Information messages logged by `trace` (Lean logs them at the tactic); the caller
        # clears the list before running a tactic and reports what it holds afterwards.
        self.infos: list[str] = []

    def start(self, target: Formula, hyps: tuple[Hyp, ...] = ()) -> MGoal:
        return MGoal(self.fresh(), hyps, target, None)

    def constant(self, name: str) -> Constant | None:
        """A built-in constant, or a theorem of the state's environment (its file's declarations)."""
        c = CONSTANTS.get(name)
        if c is None and name in self.env:
            c = theorem_constant(name, self.env[name].statement)
        return c

    def tick(self, n: int) -> None:
        """Spend ``n`` heartbeats; :class:`HeartbeatLimit` past ``max_heartbeats``."""
        self.heartbeats += n
        if self.max_heartbeats and self.heartbeats > self.max_heartbeats:
            raise HeartbeatLimit(self.max_heartbeats)

    def run(self, tac: Tactic, goals: list[MGoal], text: str) -> tuple[list[MGoal], bool]:
        """Apply ``tac`` to ``goals`` (main goal first); the new goals and whether sorry was used."""
        self._sorry = False
        out = self._run(tac, list(goals), text)
        return out, self._sorry

    # -- dispatch --
    def _run(self, tac: Tactic, goals: list[MGoal], text: str) -> list[MGoal]:
        match tac:
            case Seq(tactics):
                for t in tactics:
                    goals = self._run(t, goals, text)
                return goals
            case Then(first, then):
                main, rest = self._main(goals)
                out: list[MGoal] = []
                for g in self._run(first, [main], text):
                    out.extend(self._run(then, [g], text))
                return out + rest
            case Combinator(name, inner):
                return self._combinator(name, inner, goals, text)
            case First(alternatives):
                err: TacticFailure | None = None
                for alt in alternatives:
                    try:
                        return self._run(alt, goals, text)
                    except TacticFailure as e:
                        err = e
                assert err is not None
                raise err
            case Sleep(ms):
                self._sleep(ms)
                return goals
            case SetOption(name, value, inner):
                return self._set_option(name, value, inner, goals, text)
            case DebugHeartbeats(n):
                if not self.debug:
                    raise TacticFailure(
                        f"unknown tactic 'debug_heartbeats' (set {DEBUG_ENV}=1 to enable it)"
                    )
                self.tick(n)
                return goals
            case Trace(msg):
                self.infos.append(msg)
                return goals
            case Simple("done"):
                if goals:
                    raise TacticFailure(
                        f"unsolved goals\n{render_goals(to_goal(g) for g in goals)}"
                    )
                return goals
            case Simple("skip"):
                return goals
        main, rest = self._main(goals)
        return self._atomic(tac, main, text) + rest

    def _main(self, goals: list[MGoal]) -> tuple[MGoal, list[MGoal]]:
        if not goals:
            raise TacticFailure("no goals to be proved")
        return goals[0], goals[1:]

    def _combinator(self, name: str, inner: Tactic, goals: list[MGoal], text: str) -> list[MGoal]:
        if name == "try":
            try:
                return self._run(inner, goals, text)
            except TacticFailure:
                return goals
        if name == "repeat":
            for _ in range(64):
                try:
                    new = self._run(inner, goals, text)
                except TacticFailure:
                    break
                if new == goals:
                    break
                goals = new
            return goals
        if name in ("all_goals", "any_goals"):
            out: list[MGoal] = []
            progressed = False
            last: TacticFailure | None = None
            for g in goals:
                try:
                    out.extend(self._run(inner, [g], text))
                    progressed = True
                except TacticFailure as e:
                    if name == "all_goals":
                        raise
                    last = e
                    out.append(g)
            if not progressed and last is not None:
                raise last
            return out
        # `focus t` / `· t`: only the main goal is visible; `·` must close it.
        main, rest = self._main(goals)
        new = self._run(inner, [main], text)
        if new and name == "·":
            raise TacticFailure(f"unsolved goals\n{render_goals(to_goal(g) for g in new)}")
        return new + rest

    def _set_option(
        self, name: str, value: int | bool, inner: Tactic, goals: list[MGoal], text: str
    ) -> list[MGoal]:
        """``set_option name value in inner``: Lean sets the option for ``inner`` only.  The
        heartbeat count is not reset (Lean counts from the start of the command or request)."""
        if name == "maxHeartbeats":
            if isinstance(value, bool):
                raise TacticFailure("type mismatch at set_option, expected Nat")
            saved = self.max_heartbeats
            self.max_heartbeats = value * 1000
            try:
                return self._run(inner, goals, text)
            finally:
                self.max_heartbeats = saved
        if name in ("maxRecDepth", "pp.all", "pp.proofs"):  # accepted, no effect here
            return self._run(inner, goals, text)
        raise TacticFailure(f"unknown option '{name}'")

    def _sleep(self, ms: int) -> None:
        end = time.monotonic() + ms / 1000
        if self.deadline is not None and end > self.deadline:
            time.sleep(max(0.0, self.deadline - time.monotonic()))
            raise Interrupt()
        time.sleep(ms / 1000)

    def _atomic(self, tac: Tactic, goal: MGoal, text: str) -> list[MGoal]:
        self.tick(HEARTBEATS_PER_STEP)
        match tac:
            case Intro(names):
                return [self._intro(goal, list(names) or [None])]
            case Intros(names):
                return [self._intros(goal, list(names))]
            case Exact(term):
                return self._exact(goal, term, text)
            case Apply(term):
                return self._apply(goal, term, text)
            case Cases(term):
                return self._cases(goal, term, text)
            case Rcases(term, pattern):
                return self._rcases(goal, term, pattern, None, text)
            case Obtain(pattern, typ, term):
                return self._rcases(goal, term, pattern, typ, text)
            case Have(name, typ, term):
                return self._have(goal, name, typ, term, text)
            case Show(typ):
                e = Elab(self, goal, text)
                f = e.formula(typ)
                if not defeq(f, goal.target):
                    raise _fail(
                        f"type mismatch\n  {pp(f, e.names)}\nis not definitionally equal "
                        f"to the goal",
                        goal,
                    )
                return [MGoal(self.fresh(), goal.hyps, f, goal.tag)]
            case Specialize(term):
                return self._specialize(goal, term, text)
            case Simple(name):
                return self._simple(name, goal)
            case Unsupported(name):
                raise TacticFailure(
                    f"tactic '{name}' is not supported by burnqed's propositional REPL "
                    "(intuitionistic propositional logic only)"
                )
        raise TacticFailure(f"unsupported tactic {tac!r}")

    # -- intro --
    def _intro(self, goal: MGoal, names: list[str | None]) -> MGoal:
        hyps = list(goal.hyps)
        target = goal.target
        # ∀-binders renamed so far, substituted lazily in one traversal per formula.
        renamed: dict[int, Formula] = {}
        for name in names:
            t = unfold_not(target)
            inaccessible = name is None or name == "_"
            uid = self.fresh()
            if isinstance(t, Imp):
                nm = "a" if inaccessible else name
                hyps.append(Hyp(uid, nm, subst_many(t.left, renamed), inaccessible))  # type: ignore[arg-type]
                target = t.right
            elif isinstance(t, Forall):
                hyp = Hyp(uid, t.name if inaccessible else name, None, inaccessible)  # type: ignore[arg-type]
                hyps.append(hyp)
                renamed[t.uid] = Var(hyp.display, uid)
                target = t.body
            else:
                raise _fail("tactic 'introN' failed, insufficient number of binders", goal)
        return MGoal(self.fresh(), tuple(hyps), subst_many(target, renamed), goal.tag)

    def _intros(self, goal: MGoal, names: list[str]) -> MGoal:
        if names:
            return self._intro(goal, list(names))
        # `intros` introduces the syntactic binders only (no unfolding of ¬), inaccessibly.
        count, t = 0, goal.target
        while isinstance(t, Imp | Forall):
            count += 1
            t = t.right if isinstance(t, Imp) else t.body
        if count == 0:
            return goal
        return self._intro(goal, [None] * count)

    # -- exact / apply --
    def _exact(self, goal: MGoal, term: Term, text: str) -> list[MGoal]:
        e = Elab(self, goal, text)
        e.check(term, goal.target)
        if e.holes:
            raise TacticFailure(
                f"don't know how to synthesize placeholder\ncontext:\n{render(goal)}"
            )
        self._sorry |= e.used_sorry
        return []

    def _apply(self, goal: MGoal, term: Term, text: str) -> list[MGoal]:
        e = Elab(self, goal, text)
        bare = (
            isinstance(term, TIdent)
            and term.name not in e._hyps
            and not any(n == term.name for n, _ in e.locals)
        )
        if bare and term.name in FOREIGN:  # type: ignore[union-attr]
            raise self._foreign_apply_error(FOREIGN[term.name], goal)  # type: ignore[union-attr]
        c = self.constant(term.name) if bare else None  # type: ignore[union-attr]
        if c is not None:
            ftype, label, binder_names = c.type, f"@{c.name}", _const_binders(c)
        else:
            ftype, label = e.infer(term), e.src(term)
            binder_names = _applied_binders(term)
        target = goal.target
        n_args = _arity(e, ftype)
        start = max(0, n_args - pi_arity(target))
        for i in range(start, n_args + 1):
            saved = e.u.snapshot()
            premises, concl = self._telescope(e, ftype, i, binder_names)
            implicit_left = isinstance(concl, Forall) and concl.implicit
            if not implicit_left and e.u.unify(concl, target):
                return self._apply_goals(e, goal, premises, i)
            e.u.restore(saved)
        _, concl = self._telescope(e, ftype, start, binder_names)
        full = c.display if bare and term.name in CONSTANTS else e.pp(ftype)  # type: ignore[union-attr]
        note = f"\n\nNote: The full type of `{label}` is\n  {full}" if start > 0 else ""
        raise _fail(
            f"tactic 'apply' failed, could not unify the conclusion of `{label}`\n  {e.pp(concl)}\n"
            f"with the goal\n  {e.pp(target)}{note}",
            goal,
        )

    def _telescope(
        self, e: Elab, ftype: Formula, i: int, binder_names: list[str | None]
    ) -> tuple[list[tuple[Formula, str | None]], Formula]:
        """Instantiate the first ``i`` binders: the explicit premises (with binder names) and the
        remaining type (Lean's ``forallMetaTelescopeReducing eType i``)."""
        premises: list[tuple[Formula, str | None]] = []
        t = ftype
        k = 0
        for _ in range(i):
            t = e.u.resolve(t)
            if isinstance(t, Forall):
                t = subst(t.body, t.uid, MVar(t.name, next(e.mvar_ids)))
                continue
            t = unfold_not(t)
            assert isinstance(t, Imp)
            premises.append((t.left, binder_names[k] if k < len(binder_names) else None))
            k += 1
            t = t.right
        return premises, t

    def _apply_goals(
        self, e: Elab, goal: MGoal, premises: list[tuple[Formula, str | None]], n_new: int
    ) -> list[MGoal]:
        new: list[MGoal] = []
        for prem, bname in premises + [(h, None) for h in e.holes]:
            f = e.u.resolve(prem)
            if e.u.has_mvars(f):
                raise _fail(
                    "burnqed's propositional REPL cannot leave metavariables in goals: give the "
                    f"implicit arguments explicitly (new goal would be `{e.pp(f)}`)",
                    goal,
                )
            tag = goal.tag if n_new == 1 else _append_tag(goal.tag, bname)
            new.append(MGoal(self.fresh(), goal.hyps, f, tag))
        self._sorry |= e.used_sorry
        return new

    def _foreign_apply_error(self, c: ForeignConstant, goal: MGoal) -> TacticFailure:
        n_args = len(c.conclusions) - 1
        start = min(max(0, n_args - pi_arity(goal.target)), n_args)
        note = f"\n\nNote: The full type of `@{c.name}` is\n  {c.display}" if start > 0 else ""
        return _fail(
            f"tactic 'apply' failed, could not unify the conclusion of `@{c.name}`\n"
            f"  {c.conclusions[start]}\nwith the goal\n  {pp(goal.target, display_names(goal.hyps))}"
            f"{note}",
            goal,
        )

    # -- cases / rcases / obtain --
    def _value(
        self, goal: MGoal, term: Term, typ: Formula | None, text: str
    ) -> tuple[Formula, tuple[Hyp, ...]]:
        """The type of ``term`` and the context left after destructing it (a hypothesis is
        consumed, as `cases`/`rcases` clear it)."""
        e = Elab(self, goal, text)
        if typ is not None:
            f = e.formula(typ)
            e.check(term, f)
        else:
            f = e.u.resolve(e.infer(term))
        if e.u.has_mvars(f):
            raise TacticFailure(f"failed to infer the type of\n  {e.src(term)}")
        self._sorry |= e.used_sorry
        hyps = goal.hyps
        if isinstance(term, TIdent) and term.name in e._hyps:
            uid = e._hyps[term.name].uid
            hyps = tuple(h for h in hyps if h.uid != uid)
        return f, hyps

    def _cases(self, goal: MGoal, term: Term, text: str) -> list[MGoal]:
        f, hyps = self._value(goal, term, None, text)
        t = f
        if isinstance(t, And | Iff):
            names = ("left", "right") if isinstance(t, And) else ("mp", "mpr")
            parts = (
                (t.left, t.right)
                if isinstance(t, And)
                else (Imp(t.left, t.right), Imp(t.right, t.left))
            )
            new = hyps + tuple(
                Hyp(self.fresh(), n, p, True) for n, p in zip(names, parts, strict=True)
            )
            return [MGoal(self.fresh(), new, goal.target, _append_tag(goal.tag, "intro"))]
        if isinstance(t, Or):
            return [
                MGoal(
                    self.fresh(),
                    (*hyps, Hyp(self.fresh(), "h", side, True)),
                    goal.target,
                    _append_tag(goal.tag, ctor),
                )
                for side, ctor in ((t.left, "inl"), (t.right, "inr"))
            ]
        if t == FALSE:
            return []
        if t == TRUE:
            return [MGoal(self.fresh(), hyps, goal.target, _append_tag(goal.tag, "intro"))]
        raise _fail(
            "tactic 'induction' failed, major premise type is not an inductive type \n  "
            f"{pp(t, display_names(goal.hyps))}",
            goal,
        )

    def _rcases(
        self, goal: MGoal, term: Term, pattern: Pattern, typ: Formula | None, text: str
    ) -> list[MGoal]:
        f, hyps = self._value(goal, term, typ, text)
        base = term.name if isinstance(term, TIdent) else "h"
        branches = self._destruct([(hyps, goal.tag)], f, pattern, base, goal)
        return [MGoal(self.fresh(), h, goal.target, tag) for h, tag in branches]

    def _destruct(
        self,
        branches: list[tuple[tuple[Hyp, ...], str | None]],
        t: Formula,
        pat: Pattern,
        base: str,
        goal: MGoal,
    ) -> list[tuple[tuple[Hyp, ...], str | None]]:
        if isinstance(pat, PAlts) and len(pat.alts) == 1:
            pat = pat.alts[0]
        if t == FALSE and not isinstance(pat, PName | PClear):
            return []  # destructing `False` closes the goal
        match pat:
            case PName(name):
                hyp = Hyp(0, base if name == "_" else name, t, name == "_")
                return [
                    ((*hs, Hyp(self.fresh(), hyp.name, t, hyp.inaccessible)), tag)
                    for hs, tag in branches
                ]
            case PClear():
                return branches
            case PAlts(alts):
                if not isinstance(t, Or):
                    return self._destruct(branches, t, alts[0], base, goal)
                rest = alts[1] if len(alts) == 2 else PAlts(alts[1:])
                out = []
                for hs, tag in branches:
                    out += self._destruct(
                        [(hs, _append_tag(tag, "inl"))], t.left, alts[0], "h", goal
                    )
                    out += self._destruct([(hs, _append_tag(tag, "inr"))], t.right, rest, "h", goal)
                return out
            case PTuple(items):
                if len(items) == 1:
                    return self._destruct(branches, t, items[0], base, goal)
                if isinstance(t, And | Iff):
                    if isinstance(t, And):
                        parts, names = (t.left, t.right), ("left", "right")
                    else:
                        parts = (Imp(t.left, t.right), Imp(t.right, t.left))
                        names = ("mp", "mpr")
                    if not items:
                        items = (PName("_"), PName("_"))
                    second = items[1] if len(items) == 2 else PTuple(items[1:])
                    tagged = [(hs, _append_tag(tag, "intro")) for hs, tag in branches]
                    out = self._destruct(tagged, parts[0], items[0], names[0], goal)
                    return self._destruct(out, parts[1], second, names[1], goal)
                if t == TRUE and not items:
                    return [(hs, _append_tag(tag, "intro")) for hs, tag in branches]
                if isinstance(t, Or):
                    return self._destruct(branches, t, PAlts(items), base, goal)
                raise _fail(
                    f"rcases: the pattern {_pattern_text(pat)} does not match the type\n  "
                    f"{pp(t, display_names(goal.hyps))}",
                    goal,
                )
        raise TacticFailure(f"unsupported rcases pattern {pat!r}")

    # -- have / specialize --
    def _have(
        self, goal: MGoal, name: str, typ: Formula | None, term: Term, text: str
    ) -> list[MGoal]:
        e = Elab(self, goal, text)
        if typ is not None:
            f = e.formula(typ)
            e.check(term, f)
        else:
            f = e.u.resolve(e.infer(term))
        if e.u.has_mvars(f) or e.holes:
            raise TacticFailure(
                f"don't know how to synthesize placeholder\ncontext:\n{render(goal)}"
            )
        self._sorry |= e.used_sorry
        return [
            MGoal(self.fresh(), (*goal.hyps, Hyp(self.fresh(), name, f)), goal.target, goal.tag)
        ]

    def _specialize(self, goal: MGoal, term: Term, text: str) -> list[MGoal]:
        head = term.fn if isinstance(term, TApp) else term
        e = Elab(self, goal, text)
        if not isinstance(head, TIdent) or head.name not in e._hyps:
            raise TacticFailure(
                "'specialize' requires a term of the form `h x_1 .. x_n` where `h` appears in the "
                "local context"
            )
        f = e.u.resolve(e.infer(term))
        if e.u.has_mvars(f):
            raise TacticFailure(f"failed to infer the type of\n  {e.src(term)}")
        self._sorry |= e.used_sorry
        old = e._hyps[head.name]
        hyps = (*tuple(h for h in goal.hyps if h.uid != old.uid), Hyp(self.fresh(), old.name, f))
        return [MGoal(self.fresh(), hyps, goal.target, goal.tag)]

    # -- argument-free tactics --
    def _simple(self, name: str, goal: MGoal) -> list[MGoal]:
        t = goal.target
        if name in ("sorry", "admit"):
            self._sorry = True
            return []
        if name == "assumption":
            if _find_assumption(goal) is None:
                raise _fail("tactic 'assumption' failed", goal)
            return []
        if name == "contradiction":
            if not _has_contradiction(goal):
                raise _fail("tactic 'contradiction' failed", goal)
            return []
        if name == "exfalso":
            return [MGoal(self.fresh(), goal.hyps, FALSE, goal.tag)]
        if name == "trivial":
            if not _trivial(goal, t):
                raise _fail("tactic 'assumption' failed", goal)
            return []
        if name == "decide":
            v = evaluate(t)
            if v is None:
                raise TacticFailure(
                    f"failed to synthesize\n  Decidable ({pp(t, display_names(goal.hyps))})"
                )
            if not v:
                raise TacticFailure(f"decide failed: proposition\n  {pp(t)}\nis false")
            return []
        if name == "rfl":
            if isinstance(t, Iff) and defeq(t.left, t.right):
                return []
            raise _fail(
                "The rfl tactic failed. Possible reasons:\n- The goal is not a reflexive "
                "relation (neither `=` nor a relation with a @[refl] lemma).\n- The arguments "
                "of the relation are not equal.\nTry using the reflexivity lemma for your "
                "relation explicitly, e.g. `exact Eq.refl _` or\n`exact HEq.rfl` etc.",
                goal,
            )
        if name == "constructor":
            if isinstance(t, And):
                return [
                    MGoal(self.fresh(), goal.hyps, t.left, _append_tag(goal.tag, "left")),
                    MGoal(self.fresh(), goal.hyps, t.right, _append_tag(goal.tag, "right")),
                ]
            if isinstance(t, Iff):
                return [
                    MGoal(
                        self.fresh(), goal.hyps, Imp(t.left, t.right), _append_tag(goal.tag, "mp")
                    ),
                    MGoal(
                        self.fresh(), goal.hyps, Imp(t.right, t.left), _append_tag(goal.tag, "mpr")
                    ),
                ]
            if t == TRUE:
                return []
            if isinstance(t, Or):  # `constructor` takes the first constructor that applies
                return [MGoal(self.fresh(), goal.hyps, t.left, _append_tag(goal.tag, "h"))]
            if t == FALSE:
                raise _fail("tactic 'constructor' failed, no applicable constructor found", goal)
            raise _fail("tactic 'constructor' failed, target is not an inductive datatype", goal)
        if name in ("left", "right"):
            if isinstance(t, Or):
                side = t.left if name == "left" else t.right
                return [MGoal(self.fresh(), goal.hyps, side, _append_tag(goal.tag, "h"))]
            if isinstance(t, And | Iff | Const):
                n = {And: 1, Iff: 1}.get(type(t), 1 if t == TRUE else 0)
                raise _fail(
                    f"tactic '{name}' failed, {name} tactic works for inductive types with exactly 2 "
                    f"constructors, but the goal has {n} constructor{'s' if n != 1 else ''}",
                    goal,
                )
            raise _fail(f"tactic '{name}' failed, target is not an inductive datatype", goal)
        if name.startswith("debug_"):
            if not self.debug:
                raise TacticFailure(f"unknown tactic '{name}' (set {DEBUG_ENV}=1 to enable it)")
            if name == "debug_hang":
                while True:  # ignores the REPL timeout: only the client's read timeout helps
                    time.sleep(3600)
            if name == "debug_garbage":
                raise DebugGarbage()
            if name == "debug_crash":
                os._exit(3)
        raise TacticFailure(f"unsupported tactic '{name}'")


def _arity(e: Elab, ftype: Formula) -> int:
    """Binders of a (possibly implicit-∀) type, through ¬, as `apply` counts them."""
    n, t = 0, e.u.resolve(ftype)
    while True:
        if isinstance(t, Forall):
            t = t.body
        else:
            t = unfold_not(t)
            if not isinstance(t, Imp):
                return n
            t = t.right
        n += 1


def _const_binders(c: Constant) -> list[str | None]:
    return list(c.explicit)


def _applied_binders(term: Term) -> list[str | None]:
    """Binder names of the arguments still missing from ``term`` (a constant partially applied)."""
    if isinstance(term, TApp) and isinstance(term.fn, TIdent) and term.fn.name in CONSTANTS:
        return list(CONSTANTS[term.fn.name].explicit[len(term.args) :])
    return []


def _find_assumption(goal: MGoal) -> Hyp | None:
    for h in reversed(goal.hyps):  # Lean tries the most recent hypothesis first
        if h.type is not None and defeq(h.type, goal.target):
            return h
    return None


def _has_contradiction(goal: MGoal) -> bool:
    props = [h.type for h in goal.hyps if h.type is not None]
    if any(p == FALSE for p in props):
        return True
    for p in props:
        q = unfold_not(p)
        if isinstance(q, Imp) and q.right == FALSE and any(defeq(q.left, r) for r in props):
            return True
        if isinstance(p, Not) and evaluate(p.arg) is True:  # `h : ¬True`
            return True
    return False


def _trivial(goal: MGoal, t: Formula) -> bool:
    """Lean's `trivial` macro: assumption, rfl, contradiction, decide, True.intro, And.intro <;> trivial."""
    if t == TRUE or evaluate(t) is True:
        return True
    if any(h.type is not None and defeq(h.type, t) for h in goal.hyps):
        return True
    if isinstance(t, Iff) and defeq(t.left, t.right):
        return True
    if _has_contradiction(goal):
        return True
    return isinstance(t, And) and _trivial(goal, t.left) and _trivial(goal, t.right)


def _pattern_text(p: Pattern) -> str:
    match p:
        case PName(n):
            return n
        case PClear():
            return "-"
        case PTuple(items):
            return "⟨" + ", ".join(_pattern_text(i) for i in items) + "⟩"
        case PAlts(alts):
            return " | ".join(_pattern_text(a) for a in alts)
    return "?"


__all__ = [
    "CONSTANTS",
    "DEBUG_ENV",
    "FOREIGN",
    "HEARTBEATS_PER_STEP",
    "DebugGarbage",
    "Engine",
    "HeartbeatLimit",
    "Hyp",
    "Interrupt",
    "MGoal",
    "TacticFailure",
    "display_names",
    "render",
    "to_goal",
]
