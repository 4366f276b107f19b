"""bench/demo_profile.py's sampler survives what it reads: it walks other threads' stacks while they
run, and a frame changed or freed under the walk (CI saw one whose ``f_code`` was a dict) is a
sample it counts as unreadable, not the end of the profile; its ``elapsed`` is set however the
sampling ends, so the job's figures are always printed."""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def profile():
    """bench/demo_profile.py as a module (bench/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(
        "demo_profile", REPO / "bench" / "demo_profile.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sample(sampler, ticks: int, timeout: float = 10.0) -> None:
    """Let ``sampler`` take ``ticks`` samples (or run ``timeout`` seconds), then stop it."""
    sampler.start()
    end = time.monotonic() + timeout
    while sampler.ticks < ticks and sampler.is_alive() and time.monotonic() < end:
        time.sleep(0.005)
    sampler.halt.set()
    sampler.join(timeout)


def test_a_frame_changed_under_the_walk_is_counted_unreadable_and_sampling_goes_on(
    profile, monkeypatch
):
    main = threading.main_thread().ident
    # What CI's sampler met: a frame of the main thread whose f_code is a dict (freed or reused
    # under the walk), below a readable one.
    bad = SimpleNamespace(f_code={}, f_back=None)
    frames = {main: SimpleNamespace(f_code=_sample.__code__, f_back=bad)}
    monkeypatch.setattr(sys, "_current_frames", lambda: frames)
    rules = {"MainThread": (profile.MAIN, "other")}
    sampler = profile.Sampler(rules, interval=0.001)
    _sample(sampler, ticks=5)
    assert not sampler.is_alive()
    assert sampler.ticks >= 5, "the sampler thread died on a frame it could not read"
    assert sampler.error is None
    assert sampler.unreadable["MainThread"] == sampler.ticks, sampler.unreadable
    assert sampler.counts[("MainThread", profile.UNREADABLE)] == sampler.ticks
    seconds = sampler.seconds()
    assert seconds["MainThread"][profile.UNREADABLE] == pytest.approx(sampler.elapsed)
    # The next tick with a readable stack is filed as usual.
    frames[main] = SimpleNamespace(f_code=_sample.__code__, f_back=None)
    again = profile.Sampler(rules, interval=0.001)
    _sample(again, ticks=3)
    assert again.ticks >= 3 and not again.unreadable and again.counts[("MainThread", "other")] > 0


def test_elapsed_is_set_and_the_figures_read_when_the_sampling_thread_fails(profile, monkeypatch):
    def broken():
        raise RuntimeError("no frames")

    monkeypatch.setattr(sys, "_current_frames", broken)
    sampler = profile.Sampler({"MainThread": (profile.MAIN, "other")}, interval=0.001)
    _sample(sampler, ticks=1)
    assert not sampler.is_alive()
    assert getattr(sampler, "elapsed", None) is not None and sampler.elapsed > 0, (
        "elapsed unset after the sampling thread failed: seconds() cannot divide by it"
    )
    assert sampler.error == "RuntimeError: no frames"
    assert sampler.seconds() == {}


def test_the_search_and_training_figures_count_the_unreadable_samples(profile):
    threads = {"MainThread": {"load": 1.0}, "burnqed-generate": {"forward": 2.0}}
    f = {"threads": threads, "wall_s": 10.0, "cpu_s": 9.0, "start_s": 1.0, "children_cpu_s": 0.5,
         "repl_wait_s": 0.2, "expansions": 7, "unreadable": {"MainThread": 2, "burnqed-generate": 1}}  # fmt: skip
    assert profile.search_figures(f)["search_unreadable_samples"] == 3
    assert profile.train_figures({**f, "unreadable": {}})["train_unreadable_samples"] == 0
