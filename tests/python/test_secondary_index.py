"""Secondary indexes on header fields: `Queue(indexes=...)`, `add_index` and
`where`. A query returns exactly the messages whose header satisfies it, in
sequence order, whether a sealed file's index is built, missing or damaged
and for the active file (indexed in memory); indexes are remembered in metadata.json.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import litemq
from conftest import SMALL_FILE


def _customer(i: int) -> str:
    return f"c{i % 13}"


def _price(i: int) -> int:
    return i * 3 - 1000


def _fill(q: litemq.Queue, start: int, stop: int) -> None:
    app = q.appender()
    for i in range(start, stop):
        headers: dict[str, str | bytes] = {"customer": _customer(i)}
        # Every fourth price as 8 bytes little-endian, the others as text.
        p = _price(i)
        headers["price"] = p.to_bytes(8, "little", signed=True) if i % 4 == 0 else str(p)
        if i % 9 == 0:
            del headers["customer"]
        assert app.append(f"m{i}".encode(), headers=headers) == i
    app.flush()


def _seqs(msgs: list[litemq.Message]) -> list[int]:
    for m in msgs:
        assert m.payload == f"m{m.seq}".encode()
    return [m.seq for m in msgs]


def _field_files(path: Path, name: str) -> list[Path]:
    return sorted(path.rglob(f"*.field-{name}"))


def _built(path: Path, name: str, n: int) -> list[Path]:
    """The index files of field `name` once `n` are there, or those there
    after 10 s: an open writer's background thread builds each sealed file's
    indexes after the seal (readers do not wait for it)."""
    deadline = time.monotonic() + 10
    while len(files := _field_files(path, name)) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return files


N = 3000


def _check(q: litemq.Queue) -> None:
    has_c = [i for i in range(N) if i % 9 != 0]
    assert _seqs(q.where("customer", "=", "c7")) == [i for i in has_c if _customer(i) == "c7"]
    assert _seqs(q.where("customer", "in", ["c1", "c12"])) == [
        i for i in has_c if _customer(i) in ("c1", "c12")
    ]
    assert _seqs(q.where("customer", "prefix", "c1")) == [
        i for i in has_c if _customer(i).startswith("c1")
    ]
    assert _seqs(q.where("price", "between", (-10, 50))) == [
        i for i in range(N) if -10 <= _price(i) <= 50
    ]
    assert _seqs(q.where("price", "=", _price(2999))) == [2999]
    assert _seqs(q.where("price", ">=", _price(2990))) == list(range(2990, N))
    assert _seqs(q.where("price", "<=", _price(3))) == [0, 1, 2, 3]
    assert _seqs(q.where("customer", ">=", "c8")) == [i for i in has_c if _customer(i) >= "c8"]
    assert q.where("customer", "=", "nobody") == []
    assert _seqs(q.where("customer", "=", "c7", limit=3)) == [7, 20, 33]


def test_where_is_exact_with_built_missing_and_damaged_indexes(tmp_path: Path) -> None:
    path = tmp_path / "q"
    with litemq.Queue(
        path, file_size=SMALL_FILE, roll="count:500", indexes={"customer": "str", "price": "int"}
    ) as q:
        _fill(q, 0, N)
        _check(q)  # the active file is indexed in memory
    files = _field_files(path, "customer")
    assert len(files) == len(list(path.rglob("*.data"))) - 1 >= 5
    meta = json.loads((path / "metadata.json").read_text())
    assert meta["options"]["indexes"] == {"customer": "str", "price": "int"}
    files[0].unlink()
    damaged = bytearray(files[1].read_bytes())
    damaged[-1] ^= 0xFF
    files[1].write_bytes(bytes(damaged))
    with litemq.Queue(path, read_only=True) as q:
        assert q.indexes == {"customer": "str", "price": "int"}
        _check(q)


def test_add_index_builds_for_old_files_and_is_remembered(tmp_path: Path) -> None:
    path = tmp_path / "q"
    with litemq.Queue(path, file_size=SMALL_FILE, roll="count:500") as q:
        _fill(q, 0, N)
        with pytest.raises(ValueError, match='no index on "customer"'):
            q.where("customer", "=", "c7")
        sealed = len(list(path.rglob("*.data"))) - 1
        steps: list[tuple[int, int]] = []
        assert q.add_index("customer", "str", progress=lambda d, t: steps.append((d, t))) == sealed
        assert steps == [(i, sealed) for i in range(1, sealed + 1)]
        assert q.add_index("customer") == sealed  # nothing missing: nothing to do
        with pytest.raises(litemq.ConfigError, match="keeps its type"):
            q.add_index("customer", "int")
        assert len(_field_files(path, "customer")) == sealed
        assert _seqs(q.where("customer", "=", "c3")) == [
            i for i in range(N) if i % 9 and _customer(i) == "c3"
        ]
    with litemq.Queue(path) as q:
        assert q.indexes == {"customer": "str"}


def test_bad_index_declarations_and_queries_are_refused(tmp_path: Path) -> None:
    with pytest.raises(litemq.ConfigError, match="ASCII letters"):
        litemq.Queue(tmp_path / "a", indexes={"bad/name": "str"})
    with pytest.raises(litemq.ConfigError, match='"str" or "int"'):
        litemq.Queue(tmp_path / "b", indexes={"x": "float"})
    with pytest.raises(TypeError, match="dict"):
        litemq.Queue(tmp_path / "c", indexes=["x"])  # type: ignore[arg-type]
    with litemq.Queue(tmp_path / "d", indexes={"price": "int", "customer": "str"}) as q:
        with pytest.raises(TypeError, match="int values"):
            q.where("price", "=", "7")
        with pytest.raises(TypeError, match="str values"):
            q.where("customer", "=", 7)
        with pytest.raises(ValueError, match="prefix"):
            q.where("price", "prefix", 7)
        with pytest.raises(TypeError, match="between"):
            q.where("price", "between", 7)
        with pytest.raises(ValueError, match="op must be"):
            q.where("price", ">", 7)  # type: ignore[arg-type]


def test_cli_index_add_list_where_and_verify_reports_a_damaged_index(tmp_path: Path) -> None:
    from conftest import cli

    path = tmp_path / "q"
    with litemq.Queue(path, file_size=SMALL_FILE, roll="count:500") as q:
        _fill(q, 0, N)
    proc = cli("index", "add", str(path), "price", "--type", "int")
    assert proc.returncode == 0, proc.stderr
    sealed = len(list(path.rglob("*.data"))) - 1
    assert proc.stdout.strip() == f"OK: index 'price' (int): {sealed} sealed files indexed"
    proc = cli("index", "list", str(path))
    assert proc.stdout.strip() == f"price\tint\t{sealed} ok"
    proc = cli("where", str(path), "price", "between", "-4", "5")
    assert [json.loads(line)["seq"] for line in proc.stdout.splitlines()] == [332, 333, 334, 335]
    assert cli("verify", str(path)).returncode == 0

    f = _field_files(path, "price")[2]
    raw = bytearray(f.read_bytes())
    raw[-5] ^= 0x01
    f.write_bytes(bytes(raw))
    proc = cli("verify", str(path))
    assert proc.returncode == 1
    assert f"BAD index file={f} field=price: damaged (read around)" in proc.stdout
    assert (
        proc.stdout.splitlines()[-1]
        == f"FAILED: {N:,} frames checked, 0 bad, 1 damaged index files"
    )


_OPS = st.one_of(
    st.tuples(st.just("="), st.integers(-3, 3)),
    st.tuples(st.just("between"), st.tuples(st.integers(-4, 4), st.integers(-4, 4))),
    st.tuples(st.just("in"), st.lists(st.integers(-4, 4), max_size=3)),
)


@given(
    prices=st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=1, max_size=120),
    queries=st.lists(_OPS, min_size=1, max_size=4),
)
def test_where_matches_a_python_filter(
    tmp_path_factory: pytest.TempPathFactory,
    prices: list[int | None],
    queries: list[tuple[str, object]],
) -> None:
    """Any int query on any mix of messages (no header, text, 8-byte values; sealed files
    with indexes and the active file) returns what filtering the list in Python returns."""
    path = tmp_path_factory.mktemp("prop") / "q"
    with litemq.Queue(path, file_size=SMALL_FILE, roll="count:17", indexes={"p": "int"}) as q:
        app = q.appender()
        for i, p in enumerate(prices):
            headers: dict[str, str | bytes] = {}
            if p is not None:
                headers["p"] = str(p) if i % 2 else p.to_bytes(8, "little", signed=True)
            app.append(b"x", headers=headers)
        app.flush()
        for op, value in queries:
            if op == "=":
                want = [i for i, p in enumerate(prices) if p == value]
            elif op == "between":
                lo, hi = value  # type: ignore[misc]
                want = [i for i, p in enumerate(prices) if p is not None and lo <= p <= hi]
            else:
                want = [i for i, p in enumerate(prices) if p in value]  # type: ignore[operator]
            assert [m.seq for m in q.where("p", op, value)] == want, (op, value)  # type: ignore[arg-type]


def test_drop_index_forgets_it_deletes_its_files_and_the_name_can_be_added_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q"
    with litemq.Queue(
        path, file_size=SMALL_FILE, roll="count:500", indexes={"customer": "str", "price": "int"}
    ) as q:
        _fill(q, 0, N)
        sealed = len(list(path.rglob("*.data"))) - 1
        assert _seqs(q.where("price", "=", _price(2999))) == [2999]  # active file in memory
        assert len(_built(path, "price", sealed)) == sealed
        assert len(_built(path, "customer", sealed)) == sealed
        assert q.drop_index("price") == sealed
        assert _field_files(path, "price") == []
        assert len(_field_files(path, "customer")) == sealed  # the other index stays
        assert q.indexes == {"customer": "str"}
        meta = json.loads((path / "metadata.json").read_text())
        assert meta["options"]["indexes"] == {"customer": "str"}
        with pytest.raises(ValueError, match='no index on "price"'):
            q.where("price", "=", _price(7))
        with pytest.raises(ValueError, match='no index on "price" to drop'):
            q.drop_index("price")
        assert _seqs(q.where("customer", "=", "c7", limit=2)) == [7, 20]
        # Gone, the name takes another type: price headers read as text now.
        assert q.add_index("price", "str") == sealed
        assert _seqs(q.where("price", "=", str(_price(2001)))) == [2001]
        assert _seqs(q.where("price", "=", str(_price(2999)))) == [2999]
        assert q.where("price", "=", str(_price(2000))) == []  # 8 bytes, not text
    with litemq.Queue(path, read_only=True) as q:
        assert q.indexes == {"customer": "str", "price": "str"}
        with pytest.raises(litemq.ReadOnlyError):
            q.drop_index("customer")
    with litemq.Queue(path) as q:
        assert q.drop_index("customer") == sealed
        assert q.drop_index("price") == sealed
        assert q.indexes == {}
        assert q.get(N - 1).payload == f"m{N - 1}".encode()  # the data is untouched
    meta = json.loads((path / "metadata.json").read_text())
    assert "indexes" not in meta["options"]
    assert list(path.rglob("*.field-*")) == []


def test_a_drop_interrupted_after_the_metadata_is_finished_by_dropping_again(
    tmp_path: Path,
) -> None:
    path = tmp_path / "q"
    with litemq.Queue(path, file_size=SMALL_FILE, roll="count:500", indexes={"customer": "str"}):
        pass
    with litemq.Queue(path) as q:
        _fill(q, 0, N)
    left = _field_files(path, "customer")
    assert left
    # The crash image: metadata.json written without the index, its files still there.
    meta = json.loads((path / "metadata.json").read_text())
    del meta["options"]["indexes"]
    (path / "metadata.json").write_text(json.dumps(meta))
    with litemq.Queue(path) as q:
        assert q.indexes == {}
        with pytest.raises(ValueError, match='no index on "customer"'):
            q.where("customer", "=", "c7")
        assert q.drop_index("customer") == len(left)
        assert _field_files(path, "customer") == []
        with pytest.raises(ValueError, match="to drop"):
            q.drop_index("customer")
        with pytest.raises(litemq.ConfigError, match="ASCII letters"):
            q.drop_index("../x")


def test_cli_index_drop(tmp_path: Path) -> None:
    from conftest import cli

    path = tmp_path / "q"
    with litemq.Queue(path, file_size=SMALL_FILE, roll="count:500", indexes={"price": "int"}) as q:
        _fill(q, 0, N)
    sealed = len(_field_files(path, "price"))
    proc = cli("index", "drop", str(path), "price")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"OK: index 'price' dropped: {sealed} index files deleted"
    assert _field_files(path, "price") == []
    assert cli("index", "list", str(path)).stdout == ""
    proc = cli("where", str(path), "price", "=", "5")
    assert proc.returncode != 0
    assert 'no index on "price"' in proc.stderr
    proc = cli("index", "drop", str(path), "price")
    assert proc.returncode != 0
    assert 'no index on "price" to drop' in proc.stderr


def _mapped_data_files(path: Path) -> list[str]:
    root = str(path.resolve()) + "/"
    return sorted(
        parts[5]
        for line in Path("/proc/self/maps").read_text().splitlines()
        if len(parts := line.split(None, 5)) == 6
        and parts[5].startswith(root)
        and ".data" in parts[5]
    )


def test_where_keeps_sealed_files_mapped_between_queries_never_a_deleted_one(
    tmp_path: Path,
) -> None:
    """The handle keeps the sealed files a query read mapped for the next query (so it does
    not map and fault them in again), drops a file retention deleted at the next query, and
    unmaps them all at close."""
    path = tmp_path / "q"
    with litemq.Queue(
        path, file_size=SMALL_FILE, roll="count:500", indexes={"customer": "str"}
    ) as q:
        _fill(q, 0, N)
        want = [i for i in range(N) if i % 9 and _customer(i) == "c7"]
        assert _seqs(q.where("customer", "=", "c7")) == want
        data = sorted(str(p) for p in path.rglob("*.data"))
        assert set(data[:-1]) <= set(_mapped_data_files(path))  # the sealed ones stay mapped
        report = q.apply_retention(litemq.Retention(max_files=2))
        assert len(report.deleted_files) == len(data) - 2
        first = q.first_seq
        assert _seqs(q.where("customer", "=", "c7")) == [i for i in want if i >= first]
        mapped = _mapped_data_files(path)
        assert data[-2] in mapped
        assert not [m for m in mapped if m.endswith("(deleted)") or m in data[:-2]]
    assert _mapped_data_files(path) == []


def test_read_arrow_flattens_indexed_headers_and_reads_through_an_index(tmp_path: Path) -> None:
    path = tmp_path / "q"
    with litemq.Queue(
        path, file_size=SMALL_FILE, roll="count:500", indexes={"customer": "str", "price": "int"}
    ) as q:
        _fill(q, 0, N)
        app = q.appender()
        app.append(b"odd", headers={"customer": b"c7", "price": "12.5"})  # neither indexable
        app.flush()
        b = q.read_arrow(columns=["seq"], fields=["customer", "price"])
        assert [str(f.type) for f in b.schema] == ["int64", "string", "int64"]
        d = b.to_pydict()
        assert d["customer"] == [None if i % 9 == 0 else _customer(i) for i in range(N)] + [None]
        assert d["price"] == [_price(i) for i in range(N)] + [None]
        want = [m.seq for m in q.where("customer", "=", "c7")]
        got = q.read_arrow(columns=["seq"], fields=["customer"], where=("customer", "=", "c7"))
        assert got.to_pydict() == {"seq": want, "customer": ["c7"] * len(want)}
        # A range of sequences, a row limit, and a predicate on another field.
        got = q.read_arrow(start=700, end=2000, max_rows=5, where=("price", ">=", _price(1000)))
        assert got.column("seq").to_pylist() == [1000, 1001, 1002, 1003, 1004]
        assert q.read_arrow(where=("price", "<=", -10_000)).num_rows == 0
        with pytest.raises(ValueError, match="no index on 'region'"):
            q.read_arrow(fields=["region"])
        with pytest.raises(ValueError, match='no index on "region"'):
            q.read_arrow(where=("region", "=", "eu"))
        with pytest.raises(TypeError, match="int values"):
            q.read_arrow(where=("price", ">=", "7"))
