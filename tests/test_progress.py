"""Progress of long work: the helper's rate, ETA and interval, and the periodic lines a stage's log
file carries (search, EBM training, tracing)."""

from __future__ import annotations

import asyncio
import logging
import re

import pytest

from burnqed.progress import (
    DEFAULT_INTERVAL_S,
    INTERVAL_ENV,
    Progress,
    format_duration,
    format_rate,
    interval_from_env,
)

# A progress line with a count, a percentage, a rate and an ETA.
LINE = re.compile(
    r"progress (?P<name>\w+): (?P<done>\d+)/(?P<total>\d+) \w+ \(\d+\.\d%\), "
    r"[\d.e+-]+/s, ETA (\d+[smhd]|\d+m\d\ds|\d+h\d\dm|\d+d\d\dh|\?)"
)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_line_has_rate_eta_and_percentage(caplog):
    clock = Clock()
    log = logging.getLogger("burnqed.test")
    p = Progress(log, "search", total=400, unit="theorems", interval_s=30, bar=False, clock=clock)
    clock.t += 60
    p.set(120)  # 120 in 60 s: 2/s, 280 left: 140 s
    assert p.line() == (
        "progress search: 120/400 theorems (30.0%), 2.0/s, ETA 2m20s, elapsed 1m00s"
    )
    p.set_postfix(loss="0.412")
    assert p.line().endswith(", loss 0.412")


def test_rate_counts_only_this_runs_work():
    clock = Clock()
    p = Progress(logging.getLogger("t"), "ebm", total=200, unit="steps", initial=100,
                 interval_s=30, bar=False, clock=clock)  # fmt: skip
    clock.t += 10
    p.update(50)  # resumed at 100: 50 steps in 10 s
    assert p.rate == pytest.approx(5.0)
    assert "150/200 steps (75.0%), 5.0/s, ETA 10s" in p.line()


def test_logs_every_interval_and_at_the_end(caplog):
    clock = Clock()
    log = logging.getLogger("burnqed.test.interval")
    caplog.set_level(logging.INFO, logger="burnqed.test.interval")
    with Progress(log, "base", total=100, unit="steps", interval_s=30, bar=False,
                  clock=clock) as p:  # fmt: skip
        for _ in range(100):
            clock.t += 1  # one step a second: a line at 30, 60 and 90 s
            p.update(1)
    lines = [r.getMessage() for r in caplog.records if r.name == "burnqed.test.interval"]
    assert [LINE.match(ln)["done"] for ln in lines] == ["30", "60", "90", "100"]
    assert "ETA 1m10s" in lines[0] and "ETA 0s" in lines[-1]


def test_no_rate_yet_reads_unknown():
    clock = Clock()
    p = Progress(logging.getLogger("t"), "x", total=10, interval_s=30, bar=False, clock=clock)
    assert "0.0/s" not in p.line() and "ETA ?" in p.line()
    p2 = Progress(logging.getLogger("t"), "x", total=None, interval_s=30, bar=False, clock=clock)
    clock.t += 2
    p2.update(5)
    assert p2.line() == "progress x: 5 items, 2.5/s, elapsed 2s"


def test_formatting():
    assert format_duration(45.4) == "45s"
    assert format_duration(133) == "2m13s"
    assert format_duration(3720) == "1h02m"
    assert format_duration(90000) == "1d01h"
    assert format_duration(float("inf")) == "?"
    assert format_rate(123.4) == "123"
    assert format_rate(2.14) == "2.1"
    assert format_rate(0.354) == "0.35"


def test_interval_from_env(monkeypatch):
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert interval_from_env() == DEFAULT_INTERVAL_S == 30
    monkeypatch.setenv(INTERVAL_ENV, "0.5")
    assert interval_from_env() == 0.5
    monkeypatch.setenv(INTERVAL_ENV, "soon")
    with pytest.raises(ValueError, match=INTERVAL_ENV):
        interval_from_env()


def _progress_lines(log_file, name: str) -> list[re.Match]:
    return [
        m
        for ln in log_file.read_text().splitlines()
        if (m := LINE.search(ln)) and m["name"] == name
    ]


def test_search_log_carries_progress_lines(tmp_path, monkeypatch):
    from burnqed.config import SearchConfig
    from burnqed.logs import to_log_file
    from burnqed.policy import SamplingParams
    from burnqed.search.stage import search_to_dir
    from tests.search.fakes import RandomToyPolicy, ToyEnv, toy_theorems

    monkeypatch.setenv(INTERVAL_ENV, "0")
    cfg = SearchConfig(max_nodes=5, num_candidates=2, concurrency=2, attempts=2)
    log_file = tmp_path / "search.log"
    with to_log_file(log_file):
        asyncio.run(search_to_dir(toy_theorems(3, seed=1), RandomToyPolicy(), ToyEnv(), cfg,
                                  tmp_path / "out", sampling=SamplingParams(n=2)))  # fmt: skip
    lines = _progress_lines(log_file, "search")
    assert [int(m["done"]) for m in lines][-1] == 6 and len(lines) >= 6
    assert all(m["total"] == "6" for m in lines)


def test_ebm_training_log_carries_progress_lines(tmp_path, monkeypatch):
    from burnqed.config import EBMConfig
    from burnqed.ebm.train import train_head
    from burnqed.logs import to_log_file
    from tests.ebm.synthetic import planted

    monkeypatch.setenv(INTERVAL_ENV, "0")
    cfg = EBMConfig(hidden_sizes=(16,), negatives=7, steps=10, batch_size=8, log_every=5,
                    save_every=5)  # fmt: skip
    vectors, groups = planted(margin=4.0)
    log_file = tmp_path / "ebm.log"
    with to_log_file(log_file):
        train_head(vectors, groups, cfg, work_dir=tmp_path / "work", seed=0, device="cpu")
    lines = _progress_lines(log_file, "ebm")
    assert [int(m["done"]) for m in lines][:3] == [1, 2, 3] and lines[-1]["done"] == "10"


def test_tracing_logs_progress(caplog, monkeypatch):
    from burnqed.config import ProplogicConfig
    from burnqed.data.proplogic import training_theorems
    from burnqed.data.proplogic_trace import trace_theorems

    monkeypatch.setenv(INTERVAL_ENV, "0")
    caplog.set_level(logging.INFO, logger="burnqed.data.proplogic_trace")
    theorems = training_theorems(ProplogicConfig(theorems=12, max_depth=3), seed=0)
    trace_theorems(theorems)
    lines = [LINE.search(r.getMessage()) for r in caplog.records]
    done = [int(m["done"]) for m in lines if m and m["name"] == "trace"]
    assert done[-1] == len(theorems) > 0 and len(done) >= len(theorems)
