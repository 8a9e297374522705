"""Option spellings accepted by `litemq.Queue` and what they normalise to."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

import litemq
from conftest import cli
from litemq.options import parse_flush, parse_roll, parse_size, parse_wait


@pytest.mark.parametrize(
    ("spec", "rules"),
    [
        ("daily", [("daily", 0)]),
        ("Hourly", [("hourly", 0)]),
        ("minutely", [("minutely", 0)]),
        (1 << 20, [("size", 1 << 20)]),
        ("size:64MiB", [("size", 64 << 20)]),
        ("size:4096", [("size", 4096)]),
        ("count:1000", [("count", 1000)]),
        (["hourly", "count:5"], [("hourly", 0), ("count", 5)]),
        (("daily", 1 << 30), [("daily", 0), ("size", 1 << 30)]),
        (
            {"period": "hourly", "size": "256MiB", "count": 10},
            [("hourly", 0), ("size", 256 << 20), ("count", 10)],
        ),
    ],
)
def test_roll_spellings(spec: litemq.options.RollSpec, rules: list[tuple[str, int]]) -> None:
    assert parse_roll(spec) == rules


@pytest.mark.parametrize(
    ("text", "n"),
    [("4096", 4096), ("64KiB", 65536), ("64k", 65536), ("1 GiB", 1 << 30), ("2m", 2 << 20), (7, 7)],
)
def test_sizes(text: str | int, n: int) -> None:
    assert parse_size(text) == n


def test_flush_and_wait_spellings() -> None:
    assert parse_flush("async") == ("async", 0, 0.0)
    assert parse_flush("sync") == ("sync", 0, 0.0)
    assert parse_flush(litemq.Batch(bytes=4096, interval=0.5)) == ("batch", 4096, 0.5)
    assert parse_flush(litemq.Batch(interval=timedelta(milliseconds=20))) == (
        "batch",
        1 << 20,
        0.02,
    )
    assert parse_wait("busy-spin") == "busy-spin"
    assert litemq.Batch() == litemq.Batch(bytes=1 << 20, interval=0.01)


def test_size_roll_really_rolls_by_size(qpath: object) -> None:
    with litemq.Queue(qpath, file_size="256KiB", roll="size:80KiB") as q:  # type: ignore[arg-type]
        app = q.appender()
        app.append_batch([b"z" * 1000] * 400)
        app.flush()
        assert q.stats().files >= 4
        assert [m.seq for m in q.tailer()] == list(range(400))


def test_options_are_remembered(tmp_path: Path) -> None:
    """Reopening without options keeps the queue's own, not the defaults."""
    path = tmp_path / "q"
    keep = litemq.Retention(max_files=3)
    with litemq.Queue(
        path,
        file_size="128KiB",
        roll="count:5",
        index_interval=4,
        key_index={"slots": 64, "items": 128},
        retention=keep,
    ) as q:
        q.appender().append_batch([b"x"] * 12)
    meta = json.loads((path / "metadata.json").read_text())
    assert meta["options"] == {
        "file_size": 128 << 10,
        "roll": [["count", 5]],
        "index_interval": 4,
        "key_index": [64, 128],
        "retention": {
            "max_age_us": None,
            "max_bytes": None,
            "max_files": 3,
            "protect_unconsumed": False,
        },
        "multi_writer": False,
    }
    with litemq.Queue(path) as q:
        q.appender().append_batch([b"y"] * 13)
        files = q.data_files()
        # count:5 still rolls, files are still 128 KiB, retention still keeps 3.
        assert [f.size for f in files] == [128 << 10] * 3
        assert [f.end_seq - f.first_seq for f in files] == [5, 5, 5]
    # A different value applies to new files, and is remembered from then on.
    with litemq.Queue(path, file_size="256KiB") as q:
        q.appender().append_batch([b"z"] * 5)
        assert q.data_files()[-1].size == 256 << 10
    with litemq.Queue(path) as q:
        q.appender().append_batch([b"w"] * 5)
        assert q.data_files()[-1].size == 256 << 10
    info = json.loads(cli("info", str(path), "--format", "json").stdout)
    assert info["options"]["file_size"] == 256 << 10
    assert info["options"]["roll"] == [["count", 5]]


def test_a_bad_remembered_option_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "q"
    litemq.Queue(path, file_size="64KiB").close()
    meta_path = path / "metadata.json"
    meta = json.loads(meta_path.read_text())
    meta["options"]["file_size"] = 100
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(litemq.ConfigError, match=r"metadata\.json.*file_size"):
        litemq.Queue(path)
    # An explicit value replaces the bad one.
    litemq.Queue(path, file_size="64KiB").close()


def test_stats_report_bytes_written_and_allocated(tmp_path: Path) -> None:
    with litemq.Queue(tmp_path / "q", file_size="1MiB", roll="count:100") as q:
        q.appender().append_batch([b"m" * 100] * 250)
        q.appender().flush()
        s = q.stats()
        files = q.data_files()
        assert s.data_bytes_written == sum(f.bytes_written for f in files)
        assert s.data_bytes_written == 3 * 4096 + 250 * 128  # header, frames of 128 bytes
        assert s.data_bytes_allocated == sum(f.bytes_allocated for f in files)
        assert s.disk_bytes == s.data_bytes_allocated + s.index_bytes_allocated
        # Sealed files hold their data rounded to a page, with the footer.
        for f in files[:2]:
            assert f.bytes_allocated <= f.bytes_written + 8192


def test_the_native_queue_parses_the_spellings_itself(tmp_path: Path) -> None:
    """Options are validated once, in Rust: the native class takes the
    spellings `litemq.Queue` documents, not a pre-parsed form."""
    native = litemq._litemq.Queue
    path = str(tmp_path / "q")
    q = native(
        path,
        file_size="128KiB",
        roll={"count": 5},
        flush=litemq.Batch(bytes=4096, interval=timedelta(milliseconds=5)),
        index_interval=4,
        wait="busy-spin",
        key_index={"slots": 64, "items": 128},
        retention=litemq.Retention(max_files=2),
    )
    try:
        q.appender().append_batch([b"x"] * 12)
        q.appender().flush()
        files = q._data_files()  # litemq.DataFileInfo, built by the native class
        assert [f.size for f in files] == [128 << 10] * 2
        assert [f.end_seq - f.first_seq for f in files] == [5, 2]
    finally:
        q.close()
    with pytest.raises(litemq.ConfigError, match="roll rule 'weekly'"):
        native(path, roll="weekly")
    with pytest.raises(TypeError, match=r"retention must be a litemq\.Retention"):
        native(path, retention={"max_files": 2})


@pytest.mark.parametrize(
    ("kwargs", "exc", "message"),
    [
        (
            {"file_size": "lots"},
            litemq.ConfigError,
            "file_size must be a number of bytes like 4096 or '64MiB', got 'lots'",
        ),
        (
            {"file_size": 2**41},
            litemq.ConfigError,
            "file_size must be between 65536 and 1099511627776, got 2199023255552",
        ),
        (
            {"roll": "weekly"},
            litemq.ConfigError,
            "roll rule 'weekly' is not one of 'minutely', 'hourly', 'daily', 'size:N', "
            "'count:N' or an int (bytes)",
        ),
        (
            {"roll": f"count:{2**64}"},
            litemq.ConfigError,
            "roll count must be between 1 and 18446744073709551615, got '18446744073709551616'",
        ),
        (
            {"roll": {"color": "red"}},
            litemq.ConfigError,
            "unknown roll key 'color' (expected period, size, count)",
        ),
        (
            {"roll": 3.5},
            TypeError,
            "roll must be a period name, a size, 'count:N', or a combination, not float",
        ),
        (
            {"flush": "sometimes"},
            litemq.ConfigError,
            "flush must be 'async', 'sync' or litemq.Batch(...), got 'sometimes'",
        ),
        ({"wait": "nap"}, litemq.ConfigError, "wait must be 'default' or 'busy-spin', got 'nap'"),
        (
            {"key_index": {"colour": 1, "size": 2}},
            litemq.ConfigError,
            "unknown key_index keys ['colour', 'size'] (expected slots, items)",
        ),
        (
            {"key_index": {"slots": 2**32}},
            litemq.ConfigError,
            "key_index slots and items must be below 2**32",
        ),
        (
            {"channel_capacity": 65_537},
            litemq.ConfigError,
            "channel_capacity must be between 1 and 65536, got 65537",
        ),
        ({"read_only": "yes"}, TypeError, "read_only must be True or False, not str"),
        (
            {"retention": {"max_files": 3}},
            TypeError,
            "retention must be a litemq.Retention(...), not dict",
        ),
    ],
)
def test_option_errors_say_what_was_expected(
    qpath: Path, kwargs: dict[str, object], exc: type[Exception], message: str
) -> None:
    with pytest.raises(exc) as info:
        litemq.Queue(qpath, **kwargs)  # type: ignore[arg-type]
    assert str(info.value) == message
    assert not qpath.exists()
