"""``frontend.process`` for the propositional REPL: whole Lean files, command by command.

A file is split into commands the way Lean's frontend does (a command keyword at the start of a
line begins the next command; comments and blank lines belong to the command before them).  Each
command gives one unit ``{"boundary": [b0, b1], "messages": [...]}`` with UTF-8 *byte* offsets.
Declarations (``theorem``/``lemma``/``example``) are elaborated: the signature's binders become
hypotheses, a ``by`` block runs one tactic per line (more-indented lines continue a tactic; ``·``
focuses), and Lean's messages are produced — tactic errors at the tactic, ``unsolved goals`` at
``by``, the ``declaration uses 'sorry'`` warning (kind ``hasSorry``) at the name.  ``#print axioms``
answers ``'t' depends on axioms: [sorryAx]`` or ``'t' does not depend on any axioms``.  With
``sorrys: true`` each ``sorry`` tactic becomes a goal of a new proof state (``goalStateId``, ``goals``,
``goalSrcBoundaries``): this is how a search starts from a dataset theorem.

Example::

    >>> from burnqed.proplogic.repl import Repl
    >>> units = process_file(Repl(), "theorem t (p : Prop) : p → p := by\\n  intro h\\n  exact h\\n"
    ...                      "#print axioms t", file_name="<anonymous>", read_header=False,
    ...                      inherit_env=False, sorrys=False, new_constants=False)
    >>> [u["boundary"] for u in units], units[1]["messages"][0]["data"]
    ([[0, 57], [57, 72]], "'t' does not depend on any axioms")
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

from burnqed.proplogic.display import render_goals
from burnqed.proplogic.state import ProofState, TheoremInfo, message
from burnqed.proplogic.syntax import (
    ParseError,
    UnknownIdentifier,
    parse_signature,
    parse_tactic,
    parse_term,
    resolve,
)
from burnqed.proplogic.tactics import (
    CONSTANTS,
    Elab,
    HeartbeatLimit,
    MGoal,
    TacticFailure,
    to_goal,
)


class Repl(Protocol):
    """What ``frontend.process`` needs of the REPL (:class:`burnqed.proplogic.repl.Repl`): its
    environment, tactic engine and state table.  A protocol, so this module never imports the REPL
    (which imports this one)."""

    env: dict[str, TheoremInfo]
    engine: Any  # burnqed.proplogic.tactics.Engine
    max_heartbeats: int  # the process's maxHeartbeats in raw heartbeats (0: none)

    def add_state(self, state: ProofState) -> int: ...

    def goal_json(self, g: MGoal) -> dict[str, Any]: ...


_COMMAND = re.compile(
    r"(?:/--|@\[|theorem\b|lemma\b|example\b|def\b|abbrev\b|open\b|import\b|set_option\b|"
    r"#print\b|#check\b|#eval\b|namespace\b|section\b|end\b|variable\b|universe\b|noncomputable\b|"
    r"private\b|protected\b|axiom\b|instance\b)"
)
_DECL = re.compile(r"(?:(?:private|protected|noncomputable)\s+)*(theorem|lemma|example)\b")


@dataclass
class _Text:
    """The file with line/column and byte-offset lookups."""

    text: str

    def __post_init__(self) -> None:
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]

    def byte(self, i: int) -> int:
        """The UTF-8 byte offset of character offset ``i`` (Lean's boundaries are bytes)."""
        return i if self.text.isascii() else len(self.text[:i].encode("utf-8"))

    def pos(self, i: int) -> tuple[int, int]:
        """(line from 1, column in codepoints from 0) of character offset ``i``."""
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= i:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, i - self.line_starts[lo]


def split_commands(text: str) -> list[int]:
    """Character offsets where the commands of ``text`` start."""
    starts: list[int] = []
    in_comment = False
    doc_open = False  # a docstring began a command whose declaration line is still to come
    offset = 0
    for line in text.splitlines(keepends=True):
        line_start = offset
        offset += len(line)
        s = line.rstrip("\r\n")
        if in_comment:
            in_comment = "-/" not in s
            continue
        if not s.strip() or s.lstrip().startswith("--") or s[0].isspace():
            continue  # blank, comment, or an indented continuation of the current command
        if s.startswith("/--"):
            starts.append(line_start)
            doc_open = True
            in_comment = "-/" not in s[3:]
            continue
        if s.startswith("/-"):
            in_comment = "-/" not in s[2:]
            continue
        if _COMMAND.match(s):
            if doc_open:
                doc_open = False
                continue
            starts.append(line_start)
        elif not starts:
            starts.append(line_start)  # text before any command: Lean reports an error there
    return starts


def process_file(
    repl: Repl,
    text: str,
    *,
    file_name: str,
    read_header: bool,
    inherit_env: bool,
    sorrys: bool,
    new_constants: bool,
) -> list[dict[str, Any]]:
    """The ``units`` of ``frontend.process`` for ``text``."""
    src = _Text(text)
    starts = split_commands(text)
    env: dict[str, TheoremInfo] = dict(repl.env) if inherit_env else {}
    units: list[dict[str, Any]] = []
    proc = _Processor(repl, src, file_name, env, sorrys)
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(text)
        body = text[start:end]
        if read_header and body.startswith("import") and not units:
            continue  # the header: imports are given on the command line (no effect here)
        unit = proc.command(start, end, body)
        if not new_constants:
            unit.pop("newConstants", None)
        units.append(unit)
    if inherit_env:
        repl.env = env
    return units


class _Processor:
    def __init__(
        self, repl: Repl, src: _Text, file_name: str, env: dict[str, TheoremInfo], sorrys: bool
    ):
        self.repl = repl
        self.src = src
        self.file_name = file_name
        self.env = env
        self.sorrys = sorrys
        # `set_option maxHeartbeats N` in the file governs the declarations after it (per
        # declaration, as in Lean); a tactic's own `set_option … in` overrides it inside.
        self.max_heartbeats = repl.max_heartbeats

    def msg(
        self,
        data: str,
        start: int,
        end: int | None,
        severity: str = "error",
        kind: str = "[anonymous]",
    ) -> dict[str, Any]:
        return message(
            data,
            severity=severity,
            file_name=self.file_name,
            pos=self.src.pos(start),
            end_pos=None if end is None else self.src.pos(end),
            kind=kind,
        )

    def command(self, start: int, end: int, body: str) -> dict[str, Any]:
        unit: dict[str, Any] = {
            "boundary": [self.src.byte(start), self.src.byte(end)],
            "messages": [],
            "newConstants": [],
        }
        code = _strip_trailing_comments(body)
        m = re.match(r"/--.*?-/\s*", code, re.S)
        decl_at = m.end() if m else 0
        rest = code[decl_at:]
        d = _DECL.match(rest)
        if d:
            self.declaration(unit, start + decl_at, rest, d.group(1))
        elif rest.startswith("#print"):
            self.print_axioms(unit, start, rest)
        elif rest.startswith("import"):
            unit["messages"].append(
                self.msg(
                    "invalid 'import' command, it must be used in the beginning of the file",
                    start,
                    start + len("import"),
                )
            )
        elif m := re.match(r"set_option\s+maxHeartbeats\s+(\d+)\s*$", rest):
            self.max_heartbeats = int(m.group(1)) * 1000
        elif re.match(r"(open|set_option|namespace|section|end|universe|variable)\b", rest):
            pass  # scoping commands: nothing to elaborate in the propositional environment
        else:
            word = rest.split(None, 1)[0] if rest.strip() else ""
            unit["messages"].append(
                self.msg(
                    f"burnqed's propositional REPL does not support the command '{word}'"
                    if _COMMAND.match(rest)
                    else "unexpected identifier; expected command",
                    start,
                    start + len(word),
                )
            )
        return unit

    def print_axioms(self, unit: dict[str, Any], start: int, code: str) -> None:
        m = re.match(r"#print\s+axioms\s+(\S+)", code)
        if not m:
            unit["messages"].append(self.msg("unexpected token; expected 'axioms'", start, None))
            return
        name = m.group(1)
        if name in self.env:
            data = (
                f"'{name}' depends on axioms: [sorryAx]"
                if self.env[name].uses_sorry
                else f"'{name}' does not depend on any axioms"
            )
            unit["messages"].append(self.msg(data, start, start + m.end(), severity="information"))
        elif name in CONSTANTS:
            unit["messages"].append(
                self.msg(
                    f"'{name}' does not depend on any axioms",
                    start,
                    start + m.end(),
                    severity="information",
                )
            )
        else:
            unit["messages"].append(
                self.msg(f"unknown constant '{name}'", start + m.start(1), start + m.end(1))
            )

    def declaration(self, unit: dict[str, Any], start: int, code: str, keyword: str) -> None:
        msgs: list[dict[str, Any]] = unit["messages"]
        i = code.index(keyword) + len(keyword)
        name = None
        name_span = (start + code.index(keyword), start + i)
        if keyword != "example":
            m = re.compile(r"\s+([^\s(:{\[]+)").match(code, i)
            if not m:
                msgs.append(self.msg("unexpected token; expected identifier", start + i, None))
                return
            name = m.group(1)
            name_span = (start + m.start(1), start + m.end(1))
            i = m.end()
            if name in self.env or name in CONSTANTS:
                msgs.append(self.msg(f"'{name}' has already been declared", *name_span))
                return
        assign = code.find(":=", i)
        if assign < 0:
            msgs.append(self.msg("unexpected end of input; expected ':='", start + len(code), None))
            return
        try:
            statement, binders = parse_signature(code[i:assign], self.file_name)
            statement = resolve(statement, {})
        except ParseError as e:
            msgs.append(self.msg(e.message, start + i + e.offset, None))
            return
        except UnknownIdentifier as e:
            msgs.append(self.msg(str(e), start + i, start + assign))
            return
        engine = self.repl.engine
        # Each declaration is one command: Lean counts its heartbeats from zero, under the file's
        # limit, and its terms see the file's earlier declarations.
        engine.heartbeats, engine.max_heartbeats, engine.env = 0, self.max_heartbeats, self.env
        goal = engine.start(statement)
        if binders:
            goal = engine._intro(goal, list(binders))
        body_at = assign + 2
        while body_at < len(code) and code[body_at] in " \t\n\r":
            body_at += 1
        used_sorry, failed = False, False
        sorry_goals: list[tuple[MGoal, int, int]] = []
        if re.match(r"by\b", code[body_at:]):
            used_sorry, failed = self.tactic_block(msgs, start, code, body_at, goal, sorry_goals)
        else:
            used_sorry, failed = self.term_body(msgs, start, code, body_at, goal, sorry_goals)
        if used_sorry and not failed:
            msgs.append(
                self.msg(
                    "declaration uses 'sorry'", *name_span, severity="warning", kind="hasSorry"
                )
            )
        if self.sorrys and sorry_goals:
            goals = tuple(g for g, _, _ in sorry_goals)
            # The state's environment: the file's declarations before this one (a snapshot).
            sid = self.repl.add_state(ProofState(goals, (), goal.uid, False, None, dict(self.env)))
            unit["goalStateId"] = sid
            unit["goals"] = [self.repl.goal_json(g) for g in goals]
            unit["goalSrcBoundaries"] = [
                [self.src.byte(a), self.src.byte(b)] for _, a, b in sorry_goals
            ]
        if name is not None:
            self.env[name] = TheoremInfo(statement, used_sorry or failed)
            unit["newConstants"] = [name]

    def term_body(
        self,
        msgs: list[dict[str, Any]],
        start: int,
        code: str,
        at: int,
        goal: MGoal,
        sorry_goals: list[tuple[MGoal, int, int]],
    ) -> tuple[bool, bool]:
        text = code[at:].rstrip()
        if text == "sorry":
            sorry_goals.append((goal, start + at, start + at + 5))
            return True, False
        try:
            term = parse_term(text, self.file_name)
        except ParseError as e:
            msgs.append(self.msg(e.message, start + at + e.offset, None))
            return False, True
        e = Elab(self.repl.engine, goal, text)
        try:
            e.check(term, goal.target)
        except (TacticFailure, HeartbeatLimit) as err:
            msgs.append(self.msg(str(err), start + at, start + at + len(text)))
            return False, True
        return e.used_sorry, False

    def tactic_block(
        self,
        msgs: list[dict[str, Any]],
        start: int,
        code: str,
        at: int,
        goal: MGoal,
        sorry_goals: list[tuple[MGoal, int, int]],
    ) -> tuple[bool, bool]:
        """Run the ``by`` block at ``code[at:]``; (used sorry, failed)."""
        engine = self.repl.engine
        goals = [goal]
        used_sorry = False
        items = _tactic_items(code, at + 2)
        if not items:
            msgs.append(self.msg("unexpected end of input; expected '{'", start + at + 2, None))
            return False, True
        for offset, _col, text, norm in items:
            a = start + offset
            b = a + len(text)
            if norm.strip() == "sorry" and goals:
                sorry_goals.append((goals[0], a, b))
            engine.infos.clear()
            try:
                tac = parse_tactic(norm, self.file_name)
                goals, sorry = engine.run(tac, goals, norm)
            except ParseError as e:
                msgs.append(self.msg(e.message, a + _map_offset(text, norm, e.offset), None))
                return used_sorry, True
            except (TacticFailure, HeartbeatLimit) as e:
                msgs.append(self.msg(str(e), a, b))
                return used_sorry, True
            finally:  # Lean keeps what `trace` logged even when a later step fails
                msgs += [self.msg(t, a, b, severity="information") for t in engine.infos]
            used_sorry |= sorry
        if goals:
            end = start + items[-1][0] + len(items[-1][2])
            msgs.append(
                self.msg(
                    "unsolved goals\n" + render_goals(to_goal(g) for g in goals), start + at, end
                )
            )
            return used_sorry, True
        return used_sorry, False


def _strip_trailing_comments(body: str) -> str:
    """The command without the comments and blank lines that follow it."""
    lines = body.split("\n")
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith("--")):
        lines.pop()
    return "\n".join(lines)


def _tactic_items(code: str, at: int) -> list[tuple[int, int, str, str]]:
    """The tactics of a ``by`` block starting at ``code[at:]``: (offset, column, raw text,
    dedented text).  A tactic is a line at the block's column plus the more-indented lines under
    it; ``·`` bullets keep their block (dedented so each line parses as a tactic)."""
    items: list[tuple[int, int, list[str]]] = []
    block_col: int | None = None
    pos = at
    first = True
    for line in code[at:].split("\n"):
        line_offset = pos
        pos += len(line) + 1
        content = line.split("--", 1)[0].rstrip() if "--" in line else line.rstrip()
        if first:
            first = False
            if content.strip():
                col = len(content) - len(content.lstrip())
                items.append((line_offset + col, -1, [content.strip()]))
            continue
        if not content.strip():
            continue
        col = len(content) - len(content.lstrip())
        if block_col is None:
            block_col = col
        if col <= block_col or not items:
            items.append((line_offset + col, col, [content.strip()]))
        else:
            items[-1][2].append(content[block_col:] if len(content) > block_col else content)
    out = []
    for offset, col, lines in items:
        raw = "\n".join(lines)
        if len(lines) > 1 and lines[0].startswith(("·", ". ")):
            # `· tac\n  tac2`: the bullet's body lines align at column 2.
            body = [lines[0][1:].strip()] + [
                ln[2:] if ln.startswith("  ") else ln for ln in lines[1:]
            ]
            norm = "· (" + "\n".join(body) + ")"
        elif len(lines) > 1:
            norm = lines[0] + " " + " ".join(ln.strip() for ln in lines[1:])
        else:
            norm = raw
        out.append((offset, col, raw, norm))
    return out


def _map_offset(raw: str, norm: str, offset: int) -> int:
    return offset if raw == norm else min(offset, len(raw))


__all__ = ["process_file", "split_commands"]
