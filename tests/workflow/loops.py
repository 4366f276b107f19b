"""The shrunken expert-iteration loop, run twice at once for the slow step (``pytest -m slow``).

Two runs of the whole loop (baseline, two iterations, every eval, the reports): a **clean** one,
without the expansion cache — the README's command (the default target, the headline), then the
``ablations`` target on top of it (the attribution set, every artifact of the first reused) — and a
**killed** one, with it (empty at its start), that is
SIGKILLed during iteration 0's search, unlocked and rerun, Ctrl-C'd during iteration 1's search,
rerun again, then finished.  They start together (``Loops.start``): on 2 cores the two share the
machine instead of queueing (each alone leaves a core idle much of the time: its DAG runs 1.4 jobs
at once on average), and the tests that need only the clean run (the demo's artifacts, the DVC
round trip, the report) run while the killed one goes on.  Nothing either run computes depends on
the other or on the load: trees are schedule-invariant, and the checks compare them to the bit.

Both runs are git repositories made by :func:`tests.workflow.conftest.make_repo` (the DVC tests
clone the clean one) whose ``burnqed/`` links to this checkout's, so both record its commit as a
user's two runs of one checkout would (each with a copy, each recorded its own repository's
commit, and the models' digests differed by it); they run with
:func:`~tests.workflow.conftest.demo_env`: a caller that exports the lowest instruction set, so the
Snakefile's pin must decide what every job computes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from burnqed.trajectory import finished_attempts
from tests.workflow.conftest import demo_env, make_repo, snakemake_argv

TEST_THEOREMS = 20
LOOP = {
    "iterations": 2,
    "data": {
        "proplogic": {
            "theorems": 400,
            "max_depth": 3,
            # The benchmark's size and the pool's (each eval, replay and pool search scales with
            # it): 20 theorems, 4 attempts each in a pool search — enough that iteration 1's
            # search is caught half-way.  (40 made each loop 1,450 job-s, 1,050 of them evals,
            # replays and pool searches: 17 min for the two on 2 cores.)
            "test_theorems": TEST_THEOREMS,
            "held_out_min_depth": 2,
            "held_out_max_depth": 4,
        },
        "val_fraction": 0.1,
    },
    "lean": {"workers": 1},
    "model": {
        "tiny": {
            "steps": 150,
            "max_seconds": 900,
            "warmup_steps": 10,
            "eval_pairs": 20,
            "max_proof_steps": None,  # all the pairs: iteration 0 must prove something to learn from
        }
    },
    "sft": {
        "max_steps": 6,
        "later_max_steps": 4,
        "eval_steps": 3,
        "batch_size": 8,
        "warmup_steps": 1,
        "base_pair_subsample": 200,
    },
    "search": {"max_nodes": 8, "timeout_s": 120, "concurrency": 4, "checkpoint_every": 2},
    "eval": {"budgets": [4, 8]},
    "ebm": {"hidden_sizes": [32, 16], "steps": 10, "batch_size": 8, "save_every": 5},
    # Run A of issue 31's acceptance: the clean loop without the expansion cache (the demo's is
    # on); the killed-and-resumed loop runs with it (LOOP_WITH_CACHE), and both are the same but
    # the clock fields, per-node Lean times and the `cache` block.
    "cache": None,
}
# The killed-and-resumed loop: the cache on and empty at its start (run B: the miss path), each
# resume with what the killed commands stored (the hit path), and every eval of one model after
# the first answered from what the first stored (the EBM ablation's twins, the search-longer
# control, configuration A).
LOOP_WITH_CACHE = {**LOOP, "cache": "results/cache"}
# What the killed commands ask for: iteration 1's search (expert iteration's last step of the
# compute comparison, which the default target builds; nothing else needs it).
KILLED_TARGET = "results/iter_1/search/manifest.json"
LOOP_TIMEOUT_S = 3600


@dataclass(frozen=True)
class Resumed:
    """The killed run: ``snakemake`` for iteration 1's search killed with SIGKILL during
    iteration 0's search, then, after the README's unlock, the same command killed with SIGINT
    (Ctrl-C) during iteration 1's search, then the same command again; what stood on disk before
    that last command; then ``ablations`` (the default target and the attribution set) for the
    rest of the loop."""

    work: Path
    target: str
    rerun: subprocess.CompletedProcess  # the same command, which finished iteration 1's search
    rest: subprocess.CompletedProcess  # `ablations` after it (the whole loop)
    done_before: set  # iteration 1's attempts finished before the SIGINT
    parts_before: dict[str, bytes]  # iteration 1's checkpoint parts before the SIGINT
    times_before: dict[Path, int]  # mtimes of jobs finished before the SIGINT


# The clean run's two commands: the README's (the default target), then the attribution set.
CLEAN_COMMANDS = ((), ("ablations",))


class Loops:
    """The clean run (its two commands, :data:`CLEAN_COMMANDS`, in a thread) and the killed run
    (its commands in order, in a thread), started together; :meth:`clean` and :meth:`resumed`
    wait for theirs.  Every process runs in a session of its own: :meth:`stop` ends what is
    left."""

    def __init__(self, clean: Path, killed: Path, logs: Path) -> None:
        self.clean_dir, self.killed_dir, self.logs = clean, killed, logs
        self._procs: list[subprocess.Popen] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        # each clean command's outcome, in CLEAN_COMMANDS' order (its output as stdout)
        self.clean_runs: list[subprocess.CompletedProcess] = []
        self._clean_error: BaseException | None = None
        self._resumed: Resumed | None = None
        self._error: BaseException | None = None
        self._clean_thread = threading.Thread(target=self._run_clean, name="clean loop",
                                              daemon=True)  # fmt: skip
        self._thread = threading.Thread(target=self._run_killed, name="killed loop", daemon=True)

    @classmethod
    def start(cls, root: Path) -> Loops:
        loops = cls(
            make_repo(root / "clean", profiles=True, link_code=True, **LOOP),
            make_repo(root / "killed", profiles=True, link_code=True, **LOOP_WITH_CACHE),
            root / "logs",  # Snakemake's own output, outside the runs
        )
        loops.logs.mkdir()
        loops._clean_thread.start()
        loops._thread.start()
        return loops

    # -- waiting ---------------------------------------------------------------------------

    def clean(self) -> Path:
        """The clean run's directory once both its commands finished there (asserted)."""
        self._clean_thread.join(2 * LOOP_TIMEOUT_S)
        assert not self._clean_thread.is_alive(), "the clean loop did not finish"
        if self._clean_error is not None:
            raise self._clean_error
        for r in self.clean_runs:
            assert r.returncode == 0, r.stdout[-8000:]
        assert len(self.clean_runs) == len(CLEAN_COMMANDS)
        return self.clean_dir

    def resumed(self) -> Resumed:
        """The killed run once its last command finished (its steps assert as they go)."""
        self._thread.join(2 * LOOP_TIMEOUT_S)
        assert not self._thread.is_alive(), "the killed loop did not finish"
        if self._error is not None:
            raise self._error
        assert self._resumed is not None
        return self._resumed

    def stop(self) -> None:
        """End every process still running (a failed or interrupted session)."""
        self._stopping.set()
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._thread.join(60)
        self._clean_thread.join(60)

    # -- processes -------------------------------------------------------------------------

    def _popen(self, work: Path, targets: tuple[str, ...], log: str) -> subprocess.Popen:
        """The loop's command in the background, in its own process group (a terminal's
        foreground job: a signal to the group reaches Snakemake and its running jobs); its
        output in ``logs/<log>``."""
        with self._lock:
            if self._stopping.is_set():
                raise RuntimeError("the loops were stopped")
            proc = subprocess.Popen(
                snakemake_argv("--cores", "2", *targets), cwd=work, env=demo_env(),
                stdin=subprocess.DEVNULL, stdout=(self.logs / log).open("w"),
                stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            self._procs.append(proc)
            return proc

    def _finish(
        self, proc: subprocess.Popen, log: str, timeout: float = LOOP_TIMEOUT_S
    ) -> subprocess.CompletedProcess:
        """Wait for ``proc`` (no longer :meth:`stop`'s to end); its exit status, its output as
        stdout."""
        try:
            proc.wait(timeout)
        finally:
            with self._lock:
                self._procs.remove(proc)
        out = (self.logs / log).read_text(encoding="utf-8", errors="replace")
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")

    def _run(self, work: Path, *args: str, log: str) -> subprocess.CompletedProcess:
        return self._finish(self._popen(work, args, log), log)

    def _kill_when_checkpointed(self, proc: subprocess.Popen, shard: Path, sig: int) -> None:
        """Send ``sig`` to ``proc``'s group once ``shard`` has written its first checkpoint
        part."""
        deadline = time.monotonic() + 1200
        while not list((shard / "summary").glob("part-*.parquet")):
            assert proc.poll() is None, f"{proc.args}: ended before {shard} checkpointed"
            assert time.monotonic() < deadline, f"{shard} never wrote a checkpoint"
            assert not self._stopping.is_set(), "the loops were stopped"
            time.sleep(0.05)
        os.killpg(proc.pid, sig)

    def _run_clean(self) -> None:
        try:
            for n, targets in enumerate(CLEAN_COMMANDS):
                r = self._run(self.clean_dir, *targets, log=f"clean_{n}.log")
                self.clean_runs.append(r)
                if r.returncode != 0:
                    return
        except BaseException as e:  # re-raised by clean(), in the test that waits for it
            self._clean_error = e

    def _run_killed(self) -> None:
        try:
            self._resumed = _kill_and_resume(self)
        except BaseException as e:  # re-raised by resumed(), in the test that waits for it
            self._error = e


def _kill_and_resume(loops: Loops) -> Resumed:
    """One run stands for the rerun and both kills (each a full loop's time on 2 cores): every
    job outside the two killed searches runs as in a clean second run, and the killed ones must
    resume to the uninterrupted bytes as well (test_loop.py: test_a_run_killed_*).  The killed
    commands target iteration 1's search, so the searches are all they kill (an eval killed
    beside them would resume too, and record it)."""
    work, target = loops.killed_dir, KILLED_TARGET
    # 1. The machine goes away (SIGKILL: no handler runs) while iteration 0's search is half-way,
    #    the noise search beside it; every later job of the loop depends on that search.
    shard0 = work / "results/iter_0/search/shard_0"
    proc = loops._popen(work, (target,), "killed_1.log")
    loops._kill_when_checkpointed(proc, shard0, signal.SIGKILL)
    assert loops._finish(proc, "killed_1.log", timeout=120).returncode == -signal.SIGKILL
    assert not (shard0 / "manifest.json").exists(), "iteration 0's search finished before the kill"
    # The README's way back: unlock if the lock remains, then the same command.
    unlock = loops._run(work, target, "--unlock", log="unlock.log")
    assert unlock.returncode == 0, unlock.stdout[-3000:]
    # 2. Ctrl-C (snakemake and its running job) while iteration 1's search is half-way.
    shard1 = work / "results/iter_1/search/shard_0"
    proc = loops._popen(work, (target,), "killed_2.log")
    loops._kill_when_checkpointed(proc, shard1, signal.SIGINT)
    assert loops._finish(proc, "killed_2.log", timeout=120).returncode != 0
    assert not (shard1 / "manifest.json").exists(), "iteration 1's search finished before Ctrl-C"
    done_before, _ = finished_attempts(shard1)
    parts_before = {p.name: p.read_bytes() for p in (shard1 / "summary").glob("part-*.parquet")}
    finished_jobs = [
        work / "models/iter_1/merged/config.json",
        work / "models/iter_1/ebm/ebm.safetensors",
        work / "results/iter_0/search/manifest.json",
        work / "results/iter_1/search_pool.jsonl",
    ]
    times_before = {p: p.stat().st_mtime_ns for p in finished_jobs}
    # 3. The same command again; then the rest of the loop, the attribution set with it.
    rerun = loops._run(work, target, log="rerun.log")
    rest = loops._run(work, "ablations", target, log="rest.log")
    return Resumed(work, target, rerun, rest, done_before, parts_before, times_before)
