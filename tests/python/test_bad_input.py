"""Bad input gets a documented, typed error: never a panic, an abort or an
`OverflowError`.

The README's error tree is the contract: litemq raises its own errors
(`LiteMQError` and subclasses, `ConfigError` being a `ValueError`),
`TypeError` for a wrong type, `ValueError` for a bad value and `OSError`
for the operating system's refusals. A `PanicException` (a `BaseException`
from a Rust panic) or an `OverflowError` from a number conversion is none of
those, so every public call is driven here with extreme values.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import litemq
from conftest import SMALL_FILE, run_python

#: What the README documents a call may raise.
DOCUMENTED = (litemq.LiteMQError, TypeError, ValueError, OSError)

#: Values at the edges of every type a public call takes.
EXTREMES: list[object] = [
    0,
    1,
    -1,
    2**31,
    2**32,
    2**40,
    2**63,
    2**64 - 1,
    2**64,
    -(2**63),
    2**100,
    -(2**100),
    10**400,
    0.5,
    -0.5,
    1e20,
    1e300,
    -1e300,
    5e-324,
    math.inf,
    -math.inf,
    math.nan,
    "",
    " ",
    "\0",
    "x" * 70_000,
    b"",
    b"\xff" * 70_000,
    None,
    True,
    False,
    [],
    {},
    timedelta(days=999_999_999),
    timedelta(microseconds=-1),
]

ANY_VALUE = st.one_of(
    st.sampled_from(EXTREMES),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.timedeltas(),
)


@pytest.fixture(scope="module")
def filled() -> Iterator[litemq.Queue]:
    """A writable queue holding a few keyed messages, so that every wait
    below finds a message at once instead of waiting out a huge timeout."""
    tmp = Path(tempfile.mkdtemp(prefix="litemq-bad-input-"))
    q = litemq.Queue(tmp / "q", file_size=SMALL_FILE)
    app = q.appender()
    for i in range(5):
        app.append(b"m%d" % i, key="k", headers={"h": "v"})
    app.flush()
    try:
        yield q
    finally:
        q.close()
        shutil.rmtree(tmp)


def _named(q: litemq.Queue, x: Any) -> None:
    if x is None:
        return  # no name: a plain tailer, without commit()
    with q.tailer(name=x) as t:
        t.commit()


def _commit(q: litemq.Queue, x: Any) -> None:
    with q.tailer(name="edge") as t:
        t.commit(durable=x)


def _follow(q: litemq.Queue, x: Any) -> None:
    it = q.tailer().follow(idle_timeout=x)
    assert next(it).seq == q.first_seq  # a message is there: no wait


def _read_next(q: litemq.Queue, x: Any) -> None:
    msg = q.tailer().read_next(timeout=x)
    assert msg is not None
    assert msg.seq == q.first_seq


def _open_read_only(option: str) -> Callable[[litemq.Queue, Any], None]:
    # Read-only: a valid but huge size (file_size=2**40) allocates nothing.
    def call(q: litemq.Queue, x: Any) -> None:
        litemq.Queue(q.path, read_only=True, **{option: x}).close()

    return call


def _open_path(q: litemq.Queue, x: Any) -> None:
    if isinstance(x, str) and x not in ("", "\0"):
        return  # a real path would create a queue in the working directory
    # In the queue's directory: were "" taken as ".", nothing lands in the repository.
    with contextlib.chdir(q.path):
        litemq.Queue(x).close()


#: Every public call that takes a value, with that value in one argument.
CALLS: dict[str, Callable[[litemq.Queue, Any], object]] = {
    "Queue(path)": _open_path,
    **{
        f"Queue({opt}=)": _open_read_only(opt)
        for opt in (
            "file_size",
            "roll",
            "flush",
            "index_interval",
            "verify_on_startup",
            "channel_capacity",
            "wait",
            "key_index",
            "retention",
            "multi_writer",
        )
    },
    "Queue(key_index={slots})": lambda q, x: _open_read_only("key_index")(q, {"slots": x}),
    "Queue(key_index={items})": lambda q, x: _open_read_only("key_index")(q, {"items": x}),
    "Queue(roll=count:)": lambda q, x: _open_read_only("roll")(q, f"count:{x}"),
    "Queue(roll={size})": lambda q, x: _open_read_only("roll")(q, {"size": x}),
    "Batch(bytes=)": lambda q, x: litemq.Batch(bytes=x),
    "Batch(interval=)": lambda q, x: litemq.Batch(interval=x),
    "Retention(max_age=)": lambda q, x: litemq.Retention(max_age=x),
    "Retention(max_bytes=)": lambda q, x: litemq.Retention(max_bytes=x),
    "Retention(max_files=)": lambda q, x: litemq.Retention(max_files=x),
    "Retention(protect_unconsumed=)": lambda q, x: litemq.Retention(protect_unconsumed=x),
    "append(payload)": lambda q, x: q.appender().append(x),
    "append(key=)": lambda q, x: q.appender().append(b"p", key=x),
    "append(headers={x: })": lambda q, x: q.appender().append(b"p", headers={x: "v"}),
    "append(headers={: x})": lambda q, x: q.appender().append(b"p", headers={"h": x}),
    "append_batch([x])": lambda q, x: q.appender().append_batch([x]),
    "get": lambda q, x: q.get(x),
    "find(key)": lambda q, x: q.find(x),
    "find(start=)": lambda q, x: q.find("k", start=x),
    "find(end=)": lambda q, x: q.find("k", end=x),
    "find(limit=)": lambda q, x: q.find("k", limit=x),
    "tailer(start=)": lambda q, x: q.tailer(start=x),
    "tailer(name=)": _named,
    "tailer(auto_commit=)": lambda q, x: q.tailer(auto_commit=x),
    "commit(durable=)": _commit,
    "read_next(timeout=)": _read_next,
    "follow(idle_timeout=)": _follow,
    "seek": lambda q, x: q.tailer().seek(x),
    "seek_time": lambda q, x: q.tailer().seek_time(x),
    "remove_consumer": lambda q, x: q.remove_consumer(x),
    "apply_retention(Retention(max_files=))": lambda q, x: q.apply_retention(
        litemq.Retention(max_files=x)
    ),
    "apply_retention(policy)": lambda q, x: q.apply_retention(x),
    "read_arrow(start)": lambda q, x: q.read_arrow(start=x),
    "read_arrow(end)": lambda q, x: q.read_arrow(end=x),
    "read_arrow(max_rows)": lambda q, x: q.read_arrow(max_rows=x),
}


def _call(q: litemq.Queue, name: str, x: object) -> None:
    try:
        CALLS[name](q, x)
    except DOCUMENTED:
        pass
    except BaseException as e:  # PanicException derives from BaseException
        raise AssertionError(
            f"{name} with {x!r:.80} raised {type(e).__module__}.{type(e).__name__}: {e}"
        ) from e


@pytest.mark.parametrize("name", sorted(CALLS))
def test_extreme_values_raise_only_documented_errors(filled: litemq.Queue, name: str) -> None:
    for x in EXTREMES:
        _call(filled, name, x)


@pytest.mark.parametrize("name", sorted(CALLS))
@given(x=ANY_VALUE)
def test_any_value_raises_only_documented_errors(
    filled: litemq.Queue, name: str, x: object
) -> None:
    _call(filled, name, x)


# -- item by item: what a user sees -----------------------------------------


@pytest.mark.parametrize("timeout", [1e20, 1e300, float(2**64), math.inf])
def test_huge_read_timeout_waits_forever(queue: litemq.Queue, timeout: float) -> None:
    """A timeout no clock reaches means "wait for the next message", like
    None: it neither panics nor returns at once."""
    t = queue.tailer(start="end")
    app = queue.appender()

    def later() -> None:
        time.sleep(0.3)
        app.append(b"late")

    writer = threading.Thread(target=later)
    writer.start()
    began = time.monotonic()
    msg = t.read_next(timeout=timeout)
    writer.join()
    assert msg is not None
    assert msg.payload == b"late"
    assert time.monotonic() - began >= 0.2


def test_huge_idle_timeout_follows(queue: litemq.Queue) -> None:
    queue.appender().append(b"a")
    follow = queue.tailer().follow(idle_timeout=1e300)
    assert next(follow).payload == b"a"


@pytest.mark.parametrize("interval", [1e300, math.inf])
def test_batch_with_endless_interval_flushes_by_bytes(qpath: Path, interval: float) -> None:
    with litemq.Queue(
        qpath, file_size=SMALL_FILE, flush=litemq.Batch(bytes=4096, interval=interval)
    ) as q:
        q.appender().append_batch([b"x" * 100] * 100)
        q.appender().flush()
        assert len(q) == 100


def test_batch_that_can_never_flush_is_refused() -> None:
    with pytest.raises(litemq.ConfigError, match="bytes > 0"):
        litemq.Batch(bytes=0, interval=math.inf)
    with pytest.raises(litemq.ConfigError, match="interval"):
        litemq.Batch(interval=-1e300)


def test_huge_channel_capacity_is_refused_not_allocated(tmp_path: Path) -> None:
    # In a child process: before the fix this aborted the interpreter.
    proc = run_python(
        """
        import sys, litemq
        try:
            litemq.Queue(sys.argv[1], channel_capacity=2**40)
        except litemq.ConfigError as e:
            print("ConfigError:", e)
        """,
        str(tmp_path / "q"),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ConfigError" in proc.stdout
    assert "channel_capacity" in proc.stdout
    assert "65536" in proc.stdout, proc.stdout


@pytest.mark.parametrize(
    ("option", "value", "limit"),
    [
        ("channel_capacity", 65_537, "65536"),
        ("channel_capacity", 2**64, "65536"),
        ("index_interval", 2**32, "4294967295"),
        ("index_interval", 2**70, "4294967295"),
        ("file_size", 2**41, "1099511627776"),
        ("file_size", 2**70, "1099511627776"),
        ("file_size", "2048TiB", "1099511627776"),
        ("roll", 2**70, "18446744073709551615"),
        ("roll", f"count:{2**64}", "18446744073709551615"),
        ("key_index", {"slots": 2**32}, "2**32"),
        ("key_index", {"slots": 2**31, "items": 2**31}, "4294967296"),
    ],
)
def test_size_options_are_bounded(qpath: Path, option: str, value: object, limit: str) -> None:
    with pytest.raises(litemq.ConfigError, match=option.split("_")[0]) as info:
        litemq.Queue(qpath, **{option: value})  # type: ignore[arg-type]
    assert limit in str(info.value)
    assert not qpath.exists() or not any(qpath.rglob("*.data"))


def test_channel_capacity_at_its_limit_works(qpath: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, channel_capacity=65_536) as q:
        q.appender().append(b"x")
        q.appender().flush()
        assert len(q) == 1


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda q: q.get(-1), "seq"),
        (lambda q: q.get(2**64), "seq"),
        (lambda q: q.tailer().seek(-1), "seq"),
        (lambda q: q.tailer().seek(2**70), "seq"),
        (lambda q: q.find("k", limit=-1), "limit"),
        (lambda q: q.tailer(start=-1), "start"),
    ],
)
def test_negative_and_huge_sequences_are_value_errors(
    queue: litemq.Queue, call: Callable[[litemq.Queue], object], words: str
) -> None:
    queue.appender().append(b"a", key="k")
    queue.appender().flush()
    with pytest.raises(ValueError, match=words) as info:
        call(queue)
    assert not isinstance(info.value, OverflowError)


def test_find_with_a_huge_limit_is_no_limit(queue: litemq.Queue) -> None:
    queue.appender().append_batch([(b"a", "k"), (b"b", "k")])
    queue.appender().flush()
    assert [m.payload for m in queue.find("k", limit=2**70)] == [b"a", b"b"]


def test_seq_must_be_an_int(queue: litemq.Queue) -> None:
    with pytest.raises(TypeError, match="seq"):
        queue.get(1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="seq"):
        queue.tailer().seek(True)


def test_empty_path_says_so(tmp_path: Path) -> None:
    with contextlib.chdir(tmp_path), pytest.raises(litemq.ConfigError, match="path is empty"):
        litemq.Queue("")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("keep", [0, 100, 600])
def test_truncated_position_file_is_corruption_naming_it(qpath: Path, keep: int) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        q.appender().append(b"x")
        with q.tailer(name="billing") as t:
            next(t)
            t.commit()
    (pos,) = (qpath / "consumers").glob("*.pos")
    with pos.open("r+b") as f:
        f.truncate(keep)
    with litemq.Queue(qpath, read_only=True) as q:
        with pytest.raises(litemq.CorruptedError) as info:
            q.consumers()
        assert info.value.file == str(pos)
        assert "truncated" in str(info.value)
        with pytest.raises(litemq.CorruptedError) as info:
            q.apply_retention(litemq.Retention(max_files=1, protect_unconsumed=True))
        assert info.value.file == str(pos)


@pytest.mark.parametrize(
    "age",
    [timedelta(days=999_999_999), 1e300, 10**400, "99999999999999999999d"],
    ids=["timedelta.max", "1e300", "10**400", "huge-string"],
)
def test_huge_retention_age_is_a_config_error(age: object) -> None:
    with pytest.raises(litemq.ConfigError, match="max_age") as info:
        litemq.Retention(max_age=age)  # type: ignore[arg-type]
    assert "213503982 days" in str(info.value)  # the limit, 2**64 - 1 µs
