"""``burnqed doctor``: check in seconds, before any stage loads a model, what the configured run needs.

Each check prints one line — ``ok``, ``fail`` or ``skip``, the check's name, and why — and the
command exits 1 when any check fails:

- ``config``: ``params.yaml`` + ``--configfile`` overlays, merged and validated exactly as the
  workflow merges them (:func:`burnqed.config.load_params`);
- ``repl``: ``lean.repl_command --version`` runs and reports a Pantograph version burnqed speaks;
- ``versions``: the Lean version the REPL reports (or that its Pantograph release was built on)
  agrees with ``lean.project_path``'s ``lean-toolchain``;
- ``benchmark <name>``: the Lean and Mathlib versions a benchmark's ``.meta.json`` records agree with
  the REPL's and the project's (skipped while the benchmark is not built);
- ``proof``: a tiny proof (``∀ (p : Prop), p → p`` by ``intro p h``, ``exact h``) checks end to end
  through a REPL started the way the pool starts one (imports, options, project);
- ``policy``: the policy answers a one-token request with the model the first stages serve
  (``models/base``): a configured server URL, a launched server (only with ``--launch``), or the
  in-process model (skipped while it is not built);
- ``gpu``: GPUs present (``nvidia-smi``) against what the config and the profile ask for, and free
  memory against the server's ``--mem-fraction-static``;
- ``training``: the layout, attention and SFT loss kernel this machine's training steps will run
  (``sft.gpu_layout`` on CUDA: packed rows, flex attention and Liger Kernel's fused loss — or the
  chunked loss where ``liger-kernel`` is not installed, said here — or the padded float32 step; on
  the CPU the padded float32 step, and what a GPU run of this install would use); a Liger that is
  installed but does not import fails on CUDA (training would stop on it);
- ``disk``: free space where the artifacts go against a rough estimate of what the run writes;
- ``dvc remote``: the default DVC remote is reachable (a local directory exists; a URL is listed
  by ``dvc``) — skipped when none is configured.

Example::

    burnqed doctor --configfile config/demo.yaml
    burnqed doctor --configfile config/a100-7b.yaml --profile workflow/profiles/gpu --launch
"""

from __future__ import annotations

import argparse
import asyncio
import configparser
import importlib.util
import json
import logging
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from burnqed.config import ConfigError, LeanConfig, PolicyConfig, load_params

log = logging.getLogger(__name__)

Status = Literal["ok", "fail", "skip"]

# The model the first stages serve (the baseline eval, iteration 0's search): rules/model.smk.
BASE_MODEL_DIR = "models/base"
BENCHMARK_DIR = Path("data/benchmarks")

# The tiny proof: true in any Lean (no imports needed) and in burnqed's propositional REPL.
PROOF_STATEMENT = "∀ (p : Prop), p → p"
PROOF_TACTICS = ("intro p h", "exact h")

# The Lean toolchain each Pantograph release is built on (reference/pantograph.md §1; releases whose
# toolchain is only inferred there are left out).  Used when `--version` does not print the Lean
# version itself (newer builds print `0.3.7/v4.22.0`).
PANTOGRAPH_LEAN = {
    (0, 3, 0): "4.18.0",
    (0, 3, 1): "4.18.0",
    (0, 3, 2): "4.20.1",
    (0, 3, 3): "4.20.1",
    (0, 3, 4): "4.21.0",
    (0, 3, 7): "4.22.0",
    (0, 3, 9): "4.23",
    (0, 3, 11): "4.25.2",
    (0, 3, 13): "4.27.0",
    (0, 3, 14): "4.28.0",
    (0, 3, 15): "4.29.1",
}
STANDIN_MODULE = "burnqed.proplogic"  # the propositional stand-in REPL: no Lean, no Mathlib

# Disk a run writes, roughly: the demo's tiny models and data fit in 1 GiB; a 7B run writes a
# merged bf16 model (~15 GB) per iteration plus the base, adapters, embeddings and trajectories.
TINY_DISK_GB = 1.0
LARGE_DISK_GB_PER_ITERATION = 20.0


@dataclass(frozen=True)
class Check:
    status: Status
    name: str
    reason: str

    def line(self) -> str:
        return f"{self.status:<4} {self.name}: {self.reason}"


@dataclass
class _Context:
    """What the checks share: the config and what earlier checks found."""

    params: dict
    launch: bool
    profile: Path | None
    repl_version: Any = None  # burnqed.lean.client.ReplVersion once `repl` passed


# --------------------------------------------------------------------------------------------
# Versions


def version_tuple(text: str | None) -> tuple[int, ...] | None:
    """``(4, 21, 0)`` from ``leanprover/lean4:v4.21.0``, ``v4.21.0``, ``4.9 (unverified …)``."""
    if not text:
        return None
    m = re.search(r"(?<![\d.])v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def versions_agree(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Equal on the components both give: ``4.9`` agrees with ``4.9.0``, not with ``4.21.0``."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def _dotted(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


def is_standin(lean: LeanConfig) -> bool:
    from burnqed.provenance import launched_modules

    return STANDIN_MODULE in launched_modules(list(lean.repl_command))


def repl_lean_version(version: Any) -> tuple[tuple[int, ...] | None, str]:
    """The REPL's Lean version and where it comes from: its ``--version`` (``0.3.7/v4.22.0``), or
    the toolchain of its Pantograph release."""
    _, sep, rest = version.text.partition("/")
    if sep and version_tuple(rest):
        return version_tuple(rest), f"REPL `--version` {version.text}"
    lean = PANTOGRAPH_LEAN.get((version.major, version.minor, version.patch))
    if lean:
        return version_tuple(lean), f"Pantograph {version.text}'s release toolchain"
    return None, f"Pantograph {version.text} (no known Lean toolchain)"


def _project(lean: LeanConfig) -> dict[str, Any] | None:
    from burnqed.provenance import lean_project_versions

    return lean_project_versions(lean.project_path)


# --------------------------------------------------------------------------------------------
# The checks


def check_repl(ctx: _Context) -> Check:
    from burnqed.lean.client import read_version
    from burnqed.lean.errors import ReplError

    lean = LeanConfig.from_dict(ctx.params["lean"])
    t0 = time.monotonic()
    try:
        version = asyncio.run(read_version(lean))
    except ReplError as e:
        return Check("fail", "repl", _one_line(e))
    ctx.repl_version = version
    what = " (burnqed's propositional stand-in)" if is_standin(lean) else ""
    return Check(
        "ok",
        "repl",
        f"{' '.join(lean.repl_command)} reports Pantograph {version.text}{what} "
        f"({time.monotonic() - t0:.1f} s)",
    )


def check_versions(ctx: _Context) -> Check:
    lean = LeanConfig.from_dict(ctx.params["lean"])
    if ctx.repl_version is None:
        return Check("skip", "versions", "the REPL did not report a version")
    pantograph = f"Pantograph {ctx.repl_version.text}"
    if is_standin(lean):
        return Check("ok", "versions", f"{pantograph}: burnqed's propositional stand-in (no Lean)")
    repl_lean, source = repl_lean_version(ctx.repl_version)
    project = _project(lean)
    if project is None:
        said = f"Lean {_dotted(repl_lean)} ({source})" if repl_lean else source
        return Check("ok", "versions", f"{said}; no lean.project_path to compare with")
    toolchain = version_tuple(project["lean_toolchain"])
    mathlib = project["mathlib"] or "not in its lake-manifest.json"
    if toolchain is None:
        return Check(
            "fail",
            "versions",
            f"lean.project_path={lean.project_path}: no readable lean-toolchain",
        )
    if repl_lean is not None and not versions_agree(repl_lean, toolchain):
        return Check(
            "fail",
            "versions",
            f"the REPL is built on Lean {_dotted(repl_lean)} ({source}) but "
            f"lean.project_path={lean.project_path} pins {project['lean_toolchain']}: "
            "rebuild one with the other's toolchain (Mathlib must match the REPL's Lean exactly)",
        )
    agree = f"agrees with {source}" if repl_lean else f"not compared: {source}"
    return Check(
        "ok",
        "versions",
        f"{pantograph}; project Lean {_dotted(toolchain)} ({agree}); Mathlib {mathlib}",
    )


def benchmark_names(params: Mapping[str, Any]) -> list[str]:
    """The benchmarks the run searches: the eval benchmark and the search pool's (``name_split``)."""
    names = [params.get("eval", {}).get("benchmark", "minif2f_test")]
    for entry in params.get("data", {}).get("search_pool", []):
        names.append(f"{entry['benchmark']}_{entry['split']}")
    return list(dict.fromkeys(names))


def check_benchmark(ctx: _Context, name: str) -> Check:
    label = f"benchmark {name}"
    meta_path = BENCHMARK_DIR / f"{name}.meta.json"
    if not meta_path.is_file():
        return Check(
            "skip", label, f"{meta_path} not built yet (snakemake builds it): versions not compared"
        )
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        recorded_lean, recorded_mathlib = meta.get("lean"), meta.get("mathlib")
    except (ValueError, AttributeError) as e:
        return Check("fail", label, f"{meta_path}: not a benchmark meta file ({e})")
    lean = LeanConfig.from_dict(ctx.params["lean"])
    want = version_tuple(recorded_lean)
    if is_standin(lean):
        if want is not None:
            return Check(
                "fail",
                label,
                f"{meta_path} records Lean {recorded_lean!r} but lean.repl_command is burnqed's "
                "propositional stand-in (no Lean): point it at a Pantograph REPL",
            )
        return Check("ok", label, f"{recorded_lean or 'no Lean'}; the stand-in REPL serves it")
    if want is None:
        return Check("ok", label, f"{meta_path} records no Lean version ({recorded_lean!r})")
    found: list[str] = []
    if ctx.repl_version is not None:
        repl_lean, source = repl_lean_version(ctx.repl_version)
        if repl_lean is not None:
            if not versions_agree(want, repl_lean):
                return Check(
                    "fail",
                    label,
                    f"{meta_path} records Lean {_dotted(want)} ({recorded_lean!r}) but the REPL is "
                    f"built on Lean {_dotted(repl_lean)} ({source})",
                )
            found.append(f"REPL Lean {_dotted(repl_lean)}")
    project = _project(lean)
    if project is not None:
        toolchain = version_tuple(project["lean_toolchain"])
        if toolchain is not None and not versions_agree(want, toolchain):
            return Check(
                "fail",
                label,
                f"{meta_path} records Lean {_dotted(want)} but lean.project_path="
                f"{lean.project_path} pins {project['lean_toolchain']}",
            )
        m = re.search(r"\b[0-9a-f]{7,40}\b", recorded_mathlib or "")
        rev = project["mathlib"]
        if m and rev:
            if not (rev.startswith(m[0]) or m[0].startswith(rev)):
                return Check(
                    "fail",
                    label,
                    f"{meta_path} records Mathlib {m[0]} but lean.project_path="
                    f"{lean.project_path} has Mathlib {rev}",
                )
            found.append(f"Mathlib {rev[:12]}")
    if not found:
        return Check("ok", label, f"records Lean {_dotted(want)}; nothing to compare it with")
    return Check("ok", label, f"Lean {_dotted(want)} agrees with {', '.join(found)}")


def check_proof(ctx: _Context) -> Check:
    from burnqed.lean.client import ReplClient, TacticRejected
    from burnqed.lean.errors import ReplError

    if ctx.repl_version is None:
        return Check("skip", "proof", "the REPL did not start")
    lean = LeanConfig.from_dict(ctx.params["lean"])

    async def prove() -> str | None:
        async with ReplClient(lean, name="doctor") as repl:
            state = await repl.goal_start(PROOF_STATEMENT)
            for tactic in PROOF_TACTICS:
                result = await repl.goal_tactic(state.state_id, tactic)
                if isinstance(result, TacticRejected):
                    return f"`{tactic}` was rejected: {'; '.join(map(str, result.messages))}"
                state = result
            if state.goals:
                return f"goals left after {'; '.join(PROOF_TACTICS)}: {len(state.goals)}"
            return None

    t0 = time.monotonic()
    try:
        problem = asyncio.run(prove())
    except (ReplError, OSError) as e:
        return Check("fail", "proof", _one_line(e))
    if problem:
        return Check("fail", "proof", f"{PROOF_STATEMENT}: {problem}")
    return Check(
        "ok",
        "proof",
        f"{PROOF_STATEMENT} by {'; '.join(PROOF_TACTICS)} ({time.monotonic() - t0:.1f} s, "
        "REPL start included)",
    )


def _one_token(gen: Any) -> str:
    from burnqed.policy import SamplingParams

    [group] = gen.generate(
        ["theorem t : True := by\n"], SamplingParams(n=1, temperature=0.0, max_new_tokens=1)
    )
    return f"{len(group.candidates)} candidate"


def check_policy(ctx: _Context) -> Check:
    policy = PolicyConfig.from_dict(ctx.params["policy"])
    model = BASE_MODEL_DIR
    t0 = time.monotonic()
    if policy.backend == "transformers":
        if not Path(model).is_dir():
            return Check(
                "skip",
                "policy",
                f"in-process model {model} not built yet (rule base_model builds it)",
            )
        try:
            from burnqed.policy.backend import open_generator

            with open_generator(policy, model) as gen:
                answer = _one_token(gen)
        except Exception as e:  # a broken model directory, a dtype the device lacks …
            return Check("fail", "policy", f"{model} (transformers): {_one_line(e)}")
        return Check(
            "ok",
            "policy",
            f"{model} (in-process, device {policy.device}) answered a one-token request: "
            f"{answer} in {time.monotonic() - t0:.1f} s",
        )
    from burnqed.policy.http import OpenAIGenerator, ServerError, SGLangGenerator

    cls = SGLangGenerator if policy.backend == "sglang" else OpenAIGenerator
    server = None
    if policy.server_url:
        url = policy.server_url
    elif not ctx.launch:
        return Check(
            "skip",
            "policy",
            f"no policy.server_url: each stage launches policy.server_command "
            f"(pass --launch to start it with {model} now)",
        )
    elif not Path(model).is_dir():
        return Check("skip", "policy", f"{model} not built yet: nothing to launch the server with")
    else:
        from burnqed.policy.launcher import ServerProcess

        server = ServerProcess(policy.server_command, model=model, log=log)
        url = server.url
    try:
        if server is not None:
            server.start()
            server.wait_healthy(policy.health_timeout_s)
        gen = cls(
            url,
            model_id=model,
            # Seconds, not the stage's minutes of patience: a server that is not there now fails.
            request_timeout_s=min(policy.request_timeout_s, 60.0),
            retry_total_s=min(policy.retry_total_s, 5.0),
        )
        try:
            answer = _one_token(gen)
        finally:
            gen.close()
    except (ServerError, OSError, ValueError) as e:
        return Check("fail", "policy", f"{policy.backend} at {url}: {_one_line(e)}")
    finally:
        if server is not None:
            server.stop()
    how = "launched" if server is not None else "policy.server_url"
    return Check(
        "ok",
        "policy",
        f"{policy.backend} at {url} ({how}) answered a one-token request for {model}: {answer} "
        f"in {time.monotonic() - t0:.1f} s",
    )


def gpus() -> list[tuple[str, float, float]] | None:
    """``(name, total GiB, free GiB)`` per GPU from ``nvidia-smi``; None without it."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,memory.total,memory.free",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.strip().splitlines():
        name, total, free = (x.strip() for x in line.rsplit(",", 2))
        found.append((name, float(total) / 1024, float(free) / 1024))
    return found


def profile_gpus(profile: Path | None) -> int | None:
    """GPUs a Snakemake profile makes available (``resources: [gpu=N]``); None without one."""
    if profile is None:
        return None
    path = profile / "config.yaml" if profile.is_dir() else profile
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"{path}: cannot read the profile: {e}") from None
    resources = data.get("resources") or []
    if isinstance(resources, Mapping):
        resources = [f"{k}={v}" for k, v in resources.items()]
    for item in resources:
        key, _, value = str(item).partition("=")
        if key.strip() == "gpu":
            return int(value)
    return 0


def mem_fraction(command: Sequence[str] | None) -> float | None:
    """SGLang's ``--mem-fraction-static`` in a server command: the share of GPU memory it takes."""
    command = list(command or ())
    for i, arg in enumerate(command[:-1]):
        if arg == "--mem-fraction-static":
            try:
                return float(command[i + 1])
            except ValueError:
                return None
    return None


def check_gpu(ctx: _Context) -> Check:
    policy = PolicyConfig.from_dict(ctx.params["policy"])
    wanted = profile_gpus(ctx.profile)
    launches = policy.backend != "transformers" and not policy.server_url
    if wanted is None:
        # No profile given: the config says whether a GPU is needed here.
        wanted = 1 if launches or policy.device.startswith("cuda") else 0
        whose = "the config"
    else:
        whose = f"profile {ctx.profile}"
    found = gpus()
    if wanted == 0:
        have = "no nvidia-smi" if found is None else f"{len(found)} present"
        return Check("skip", "gpu", f"{whose} asks for no GPU ({have})")
    if not found:
        how = "no nvidia-smi on PATH" if found is None else "nvidia-smi lists none"
        return Check("fail", "gpu", f"{whose} asks for {wanted} GPU(s); {how}")
    if len(found) < wanted:
        return Check("fail", "gpu", f"{whose} asks for {wanted} GPU(s); {len(found)} found")
    fraction = max(
        (
            f
            for f in (
                mem_fraction(policy.server_command),
                mem_fraction(policy.embedding_server_command),
            )
            if f
        ),
        default=None,
    )
    desc = ", ".join(f"{n} {free:.0f}/{total:.0f} GiB free" for n, total, free in found)
    if fraction is not None and launches:
        short = [n for n, total, free in found[:wanted] if free < fraction * total]
        if short:
            return Check(
                "fail",
                "gpu",
                f"the server takes {fraction:g} of GPU memory (--mem-fraction-static) but less is "
                f"free: {desc} (another process holds it?)",
            )
    return Check("ok", "gpu", f"{whose} asks for {wanted}; {desc}")


def _liger_absent() -> bool:
    """``liger_kernel`` cannot be found (a stand-in placed in ``sys.modules`` counts as found)."""
    try:
        return importlib.util.find_spec("liger_kernel") is None
    except ValueError:  # in sys.modules without a spec
        return False


def check_training(ctx: _Context) -> Check:
    from burnqed.config import SFTConfig

    setting = SFTConfig.from_dict(ctx.params["sft"]).gpu_layout
    # Without an NVIDIA driver there is no CUDA, and without Liger the chunked loss: neither needs
    # torch's or burnqed.train's imports (seconds of a check that takes one without them).
    cuda = False
    if shutil.which("nvidia-smi") is not None:
        import torch

        cuda = torch.cuda.is_available()
    if not cuda and _liger_absent():
        loss = {"kernel": "chunked", "why": "liger-kernel not installed (the gpu extra)"}
    else:
        from burnqed.train.fused_loss import FusedKernelError, kernel_record

        try:
            loss = kernel_record("cuda")  # what a packed CUDA step's SFT loss runs here
        except FusedKernelError as e:
            if cuda and setting == "packed_bf16":
                return Check("fail", "training", _one_line(e))
            loss = {"kernel": "broken", "why": _one_line(e)}
    if loss["kernel"] == "broken":
        fused = f"a broken Liger ({loss['why']}): a GPU run would stop on it"
    elif loss["kernel"] == "liger":
        fused = f"Liger Kernel {loss['liger-kernel']} (triton {loss['triton']})"
    else:
        fused = f"the chunked loss ({loss['why']}: pip install -c constraints.txt -e '.[gpu]')"
    packed = f"packed rows, flex attention, a bf16 residual stream, SFT loss by {fused}"
    padded = "right-padded batches, SDPA, a float32 residual stream, whole float32 logits"
    if not cuda:
        gpu = packed if setting == "packed_bf16" else padded
        return Check(
            "ok", "training", f"no CUDA here: training runs {padded}; on a GPU sft.gpu_layout "
            f"{setting} would run {gpu}"
        )  # fmt: skip
    what = packed if setting == "packed_bf16" else f"{padded} (the step before issue 47)"
    return Check(
        "ok", "training", f"CUDA ({torch.cuda.get_device_name(0)}), sft.gpu_layout {setting}: "
        f"joint training runs {what}; the SFT stage (trl) pads, whole logits, bf16 autocast"
    )  # fmt: skip


def disk_estimate_gb(params: Mapping[str, Any]) -> float:
    if params.get("model", {}).get("base") == "tiny":
        return TINY_DISK_GB
    return LARGE_DISK_GB_PER_ITERATION * (int(params.get("iterations", 1)) + 1)


def check_disk(ctx: _Context, root: Path = Path(".")) -> Check:
    need = disk_estimate_gb(ctx.params)
    free = shutil.disk_usage(root).free / 2**30
    where = root.resolve()
    if free < need:
        return Check(
            "fail", "disk", f"{free:.1f} GiB free at {where}; the run writes about {need:g} GiB"
        )
    return Check(
        "ok", "disk", f"{free:.1f} GiB free at {where} (the run writes about {need:g} GiB)"
    )


def dvc_remote(root: Path = Path(".")) -> tuple[str, str] | None:
    """The default DVC remote ``(name, url)`` from ``.dvc/config`` (+ ``config.local``)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read([root / ".dvc" / "config", root / ".dvc" / "config.local"], encoding="utf-8")
    remotes = {}
    for section in parser.sections():
        m = re.fullmatch(r"""'?\s*remote\s+"(.+)"\s*'?""", section)
        if m and parser.has_option(section, "url"):
            remotes[m[1]] = parser.get(section, "url")
    name = parser.get("core", "remote", fallback=None)
    if name is None and len(remotes) == 1:
        name = next(iter(remotes))
    if name is None or name not in remotes:
        return None
    return name, remotes[name]


def check_dvc(ctx: _Context, root: Path = Path(".")) -> Check:
    remote = dvc_remote(root)
    if remote is None:
        return Check("skip", "dvc remote", "no DVC remote configured (`dvc remote add -d …`)")
    name, url = remote
    if "://" not in url:  # a local directory (relative to .dvc/)
        path = Path(url) if Path(url).is_absolute() else (root / ".dvc" / url).resolve()
        if path.is_dir():
            return Check("ok", "dvc remote", f"{name}: local directory {path}")
        return Check("fail", "dvc remote", f"{name}: {path} is not a directory")
    # A cloud remote: ask DVC (its credentials, its client) whether the remote answers.
    dvc = shutil.which("dvc")
    if dvc is None:
        return Check("fail", "dvc remote", f"{name}: {url}: `dvc` is not on PATH")
    try:
        out = subprocess.run(
            [dvc, "ls-url", url],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError) as e:
        return Check("fail", "dvc remote", f"{name}: {url}: {e}")
    if out.returncode != 0:
        return Check("fail", "dvc remote", f"{name}: {url}: {_one_line(out.stderr)[-300:]}")
    return Check("ok", "dvc remote", f"{name}: {url} answers")


# --------------------------------------------------------------------------------------------


def _one_line(e: BaseException | str) -> str:
    return " | ".join(line.strip() for line in str(e).splitlines() if line.strip())


def run_checks(
    params_path: str | Path = "params.yaml",
    overlays: Sequence[str | Path] = (),
    *,
    launch: bool = False,
    profile: Path | None = None,
    emit: Callable[[Check], None] = lambda c: None,
) -> list[Check]:
    """Run every check in order, calling ``emit`` with each result as it is known."""
    results: list[Check] = []

    def add(check: Check) -> None:
        results.append(check)
        emit(check)

    sources = " + ".join(map(str, [params_path, *overlays]))
    try:
        params = load_params(params_path, overlays)
    except ConfigError as e:
        add(Check("fail", "config", _one_line(e)))
        return results
    add(Check("ok", "config", f"{sources} valid"))
    ctx = _Context(params=params, launch=launch, profile=profile)
    add(check_repl(ctx))
    add(check_versions(ctx))
    for name in benchmark_names(params):
        add(check_benchmark(ctx, name))
    add(check_proof(ctx))
    add(check_policy(ctx))
    try:
        add(check_gpu(ctx))
    except ConfigError as e:
        add(Check("fail", "gpu", _one_line(e)))
    add(check_training(ctx))
    add(check_disk(ctx))
    add(check_dvc(ctx))
    return results


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from burnqed.config import add_config_arguments

    p = subparsers.add_parser(
        "doctor",
        help="check in seconds what the configured run needs (REPL, versions, policy, GPU, "
        "training step, disk, DVC)",
        description=__doc__.split("\n\n")[0],
    )
    add_config_arguments(p)
    p.add_argument(
        "--launch",
        action="store_true",
        help="start policy.server_command with models/base when no server_url is configured "
        "(default: skip that check)",
    )
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="the Snakemake profile the run uses (its `resources: gpu=N` is the GPUs it expects)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """Print one line per check as it finishes; 1 when any failed."""
    results = run_checks(
        args.params,
        args.configfile,
        launch=args.launch,
        profile=args.profile,
        emit=lambda c: print(c.line(), flush=True),
    )
    failed = sum(c.status == "fail" for c in results)
    skipped = sum(c.status == "skip" for c in results)
    print(
        f"doctor: {len(results) - failed - skipped} ok, {failed} failed, {skipped} skipped",
        flush=True,
    )
    return 1 if failed else 0


__all__ = [
    "Check",
    "add_parser",
    "benchmark_names",
    "main",
    "run_checks",
    "version_tuple",
    "versions_agree",
]
