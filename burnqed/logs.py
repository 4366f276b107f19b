"""Logging for stage runs: a Snakemake job's ``log:`` file, or the console for the CLI.

Example (what every ``workflow/scripts/*.py`` shim does)::

    from burnqed.logs import to_log_file
    with to_log_file("logs/data/tactic_pairs.log"):
        ...  # the stage's run(...); its log lines and any traceback land in the file
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextmanager
def to_log_file(path: str | Path, *, level: int = logging.INFO) -> Iterator[None]:
    """Route all logging (and warnings) to ``path`` and to stderr for the span of the block; an
    exception escaping it is logged with its traceback before it propagates (so the job's log says
    why it failed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    handlers = [
        logging.FileHandler(path, mode="w", encoding="utf-8"),
        logging.StreamHandler(sys.stderr),
    ]
    for h in handlers:
        h.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(h)
    old_level = root.level
    root.setLevel(level)
    logging.captureWarnings(True)
    try:
        yield
    except BaseException:
        logging.getLogger("burnqed").exception("stage failed")
        raise
    finally:
        logging.captureWarnings(False)
        root.setLevel(old_level)
        for h in handlers:
            root.removeHandler(h)
            h.close()
