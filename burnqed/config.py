"""Validated configuration: ``params.yaml`` (+ overlays) → JSON-schema check → frozen dataclasses.

The schema (``burnqed/params.schema.yaml``, also used by the Snakefile's ``validate``) describes every
key; the dataclasses below mirror it with typed fields and the cross-field checks a schema cannot
express.  A stage receives its own section as a plain dict (Snakemake ``params:``) and turns it into
its dataclass with ``SearchConfig.from_dict(section)``; stage code never opens ``params.yaml``.

Example::

    >>> params = load_params("params.yaml", overlays=["config/demo.yaml"])   # doctest: +SKIP
    >>> SearchConfig.from_dict(params["search"]).max_nodes                    # doctest: +SKIP
    64
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

SCHEMA_PATH = Path(__file__).with_name("params.schema.yaml")


class ConfigError(ValueError):
    """Invalid configuration; the message names the file and the key."""


class InputError(ValueError):
    """Bad input the user must fix (a file, a directory, a program to run); the message names it —
    file, key or line — and ``burnqed`` prints it as one line and exits 2 (``--debug``: traceback)."""


# --------------------------------------------------------------------------------------------
# Loading and schema validation


# libyaml's safe loader where PyYAML was built with it (the same documents as the pure-Python
# one, ~6x faster: the schema and params.yaml are read at every Snakemake start and command).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with :data:`_LOADER`."""
    return yaml.load(text, Loader=_LOADER)  # a safe loader (CSafeLoader or SafeLoader)


@cache
def schema() -> dict:
    return load_yaml(SCHEMA_PATH.read_text(encoding="utf-8"))


def deep_merge(base: Mapping, overlay: Mapping) -> dict:
    """``overlay`` over ``base``: mappings merge key by key, anything else (lists too) replaces."""
    out = copy.deepcopy(dict(base))
    for k, v in overlay.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def read_yaml(path: Path) -> dict:
    """One config file as a mapping (not validated); :class:`ConfigError` naming it otherwise."""
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    return data


def _key_path(error_path: Sequence[Any]) -> str:
    parts = []
    for p in error_path:
        parts.append(f"[{p}]" if isinstance(p, int) else ("." if parts else "") + str(p))
    return "".join(parts) or "<top level>"


def validate_params(params: Mapping, *, source: str = "config") -> None:
    """Raise :class:`ConfigError` naming the first offending key(s) unless ``params`` fits the schema."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(params), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        _check_sections(params, source)
        return
    lines = []
    for e in errors[:10]:
        key = _key_path(e.absolute_path)
        if e.validator == "additionalProperties":
            extra = sorted(set(e.instance) - set(e.schema.get("properties", {})))
            where = key if e.absolute_path else "top level"
            for k in extra:
                name = f"{key}.{k}" if e.absolute_path else k
                lines.append(f"{name}: unknown key (not in the schema under {where})")
            continue
        expected = e.schema.get("description", "")
        lines.append(f"{key}: {e.message}" + (f" — expected: {expected}" if expected else ""))
    raise ConfigError(f"{source}: invalid configuration\n  " + "\n  ".join(lines))


def load_params(path: str | Path = "params.yaml", overlays: Sequence[str | Path] = ()) -> dict:
    """Read ``path``, merge each overlay over it, validate, and return the merged dict."""
    path = Path(path)
    params = read_yaml(path)
    sources = [str(path)]
    for o in overlays:
        params = deep_merge(params, read_yaml(Path(o)))
        sources.append(str(o))
    validate_params(params, source=" + ".join(sources))
    return params


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    """``--params`` and ``--configfile``: the same files, merged the same way, as the workflow."""
    p.add_argument(
        "--params",
        default="params.yaml",
        metavar="YAML",
        help="base parameter file (default: %(default)s)",
    )
    p.add_argument(
        "--configfile",
        action="append",
        default=[],
        metavar="YAML",
        help="overlay merged over --params (repeatable; e.g. config/demo.yaml)",
    )


def add_cache_arguments(p: argparse.ArgumentParser) -> None:
    """``--cache DIR`` / ``--no-cache``: the expansion cache of a search or eval by hand (default:
    the config's top-level ``cache``, a machine setting: :func:`cache_dir`)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="expansion cache directory (default: the config's `cache`; results are the same)",
    )
    g.add_argument("--no-cache", action="store_true", help="search without the expansion cache")
    p.add_argument(
        "--cache-recheck",
        type=float,
        default=None,
        metavar="F",
        help="fraction of the cache's Lean hits asked live again (default: the config's "
        "`cache_recheck`)",
    )


def cache_recheck(args: argparse.Namespace, params: Mapping[str, Any]) -> float:
    """The fraction of Lean hits a command re-checks: ``--cache-recheck``, else the config's
    ``cache_recheck``."""
    if getattr(args, "cache_recheck", None) is not None:
        return float(args.cache_recheck)
    return float(params.get("cache_recheck") or 0.0)


def cache_dir(args: argparse.Namespace, params: Mapping[str, Any]) -> Path | None:
    """The expansion cache a command uses: ``--cache``, none with ``--no-cache``, else the config's
    ``cache`` (null: none)."""
    if getattr(args, "no_cache", False):
        return None
    if getattr(args, "cache", None) is not None:
        return Path(args.cache)
    return Path(params["cache"]) if params.get("cache") else None


def load_config(args: argparse.Namespace) -> dict:
    """The validated, merged parameters named by :func:`add_config_arguments` options."""
    return load_params(args.params, args.configfile)


def _check_sections(params: Mapping, source: str) -> None:
    """Build every section's dataclass so cross-field checks run at workflow start too."""
    for name, cls in SECTIONS.items():
        if name in params:
            try:
                cls.from_dict(params[name])
            except ConfigError as e:
                raise ConfigError(f"{source}: {e}") from None


# The sources of variation a run's seed decides (params.yaml `seeds`; issue 45 §1): each its own
# seed, null = `seed`, so a run that sets none of them keeps every byte it had.
SEED_KINDS = ("data", "benchmark", "train", "search")


def resolve_seeds(params: Mapping) -> dict[str, int]:
    """Each of :data:`SEED_KINDS`' seed: ``seeds.<kind>``, or ``seed`` where that is null.

    >>> resolve_seeds({"seed": 3, "seeds": {"search": 7}})
    {'data': 3, 'benchmark': 3, 'train': 3, 'search': 7}
    """
    own = params.get("seeds") or {}
    return {k: int(own[k]) if own.get(k) is not None else int(params.get("seed", 0))
            for k in SEED_KINDS}  # fmt: skip


# Generated benchmarks decontaminated on their own side when they are drawn (burnqed.data.proplogic:
# the dev split drops every candidate equal to a training, pool or test theorem): an eval on one
# adds nothing to the decontamination of the training data.
SELF_DECONTAMINATED = ("proplogic_dev",)


def eval_benchmarks(params: Mapping) -> list[str]:
    """``eval.benchmark`` as a list of benchmark file names (``<name>_<split>``)."""
    names = (params.get("eval") or {}).get("benchmark") or []
    return [names] if isinstance(names, str) else list(names)


def decontamination_benchmarks(params: Mapping) -> list[str]:
    """The benchmarks no training data may state: ``data.decontaminate_against`` (null: none) and
    every evaluated benchmark not among them — but a generated split decontaminated when it was
    drawn (:data:`SELF_DECONTAMINATED`).  Kept apart from ``eval.benchmark`` so a development eval
    (the dev split, ``config/dev.yaml``) trains the very models a confirmation eval does.

    >>> decontamination_benchmarks({"data": {"decontaminate_against": ["proplogic_test"]},
    ...                             "eval": {"benchmark": "proplogic_dev"}})
    ['proplogic_test']
    >>> decontamination_benchmarks({"data": {"decontaminate_against": None},
    ...                             "eval": {"benchmark": "minif2f_test"}})
    ['minif2f_test']
    """
    names = list((params.get("data") or {}).get("decontaminate_against") or [])
    return names + [n for n in eval_benchmarks(params)
                    if n not in names and n not in SELF_DECONTAMINATED]  # fmt: skip


# --------------------------------------------------------------------------------------------
# Section dataclasses (mirror the schema; defaults mirror params.yaml, checked by a test)

C = TypeVar("C", bound="Section")


@dataclass(frozen=True)
class Section:
    section: ClassVar[str] = ""

    @classmethod
    def from_dict(cls: type[C], d: Mapping[str, Any] | None) -> C:
        """Build from a (validated) section dict; lists become tuples; unknown keys are errors."""
        d = dict(d or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"{cls.section}: unknown key(s) {unknown}")
        kwargs = {k: _freeze(v) for k, v in d.items()}
        try:
            obj = cls(**kwargs)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"{cls.section}: {e}") from None
        return obj

    def to_dict(self) -> dict:
        return {f.name: _thaw(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def _require(self, ok: bool, key: str, message: str) -> None:
        if not ok:
            raise ConfigError(f"{self.section}.{key}: {message}")

    def _require_one_of(self, key: str, choices: Sequence[str]) -> None:
        """``key``'s value is one of ``choices`` (one line naming the key, the choices, the value)."""
        value = getattr(self, key)
        self._require(value in choices, key, f"must be one of {', '.join(choices)} (got {value!r})")


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return {k: _freeze(x) for k, x in v.items()}
    return v


def _thaw(v: Any) -> Any:
    if isinstance(v, tuple):
        return [_thaw(x) for x in v]
    if isinstance(v, dict):
        return {k: _thaw(x) for k, x in v.items()}
    return v


@dataclass(frozen=True)
class ProplogicConfig:
    theorems: int = 2000
    min_depth: int = 1
    max_depth: int = 6
    variables: int = 4
    test_theorems: int = 100
    # Proof depths of the held-out valid/test theorems (None: the training range).  The demo
    # holds out *deeper* theorems than it trains on, so later iterations have something to learn.
    held_out_min_depth: int | None = None
    held_out_max_depth: int | None = None
    # The development split (proplogic_dev): its size (None: test_theorems).
    dev_theorems: int | None = None
    # Proof depths [min, max] of the search pool (the valid split) alone (None: the held-out
    # depths), so the pool can span difficulty — Polu et al.'s curriculum — while the benchmarks
    # keep theirs.  (Not search.pool_min_depth, which drops short known proofs from later pools.)
    pool_depths: tuple[int, int] | None = None

    @property
    def held_out_depths(self) -> tuple[int, int]:
        lo = self.min_depth if self.held_out_min_depth is None else self.held_out_min_depth
        hi = self.max_depth if self.held_out_max_depth is None else self.held_out_max_depth
        return lo, hi

    def __post_init__(self) -> None:
        if self.pool_depths is not None:
            object.__setattr__(self, "pool_depths", tuple(self.pool_depths))

    @property
    def search_pool_depths(self) -> tuple[int, int]:
        """The search pool's proof depths: ``pool_depths``, else the held-out depths."""
        return self.held_out_depths if self.pool_depths is None else self.pool_depths


@dataclass(frozen=True)
class DataConfig(Section):
    section: ClassVar[str] = "data"
    sources: tuple[dict, ...] = (
        {"name": "leandojo", "format": "leandojo", "path": "data/raw/leandojo_benchmark_4/random"},
    )
    benchmarks: tuple[str, ...] = ("minif2f", "proofnet")
    search_pool: tuple[dict, ...] = ({"benchmark": "minif2f", "split": "valid"},)
    banned_words: tuple[str, ...] = ("sorry", "admit", "cheat")
    max_tokens: int = 1024
    tokenizer: str = "deepseek-ai/DeepSeek-Prover-V2-7B"
    val_fraction: float = 0.02
    proplogic: ProplogicConfig = field(default_factory=ProplogicConfig)
    decontamination: str = "refuse"
    # The benchmarks no training data may state, beside eval.benchmark: decontamination_benchmarks.
    decontaminate_against: tuple[str, ...] | None = ("minif2f_test", "proofnet_valid")

    def __post_init__(self) -> None:
        if isinstance(self.proplogic, Mapping):
            object.__setattr__(self, "proplogic", ProplogicConfig(**self.proplogic))
        p = self.proplogic
        self._require(
            p.min_depth <= p.max_depth,
            "proplogic.min_depth",
            f"must be <= proplogic.max_depth ({p.min_depth} > {p.max_depth})",
        )
        lo, hi = p.held_out_depths
        self._require(
            lo <= hi,
            "proplogic.held_out_min_depth",
            f"must be <= the held-out max depth ({lo} > {hi})",
        )
        lo, hi = p.search_pool_depths
        self._require(
            lo <= hi, "proplogic.pool_depths", f"[min, max] with min <= max (got [{lo}, {hi}])"
        )
        names = [s["name"] for s in self.sources]
        self._require(
            len(names) == len(set(names)), "sources", f"source names must be unique (got {names})"
        )
        for i, s in enumerate(self.sources):
            self._require(
                s["format"] == "proplogic" or bool(s.get("path")),
                f"sources[{i}].path",
                f"format {s['format']!r} reads a local file: give its path",
            )

    def to_dict(self) -> dict:
        d = super().to_dict()
        d["proplogic"] = dataclasses.asdict(self.proplogic)
        return d


@dataclass(frozen=True)
class LeanConfig(Section):
    section: ClassVar[str] = "lean"
    repl_command: tuple[str, ...] = ("repl",)
    imports: tuple[str, ...] = ("Mathlib",)
    options: dict[str, Any] = field(default_factory=dict)
    project_path: str | None = None
    workers: int = 6
    ready_timeout_s: float = 120.0
    # The per-tactic limit that decides a tactic's result: `set_option maxHeartbeats N in <tac>`
    # (Lean's units: N·1000 heartbeats); None sends tactics unwrapped (the REPL's own limit).
    tactic_heartbeats: int | None = 200000
    # Wall-clock backstops behind it: the REPL's own `timeout` (a cooperative interrupt fails the
    # tactic and keeps the process), then `hang_grace_s` more before the client kills a REPL that
    # has not answered (a hard hang).
    tactic_timeout_s: float = 30.0
    hang_grace_s: float = 2.0
    spares: int = 2  # pre-started REPLs that take a killed or recycled worker's place at once
    verifiers: int = 2  # whole-file checks at once, each in a fresh pre-started process
    # goal.save a state when replaying its path would cost this many saves (both measured as the
    # run goes); 0: every state; None: never.
    save_factor: float | None = 10.0
    recycle_after_requests: int = 1000
    recycle_after_s: float = 1800.0
    memory_limit_mb: int | None = 16384
    cpu_limit_s: float | None = None
    banned_tactics: tuple[str, ...] = (
        r"\bsorry\b",
        r"\bsorryAx\b",
        r"\badmit\b",
        r"\bnative_decide\b",
        r"\bset_option\b",
        "#exit",
        r"\bimport\b",
        r"\bopen\b.*\bin\b",
        r"\baxiom\b",
        r"\bunsafe\b",
        r"\bimplemented_by\b",
        r"\bextern\b",
        r"\bdecreasing_by\b",
        "#eval",
        r"\brun_tac\b",
        r"\bLean\.Elab\b",
        r"(?<![\w.'])trace(?:_state)?\b",
        r"\b(?:dbg_trace|dbgTrace\w*|log(?:Info|Warning|Error)\w*)\b",
        r"#(?:print|eval|exit|check|reduce|synth|guard_msgs|exec|where|help|find|simp|norm_num|conv|lint|time|count_heartbeats)",
        r"(?<![a-z])native|Native",
        r"[Rr]educe(?:Bool|Nat)\b",
        r"\brun_(?:cmd|elab|meta|tac)\b",
        r"(?<![\w.'])(?:macro|macro_rules|elab|elab_rules|syntax|declare_syntax_cat|notation|infix[lr]?|prefix|postfix|simproc|dsimproc)\b",
        r"(?<![\w.'])(?:theorem|lemma|def|example|instance|abbrev|structure|class|inductive|opaque|mutual|namespace|section|universe|variable|attribute|export|initialize|builtin_initialize)\b",
        r"\n\s*(?:@\[|/--|#|(?:end|open|noncomputable|private|protected|partial|deriving)\b)",
    )
    allowed_axioms: tuple[str, ...] = ("propext", "Classical.choice", "Quot.sound")

    def __post_init__(self) -> None:
        import re

        self._require(len(self.repl_command) > 0, "repl_command", "must name the REPL program")
        self._require(
            self.tactic_heartbeats is None or self.tactic_heartbeats >= 1,
            "tactic_heartbeats",
            "must be >= 1 (Lean's maxHeartbeats units), or null",
        )
        self._require(self.hang_grace_s > 0, "hang_grace_s", "must be > 0")
        self._require(self.spares >= 0, "spares", "must be >= 0")
        self._require(self.verifiers >= 1, "verifiers", "must be >= 1")
        self._require(
            self.save_factor is None or self.save_factor >= 0,
            "save_factor",
            "must be >= 0, or null (never save)",
        )
        for i, pat in enumerate(self.banned_tactics):
            try:
                re.compile(pat)
            except re.error as e:
                raise ConfigError(
                    f"lean.banned_tactics[{i}]: not a regular expression: {e}"
                ) from None


@dataclass(frozen=True)
class PolicyConfig(Section):
    section: ClassVar[str] = "policy"
    backend: str = "sglang"
    server_url: str | None = None
    server_command: tuple[str, ...] | None = (
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "{model}",
        "--port",
        "{port}",
        "--host",
        "127.0.0.1",
        "--mem-fraction-static",
        "0.8",
        "--log-level",
        "warning",
        "--enable-deterministic-inference",
        "--disable-radix-cache",
    )
    embedding_server_url: str | None = None
    embedding_server_command: tuple[str, ...] | None = (
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "{model}",
        "--port",
        "{port}",
        "--host",
        "127.0.0.1",
        "--is-embedding",
        "--mem-fraction-static",
        "0.1",
        "--enable-deterministic-inference",
        "--disable-radix-cache",
    )
    health_timeout_s: float = 900.0
    request_timeout_s: float = 300.0
    retry_total_s: float = 120.0
    max_new_tokens: int = 128
    top_p: float = 0.95
    pooling: str = "last"
    dtype: str = "auto"
    device: str = "auto"
    shared_prefill: bool = False

    def __post_init__(self) -> None:
        if self.backend in ("sglang", "openai"):
            self._require(
                self.server_url is not None or bool(self.server_command),
                "server_url",
                f"backend {self.backend!r} needs server_url or server_command",
            )


# How a search pops its frontier: best-first by priority, or in a seeded random order
# (burnqed.search.engine; the noise search's search.noise_order).
SEARCH_ORDERS = ("priority", "random")


@dataclass(frozen=True)
class SearchConfig(Section):
    section: ClassVar[str] = "search"
    max_nodes: int = 100
    max_depth: int = 50
    timeout_s: float | None = None
    expansions_per_step: int = 2
    num_candidates: int = 8
    temperature: float = 0.8
    temperature_with_ebm: float = 1.0
    noise_temperature: float = 1.2
    noise_order: str = "random"  # the noise search's frontier order (SEARCH_ORDERS)
    depth_normalisation: float = 0.0
    logprob_weight: float = 1.0
    # "fitted": the value model's own fitted weight (its artifact's energy_weight block), or a number
    energy_weight: float | str = "fitted"
    batch_generate_size: int = 32
    batch_encode_size: int = 8
    concurrency: int = 32
    attempts: int = 1
    checkpoint_every: int = 50
    shards: int = 1
    pool_size: int | None = None
    pool_min_depth: int = 1
    probe_tactics: tuple[str, ...] = (
        "norm_num",
        "simp",
        "linarith",
        "omega",
        "decide",
        "rfl",
        "trivial",
    )
    max_error_fraction: float = 0.05

    def __post_init__(self) -> None:
        w = self.energy_weight
        self._require(
            w == "fitted" or (isinstance(w, int | float) and not isinstance(w, bool) and w >= 0),
            "energy_weight",
            f"must be 'fitted' or a number >= 0 (got {w!r})",
        )
        self._require_one_of("noise_order", SEARCH_ORDERS)


@dataclass(frozen=True)
class EvalConfig(Section):
    section: ClassVar[str] = "eval"
    budgets: tuple[int, ...] = (100, 300, 600)
    pass_n: int = 1
    num_candidates: int = 16
    temperature: float = 1.0
    benchmark: str = "minif2f_test"
    control_budget_factor: int = 2

    def __post_init__(self) -> None:
        self._require(
            list(self.budgets) == sorted(set(self.budgets)),
            "budgets",
            f"must be strictly increasing (got {list(self.budgets)})",
        )


# The report's go/no-go gates judged against a threshold: each has `<gate>_target` and
# `<gate>_red_line` in ReportConfig.  (The EBM ablation, `ebm_gain`, is judged by the paired test of
# burnqed.eval.paired instead and has no threshold.)
THRESHOLD_GATES = (
    "gain_vs_baseline",
    "gain_vs_previous",
    "centroid_separation",
    "probe_balanced_accuracy",
    "ebm_rank1",
    "unique_candidates",
)


@dataclass(frozen=True)
class ReportConfig(Section):
    """Go/no-go gates of the reports: each metric has a target (go at or above it) and a red line
    (no-go below it); between the two the report says "watch"."""

    section: ClassVar[str] = "report"
    gain_vs_baseline_target: float = 0.0
    gain_vs_baseline_red_line: float = -0.02
    gain_vs_previous_target: float = 0.0
    gain_vs_previous_red_line: float = -0.02
    centroid_separation_target: float = 0.5
    centroid_separation_red_line: float = 0.3
    probe_balanced_accuracy_target: float = 0.8
    probe_balanced_accuracy_red_line: float = 0.6
    ebm_rank1_target: float = 0.5
    ebm_rank1_red_line: float = 0.3
    unique_candidates_target: float = 2.0
    unique_candidates_red_line: float = 1.5
    energy_bins: int = 40
    tree_files: int = 20  # search-tree pages per list (newly solved, unsolved) beside each report
    # compare.md flags an eval whose refuted cached Lean answers pass this share of its questions
    cache_refuted_max: float = 0.0

    def __post_init__(self) -> None:
        self._require(self.tree_files >= 0, "tree_files", f"must be >= 0, got {self.tree_files}")
        self._require(
            0.0 <= self.cache_refuted_max <= 1.0,
            "cache_refuted_max",
            f"must be within [0, 1], got {self.cache_refuted_max}",
        )
        for gate in THRESHOLD_GATES:
            target, red = getattr(self, f"{gate}_target"), getattr(self, f"{gate}_red_line")
            self._require(
                red <= target, f"{gate}_red_line", f"must be <= {gate}_target ({red} > {target})"
            )


@dataclass(frozen=True)
class TinyBaseConfig:
    """The ``model.tiny`` section: the demo model's sizes and its from-scratch training budget.

    Defaults are the SPEC §4.4 demo model and the budget measured to make it useful (the table in
    the module docstring); ``max_seconds`` caps the wall time on a machine too slow for the budget,
    at the price of reproducibility (where the clock stops training depends on the machine).
    """

    # -- model (burnqed.policy.tiny.build_tiny_model) --
    vocab_size: int = 512  # BPE vocabulary upper bound (the learned one may be smaller)
    hidden_size: int = 128
    layers: int = 2
    heads: int = 4  # head_dim = hidden_size / heads must be one the servers accept (32, 64, …)
    intermediate_size: int = 336  # SwiGLU FFN width
    max_length: int = 512  # tokens per example; longer pairs are skipped (and counted)
    # -- training (full-parameter, completion-only loss, AdamW + cosine with warm-up) --
    steps: int = 3000  # optimiser steps (the cosine schedule ends here)
    max_seconds: float | None = None  # wall-clock cap on the training loop; None: steps only
    batch_size: int = 32  # sequences per step
    learning_rate: float = 3.0e-3  # peak AdamW rate; 6e-3 measured worse at 2000 steps
    warmup_steps: int = 100
    weight_decay: float = 0.01
    # -- bookkeeping --
    log_every: int = 50  # steps between metrics.jsonl records
    eval_pairs: int = 200  # held-out pairs for the accuracy check (0: skip)
    # Train only on the pairs of proofs with at most this many steps (None: all).
    max_proof_steps: int | None = None

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "layers", "heads", "intermediate_size",
                     "max_length", "steps", "batch_size", "log_every"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ConfigError(f"model.tiny.{name}: must be >= 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "eval_pairs"):
            if getattr(self, name) < 0:
                raise ConfigError(f"model.tiny.{name}: must be >= 0, got {getattr(self, name)}")
        if not 0 < self.learning_rate <= 1:
            raise ConfigError(
                f"model.tiny.learning_rate: must be in (0, 1], got {self.learning_rate}"
            )
        if self.max_seconds is not None and self.max_seconds <= 0:
            raise ConfigError(
                f"model.tiny.max_seconds: must be > 0 or null, got {self.max_seconds}"
            )
        if self.hidden_size % self.heads:
            raise ConfigError(
                f"model.tiny.heads: hidden_size {self.hidden_size} is not divisible by {self.heads}"
            )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> TinyBaseConfig:
        d = dict(d or {})
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ConfigError(f"model.tiny: unknown key(s) {unknown}; known: {sorted(names)}")
        try:
            return cls(**d)
        except TypeError as e:
            raise ConfigError(f"model.tiny: {e}") from None


@dataclass(frozen=True)
class ModelConfig(Section):
    section: ClassVar[str] = "model"
    base: str = "deepseek-ai/DeepSeek-Prover-V2-7B"
    tiny: TinyBaseConfig = field(default_factory=TinyBaseConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.tiny, TinyBaseConfig):
            object.__setattr__(self, "tiny", TinyBaseConfig.from_dict(self.tiny))

    def to_dict(self) -> dict:
        return {"base": self.base, "tiny": dataclasses.asdict(self.tiny)}


JOINT_GUARDS = ("threshold", "paired")  # sft.joint_guard


@dataclass(frozen=True)
class SFTConfig(Section):
    section: ClassVar[str] = "sft"
    quantization: str = "nf4"
    gpu_layout: str = "packed_bf16"  # the step on CUDA (burnqed.train.joint); the CPU pads, float32
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: tuple[str, ...] = (
        "q_proj",
        "k_proj",
        "v_proj",
        "o_proj",
        "gate_proj",
        "up_proj",
        "down_proj",
    )
    learning_rate: float = 2.0e-4
    lr_scheduler: str = "cosine"
    warmup_steps: int = 100
    batch_size: int = 8
    grad_accum: int = 4
    max_length: int = 1024
    max_steps: int = 1500
    lr_decay: float = 0.5
    later_max_steps: int = 800
    base_pair_subsample: int = 10000
    positive_upsample: int = 10
    eval_steps: int = 100
    select_by: str = "plateau"
    plateau_tolerance: float = 0.01
    mode: str = "joint"
    joint_lambda: float = 0.1
    joint_head_learning_rate: float = 3.0e-5
    joint_scale_learning_rate: float = 1.0e-2
    joint_groups_per_step: int = 4
    joint_state_max_length: int = 512
    joint_monitor_every: int = 50
    joint_save_every: int = 100
    joint_min_separation: float | None = 0.3
    joint_min_probe_accuracy: float | None = 0.6
    joint_sft_loss_ceiling: float | None = 0.5
    joint_sft_loss_ceiling_after: int = 2000
    # How a fall of the held-out separation or probe across its red line stops training
    # (burnqed.train.joint._check_embeddings): "threshold", a fall beyond twice the probe's standard
    # error; "paired", the probe's own held-out states compared with the start's (a one-sided exact
    # McNemar test, Bonferroni over the run's checks), the fall on two checks in a row.
    joint_guard: str = "threshold"

    def __post_init__(self) -> None:
        self._require_one_of("joint_guard", JOINT_GUARDS)


@dataclass(frozen=True)
class SplitConfig(Section):
    """The one theorem split (:mod:`burnqed.split`): SFT's validation and test theorems, which are
    also every value-model check's held-out theorems."""

    section: ClassVar[str] = "split"
    val_fraction: float = 0.1
    # Another share whose steps are a test set: never trained on, never used to choose the
    # checkpoint; the held-out proof-step loss reported is measured there.
    test_fraction: float = 0.1

    def __post_init__(self) -> None:
        held_out = self.val_fraction + self.test_fraction
        self._require(
            held_out < 1,
            "test_fraction",
            f"val_fraction + test_fraction must be < 1 (got {held_out:g}): "
            "some theorems must be left to train on",
        )


EBM_FALLBACKS = ("none", "depth_twin")  # ebm.fallback


@dataclass(frozen=True)
class EBMConfig(Section):
    section: ClassVar[str] = "ebm"
    hidden_sizes: tuple[int, ...] = (2048, 1024, 512)
    dropout: float = 0.15
    negatives: int = 7
    remaining_steps_weight: float = 1.0
    steps: int = 1500
    batch_size: int = 128
    learning_rate: float = 1.0e-4
    temperature_learning_rate: float = 0.05
    temperature_init: float = 1.0
    temperature_min: float = 0.05
    temperature_max: float = 20.0
    checkpoint_every: int = 20000
    embed_batch_size: int = 64
    log_every: int = 50
    save_every: int = 250
    fit_folds: int = 5
    fit_depth: bool = False
    # What an iteration ships when its joint head's fitted energy weight is 0 (the head ranks no
    # held-out decision better than without it): "none", the head at weight 0 (the log-prob alone);
    # "depth_twin", the iteration's depth twin (burnqed.train.joint.export_joint_ebm).
    fallback: str = "none"

    def __post_init__(self) -> None:
        self._require(
            self.temperature_min < self.temperature_init < self.temperature_max,
            "temperature_init",
            f"must lie strictly between temperature_min and temperature_max "
            f"({self.temperature_min} < {self.temperature_init} < {self.temperature_max})",
        )
        self._require_one_of("fallback", EBM_FALLBACKS)


# The top-level keys that are not sections are read where they act: `seed` and `iterations` by the
# rules, `threads` by the rules (a machine setting), `cpu_isa` by the entry points — the Snakefile,
# the CLI, the tests' conftest — through burnqed.isa, whose SETTINGS the schema's enum mirrors.
SECTIONS: dict[str, type[Section]] = {
    cls.section: cls
    for cls in (
        DataConfig,
        LeanConfig,
        PolicyConfig,
        SearchConfig,
        EvalConfig,
        ReportConfig,
        ModelConfig,
        SFTConfig,
        SplitConfig,
        EBMConfig,
    )
}
