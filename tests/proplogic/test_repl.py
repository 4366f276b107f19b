"""The propositional REPL against Pantograph's protocol (reference/pantograph.md §3–§10).

The session test replays the integration-test session of §10.2/§10.3 line by line through the real
subprocess (``python -m burnqed.proplogic``) and compares parsed JSON, with only the
``_uniq.N`` numbers normalised.  The other tests drive :class:`Repl` in-process (same code path).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Any

import pytest

from burnqed.lean.goals import Goal, render_goals
from burnqed.proplogic.formula import And, Forall, Iff, Imp, Not, Or, Var, pp
from burnqed.proplogic.repl import Repl

UNIQ = re.compile(r"_uniq\.\d+")


def norm(obj: Any) -> Any:
    """``obj`` with every ``_uniq.N`` replaced by ``_uniq.N`` (ids differ between Lean versions)."""
    if isinstance(obj, str):
        return UNIQ.sub("_uniq.N", obj)
    if isinstance(obj, list):
        return [norm(x) for x in obj]
    if isinstance(obj, dict):
        return {k: norm(v) for k, v in obj.items()}
    return obj


def var(name: str, typ: str, inaccessible: bool = False) -> dict[str, Any]:
    return {
        "isInaccessible": inaccessible,
        "name": "_uniq.N",
        "type": {"pp": typ},
        "userName": name,
    }


def goal(target: str, vars_: list[dict[str, Any]], tag: str | None = None) -> dict[str, Any]:
    g: dict[str, Any] = {
        "fragment": "tactic",
        "name": "_uniq.N",
        "target": {"pp": target},
        "vars": vars_,
    }
    if tag:
        g["userName"] = tag
    return g


def tactic_ok(goals: list[dict[str, Any]], next_id: int, has_sorry: bool = False) -> dict[str, Any]:
    return {
        "goals": goals,
        "hasSorry": has_sorry,
        "hasUnsafe": False,
        "messages": [],
        "nextStateId": next_id,
    }


APPLY_ERROR = (
    "tactic 'apply' failed, could not unify the conclusion of `@Nat.le_of_succ_le`\n"
    "  ∀ {m : Nat}, Nat.succ ?n ≤ m → ?n ≤ m\nwith the goal\n  ∀ (q : Prop), x ∨ q → q ∨ x\n\n"
    "Note: The full type of `@Nat.le_of_succ_le` is\n  ∀ {n m : Nat}, n.succ ≤ m → n ≤ m\n"
    "x : Prop\n⊢ ∀ (q : Prop), x ∨ q → q ∨ x"
)
X, Y = var("x", "Prop"), var("y", "Prop")
P, Q = var("p", "Prop"), var("q", "Prop")

# (request line, expected reply) — reference §10.2 (Test/Integration.lean) and §10.3.
SESSION: list[tuple[str, Any]] = [
    ('goal.start {"expr": "∀ (p q: Prop), p ∨ q → q ∨ p"}', {"root": "_uniq.N", "stateId": 0}),
    (
        'goal.tactic {"stateId": 0, "tactic": "intro x"}',
        tactic_ok([goal("∀ (q : Prop), x ∨ q → q ∨ x", [X])], 1),
    ),
    (
        'goal.tactic {"stateId": 1, "tactic": "intro y"}',
        tactic_ok([goal("x ∨ y → y ∨ x", [X, Y])], 2),
    ),
    (
        'goal.tactic {"stateId": 1, "tactic": "apply Nat.le_of_succ_le"}',
        {
            "hasSorry": False,
            "hasUnsafe": False,
            "messages": [
                {
                    "caption": "",
                    "data": APPLY_ERROR,
                    "endPos": None,
                    "fileName": "<Pantograph>",
                    "isSilent": False,
                    "keepFullRange": False,
                    "kind": "[anonymous]",
                    "pos": {"column": 0, "line": 0},
                    "severity": "error",
                }
            ],
        },
    ),
    ('goal.tactic {"stateId": 0, "tactic": "sorry"}', tactic_ok([], 3, has_sorry=True)),
    (
        'goal.tactic {"stateId": 1, "tactic": "intro y )"}',
        {
            "hasSorry": False,
            "hasUnsafe": False,
            "parseError": "<Pantograph>:1:8: unexpected token ')'; expected end of input",
        },
    ),
    ('invalid {"name": "Nat.add_one"}', {"desc": "Unknown command invalid", "error": "command"}),
    (
        'expr.echo {"invalid": "Random garbage data"}',
        {
            "desc": "Unable to parse json: Pantograph.Protocol.ExprEcho.expr: String expected",
            "error": "command",
        },
    ),
    (
        'goal.start {"copyFrom": "no_such_thing"}',
        {"desc": "Symbol not found: no_such_thing", "error": "index"},
    ),
    (
        'goal.tactic {"stateId": 99, "tactic": "rfl"}',
        {"desc": "Invalid state index 99", "error": "index"},
    ),
    ('goal.delete {"stateIds": [0]}', {}),
    ("stat {}", {"nGoals": 3}),
    # test_automatic_mode: cases with `case inl`/`inr` and `h✝`, then apply Or.inr → [inl.h, inr].
    ("reset", {"nGoals": 3}),
    ('goal.start {"expr": "∀ (p q: Prop), p ∨ q → q ∨ p"}', {"root": "_uniq.N", "stateId": 0}),
    (
        'goal.tactic {"stateId": 0, "tactic": "intro p q h"}',
        tactic_ok([goal("q ∨ p", [P, Q, var("h", "p ∨ q")])], 1),
    ),
    (
        'goal.tactic {"stateId": 1, "tactic": "cases h"}',
        tactic_ok(
            [
                goal("q ∨ p", [P, Q, var("h✝", "p", True)], "inl"),
                goal("q ∨ p", [P, Q, var("h✝", "q", True)], "inr"),
            ],
            2,
        ),
    ),
    (
        'goal.tactic {"stateId": 2, "tactic": "apply Or.inr"}',
        tactic_ok(
            [
                goal("p", [P, Q, var("h✝", "p", True)], "inl.h"),
                goal("q ∨ p", [P, Q, var("h✝", "q", True)], "inr"),
            ],
            3,
        ),
    ),
    # test_tactic_timeout: the REPL-side timeout interrupts a long tactic and the REPL goes on.
    ('options.set {"timeout": 10}', {}),
    (
        'goal.tactic {"stateId": 0, "expr": "by\\nsleep 1000; simp"}',
        {"desc": "interrupt", "error": "internal"},
    ),
    ('options.set {"timeout": 0}', {}),
    (
        'goal.tactic {"stateId": 3, "tactic": "assumption"}',
        tactic_ok([goal("q ∨ p", [P, Q, var("h✝", "q", True)], "inr")], 4),
    ),
]


def _spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "burnqed.proplogic", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        env={**os.environ, **(env or {})},
    )


def test_integration_session_replays_line_by_line() -> None:
    proc = _spawn("Init")
    try:
        assert proc.stdout.readline() == "ready.\n"
        for request, expected in SESSION:
            proc.stdin.write(request + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            assert line.endswith("\n") and "\n" not in line[:-1], f"{request}: not one line"
            reply = json.loads(line)
            # Compact, sorted keys, raw UTF-8: byte-for-byte what Lean's Json.compress prints.
            assert line[:-1] == json.dumps(
                reply, ensure_ascii=False, separators=(",", ":"), sort_keys=True
            )
            assert norm(reply) == expected, request
        proc.stdin.write("\n")  # a blank line ends the REPL
        proc.stdin.flush()
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()


def test_the_same_goal_keeps_its_name_across_states() -> None:
    repl = Repl()
    call(repl, 'goal.start {"expr": "∀ (p q: Prop), p ∨ q → q ∨ p"}')
    call(repl, 'goal.tactic {"stateId": 0, "tactic": "intro p q h"}')
    after_cases = call(repl, 'goal.tactic {"stateId": 1, "tactic": "cases h"}')["goals"]
    after_apply = call(repl, 'goal.tactic {"stateId": 2, "tactic": "apply Or.inr"}')["goals"]
    assert after_apply[1] == after_cases[1]  # `inr` untouched: same mvar, same JSON
    assert after_apply[0]["name"] != after_cases[0]["name"]


def test_startup_is_fast_and_imports_nothing_heavy() -> None:
    t0 = time.monotonic()
    proc = _spawn()
    try:
        assert proc.stdout.readline() == "ready.\n"
        startup = time.monotonic() - t0
    finally:
        proc.kill()
    print(f"proplogic_repl_startup_s={startup:.3f}")
    assert startup < 2.0  # well under a second on an idle machine; loose for loaded CI
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import burnqed.proplogic.__main__"],
        capture_output=True,
        text=True,
        check=True,
    )
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in out.stderr.splitlines()
        if "|" in line
    }
    assert not imported & {"pyarrow", "torch", "transformers", "numpy", "pandas", "yaml"}


def test_version_and_eof() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "burnqed.proplogic", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout == "0.3.4\n"
    proc = _spawn("Init", "--pp.raw=true")
    out_text, _ = proc.communicate("stat\n", timeout=10)  # EOF after one request
    assert out_text == 'ready.\n{"nGoals":0}\n'
    assert proc.returncode == 0


def test_debug_tactics_need_the_environment_variable() -> None:
    repl = Repl(debug=False)
    call(repl, 'goal.start {"expr": "∀ (p : Prop), p → p"}')
    r = call(repl, 'goal.tactic {"stateId": 0, "tactic": "debug_crash"}')
    assert "BURNQED_PROPLOGIC_DEBUG" in r["messages"][0]["data"]

    proc = _spawn(env={"BURNQED_PROPLOGIC_DEBUG": "1"})
    try:
        assert proc.stdout.readline() == "ready.\n"
        proc.stdin.write(
            'goal.start {"expr": "∀ (p : Prop), p → p"}\n'
            'goal.tactic {"stateId": 0, "tactic": "debug_garbage"}\nstat\n'
            'goal.tactic {"stateId": 0, "tactic": "debug_crash"}\n'
        )
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["stateId"] == 0
        garbage = proc.stdout.readline()
        with pytest.raises(json.JSONDecodeError):
            json.loads(garbage)
        assert json.loads(proc.stdout.readline()) == {"nGoals": 1}  # still serving after garbage
        assert proc.stdout.readline() == ""  # debug_crash: EOF, no reply
        assert proc.wait(timeout=10) == 3
    finally:
        proc.kill()


# ---------------------------------------------------------------------------------------------
# In-process protocol details


def call(repl: Repl, line: str) -> dict[str, Any]:
    return json.loads(repl.handle_line(line))


def tac(repl: Repl, sid: int, tactic: str, **extra: Any) -> dict[str, Any]:
    return call(repl, "goal.tactic " + json.dumps({"stateId": sid, "tactic": tactic, **extra}))


def state(r: dict[str, Any]) -> str:
    assert "goals" in r, r
    return render_goals(Goal.from_json(g) for g in r["goals"])


def started(expr: str) -> Repl:
    repl = Repl()
    assert call(repl, "goal.start " + json.dumps({"expr": expr}))["stateId"] == 0
    return repl


def error_text(r: dict[str, Any]) -> str:
    assert "nextStateId" not in r and "goals" not in r, r
    return r["messages"][0]["data"]


def test_request_forms_and_protocol_errors() -> None:
    repl = Repl()
    assert call(repl, '{"cmd": "stat", "payload": {}}') == {"nGoals": 0}
    assert call(repl, "stat") == {"nGoals": 0}
    assert call(repl, "goal.start {oops")["error"] == "command"
    assert call(repl, '{"payload": {}}')["error"] == "command"
    assert call(repl, 'goal.start {"expr": "p ∧", "copyFrom": "x"}') == {
        "desc": "Exactly one of {expr, copyFrom} must be supplied",
        "error": "arguments",
    }
    assert call(repl, 'goal.start {"expr": "∀ (p : Prop), p → r"}') == {
        "desc": "unknown identifier 'r'",
        "error": "elab",
    }
    assert call(repl, 'frontend.process {"file": "", "sorrys": false}') == {
        "desc": "Unable to parse json: Pantograph.Protocol.FrontendProcess.readHeader: Bool expected",
        "error": "command",
    }
    assert call(repl, 'goal.delete {"stateIds": [-1]}')["desc"].endswith("Natural number expected")
    call(repl, 'goal.start {"expr": "∀ (p : Prop), p → p"}')
    assert call(repl, 'goal.tactic {"stateId": 0}')["error"] == "operation"
    assert call(repl, 'goal.tactic {"stateId": 0, "goalId": 3, "tactic": "intro"}') == {
        "desc": "Invalid goal index 3",
        "error": "index",
    }
    assert call(repl, "options.print")["automaticMode"] is True
    assert call(repl, 'env.inspect {"name": "Or.inl"}')["type"] == {
        "pp": "∀ {a b : Prop}, a → a ∨ b"
    }


def test_ids_failed_tactics_delete_and_reset() -> None:
    repl = started("∀ (p : Prop), p → p")
    assert tac(repl, 0, "exact foo")["messages"][0]["data"] == "unknown identifier 'foo'"
    assert tac(repl, 0, "intro p h")["nextStateId"] == 1  # the failure consumed no id
    assert call(repl, 'goal.delete {"stateIds": [0, 7]}') == {}
    assert tac(repl, 1, "exact h")["nextStateId"] == 2  # delete does not rewind the counter
    assert call(repl, 'goal.print {"stateId": 2}')["rootHasMVar"] is False
    assert call(repl, "stat") == {"nGoals": 2}
    assert call(repl, "reset") == {"nGoals": 2}
    assert call(repl, 'goal.start {"expr": "True"}')["stateId"] == 0


def test_goal_print_and_sorry_tracking() -> None:
    repl = started("∀ (p q : Prop), p ∧ q")
    r = tac(repl, 0, "intro p q")
    r = tac(repl, r["nextStateId"], "constructor")
    r = tac(repl, r["nextStateId"], "sorry")
    assert r["hasSorry"] is True and state(r) == "case right\np q : Prop\n⊢ q"
    printed = call(repl, 'goal.print {"stateId": 3, "goals": true, "rootExpr": true}')
    assert printed["rootHasSorry"] is True and printed["rootHasMVar"] is True
    assert len(printed["goals"]) == 1 and "root" in printed and "parentExprs" not in printed


def test_goal_id_prefers_a_goal_and_manual_mode_parks_the_others() -> None:
    repl = started("∀ (p q : Prop), p → q → p ∧ q")
    tac(repl, 0, "intro p q hp hq")
    tac(repl, 1, "constructor")
    r = tac(repl, 2, "exact hq", goalId=1)
    assert state(r) == "case left\np q : Prop\nhp : p\nhq : q\n⊢ p"
    call(repl, 'options.set {"automaticMode": false}')
    r = tac(repl, 2, "exact hp")
    assert r["goals"] == []  # `right` went dormant, so the list is empty …
    assert call(repl, f'goal.print {{"stateId": {r["nextStateId"]}}}')["rootHasMVar"] is True


# ---------------------------------------------------------------------------------------------
# Logic: printing and tactics


@pytest.mark.parametrize(
    ("formula", "text"),
    [
        (Imp(And(Var("p", 1), Var("q", 2)), And(Var("q", 2), Var("p", 1))), "p ∧ q → q ∧ p"),
        (Imp(Imp(Var("p", 1), Var("q", 2)), Var("p", 1)), "(p → q) → p"),
        (Or(Var("p", 1), Or(Var("q", 2), Var("r", 3))), "p ∨ q ∨ r"),
        (Or(Or(Var("p", 1), Var("q", 2)), Var("r", 3)), "(p ∨ q) ∨ r"),
        (Not(And(Var("p", 1), Var("q", 2))), "¬(p ∧ q)"),
        (And(Not(Var("p", 1)), Var("q", 2)), "¬p ∧ q"),
        (Iff(Imp(Var("p", 1), Var("q", 2)), Var("q", 2)), "p → q ↔ q"),
        (Imp(Var("p", 1), Iff(Var("q", 2), Var("p", 1))), "p → (q ↔ p)"),
        (Not(Forall("x", -1, Var("x", -1))), "¬∀ (x : Prop), x"),
        (Imp(Forall("x", -1, Var("x", -1)), Var("p", 1)), "(∀ (x : Prop), x) → p"),
    ],
)
def test_printing_follows_lean(formula: Any, text: str) -> None:
    assert pp(formula) == text


def test_parse_print_roundtrip() -> None:
    repl = Repl()
    for expr in [
        "∀ (p q r : Prop), (p → q) → (q → r) → p → r",
        "∀ (a b : Prop), ¬a ∨ b → a → b",
        "∀ (p q : Prop), (p ↔ q) ↔ (q ↔ p)",
        "True ∧ ¬False",
        "∀ (p : Prop), (¬∀ (x : Prop), x ∧ p) → p",
    ]:
        assert call(repl, "expr.echo " + json.dumps({"expr": expr}))["expr"]["pp"] == expr


def test_intro_names_like_lean() -> None:
    repl = started("∀ (p q : Prop), p → ¬q → p")
    assert state(tac(repl, 0, "intro")) == "p✝ : Prop\n⊢ ∀ (q : Prop), p✝ → ¬q → p✝"
    assert state(tac(repl, 0, "intro p q; intro")) == "p q : Prop\na✝ : p\n⊢ ¬q → p"
    assert state(tac(repl, 0, "intros")) == "p✝ q✝ : Prop\na✝¹ : p✝\na✝ : ¬q✝\n⊢ p✝"
    assert state(tac(repl, 0, "intro p p")) == "p✝ p : Prop\n⊢ p✝ → ¬p → p✝"  # shadowing
    repl = started("∀ (p q : Prop), p → ¬q")
    assert state(tac(repl, 0, "intro p q hp hq")) == "p q : Prop\nhp : p\nhq : q\n⊢ False"
    assert error_text(tac(repl, 0, "intro a b c d e")).startswith(
        "tactic 'introN' failed, insufficient number of binders"
    )


def test_exact_terms() -> None:
    repl = started("∀ (p q r : Prop), p ∧ q → (p ↔ r) → (q → False) ∨ r → r ∧ p")
    sid = tac(repl, 0, "intro p q r h hi hor")["nextStateId"]
    for good in ["exact ⟨h.1.elim_not_a_field, h.1⟩"]:
        assert "invalid field" in error_text(tac(repl, sid, good))
    for good in [
        "exact ⟨hi.mp h.1, h.1⟩",
        "exact ⟨hi.1 h.left, h.1⟩",
        "exact And.intro (hi.mp h.1) h.1",
        "exact ⟨(hi.mp (And.left h)), h.1⟩",
        "exact hor.elim (fun hn => absurd h.2 hn) (fun hr => ⟨hr, h.1⟩)",
    ]:
        r = tac(repl, sid, good)
        assert r.get("goals") == [], (good, r)
    assert error_text(tac(repl, sid, "exact h")) == (
        "type mismatch\n  h\nhas type\n  p ∧ q : Prop\nbut is expected to have type\n  r ∧ p : Prop"
    )
    assert error_text(tac(repl, sid, "exact ⟨h.1, h.1⟩")).startswith("type mismatch\n  h.1\n")
    assert error_text(tac(repl, sid, "exact And.intro h.2 h.1")).startswith(
        "application type mismatch\n  And.intro h.2\nargument\n  h.2\nhas type\n  q : Prop"
    )


def test_apply_constructor_left_right_tags() -> None:
    repl = started("∀ (p q : Prop), p → q → (p ∧ q) ∧ (q ∨ p)")
    sid = tac(repl, 0, "intro p q hp hq")["nextStateId"]
    r = tac(repl, sid, "apply And.intro")
    assert [g.get("userName") for g in r["goals"]] == ["left", "right"]
    r = tac(repl, r["nextStateId"], "constructor")
    assert [g.get("userName") for g in r["goals"]] == ["left.left", "left.right", "right"]
    r = tac(repl, sid, "constructor")
    r = tac(repl, r["nextStateId"], "exact ⟨hp, hq⟩")
    assert state(r) == "case right\np q : Prop\nhp : p\nhq : q\n⊢ q ∨ p"
    r2 = tac(repl, r["nextStateId"], "left")
    assert state(r2) == "case right.h\np q : Prop\nhp : p\nhq : q\n⊢ q"
    assert tac(repl, r["nextStateId"], "right; assumption")["goals"] == []
    err = error_text(tac(repl, r["nextStateId"], "apply Or.inl hp"))
    assert err.startswith("tactic 'apply' failed, could not unify the conclusion of `Or.inl hp`")
    err = error_text(tac(repl, sid, "apply hp"))
    assert err.startswith("tactic 'apply' failed, could not unify the conclusion of `hp`\n  p\n")
    assert error_text(tac(repl, sid, "left")).startswith("tactic 'left' failed")
    assert error_text(tac(repl, 0, "constructor")).startswith(
        "tactic 'constructor' failed, target is not an inductive datatype"
    )


def test_apply_hypotheses_leaves_premises_in_order() -> None:
    repl = started("∀ (p q r : Prop), (p → q → r) → p → q → r")
    sid = tac(repl, 0, "intro p q r f hp hq")["nextStateId"]
    r = tac(repl, sid, "apply f")
    assert [Goal.from_json(g).target for g in r["goals"]] == ["p", "q"]
    r = tac(repl, sid, "apply f hp")
    assert [Goal.from_json(g).target for g in r["goals"]] == ["q"]
    assert tac(repl, sid, "exact f hp hq")["goals"] == []


def test_cases_rcases_obtain() -> None:
    repl = started("∀ (p q r : Prop), p ∧ q ∨ r → (q → r) → r")
    sid = tac(repl, 0, "intro p q r h f")["nextStateId"]
    r = tac(repl, sid, "rcases h with ⟨hp, hq⟩ | hr")
    assert state(r) == (
        "case inl.intro\np q r : Prop\nf : q → r\nhp : p\nhq : q\n⊢ r\n\n"
        "case inr\np q r : Prop\nf : q → r\nhr : r\n⊢ r"
    )
    r = tac(repl, sid, "cases h")
    r = tac(repl, r["nextStateId"], "cases h✝")
    assert r.get("parseError", "").startswith("<Pantograph>:1:")  # `h✝` cannot be named
    r = tac(repl, sid, "obtain ⟨hp, hq⟩ | hr := h")
    r = tac(repl, r["nextStateId"], "exact f hq")
    assert state(r) == "case inr\np q r : Prop\nf : q → r\nhr : r\n⊢ r"
    repl2 = started("∀ (p q : Prop), p ∧ q → q")
    sid = tac(repl2, 0, "intro p q h")["nextStateId"]
    r = tac(repl2, sid, "cases h")
    assert state(r) == "case intro\np q : Prop\nleft✝ : p\nright✝ : q\n⊢ q"
    assert tac(repl2, r["nextStateId"], "assumption")["goals"] == []


def test_assumption_exfalso_contradiction_trivial() -> None:
    repl = started("∀ (p q : Prop), p → ¬p → q")
    sid = tac(repl, 0, "intro p q hp hn")["nextStateId"]
    assert error_text(tac(repl, sid, "assumption")) == (
        "tactic 'assumption' failed\np q : Prop\nhp : p\nhn : ¬p\n⊢ q"
    )
    r = tac(repl, sid, "exfalso")
    assert state(r).endswith("⊢ False")
    assert tac(repl, r["nextStateId"], "exact hn hp")["goals"] == []
    assert tac(repl, sid, "contradiction")["goals"] == []
    assert tac(repl, sid, "exact absurd hp hn")["goals"] == []
    repl2 = started("True ∧ (False → False)")
    r = tac(repl2, 0, "constructor")
    assert tac(repl2, r["nextStateId"], "trivial")["nextStateId"] == 2
    assert tac(repl2, 0, "decide")["goals"] == []


def test_parse_errors_and_unsupported_tactics() -> None:
    repl = started("∀ (p : Prop), p → p")
    assert tac(repl, 0, "exact (")["parseError"].startswith("<Pantograph>:1:7: unexpected end")
    assert tac(repl, 0, "frobnicate")["parseError"] == "<Pantograph>:1:0: unknown tactic"
    assert "not supported" in error_text(tac(repl, 0, "simp"))


# ---------------------------------------------------------------------------------------------
# frontend.process


def process(
    repl: Repl, text: str, *, sorrys: bool = False, inherit: bool = False
) -> list[dict[str, Any]]:
    payload = {
        "file": text,
        "readHeader": False,
        "inheritEnv": inherit,
        "sorrys": sorrys,
        "typeErrorsAsGoals": False,
        "newConstants": False,
    }
    return call(repl, "frontend.process " + json.dumps(payload))["units"]


def test_frontend_whole_proof_ok_has_no_axioms() -> None:
    text = (
        "theorem and_swap (p q : Prop) (h : p ∧ q) : q ∧ p := by\n  constructor\n"
        "  · exact h.2\n  · exact h.1\n\n#print axioms and_swap\n"
    )
    units = process(Repl(), text)
    assert [m["severity"] for m in units[0]["messages"]] == []
    assert units[1]["messages"][0]["data"] == "'and_swap' does not depend on any axioms"
    assert units[0]["boundary"][0] == 0 and units[1]["boundary"][1] == len(text.encode("utf-8"))
    assert units[0]["boundary"][1] == units[1]["boundary"][0] == text.index("#print") + 6


def test_frontend_sorry_gives_warning_axiom_and_goal_state() -> None:
    repl = Repl()
    text = "theorem t (p q : Prop) (hp : p) : p ∨ q := by\n  sorry\n#print axioms t"
    units = process(repl, text, sorrys=True)
    warning = units[0]["messages"][0]
    assert (warning["data"], warning["kind"], warning["severity"]) == (
        "declaration uses 'sorry'",
        "hasSorry",
        "warning",
    )
    assert (warning["pos"], warning["endPos"]) == (
        {"line": 1, "column": 8},
        {"line": 1, "column": 9},
    )
    assert units[1]["messages"][0]["data"] == "'t' depends on axioms: [sorryAx]"
    sid = units[0]["goalStateId"]
    assert state(units[0]) == "p q : Prop\nhp : p\n⊢ p ∨ q"
    start = len("theorem t (p q : Prop) (hp : p) : p ∨ q := by\n  ".encode())
    assert units[0]["goalSrcBoundaries"] == [[start, start + 5]]
    assert tac(repl, sid, "exact Or.inl hp")["goals"] == []


def test_frontend_unsolved_goals_and_tactic_errors() -> None:
    text = "example (p q : Prop) (hp : p) : p ∧ q := by\n  constructor\n  exact hp\n"
    (msg,) = process(Repl(), text)[0]["messages"]
    assert msg["severity"] == "error"
    assert msg["data"] == "unsolved goals\ncase right\np q : Prop\nhp : p\n⊢ q"
    assert msg["pos"] == {"line": 1, "column": text.index("by")}  # reported at `by`
    units = process(Repl(), "example (p : Prop) : p := by\n  intro h\n  exact h\n")
    (msg,) = units[0]["messages"]
    assert msg["data"].startswith("tactic 'introN' failed") and msg["pos"] == {
        "line": 2,
        "column": 2,
    }


def test_frontend_inherit_env_remembers_theorems() -> None:
    repl = Repl()
    process(repl, "theorem keep (p : Prop) : p → p := by\n  intro h\n  exact h\n", inherit=True)
    assert process(repl, "#print axioms keep", inherit=True)[0]["messages"][0]["data"] == (
        "'keep' does not depend on any axioms"
    )
    assert process(repl, "#print axioms keep")[0]["messages"][0]["data"] == (
        "unknown constant 'keep'"
    )  # without inheritEnv: a fresh environment
    process(repl, "theorem lost (p : Prop) : p → p := fun h => h\n")
    assert process(repl, "#print axioms lost", inherit=True)[0]["messages"][0]["data"] == (
        "unknown constant 'lost'"
    )
    assert call(repl, 'goal.start {"copyFrom": "keep"}')["stateId"] == 0


def test_trace_logs_an_information_message_like_lean() -> None:
    """`trace "…"` logs its text at the tactic and changes no goal: in a file (frontend.process)
    and on a proof state (goal.tactic), as Lean does."""
    from burnqed.proplogic.frontend import process_file
    from burnqed.proplogic.repl import Repl

    file = 'theorem t (p : Prop) : p → p := by\n  intro h\n  trace "hi \\"there\\""\n  exact h\n'
    (unit,) = process_file(
        Repl(), file, file_name="f", read_header=False, inherit_env=False, sorrys=False,
        new_constants=False,
    )  # fmt: skip
    assert [(m["severity"], m["data"], m["pos"]["line"]) for m in unit["messages"]] == [
        ("information", 'hi "there"', 3)
    ]
    repl = Repl()
    start = repl.handle("goal.start", {"expr": "∀ (p : Prop), p → p"})
    r = repl.handle("goal.tactic", {"stateId": start["stateId"], "tactic": 'trace "x"'})
    assert [m["data"] for m in r["messages"]] == ["x"] and len(r["goals"]) == 1


# ---------------------------------------------------------------------------------------------
# Heartbeats: the deterministic per-tactic limit (reference/pantograph.md §8)


def heartbeat_error(r: dict[str, Any], limit: int) -> bool:
    text = error_text(r)
    return text.startswith(
        f"(deterministic) timeout at `elaborator`, maximum number of heartbeats ({limit}) has "
        "been reached\nUse `set_option maxHeartbeats <num>` to set the limit."
    )


def test_set_option_max_heartbeats_in_limits_the_tactic_exactly() -> None:
    """Lean's semantics: `set_option maxHeartbeats N in t` allows N·1000 heartbeats, counted from
    the start of the request; 0 lifts the limit.  Each atomic step costs 1000 here."""
    repl = Repl(debug=True)
    call(repl, 'goal.start {"expr": "∀ (p q : Prop), p ∧ q → q ∧ p"}')
    assert "goals" in tac(repl, 0, "set_option maxHeartbeats 2 in debug_heartbeats 2000")
    assert heartbeat_error(tac(repl, 0, "set_option maxHeartbeats 2 in debug_heartbeats 2001"), 2)
    assert "goals" in tac(repl, 0, "set_option maxHeartbeats 0 in debug_heartbeats 9999999")
    # the scope is the rest of the tactic sequence, on the same line or the lines after `in`
    assert "goals" in tac(repl, 0, "set_option maxHeartbeats 2 in intro p q h; constructor")
    assert heartbeat_error(
        tac(repl, 0, "set_option maxHeartbeats 2 in\nintro p q h\nconstructor\nexact h.2"), 2
    )
    # the count runs from the start of the request, not from the `set_option`
    assert heartbeat_error(
        tac(repl, 0, "debug_heartbeats 1500; set_option maxHeartbeats 2 in intro p"), 2
    )
    # a runtime exception in Lean: `first` and `try` do not catch it
    assert heartbeat_error(
        tac(repl, 0, "set_option maxHeartbeats 1 in first | debug_heartbeats 5000 | skip"), 1
    )
    assert heartbeat_error(
        tac(repl, 0, "set_option maxHeartbeats 1 in try debug_heartbeats 5000"), 1
    )
    assert (
        error_text(tac(repl, 0, "set_option noSuchOption 1 in skip"))
        == "unknown option 'noSuchOption'"
    )
    assert tac(repl, 0, "set_option maxHeartbeats in skip")["parseError"]
    assert call(repl, "stat") == {"nGoals": 4}  # the root and three successes: failures take no id


def test_the_process_default_comes_from_the_command_line() -> None:
    tight = Repl(lean_options={"maxHeartbeats": "1"}, debug=True)
    call(tight, 'goal.start {"expr": "∀ (p : Prop), p → p"}')
    assert heartbeat_error(tac(tight, 0, "debug_heartbeats 1001"), 1)
    assert "goals" in tac(tight, 0, "set_option maxHeartbeats 5 in debug_heartbeats 4000")
    default = Repl(debug=True)  # Lean's default: 200000
    call(default, 'goal.start {"expr": "∀ (p : Prop), p → p"}')
    assert "goals" in tac(default, 0, "debug_heartbeats 200000000")
    assert heartbeat_error(tac(default, 0, "debug_heartbeats 200000001"), 200000)
    assert "unknown tactic 'debug_heartbeats'" in error_text(
        tac(started("∀ (p : Prop), p → p"), 0, "debug_heartbeats 1")
    )  # test-only, like the other debug tactics


def test_a_files_set_option_governs_its_declarations_not_goal_tactic() -> None:
    repl = Repl()
    two_steps = "theorem t (p : Prop) : p → p := by\n  intro h\n  exact h\n"
    assert process(repl, "set_option maxHeartbeats 1\n" + two_steps)[1]["messages"][0][
        "data"
    ].startswith("(deterministic) timeout at `elaborator`, maximum number of heartbeats (1)")
    assert process(repl, "set_option maxHeartbeats 2\n" + two_steps)[1]["messages"] == []
    assert process(repl, "set_option maxHeartbeats 0\n" + two_steps)[1]["messages"] == []
    # a tactic's own wrapper wins inside the file, as in Lean
    wrapped = (
        "theorem t (p : Prop) : p → p := by\n  set_option maxHeartbeats 1 in intro h; exact h\n"
    )
    assert "maximum number of heartbeats (1)" in process(repl, wrapped)[0]["messages"][0]["data"]
    # the header of a started theorem does not carry into goal.tactic: the process limit applies
    tight = Repl(lean_options={"maxHeartbeats": "1"}, debug=True)
    units = process(
        tight,
        "set_option maxHeartbeats 0\ntheorem s (p : Prop) : p → p := by\n  debug_heartbeats 5000\n  sorry\n",
        sorrys=True,
    )
    assert units[1]["messages"][0]["data"] == "declaration uses 'sorry'"  # 0: unlimited there
    assert heartbeat_error(tac(tight, units[1]["goalStateId"], "debug_heartbeats 1001"), 1)


# ---------------------------------------------------------------------------------------------
# goal.save / goal.load (reference/pantograph.md §4: {"id","path"} → {}, {"path"} → {"id"})


def test_goal_save_and_load_restore_a_state_in_another_process(tmp_path) -> None:
    a = started("∀ (p q : Prop), p ∧ q → q ∧ p")
    s1 = tac(a, 0, "intro p q h")
    s2 = tac(a, s1["nextStateId"], "constructor")
    path = str(tmp_path / "s2.state")
    assert call(a, "goal.save " + json.dumps({"id": s2["nextStateId"], "path": path})) == {}
    assert call(a, 'goal.save {"id": 99, "path": "x"}') == {
        "desc": "Invalid state index 99",
        "error": "index",
    }
    assert call(a, 'goal.save {"path": "x"}')["error"] == "command"  # id is required

    b = started("∀ (p : Prop), p → p")  # another process, its own ids
    loaded = call(b, "goal.load " + json.dumps({"path": path}))
    assert loaded == {"id": 1}  # the next id of *this* process's counter
    printed = call(b, 'goal.print {"stateId": 1, "goals": true}')["goals"]
    assert norm(printed) == norm(s2["goals"])  # the same goals, case tags included
    uniq = {g["name"] for g in printed} | {v["name"] for g in printed for v in g["vars"]}
    original = {g["name"] for g in s2["goals"]} | {
        v["name"] for g in s2["goals"] for v in g["vars"]
    }
    assert uniq.isdisjoint({"_uniq.1"})  # renumbered in b (b's own root is _uniq.1)
    assert len(uniq) == len(original)
    done = tac(b, 1, "exact h.2")
    assert state(done) == "case right\np q : Prop\nh : p ∧ q\n⊢ p"
    assert tac(b, done["nextStateId"], "exact h.1")["goals"] == []


def test_goal_load_fails_the_way_lean_would(tmp_path) -> None:
    repl = started("∀ (p : Prop), p → p")
    missing = call(repl, "goal.load " + json.dumps({"path": str(tmp_path / "nope")}))
    assert missing["error"] == "main" and missing["desc"].startswith("no such file or directory")
    junk = tmp_path / "junk"
    junk.write_bytes(b"not a state")
    assert call(repl, "goal.load " + json.dumps({"path": str(junk)})) == {
        "desc": f"failed to read file '{junk}', invalid header",
        "error": "main",
    }
    path = str(tmp_path / "s")
    assert call(repl, "goal.save " + json.dumps({"id": 0, "path": path})) == {}
    other = Repl(imports=["Mathlib"])  # the imports must be the same
    assert call(other, "goal.load " + json.dumps({"path": path}))["desc"].startswith(
        "(kernel) unknown constant"
    )
    assert call(repl, "stat") == {"nGoals": 1}  # a failed load consumes no id


def test_a_saved_state_carries_its_files_declarations(tmp_path) -> None:
    """Pantograph pickles a state with the constants its file added beyond the imports
    (``env.constants.map₂``) and replays them on load: a ProofNet header's declarations come
    back with the state.  One the loading REPL already declares differently is a kernel error."""
    repl = Repl()
    file = (
        "theorem helper (p q : Prop) : p ∧ q → q ∧ p := by\n  intro h\n  exact ⟨h.2, h.1⟩\n\n"
        "theorem main (a b : Prop) : a ∧ b → b ∧ a := by\n  sorry\n"
    )
    units = process(repl, file, sorrys=True)
    sid = units[1]["goalStateId"]
    path = str(tmp_path / "main")
    assert call(repl, "goal.save " + json.dumps({"id": sid, "path": path})) == {}
    fresh = Repl()  # knows nothing of `helper`
    assert error_text(tac(started("∀ (p : Prop), p → p"), 0, "exact helper")).startswith(
        "unknown identifier 'helper'"
    )
    loaded = call(fresh, "goal.load " + json.dumps({"path": path}))["id"]
    assert tac(fresh, loaded, "exact helper")["goals"] == []
    clash = Repl()
    process(clash, "theorem helper (p : Prop) : p → p := by\n  intro h\n  exact h\n", inherit=True)
    assert call(clash, "goal.load " + json.dumps({"path": path})) == {
        "desc": "(kernel) constant has already been declared 'helper'",
        "error": "main",
    }
