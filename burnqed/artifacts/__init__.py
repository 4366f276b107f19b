"""Moving a run's artifacts between machines (DVC) without Snakemake rerunning anything."""
