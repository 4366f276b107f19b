"""A canonical form of a Lean goal, the same for a statement and for the proof state Lean prints.

Decontamination (:mod:`burnqed.data.decontam`) compares training states with benchmark statements
in this form, so a copy that differs only in *presentation* still matches.  Without Lean at hand
it is a textual form built on a small tokenizer of Lean's surface syntax (identifiers with
unicode, dots, subscripts, ``'``, ``✝``; numbers; operators; brackets; strings).  It makes equal:

- **comments and whitespace** — ``--`` line comments, ``/- -/`` block comments (nested) and
  docstrings ``/-- -/`` are dropped; tokens are joined by single spaces, so ``(h:p∧q)`` is
  ``( h : p ∧ q )``;
- **declaration dressing** — attributes ``@[simp]``, modifiers (``private``, ``protected``,
  ``noncomputable``, …), the keyword and the theorem's name; a preamble before the declaration
  (``import``, ``open``, definitions) is not part of the goal;
- **ASCII notation** — ``->`` ``<->`` ``<=`` ``>=`` ``!=`` ``=>`` ``λ`` are ``→ ↔ ≤ ≥ ≠ ↦ fun``;
- **leading binders and hypotheses** — ``theorem t (a : ℝ) (h : P) : Q``, ``theorem t : ∀ a : ℝ,
  P → Q`` and the state ``a : ℝ\\nh : P\\n⊢ Q`` are one *telescope*: the binders, then the goal.
  Leading ``∀`` binders with a type and the premises of top-level ``→`` become hypotheses (not
  an ``→`` after ``if``/``then``/``else``/``let``/``have``/``show``: it is inside that term);
  binder groups ``(a b : ℝ)`` are split; binder kinds (``( ) { } [ ] ⦃ ⦄``) do not count (the
  state does not show them);
- **names** — bound names inside terms (``∀ ∃ ∃! fun ∑ ∏ ⋃ ⋂ ⨆ ⨅ Π Σ ∫``) become ``#0, #1, …``
  in scope; hypothesis and variable names become ``v0, v1, …`` by first occurrence in the goal,
  then in the hypotheses (a global constant spelled that way is written ``«v0»``, its other Lean
  spelling, so it never meets the variable); a hypothesis nothing refers to is named ``_``;
- **binder order** — hypotheses are sorted by their (renamed) type where dependencies allow (a
  binder stays after every binder its type mentions), renaming and sorting repeated to a fixpoint;
- **redundant parentheses** — around an atom, around a whole type or goal, and where the
  precedence of the operators inside and around (a table of the common ones: ``→ ↔ ∧ ∨ ¬ = ≠ < ≤
  ∈ + - * / ^ …``) makes them redundant; around anything unknown they are kept.

What it does **not** catch (a match needs the same tokens after the steps above): definitional
unfolding and any change of the mathematics (``x ≠ 0`` vs ``¬ x = 0``, ``a > b`` vs ``b < a``,
``(2 : ℝ)`` vs ``2`` with an inferred type), re-formalisations, notation Lean prints differently
from how it is written (``|x|`` vs ``abs x``, ``↑n`` coercions, ``Finset.sum`` vs ``∑``), ``∀ x,``
binders without a type (the state shows the inferred type), binder predicates (``∀ x > 0,``),
set-builder and pattern binders (``{x | p x}``, ``fun ⟨a, b⟩ ↦``), a bound name shadowing a global
constant of the same name, names bound by ``let``/``have`` inside a goal (kept as written), a
``let`` written over two lines versus the ``;`` Lean prints, a ``let`` goal versus the
``x : T := v`` hypothesis ``intro`` makes of it, and several hypotheses symmetric up to a swap of
variables (the order is then the original one, so a renamed copy may be missed).  The statement
ends at the first top-level ``:=`` that no ``let``/``have`` before it claims.  Its errors are misses, not false
matches: every step maps a goal only to an α-equivalent one (up to the order of independent
hypotheses and ``intro``), so two goals with the same canonical form state the same thing.

Example::

    >>> a = canonical_statement("@[simp] private theorem t {x y : ℝ} (h₀ : x < y) : x + 1 < y + 1 := by")
    >>> b = canonical_goals("b : ℝ\\na : ℝ\\nhab : a < b\\n⊢ (a + 1) < b + 1")[0]
    >>> a == b == canonical_statement("lemma u : ∀ (p q : ℝ), p < q -> p + 1 < q + 1 := by simp")
    True
    >>> a
    'v0 : ℝ\\nv1 : ℝ\\n_ : v0 < v1\\n⊢ v0 + 1 < v1 + 1'
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from burnqed.theorems import Theorem

# --------------------------------------------------------------------------------------------
# Tokens

# Multi-character ASCII operators (maximal munch), then their unicode spelling where Lean has one.
_MULTI = sorted(
    ["<->", ":=", "::", "->", "<-", "<=", ">=", "!=", "==", "=>", "&&", "||", "++", "<|>",
     "<|", "|>.", "|>", "..", "...", "⁻¹", "@[", "{{", "}}", "<;>", "^^", "∃!", "⋃₀", "⋂₀"],
    key=len, reverse=True,
)  # fmt: skip
_ALIAS = {"Real.sqrt": "√", "->": "→", "<->": "↔", "<=": "≤", ">=": "≥", "!=": "≠", "=>": "↦", "λ": "fun",
          "forall": "∀", "exists": "∃", "{{": "⦃", "}}": "⦄"}  # fmt: skip
_SUBSCRIPT = re.compile(r"[\u2080-\u209c\u1d62-\u1d6a\u2071\u207f\u2090-\u209c]")
_NUMBER = re.compile(r"0[xX][0-9a-fA-F]+|0[bB][01]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
# Identifier characters after the first: letters, digits, subscripts, ' ! ? ✝ _
_ID_REST = re.compile(r"[\w'!?✝\u2080-\u209c\u1d62-\u1d6a\u2071\u207f]*")
_NOT_ID = set("λΠΣ")  # letters that are Lean syntax, not identifiers

OPEN = {"(": ")", "[": "]", "{": "}", "⦃": "⦄", "⟨": "⟩", "@[": "]"}
CLOSE = set(OPEN.values())
# Term-level binder notations: the names after them are bound up to `,` (`↦` for fun) and in scope
# to the end of the enclosing bracket.
BINDERS = {"∀", "∃", "∃!", "fun", "Π", "Σ", "∑", "∏", "⋃", "⋂", "⨆", "⨅", "∫", "Σ'"}
MODIFIERS = {"private", "protected", "noncomputable", "nonrec", "unsafe", "partial", "public"}
DECLS = {"theorem", "lemma", "example"}
KEYWORDS = {"in", "by", "at", "with", "if", "then", "else", "let", "have", "show", "from", "do",
            "match", "calc", "Type", "Sort", "Prop", *DECLS}  # fmt: skip


def _is_id_start(c: str) -> bool:
    return (c.isalpha() and c not in _NOT_ID) or c in "_«"


def strip_comments(text: str) -> str:
    """``text`` without ``--`` line comments and (nested) ``/- -/`` block comments / docstrings;
    string literals are kept whole."""
    out: list[str] = []
    i, n, depth = 0, len(text), 0
    while i < n:
        if depth:
            if text.startswith("/-", i):
                depth, i = depth + 1, i + 2
            elif text.startswith("-/", i):
                depth, i = depth - 1, i + 2
                if not depth:
                    out.append(" ")
            else:
                i += 1
        elif text.startswith("/-", i):
            depth, i = 1, i + 2
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def tokenize(text: str) -> list[str]:
    """Lean surface tokens of ``text`` (comments dropped, ASCII notation in its unicode form)."""
    text = strip_comments(text)
    toks: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            toks.append(text[i : j + 1])
            i = j + 1
            continue
        if c == "«":
            j = text.find("»", i)
            j = n - 1 if j < 0 else j
            toks.append(text[i : j + 1])
            i = j + 1
            continue
        if _is_id_start(c):
            j = i + 1 + len(_ID_REST.match(text, i + 1).group())
            # dotted names (`Nat.succ`, `h.1`, `h.mp`): one token
            while j + 1 < n and text[j] == "." and (text[j + 1].isalnum() or text[j + 1] == "_"):
                j += 1
                j += len(_ID_REST.match(text, j).group())
            toks.append(_ALIAS.get(text[i:j], text[i:j]))
            i = j
            continue
        if c.isdecimal():  # not `₀` (a digit to isdigit, not to `\d`): an operator's subscript
            m = _NUMBER.match(text, i)
            toks.append(m.group())
            i = m.end()
            continue
        op = next((o for o in _MULTI if text.startswith(o, i)), c)
        toks.append(_ALIAS.get(op, op))
        i += len(op)
    return toks


def _is_name(tok: str) -> bool:
    return (
        bool(tok)
        and (_is_id_start(tok[0]) or tok[0] == "#")
        and tok not in BINDERS
        and tok not in KEYWORDS
    )


def _close(toks: Sequence[str], i: int) -> int:
    """Index of the bracket closing ``toks[i]``; -1 when unbalanced."""
    stack = []
    for j in range(i, len(toks)):
        t = toks[j]
        if t in OPEN:
            stack.append(OPEN[t])
        elif t in CLOSE:
            if not stack or t != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return j
    return -1


def _top_level(toks: Sequence[str], targets: set[str], start: int = 0) -> int:
    """Index of the first token of ``targets`` outside brackets from ``start``; -1 if none."""
    depth = 0
    for j in range(start, len(toks)):
        t = toks[j]
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            depth -= 1
            if depth < 0:
                return -1
        elif depth == 0 and t in targets:
            return j
    return -1


# --------------------------------------------------------------------------------------------
# Bound names inside terms


def _rename_bound(toks: list[str], scopes: dict[str, str], counter: list[int]) -> list[str]:
    """``toks`` with every name bound by a term binder replaced by ``#k`` (k counts binders in
    order of appearance), in its scope: to the end of the bracket enclosing the binder."""
    out: list[str] = []
    i, n = 0, len(toks)
    while i < n:
        t = toks[i]
        if t in BINDERS:
            sep = _top_level(toks, {"↦"} if t == "fun" else {","}, i + 1)
            if sep < 0:
                out.append(t)
                i += 1
                continue
            end = _scope_end(toks, sep + 1)
            inner = dict(scopes)
            section = _bind_section(toks[i + 1 : sep], inner, counter)
            out += [t, *section, toks[sep]]
            out += _rename_bound(toks[sep + 1 : end], inner, counter)
            i = end
            continue
        out.append(_subst(t, scopes))
        i += 1
    return out


def _scope_end(toks: Sequence[str], start: int) -> int:
    """Index of the first unmatched closing bracket from ``start`` (or the end)."""
    depth = 0
    for j in range(start, len(toks)):
        if toks[j] in OPEN:
            depth += 1
        elif toks[j] in CLOSE:
            depth -= 1
            if depth < 0:
                return j
    return len(toks)


def _subst(tok: str, names: dict[str, str]) -> str:
    """``tok`` with its head (before the first dot: ``h.mp``, ``x.1``) renamed per ``names``."""
    head, dot, rest = tok.partition(".")
    new = names.get(head)
    return tok if new is None else new + dot + rest


def _bind_section(sec: list[str], scopes: dict[str, str], counter: list[int]) -> list[str]:
    """A binder section (``x y : T``, ``(x : T) (h : P x)``, ``i ∈ s``): its names bound in
    ``scopes`` (in place) as they appear, each typed name written ``( #k : T )`` (so ``∀ x y : T,``
    ≡ ``∀ (x : T) (y : T),``), ``in`` written ``∈`` (``∑ i in s`` ≡ ``∑ i ∈ s``)."""

    def bind(name: str) -> str:
        if name == "_":
            return name
        scopes[name] = f"#{counter[0]}"
        counter[0] += 1
        return scopes[name]

    out: list[str] = []
    i = 0
    lead = 0
    while lead < len(sec) and _is_name(sec[lead]):
        lead += 1
    if lead:
        names = sec[:lead]
        if lead < len(sec) and sec[lead] == ":":
            typ = _rename_bound(sec[lead + 1 :], dict(scopes), counter)
            for x in names:
                out += ["(", bind(x), ":", *typ, ")"]
            return out
        out = [bind(x) for x in names]  # a binder predicate (`x ∈ s`, `x > 0`) sees its names
        rest = ["∈" if k == lead and t == "in" else t for k, t in enumerate(sec) if k >= lead]
        return out + _rename_bound(rest, dict(scopes), counter)
    while i < len(sec):
        t = sec[i]
        close = _close(sec, i) if t in ("(", "{", "⦃", "[") else -1
        if close < 0:
            return out + _rename_bound(sec[i:], dict(scopes), counter)
        group = sec[i + 1 : close]
        colon = _top_level(group, {":"})
        names = group[:colon] if colon >= 0 else []
        if colon > 0 and all(_is_name(x) for x in names):
            typ = _rename_bound(group[colon + 1 :], dict(scopes), counter)
            for x in names:
                out += [t, bind(x), ":", *typ, sec[close]]
        else:
            out += [t, *_rename_bound(group, dict(scopes), counter), sec[close]]
        i = close + 1
    return out


# --------------------------------------------------------------------------------------------
# Redundant parentheses

# Binary operators: precedence and associativity (l, r, n: none), as Lean/Mathlib declare them.
_BINARY = {"→": (25, "r"), "↔": (20, "n"), "∨": (30, "r"), "∧": (35, "r"), "=": (50, "n"),
           "≠": (50, "n"), "<": (50, "n"), ">": (50, "n"), "≤": (50, "n"), "≥": (50, "n"),
           "∣": (50, "n"), "∈": (50, "n"), "∉": (50, "n"), "⊆": (50, "n"), "⊂": (50, "n"),
           "≡": (50, "n"), "+": (65, "l"), "-": (65, "l"), "*": (70, "l"), "/": (70, "l"),
           "%": (70, "l"), "∩": (70, "l"), "∪": (65, "l"), "^": (75, "r"), "•": (73, "r"),
           "∘": (90, "r"), "×": (35, "r")}  # fmt: skip
# Prefix operators: the precedence their argument is parsed at.
_PREFIX = {"¬": 40, "-": 75, "↑": 1024}
_POSTFIX = {"⁻¹", "!"}
_APP = 1024  # application binds tightest (left-associative)
_NONE = -1  # no operator on that side (start, end, comma, an opening bracket…)
_STOPS = {",", ":", ":=", "⊢", "↦"}


def _unary_at(toks: Sequence[str], i: int) -> bool:
    """Whether ``toks[i]`` (``-``, ``¬``, ``↑``) is a prefix operator there."""
    if toks[i] not in _PREFIX:
        return False
    if toks[i] != "-":
        return True
    return (
        i == 0
        or toks[i - 1] in OPEN
        or toks[i - 1] in _BINARY
        or toks[i - 1] in _PREFIX
        or (toks[i - 1] in _STOPS)
    )


def _inner_precedence(group: Sequence[str]) -> tuple[int, str] | None:
    """The loosest operator at the top level of ``group`` (precedence, associativity); None when
    the group holds something this table does not know (then its parentheses are kept)."""
    if len(group) == 1 and (_is_name(group[0]) or group[0][0].isdigit()):
        return (10**6, "n")  # an atom
    lowest: tuple[int, str] = (_APP, "l")
    depth = 0
    for j, t in enumerate(group):
        if t in OPEN:
            depth += 1
        elif t in CLOSE:
            depth -= 1
        elif depth:
            continue
        elif _unary_at(group, j):
            lowest = min(lowest, (_PREFIX[t], "n"))
        elif t in _BINARY:
            lowest = min(lowest, _BINARY[t])
        elif t in _POSTFIX or _is_name(t) or t[0].isdigit() or t[0] == '"':
            continue
        else:  # binders, `,`, `:`, `|`, unknown notation
            return None
    return lowest


def _left_binding(toks: Sequence[str], i: int) -> tuple[int, str] | None:
    """How the token before position ``i`` binds what follows it."""
    if i == 0:
        return (_NONE, "n")
    t = toks[i - 1]
    if t in OPEN or t in _STOPS:
        return (_NONE, "n")
    if _unary_at(toks, i - 1):
        return (_PREFIX[t], "n")
    if t in _BINARY:
        return _BINARY[t]
    if _is_name(t) or t[0].isdigit() or t in CLOSE or t in _POSTFIX:
        return (_APP, "l")
    return None


def _right_binding(toks: Sequence[str], j: int) -> tuple[int, str] | None:
    """How the token after position ``j`` binds what precedes it."""
    if j + 1 >= len(toks):
        return (_NONE, "n")
    t = toks[j + 1]
    if t in CLOSE or t in _STOPS:
        return (_NONE, "n")
    if t in _POSTFIX:
        return (_APP + 1, "n")
    if t in _BINARY:
        return _BINARY[t]
    if _is_name(t) or t[0].isdigit() or t in OPEN:
        return (_APP, "l")
    return None


def _redundant(toks: Sequence[str], i: int, j: int) -> bool:
    inner = _inner_precedence(toks[i + 1 : j])
    left, right = _left_binding(toks, i), _right_binding(toks, j)
    if inner is None or left is None or right is None:
        return False
    p, assoc = inner
    if p == 10**6:
        return True
    ok_left = p > left[0] or (p == left[0] and assoc == left[1] == "r")
    ok_right = p > right[0] or (p == right[0] and assoc == right[1] == "l")
    return ok_left and ok_right


def drop_parentheses(toks: list[str]) -> list[str]:
    """``toks`` without the parentheses :func:`_redundant` finds, innermost first, to a fixpoint."""
    while True:
        drop: set[int] = set()
        stack: list[int] = []
        for k, t in enumerate(toks):
            if t in OPEN:
                stack.append(k if t == "(" else -1)
            elif t in CLOSE and stack:
                i = stack.pop()
                if t == ")" and i >= 0 and _apart(drop, i) and _redundant(toks, i, k):
                    drop |= {i, k}
        if not drop:
            return toks
        toks = [t for k, t in enumerate(toks) if k not in drop]


def _apart(drop: set[int], i: int) -> bool:
    """One group per pass next to a dropped one: neighbours are judged on the text as it is."""
    return i - 1 not in drop and i + 1 not in drop


# --------------------------------------------------------------------------------------------
# Goals


# Terms that extend as far to the right as they can (``if c then a else b → s`` is
# ``if c then a else (b → s)``; a ``let``/``have`` body; ``show T from e``): an ``→`` after one of
# them belongs inside it, so it is not a premise of the goal.
_EXTENDING = {"if", "then", "else", "let", "have", "letI", "haveI", "show", "from", "match", "with",
              "do", "calc", ";"}  # fmt: skip


def _telescope(
    binders: list[tuple[str, list[str]]], target: list[str]
) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """Leading ``∀`` binders with types and ``→`` premises of ``target`` moved into ``binders``."""
    binders = list(binders)
    while target:
        target = _strip_outer(target)
        if target[0] in ("∀", "Π"):
            sep = _top_level(target, {","}, 1)
            section = _typed_section(target[1:sep]) if sep > 0 else None
            if section is None:
                break
            binders += section
            target = target[sep + 1 :]
            continue
        arrow = _top_level(target, {"→"})
        low = _top_level(target, {"↔", ",", ":", "$", "<|", "|>", "↦", *BINDERS, *_EXTENDING})
        if arrow <= 0 or (0 <= low < arrow) or _top_level(target, {"↔"}) >= 0:
            break
        binders.append(("_", _strip_outer(target[:arrow])))
        target = target[arrow + 1 :]
    return binders, target


def _strip_outer(toks: list[str]) -> list[str]:
    while len(toks) > 2 and toks[0] == "(" and _close(toks, 0) == len(toks) - 1:
        if _top_level(toks[1:-1], {",", ":"}) >= 0:
            break
        toks = toks[1:-1]
    return toks


def _typed_section(sec: list[str]) -> list[tuple[str, list[str]]] | None:
    """``x y : T`` or ``(x : T) {y : U}`` → binders; None for untyped or predicate binders."""
    if not sec:
        return None
    if sec[0] not in ("(", "{", "⦃", "["):
        colon = _top_level(sec, {":"})
        if colon <= 0 or not all(_is_name(x) for x in sec[:colon]):
            return None
        return [(x, sec[colon + 1 :]) for x in sec[:colon]]
    return _binder_groups(sec)


def _binder_groups(toks: list[str]) -> list[tuple[str, list[str]]] | None:
    """``(a b : ℝ) [Foo a] {h : P}`` → ``[(a, ℝ), (b, ℝ), (inst✝, Foo a), (h, P)]``."""
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(toks):
        if toks[i] not in ("(", "{", "⦃", "["):
            return None
        close = _close(toks, i)
        if close < 0:
            return None
        group = toks[i + 1 : close]
        colon = _top_level(group, {":"})
        if colon < 0:
            if toks[i] != "[":
                return None
            out.append(("inst✝", group))
        else:
            names = group[:colon]
            if not names or not all(_is_name(x) for x in names):
                return None
            out += [(x, group[colon + 1 :]) for x in names]
        i = close + 1
    return out


_RENAMED = re.compile(r"v\d+")  # how _canonical names variables and hypotheses


def _escape_globals(toks: list[str], local: set[str]) -> list[str]:
    """``toks`` with every name that is not ``local`` but looks like a renamed variable written in
    guillemets (``v0.succ`` → ``«v0».succ``)."""
    out = []
    for t in toks:
        head, dot, rest = t.partition(".")
        out.append(f"«{head}»{dot}{rest}" if head not in local and _RENAMED.fullmatch(head) else t)
    return out


def _canonical(binders: list[tuple[str, list[str]]], target: list[str]) -> str:
    """The canonical text of a telescope (module docstring): renamed, sorted, one line each."""
    binders, target = _telescope(binders, target)
    names = [n for n, _ in binders]
    local = set(names) - {"_"}
    # Bound names inside each type, then the variable names, by first occurrence; a global spelled
    # like a renamed variable (`v0`) is written `«v0»` (the same name in Lean), never confused
    # with the variable renamed `v0`.
    types = [_escape_globals(_rename_bound(_strip_outer(t), {}, [0]), local) for _, t in binders]
    target = _escape_globals(_rename_bound(target, {}, [0]), local)
    heads = [{t.partition(".")[0] for t in ty} for ty in types]
    deps = [{k for k in range(j) if names[k] in heads[j]} for j in range(len(binders))]

    def order(keys: list[tuple], own: dict[str, str]) -> list[int]:
        # Equal types are ordered by their own canonical name (`x y : ℝ` ≡ `y x : ℝ`).
        placed: list[int] = []
        left = set(range(len(binders)))
        while left:
            ready = [j for j in left if deps[j] <= set(placed)] or sorted(left)
            j = min(ready, key=lambda k: (keys[k], own.get(names[k], "~"), k))
            placed.append(j)
            left.discard(j)
        return placed

    def naming(seq: list[int]) -> dict[str, str]:
        found: dict[str, str] = {}
        for ty in [target, *(types[j] for j in seq)]:
            for t in ty:
                h = t.partition(".")[0]
                if h in local and h not in found:
                    found[h] = f"v{len(found)}"
        return found

    anonymous = {n: "_" for n in local}
    seq = order([tuple(_subst(t, anonymous) for t in ty) for ty in types], {})
    rename = naming(seq)
    for _ in range(4):  # sort by the renamed types, rename in that order, until nothing moves
        keys = [tuple(_subst(t, rename) for t in ty) for ty in types]
        new_seq = order(keys, rename)
        new_rename = naming(new_seq)
        if new_seq == seq and new_rename == rename:
            break
        seq, rename = new_seq, new_rename
    lines = []
    for j in seq:
        ty = drop_parentheses([_subst(t, rename) for t in types[j]])
        lines.append(f"{rename.get(names[j], '_')} : {' '.join(ty)}")
    goal = drop_parentheses([_subst(t, rename) for t in target])
    return "\n".join([*lines, "⊢ " + " ".join(goal)])


# Keywords whose term claims the next ``:=`` (``let x := v; body``): inside a statement's type that
# ``:=`` is the binding's, not the end of the statement.
_CLAIMS_ASSIGN = {"let", "have", "letI", "haveI"}


def _statement_end(toks: Sequence[str]) -> int:
    """Index of the top-level ``:=`` that ends a declaration's statement (the first one no earlier
    top-level ``let``/``have`` claims); -1 if none.

    >>> toks = tokenize("(x : ℕ) : let y := x + 1; y = y := rfl")
    >>> toks[_statement_end(toks) + 1]
    'rfl'
    """
    pending = 0
    start = 0
    while (j := _top_level(toks, {":=", *_CLAIMS_ASSIGN}, start)) >= 0:
        if toks[j] != ":=":
            pending += 1
        elif pending:
            pending -= 1
        else:
            return j
        start = j + 1
    return -1


def declaration_tokens(statement: str) -> list[str] | None:
    """The tokens of the first ``theorem``/``lemma``/``example`` in ``statement`` after its keyword
    and name (attributes, modifiers, docstrings and any preamble gone); None without one."""
    toks = tokenize(statement)
    k = next((i for i, t in enumerate(toks) if t in DECLS), None)
    if k is None:
        return None
    return toks[k + 1 :] if toks[k] == "example" else toks[k + 2 :]


def canonical_statement(statement: str) -> str | None:
    """The canonical goal of a ``theorem``/``lemma``/``example`` statement; None when it does not
    parse as binders, ``:`` and a type."""
    toks = declaration_tokens(statement)
    if toks is None:
        return None
    end = _statement_end(toks)
    toks = toks[:end] if end >= 0 else toks
    colon = _top_level(toks, {":"})
    if colon < 0:
        return None
    binders = _binder_groups(toks[:colon])
    if binders is None or colon + 1 >= len(toks):
        return None
    return _canonical(binders, toks[colon + 1 :])


def statement_text(statement: str) -> str | None:
    """The name-free token text of a statement (what matches when the goal does not parse)."""
    toks = declaration_tokens(statement)
    if toks is None:
        return None
    end = _statement_end(toks)
    return " ".join(toks[:end] if end >= 0 else toks)


def _goal(lines: list[str]) -> str | None:
    if lines and lines[0].startswith("case "):
        lines = lines[1:]
    hyps: list[list[str]] = []  # [names, type] — continuation lines extend the last entry
    target: list[str] | None = None
    for line in lines:
        if target is not None:
            target.append(line)
        elif line.startswith("⊢"):
            target = [line[1:]]
        elif hyps and (line[:1].isspace() or " : " not in line):
            hyps[-1][1] += " " + line
        elif " : " in line:
            names, typ = line.split(" : ", 1)
            hyps.append([names, typ])
    if target is None:
        return None
    binders = [(n, tokenize(t)) for names, t in hyps for n in names.split()]
    goal = tokenize(" ".join(target))
    return _canonical(binders, goal) if goal else None


def canonical_goals(state: str) -> list[str]:
    """The canonical form of every goal of a Lean-printed proof state (goals are separated by a
    blank line; a ``case`` tag is dropped); empty for ``no goals``."""
    goals = []
    for block in re.split(r"\n\s*\n", state.strip()):
        goal = _goal(block.split("\n"))
        if goal is not None:
            goals.append(goal)
    return goals


def statement_hash(canonical: str) -> str:
    """The hash of a canonical form (sha256, 16 hex digits: collisions are not a concern here)."""
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def theorem_keys(t: Theorem) -> set[str]:
    """Every hash under which ``t`` is known: its canonical goal, name-free statement, printed goal."""
    keys = set()
    text = statement_text(t.formal_statement)
    if text is not None:
        keys.add(statement_hash("stmt:" + text))
    canonical = canonical_statement(t.formal_statement)
    if canonical is not None:
        keys.add(statement_hash(canonical))
    if t.goal:
        keys |= {statement_hash(g) for g in canonical_goals(t.goal)[:1]}
    return keys


__all__ = [
    "canonical_goals",
    "canonical_statement",
    "declaration_tokens",
    "drop_parentheses",
    "statement_hash",
    "statement_text",
    "strip_comments",
    "theorem_keys",
    "tokenize",
]
