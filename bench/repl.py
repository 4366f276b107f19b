"""CPU of the propositional REPL on a search's command stream, against a baseline, reply for reply.

A search job's REPL workers (``python -m burnqed.proplogic``) get, per attempt: a
``frontend.process`` of the statement with ``sorry`` (the root state), ``goal.tactic`` of every
candidate on its parent's state under the per-tactic heartbeat wrapper (``set_option maxHeartbeats
200000 in …``, as :class:`burnqed.lean.client.ReplClient` sends it), a ``goal.delete`` of the
attempt's states and, for a proof, the verifier's ``frontend.process`` with ``#print axioms``; a
worker starts with ``options.set`` of the tactic timeout and is recycled every ``--recycle``
requests (``lean.recycle_after_requests``), between attempts.  The stream is built

- from a finished demo run (``--run DIR``): its search's node tables
  (``results/iter_0/search/shard_*/nodes/*.parquet``, every candidate in node order) and theorems
  (``data/theorems/search_pool.jsonl``);
- else from ``--theorems`` generated theorems (:mod:`burnqed.proplogic.generator`), ``--attempts``
  each: at every step of the recorded proof the right tactic and ``--wrong`` tactics of other
  proofs, then the right one is followed.

State ids are the REPL's own (the stream is recorded through an in-process :class:`Repl`).  The
stream then runs through REPL processes of this checkout and of ``--baseline`` (a ``PYTHONPATH``,
e.g. a ``git archive`` of the unchanged REPL; default: this checkout), alternately, ``--repeat``
times; CPU is the children's user + system time (``getrusage``), the least of the repeats, start-up
included.  ``--out-dir`` keeps both runs' replies (``current.out``, ``baseline.out``) to ``cmp``.

Example::

    git -C . archive 085eda6 burnqed | tar -x -C /tmp/repl-old
    python bench/repl.py --run /work/main48 --baseline /tmp/repl-old --repeat 3
    python bench/repl.py --smoke        # tiny sizes, seconds

Prints (parameters first; these figures last, one ``name=value`` a line):

- ``requests``: requests in the stream
- ``processes``: REPL processes it runs in (one per ``--recycle`` requests)
- ``cpu_s``: this checkout's REPL processes, CPU seconds for the whole stream
- ``cpu_us_per_request``: the same per request, start-up included
- ``startup_ms``: CPU of one REPL process that starts and answers nothing (least of 5)
- ``baseline_cpu_s``: the baseline's CPU seconds for the same stream
- ``baseline_startup_ms``: the baseline's start-up
- ``cpu_ratio``: ``cpu_s`` / ``baseline_cpu_s``
- ``identical``: 1 if every reply byte of this checkout equals the baseline's, else 0
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

from burnqed.lean.client import with_heartbeats
from burnqed.lean.verify import proof_file, theorem_file
from burnqed.proplogic.generator import generate_theorems
from burnqed.proplogic.repl import Repl
from burnqed.theorems import Theorem, read_theorems

REPO = Path(__file__).resolve().parents[1]
HEARTBEATS = 200000  # lean.tactic_heartbeats of the demo
TIMEOUT_MS = 5000  # lean.tactic_timeout_s of the demo, as the client sets it

# One attempt: (theorem, [(node id, parent id or None, tactic)] in node order, solved node or None).
Attempt = tuple[Theorem, list[tuple[int, int | None, str]], int | None]


def demo_attempts(run: Path) -> Iterator[Attempt]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = sorted(run.glob("results/iter_0/search/shard_*/nodes/*.parquet"))
    nodes = pa.concat_tables(pq.read_table(p) for p in parts).to_pylist()
    theorems = {t.key: t for t in read_theorems(run / "data/theorems/search_pool.jsonl")}
    attempts: dict[tuple[str, int], list[dict]] = defaultdict(list)
    for n in nodes:
        attempts[(n["theorem"], n["attempt"])].append(n)
    for key in sorted(attempts):
        tree = sorted(attempts[key], key=lambda n: n["node_id"])
        solved = next((n["node_id"] for n in tree if n["solved"]), None)
        yield (
            theorems[key[0]],
            [(n["node_id"], n["parent_id"], n["tactic"]) for n in tree if n["tactic"] is not None],
            solved,
        )


def generated_attempts(n: int, attempts: int, wrong: int) -> Iterator[Attempt]:
    theorems = generate_theorems(n, seed=0)
    pool = sorted({t for th in theorems for t in th.proof})
    rng = random.Random(0)
    for th in theorems:
        theorem = Theorem(name=th.name, formal_statement=th.formal_statement)
        for _ in range(attempts):
            tree: list[tuple[int, int | None, str]] = []
            parent = 0
            for step in th.proof:
                candidates = [step, *rng.sample(pool, min(wrong, len(pool)))]
                rng.shuffle(candidates)
                for tactic in dict.fromkeys(candidates):  # the search sends each once
                    tree.append((len(tree) + 1, parent, tactic))
                    if tactic == step:
                        right = len(tree)
                parent = right
            yield theorem, tree, parent


def record(attempts: Iterator[Attempt], recycle: int) -> list[str]:
    """The request lines, a blank line where a worker is recycled."""
    lines: list[str] = []
    repl: Repl | None = None
    sent = 0

    def send(cmd: str, payload: dict) -> dict:
        nonlocal sent
        line = f"{cmd} {json.dumps(payload, ensure_ascii=False)}"  # as ReplClient._send
        lines.append(line)
        sent += 1
        assert repl is not None
        return json.loads(repl.handle_line(line))

    for theorem, tree, solved in attempts:
        if repl is None or sent >= recycle:
            if repl is not None:
                lines.append("")
            repl, sent = Repl(), 0
            send("options.set", {"timeout": TIMEOUT_MS})
        start = {
            "file": theorem_file(theorem, ["sorry"]),
            "readHeader": False,
            "inheritEnv": False,
            "sorrys": True,
            "typeErrorsAsGoals": False,
            "newConstants": False,
        }
        units = send("frontend.process", start)["units"]
        sid = {0: next(u["goalStateId"] for u in units if "goalStateId" in u)}
        parents, tactics = {}, {}
        for node, parent, tactic in tree:
            parents[node], tactics[node] = parent, tactic
            if parent not in sid:
                continue
            text = with_heartbeats(tactic, HEARTBEATS)
            reply = send("goal.tactic", {"stateId": sid[parent], "tactic": text})
            if "nextStateId" in reply:
                sid[node] = reply["nextStateId"]
        send("goal.delete", {"stateIds": sorted(set(sid.values()))})
        if solved is not None:
            proof, cur = [], solved
            while cur != 0 and cur is not None:
                proof.append(tactics[cur])
                cur = parents[cur]
            check = dict(start, file=proof_file(theorem, proof[::-1]), sorrys=False)
            send("frontend.process", check)
    return lines


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_stream(chunks: list[str], pythonpath: str, cwd: str) -> tuple[float, bytes]:
    """CPU seconds of the REPL processes answering ``chunks`` (one process each), and the replies."""
    env = dict(os.environ, PYTHONPATH=pythonpath)
    before = _children_cpu()
    out = []
    for chunk in chunks:
        proc = subprocess.run(
            [sys.executable, "-m", "burnqed.proplogic"],
            input=(chunk + "\n").encode(),
            capture_output=True,
            env=env,
            cwd=cwd,  # not the checkout: `python -m` puts its working directory first on sys.path
            check=True,
        )
        out.append(proc.stdout)
    return _children_cpu() - before, b"".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, default=None, help="a finished demo run's directory")
    ap.add_argument("--theorems", type=int, default=60, help="generated theorems (without --run)")
    ap.add_argument("--attempts", type=int, default=4, help="attempts per generated theorem")
    ap.add_argument("--wrong", type=int, default=7, help="wrong candidates per generated step")
    ap.add_argument("--recycle", type=int, default=1000, help="requests per REPL process")
    ap.add_argument("--baseline", default=str(REPO), help="PYTHONPATH of the baseline REPL")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side (least CPU kept)")
    ap.add_argument("--out-dir", type=Path, default=None, help="keep both sides' replies here")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: runs in seconds")
    a = ap.parse_args()
    if a.smoke:
        a.run, a.theorems, a.attempts, a.recycle, a.repeat = None, 4, 2, 60, 1
    print(f"run={a.run} theorems={a.theorems} attempts={a.attempts} wrong={a.wrong}")
    print(f"recycle={a.recycle} baseline={a.baseline} repeat={a.repeat}")
    print(f"load_average_before={os.getloadavg()[0]:.2f}")
    attempts = (
        demo_attempts(a.run) if a.run else generated_attempts(a.theorems, a.attempts, a.wrong)
    )
    lines = record(attempts, a.recycle)
    chunks = "\n".join(lines).split("\n\n")
    sides = {"current": str(REPO), "baseline": a.baseline}
    cpu = {side: float("inf") for side in sides}
    startup = {side: float("inf") for side in sides}
    replies: dict[str, bytes] = {}
    # The REPL processes' working directory, removed after (a run leaves nothing behind).
    with tempfile.TemporaryDirectory(prefix="bench-repl-") as cwd:
        for _ in range(a.repeat):
            for side, path in sides.items():
                seconds, replies[side] = run_stream(chunks, path, cwd)
                cpu[side] = min(cpu[side], seconds)
        for _ in range(5):
            for side, path in sides.items():
                startup[side] = min(startup[side], run_stream([""], path, cwd)[0])
    if a.out_dir:
        a.out_dir.mkdir(parents=True, exist_ok=True)
        for side, data in replies.items():
            (a.out_dir / f"{side}.out").write_bytes(data)
    requests = sum(1 for line in lines if line)
    print(f"load_average_after={os.getloadavg()[0]:.2f}")
    print(f"requests={requests}")
    print(f"processes={len(chunks)}")
    print(f"cpu_s={cpu['current']:.3f}")
    print(f"cpu_us_per_request={cpu['current'] / requests * 1e6:.1f}")
    print(f"startup_ms={startup['current'] * 1000:.1f}")
    print(f"baseline_cpu_s={cpu['baseline']:.3f}")
    print(f"baseline_startup_ms={startup['baseline'] * 1000:.1f}")
    print(f"cpu_ratio={cpu['current'] / cpu['baseline']:.3f}")
    print(f"identical={int(replies['current'] == replies['baseline'])}")


if __name__ == "__main__":
    main()
