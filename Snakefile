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
