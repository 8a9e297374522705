"""``litemq import-ledgerq``: LedgerQ segments written here from the format as
documented (docs/FORMAT.md, "LedgerQ segments (read)"), read back into a queue.
"""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import pytest

import litemq
from conftest import cli
from litemq._litemq import _crc32c
from litemq.interop.ledgerq import LedgerQError, import_ledgerq, read_segment

NS = 1_000_000_000
T0 = 1_764_000_000 * NS


def entry(
    msg_id: int,
    payload: bytes = b"",
    *,
    kind: int = 1,
    priority: int = 0,
    expires_at: int = 0,
    headers: dict[str, str] | None = None,
    gzipped: bool = False,
    flags: int = 0,
    seed_framing: bool = False,
) -> bytes:
    """One entry as LedgerQ's Marshal writes it: a length word that counts itself,
    the CRC-32C over everything before it, then 4 zero bytes. With
    `seed_framing`, the length excludes its own word and nothing follows the CRC.
    """
    opt = b""
    if priority:
        flags |= 0x10
        opt += bytes([priority])
    if expires_at:
        flags |= 0x04
        opt += struct.pack("<q", expires_at)
    if headers:
        flags |= 0x08
        opt += struct.pack("<H", len(headers))
        for k, v in headers.items():
            opt += struct.pack("<H", len(k)) + k.encode() + struct.pack("<H", len(v)) + v.encode()
    if gzipped:
        flags |= 0x01
        opt += b"\x01"
        payload = gzip.compress(payload, mtime=0)
    body = struct.pack("<BBQq", kind, flags, msg_id, T0 + msg_id) + opt + payload
    if seed_framing:
        length = len(body) + 4
        head = struct.pack("<I", length) + body
        return head + struct.pack("<I", _crc32c(head))
    length = 4 + len(body) + 4
    head = struct.pack("<I", length) + body
    return head + struct.pack("<I", _crc32c(head)) + bytes(4)


def segment(directory: Path, base: int, entries: list[bytes], *, flags: int = 0) -> Path:
    """A segment file and its sparse index (one entry per message)."""
    head = struct.pack("<IHHQqQQ", 0x4C445151, 1, flags, base, T0, base, base + len(entries))
    head += bytes(20)
    head += struct.pack("<I", _crc32c(head))
    path = directory / f"{base:020d}.log"
    index = []
    at = len(head)
    for e in entries:
        (msg_id,) = struct.unpack_from("<Q", e, 6)
        index.append(struct.pack("<QQq", msg_id, at, T0 + msg_id))
        at += len(e)
    path.write_bytes(head + b"".join(entries))
    ih = struct.pack("<IHHQQI", 0x4C445149, 1, 0, base, len(index), 0)
    ih += struct.pack("<I", _crc32c(ih))
    path.with_suffix(".idx").write_bytes(ih + b"".join(index))
    return path


def test_crc32c_is_castagnoli() -> None:
    assert _crc32c(b"123456789") == 0xE3069283


def test_every_field_is_mapped(tmp_path: Path) -> None:
    src = tmp_path / "ledgerq"
    src.mkdir()
    body = b'{"order": 1}' * 50
    segment(
        src,
        1,
        [
            entry(1, b"plain"),
            entry(2, b"urgent", priority=2, expires_at=T0 + 3600 * NS),
            entry(3, b"with headers", headers={"source": "web", "region": "eu"}),
            entry(4, body, gzipped=True),
            entry(5, b"", kind=2),
            entry(6, b"customer-7", kind=2),
            entry(7, b"state", kind=3),
        ],
    )
    segment(src, 8, [entry(8, b"second segment", seed_framing=True)])
    report = import_ledgerq(src, tmp_path / "q")
    assert (report.segments, report.entries, report.imported, report.tombstones) == (2, 8, 5, 2)
    assert len(report.skipped) == 1
    assert "checkpoint" in report.skipped[0]
    assert report.index_problems == []
    with litemq.Queue(tmp_path / "q", read_only=True) as q:
        msgs = list(q.tailer())
    assert [m.payload for m in msgs] == [
        b"plain",
        b"urgent",
        b"with headers",
        body,
        b"",
        b"",
        b"second segment",
    ]
    assert msgs[1].priority == 2
    assert msgs[1].expires_at == (T0 + 3600 * NS) // 1000
    assert msgs[2].headers == {
        "source": "web",
        "region": "eu",
        "ledgerq.msg_id": "3",
        "ledgerq.timestamp": str(T0 + 3),
    }
    assert (msgs[4].tombstone, msgs[4].key) == (True, "ledgerq:5")
    assert (msgs[5].tombstone, msgs[5].key) == (True, b"customer-7")


def test_damage_is_reported_not_imported(tmp_path: Path) -> None:
    src = tmp_path / "ledgerq"
    src.mkdir()
    good = [entry(i, f"m{i}".encode()) for i in range(1, 4)]
    path = segment(src, 1, good)
    data = bytearray(path.read_bytes())
    data[64 + len(good[0]) + 25] ^= 0xFF  # a payload byte of the second entry
    path.write_bytes(bytes(data))
    segment(src, 4, [entry(4, b"secret", flags=0x02), entry(5, b"after")])
    truncated = segment(src, 6, [entry(6, b"whole"), entry(7, b"cut short")])
    truncated.write_bytes(truncated.read_bytes()[:-10])
    report = import_ledgerq(src, tmp_path / "q")
    with litemq.Queue(tmp_path / "q", read_only=True) as q:
        assert [m.payload for m in q.tailer()] == [b"m1", b"after", b"whole"]
    text = "\n".join(report.skipped)
    assert "fails its CRC-32C" in text
    assert "encrypted" in text
    assert "runs past the end" in text
    # The index of the damaged segment points at entries that were not read.
    assert any("do not point" in p for p in report.index_problems)


def test_a_bad_header_is_an_error(tmp_path: Path) -> None:
    src = tmp_path / "ledgerq"
    src.mkdir()
    path = segment(src, 1, [entry(1, b"x")])
    data = bytearray(path.read_bytes())
    data[20] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(LedgerQError, match="header CRC"):
        list(read_segment(path))
    report = import_ledgerq(src, tmp_path / "q")
    assert report.imported == 0
    assert "header CRC" in report.skipped[0]


def test_cli(tmp_path: Path) -> None:
    src = tmp_path / "ledgerq"
    src.mkdir()
    segment(src, 1, [entry(1, b"a"), entry(2, b"b", kind=3)])
    proc = cli("import-ledgerq", str(src), str(tmp_path / "q"))
    assert proc.returncode == 0, proc.stderr
    assert "OK: 1 messages and 0 tombstones imported from 2 entries in 1 segments" in proc.stdout
    assert "SKIPPED" in proc.stdout
    proc = cli("import-ledgerq", str(tmp_path / "nothing"), str(tmp_path / "q"))
    assert proc.returncode == 1
    assert "cannot read" in proc.stderr
