"""A Spark standalone cluster on this machine, from the PySpark installation's own classes.

A master and N workers, each a JVM started with ``bin/spark-class`` (``org.apache.spark.
deploy.master.Master`` / ``...worker.Worker``), listening on 127.0.0.1 only (the second
worker under the name ``localhost``, see `WORKER_HOSTS`), with small memory. Executors are JVMs the workers start for an application, each with its own Python
workers. ``stop()`` ends every process the cluster started, by pid (the workers' executors
and their Python workers too), and checks that none is left.

Used by ``tests/python/test_spark_cluster.py`` and ``benches/spark_bench.py --cluster``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Memory of the master and worker daemons, and of each executor (the machine is shared).
DAEMON_MEMORY = "256m"
EXECUTOR_MEMORY = "512m"


#: Host names of the workers, in turn: two names of the one loopback address, because Spark
#: never runs a speculative copy of a task on the host of its running attempt (it compares
#: host names), and speculation is what the tests need to see.
WORKER_HOSTS = ("127.0.0.1", "localhost")


class ClusterUnavailable(RuntimeError):
    """The cluster cannot start here (no Java, no PySpark)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> str:
    try:
        from pyspark.find_spark_home import _find_spark_home
    except ImportError as e:
        raise ClusterUnavailable(f"pyspark is not installed: {e}") from None
    return str(_find_spark_home())


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc), deepest last."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # Field 4 is the parent pid; the command (field 2) may hold spaces: split after ')'.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents[int(entry)] = ppid
    out: list[int] = []
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out.extend(kids)
        frontier.extend(kids)
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclass
class StandaloneCluster:
    """Start with :meth:`start`, stop with :meth:`stop` (idempotent)."""

    root: Path
    workers: int = 2
    cores_per_worker: int = 1
    master_url: str = ""
    master_ui: str = ""
    pids: list[int] = field(default_factory=list)
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=spark_home(),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
            SPARK_LOCAL_DIRS=str(self.root / "local"),
            SPARK_LOG_DIR=str(self.root / "logs"),
            SPARK_NO_DAEMONIZE="1",
        )
        return env

    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps it
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), *args]
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True
        )
        log.close()
        self._procs.append(proc)
        self.pids.append(proc.pid)

    def start(self, timeout: float = 90) -> StandaloneCluster:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise ClusterUnavailable("Java is not installed (Spark needs Java 17)")
        for d in ("local", "logs", "work"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        port, ui = free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{port}"
        self.master_ui = f"http://127.0.0.1:{ui}"
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        )
        for i in range(self.workers):
            self._spawn(
                f"worker-{i}",
                "org.apache.spark.deploy.worker.Worker",
                self.master_url,
                "--host",
                WORKER_HOSTS[i % len(WORKER_HOSTS)],
                "--port",
                str(free_port()),
                "--webui-port",
                str(free_port()),
                "--cores",
                str(self.cores_per_worker),
                "--memory",
                EXECUTOR_MEMORY,
                "--work-dir",
                str(self.root / "work" / f"worker-{i}"),
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self._procs:
                if p.poll() is not None:
                    self.stop()
                    raise RuntimeError(
                        f"a Spark daemon exited with {p.returncode}; see {self.root}/*.log"
                    )
            state = self.state()
            alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
            if len(alive) == self.workers:
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the cluster did not come up in {timeout} s; see {self.root}/*.log")

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications), or {} while it is not up."""
        try:
            with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=2) as r:
                data: dict[str, Any] = json.load(r)
                return data
        except OSError:
            return {}

    def executor_pids(self) -> list[int]:
        """The executor JVMs the workers run now."""
        return [
            c
            for w in self.pids[1:]
            for c in _children(w)
            if "CoarseGrainedExecutorBackend" in _cmdline(c) and _alive(c)
        ]

    def stop(self) -> None:
        """SIGTERM the daemons, SIGKILL what is left after a grace period, by pid, including
        executors and Python workers; then check nothing started here still runs."""
        everything = list(self.pids)
        for pid in self.pids:
            everything.extend(_children(pid))
        for pid in reversed(self.pids):  # workers first, then the master
            with _no_such_process():
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for p in self._procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for pid in everything:
            if _alive(pid):
                with _no_such_process():
                    os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in everything):
            time.sleep(0.1)
        left = [p for p in everything if _alive(p)]
        self.pids.clear()
        self._procs.clear()
        if left:
            raise RuntimeError(f"processes left behind by the cluster: {left}")


class _no_such_process:
    def __enter__(self) -> None:
        return None

    def __exit__(self, et: Any, e: Any, tb: Any) -> bool:
        return et is ProcessLookupError
