"""A private redis-server on 127.0.0.1, a free port and a temporary directory.

Used only where a ``redis-server`` binary is on PATH. It is stopped by its
pid (SIGTERM, then SIGKILL after 10 s) and its directory removed.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class RedisServer:
    """``with RedisServer() as server:`` then ``server.port``, ``server.data_dir``."""

    def __init__(self, parent: str | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server is not installed")
        self.binary = binary
        self.tmp = Path(tempfile.mkdtemp(prefix="peers-redis-", dir=parent))
        self.data_dir = self.tmp / "data"
        self.data_dir.mkdir()
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def version(self) -> str:
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True)
        return out.stdout.strip()

    def start(self) -> None:
        args = [
            self.binary,
            "--bind", "127.0.0.1",
            "--port", str(self.port),
            "--protected-mode", "yes",
            "--dir", str(self.data_dir),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.tmp / "redis.log"),
        ]  # fmt: skip
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.tmp / "redis.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"redis-server exited at start:\n{log}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("redis-server did not answer PING within 10 s")

    def peak_rss(self) -> int:
        """The server's peak resident set (VmHWM), bytes."""
        if self.proc is None:
            return 0
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # by its pid; redis writes its AOF and exits
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
