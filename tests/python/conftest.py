"""Shared fixtures and hypothesis profiles for the Python test suite.

Hypothesis profiles: ``fast`` (default; what `make test` runs) and ``slow``
(many more examples): ``HYPOTHESIS_PROFILE=slow make py-test``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import litemq

settings.register_profile(
    "fast",
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "slow",
    max_examples=500,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fast"))

#: Small files so that tests roll across several of them quickly.
SMALL_FILE = 64 * 1024


@pytest.fixture
def qpath(tmp_path: Path) -> Path:
    """A path where a new queue can be created."""
    return tmp_path / "queue"


@pytest.fixture
def queue(qpath: Path) -> Iterator[litemq.Queue]:
    """A fresh writable queue with small data files, closed after the test."""
    q = litemq.Queue(qpath, file_size=SMALL_FILE)
    try:
        yield q
    finally:
        q.close()


def run_python(
    code: str, *args: str, timeout: float = 120, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a fresh interpreter (the test's own) and returns the result."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"subprocess failed with {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Runs ``python -m litemq ARGS`` and returns the result (exit code unchecked)."""
    return subprocess.run(
        [sys.executable, "-m", "litemq", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def spawn_python(code: str, *args: str) -> subprocess.Popen[str]:
    """Starts `code` in a fresh interpreter; the caller waits for it."""
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
