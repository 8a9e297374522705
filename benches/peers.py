# ruff: noqa: RUF001  (the multiplication sign is meant in what this prints)
"""Peer benchmark: litemq against what a Python user would pick instead.

    .venv/bin/python benches/peers.py             # 1,000,000 messages, docs/PERFORMANCE.md
    .venv/bin/python benches/peers.py --quick     # smoke run, results in bench-results/ only
    .venv/bin/python benches/peers.py --only litemq,lmdb --n 200000
    .venv/bin/python benches/peers.py --random-get  # only random get, litemq vs lmdb
    .venv/bin/python benches/peers.py --work-queue-only  # only get+ack, 1 and 4 workers
    .venv/bin/python benches/peers.py --anchors-only  # only litemq batches vs raw writes

Measures, one store after another and each in a fresh process, append and
sequential-read throughput (also in a durable variant), peak memory and
bytes on disk; litemq's random ``get`` and key ``find``; random ``get``
from a read-only handle and the writer's queue against lmdb's random
``txn.get`` (issue 15, ratio printed, ``--random-get`` runs just that); the latency
from ``append`` to a tailer in another process; and, against an ``os.pipe``
between the same two processes, the latency and the follower's CPU at
20,000 and 1,000 msg/s (``--follow-only`` runs just that); and work queues,
get + ack per job from 1 and 4 worker processes against persist-queue,
litequeue and diskcache (issue 18; ``--work-queue-only`` runs just that). Prints a table with each
store's ratio to litemq and the goals of issue 8, writes
``bench-results/peers.json``, the charts and ``docs/PERFORMANCE.md``.

Stores whose library is missing, or litemq while it does not import, are
reported and skipped; the others still run. Redis Streams runs only where a
``redis-server`` binary is on PATH: the script starts it on 127.0.0.1 with
a free port and a temporary directory and stops it by its pid.

Options may also come from the environment: PEERS_N, PEERS_CAP, PEERS_ONLY.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from peers_lib import (  # noqa: E402
    anchors,
    contention,
    latency,
    multi_writer,
    random_get,
    report,
    work_queue,
)
from peers_lib.phases import current_rss  # noqa: E402
from peers_lib.redis_server import RedisServer  # noqa: E402
from peers_lib.stores import STORES, RedisStream, Store, Unavailable  # noqa: E402


@dataclass
class QuietPolicy:
    """Before each store: wait up to ``max_wait`` s for others to use < ``threshold``."""

    max_wait: float
    threshold: float
    failed: bool = False
    """The last wait ran out: wait at most 5 s until one succeeds again."""

    def wait(self) -> None:
        limit = min(self.max_wait, 5.0) if self.failed else self.max_wait
        waited, share = contention.wait_quiet(limit, self.threshold)
        self.failed = share > self.threshold
        if self.failed and limit > 0:
            progress(f"    (others use {share:.0%} of the cores after {waited:.0f} s; going on)")


def parse_args(argv: list[str]) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--n",
        type=int,
        default=int(env("PEERS_N", "1000000")),
        help="messages per store (default 1,000,000; env PEERS_N)",
    )
    p.add_argument("--size", type=int, default=100, help="payload bytes (default 100)")
    p.add_argument(
        "--cap",
        type=float,
        default=float(env("PEERS_CAP", "4")),
        help="seconds per phase before a slow store is stopped and its "
        "rate scaled (default 4; env PEERS_CAP)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: --n 20000 --cap 1, short latency run, no docs",
    )
    p.add_argument(
        "--only",
        default=env("PEERS_ONLY", ""),
        help="comma-separated store keys: " + ",".join(s.key for s in STORES),
    )
    p.add_argument("--skip", default="", help="comma-separated store keys to leave out")
    p.add_argument("--dir", default=None, help="parent of the temporary data directories")
    p.add_argument(
        "--json",
        type=Path,
        default=None,
        help="results file (default bench-results/peers.json; with --quick peers-quick.json)",
    )
    p.add_argument(
        "--docs",
        dest="docs",
        action="store_true",
        default=None,
        help="write docs/PERFORMANCE.md and docs/img/*.png (default unless --quick)",
    )
    p.add_argument("--no-docs", dest="docs", action="store_false")
    p.add_argument("--latency-rate", type=int, default=50_000, help="msg/s (default 50,000)")
    p.add_argument("--latency-messages", type=int, default=250_000)
    p.add_argument("--no-latency", action="store_true")
    p.add_argument(
        "--follow-rates",
        default="20000,1000",
        help="msg/s of the follow-vs-pipe cases (default 20000,1000)",
    )
    p.add_argument(
        "--follow-seconds",
        type=float,
        default=5.0,
        help="seconds of messages per follow-vs-pipe case (default 5)",
    )
    p.add_argument("--follow-rounds", type=int, default=1, help="interleaved rounds (median)")
    p.add_argument("--no-follow", action="store_true", help="skip the follow-vs-pipe cases")
    p.add_argument(
        "--follow-only",
        action="store_true",
        help="run only the follow-vs-pipe cases (no stores, no docs)",
    )
    p.add_argument(
        "--random-get",
        action="store_true",
        help="run only the random-get case (litemq read-only and writer against lmdb)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=int(env("PEERS_REPEAT", "1")),
        help="run each store this many times and keep each phase's best "
        "(default 1; env PEERS_REPEAT)",
    )
    p.add_argument(
        "--quiet-wait",
        type=float,
        default=float(env("PEERS_QUIET_WAIT", "30")),
        help="before each store, wait up to this many seconds for other processes to "
        "use less than --quiet-threshold of the cores (default 30; 0: never wait)",
    )
    p.add_argument("--quiet-threshold", type=float, default=0.15, help="default 0.15")
    p.add_argument(
        "--anchor-rounds",
        type=int,
        default=3,
        help="interleaved rounds of the raw-write anchors (issue 34; default 3)",
    )
    p.add_argument("--no-anchors", action="store_true", help="skip the raw-write anchors")
    p.add_argument(
        "--anchors-only",
        action="store_true",
        help="run only the raw-write anchors beside litemq's batches (no stores, no docs)",
    )
    work_queue.add_arguments(p)
    multi_writer.add_arguments(p)
    args = p.parse_args(argv)
    if args.quick:
        args.n = min(args.n, 20_000)
        args.cap = min(args.cap, 1.0)
        args.latency_messages = min(args.latency_messages, 20_000)
        args.follow_seconds = min(args.follow_seconds, 1.0)
    if args.follow_only:
        args.docs = False if args.docs is None else args.docs
        args.no_latency = True
    if args.docs is None:
        args.docs = not args.quick
    if args.json is None:
        name = "peers-quick.json" if args.quick else "peers.json"
        name = "follow.json" if args.follow_only else name
        args.json = ROOT / "bench-results" / name
    return args


def selected(args: argparse.Namespace) -> list[type[Store]]:
    only = {k for k in args.only.split(",") if k}
    skip = {k for k in args.skip.split(",") if k}
    known = {s.key for s in STORES}
    for key in only | skip:
        if key not in known:
            sys.exit(f"unknown store {key!r}; known: {', '.join(sorted(known))}")
    return [s for s in STORES if (not only or s.key in only) and s.key not in skip]


def run_child(
    spec: dict[str, Any], timeout: float, quiet: QuietPolicy, pids: list[int] | None = None
) -> dict[str, Any]:
    """Run one worker process; its last stdout line is the result."""
    # Write back what earlier stores left dirty, so their writeback does not
    # land on this store's fsyncs.
    os.sync()
    quiet.wait()
    cmd = [sys.executable, str(Path(__file__).resolve()), "_worker", json.dumps(spec)]
    try:
        with contention.Meter(pids) as meter:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {
            "store": spec["store"],
            "variant": spec["variant"],
            "error": f"timed out after {timeout:.0f} s",
        }
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {
            "store": spec["store"],
            "variant": spec["variant"],
            "error": f"worker exited with {done.returncode}: {done.stderr.strip()[-1500:]}",
        }
    result: dict[str, Any] = json.loads(lines[-1])
    result["others_cpu"] = meter.others
    for phase in ("append", "read"):
        if phase in result:
            result[phase]["others_cpu"] = meter.others
    return result


def litemq_problem() -> str | None:
    """Why litemq cannot be measured, or None when it imports."""
    check = subprocess.run(
        [sys.executable, "-c", "import litemq; litemq.Queue; print(litemq.__file__)"],
        capture_output=True,
        text=True,
    )
    if check.returncode == 0:
        return None
    last = check.stderr.strip().splitlines()[-1:] or ["(no message)"]
    return f"`import litemq` fails with {sys.executable}: {last[0]}"


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def describe(run: dict[str, Any]) -> str:
    if "unavailable" in run:
        return f"skipped ({run['unavailable']})"
    if "error" in run:
        return f"FAILED: {run['error']}"
    if "get" in run:
        find = run.get("find", {})
        found = f"{report.fmt_rate(find['rate'])}/s" if "rate" in find else find.get("error")
        return f"get {report.fmt_rate(run['get']['rate'])}/s, find {found}"
    a, r = run["append"], run["read"]
    return (
        f"append {report.fmt_rate(a['rate'])}/s{' (capped)' if a['capped'] else ''}, "
        f"read {report.fmt_rate(r['rate'])}/s{' (capped)' if r['capped'] else ''}, "
        f"peak {run.get('peak_rss', 0) / report.MiB:.0f} MiB"
    )


def run_all(args: argparse.Namespace, stores: list[type[Store]]) -> dict[str, Any]:
    base = {"n": args.n, "size": args.size, "cap": args.cap, "dir": args.dir}
    runs: dict[str, Any] = {}
    missing = litemq_problem()
    timeout = 10 * args.cap + 120
    quiet = QuietPolicy(args.quiet_wait, args.quiet_threshold)
    for store in stores:
        variants = ["durable"] if store.durable_only else ["default", "durable"]
        for variant in variants:
            key = f"{store.key}/{variant}"
            if store.is_litemq and missing:
                runs[key] = {"store": store.key, "variant": variant, "unavailable": missing}
                continue
            progress(f"  {key:<24} ...")
            spec = {**base, "store": store.key, "variant": variant, "options": {}}
            tries = []
            for _ in range(max(1, args.repeat)):
                if store is RedisStream:
                    tries.append(run_redis(dict(spec), timeout, quiet))
                else:
                    tries.append(run_child(spec, timeout, quiet))
                if "append" not in tries[-1]:
                    break
            runs[key] = best_of(tries)
            progress(f"  {key:<24} {describe(runs[key])}")
    if any(s.is_litemq for s in stores):
        if missing:
            runs["litemq_lookups/default"] = {"unavailable": missing}
        else:
            progress("  litemq lookups (get, find) ...")
            spec = {**base, "store": "litemq_lookups", "variant": "default"}
            runs["litemq_lookups/default"] = run_child(spec, timeout, quiet)
            progress(f"  litemq lookups           {describe(runs['litemq_lookups/default'])}")
    out: dict[str, Any] = {"runs": runs, "litemq_missing": missing}
    if any(s.is_litemq for s in stores) and not missing:
        out["random_get"] = run_random_get(args, quiet)
    return out


def run_multi_writer(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    """Issue 34: 3 processes appending per call to one multi_writer queue, against one."""
    n = min(args.mw_n, args.n) if args.quick else args.mw_n
    return multi_writer.run(scratch, n, args.size, args.mw_rounds, progress)


def run_random_get(args: argparse.Namespace, quiet: QuietPolicy) -> dict[str, Any]:
    """litemq's random ``get`` (read-only handle, writer) beside lmdb's ``txn.get``."""
    progress("  random get: litemq (read-only, writer) and lmdb ...")
    spec = {"n": args.n, "size": args.size, "cap": args.cap, "dir": args.dir}
    spec.update(store="random_get", variant="default")
    result = run_child(spec, 20 * args.cap + 300, quiet)
    for line in random_get.lines(result):
        progress("  " + line)
    return result


def best_of(tries: list[dict[str, Any]]) -> dict[str, Any]:
    """The try with the fastest append (with its disk figures), and the fastest read."""
    good = [t for t in tries if "append" in t and "read" in t]
    if not good:
        return tries[-1]
    best = dict(max(good, key=lambda t: t["append"]["rate"]))
    best["read"] = max((t["read"] for t in good), key=lambda ph: ph["rate"])
    best["peak_rss"] = max(t.get("peak_rss", 0) for t in good)
    best["tries"] = len(good)
    best["others_cpu"] = max(t.get("others_cpu", 0.0) for t in good)
    return best


def load_average() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return [0.0, 0.0, 0.0]


def run_redis(spec: dict[str, Any], timeout: float, quiet: QuietPolicy) -> dict[str, Any]:
    try:
        RedisStream.check()
        server = RedisServer(spec.get("dir"))
    except (Unavailable, FileNotFoundError) as exc:
        return {"store": spec["store"], "variant": spec["variant"], "unavailable": str(exc)}
    with server:
        spec["options"] = {"redis_port": server.port, "redis_dir": str(server.data_dir)}
        pids = [server.proc.pid] if server.proc else []
        result = run_child(spec, timeout, quiet, pids)
        result["server_peak_rss"] = server.peak_rss()
        result["server_version"] = server.version()
    return result


def run_latency(args: argparse.Namespace, missing: str | None) -> dict[str, Any]:
    if missing:
        return {"error": missing}
    progress(f"  latency: {args.latency_messages:,} messages at {args.latency_rate:,}/s ...")
    try:
        result = latency.measure(
            str(Path(__file__).resolve()),
            args.latency_messages,
            args.size,
            args.latency_rate,
            args.dir,
        )
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    pct = result["percentiles_ns"]
    progress(
        "  latency: "
        + ", ".join(f"p{p:g} {report.fmt_ns(pct[str(p)])}" for p in latency.PERCENTILES)
        + f", max {report.fmt_ns(result['max_ns'])}"
    )
    return result


def run_follow(args: argparse.Namespace, missing: str | None) -> dict[str, Any]:
    if missing:
        return {"error": missing}
    rates = [int(r) for r in args.follow_rates.split(",") if r]
    progress(
        f"  follow vs os.pipe: {args.follow_seconds:g} s per case at "
        + ", ".join(f"{r:,}" for r in rates)
        + " msg/s ..."
    )
    try:
        result = latency.follow_vs_pipe(
            str(Path(__file__).resolve()),
            rates,
            args.follow_seconds,
            args.size,
            args.follow_rounds,
            args.dir,
            progress,
        )
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    result["goals"] = latency.follow_goals(result)
    return result


def run_anchors(args: argparse.Namespace, missing: str | None) -> dict[str, Any]:
    """litemq's durable batches and batches until visible beside the raw writes they
    replace (``peers_lib/anchors.py``)."""
    if missing:
        return {"error": missing}
    progress(
        f"  raw-write anchors: {args.n:,} messages, {args.anchor_rounds} interleaved rounds ..."
    )
    result = anchors.run(args.n, args.size, args.anchor_rounds, args.dir, progress)
    for line in anchors.lines(result):
        progress("  " + line)
    return result


def command_line() -> str:
    exe = Path(sys.executable)
    try:
        exe_text = str(exe.relative_to(ROOT)) if exe.is_absolute() else str(exe)
    except ValueError:
        exe_text = str(exe)
    script = Path(sys.argv[0])
    try:
        script_text = str(script.resolve().relative_to(ROOT))
    except ValueError:
        script_text = str(script)
    return shlex.join([exe_text, script_text, *sys.argv[1:]])


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    stores = selected(args)
    started = dt.datetime.now(dt.UTC).replace(microsecond=0)
    t0 = time.monotonic()
    progress(f"peers: {args.n:,} × {args.size} B messages, cap {args.cap:g} s per phase")
    results: dict[str, Any] = {
        "started": started.isoformat(),
        "command": command_line(),
        "config": {
            "n": args.n,
            "size": args.size,
            "cap": args.cap,
            "latency_rate": args.latency_rate,
            "latency_messages": args.latency_messages,
            "repeat": args.repeat,
        },
        "stores": [s.key for s in stores],
        "store_info": {
            s.key: {
                "label": s.label,
                "append": s.append_api,
                "read": s.read_api,
                "durable": s.durable_how,
                "batched": s.batched,
            }
            for s in stores
        },
        "baseline_rss_mib": current_rss() / report.MiB,
        "load_start": load_average(),
    }
    # Every store's data lives under one directory, removed at the end even
    # when a worker had to be killed.
    scratch = Path(tempfile.mkdtemp(prefix="litemq-peers-", dir=args.dir))
    machine = report.machine()
    machine["filesystem"] = report.filesystem(str(scratch))
    results["machine"] = machine
    args.dir = str(scratch)
    sample: list[int] = []
    if args.random_get:
        try:
            result = run_random_get(args, QuietPolicy(args.quiet_wait, args.quiet_threshold))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        print("\n" + "\n".join(random_get.lines(result)))
        print(f"command: {results['command']}")
        return 0 if "median" in result else 1
    if args.anchors_only:
        try:
            result = run_anchors(args, litemq_problem())
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if "error" in result:
            print(f"\nraw-write anchors not measured: {result['error']}")
            return 1
        print("\n" + "\n".join(anchors.lines(result)))
        print(f"command: {results['command']}")
        return 0
    if args.multi_writer_only:
        try:
            mw = run_multi_writer(args, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        print("\n" + "\n".join(multi_writer.lines(mw)))
        print(f"command: {results['command']}")
        return 0
    if args.work_queue_only:
        try:
            wq = work_queue.run(scratch, args.wq_n, args.wq_peer_n, args.size, args.cap, progress)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        print("\n" + "\n".join(work_queue.lines(wq)))
        print(f"command: {results['command']}")
        return 0
    try:
        if args.follow_only:
            results.update({"runs": {}, "litemq_missing": litemq_problem()})
        else:
            results.update(run_all(args, stores))
        if not args.no_anchors and not args.follow_only and any(s.is_litemq for s in stores):
            results["anchors"] = run_anchors(args, results["litemq_missing"])
        if not args.no_latency and any(s.is_litemq for s in stores):
            lat = run_latency(args, results["litemq_missing"])
            sample = lat.pop("_sample", [])
            results["latency"] = lat
        if not args.no_follow and any(s.is_litemq for s in stores):
            results["follow"] = run_follow(args, results["litemq_missing"])
        if not args.no_work_queue and not args.follow_only and not results["litemq_missing"]:
            results["work_queue"] = work_queue.run(
                scratch, args.wq_n, args.wq_peer_n, args.size, args.cap, progress
            )
        if not args.no_multi_writer and not args.follow_only and not results["litemq_missing"]:
            results["multi_writer"] = run_multi_writer(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    results["goals"] = report.goals(results)
    results["seconds"] = round(time.monotonic() - t0, 1)
    results["load_end"] = load_average()

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1) + "\n")
    if args.follow_only:
        print()
        print(report.follow_text(results.get("follow", {})))
        print(f"\nresults: {args.json}")
        return 0

    rows = report.table_rows(results)
    print()
    print(report.text_table(report.TABLE_HEAD, rows))
    notes = report.capped_notes(results)
    if notes:
        print("\n* " + "\n* ".join(notes))
    missing = report.status_notes(results)
    if missing:
        print("\nnot measured:\n  " + "\n  ".join(missing))
    busy = report.contention_line(results)
    if busy:
        print("\n" + busy)
    if results["load_start"][0] > 0.5:
        print(
            f"\nwarning: load average was {results['load_start'][0]:.2f} at the start; "
            "other work on the machine lowers every figure"
        )
    look = results["runs"].get("litemq_lookups/default", {})
    if "get" in look:
        print("\nlitemq " + describe(look))
    if "random_get" in results:
        print("\n" + "\n".join(random_get.lines(results["random_get"])))
    if "anchors" in results and "error" not in results["anchors"]:
        print("\n" + "\n".join(anchors.lines(results["anchors"])))
    print("\nGoals (issue 8):")
    for line in report.goal_lines(results):
        print("  " + line)
    if "follow" in results:
        print()
        print(report.follow_text(results["follow"]))
    if "work_queue" in results:
        print("\n" + "\n".join(work_queue.lines(results["work_queue"])))
    if "multi_writer" in results:
        print("\n" + "\n".join(multi_writer.lines(results["multi_writer"])))

    img_dir = ROOT / "docs" / "img" if args.docs else args.json.parent
    img_dir.mkdir(parents=True, exist_ok=True)
    try:
        report.throughput_chart(results, img_dir / "peers_throughput.png")
        if sample:
            report.latency_chart(results["latency"], sample, img_dir / "latency.png")
    except ImportError as exc:
        print(f"\ncharts not made: {exc}")
    print(f"\nresults: {args.json}")
    print(f"charts:  {img_dir}/peers_throughput.png" + (", latency.png" if sample else ""))
    if args.docs:
        page = ROOT / "docs" / "PERFORMANCE.md"
        old = page.read_text() if page.exists() else None
        text = report.performance_md(results, old, "img")
        page.write_text(text)
        print(f"page:    {page}")
        for heading in report.dropped_sections(old, text):
            print(
                f"warning: {page.name} no longer has {heading!r}: a section of this run's "
                "kind left out (--no-...), or one written by hand before the criterion "
                "block; put that back after <!-- criterion:end --> (git diff shows it)"
            )
    print(f"took {results['seconds']:.0f} s")
    return 0


def child(argv: list[str]) -> int:
    """Entry points of the child processes this script starts."""
    command, spec = argv[0], json.loads(argv[1])
    if command == "_worker":
        from peers_lib import worker

        return worker.main(argv[1:])
    if command == "_latency-writer":
        return latency.writer(spec)
    if command == "_latency-tailer":
        return latency.tailer(spec)
    if command == "_follow-writer":
        return latency.follow_writer(spec)
    if command == "_follow-reader":
        return latency.follow_reader(spec)
    raise SystemExit(f"unknown child command {command}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):
        sys.exit(child(sys.argv[1:]))
    sys.exit(main(sys.argv[1:]))
