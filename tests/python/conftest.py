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


class S3Server:
    """A local S3-compatible server (moto's server mode) on 127.0.0.1, for archive tests."""

    #: Any key works with moto; they travel in the URIs, so Spark's Python workers need no
    #: environment (their JVM may have started before this server).
    KEY = "litemq-test"

    def __init__(self, port: int) -> None:
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}"

    def uri(self, bucket: str, path: str) -> str:
        """An ``s3://`` URI that ``pyarrow.fs`` resolves to this server."""
        return (
            f"s3://{self.KEY}:{self.KEY}@{bucket}/{path}?endpoint_override=127.0.0.1:{self.port}"
            "&scheme=http&region=us-east-1"
        )

    def bucket(self, name: str) -> str:
        import boto3

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.KEY,
            aws_secret_access_key=self.KEY,
        )
        client.create_bucket(Bucket=name)
        return name


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server in a thread of this process, on a free port of 127.0.0.1. Skipped,
    saying why, when moto (the ``test`` extra's ``moto[server]``) is missing or will not
    start."""
    import logging

    try:
        from moto.server import ThreadedMotoServer
    except ImportError as e:
        pytest.skip(f"no local S3 server: moto[server] is not installed ({e})")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    try:
        server.start()
        _, port = server.get_host_and_port()
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"the local S3 server (moto) did not start: {e!r}")
    try:
        yield S3Server(int(port))
    finally:
        server.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``jvm`` run only with ``LITEMQ_SPARK_READER=jvm``: the Spark JVM starts
    once per pytest process, with the jar on its classpath or without it, and a later
    session cannot add the JVM reader. They are deselected (listed in the summary as such),
    not skipped; ``make py-test`` runs them in its second, JVM pass."""
    if os.environ.get("LITEMQ_SPARK_READER", "python").strip().lower() == "jvm":
        return
    keep = [item for item in items if item.get_closest_marker("jvm") is None]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
