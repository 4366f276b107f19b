"""The Pantograph v0.3.4 protocol over the propositional engine: requests in, JSON replies out.

:class:`Repl` keeps what a Pantograph process keeps — proof states numbered from one counter,
options, the environment of theorems added by ``frontend.process`` — and answers one request line
with one compact JSON line, with Pantograph's keys, omissions, error kinds and texts
(``reference/pantograph.md`` §3–§7).  ``__main__`` runs it over stdin/stdout; the tracer calls
:meth:`Repl.handle_line` in-process, so both go through exactly the same code.

Example::

    >>> import json
    >>> repl = Repl()
    >>> repl.handle_line('goal.start {"expr": "∀ (p q: Prop), p ∨ q → q ∨ p"}')
    '{"root":"_uniq.1","stateId":0}'
    >>> json.loads(repl.handle_line('goal.tactic {"stateId": 0, "tactic": "intro x"}'))["goals"][0]["target"]
    {'pp': '∀ (q : Prop), x ∨ q → q ∨ x'}
    >>> repl.handle_line('goal.tactic {"stateId": 99, "tactic": "rfl"}')
    '{"desc":"Invalid state index 99","error":"index"}'
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from burnqed.proplogic.formula import And, Forall, Formula, Iff, Imp, Not, Or, Var, pp
from burnqed.proplogic.frontend import process_file
from burnqed.proplogic.state import ProofState, TheoremInfo, message
from burnqed.proplogic.syntax import (
    Exact,
    ParseError,
    UnknownIdentifier,
    parse_formula,
    parse_tactic,
    parse_term,
    resolve,
)
from burnqed.proplogic.tactics import (
    CONSTANTS,
    DebugGarbage,
    Engine,
    HeartbeatLimit,
    Hyp,
    Interrupt,
    MGoal,
    TacticFailure,
    to_goal,
)

# `logging` and `pickle` are imported where they are used (an internal error, goal.save/load): a
# search starts REPL processes again and again (a worker is recycled every few hundred requests),
# and their start-up is mostly imports.

VERSION = "0.3.4"  # the Pantograph version whose protocol this REPL speaks
SAVE_FORMAT = "burnqed-proplogic-goal-state/1"  # tag of goal.save files
GARBAGE_LINE = "debug_garbage: this line is deliberately not JSON"

DEFAULT_OPTIONS: dict[str, Any] = {
    "printJsonPretty": False,
    "printExprPretty": True,
    "printExprAST": False,
    "printDependentMVars": False,
    "noRepeat": False,
    "printAuxDecls": False,
    "printImplementationDetailHyps": False,
    "automaticMode": True,
    "timeout": 0,
}


# ---------------------------------------------------------------------------------------------
# Payload decoding with the messages of Lean's derived `FromJson`


class ProtocolError(Exception):
    """An ``{"error": kind, "desc": desc}`` reply."""

    def __init__(self, kind: str, desc: str):
        super().__init__(desc)
        self.kind = kind
        self.desc = desc


def _str(v: Any) -> str | None:
    return None if isinstance(v, str) else "String expected"


def _nat(v: Any) -> str | None:
    ok = isinstance(v, int) and not isinstance(v, bool) and v >= 0
    return None if ok else "Natural number expected"


def _bool(v: Any) -> str | None:
    return None if isinstance(v, bool) else "Bool expected"


def _array(elem: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    def check(v: Any) -> str | None:
        if not isinstance(v, list):
            return "array expected"
        for x in v:
            err = elem(x)
            if err:
                return err
        return None

    return check


def _any(v: Any) -> str | None:
    return None


# Protocol structures: (Lean structure name, fields in declaration order: (key, check, optional)).
_Spec = tuple[str, tuple[tuple[str, Callable[[Any], str | None], bool], ...]]
SPECS: dict[str, _Spec] = {
    "reset": ("Reset", ()),
    "stat": ("Stat", ()),
    "options.print": ("OptionsPrint", ()),
    "env.catalog": ("EnvCatalog", ()),
    "env.describe": ("EnvDescribe", ()),
    "options.set": (
        "OptionsSet",
        tuple((k, _nat if k == "timeout" else _bool, True) for k in DEFAULT_OPTIONS),
    ),
    "expr.echo": (
        "ExprEcho",
        (("expr", _str, False), ("type", _str, True), ("levels", _array(_str), True)),
    ),
    "env.inspect": (
        "EnvInspect",
        (
            ("name", _str, False),
            ("value", _bool, True),
            ("dependency", _bool, True),
            ("source", _bool, True),
        ),
    ),
    "goal.start": (
        "GoalStart",
        (("expr", _str, True), ("levels", _array(_str), True), ("copyFrom", _str, True)),
    ),
    "goal.tactic": (
        "GoalTactic",
        (
            ("stateId", _nat, False),
            ("goalId", _nat, True),
            ("autoResume", _bool, True),
            ("tactic", _str, True),
            ("mode", _str, True),
            ("expr", _str, True),
            ("have", _str, True),
            ("let", _str, True),
            ("draft", _str, True),
            ("binderName", _str, True),
        ),
    ),
    "goal.continue": (
        "GoalContinue",
        (("target", _nat, False), ("branch", _nat, True), ("goals", _array(_str), True)),
    ),
    "goal.delete": ("GoalDelete", (("stateIds", _array(_nat), False),)),
    "goal.print": (
        "GoalPrint",
        (
            ("stateId", _nat, False),
            ("rootExpr", _bool, True),
            ("parentExprs", _bool, True),
            ("goals", _bool, True),
            ("extraMVars", _array(_str), True),
        ),
    ),
    "goal.save": ("GoalSave", (("id", _nat, False), ("path", _str, False))),
    "goal.load": ("GoalLoad", (("path", _str, False),)),
    "frontend.process": (
        "FrontendProcess",
        (
            ("fileName", _str, True),
            ("file", _str, True),
            ("readHeader", _bool, False),
            ("inheritEnv", _bool, False),
            ("invocations", _any, True),
            ("sorrys", _bool, False),
            ("typeErrorsAsGoals", _bool, False),
            ("newConstants", _bool, False),
        ),
    ),
}
# Commands Pantograph has that this REPL does not implement (answered with an `operation` error
# rather than "Unknown command", which would suggest a typo).
UNSUPPORTED = frozenset(
    {
        "env.add",
        "env.save",
        "env.load",
        "env.module_read",
        "frontend.distil",
        "frontend.track",
        "frontend.refactor",
        "env.parse",
        "goal.subsume",
    }
)


def decode(cmd: str, payload: Any) -> dict[str, Any]:
    """Check ``payload`` as Lean's derived ``FromJson`` would; missing keys read as ``null``."""
    struct, fields = SPECS[cmd]
    if not fields:
        return {}
    if not isinstance(payload, dict):
        key = fields[0][0]
        raise ProtocolError(
            "command", f"Unable to parse json: Pantograph.Protocol.{struct}.{key}: object expected"
        )
    out: dict[str, Any] = {}
    for key, check, optional in fields:
        v = payload.get(key)
        if v is None:
            if optional:
                continue
            err = check(None)
        else:
            err = check(v)
        if err:
            raise ProtocolError(
                "command", f"Unable to parse json: Pantograph.Protocol.{struct}.{key}: {err}"
            )
        out[key] = v
    return out


# What `json.dumps(obj, ensure_ascii=False, separators=(",", ":"), sort_keys=True)` uses, made once
# rather than per reply, and without the check for circular references (a reply is a tree: the
# check only ever costs).
_COMPACT = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
)


def _json_parse_error(line: str, err: json.JSONDecodeError) -> str:
    """Lean's ``Json.parse`` failure text (``offset N: …``)."""
    offset = len(line[: err.pos].encode("utf-8"))
    what = "unexpected end of input" if err.pos >= len(line) else "unexpected input"
    return f"offset {offset}: {what}"


# ---------------------------------------------------------------------------------------------
# Proof states


class Repl:
    """One REPL process's worth of state; :meth:`handle_line` answers one request line."""

    def __init__(
        self,
        *,
        imports: Sequence[str] = (),
        lean_options: dict[str, str] | None = None,
        debug: bool | None = None,
    ):
        self.imports = tuple(imports)  # recorded, no effect: the propositional env is built in
        self.lean_options = dict(lean_options or {})
        # Lean's `maxHeartbeats` (default 200000, `--maxHeartbeats=N` on the command line), in raw
        # heartbeats: the limit of a goal.tactic request or a declaration unless set otherwise.
        self.max_heartbeats = int(self.lean_options.get("maxHeartbeats", 200000)) * 1000
        self._uniq = itertools.count(1)
        self.engine = Engine(self.fresh, debug=debug)
        self.states: dict[int, ProofState] = {}
        self.next_state_id = 0
        self.options = dict(DEFAULT_OPTIONS)
        self.env: dict[str, TheoremInfo] = {}
        self._goal_json: dict[int, dict[str, Any]] = {}  # cache: goals are immutable

    def fresh(self) -> int:
        return next(self._uniq)

    # -- the wire --
    def handle_line(self, line: str) -> str:
        """The reply line (without newline) to one request line (not blank)."""
        s = line.strip()
        try:
            if s.startswith("{"):
                try:
                    obj = json.loads(s)
                except json.JSONDecodeError as e:
                    raise ProtocolError("command", _json_parse_error(s, e)) from None
                if not isinstance(obj, dict) or not isinstance(obj.get("cmd"), str):
                    raise ProtocolError(
                        "command", "Pantograph.Protocol.Command.cmd: String expected"
                    )
                cmd, payload = obj["cmd"], obj.get("payload")
            else:
                cmd, _, rest = s.partition(" ")
                payload = None
                if rest.strip():
                    try:
                        payload = json.loads(rest)
                    except json.JSONDecodeError as e:
                        raise ProtocolError("command", _json_parse_error(rest, e)) from None
            reply = self.handle(cmd, payload)
        except ProtocolError as e:
            reply = {"desc": e.desc, "error": e.kind}
        except DebugGarbage:
            return GARBAGE_LINE
        except Exception as e:  # an exception inside a command: Pantograph's "main" error
            import logging

            logging.getLogger(__name__).exception("internal error on %r", s)
            reply = {"desc": f"{type(e).__name__}: {e}", "error": "main"}
        return self.dump(reply)

    def dump(self, obj: Any) -> str:
        if self.options["printJsonPretty"]:
            return json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True)
        return _COMPACT.encode(obj)

    def handle(self, cmd: str, payload: Any) -> dict[str, Any]:
        """Dispatch one decoded request; raise :class:`ProtocolError` for error replies."""
        if cmd in UNSUPPORTED:
            raise ProtocolError(
                "operation", f"{cmd} is not supported by burnqed's propositional REPL"
            )
        if cmd not in SPECS:
            raise ProtocolError("command", f"Unknown command {cmd}")
        args = decode(cmd, payload)
        handler = getattr(self, "cmd_" + cmd.replace(".", "_"))
        return handler(args)

    # -- simple commands --
    def cmd_reset(self, args: dict[str, Any]) -> dict[str, Any]:
        n = len(self.states)
        self.states.clear()
        self.next_state_id = 0
        return {"nGoals": n}

    def cmd_stat(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"nGoals": len(self.states)}

    def cmd_options_set(self, args: dict[str, Any]) -> dict[str, Any]:
        self.options.update(args)
        return {}

    def cmd_options_print(self, args: dict[str, Any]) -> dict[str, Any]:
        return dict(self.options)

    def cmd_env_catalog(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"symbols": sorted({*CONSTANTS, *self.env})}

    def cmd_env_describe(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"imports": list(self.imports), "modules": list(self.imports)}

    def cmd_env_inspect(self, args: dict[str, Any]) -> dict[str, Any]:
        name = args["name"]
        if name in self.env:
            return {"isUnsafe": False, "type": {"pp": pp(self.env[name].statement)}}
        if name in CONSTANTS:
            return {
                "isUnsafe": False,
                "module": "Init.Core",
                "type": {"pp": CONSTANTS[name].display},
            }
        raise ProtocolError("index", f"Symbol not found: {name}")

    def cmd_expr_echo(self, args: dict[str, Any]) -> dict[str, Any]:
        text = args["expr"]
        if text in CONSTANTS:
            return {"expr": {"pp": text}, "type": {"pp": CONSTANTS[text].display}}
        f = self._elab_formula(text)
        return {"expr": {"pp": pp(f)}, "type": {"pp": "Prop"}}

    def _elab_formula(self, text: str) -> Formula:
        try:
            return resolve(parse_formula(text), {})
        except ParseError as e:
            raise ProtocolError("parsing", str(e)) from None
        except UnknownIdentifier as e:
            raise ProtocolError("elab", str(e)) from None

    # -- goals --
    def goal_json(self, g: MGoal) -> dict[str, Any]:
        cached = self._goal_json.get(g.uid)
        if cached is not None:
            return cached
        goal = to_goal(g)
        pretty = self.options["printExprPretty"]
        out: dict[str, Any] = {
            "fragment": "tactic",
            "name": goal.name,
            "target": {"pp": goal.target} if pretty else {},
            "vars": [
                {
                    "isInaccessible": v.is_inaccessible,
                    "name": v.name,
                    "type": {"pp": v.type} if pretty else {},
                    "userName": v.user_name,
                }
                for v in goal.variables
            ],
        }
        if goal.case:
            out["userName"] = goal.case
        if len(self._goal_json) > 200_000:  # bound the cache in long-lived workers
            self._goal_json.clear()
        self._goal_json[g.uid] = out
        return out

    def add_state(self, state: ProofState) -> int:
        sid = self.next_state_id
        self.next_state_id += 1
        self.states[sid] = state
        return sid

    def _state(self, sid: int) -> ProofState:
        state = self.states.get(sid)
        if state is None:
            raise ProtocolError("index", f"Invalid state index {sid}")
        return state

    def cmd_goal_start(self, args: dict[str, Any]) -> dict[str, Any]:
        if ("expr" in args) == ("copyFrom" in args):
            raise ProtocolError("arguments", "Exactly one of {expr, copyFrom} must be supplied")
        if "copyFrom" in args:
            name = args["copyFrom"]
            if name in self.env:
                target = self.env[name].statement
            elif name in CONSTANTS:
                target = CONSTANTS[name].type
            else:
                raise ProtocolError("index", f"Symbol not found: {name}")
        else:
            target = self._elab_formula(args["expr"])
        goal = self.engine.start(target)
        sid = self.add_state(ProofState((goal,), (), goal.uid, False, None, self.env))
        return {"root": f"_uniq.{goal.uid}", "stateId": sid}

    def cmd_goal_delete(self, args: dict[str, Any]) -> dict[str, Any]:
        for sid in args["stateIds"]:
            self.states.pop(sid, None)
        return {}

    def cmd_goal_print(self, args: dict[str, Any]) -> dict[str, Any]:
        state = self._state(args["stateId"])
        open_goals = state.goals + state.dormant
        out: dict[str, Any] = {
            "extraMVars": [],
            "goals": [self.goal_json(g) for g in state.goals] if args.get("goals") else [],
            "rootHasMVar": bool(open_goals),
            "rootHasSorry": state.has_sorry,
            "rootHasUnsafe": False,
        }
        # burnqed does not build proof terms: the root is shown as its open goals (an approximation).
        root = " ".join(f"?m.{g.uid}" for g in open_goals) or "(proof)"
        if args.get("rootExpr"):
            out["root"] = {"pp": root}
        if args.get("parentExprs"):
            out["parentExprs"] = [{"pp": root}]
        return out

    def cmd_goal_continue(self, args: dict[str, Any]) -> dict[str, Any]:
        if ("branch" in args) == ("goals" in args):
            raise ProtocolError("arguments", "Exactly one of {branch, goals} must be supplied")
        target = self._state(args["target"])
        if "branch" in args:
            branch = self._state(args["branch"])
            if branch.goals:
                raise ProtocolError("structure", "Branch state has unresolved goals")
            goals, dormant = branch.dormant, ()
        else:
            wanted = set(args["goals"])
            resumed = tuple(g for g in target.dormant if f"_uniq.{g.uid}" in wanted)
            goals = target.goals + resumed
            dormant = tuple(g for g in target.dormant if g not in resumed)
        sid = self.add_state(
            ProofState(goals, dormant, target.root, target.has_sorry, args["target"], target.env)
        )
        return {"goals": [self.goal_json(g) for g in goals], "nextStateId": sid}

    def cmd_goal_tactic(self, args: dict[str, Any]) -> dict[str, Any]:
        kinds = [k for k in ("tactic", "mode", "expr", "have", "let", "draft") if k in args]
        if len(kinds) != 1:
            raise ProtocolError(
                "operation",
                "Exactly one of {tactic, mode, expr, have, let, draft} must be supplied",
            )
        sid = args["stateId"]
        state = self._state(sid)
        goals = list(state.goals)
        if "goalId" in args:
            gid = args["goalId"]
            if gid >= len(goals):
                raise ProtocolError("index", f"Invalid goal index {gid}")
            goals.insert(0, goals.pop(gid))
        elif not goals:
            raise ProtocolError("index", "No goals to be solved")
        automatic = self.options["automaticMode"] and args.get("autoResume", True)
        # Automatic mode (`.unfocus`/`.prefer`): the other goals stay; else they go dormant.
        focus, others = goals[:1], goals[1:]
        work = goals if automatic else focus
        kind = kinds[0]
        text = args[kind]
        try:
            if kind == "tactic":
                try:
                    tac = parse_tactic(text)
                except ParseError as e:
                    return {"hasSorry": False, "hasUnsafe": False, "parseError": str(e)}
            elif kind == "expr":
                try:
                    tac = Exact(parse_term(text))
                except ParseError as e:
                    return {"hasSorry": False, "hasUnsafe": False, "parseError": str(e)}
            elif kind == "have":
                try:
                    typ = parse_formula(text)
                except ParseError as e:
                    return {"hasSorry": False, "hasUnsafe": False, "parseError": str(e)}
                return self._have(sid, state, goals, args.get("binderName", "this"), typ, automatic)
            elif kind == "mode":
                if text not in ("tactic", "conv", "calc"):
                    raise ProtocolError("operation", f"Invalid mode {text}")
                if text != "tactic":
                    raise ProtocolError(
                        "operation",
                        f"the {text} fragment is not supported by burnqed's propositional REPL",
                    )
                return self._success(sid, state, list(work), [] if automatic else others, False)
            else:
                raise ProtocolError(
                    "operation",
                    f"goal.tactic with {kind} is not supported by burnqed's propositional REPL",
                )
            engine = self.engine
            engine.deadline = self._deadline()
            engine.infos.clear()
            # One request is one CoreM run: its heartbeats count from zero, under the process's
            # limit unless the tactic sets its own (`set_option maxHeartbeats N in …`).
            engine.heartbeats, engine.max_heartbeats = 0, self.max_heartbeats
            engine.env = state.env
            try:
                new_goals, used_sorry = engine.run(tac, work, text)
            finally:
                engine.deadline = None
        except (TacticFailure, HeartbeatLimit) as e:
            infos = [message(t, severity="information") for t in self.engine.infos]
            return {"hasSorry": False, "hasUnsafe": False, "messages": [*infos, message(str(e))]}
        except Interrupt:
            raise ProtocolError("internal", "interrupt") from None
        out = self._success(sid, state, new_goals, [] if automatic else others, used_sorry)
        out["messages"] = [message(t, severity="information") for t in self.engine.infos]
        return out

    def _have(
        self,
        sid: int,
        state: ProofState,
        goals: list[MGoal],
        name: str,
        typ: Formula,
        automatic: bool,
    ) -> dict[str, Any]:
        main = goals[0]
        try:
            scope = {h.name: _var(h) for h in main.hyps if h.type is None and not h.inaccessible}
            f = resolve(typ, scope)
        except UnknownIdentifier as e:
            return {"hasSorry": False, "hasUnsafe": False, "messages": [message(str(e))]}
        first = MGoal(self.fresh(), main.hyps, f, main.tag)
        cont = MGoal(self.fresh(), (*main.hyps, Hyp(self.fresh(), name, f)), main.target, main.tag)
        rest = goals[1:]
        return self._success(
            sid,
            state,
            [first, cont, *(rest if automatic else [])],
            [] if automatic else rest,
            False,
        )

    def _success(
        self,
        parent: int,
        state: ProofState,
        goals: list[MGoal],
        dormant: list[MGoal],
        used_sorry: bool,
    ) -> dict[str, Any]:
        new = ProofState(
            tuple(goals),
            state.dormant + tuple(dormant),
            state.root,
            state.has_sorry or used_sorry,
            parent,
            state.env,
        )
        nid = self.add_state(new)
        return {
            "goals": [self.goal_json(g) for g in goals],
            "hasSorry": used_sorry,
            "hasUnsafe": False,
            "messages": [],
            "nextStateId": nid,
        }

    def _deadline(self) -> float | None:
        ms = self.options["timeout"]
        return time.monotonic() + ms / 1000 if ms else None

    # -- goal.save / goal.load --
    def cmd_goal_save(self, args: dict[str, Any]) -> dict[str, Any]:
        """Write state ``id`` to ``path``, with the declarations of its environment.

        As Pantograph v0.3.4's ``goalStatePickle``, which pickles the state together with
        ``env.constants.map₂`` (the constants beyond the imports): here the state's goals and the
        theorems of its file.  The imports are not saved: the loading REPL must have the same.
        """
        state = self.states.get(args["id"])
        if state is None:
            raise ProtocolError("index", f"Invalid state index {args['id']}")
        import pickle

        data = pickle.dumps((SAVE_FORMAT, self.imports, state), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            with open(args["path"], "wb") as f:
                f.write(data)
        except OSError as e:
            raise ProtocolError("main", _io_error(e, args["path"])) from None
        return {}

    def cmd_goal_load(self, args: dict[str, Any]) -> dict[str, Any]:
        """Read a state written by ``goal.save`` into a new state id (Pantograph's
        ``goalStateUnpickle``: the saved declarations are replayed into this REPL's environment).

        Fails, as Lean's replay would, when this REPL was started with other imports (its
        environment lacks what the state refers to) or already declares one of the state's
        declarations differently.  Goal and hypothesis ids are renumbered in this process (Lean
        keeps them: its metavariable context travels with the state; here they key caches).
        """
        import pickle

        path = args["path"]
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise ProtocolError("main", _io_error(e, path)) from None
        try:
            fmt, imports, state = pickle.loads(raw)
            ok = fmt == SAVE_FORMAT and isinstance(state, ProofState)
        except Exception:
            ok = False
        if not ok:
            raise ProtocolError("main", f"failed to read file '{path}', invalid header")
        if tuple(imports) != self.imports:
            raise ProtocolError(
                "main",
                f"(kernel) unknown constant: the state was saved in a REPL importing "
                f"{list(imports)}; this one imports {list(self.imports)}",
            )
        for name, info in state.env.items():
            mine = self.env.get(name)
            if mine is not None and mine.statement != info.statement:
                raise ProtocolError("main", f"(kernel) constant has already been declared '{name}'")
        sid = self.add_state(_renumber(state, self.fresh, {**self.env, **state.env}))
        return {"id": sid}

    # -- frontend --
    def cmd_frontend_process(self, args: dict[str, Any]) -> dict[str, Any]:
        if ("file" in args) == ("fileName" in args):
            raise ProtocolError("arguments", "Exactly one of {fileName, file} must be supplied")
        if "file" in args:
            text, file_name = args["file"], "<anonymous>"
        else:
            file_name = args["fileName"]
            try:
                with open(file_name, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise ProtocolError("io", str(e)) from None
        self.engine.deadline = self._deadline()
        try:
            units = process_file(
                self,
                text,
                file_name=file_name,
                read_header=args["readHeader"],
                inherit_env=args["inheritEnv"],
                sorrys=args["sorrys"],
                new_constants=args["newConstants"],
            )
        except Interrupt:
            raise ProtocolError("internal", "interrupt") from None
        finally:
            self.engine.deadline = None
        return {"units": units}


def _var(h: Hyp) -> Formula:
    return Var(h.display, h.uid)


def _io_error(e: OSError, path: str) -> str:
    """Lean's ``IO.Error`` text for a failed file operation."""
    what = (e.strerror or type(e).__name__).lower()
    return f"{what} (error code: {e.errno})\n  file: {path}"


def _renumber(
    state: ProofState, fresh: Callable[[], int], env: dict[str, TheoremInfo]
) -> ProofState:
    """``state`` with every goal, hypothesis and binder id replaced by a fresh one of this
    process (consistently: a variable keeps pointing at its hypothesis or binder)."""
    ids: dict[int, int] = {}
    goals: dict[int, MGoal] = {}

    def uid(u: int) -> int:
        if u not in ids:
            ids[u] = fresh()
        return ids[u]

    def formula(f: Formula) -> Formula:
        match f:
            case Var(name, u):
                return Var(name, uid(u))
            case Not(a):
                return Not(formula(a))
            case And(a, b):
                return And(formula(a), formula(b))
            case Or(a, b):
                return Or(formula(a), formula(b))
            case Imp(a, b):
                return Imp(formula(a), formula(b))
            case Iff(a, b):
                return Iff(formula(a), formula(b))
            case Forall(name, u, body, implicit):
                return Forall(name, uid(u), formula(body), implicit)
        return f  # Const, MVar

    def goal(g: MGoal) -> MGoal:
        if id(g) not in goals:
            hyps = tuple(
                Hyp(uid(h.uid), h.name, None if h.type is None else formula(h.type), h.inaccessible)
                for h in g.hyps
            )
            goals[id(g)] = MGoal(uid(g.uid), hyps, formula(g.target), g.tag)
        return goals[id(g)]

    return ProofState(
        tuple(goal(g) for g in state.goals),
        tuple(goal(g) for g in state.dormant),
        uid(state.root),
        state.has_sorry,
        None,
        env,
    )


__all__ = [
    "DEFAULT_OPTIONS",
    "GARBAGE_LINE",
    "VERSION",
    "ProofState",
    "ProtocolError",
    "Repl",
    "TheoremInfo",
    "decode",
    "message",
]
