# Helpers shared by the rule files; keep this file tiny.
from functools import cache
from pathlib import Path

from burnqed import provenance
from burnqed.config import decontamination_benchmarks, resolve_seeds


# Expert iteration i: any non-negative integer (`iterations` in params.yaml says how many are built).
wildcard_constraints:
    i="[0-9]+",


def seed_of(kind):
    """The seed of one source of variation (params.yaml `seeds`: data, benchmark, train, search;
    null = `seed`): what a rule's job samples with."""
    return resolve_seeds(config)[kind]


def benchmark_seed(wildcards):
    """The seed of a generated held-out split: the benchmark's for test and dev; none for valid
    (the search pool is the data's: seed_of("data")), so a new benchmark seed reruns no pool.
    """
    return None if wildcards.split == "valid" else seed_of("benchmark")


@cache  # once per parse: several rules share a shim
def code_digest(script, *sections):
    """What the rule's job runs, passed as a param: the digest of every file — the shim
    workflow/scripts/<script>.py, the burnqed modules and package data it reaches, and the burnqed
    modules that commands in the config `sections` launch (lean.repl_command: burnqed.proplogic) —
    the instruction-set pin its torch runs at (cpu_isa: every job's numbers depend on it) and, for
    the rules given the `lean` section (every search and eval), the Lean toolchain, Mathlib and
    Pantograph version they run against.

    Snakemake does not see edits inside the package, but it reruns a job whose params changed.
    """
    launched = provenance.launched_modules(*(config[s] for s in sections))
    script = f"workflow/scripts/{script}.py"
    digest = provenance.code_digest(script, *launched, root=Path(workflow.basedir))
    runs = {"files": digest, "cpu_isa": config["cpu_isa"]}
    if "lean" in sections:
        runs["lean"] = lean_toolchain()
    return runs


def cache_recheck_setting():
    """params.yaml `cache_recheck` as a resource: a string, since Snakemake rounds a number."""
    return str(config["cache_recheck"])


@cache  # once per parse: it runs `repl_command --version`
def lean_toolchain():
    """lean.project_path's toolchain and packages (Mathlib) and the REPL's --version: what the
    search's resume fingerprint sees of Lean, so a new one reruns every search and eval.
    """
    return provenance.lean_toolchain(config["lean"])


def earlier_searches(wildcards):
    """The finished searches before iteration i: results/iter_j/search for j < i and iteration 0's
    noise search (what SFT learns from and what the next search pool excludes)."""
    i = int(wildcards.i)
    if i == 0:
        return []
    searches = [f"results/iter_{j}/search/manifest.json" for j in range(i)]
    return [*searches, "results/iter_0/search_noise/manifest.json"]


def sft_warm_start(wildcards):
    """SFT inputs beyond the pairs at iteration i >= 1: adapter i-1 and the earlier searches."""
    if int(wildcards.i) == 0:
        return {}
    return {
        "previous_adapter": f"models/iter_{int(wildcards.i) - 1}/adapter",
        "searches": earlier_searches(wildcards),
    }


def joint_warm_head(wildcards):
    """Joint training's head starts from configuration A's EBM (trained on the embeddings of the
    model joint training starts from, models/iter_{i-1}/merged)."""
    if config["sft"]["mode"] != "joint" or int(wildcards.i) == 0:
        return {}
    return {"warm_head": f"models/iter_{wildcards.i}/configs/A/ebm"}


def joint_fallback(wildcards):
    """What the exported joint head falls back to when its fitted energy weight is 0
    (ebm.fallback: depth_twin): iteration {i}'s depth twin; nothing otherwise."""
    if config["ebm"]["fallback"] != "depth_twin":
        return {}
    return {"fallback": f"models/iter_{wildcards.i}/depth_twin"}


def decontamination_benchmark_files(config):
    """The benchmark files no training data may state (data.decontaminate_against, else
    eval.benchmark): fixed apart from the eval's benchmark, so a development eval (config/dev.yaml)
    trains the same models as a confirmation eval."""
    return [f"data/benchmarks/{n}.jsonl" for n in decontamination_benchmarks(config)]


def search_pool_benchmarks(config):
    """The benchmark split files the search pool reads (its {benchmark, split} entries)."""
    return [
        f"data/benchmarks/{e['benchmark']}_{e['split']}.jsonl"
        for e in config["data"]["search_pool"]
        if "benchmark" in e
    ]


def control_evals(config):
    """The search-longer control: the iteration before the last, given more search (none with a
    single iteration)."""
    n = config["iterations"]
    return [f"results/iter_{n - 2}/eval_longer.json"] if n >= 2 else []


def search_seed_salt(wildcards):
    """The salt of iteration {i}'s search seeds (burnqed.policy.salted_seed): none at iteration 0
    (the pool search; the noise search has its own, "search_noise/iter_0"); "search/iter_{i}" after,
    so a search of the theorems the searches before it failed draws new samples, not theirs again.
    """
    i = int(wildcards.i)
    return f"search/iter_{i}" if i > 0 else None


def search_only_salt(wildcards):
    """The salt of iteration {i}'s search-only search, "search_only/iter_{i}" (search_only_shard),
    distinct from iteration {i}'s own search ("search/iter_{i}") and from iteration 0's (unsalted),
    so the search-only arm draws samples of its own."""
    return f"search_only/iter_{int(wildcards.i)}"


def eval_search_only_salt(wildcards):
    """The salt of iteration {i}'s search-only eval, "eval_search_only/iter_{i}"
    (eval_search_only's): iteration 0's model evaluated again with samples of its own, distinct
    from every other eval's (unsalted: they pair) and every search's."""
    return f"eval_search_only/iter_{int(wildcards.i)}"


def eval_search_only_label(wildcards):
    """The label of iteration {i}'s search-only eval: "iter_{i} search only"."""
    return f"iter_{int(wildcards.i)} search only"


def benchmark_curve_evals(config, kind):
    """One arm's evals of the benchmark comparison (compute_benchmark's input): kind "eval",
    expert iteration's of iterations 0 …; "eval_search_only", search only's of iterations 1 …
    """
    first = 0 if kind == "eval" else 1
    return [f"results/iter_{i}/{kind}.json" for i in range(first, config["iterations"])]


def search_only_earlier(wildcards):
    """What the search-only arm searched before iteration {i} >= 2: iteration 0's searches (both
    arms' first step, the noise search too, as in earlier_searches) and its own of 1 … i-1.
    """
    own = [
        f"results/iter_{j}/search_only/manifest.json"
        for j in range(1, int(wildcards.i))
    ]
    return [
        "results/iter_0/search/manifest.json",
        "results/iter_0/search_noise/manifest.json",
        *own,
    ]


def search_only_pool(wildcards):
    """The pool the search-only arm searches at iteration {i}: the pool theorems it has not proved
    (rule search_only_pool_select).  At iteration 1 both arms have searched only iteration 0's
    searches, so the selection is expert iteration's own (the same inputs, params and seed):
    results/iter_1/search_pool.jsonl, not a second copy of it."""
    i = int(wildcards.i)
    if i == 1:
        return "results/iter_1/search_pool.jsonl"
    return f"results/iter_{i}/search_only_pool.jsonl"


def comparison_searches(config, kind):
    """One arm's searches of iterations 1 … of the compute comparison (compute_report's input):
    kind "search", expert iteration's own (the last iteration's too, which nothing else needs), or
    "search_only", iteration 0's model on the search-only arm's pools."""
    n = config["iterations"]
    return [f"results/iter_{i}/{kind}/manifest.json" for i in range(1, n)]


def compute_files(config):
    """What the compute comparison writes (compute_report's output, the default target's): none
    with a single iteration, where there is nothing to compare."""
    if config["iterations"] < 2:
        return []
    return [
        "results/compute.md",
        "results/compute.json",
        "results/compute/expert_iteration.json",
        "results/compute/search_only.json",
    ]


def ebm_searches(wildcards):
    """Manifests of the searches the EBM of iteration {i} learns from (= earlier_searches)."""
    return earlier_searches(wildcards)


# The value-model configurations of an iteration i >= 1 beside the main line (reference
# value-model-v2.md §4; README "Value-model configurations"): A — the previous model with a decoupled
# EBM on its frozen embeddings; S — this iteration's model trained SFT-only with a decoupled EBM;
# B — the jointly trained model with a decoupled EBM; the main line is C (joint model, joint head).
# With sft.mode: sft the main line is already SFT-only with a decoupled EBM: only A remains.
wildcard_constraints:
    c="A|S|B",


def value_configs(config):
    """The configurations built beside the main line (sft.mode decides)."""
    return ["A", "S", "B"] if config["sft"]["mode"] == "joint" else ["A"]


def config_model(wildcards):
    """The policy of configuration {c} of iteration {i}."""
    i = int(wildcards.i)
    return {
        "A": f"models/iter_{i - 1}/merged",
        "S": f"models/iter_{i}/configs/S/merged",
        "B": f"models/iter_{i}/merged",
    }[wildcards.c]


def config_embeddings(wildcards):
    """The embeddings configuration {c}'s decoupled EBM learns from (B: the main line's)."""
    if wildcards.c == "B":
        return f"results/iter_{wildcards.i}/embeddings/manifest.json"
    return f"results/iter_{wildcards.i}/configs/{wildcards.c}/embeddings/manifest.json"


def features_label(wildcards):
    """``iter_1 features``: how reports name iteration {i}'s eval with the feature value."""
    return f"iter_{wildcards.i} features"


def depth_twin_label(wildcards):
    """``iter_1 depth twin`` (iteration {i}'s model), ``iter_1 A depth twin`` (configuration {c}'s)."""
    c = wildcards.get("c")
    return (
        f"iter_{wildcards.i} {c} depth twin" if c else f"iter_{wildcards.i} depth twin"
    )


def depth_twin_eval(i, c):
    """The depth twin's eval of configuration ``c``'s policy: B and C share iteration i's model."""
    if c in ("B", "C"):
        return f"results/iter_{i}/eval_depth_twin.json"
    return f"results/iter_{i}/configs/{c}/eval_depth_twin.json"


def features_replay_label(wildcards):
    """The feature value's replay runs --live: an equality check with its live eval, named so."""
    return f"iter_{wildcards.i} features (live replay)"


def config_label(wildcards):
    """``iter_1 A``: how reports name configuration {c} of iteration {i}."""
    return f"iter_{wildcards.i} {wildcards.c}"


def config_no_ebm_label(wildcards):
    return f"iter_{wildcards.i} S no EBM"


def config_twin(i, c):
    """The eval of configuration ``c`` (A, S, B, C) of iteration ``i`` without its value head: the
    same policy, theorems, seeds and temperature.  A's policy is iteration i-1's: iteration 0's
    eval.json (it has none) at i = 1, iteration i-1's eval_no_ebm after (its eval.json has one);
    B and C share iteration i's eval_no_ebm."""
    if c == "A":
        return (
            "results/iter_0/eval.json"
            if i == 1
            else f"results/iter_{i - 1}/eval_no_ebm.json"
        )
    if c == "S":
        return f"results/iter_{i}/configs/S/eval_no_ebm.json"
    return f"results/iter_{i}/eval_no_ebm.json"


def config_recording(wildcards):
    """What configuration {c}'s replay searches again: its no-EBM twin's recorded trees."""
    return config_twin(int(wildcards.i), wildcards.c)


def replay_label(wildcards):
    """``iter_1 C (replay)``: how reports name the replay prediction of configuration {c}
    (C, the main line, has no {c} wildcard)."""
    return f"iter_{wildcards.i} {wildcards.get('c', 'C')} (replay)"


def config_embedding_model(wildcards):
    """The policy whose frozen embeddings configuration {c} (A or S) trains its EBM on."""
    return config_model(wildcards)


def config_sets(config):
    """Per iteration i >= 1: the evals (with and without value head) and EBM metrics of its
    value-model configurations, as burnqed.eval.compare.run takes them."""
    out = {}
    for i in range(1, config["iterations"]):
        evals = {"C": f"results/iter_{i}/eval.json"}
        metrics = {"C": f"results/iter_{i}/ebm_metrics.json"}
        for c in value_configs(config):
            evals[c] = f"results/iter_{i}/configs/{c}/eval.json"
            metrics[c] = f"results/iter_{i}/configs/{c}/ebm_metrics.json"
        for c in [*value_configs(config), "C"]:
            evals[f"{c}0"] = config_twin(i, c)
            # the stronger control: the open goals and a fitted depth term (rule eval_depth_twin)
            evals[f"{c}D"] = depth_twin_eval(i, c)
            # the EBM's replay prediction over the twin's trees (rules replay_ebm, replay_config)
            evals[f"{c}_replay"] = (
                f"results/iter_{i}/replay.json"
                if c == "C"
                else f"results/iter_{i}/configs/{c}/replay.json"
            )
        # The feature value (the EBM's control), paired with C0, and its replay prediction.
        evals["F"] = f"results/iter_{i}/eval_features.json"
        evals["F_replay"] = f"results/iter_{i}/replay_features.json"
        out[i] = {"iteration": i, "evals": evals, "metrics": metrics}
    return out


def config_files(config):
    """Every file config_sets names (compare_ablations' inputs)."""
    return sorted({p for s in config_sets(config).values() for p in _set_files(s)})


def _set_files(s):
    return [p for key in ("evals", "metrics") for p in s[key].values()]


# The default target (the Snakefile's `all`) is the headline: per iteration i >= 1 the main line C
# against its two twins — its eval without a value model (C0) and with the depth twin (CD) — and
# no EBM metrics.  The rest of config_sets is the attribution set, the `ablations` target.
HEADLINE = ("C", "C0", "CD")


def headline_sets(config):
    """config_sets cut to the headline: what compare, the reports and the summary read."""
    return {
        i: {
            **s,
            "evals": {k: v for k, v in s["evals"].items() if k in HEADLINE},
            "metrics": {},
        }
        for i, s in config_sets(config).items()
    }


def headline_files(config):
    """Every file headline_sets names (compare's inputs)."""
    return sorted({p for s in headline_sets(config).values() for p in _set_files(s)})


def attribution_files(config):
    """What only the `ablations` target builds of config_sets' files — configurations A, S and B
    (evals, twins, EBM metrics), every replay, the feature value, C's EBM metrics."""
    return sorted(set(config_files(config)) - set(headline_files(config)))


def iteration_config_set(wildcards):
    """The headline's value-model section of iteration {i}: C and its two twins (none for
    iteration 0)."""
    return headline_sets(config).get(int(wildcards.i))


def iteration_config_files(wildcards):
    s = iteration_config_set(wildcards)
    return sorted(set(_set_files(s))) if s else []


# Scheduling (docs/performance.md "Scheduling").  Among the jobs whose inputs exist, `snakemake
# --cores N` starts the set of the largest summed priority that fits in N cores.  A job's tier
# follows the estimated length of its longest chain to the end of the run (the demo's critical
# path: data, base, iteration 0's training and searches, configuration A's EBM, joint training,
# iteration 1's evals); its priority is 3**tier for a one-thread job and 2 * 3**tier + 1 for a
# two-thread one (params.yaml `threads`), so a job outranks any two of a lower tier, and a
# two-thread job any two of its own tier that would take its cores.  A tier is a number, or per
# iteration (first, later), or per value-model configuration.
TIERS = {
    "fetch_benchmark": 8,
    "benchmark_split": 8,
    "proplogic_benchmark_split": 8,
    "tactic_pairs": 8,
    "search_pool": 8,
    "base_model": 8,
    "sft": (7, 6),
    "merge": (7, 4),
    "search_shard": 7,
    "search_noise_shard": 7,
    "search": 7,
    "search_noise": 7,
    "ebm_embed_config": {"A": 6, "S": 4},
    "ebm_train_config": {"A": 6, "S": 3, "B": 3},
    "sft_only": 5,
    "merge_sft_only": 4,
    "eval_no_ebm": 4,
    "ebm_embed": 4,
    "eval_baseline": 4,
    "ebm_export_joint": 3,
    "ebm_train": 3,
    "eval_config_no_ebm": 3,
    "value_features": 3,
    "value_depth_twin": 3,
    "eval_depth_twin": 3,
    "live_replay_features": 3,
    "eval_longer": 3,
    "eval": (3, 2),
    "eval_features": 2,
    "eval_config": 2,
    "eval_config_depth_twin": 2,
    "eval_search_only": 2,
    "ebm_metrics": 1,
    "ebm_metrics_config": 1,
    "replay_ebm": 1,
    "replay_config": 1,
    "search_pool_select": 1,
    "search_only_pool_select": 0,
    "search_baseline_shard": 0,
    "search_baseline": 0,
    "search_only_shard": 0,
    "search_only": 0,
    "compute_report": 0,
    "compute_benchmark": 0,
    "report": 0,
    "report_cross": 0,
    "compare": 0,
    "summary": 0,
    "compare_ablations": 0,
    "summary_ablations": 0,
}
# The rules whose thread count params.yaml `threads` sets besides the searches' and evals' (those
# are one-thread on the demo's small machine and ranked as such), by its key: one, or per
# iteration (first, later) as in TIERS.
THREAD_KEYS = {"base_model": "base", "sft": ("train", "later_train"), "sft_only": "later_train",
               "merge": "merge", "merge_sft_only": "merge", "ebm_embed": "ebm",
               "ebm_embed_config": "ebm", "ebm_train": "ebm", "ebm_train_config": "ebm",
               "ebm_metrics": "ebm", "ebm_metrics_config": "ebm"}  # fmt: skip
# `threads: 2` in the rule, no setting
TWO_THREADS = {"search_pool_select", "search_only_pool_select"}


def thread_count(rulename, wildcards):
    """The `threads` setting of a job of rule `rulename` (THREAD_KEYS), None for a rule it does
    not set."""
    key = THREAD_KEYS.get(rulename)
    if isinstance(key, tuple):
        key = key[0] if wildcards.get("i") == "0" else key[1]
    return None if key is None else config["threads"][key]


def train_threads(wildcards):
    """Threads of iteration {i}'s adapter training: `threads.train` for iteration 0, where it runs
    alone on the critical path, `threads.later_train` after it, beside S's SFT-only."""
    return thread_count("sft", wildcards)


def job_priority(wildcards, rulename):
    """The priority of a job of rule `rulename` (TIERS above; a job of several threads, by its
    `threads` setting, ranks as a two-thread one)."""
    tier = TIERS[rulename]
    if isinstance(tier, tuple):
        tier = tier[0] if wildcards.get("i") == "0" else tier[1]
    elif isinstance(tier, dict):
        tier = tier[wildcards.c]
    several = rulename in TWO_THREADS or (thread_count(rulename, wildcards) or 1) > 1
    return 2 * 3**tier + 1 if several else 3**tier


def study_seed_inputs(wildcards):
    return study_seed_files(config)


def study_seed_files(config):
    """One study seed (docs/performance.md "One study seed"): the evals the confirmation's primary
    comparisons read — the last iteration's eval with its value head (C), without it (its no-EBM
    twin) and with the depth-fitted twin (the stronger of the two is C's control), and the
    iteration before it: its eval and its search-longer control.  Snakemake builds what
    they need and nothing else: no configurations A/S/B evals, replays, feature value, metrics or
    reports (A's EBM only as joint training's warm start; the baseline eval because iteration 0's
    eval reads it, `previous`)."""
    last = config["iterations"] - 1
    if last < 1:
        raise ValueError(
            "study_seed needs iterations >= 2 (an iteration with a value model)"
        )
    return [
        f"results/iter_{last}/eval.json",
        f"results/iter_{last}/eval_no_ebm.json",
        f"results/iter_{last}/eval_depth_twin.json",
        f"results/iter_{last - 1}/eval.json",
        f"results/iter_{last - 1}/eval_longer.json",
    ]
