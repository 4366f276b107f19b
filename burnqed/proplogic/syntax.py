"""Surface syntax of the propositional REPL: tokens, formulas, proof terms, tactics, patterns.

Parsing is separate from elaboration, as in Lean: a tactic that does not parse is a ``parseError``
(``<Pantograph>:1:N: …``); an unknown name is an elaboration error reported as a message.  Free
names in formulas are therefore left unresolved (:data:`UNRESOLVED` uid) and bound to hypotheses
by :func:`resolve` at elaboration time; ``∀`` binders get fresh negative uids (the REPL numbers its
own fvars upward from 1, so the two never meet).

Example::

    >>> from burnqed.proplogic.formula import pp
    >>> f = parse_formula("∀ (p q: Prop), p ∨ q → q ∨ p")
    >>> pp(f)
    '∀ (p q : Prop), p ∨ q → q ∨ p'
    >>> parse_tactic("obtain ⟨hp, hq⟩ := h")
    Obtain(pattern=PTuple(items=(PName(name='hp'), PName(name='hq'))), type=None, term=TIdent(name='h', start=19, end=20))
    >>> parse_tactic("intro y )")
    Traceback (most recent call last):
    ...
    burnqed.proplogic.syntax.ParseError: <Pantograph>:1:8: unexpected token ')'; expected end of input
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, TypeVar, Union

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
    Var,
    shift_uids,
)

_T = TypeVar("_T")
UNRESOLVED = 0  # uid of a free name not yet bound to a hypothesis
_next_binder_uid = -1  # the uid the next `∀` binder gets (counting down, one counter per process)


def _binder_uid() -> int:
    global _next_binder_uid
    uid = _next_binder_uid
    _next_binder_uid -= 1
    return uid


class ParseError(ValueError):
    """Text that does not parse; ``str()`` is Lean's ``<file>:line:col: message`` form."""

    def __init__(self, message: str, offset: int, text: str, file_name: str = "<Pantograph>"):
        line = text.count("\n", 0, offset) + 1
        column = offset - (text.rfind("\n", 0, offset) + 1)
        super().__init__(f"{file_name}:{line}:{column}: {message}")
        self.message = message
        self.offset = offset
        self.file_name = file_name
        self.line = line
        self.column = column


# ---------------------------------------------------------------------------------------------
# Tokens

_SYMBOLS = (
    "<;>",
    "<->",
    ":=",
    "=>",
    "->",
    "/\\",
    "\\/",
    "?_",
    "<|",
    "↦",
    "→",
    "↔",
    "∧",
    "∨",
    "¬",
    "∀",
    "λ",
    "⟨",
    "⟩",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    ";",
    "|",
    "·",
    ".",
    "@",
    "-",
    "$",
    "=",
    "+",
    "*",
    "<",
    ">",
    "!",
    "#",
    "^",
)
_ASCII = {
    "->": "→",
    "<->": "↔",
    "/\\": "∧",
    "\\/": "∨",
    "=>": "=>",
    "↦": "=>",
    "λ": "fun",
    "<|": "$",
}
_ID = r"[^\W\dλ][\w'!?₀-₉ₐ-ₜ]*"
_PROJ = re.compile(r"\.(\d+|" + _ID + ")")
# One alternation per token kind, tried in this order at each position (one regex call per token).
_TOKEN = re.compile(
    r"(?P<space>(?:[ \t\r]+|--[^\n]*|/-(?:[^-]|-(?!/))*-/)+)"
    r"|(?P<nl>\n[ \t]*)"
    r"|(?P<ident>(?!λ)" + _ID + r"(?:\." + _ID + r")*)"
    r"|(?P<num>\d+)"
    r'|(?P<str>"(?:[^"\\\n]|\\.)*")'
    r"|(?P<sym>" + "|".join(re.escape(x) for x in _SYMBOLS) + ")"
)


class Token(NamedTuple):
    kind: str  # "ident" | "num" | "str" | "sym" | "proj" | "nl" | "eof"
    text: str  # normalised (ASCII spellings mapped to Lean's unicode ones)
    start: int
    end: int
    raw: str


def tokenize(text: str) -> list[Token]:
    """Tokens of ``text``; a newline not followed by indentation separates tactics (``nl``)."""
    out: list[Token] = []
    i, n = 0, len(text)
    match = _TOKEN.match
    while i < n:
        # `h.1`, `(h a).mp`: a dot glued to the previous token is a projection.
        if (
            text[i] == "."
            and out
            and out[-1].end == i
            and (out[-1].kind in ("ident", "proj") or out[-1].text in (")", "⟩"))
        ):
            m = _PROJ.match(text, i)
            if m:
                out.append(Token("proj", m.group(1), i, m.end(), m.group(0)))
                i = m.end()
                continue
        m = match(text, i)
        if m is None:
            raise ParseError(f"unexpected character '{text[i]}'", i, text)
        kind, raw, end = m.lastgroup, m.group(0), m.end()
        if kind == "space":
            pass
        elif kind == "nl":
            # A newline followed by indentation continues the tactic; at column 0 it separates.
            if end == i + 1 and out and out[-1].kind != "nl":
                out.append(Token("nl", "\n", i, end, "\n"))
        elif kind == "ident":
            out.append(Token("sym" if raw == "fun" else "ident", raw, i, end, raw))
        else:
            out.append(Token(kind, _ASCII.get(raw, raw), i, end, raw))  # type: ignore[arg-type]
        i = end
    while out and out[-1].kind == "nl":
        out.pop()
    out.append(Token("eof", "", n, n, ""))
    return out


# ---------------------------------------------------------------------------------------------
# Proof terms

# Syntax nodes are immutable by convention (the parse cache shares them), hashable and compared by
# value, like formulas (formula.py): not `frozen`, whose __init__ is slower and whose extra methods
# make the module slower to import, on every start of a REPL process.  Each has a docstring, else
# `dataclass` computes one from the signature, which costs more import time.
_node = dataclass(slots=True, eq=True, unsafe_hash=True)


@_node
class TIdent:
    """A name: a hypothesis, a ``fun`` binder, a constant (``And.intro``) or ``sorry``."""

    name: str
    start: int
    end: int


@_node
class TApp:
    """Application ``f a b``."""

    fn: Term
    args: tuple[Term, ...]
    start: int
    end: int


@_node
class TAnon:
    """Anonymous constructor ``⟨a, b⟩``."""

    items: tuple[Term, ...]
    start: int
    end: int


@_node
class TFun:
    """``fun x (y : A) => t``."""

    binders: tuple[tuple[str, Formula | None], ...]
    body: Term
    start: int
    end: int


@_node
class TProj:
    """``t.1``, ``t.mp``: generalised field notation."""

    term: Term
    field: str
    start: int
    end: int


@_node
class TTyped:
    """``(t : A)``."""

    term: Term
    type: Formula
    start: int
    end: int


@_node
class THole:
    """``_`` or ``?_``."""

    synthetic: bool
    start: int
    end: int


@_node
class TBy:
    """``by tac``: a nested tactic block as a term."""

    tactic: Tactic
    start: int
    end: int


Term = Union[TIdent, TApp, TAnon, TFun, TProj, TTyped, THole, TBy]  # noqa: UP007 (recursive alias)


# ---------------------------------------------------------------------------------------------
# rcases patterns


@_node
class PName:
    """A name pattern."""

    name: str  # "_" keeps the hypothesis under an inaccessible name


@_node
class PClear:
    """``-``: drop the hypothesis."""


@_node
class PTuple:
    """``⟨p, q, …⟩``."""

    items: tuple[Pattern, ...]


@_node
class PAlts:
    """``p | q | …``."""

    alts: tuple[Pattern, ...]


Pattern = Union[PName, PClear, PTuple, PAlts]  # noqa: UP007


# ---------------------------------------------------------------------------------------------
# Tactics


@_node
class Intro:
    """``intro x y``."""

    names: tuple[str, ...]  # empty: one binder under an inaccessible name


@_node
class Intros:
    """``intros x y``; ``intros`` alone introduces every syntactic binder."""

    names: tuple[str, ...]


@_node
class Exact:
    """``exact t``."""

    term: Term


@_node
class Apply:
    """``apply t``."""

    term: Term


@_node
class Cases:
    """``cases t``."""

    term: Term


@_node
class Rcases:
    """``rcases t with pat``."""

    term: Term
    pattern: Pattern


@_node
class Obtain:
    """``obtain pat : A := t``."""

    pattern: Pattern
    type: Formula | None
    term: Term


@_node
class Have:
    """``have h : A := t``."""

    name: str
    type: Formula | None
    term: Term


@_node
class Show:
    """``show A``."""

    type: Formula


@_node
class Specialize:
    """``specialize h a``."""

    term: Term


@_node
class Simple:
    """A tactic without arguments: constructor, left, right, assumption, exfalso, …"""

    name: str


@_node
class Sleep:
    """``sleep ms`` (Lean's): waits, honouring the REPL's ``timeout``."""

    ms: int


@_node
class SetOption:
    """``set_option name value in tacs``: Lean's tactic-level option scope (``maxHeartbeats``)."""

    name: str
    value: int | bool
    tactic: Tactic


@_node
class DebugHeartbeats:
    """``debug_heartbeats N`` (test-only): consumes exactly N heartbeats (Lean's raw units)."""

    n: int


@_node
class Trace:
    """``trace "msg"``: logs ``msg`` as an information message, like Lean's ``trace``."""

    text: str


@_node
class Unsupported:
    """A real Lean tactic outside the propositional fragment (fails at elaboration)."""

    name: str


@_node
class Seq:
    """Tactics one after another (``;`` or one per line)."""

    tactics: tuple[Tactic, ...]


@_node
class Then:
    """``t1 <;> t2``: t2 on every goal t1 produced."""

    first: Tactic
    then: Tactic


@_node
class Combinator:
    """``try t``, ``repeat t``, ``all_goals t``, ``any_goals t``, ``focus t``, ``· t`` (must close
    the main goal)."""

    name: str
    tactic: Tactic


@_node
class First:
    """``first | t1 | t2``."""

    alternatives: tuple[Tactic, ...]


Tactic = Union[  # noqa: UP007
    Intro,
    Intros,
    Exact,
    Apply,
    Cases,
    Rcases,
    Obtain,
    Have,
    Show,
    Specialize,
    Simple,
    Sleep,
    SetOption,
    DebugHeartbeats,
    Trace,
    Unsupported,
    Seq,
    Then,
    Combinator,
    First,
]

SIMPLE_TACTICS = frozenset(
    {
        "constructor",
        "left",
        "right",
        "assumption",
        "exfalso",
        "contradiction",
        "trivial",
        "sorry",
        "admit",
        "rfl",
        "skip",
        "done",
        "decide",
        # Test-only tactics, refused unless BURNQED_PROPLOGIC_DEBUG=1 (see repl.py).
        "debug_hang",
        "debug_garbage",
        "debug_crash",
    }
)
# Real Lean tactics the propositional fragment does not implement: they parse, then fail.
UNSUPPORTED_TACTICS = frozenset(
    {
        "simp",
        "simp_all",
        "simpa",
        "omega",
        "linarith",
        "nlinarith",
        "norm_num",
        "ring",
        "ring_nf",
        "field_simp",
        "aesop",
        "tauto",
        "itauto",
        "exact?",
        "apply?",
        "rw",
        "rwa",
        "erw",
        "unfold",
        "induction",
        "by_contra",
        "by_cases",
        "push_neg",
        "use",
        "exists",
        "refine",
        "refine'",
        "calc",
        "positivity",
        "norm_cast",
        "push_cast",
        "exact_mod_cast",
        "gcongr",
        "nlinarith!",
        "interval_cases",
        "fin_cases",
        "subst",
        "symm",
        "trans",
        "congr",
        "ext",
        "funext",
        "split",
        "split_ifs",
        "contrapose",
        "contrapose!",
        "absurd",
        "cases'",
        "rcases'",
        "set",
        "let",
        "generalize",
        "change",
        "clear",
        "revert",
        "rename_i",
        "next",
        "case",
        "conv",
        "nofun",
        "nomatch",
        "match",
        "fun_prop",
        "bound",
        "polyrith",
        "simp?",
        "exacts",
        "constructorm",
        "casesm",
        "rintro",
        "intro_v",
        "replace",
        "suffices",
        "show_term",
        "native_decide",
        "sorry?",
    }
)


# ---------------------------------------------------------------------------------------------
# Caches: a search sends the same tactic texts over and over (8 candidates per state, the same few
# tactics at every state) and starts each theorem several times (attempts, verification).
#
# Tokenising is a pure function of the text.  A parse is one of the text and the file name, but for
# the binder uids it draws (each ``∀`` parsed gets fresh ones): a parse draws them in a fixed order,
# so parsing the text again gives the same result with every drawn uid moved by the same amount.
# A cached formula or signature is therefore handed out with its uids shifted to freshly drawn ones
# (exactly what parsing again would give); a cached tactic or term only when it drew none (its
# formulas sit deep in the syntax tree).  A failure is kept as its ParseError's arguments and raised
# anew, after drawing what the failed parse drew.  The caches are cleared when full.

_CACHE_LIMIT = 32768
_TOKENS: dict[str, list[Token] | tuple[str, int]] = {}  # a failure is a tuple
# (kind, text, file name) -> (first uid drawn, how many, result or failure)
_PARSES: dict[tuple[str, str, str], tuple[int, int, object]] = {}


class _Failed:
    __slots__ = ("file_name", "message", "offset")

    def __init__(self, e: ParseError):
        self.message, self.offset, self.file_name = e.message, e.offset, e.file_name


def _tokens(text: str) -> list[Token]:
    """:func:`tokenize`, cached (the parser never changes the list)."""
    hit = _TOKENS.get(text)
    if hit is None:
        try:
            hit = tokenize(text)
        except ParseError as e:
            hit = (e.message, e.offset)
        if len(_TOKENS) >= _CACHE_LIMIT:
            _TOKENS.clear()
        _TOKENS[text] = hit
    if type(hit) is tuple:
        raise ParseError(hit[0], hit[1], text)
    return hit  # type: ignore[return-value]


def _cached_parse(
    kind: str,
    text: str,
    file_name: str,
    parse: Callable[[str, str], _T],
    shift: Callable[[_T, int, int, int], _T] | None = None,
) -> _T:
    """``parse(text, file_name)``; ``shift(result, lo, hi, by)`` moves the uids in ``lo..hi``."""
    global _next_binder_uid
    key = (kind, text, file_name)
    hit = _PARSES.get(key)
    if hit is not None:
        first, drawn, result = hit
        by = _next_binder_uid - first
        _next_binder_uid -= drawn
        if type(result) is _Failed:
            raise ParseError(result.message, result.offset, text, result.file_name)
        if drawn and shift is not None:
            return shift(result, first - drawn + 1, first, by)  # type: ignore[arg-type]
        return result  # type: ignore[return-value]
    first = _next_binder_uid
    try:
        result = parse(text, file_name)
    except ParseError as e:
        _remember(key, first, _Failed(e), shift is not None)
        raise
    _remember(key, first, result, shift is not None)
    return result


def _remember(key: tuple[str, str, str], first: int, result: object, shifts: bool) -> None:
    drawn = first - _next_binder_uid
    if drawn == 0 or shifts:
        if len(_PARSES) >= _CACHE_LIMIT:
            _PARSES.clear()
        _PARSES[key] = (first, drawn, result)


def _shift_signature(
    sig: tuple[Formula, tuple[str, ...]], lo: int, hi: int, by: int
) -> tuple[Formula, tuple[str, ...]]:
    return shift_uids(sig[0], lo, hi, by), sig[1]


# ---------------------------------------------------------------------------------------------
# Parser


class _Parser:
    def __init__(self, text: str, file_name: str = "<Pantograph>"):
        self.text = text
        self.file_name = file_name
        self.toks = _tokens(text)
        self.i = 0

    # -- helpers --
    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def at(self, text: str) -> bool:
        kind, t = self.toks[self.i][:2]
        return t == text and (kind == "sym" or kind == "ident")

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> Token:
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def error(self, expected: str) -> ParseError:
        t = self.tok
        if t.kind == "eof":
            msg = f"unexpected end of input; expected {expected}"
        elif t.kind == "ident":
            msg = f"unexpected identifier; expected {expected}"
        elif t.kind == "nl":
            msg = f"unexpected line break; expected {expected}"
        else:
            msg = f"unexpected token '{t.raw}'; expected {expected}"
        return ParseError(msg, t.start, self.text, self.file_name)

    def expect(self, text: str, expected: str | None = None) -> Token:
        if not self.at(text):
            raise self.error(expected or f"'{text}'")
        return self.advance()

    def ident(self, expected: str = "identifier") -> Token:
        if self.tok.kind != "ident":
            raise self.error(expected)
        return self.advance()

    def end(self) -> None:
        if self.tok.kind != "eof":
            raise self.error("end of input")

    # -- formulas --
    def formula(self, prec: int = 0) -> Formula:
        """Pratt parser over Lean's precedences (see formula.py)."""
        lhs, lhs_prec = self._formula_lead()
        while True:
            t = self.tok
            if t.kind != "sym":
                return lhs
            op = t.text
            if op == "∧" and prec <= 35 and lhs_prec >= 36:
                self.advance()
                lhs, lhs_prec = And(lhs, self.formula(35)), 35
            elif op == "∨" and prec <= 30 and lhs_prec >= 31:
                self.advance()
                lhs, lhs_prec = Or(lhs, self.formula(30)), 30
            elif op == "→" and prec <= 25:
                self.advance()
                lhs, lhs_prec = Imp(lhs, self.formula(25)), 25
            elif op == "↔" and prec <= 20 and lhs_prec >= 21:
                self.advance()
                lhs, lhs_prec = Iff(lhs, self.formula(21)), 20
            else:
                return lhs

    def _formula_lead(self) -> tuple[Formula, int]:
        t = self.tok
        if t.kind == "sym" and t.text == "¬":
            self.advance()
            return Not(self.formula(40)), 1024
        if t.kind == "sym" and t.text == "∀":
            self.advance()
            return self._forall(), 0
        if t.kind == "sym" and t.text == "(":
            self.advance()
            f = self.formula(0)
            self.expect(")")
            return f, 1024
        if t.kind == "ident":
            self.advance()
            if t.text == "True":
                return TRUE, 1024
            if t.text == "False":
                return FALSE, 1024
            return Var(t.text, UNRESOLVED), 1024
        raise self.error("term")

    def _forall(self) -> Formula:
        groups: list[tuple[list[str], Formula | None, bool]] = []
        while True:
            if self.at("(") or self.at("{"):
                close = ")" if self.advance().text == "(" else "}"
                names = [self.ident("identifier").text]
                while self.tok.kind == "ident":
                    names.append(self.advance().text)
                self.expect(":")
                groups.append((names, self._binder_type(), close == "}"))
                self.expect(close)
            elif self.tok.kind == "ident":
                names = [self.advance().text]
                while self.tok.kind == "ident":
                    names.append(self.advance().text)
                if self.at(":"):
                    self.advance()
                    groups.append((names, self._binder_type(), False))
                else:
                    # `∀ p, …`: Lean infers the binder's type; here only Prop makes sense.
                    groups.append((names, None, False))
            else:
                break
        if not groups:
            raise self.error("identifier or '('")
        self.expect(",")
        body = self.formula(0)
        for names, typ, implicit in reversed(groups):
            for name in reversed(names):
                if typ is None:  # a Prop binder
                    uid = _binder_uid()
                    body = Forall(name, uid, _bind_name(body, name, Var(name, uid)), implicit)
                else:  # `∀ (h : A), B` is `A → B` (B cannot mention a proof)
                    body = Imp(typ, body)
        return body

    def _binder_type(self) -> Formula | None:
        """A binder's type: None for ``Prop``, else a formula."""
        if self.at("Prop"):
            self.advance()
            return None
        return self.formula(0)

    # -- terms --
    def term(self) -> Term:
        t = self.tok
        if t.kind == "sym" and t.text == "fun":
            return self._fun()
        if t.kind == "ident" and t.text == "by":
            self.advance()
            while self.tok.kind == "nl":  # `by` followed by the block on the next lines
                self.advance()
            tac = self.tactic_seq()
            return TBy(tac, t.start, self.toks[self.i - 1].end)
        fn = self._arg()
        if fn is None:
            raise self.error("term")
        args: list[Term] = []
        while True:
            if self.at("fun"):
                args.append(self._fun())
                break
            if self.at("$"):
                self.advance()
                args.append(self.term())
                break
            a = self._arg()
            if a is None:
                break
            args.append(a)
        if not args:
            return fn
        return TApp(fn, tuple(args), _start(fn), _end(args[-1]))

    def _fun(self) -> Term:
        start = self.advance().start
        binders: list[tuple[str, Formula | None]] = []
        while not self.at("=>"):
            if self.at("("):
                self.advance()
                names = [self.ident().text]
                while self.tok.kind == "ident":
                    names.append(self.advance().text)
                typ: Formula | None = None
                if self.at(":"):
                    self.advance()
                    typ = self.formula(0)
                self.expect(")")
                binders.extend((n, typ) for n in names)
            elif self.tok.kind == "ident":
                binders.append((self.advance().text, None))
            else:
                raise self.error("'=>'")
        if not binders:
            raise self.error("identifier")
        self.advance()
        body = self.term()
        return TFun(tuple(binders), body, start, _end(body))

    def _arg(self) -> Term | None:
        t = self.tok
        base: Term
        if t.kind == "ident":
            if t.text in ("with", "at", "using", "by", "then", "else", "from"):
                return None
            self.advance()
            base = THole(False, t.start, t.end) if t.text == "_" else TIdent(t.text, t.start, t.end)
        elif t.kind == "sym" and t.text == "@":
            self.advance()
            nt = self.ident()
            base = TIdent(nt.text, t.start, nt.end)
        elif t.kind == "sym" and t.text == "?_":
            self.advance()
            base = THole(True, t.start, t.end)
        elif t.kind == "sym" and t.text == "(":
            self.advance()
            inner = self.term()
            if self.at(":"):
                self.advance()
                typ = self.formula(0)
                inner = TTyped(inner, typ, t.start, self.tok.end)
            close = self.expect(")")
            base = _respan(inner, t.start, close.end)
        elif t.kind == "sym" and t.text == "⟨":
            self.advance()
            items: list[Term] = []
            if not self.at("⟩"):
                items.append(self.term())
                while self.at(","):
                    self.advance()
                    items.append(self.term())
            close = self.expect("⟩", "',' or '⟩'")
            base = TAnon(tuple(items), t.start, close.end)
        else:
            return None
        while self.tok.kind == "proj":
            p = self.advance()
            base = TProj(base, p.text, _start(base), p.end)
        return base

    # -- patterns --
    def pattern(self) -> Pattern:
        alts = [self._pattern_one()]
        while self.at("|"):
            self.advance()
            alts.append(self._pattern_one())
        return alts[0] if len(alts) == 1 else PAlts(tuple(alts))

    def _pattern_one(self) -> Pattern:
        t = self.tok
        if t.kind == "ident":
            self.advance()
            return PName(t.text)
        if t.kind == "sym" and t.text == "-":
            self.advance()
            return PClear()
        if t.kind == "sym" and t.text == "⟨":
            self.advance()
            items: list[Pattern] = []
            if not self.at("⟩"):
                items.append(self.pattern())
                while self.at(","):
                    self.advance()
                    items.append(self.pattern())
            self.expect("⟩", "',' or '⟩'")
            return PTuple(tuple(items))
        if t.kind == "sym" and t.text == "(":
            self.advance()
            p = self.pattern()
            self.expect(")")
            return p
        raise self.error("rcases pattern")

    # -- tactics --
    def tactic_seq(self) -> Tactic:
        tacs = [self.tactic()]
        while self.tok.kind == "nl" or self.at(";"):
            self.advance()
            if self.tok.kind == "eof" or self.at(")"):
                break
            tacs.append(self.tactic())
        return tacs[0] if len(tacs) == 1 else Seq(tuple(tacs))

    def tactic(self) -> Tactic:
        tac = self._tactic_atom()
        while self.at("<;>"):
            self.advance()
            tac = Then(tac, self._tactic_atom())
        return tac

    def _tactic_atom(self) -> Tactic:
        t = self.tok
        if t.kind == "sym" and t.text == "(":
            self.advance()
            inner = self.tactic_seq()
            self.expect(")")
            return inner
        if t.kind == "sym" and t.text in ("·", "."):
            self.advance()
            return Combinator("·", self.tactic_seq())
        if t.kind != "ident":
            raise self.error("tactic")
        name = t.text
        self.advance()
        if name == "intro" or name == "intros":
            names: list[str] = []
            while self.tok.kind == "ident":
                names.append(self.advance().text)
            if self.at("⟨") or self.at("("):
                # `intro ⟨a, b⟩` parses in Lean but Pantograph's goal.tactic rejects it (PyPantograph
                # issue #82); keep it a failure, not a crash.
                p = self.pattern()
                return Unsupported(f"{name} with a pattern {p!r}")
            return Intro(tuple(names)) if name == "intro" else Intros(tuple(names))
        if name == "exact":
            return Exact(self.term())
        if name == "apply":
            return Apply(self.term())
        if name == "cases":
            term = self.term()
            if self.at("with"):
                raise self.error("end of input")  # structured `cases … with | …` spans lines
            return Cases(term)
        if name == "rcases":
            term = self.term()
            if self.at("with"):
                self.advance()
                return Rcases(term, self.pattern())
            return Rcases(term, PName("_"))
        if name == "obtain":
            pat = self.pattern()
            typ = None
            if self.at(":"):
                self.advance()
                typ = self.formula(0)
            self.expect(":=")
            return Obtain(pat, typ, self.term())
        if name == "have":
            hname = "this"
            if self.tok.kind == "ident" and self.peek().text in (":", ":="):
                hname = self.advance().text
            typ = None
            if self.at(":"):
                self.advance()
                typ = self.formula(0)
            self.expect(":=")
            return Have(hname, typ, self.term())
        if name == "show":
            return Show(self.formula(0))
        if name == "specialize":
            return Specialize(self.term())
        if name == "sleep":
            n = self.tok
            if n.kind != "num":
                raise self.error("numeral")
            self.advance()
            return Sleep(int(n.text))
        if name == "set_option":
            # `set_option opt val in tacticSeq`: the scope extends over the rest of the sequence.
            opt = self.tok
            if opt.kind != "ident":
                raise self.error("identifier")
            self.advance()
            v = self.tok
            if v.kind == "num":
                value: int | bool = int(v.text)
            elif v.kind == "ident" and v.text in ("true", "false"):
                value = v.text == "true"
            else:
                raise self.error("numeral")
            self.advance()
            if not self.at("in"):
                raise self.error("'in'")
            self.advance()
            while self.tok.kind == "nl":
                self.advance()
            return SetOption(opt.text, value, self.tactic_seq())
        if name == "debug_heartbeats":
            n = self.tok
            if n.kind != "num":
                raise self.error("numeral")
            self.advance()
            return DebugHeartbeats(int(n.text))
        if name == "trace":
            lit = self.tok
            if lit.kind != "str":
                raise self.error("string literal")
            self.advance()
            return Trace(json.loads(lit.text))  # Lean's escapes are JSON's for what we accept
        if name in ("try", "repeat", "all_goals", "any_goals", "focus"):
            return Combinator(name, self.tactic())
        if name == "first":
            alts: list[Tactic] = []
            while self.at("|"):
                self.advance()
                alts.append(self.tactic())
            if not alts:
                raise self.error("'|'")
            return First(tuple(alts))
        if name in SIMPLE_TACTICS and name not in UNSUPPORTED_TACTICS:
            return Simple(name)
        if name in UNSUPPORTED_TACTICS:
            # Consume the rest of this tactic: it parses in Lean, and fails at elaboration here.
            depth = 0
            while self.tok.kind != "eof":
                if depth == 0 and (
                    self.tok.kind == "nl" or self.at(";") or self.at("<;>") or self.at(")")
                ):
                    break
                if self.at("(") or self.at("⟨") or self.at("["):
                    depth += 1
                elif self.at(")") or self.at("⟩") or self.at("]"):
                    depth -= 1
                self.advance()
            return Unsupported(name)
        self.i -= 1
        raise ParseError("unknown tactic", t.start, self.text, self.file_name)


def _start(t: Term) -> int:
    return t.start


def _end(t: Term | list[Term]) -> int:
    return t.end  # type: ignore[union-attr]


def _respan(t: Term, start: int, end: int) -> Term:
    """``t`` with its source span widened to its enclosing parentheses."""
    fields = {f: getattr(t, f) for f in t.__slots__ if f not in ("start", "end")}
    return type(t)(**fields, start=start, end=end)


def _bind_name(f: Formula, name: str, by: Formula) -> Formula:
    """Replace unresolved ``name`` in ``f`` by ``by`` (stopping at binders that shadow it)."""
    match f:
        case Var(n, uid):
            return by if (n == name and uid == UNRESOLVED) else f
        case Const() | MVar():
            return f
        case Not(a):
            return Not(_bind_name(a, name, by))
        case And(a, b):
            return And(_bind_name(a, name, by), _bind_name(b, name, by))
        case Or(a, b):
            return Or(_bind_name(a, name, by), _bind_name(b, name, by))
        case Imp(a, b):
            return Imp(_bind_name(a, name, by), _bind_name(b, name, by))
        case Iff(a, b):
            return Iff(_bind_name(a, name, by), _bind_name(b, name, by))
        case Forall(n, uid, body, implicit):
            return f if n == name else Forall(n, uid, _bind_name(body, name, by), implicit)
    raise TypeError(f"not a formula: {f!r}")


class UnknownIdentifier(LookupError):
    def __init__(self, name: str):
        super().__init__(f"unknown identifier '{name}'")
        self.name = name


def resolve(f: Formula, scope: dict[str, Formula]) -> Formula:
    """Bind the unresolved names of a parsed formula to ``scope`` (hypotheses ``x : Prop``)."""
    match f:
        case Var(name, uid):
            if uid != UNRESOLVED:
                return f
            try:
                return scope[name]
            except KeyError:
                raise UnknownIdentifier(name) from None
        case Const() | MVar():
            return f
        case Not(a):
            a2 = resolve(a, scope)
            return f if a2 is a else Not(a2)
        case And(a, b) | Or(a, b) | Imp(a, b) | Iff(a, b):
            # `f` itself when nothing in it was unresolved (an equal copy would do, at a cost).
            a2, b2 = resolve(a, scope), resolve(b, scope)
            return f if a2 is a and b2 is b else type(f)(a2, b2)
        case Forall(name, uid, body, implicit):
            body2 = resolve(body, scope)
            return f if body2 is body else Forall(name, uid, body2, implicit)
    raise TypeError(f"not a formula: {f!r}")


def parse_formula(text: str, file_name: str = "<Pantograph>") -> Formula:
    """A whole formula (free names unresolved)."""
    return _cached_parse("formula", text, file_name, _parse_formula, shift_uids)


def _parse_formula(text: str, file_name: str) -> Formula:
    p = _Parser(text, file_name)
    f = p.formula(0)
    p.end()
    return f


def parse_tactic(text: str, file_name: str = "<Pantograph>") -> Tactic:
    """A tactic or tactic sequence (``t1; t2``, one per line, ``t1 <;> t2``)."""
    return _cached_parse("tactic", text, file_name, _parse_tactic)


def _parse_tactic(text: str, file_name: str) -> Tactic:
    p = _Parser(text, file_name)
    tac = p.tactic_seq()
    p.end()
    return tac


def parse_signature(text: str, file_name: str = "<anonymous>") -> tuple[Formula, tuple[str, ...]]:
    """A declaration signature ``(p q : Prop) (h : p) : q ∨ p``: the closed statement
    (``∀ (p q : Prop), p → q ∨ p``) and the binder names, in order (what ``intro`` will name)."""
    return _cached_parse("signature", text, file_name, _parse_signature, _shift_signature)


def _parse_signature(text: str, file_name: str) -> tuple[Formula, tuple[str, ...]]:
    p = _Parser(text, file_name)
    groups: list[tuple[list[str], Formula | None]] = []
    while p.at("(") or p.at("{"):
        close = ")" if p.advance().text == "(" else "}"
        names = [p.ident("identifier").text]
        while p.tok.kind == "ident":
            names.append(p.advance().text)
        p.expect(":")
        groups.append((names, p._binder_type()))
        p.expect(close)
    p.expect(":", "':'" if not groups else "'(' or ':'")
    body = p.formula(0)
    p.end()
    names_in_order = tuple(n for names, _ in groups for n in names)
    # Bind every Prop binder in one pass per formula: a binder's scope is what follows it.
    binders = [(n, typ) for names, typ in groups for n in names]
    scope: dict[str, Formula] = {}
    bound: list[tuple[str, int | None, Formula | None]] = []
    for name, typ in binders:
        if typ is None:
            uid = _binder_uid()
            bound.append((name, uid, None))
            scope[name] = Var(name, uid)
        else:
            bound.append((name, None, _bind_names(typ, dict(scope))))
    body = _bind_names(body, scope)
    for name, uid, typ in reversed(bound):
        body = Forall(name, uid, body) if uid is not None else Imp(typ, body)  # type: ignore[arg-type]
    return body, names_in_order


def _bind_names(f: Formula, scope: dict[str, Formula]) -> Formula:
    """Bind the unresolved names of ``f`` found in ``scope`` (leave the others unresolved)."""
    if not scope:
        return f
    match f:
        case Var(n, uid):
            return scope.get(n, f) if uid == UNRESOLVED else f
        case Const() | MVar():
            return f
        case Not(a):
            return Not(_bind_names(a, scope))
        case And(a, b):
            return And(_bind_names(a, scope), _bind_names(b, scope))
        case Or(a, b):
            return Or(_bind_names(a, scope), _bind_names(b, scope))
        case Imp(a, b):
            return Imp(_bind_names(a, scope), _bind_names(b, scope))
        case Iff(a, b):
            return Iff(_bind_names(a, scope), _bind_names(b, scope))
        case Forall(n, uid, body, implicit):
            inner = {k: v for k, v in scope.items() if k != n}
            return Forall(n, uid, _bind_names(body, inner), implicit)
    raise TypeError(f"not a formula: {f!r}")


def parse_term(text: str, file_name: str = "<Pantograph>") -> Term:
    """A proof term."""
    return _cached_parse("term", text, file_name, _parse_term)


def _parse_term(text: str, file_name: str) -> Term:
    p = _Parser(text, file_name)
    t = p.term()
    p.end()
    return t


__all__ = [
    "UNRESOLVED",
    "ParseError",
    "Pattern",
    "Tactic",
    "Term",
    "Token",
    "UnknownIdentifier",
    "parse_formula",
    "parse_signature",
    "parse_tactic",
    "parse_term",
    "resolve",
    "tokenize",
]
