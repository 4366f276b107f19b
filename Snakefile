# burnqed workflow: one expert iteration after another, every artifact tied to its inputs.
#
# Path convention (SPEC §3):
#   data/raw/...                       downloaded inputs (benchmarks fetched by registry, sources by the user)
#   data/benchmarks/<name>_<split>.jsonl + .meta.json   pinned benchmark splits
#   data/tactic_pairs/{train,val}.parquet                normalised, filtered tactic pairs
#   data/theorems/search_pool.jsonl                      theorems searched for new training data
#   models/base/, models/iter_{i}/{adapter,merged,ebm}/  models
#   results/iter_{i}/...                                 search trajectories, evals, reports
#   logs/<rule>/...                                      one log per job
#
# Each rule receives only its own config section through `params:` plus a digest of every file its
# job runs (rules/common.smk: its shim, the burnqed modules and package data it reaches, the modules
# its config launches) and the instruction-set pin, so a change to a knob or to the stage's code
# reruns exactly that stage and what depends on it.
#
# The instruction-set pin (`cpu_isa`, burnqed/isa.py) goes into this process's environment at parse
# time, before any job starts: local jobs inherit it, and the SLURM executor submits with
# --export=ALL (each job's own parse applies it again).
from burnqed.config import validate_params
from burnqed.eval.ledger import record_run_looks
from burnqed.isa import apply_pin


configfile: "params.yaml"


# `snakemake --report report.html`: the outputs marked report(...) in rules/, captions in workflow/report/.
report: "workflow/report/workflow.rst"


validate_params(config, source="workflow config (params.yaml + --configfile overlays)")
apply_pin(config["cpu_isa"])


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/model.smk"
include: "rules/ebm.smk"
include: "rules/search.smk"
include: "rules/eval.smk"
include: "rules/report.smk"


# A run's evals on a confirmation benchmark are looks: merged into the repository's tracked ledger
# when the run has succeeded (no job writes a tracked file; docs/confirmation.md).  `--touch` marks
# outputs done without running anything: no look.
onsuccess:
    if not workflow.touch:
        record_run_looks(workflow.basedir)


# Two targets.  The default, `all`, is the headline: the loop through its last iteration, the
# baseline, each iteration's eval, the search-longer control, and per iteration i >= 1 the main line
# C against its two twins (no value model; the depth twin) — the comparisons the README leads with
# and the learning check — then the reports, results/compare.md and results/summary.json, and the
# compute comparison: expert iteration against search only on the search pool, every iteration
# (results/compute.md, rules/eval.smk compute_report; rules/common.smk compute_files).
# `snakemake --cores 2 ablations --configfile config/demo.yaml` builds the attribution set on top
# of it, reusing every artifact: configurations A, S and B (their EBMs, evals and twins), every
# replay, the feature value, the EBM metrics, and results/ablations/{compare.md,summary.json}
# (rules/common.smk headline_sets, attribution_files; docs/demo.md).
rule all:
    default_target: True
    input:
        rules.data_all.input,
        # The whole loop: the last iteration's eval needs every model, EBM and search before it.
        expand(
            "results/iter_{i}/report",
            i=range(lookup(dpath="iterations", within=config)),
        ),
        "results/report",
        "results/compare.md",
        "results/summary.json",
        compute_files(config),


rule ablations:
    input:
        rules.all.input,
        attribution_files(config),
        "results/ablations/compare.md",
        "results/ablations/summary.json",
