"""What every training stage writes around its model: a staged output directory, provenance, metrics.

- :func:`staged_dir` — the stage writes into ``<out>.tmp`` and only a finished stage renames it to
  ``<out>``, so a crash, a pre-emption or Ctrl-C never leaves a directory that looks complete
  (Snakemake and DVC judge completeness by the directory's existence).
- :func:`provenance` — package versions and the git commit, for the JSON summaries written beside
  each checkpoint (STYLE §14); what differs from run to run (times, the command line) goes to
  ``run_info.json`` (:func:`burnqed.determinism.write_run_info`) instead, so a rerun's summaries
  are byte-identical.
- :class:`MetricsLog` — one JSON object per line (``metrics.jsonl`` in the output directory), flushed
  per record so ``tail -f`` shows training as it happens.
- :class:`TrainedTokens` — the tokens the optimizer steps saw (the ``tokens`` block of every
  training summary): what training spent, stated beside the searches' compute
  (:mod:`burnqed.eval.compute`), never added to it.

Example::

    >>> import tempfile, json
    >>> from pathlib import Path
    >>> out = Path(tempfile.mkdtemp()) / "adapter"
    >>> with staged_dir(out) as tmp:
    ...     with MetricsLog(tmp / "metrics.jsonl") as m:
    ...         m.write({"step": 1, "loss": 2.5})
    >>> json.loads((out / "metrics.jsonl").read_text())["loss"]
    2.5
    >>> out.with_name("adapter.tmp").exists()
    False
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from burnqed.provenance import git_state, package_versions

log = logging.getLogger(__name__)


# Distributions whose versions change what a trained model is; recorded when installed.
@contextlib.contextmanager
def staged_dir(out: Path) -> Iterator[Path]:
    """Yield ``<out>.tmp`` (emptied first); on success replace ``out`` with it.

    On an exception the staging directory stays for inspection and ``out`` is untouched: a
    previous complete result survives a failed rerun, and nothing half-written carries the name.
    """
    out = Path(out)
    staging = out.with_name(out.name + ".tmp")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    yield staging
    if out.exists():
        # Two renames instead of delete-then-rename keep a complete `out` on disk at every moment
        # but one (between the renames), and never a partial one.
        old = out.with_name(out.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        out.rename(old)
        staging.rename(out)
        shutil.rmtree(old)
    else:
        staging.rename(out)
    log.info("wrote %s", out)


def quiet_progress_bars(*, datasets: bool = False) -> None:
    """Turn the libraries' own progress bars off when stderr is not a terminal.

    In a rule's log file a bar is hundreds of carriage-return fragments; burnqed logs progress
    itself.  ``datasets=True`` also silences ``datasets`` (imported only by the SFT).
    """
    if sys.stderr.isatty():
        return
    import huggingface_hub.utils
    import transformers

    transformers.utils.logging.disable_progress_bar()
    huggingface_hub.utils.disable_progress_bars()
    if datasets:
        import datasets as hf_datasets

        hf_datasets.disable_progress_bars()


def provenance() -> dict[str, Any]:
    """Versions and git commit: what code made an artifact (the same on a rerun of that code)."""
    return {"versions": package_versions(), "git": git_state()}


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Pretty, UTF-8, newline-terminated JSON (read by people as much as by code)."""
    Path(path).write_text(
        json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8"
    )


class MetricsLog:
    """Append-only JSONL of step metrics; a context manager that closes the file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._file = self.path.open("a", encoding="utf-8")

    def write(self, record: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(record, ensure_ascii=False, default=float) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> MetricsLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass
class TrainedTokens:
    """The tokens a training's optimizer steps saw: every sequence of every micro-batch at its real
    length (padding never counts), summed over the steps taken, split into ``prompt`` (no loss),
    ``completion`` (the SFT loss: completion and end-of-sequence tokens) and ``value`` (joint
    training's state and goal sequences, the value head's InfoNCE rows).  Counting reads the
    batches and changes nothing of the step.

    >>> t = TrainedTokens()
    >>> t.add(prompt=10, completion=3, sequences=2); t.add(value=7, sequences=1); t.step()
    >>> t.to_json()["total"], t.steps
    (20, 1)
    >>> TrainedTokens.from_json(t.to_json()) == t
    True
    """

    steps: int = 0  # optimizer steps counted
    sequences: int = 0  # sequences (rows) over every micro-batch
    prompt: int = 0
    completion: int = 0
    value: int = 0

    def add(self, *, prompt: int = 0, completion: int = 0, value: int = 0,
            sequences: int = 0) -> None:  # fmt: skip
        self.prompt += int(prompt)
        self.completion += int(completion)
        self.value += int(value)
        self.sequences += int(sequences)

    def add_rows(self, attention_mask: Any, labels: Any) -> None:
        """One right-padded micro-batch of prompt + completion rows: real lengths from
        ``attention_mask`` (B, T), completion tokens where ``labels`` (B, T) is not -100."""
        real = int(attention_mask.sum())
        completion = int((labels != -100).sum())
        self.add(prompt=real - completion, completion=completion,
                 sequences=int(attention_mask.shape[0]))  # fmt: skip

    def step(self) -> None:
        self.steps += 1

    @property
    def total(self) -> int:
        return self.prompt + self.completion + self.value

    def to_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "prompt": self.prompt,
            "completion": self.completion,
            "value": self.value,
            "sequences": self.sequences,
            "steps": self.steps,
            "counted": "the real length of every sequence each optimizer step saw (no padding), "
            "summed over the steps taken: prompt, completion (the SFT loss's), value (joint "
            "training's state and goal sequences)",
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> TrainedTokens:
        d = d or {}
        return cls(**{k: int(d.get(k) or 0) for k in
                      ("steps", "sequences", "prompt", "completion", "value")})  # fmt: skip
