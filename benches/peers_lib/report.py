# ruff: noqa: RUF001  (the multiplication sign is meant in what this prints)
"""Tables, goals, charts and ``docs/PERFORMANCE.md``, all from one run's results."""

from __future__ import annotations

import contextlib
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from . import anchors, work_queue
from .stores import BY_KEY, STORES, Store

MiB = 1024 * 1024

CRITERION_BEGIN = "<!-- criterion:begin -->"
CRITERION_END = "<!-- criterion:end -->"
CRITERION_PLACEHOLDER = (
    "_The engine's criterion figures go here (`cargo bench`); `benches/peers.py` keeps this\n"
    "section as it is when it rewrites the page._"
)

# --------------------------------------------------------------------------
# Reading the results
# --------------------------------------------------------------------------


def _run(results: dict[str, Any], key: str, variant: str) -> dict[str, Any] | None:
    run = results["runs"].get(f"{key}/{variant}")
    if run is None or "append" not in run:
        return None
    return dict(run)


def rate(results: dict[str, Any], key: str, variant: str, phase: str) -> float | None:
    run = _run(results, key, variant)
    if run is None or phase not in run:
        return None
    return float(run[phase]["rate"])


def _litemq_match(store: type[Store]) -> str:
    """The litemq row a peer is compared with: per-call with per-call, batched with batched."""
    return "litemq_batch" if store.batched else "litemq"


@dataclass
class Cell:
    value: float | None
    capped: bool = False
    note: str = ""


def fmt_rate(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M"
    if value >= 1e3:
        return f"{value / 1e3:.1f} k"
    if value >= 10:
        return f"{value:.0f}"
    return f"{value:.1f}"


def fmt_ratio(value: float | None) -> str:
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f}×"
    if value >= 10:
        return f"{value:.1f}×"
    return f"{value:.2f}×"


def fmt_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} µs"


def _phase_cell(results: dict[str, Any], key: str, variant: str, phase: str) -> str:
    raw = results["runs"].get(f"{key}/{variant}")
    if raw is None:
        return "—"
    if "error" in raw:
        return "failed"
    ph = raw.get(phase)
    if ph is None:
        return "—"
    text = fmt_rate(ph["rate"])
    return text + "*" if ph["capped"] else text


def _status(results: dict[str, Any], key: str) -> str | None:
    """Why a store has no figures at all, or None when some variant has them."""
    runs = [results["runs"].get(f"{key}/{v}") for v in ("default", "durable")]
    runs = [r for r in runs if r is not None]
    if any("append" in r for r in runs):
        return None
    if any("error" in r for r in runs):
        return "FAILED (see below)"
    if any("unavailable" in r for r in runs):
        return "not run (unavailable)"
    return "not run"


def status_notes(results: dict[str, Any]) -> list[str]:
    """One line per store without figures, saying why."""
    notes = []
    for store in STORES:
        for variant in ("default", "durable"):
            run = results["runs"].get(f"{store.key}/{variant}")
            if run is None or "append" in run:
                continue
            why = run.get("unavailable") or run.get("error") or "?"
            notes.append(f"{store.label}, {variant}: {why}")
            if "unavailable" in run:
                break  # the same reason holds for the other variant
    return notes


def table_rows(results: dict[str, Any]) -> list[list[str]]:
    """One row per store: figures, ratios to litemq, memory, disk."""
    n = results["config"]["n"]
    rows = []
    for store in STORES:
        if store.key not in results["stores"]:
            continue
        status = _status(results, store.key)
        if status is not None:
            rows.append([store.label, status] + ["—"] * 9)
            continue
        match = _litemq_match(store)
        ratios = []
        for variant, phase, against in (
            ("default", "append", match),
            ("default", "read", "litemq"),
            ("durable", "append", match),
        ):
            mine = rate(results, store.key, variant, phase)
            theirs = rate(results, against, variant, phase)
            if store.is_litemq or mine is None or theirs is None or mine == 0:
                ratios.append("—")
            else:
                ratios.append(fmt_ratio(theirs / mine))
        main = _run(results, store.key, "default") or _run(results, store.key, "durable")
        assert main is not None
        peak = main.get("peak_rss", 0) + main.get("server_peak_rss", 0)
        count = main["append"]["count"]
        disk = main["disk_allocated"]
        rows.append(
            [
                store.label,
                _phase_cell(results, store.key, "default", "append"),
                _phase_cell(results, store.key, "default", "read"),
                _phase_cell(results, store.key, "durable", "append"),
                _phase_cell(results, store.key, "durable", "read"),
                ratios[0],
                ratios[1],
                ratios[2],
                f"{peak / MiB:.0f}",
                f"{disk / MiB:.0f}" + ("*" if count < n else ""),
                f"{disk / count:.0f}" if count else "—",
            ]
        )
    return rows


TABLE_HEAD = [
    "store",
    "append msg/s",
    "read msg/s",
    "durable append msg/s",
    "durable read msg/s",
    "litemq × (append)",
    "litemq × (read)",
    "litemq × (durable append)",
    "peak RSS MiB",
    "disk MiB",
    "disk B/msg",
]


def capped_notes(results: dict[str, Any]) -> list[str]:
    cap = results["config"]["cap"]
    notes = []
    for store in STORES:
        for variant in ("default", "durable"):
            run = _run(results, store.key, variant)
            if run is None:
                continue
            for phase in ("append", "read"):
                ph = run.get(phase)
                if ph and ph["capped"]:
                    notes.append(
                        f"{store.label}, {variant} {phase}: capped at {cap:g} s, "
                        f"{ph['count']:,} messages in {ph['seconds']:.2f} s, "
                        f"figure is that rate (scaled to msg/s)"
                    )
    return notes


def contention_line(results: dict[str, Any]) -> str | None:
    """How much of the cores other processes took during the stores' runs."""
    shares = [
        (run["others_cpu"], key)
        for key, run in results["runs"].items()
        if isinstance(run, dict) and "others_cpu" in run
    ]
    if not shares:
        return None
    mean = sum(s for s, _ in shares) / len(shares)
    worst, where = max(shares)
    return (
        f"Other processes used {mean:.0%} of the cores on average while the stores ran "
        f"(at most {worst:.0%}, during {where})."
    )


def markdown_table(head: list[str], rows: list[list[str]], numeric: bool = True) -> str:
    """A pipe table; ``numeric``: every column after the first is right-aligned."""
    align = ["---"] + ["---:" if numeric else "---"] * (len(head) - 1)
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    out = []
    for j, row in enumerate([head, *rows]):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        out.append("  ".join(cells))
        if j == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


# --------------------------------------------------------------------------
# Goals from issue 8
# --------------------------------------------------------------------------


def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal: text, litemq figure, peer figure, ratio, required ratio, verdict."""
    specs = [
        (
            "per-call append ≥ 1.5× the plain-file baseline",
            ("litemq", "default", "append"),
            ("file", "default", "append"),
            1.5,
        ),
        (
            "append_batch ≥ 5× lmdb's batched append (sync off)",
            ("litemq_batch", "default", "append"),
            ("lmdb", "default", "append"),
            5.0,
        ),
        (
            "tailer iteration ≥ 1.5× lmdb's cursor scan (issue 15)",
            ("litemq", "default", "read"),
            ("lmdb", "default", "read"),
            1.5,
        ),
        (
            "tailer.read_batch(1000) ≥ 1.5× lmdb's cursor scan (issue 15)",
            ("litemq_read_batch", "default", "read"),
            ("lmdb", "default", "read"),
            1.5,
        ),
        (
            "read_arrow (65,536-row calls) ≥ 5× lmdb's cursor scan",
            ("litemq_batch", "default", "read"),
            ("lmdb", "default", "read"),
            5.0,
        ),
        (
            "read_arrow() of the whole queue, one call, ≥ 5× lmdb's cursor scan (issue 15)",
            ("litemq_arrow_all", "default", "read"),
            ("lmdb", "default", "read"),
            5.0,
        ),
        (
            "durable appends (flush every 1,000) ≥ 2× lmdb sync on",
            ("litemq", "durable", "append"),
            ("lmdb", "durable", "append"),
            2.0,
        ),
        (
            "durable append_batch (flush every 1,000) ≥ 2× lmdb sync on",
            ("litemq_batch", "durable", "append"),
            ("lmdb", "durable", "append"),
            2.0,
        ),
        (
            "durable appends (flush='sync', 4 threads) ≥ 2× lmdb sync on",
            ("litemq_sync4", "durable", "append"),
            ("lmdb", "durable", "append"),
            2.0,
        ),
    ]
    out: list[dict[str, Any]] = []
    for text, mine, theirs, need in specs:
        a = rate(results, *mine)
        b = rate(results, *theirs)
        if a is None or b is None or b == 0:
            missing = mine[0] if a is None else theirs[0]
            out.append({"goal": text, "verdict": "NOT RUN", "why": f"no figure for {missing}"})
            continue
        ratio = a / b
        out.append(
            {
                "goal": text,
                "litemq": a,
                "peer": b,
                "ratio": ratio,
                "required": need,
                "verdict": "PASS" if ratio >= need else "FAIL",
            }
        )
    return out


def goal_lines(results: dict[str, Any]) -> list[str]:
    lines = []
    for g in results["goals"]:
        if g["verdict"] == "NOT RUN":
            lines.append(f"NOT RUN  {g['goal']} ({g['why']})")
        else:
            lines.append(
                f"{g['verdict']:<8} {g['goal']}: {fmt_rate(g['litemq'])} vs "
                f"{fmt_rate(g['peer'])} msg/s = {fmt_ratio(g['ratio'])} "
                f"(needs {g['required']:g}×)"
            )
    return lines


# --------------------------------------------------------------------------
# Machine and versions
# --------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"kernel": platform.release(), "python": sys.version.split()[0]}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        models = re.findall(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
        info["cpu"] = models[0] if models else platform.processor()
        info["logical_cpus"] = len(re.findall(r"^processor\s*:", cpuinfo, re.M))
        mhz = re.findall(r"^cpu MHz\s*:\s*(.+)$", cpuinfo, re.M)
        if mhz:
            info["cpu_mhz"] = float(mhz[0])
    except OSError:
        info["cpu"] = platform.processor()
    try:
        meminfo = Path("/proc/meminfo").read_text()
        total = re.search(r"^MemTotal:\s*(\d+) kB", meminfo, re.M)
        if total:
            info["memory_gib"] = round(int(total.group(1)) / MiB, 1)
    except OSError:
        pass
    versions = {}
    for dist in (
        "litemq",
        "lmdb",
        "queuelib",
        "diskcache",
        "persist-queue",
        "litequeue",
        "redis",
        "hiredis",
        "pyarrow",
        "matplotlib",
    ):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[dist] = metadata.version(dist)
    import sqlite3

    versions["sqlite"] = sqlite3.sqlite_version
    binary = shutil.which("redis-server")
    if binary:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True)
        versions["redis-server"] = out.stdout.split()[2].removeprefix("v=") if out.stdout else "?"
    info["versions"] = versions
    return info


def filesystem(path: str) -> str:
    """Filesystem type and device of the mount holding ``path``."""
    best = ("", "?", "?")
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            dev, mnt, fstype = line.split()[:3]
            if path.startswith(mnt) and len(mnt) >= len(best[0]):
                best = (mnt, fstype, dev)
    except OSError:
        pass
    return f"{best[1]} on {best[2]} (mounted at {best[0]})"


def describe_machine(m: dict[str, Any]) -> str:
    cpu = m.get("cpu", "?")
    parts = [f"{m.get('logical_cpus', '?')} × {cpu}"]
    if "cpu_mhz" in m:
        parts[0] += f" ({m['cpu_mhz']:.0f} MHz)"
    if "memory_gib" in m:
        parts.append(f"{m['memory_gib']} GiB RAM")
    parts.append(f"Linux {m['kernel']}")
    parts.append(f"Python {m['python']}")
    return ", ".join(parts)


# --------------------------------------------------------------------------
# Charts
# --------------------------------------------------------------------------

LITEMQ_COLOURS = ("#1f5fa8", "#7fb0e6")
PEER_COLOURS = ("#8c8c8c", "#cfcfcf")


def throughput_chart(results: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    stores = [BY_KEY[k] for k in results["stores"] if _status(results, k) is None]
    fig, axes = plt.subplots(1, 2, figsize=(13, 0.55 * len(stores) + 1.8), sharey=True)
    labels = [s.label for s in stores]
    y = list(range(len(stores)))
    height = 0.38
    for ax, phase in zip(axes, ("append", "read"), strict=True):
        for offset, variant, shade in ((-height / 2, "default", 0), (height / 2, "durable", 1)):
            values = [rate(results, s.key, variant, phase) or 0 for s in stores]
            colours = [(LITEMQ_COLOURS if s.is_litemq else PEER_COLOURS)[shade] for s in stores]
            bars = ax.barh([v + offset for v in y], values, height=height, color=colours)
            for bar, value in zip(bars, values, strict=True):
                if value:
                    ax.text(
                        value * 1.08,
                        bar.get_y() + bar.get_height() / 2,
                        fmt_rate(value),
                        va="center",
                        fontsize=7,
                    )
        ax.set_xscale("log")
        ax.set_xlim(left=1, right=max(1e8, ax.get_xlim()[1] * 4))
        ax.set_title(f"{phase} (messages/s, log scale)")
        ax.grid(axis="x", which="major", alpha=0.3)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(labels, fontsize=8)
    axes[0].invert_yaxis()
    cfg = results["config"]
    fig.suptitle(
        f"{cfg['n']:,} × {cfg['size']}-byte messages, one fresh process per store and variant",
        fontsize=10,
    )
    handles = [
        Patch(color=LITEMQ_COLOURS[0], label="litemq"),
        Patch(color=LITEMQ_COLOURS[1], label="litemq, durable"),
        Patch(color=PEER_COLOURS[0], label="other store"),
        Patch(color=PEER_COLOURS[1], label="other store, durable (sync every 1,000)"),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def latency_chart(latency: dict[str, Any], sample: list[int], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    count = len(sample)
    # x: 1 / (1 - quantile), the "number of nines" axis of HdrHistogram plots.
    xs, ys = [], []
    step = max(1, count // 4000)
    for i in range(0, count, step):
        q = (i + 1) / count
        if q < 1:
            xs.append(1 / (1 - q))
            ys.append(sample[i] / 1e3)
    ax.plot(xs, ys, color=LITEMQ_COLOURS[0])
    for p, value in latency["percentiles_ns"].items():
        x = 1 / (1 - float(p) / 100)
        if x <= max(xs, default=1):
            ax.plot([x], [value / 1e3], "o", color=LITEMQ_COLOURS[0], markersize=4)
            ax.annotate(
                f"p{float(p):g} {fmt_ns(value)}",
                (x, value / 1e3),
                textcoords="offset points",
                xytext=(-6, 8),
                ha="right",
                fontsize=8,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [
        (2, "50%"),
        (10, "90%"),
        (100, "99%"),
        (1000, "99.9%"),
        (10000, "99.99%"),
        (100000, "99.999%"),
    ]
    ticks = [t for t in ticks if t[0] <= max(xs, default=1) * 1.01]
    ax.set_xticks([t[0] for t in ticks])
    ax.set_xticklabels([t[1] for t in ticks])
    ax.set_xlabel("percentile")
    ax.set_ylabel("append → tailer latency (µs, log scale)")
    ax.grid(which="major", alpha=0.3)
    ax.set_title(
        f"litemq: append in one process → tailer in another, "
        f"{latency['rate']:,} msg/s, {latency['measured']:,} messages",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------
# docs/PERFORMANCE.md
# --------------------------------------------------------------------------


def _kept_sections(old: str | None) -> str:
    """The old page from the criterion section to its end: the criterion
    figures and every hand-written section after them (measurements of later
    issues), which a run must not drop."""
    if old and CRITERION_BEGIN in old and CRITERION_END in old:
        return old[old.index(CRITERION_BEGIN) :].rstrip("\n")
    return f"{CRITERION_BEGIN}\n{CRITERION_PLACEHOLDER}\n{CRITERION_END}"


def dropped_sections(old: str | None, new: str) -> list[str]:
    """Headings (``## ...``) of the old page that the new one lacks. The page
    before the criterion block is regenerated whole, so a section written by
    hand there is lost by a run (the issue-30 section was, once): the run
    names them so that they can be put back after the criterion block."""

    def headings(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("## ")]

    if not old:
        return []
    now = set(headings(new))
    return [h for h in headings(old) if h not in now]


def lookups_table(results: dict[str, Any]) -> str | None:
    look = results["runs"].get("litemq_lookups/default")
    if not look or "get" not in look:
        return None
    rows = [
        [
            "random `q.get(seq)`",
            fmt_rate(look["get"]["rate"]) + " calls/s",
            f"{look['get']['count']:,} calls over {look['messages']:,} messages",
        ]
    ]
    find = look.get("find", {})
    if "rate" in find:
        rows.append(
            [
                "`q.find(key)`",
                fmt_rate(find["rate"]) + " calls/s",
                f"{find['messages_per_call']:.0f} messages per call "
                f"({look['keys']:,} keys over {look['messages']:,} messages)",
            ]
        )
    else:
        rows.append(["`q.find(key)`", "—", find.get("error", "not measured")])
    return markdown_table(["litemq lookup", "throughput", "measured on"], rows, numeric=False)


def latency_table(latency: dict[str, Any]) -> str:
    head = ["p50", "p90", "p99", "p99.9", "p99.99", "max", "mean"]
    pct = latency["percentiles_ns"]
    row = [fmt_ns(pct[str(p)]) for p in (50.0, 90.0, 99.0, 99.9, 99.99)]
    row += [fmt_ns(latency["max_ns"]), fmt_ns(latency["mean_ns"])]
    return markdown_table(head, [row])


def _follow_rows(follow: dict[str, Any]) -> list[list[str]]:
    rows = []
    for rate in follow["rates"]:
        for transport in ("pipe", "litemq"):
            c = follow["cases"].get(f"{transport}/{rate}")
            if not c:
                continue
            label = "`os.pipe` (blocking read)" if transport == "pipe" else "litemq `follow()`"
            if transport == "litemq" and not c.get("wake_word", True):
                label += " (polling: no wake-up word)"
            rows.append(
                [
                    f"{rate:,}",
                    label,
                    fmt_ns(c["p50_ns"]),
                    fmt_ns(c["p99_ns"]),
                    fmt_ns(c["p999_ns"]),
                    f"{c['cpu']:.1%}",
                ]
            )
    return rows


FOLLOW_HEAD = ["msg/s", "transport", "p50", "p99", "p99.9", "follower CPU"]


def _follow_goal_lines(follow: dict[str, Any]) -> list[str]:
    lines = []
    for g in follow.get("goals", []):
        if "CPU" in g["goal"]:
            figures = f"{g['litemq']:.1%} (pipe {g['peer']:.1%})"
        else:
            figures = f"{fmt_ns(g['litemq'])} vs the pipe's {fmt_ns(g['peer'])}"
        lines.append(f"{g['verdict']:<8} {g['goal']}: {figures}")
    return lines


def follow_text(follow: dict[str, Any]) -> str:
    """The follow-vs-pipe cases and issue 15's goals, as plain text."""
    if "error" in follow:
        return f"follow vs os.pipe: not measured: {follow['error']}"
    if not follow.get("cases"):
        return "follow vs os.pipe: not measured"
    return "\n".join(
        [
            "Append in one process -> follow() in another, against os.pipe (issue 15):",
            text_table(FOLLOW_HEAD, _follow_rows(follow)),
            "",
            "Goals (issue 15):",
            *("  " + line for line in _follow_goal_lines(follow)),
        ]
    )


def follow_md(follow: dict[str, Any]) -> list[str]:
    if "error" in follow:
        return ["## Followers against a pipe", "", f"Not measured: {follow['error']}", ""]
    rounds = follow.get("rounds", 1)
    return [
        "## Followers against a pipe",
        "",
        "A writer process sends 100-byte messages stamped with `time.monotonic_ns()`, paced "
        f"(a burst every millisecond), for {follow['seconds']:g} s per case; a reader "
        "process receives them, over an `os.pipe` (blocking `os.read`) or through litemq "
        "(`append` → `tailer.follow()` on a `read_only=True` handle, `wait='default'`: "
        "spin, then sleep on the wake-up word). *Follower CPU*: the reader's own "
        "`getrusage` from its first message to its last, over that wall time (100 % = one "
        "core). " + (f"Median of {rounds} interleaved rounds." if rounds > 1 else "One round."),
        "",
        markdown_table(FOLLOW_HEAD, _follow_rows(follow)),
        "",
        "```text",
        *_follow_goal_lines(follow),
        "```",
        "",
    ]


def performance_md(results: dict[str, Any], old: str | None, img_rel: str) -> str:
    cfg = results["config"]
    m = results["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in m.get("versions", {}).items())
    lines = [
        "# Performance",
        "",
        "<!-- Generated by benches/peers.py from one run; edit the script, not this page"
        " (except the criterion section and the sections after it, which it keeps). -->",
        "",
        f"Measured on {describe_machine(m)}; data on {m.get('filesystem', '?')}.",
        f"Versions: {versions}.",
        f"Load average at the start {results['load_start'][0]:.2f}, at the end "
        f"{results['load_end'][0]:.2f} (1 min). Run of {results['started']} with",
        "",
        "```sh",
        results["command"],
        "```",
        "",
        "## litemq and what a Python user would use instead",
        "",
        f"{cfg['n']:,} messages of {cfg['size']} bytes (1,000 distinct random payloads, "
        "reused). Each store runs in a fresh process per variant, one after another, "
        "on the same machine and disk, with a warm page cache.",
        "",
    ]
    if results.get("litemq_missing"):
        lines += [f"**litemq was not measured in this run:** {results['litemq_missing']}", ""]
    lines += [
        f"![throughput per store]({img_rel}/peers_throughput.png)",
        "",
        markdown_table(TABLE_HEAD, table_rows(results)),
        "",
        "- *durable*: every 1,000 messages the store is made durable (fsync or its own "
        "equivalent, listed below); litemq's `flush='sync'` row instead has every append "
        "durable when it returns, 4 threads appending at once (group commit).",
        "- *durable read*: the store written in the durable variant, read back opened "
        "with the same settings. Where a read consumes (the four queue libraries), "
        "diskcache pops in transactions of 1,000 with synchronous=FULL, litequeue pops "
        "one transaction each with synchronous=FULL, queuelib and persist-queue as usual.",
        "- *litemq ×*: litemq's figure divided by the store's. Per-call stores are compared "
        "with litemq's per-call `append`, batched ones (lmdb, sqlite3, Redis) with "
        "`append_batch`, in the same variant (durable: litemq's `flush()` every 1,000); "
        "reads with iterating a tailer.",
        "- *peak RSS*: the highest resident set of the store's process (and of "
        "`redis-server`, added) during append or read, read from `VmHWM` after resetting it "
        "per phase; it includes the interpreter (~"
        f"{results.get('baseline_rss_mib', 0):.0f} MiB before any store opens) and file "
        "pages a store maps (litemq, lmdb).",
        "- *disk MiB*: blocks allocated (not apparent size) after the append phase, for "
        "the messages that phase wrote (fewer than "
        f"{cfg['n']:,} where marked `*`) and after the store was closed; *disk B/msg* is "
        "that figure per message, for every store alike (litemq's data files are sparse "
        "and allocated as they fill, sealed ones trimmed, so it holds about what it "
        "wrote).",
        f"- `*`: capped at {cfg['cap']:g} s and scaled; the exact counts are listed below.",
        "",
    ]
    busy = contention_line(results)
    if busy:
        shares = [r.get("others_cpu", 0.0) for r in results["runs"].values()]
        if shares and sum(shares) / len(shares) > 0.25:
            busy = (
                "**Taken on a busy machine: the figures are lower than on a quiet one, "
                "and the ratios noisier.** " + busy
            )
        lines += [busy, ""]
    if cfg.get("repeat", 1) > 1:
        lines += [f"Each store ran {cfg['repeat']} times; each phase shows its best.", ""]
    notes = capped_notes(results)
    if notes:
        lines += ["Capped runs:", ""] + [f"- {note}" for note in notes] + [""]
    missing = status_notes(results)
    if missing:
        lines += ["Not measured:", ""] + [f"- {note}" for note in missing] + [""]
    lines += ["## Goals (issue 8)", "", "```text", *goal_lines(results), "```", ""]
    if "anchors" in results:
        lines += anchors.markdown_section(results["anchors"])
    look = lookups_table(results)
    if look:
        lines += ["## Lookups", "", look, ""]
    latency = results.get("latency")
    if latency and "percentiles_ns" in latency:
        lines += [
            "## Latency from append to a tailer in another process",
            "",
            f"A writer process appends {latency['messages']:,} messages at "
            f"{latency['rate']:,} msg/s, stamping `time.monotonic_ns()` into each payload "
            "just before `append`; a tailer in a second process (`read_only=True`, "
            "`tailer.follow()`) records the difference when the message reaches it. The "
            "first 1 % is warm-up and left out.",
            "",
            latency_table(latency),
            "",
            f"![latency percentiles]({img_rel}/latency.png)",
            "",
        ]
    elif latency and "error" in latency:
        lines += ["## Latency", "", f"Not measured: {latency['error']}", ""]
    if "follow" in results:
        lines += follow_md(results["follow"])
    if "work_queue" in results:
        lines += work_queue.markdown(results["work_queue"])
    lines += [
        "## How each store is used",
        "",
        markdown_table(
            ["store", "append", "read", "durable variant"],
            [
                [s.label, f"`{s.append_api}`", f"`{s.read_api}`", s.durable_how]
                for s in STORES
                if s.key in results["stores"]
            ],
            numeric=False,
        ),
        "",
        "## Engine micro-benchmarks (criterion)",
        "",
        _kept_sections(old),
        "",
    ]
    return "\n".join(lines)
