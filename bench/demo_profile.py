"""Where a demo job's time goes: one search job and one training job, attributed, and the run's DAG.

Each job runs as its own process, the way a Snakemake job does (a fresh interpreter, the shim's
imports, the stage's ``run``), under a **sampling profiler**: a thread that looks at every other
thread's Python stack every ``--interval`` seconds and files the moment under a category by the
innermost frame it recognises (``CATEGORIES``), so a category's seconds are its share of the
samples times the job's wall time — per thread, since the search's threads overlap.  No function
is wrapped and nothing is timed from inside the code, so the profile is of the job as it runs
(the sampler costs a few per cent of one core).

1. **The search job**: iteration 0's pool search (``rules/search.smk`` ``search_shard``) over the
   first ``--theorems`` theorems of the search pool, with the run's ``models/iter_0/merged``, the
   demo's config (``--configfile``), one torch thread (``threads.search``) and a fresh expansion
   cache, as the rule runs it.  Its time goes to: process start and imports (spawn to the end of
   the shim's imports, measured by the parent), loading the model, and then two threads — the
   generator thread (model forward; sampling, log-probs and stop checks; tokenisation; idle, waiting
   for requests) and the main thread (the search engine's Python with asyncio; the Lean client;
   Parquet/DuckDB I/O; waiting on the REPLs and the generator).  The REPL processes' own CPU is
   the job's children's CPU time; the time the search waited on them is the Lean pool's summed
   call time (``lean_seconds`` of the manifest), overlapped with the rest.
2. **The training job**: iteration 0's SFT (``rules/model.smk`` ``sft``, trl's trainer) from the
   run's ``models/base`` on its tactic pairs for ``--steps`` steps (the config's ``max_steps`` by
   default), two torch threads as the rule: process start and imports, loading, forward, backward,
   optimizer, the validation passes, checkpoints, data preparation (tokenisation, Parquet).
3. **The run's DAG** (when ``--run`` holds ``logs/benchmarks`` and ``.snakemake/metadata``):
   :func:`burnqed.eval.timing.run_timing` — wall time, job-seconds, the busy cores, the critical
   path through the DAG against the wall time (``burnqed timing``).

Seconds are wall time unless a name says CPU; a ``_fraction`` is of the job's wall time.

Prints (parameters first; then these figures, one ``name=value`` a line):

- ``search_wall_s``: the search job, spawn to exit
- ``search_cpu_s``: its CPU time, the REPL processes included
- ``search_start_s``: process start and the shim's imports
- ``search_load_s``: loading the model and tokenizer (main thread)
- ``search_forward_s``: generator thread: the model's forward passes
- ``search_sampling_s``: generator thread: drawing tokens, log-probs, stop checks, cutting
- ``search_tokenise_s``: generator thread: tokenising prompts and decoding candidates
- ``search_generator_idle_s``: generator thread: waiting for requests
- ``search_engine_s``: main thread: the search engine's Python (and asyncio's)
- ``search_lean_client_s``: main thread: the Lean client and pool
- ``search_io_s``: Parquet and DuckDB (trajectories, the expansion cache), any thread
- ``search_main_wait_s``: main thread: waiting on the REPLs and the generator
- ``search_repl_cpu_s``: the REPL processes' own CPU
- ``search_repl_wait_s``: summed wall time of the Lean calls (overlaps the rest)
- ``search_expansions``: expansions the search made
- ``search_forward_cpu_s``: the generator thread's CPU seconds in forward passes (the
  ``_cpu_s`` figures: each thread's CPU clock read at every sample, its advance filed under what
  the thread is doing then — unlike the wall figures, not inflated by a busy machine)
- ``search_sampling_cpu_s``: its CPU seconds drawing tokens, log-probs, stop checks
- ``search_tokenise_cpu_s``: its CPU seconds tokenising and decoding
- ``search_main_cpu_s``: the main thread's CPU seconds from the first sample on (engine, Lean
  client, I/O, loading: a thread that computes in bursts between waits cannot be split by
  sampling its clock)
- ``search_forward_fraction``: forward passes over the job's wall time
- ``search_generation_fraction``: forward + sampling + tokenisation over the job's wall time
- ``search_start_fraction``: process start and imports over the job's wall time
- ``search_unreadable_samples``: samples of the search's threads whose stack could not be read
  (read while it changed under the walk: counted apart, in no figure above)
- ``train_wall_s``: the training job, spawn to exit
- ``train_cpu_s``: its CPU time
- ``train_start_s``: process start and imports
- ``train_load_s``: loading the base model and tokenizer
- ``train_data_s``: reading and tokenising the data
- ``train_forward_s``: forward passes of training steps
- ``train_backward_s``: backward passes
- ``train_optimizer_s``: optimizer steps
- ``train_eval_s``: the validation passes (``sft.eval_steps``)
- ``train_checkpoint_s``: writing checkpoints and the adapter
- ``train_other_s``: everything else (the trainer's own Python, logging)
- ``train_step_cpu_s``: the main thread's CPU seconds in forward, backward and optimizer (the
  other torch thread's work is not in it)
- ``train_eval_cpu_s``: its CPU seconds in the validation passes
- ``train_data_cpu_s``: its CPU seconds reading and tokenising the data
- ``train_step_fraction``: forward + backward + optimizer over the job's wall time
- ``train_eval_fraction``: validation over the job's wall time
- ``train_unreadable_samples``: samples of the training's main thread whose stack could not be read

and, with a run's DAG, ``dag_`` + every figure of :func:`burnqed.eval.timing.run_timing`.

Example::

    python bench/demo_profile.py --run . --configfile config/demo.yaml    # after the demo, in its directory
    python bench/demo_profile.py --run . --theorems 100 --steps 100       # smaller
    python bench/demo_profile.py --smoke      # no demo: a tiny model and theorems of its own (CI)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# How a sample is filed: first the *context* rules, true when any frame of the stack matches (a
# validation pass, a checkpoint, loading: whatever runs inside them counts as them), then the
# *innermost* rules, from the innermost frame outwards — the first frame some rule recognises
# decides.  A frame is (file, function).
Frame = tuple[str, str]


def _in(*parts: str) -> Callable[[Frame], bool]:
    return lambda f: any(p in f[0] for p in parts)


def _fn(*names: str) -> Callable[[Frame], bool]:
    return lambda f: f[1] in names


IO = _in("/pyarrow/", "/duckdb", "burnqed/trajectory.py", "burnqed/search/cache_store.py")
LOAD = _fn("from_pretrained", "open_generator", "load_training_model")
GENERATOR = {
    "context": [("io", IO)],
    "innermost": [
        (
            "forward",
            _in("burnqed/policy/decoder.py", "/transformers/models/", "/torch/nn/modules/"),
        ),
        ("tokenise", _in("tokenization", "/tokenizers/")),
        ("sampling", _in("burnqed/policy/transformers_backend.py")),
        ("idle", _fn("_worker", "get", "wait")),
    ],
}
MAIN = {
    "context": [("load", LOAD)],
    "innermost": [
        ("wait", lambda f: f[0].endswith("selectors.py") and f[1] in ("select", "poll")),
        ("io", IO),
        ("lean_client", _in("/burnqed/lean/")),
        ("engine", _in("/burnqed/search/", "/asyncio/")),
    ],
}
TRAIN = {
    "context": [
        ("eval", _fn("evaluate", "evaluation_loop", "prediction_step", "_evaluate")),
        ("checkpoint", _fn("_save_checkpoint", "save_pretrained", "save_model", "publish_chosen")),
        ("load", LOAD),
    ],
    "innermost": [
        ("backward", _in("/torch/autograd/")),
        ("optimizer", _in("/torch/optim/")),
        ("forward", _in("/transformers/models/", "/peft/tuners/", "/torch/nn/modules/")),
        (
            "data",
            _in(
                "/datasets/",
                "tokenization",
                "/pyarrow/",
                "burnqed/train/examples.py",
                "burnqed/train/loop.py",
                "data_collator",
                "/torch/utils/data/",
            ),
        ),
    ],
}
# Where a sample goes whose stack could not be read (Sampler.classify).
UNREADABLE = "unreadable"
# Which rules classify which thread (by name prefix), and what an unrecognised sample is.
CATEGORIES = {
    "search": {"MainThread": (MAIN, "other"), "burnqed-generate": (GENERATOR, "other")},
    "train": {"MainThread": (TRAIN, "other")},
}


class Sampler(threading.Thread):
    """Samples the Python stacks of the named threads every ``interval`` seconds (module docstring).

    Another thread's stack is read while that thread runs, so a frame can change or be freed under
    the walk (CPython does not lock it: a frame's ``f_code`` has been seen to be a dict).  A sample
    that cannot be read is filed under :data:`UNREADABLE` and counted (``unreadable``), never
    fatal; ``elapsed`` is set however the sampling ends, and ``error`` names what ended it early.
    """

    def __init__(self, rules: dict, interval: float) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.rules, self.interval = rules, interval
        self.counts: Counter[tuple[str, str]] = Counter()
        self.cpu: Counter[tuple[str, str]] = Counter()  # each thread's CPU seconds, by category
        self.unreadable: Counter[str] = Counter()  # samples of each thread that could not be read
        self.ticks = 0
        self.elapsed = 0.0  # wall seconds sampled: set when sampling ends, whatever ends it
        self.error: str | None = None  # what ended the sampling early, if anything did
        self.halt = threading.Event()

    def classify(self, frame, rules: dict, default: str) -> str:
        stack = []
        while frame is not None:
            code = frame.f_code
            if not isinstance(code, types.CodeType):  # a frame freed or reused under the walk
                raise TypeError(f"a frame whose f_code is a {type(code).__name__}")
            stack.append((code.co_filename, code.co_name))
            frame = frame.f_back
        for category, test in rules["context"]:
            if any(test(f) for f in stack):
                return category
        for f in stack:  # innermost first
            for category, test in rules["innermost"]:
                if test(f):
                    return category
        return default

    def run(self) -> None:
        started = time.perf_counter()
        try:
            clocks: dict[int, float] = {}  # each thread's CPU clock at the previous tick
            while not self.halt.wait(self.interval):
                self.sample(clocks)
        except Exception as e:  # the sampling ends; what it gathered stands, and why it ended
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.elapsed = time.perf_counter() - started

    def sample(self, clocks: dict[int, float]) -> None:
        """One tick: file each named thread's current stack (and its CPU since the last tick)."""
        threads = {t.ident: t for t in threading.enumerate()}
        self.ticks += 1
        for ident, frame in sys._current_frames().items():
            thread = threads.get(ident)
            for prefix, (rules, default) in self.rules.items():
                if thread is not None and thread.name.startswith(prefix):
                    try:
                        category = self.classify(frame, rules, default)
                    except Exception:  # read while it changed: counted, not fatal
                        category = UNREADABLE
                        self.unreadable[prefix] += 1
                    self.counts[(prefix, category)] += 1
                    # The thread's CPU since the last tick, filed under what it does now.
                    with contextlib.suppress(OSError, AttributeError):
                        now = time.clock_gettime(time.pthread_getcpuclockid(ident))
                        self.cpu[(prefix, category)] += now - clocks.get(ident, now)
                        clocks[ident] = now

    def seconds(self) -> dict[str, dict[str, float]]:
        """Per thread and category: wall seconds (share of the samples) and, under ``<category>
        cpu``, the thread's CPU seconds."""
        per = self.elapsed / max(self.ticks, 1)
        out: dict[str, dict[str, float]] = {}
        for (thread, category), n in self.counts.items():
            out.setdefault(thread, {})[category] = n * per
        for (thread, category), cpu in self.cpu.items():
            out.setdefault(thread, {})[f"{category} cpu"] = cpu
        return out


# --------------------------------------------------------------------------------------------
# The jobs (in a child process each)


def child(kind: str, spec: dict) -> None:
    """Run one job under the sampler; print its figures as one ``PROFILE {json}`` line."""
    from burnqed.config import load_params
    from burnqed.isa import apply_pin

    params = load_params(REPO / "params.yaml", spec["configfiles"])
    apply_pin(params["cpu_isa"])  # as the Snakefile does, before torch
    import resource

    import torch

    if kind == "search":
        from burnqed.search.stage import run  # the shim's imports
    else:
        from burnqed.train.joint import train_adapter
    print(f"IMPORTED {time.time()}", flush=True)
    sampler = Sampler(CATEGORIES[kind], spec["interval"])
    sampler.start()
    out: dict = {}
    if kind == "search":
        torch.set_num_threads(spec["threads"])
        manifest = run(
            theorems=Path(spec["theorems"]), model=spec["model"], out=Path(spec["out"]),
            cfg=params["search"], lean=params["lean"], policy=params["policy"],
            seed=params["seed"], shard=(0, 1), cache=spec["cache"],
        )  # fmt: skip
        out["expansions"] = _expansions(Path(spec["out"]))
        out["repl_wait_s"] = (manifest.get("lean_pool") or {}).get("lean_seconds", 0.0)
    else:
        torch.set_num_threads(spec["threads"])
        sft = {**params["sft"], "max_steps": spec["steps"]}
        train_adapter(
            base=Path(spec["base"]), train=Path(spec["train"]), val=Path(spec["val"]),
            out=Path(spec["out"]), cfg=sft, ebm=params["ebm"], pooling=params["policy"]["pooling"],
            iteration=0, eval_benchmarks=[Path(b) for b in spec["eval_benchmarks"]],
            decontamination=params["data"]["decontamination"], seed=params["seed"],
        )  # fmt: skip
    sampler.halt.set()
    sampler.join()
    out["threads"] = sampler.seconds()
    out["unreadable"] = dict(sampler.unreadable)  # samples of each thread it could not read
    out["sampler_error"] = sampler.error
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["children_cpu_s"] = children.ru_utime + children.ru_stime
    print("PROFILE " + json.dumps(out), flush=True)


def _expansions(out: Path) -> int:
    from burnqed.trajectory import read_summary

    table = read_summary(out).table
    return int(sum(table.column("nodes_expanded").to_pylist()))


def run_child(kind: str, spec: dict, log_path: Path) -> dict:
    """Spawn ``kind``'s job; its figures plus wall, CPU and start time as the parent saw them."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    bin_dir = str(Path(sys.executable).parent)  # the REPL command runs `python`: this interpreter
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    argv = [sys.executable, __file__, "--child", kind, "--spec", json.dumps(spec)]
    spawned = time.time()
    with open(log_path, "w", encoding="utf-8") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
                                cwd=spec.get("cwd", REPO))  # fmt: skip
        assert proc.stdout is not None
        imported, figures = None, None
        for line in proc.stdout:
            if line.startswith("IMPORTED "):
                imported = float(line.split()[1])
            elif line.startswith("PROFILE "):
                figures = json.loads(line[len("PROFILE ") :])
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - spawned
    if status != 0 or figures is None or imported is None:
        tail = Path(log_path).read_text(encoding="utf-8")[-3000:]
        raise SystemExit(f"bench/demo_profile.py: the {kind} job failed (log {log_path}):\n{tail}")
    figures.update(wall_s=wall, start_s=imported - spawned, cpu_s=usage.ru_utime + usage.ru_stime)
    return figures


# --------------------------------------------------------------------------------------------
# Inputs


def demo_inputs(run: Path, theorems: int, work: Path) -> dict:
    """The demo run's files the two jobs read (one line naming the first one missing)."""
    need = {
        "model": run / "models/iter_0/merged",
        "base": run / "models/base",
        "pool": run / "data/theorems/search_pool.jsonl",
        "train": run / "data/tactic_pairs/train.parquet",
        "val": run / "data/tactic_pairs/val.parquet",
        "benchmark": run / "data/benchmarks/proplogic_test.jsonl",
    }
    for what, path in need.items():
        if not path.exists():
            raise SystemExit(f"{path}: missing ({what}); run the demo first, or pass --smoke")
    lines = need["pool"].read_text(encoding="utf-8").splitlines()[:theorems]
    pool = work / "pool.jsonl"
    pool.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {**{k: str(v) for k, v in need.items()}, "pool": str(pool)}


def smoke_inputs(work: Path, theorems: int) -> dict:
    """A tiny stand-in for a demo run: generated theorems and their traced pairs, a tiny untrained
    Llama as both base and iteration-0 model."""
    import pyarrow.parquet as pq

    from burnqed.data.prompt import format_example
    from burnqed.data.proplogic import generate_theorems, traced_pairs
    from burnqed.policy.tiny import build_tiny_model
    from burnqed.theorems import write_theorems

    found = generate_theorems(theorems + 40, seed=0, min_depth=1, max_depth=2)
    table = traced_pairs(found, source="smoke")
    pq.write_table(table, work / "train.parquet")
    pq.write_table(table.slice(0, 16), work / "val.parquet")
    write_theorems(work / "pool.jsonl", found[:theorems])
    write_theorems(work / "benchmark.jsonl", found[-4:])
    corpus = [
        ex["prompt"] + ex["completion"]
        for ex in (
            format_example(s, t)
            for s, t in zip(
                table.column("state_before").to_pylist(),
                table.column("tactic").to_pylist(),
                strict=True,
            )
        )
    ]
    model = build_tiny_model(work / "model", corpus, hidden_size=32, heads=1, intermediate_size=64)
    return {"model": str(model), "base": str(model), "pool": str(work / "pool.jsonl"),
            "train": str(work / "train.parquet"), "val": str(work / "val.parquet"),
            "benchmark": str(work / "benchmark.jsonl")}  # fmt: skip


# --------------------------------------------------------------------------------------------
# Figures


def search_figures(f: dict) -> dict[str, float]:
    gen = f["threads"].get("burnqed-generate", {})
    main = f["threads"].get("MainThread", {})
    wall = f["wall_s"]
    forward, sampling, tokenise = (
        gen.get("forward", 0.0),
        gen.get("sampling", 0.0),
        gen.get("tokenise", 0.0),
    )
    return {
        "search_wall_s": wall,
        "search_cpu_s": f["cpu_s"],
        "search_start_s": f["start_s"],
        "search_load_s": main.get("load", 0.0),
        "search_forward_s": forward,
        "search_sampling_s": sampling,
        "search_tokenise_s": tokenise,
        "search_generator_idle_s": gen.get("idle", 0.0) + gen.get("other", 0.0),
        "search_engine_s": main.get("engine", 0.0),
        "search_lean_client_s": main.get("lean_client", 0.0),
        "search_io_s": main.get("io", 0.0) + gen.get("io", 0.0),
        "search_main_wait_s": main.get("wait", 0.0),
        "search_repl_cpu_s": f["children_cpu_s"],
        "search_repl_wait_s": f["repl_wait_s"],
        "search_expansions": f["expansions"],
        "search_forward_cpu_s": gen.get("forward cpu", 0.0),
        "search_sampling_cpu_s": gen.get("sampling cpu", 0.0),
        "search_tokenise_cpu_s": gen.get("tokenise cpu", 0.0),
        "search_main_cpu_s": sum(v for k, v in main.items() if k.endswith(" cpu")),
        "search_forward_fraction": forward / wall,
        "search_generation_fraction": (forward + sampling + tokenise) / wall,
        "search_start_fraction": f["start_s"] / wall,
        "search_unreadable_samples": sum(f["unreadable"].values()),
    }


def train_figures(f: dict) -> dict[str, float]:
    main = f["threads"].get("MainThread", {})
    wall = f["wall_s"]
    step = sum(main.get(k, 0.0) for k in ("forward", "backward", "optimizer"))
    return {
        "train_wall_s": wall,
        "train_cpu_s": f["cpu_s"],
        "train_start_s": f["start_s"],
        **{
            f"train_{k}_s": main.get(k, 0.0)
            for k in (
                "load",
                "data",
                "forward",
                "backward",
                "optimizer",
                "eval",
                "checkpoint",
                "other",
            )
        },
        "train_step_cpu_s": sum(
            main.get(f"{k} cpu", 0.0) for k in ("forward", "backward", "optimizer")
        ),
        "train_eval_cpu_s": main.get("eval cpu", 0.0),
        "train_data_cpu_s": main.get("data cpu", 0.0),
        "train_step_fraction": step / wall,
        "train_eval_fraction": main.get("eval", 0.0) / wall,
        "train_unreadable_samples": sum(f["unreadable"].values()),
    }


def dag_figures(run: Path, cores: int) -> dict[str, float]:
    from burnqed.eval.timing import run_timing

    t = run_timing(run, cores=cores)
    if t is None:
        return {}
    return {f"dag_{k}": v for k, v in t.items() if isinstance(v, int | float)}


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--run", type=Path, default=Path("."), help="a finished demo run's directory")
    p.add_argument("--configfile", nargs="*", default=["config/demo.yaml"],
                   help="config overlays, as the run used (default: the demo's)")  # fmt: skip
    p.add_argument("--theorems", type=int, default=200, help="pool theorems searched")
    p.add_argument("--steps", type=int, default=None, help="SFT steps (default: sft.max_steps)")
    p.add_argument("--interval", type=float, default=0.002, help="sampling interval, seconds")
    p.add_argument("--cores", type=int, default=2, help="the run's --cores (busy fraction)")
    p.add_argument("--smoke", action="store_true", help="tiny inputs of its own: that it runs")
    p.add_argument("--child", choices=["search", "train"], help=argparse.SUPPRESS)
    p.add_argument("--spec", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.child, json.loads(args.spec))
        return

    from burnqed.config import load_params

    configfiles = [str(REPO / c) for c in args.configfile]
    if args.smoke:
        args.theorems, args.steps = 4, 2
    with tempfile.TemporaryDirectory(prefix="burnqed-profile-") as tmp:
        work = Path(tmp)
        if args.smoke:  # the smoke's tiny model and few theorems: few candidates, nodes, steps
            configfiles = [*configfiles, str(_smoke_overlay(work))]
        params = load_params(REPO / "params.yaml", configfiles)
        steps = args.steps if args.steps is not None else params["sft"]["max_steps"]
        inputs = (
            smoke_inputs(work, args.theorems)
            if args.smoke
            else demo_inputs(args.run.resolve(), args.theorems, work)
        )
        common = {"configfiles": configfiles, "interval": args.interval}
        search = run_child("search", {
            **common, "theorems": inputs["pool"], "model": inputs["model"],
            "out": str(work / "search"), "cache": str(work / "cache"),
            "threads": params["threads"]["search"],
        }, work / "search.log")  # fmt: skip
        train = run_child("train", {
            **common, "base": inputs["base"], "train": inputs["train"], "val": inputs["val"],
            "out": str(work / "adapter"), "eval_benchmarks": [inputs["benchmark"]],
            "steps": steps, "threads": 2,
        }, work / "train.log")  # fmt: skip
    print(f"run: {'smoke (tiny inputs of its own)' if args.smoke else args.run}; "
          f"config {' '.join(args.configfile)}")  # fmt: skip
    print(f"search job: iteration 0's pool search, first {args.theorems} pool theorems, "
          f"{params['search']['attempts']} attempts, {params['threads']['search']} torch thread(s), "
          "a fresh expansion cache")  # fmt: skip
    print(f"training job: iteration 0's SFT, {steps} steps, 2 torch threads")
    print(f"sampling every {args.interval * 1000:g} ms; machine load now "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip
    for kind, f in (("search", search), ("training", train)):
        if f.get("sampler_error"):  # the figures cover the samples taken before it ended
            print(f"{kind} job: the sampler stopped early ({f['sampler_error']})")
    figures = {**search_figures(search), **train_figures(train)}
    if not args.smoke:
        figures.update(dag_figures(args.run.resolve(), args.cores))
    for name, value in figures.items():
        print(f"{name}={value:.4g}" if isinstance(value, float) else f"{name}={value}")


def _smoke_overlay(work: Path) -> Path:
    """The smoke's shrunken settings: few candidates and nodes, a validation pass every 2 steps."""
    path = work / "smoke.yaml"
    path.write_text(
        "search: {max_nodes: 4, num_candidates: 4, attempts: 1, concurrency: 2}\n"
        "sft: {eval_steps: 2, later_max_steps: 4, base_pair_subsample: 32}\n",
        encoding="utf-8",
    )
    return path


if __name__ == "__main__":
    main()
