"""Archives: sealed files copied to shared storage through pyarrow.fs, checked, read back.

The local file system always; S3 against moto's server on 127.0.0.1 (skipped, saying why,
when it cannot start).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
pafs = pytest.importorskip("pyarrow.fs")

import litemq  # noqa: E402
from conftest import SMALL_FILE, S3Server, cli, run_python, spawn_python  # noqa: E402
from litemq import archive as arc  # noqa: E402


def fill(path: Path, n: int, start: int = 0) -> None:
    """Append ``n`` messages (keys on every third, headers on every fifth) to the queue."""
    with litemq.Queue(path, file_size=SMALL_FILE) as q:
        app = q.appender()
        for i in range(start, start + n):
            app.append(
                f"message {i} ".encode() * 4,
                key=f"k{i % 7}" if i % 3 == 0 else None,
                headers={"n": str(i), "b": bytes([i % 256])} if i % 5 == 0 else None,
            )
        app.flush()


def local_rows(path: Path, start: int = 0, end: int | None = None) -> list[dict[str, Any]]:
    """Rows ``[start, end)`` of the queue at ``path``, read as ``read_arrow`` gives them."""
    with litemq.Queue(path, read_only=True) as q:
        rows: list[dict[str, Any]] = q.read_arrow(start=start, end=end).to_pylist()
        return rows


def sealed_data_files(path: Path) -> list[str]:
    with litemq.Queue(path, read_only=True) as q:
        return [os.path.relpath(f.path, path) for f in q.data_files()[:-1]]


@pytest.fixture
def filled(qpath: Path) -> Path:
    fill(qpath, 4000)  # about 5 files of 64 KiB
    return qpath


@pytest.fixture(params=["path", "file-uri"])
def dest(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    d = tmp_path / "archive"
    return str(d) if request.param == "path" else f"file://{d}"


# ------------------------------------------------------------------------------------------
# writing


def test_archive_holds_every_sealed_file_and_reads_back_the_same_rows(
    filled: Path, dest: str
) -> None:
    sealed = sealed_data_files(filled)
    assert len(sealed) >= 3
    report = litemq.archive_queue(filled, dest)
    data = [p for p in report.copied if p.endswith(".data")]
    assert sorted(data) == sorted(sealed)
    assert report.gaps == []
    a = litemq.open_archive(dest)
    with litemq.Queue(filled, read_only=True) as q:
        files = q.data_files()
        assert a.first_seq == q.first_seq
        assert a.end_seq == files[-1].first_seq  # everything but the file being written
    assert a.read_arrow().to_pylist() == local_rows(filled, 0, a.end_seq)
    # A small range is fetched alone (dense index, ranged read) and still matches.
    assert a.read_arrow(start=1001, end=1013).to_pylist() == local_rows(filled, 1001, 1013)
    cols = a.read_arrow(start=10, end=20, columns=["seq", "payload"])
    assert cols.schema.names == ["seq", "payload"]
    assert cols.column("seq").to_pylist() == list(range(10, 20))
    # Indexes travel with their data file, cut to the entries in use.
    for rel in data:
        stem = rel[: -len(".data")]
        assert stem + ".index" in report.copied
        assert stem + ".offsets" in report.copied
        assert os.path.getsize(filled / (stem + ".offsets")) > a._by_path[stem + ".offsets"].size


def test_a_second_run_copies_only_what_is_new(filled: Path, dest: str) -> None:
    first = litemq.archive_queue(filled, dest)
    again = litemq.archive_queue(filled, dest)
    assert again.copied == []
    assert again.skipped == len([p for p in first.copied if p.endswith(".data")])
    fill(filled, 3000, start=4000)
    third = litemq.archive_queue(filled, dest)
    new_data = [p for p in third.copied if p.endswith(".data")]
    assert new_data
    assert not set(new_data) & set(first.copied)
    a = litemq.open_archive(dest)
    assert a.read_arrow().to_pylist() == local_rows(filled, 0, a.end_seq)


def test_a_killed_run_is_invisible_and_its_partial_upload_is_redone(
    filled: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "archive"
    uploaded: list[str] = []

    class Killed(Exception):
        pass

    def stop_after_two_data_files(rel: str) -> None:
        uploaded.append(rel)
        if sum(p.endswith(".data") for p in uploaded) == 2:
            raise Killed

    with pytest.raises(Killed):
        litemq.archive_queue(filled, dest, on_file=stop_after_two_data_files)
    # No manifest yet: readers see nothing at all, not the files already there.
    assert not (dest / arc.MANIFEST).exists()
    with pytest.raises(FileNotFoundError, match="no archive"):
        litemq.open_archive(dest)
    datas = [p for p in uploaded if p.endswith(".data")]
    # The second file's upload was cut short (as a killed process leaves it).
    partial = dest / datas[1]
    partial.write_bytes(partial.read_bytes()[:5000])
    report = litemq.archive_queue(filled, dest)
    assert datas[1] in report.redone
    assert datas[0] in report.adopted  # whole and equal: checked, not uploaded again
    a = litemq.open_archive(dest)
    assert a.read_arrow().to_pylist() == local_rows(filled, 0, a.end_seq)


class _CorruptingHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    """The local file system, except that one write flips a byte (a bad upload)."""

    def __init__(self, target_suffix: str) -> None:
        self.fs = pafs.LocalFileSystem()
        self.target_suffix = target_suffix
        self.flipped = 0

    def get_type_name(self) -> str:
        return "corrupting"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> Any:
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector: Any) -> Any:
        return self.fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError

    def delete_file(self, path: str) -> None:
        self.fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        return self.fs.open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        return self.fs.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        handler = self

        class Flip:
            def __init__(self) -> None:
                self.out = open(path, "wb")  # noqa: SIM115

            def write(self, data: Any) -> int:
                b = bytearray(bytes(data))
                if path.endswith(handler.target_suffix) and len(b) > 5000:
                    b[5000] ^= 0x01
                    handler.flipped += 1
                return self.out.write(b)

            def close(self) -> None:
                self.out.close()

            def flush(self) -> None:
                self.out.flush()

            @property
            def closed(self) -> bool:
                return self.out.closed

            def writable(self) -> bool:
                return True

        return pa.PythonFile(Flip(), mode="w")

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        raise NotImplementedError


def test_a_copy_damaged_on_the_way_is_caught_and_never_listed(filled: Path, tmp_path: Path) -> None:
    handler = _CorruptingHandler(".data")
    fs = pafs.PyFileSystem(handler)
    dest = tmp_path / "archive"
    with pytest.raises(arc.ArchiveError, match="does not match its source"):
        litemq.archive_queue(filled, str(dest), filesystem=fs)
    assert handler.flipped == 1
    assert not (dest / arc.MANIFEST).exists()
    # A clean run later replaces the bad copy.
    report = litemq.archive_queue(filled, dest)
    assert report.redone
    a = litemq.open_archive(dest)
    assert a.read_arrow().to_pylist() == local_rows(filled, 0, a.end_seq)


def test_damage_in_an_archived_file_is_a_corrupted_error_on_read(
    filled: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "archive"
    litemq.archive_queue(filled, dest)
    a = litemq.open_archive(dest)
    f = a.files[1]
    data = dest / f.path
    raw = bytearray(data.read_bytes())
    raw[4096 + 200] ^= 0x40  # inside the second file's first frames
    data.write_bytes(bytes(raw))
    a = litemq.open_archive(dest)
    with pytest.raises(litemq.CorruptedError, match="frames_crc"):
        a.read_arrow()  # whole file: the footer's CRC over the frames
    first = int(f.first_seq or 0)
    with pytest.raises(litemq.CorruptedError, match="CRC"):
        a.read_arrow(start=first, end=first + 5)  # a range: each frame's own CRC
    # The undamaged file still reads.
    g = a.files[0]
    assert a.read_arrow(start=g.first_seq, end=g.end_seq).num_rows == g.end_seq - g.first_seq


def test_a_bad_dense_index_entry_costs_a_whole_file_read_never_a_wrong_row(
    filled: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "archive"
    litemq.archive_queue(filled, dest)
    a = litemq.open_archive(dest)
    f = a.files[0]
    offsets = dest / (f.path[: -len(".data")] + ".offsets")
    raw = bytearray(offsets.read_bytes())
    raw[64 + 8 * 100 + 1] ^= 0x10  # entry of seq first + 100
    offsets.write_bytes(bytes(raw))
    start = int(f.first_seq or 0) + 100
    got = litemq.open_archive(dest).read_arrow(start=start, end=start + 3)
    assert got.to_pylist() == local_rows(filled, start, start + 3)


# ------------------------------------------------------------------------------------------
# --delete-local


def test_delete_local_keeps_what_a_named_tailer_has_not_consumed(
    filled: Path, tmp_path: Path
) -> None:
    with litemq.Queue(filled, read_only=True) as q:
        files = q.data_files()
        # A named tailer in the middle of the third file.
        mid = files[2].first_seq + 5
        with q.tailer(name="billing", start=mid) as t:
            t.commit()
    report = litemq.archive_queue(filled, tmp_path / "archive", delete_local=True)
    assert [os.path.basename(p) for p in report.deleted_local] == [
        os.path.basename(f.path) for f in files[:2]
    ]
    assert report.protected_files >= 1
    with litemq.Queue(filled, read_only=True) as q:
        assert q.first_seq == files[2].first_seq
    # What left the disk is in the archive.
    a = litemq.open_archive(tmp_path / "archive")
    assert a.read_arrow(end=files[2].first_seq).num_rows == files[2].first_seq


def test_delete_local_never_deletes_the_file_being_written_nor_unarchived_ones(
    filled: Path, tmp_path: Path
) -> None:
    with litemq.Queue(filled, file_size=SMALL_FILE) as q:  # a live writer
        report = litemq.archive_queue(filled, tmp_path / "archive", delete_local=True)
        files = q.data_files()
        assert len(files) == 1  # only the file being written is left
        assert report.protected_files == 0
        assert q.first_seq == report.end_seq
        app = q.appender()
        app.append(b"after")
        app.flush()
        assert q.read_arrow(start=q.first_seq).num_rows >= 1


# ------------------------------------------------------------------------------------------
# the command


def test_cli_archive_prints_a_json_summary_and_a_progress_bar(filled: Path, tmp_path: Path) -> None:
    dest = tmp_path / "archive"
    r = cli("archive", str(filled), str(dest), "--json", "--progress")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["first_seq"] == 0
    assert len([p for p in summary["copied"] if p.endswith(".data")]) == len(
        sealed_data_files(filled)
    )
    assert "archiving [" in r.stderr
    assert "files" in r.stderr
    r = cli("archive", str(filled), str(dest))
    assert r.returncode == 0, r.stderr
    assert "0 files copied" in r.stdout
    assert "already archived" in r.stdout
    assert r.stderr == ""  # no terminal: no progress bar unless asked


def test_cli_archive_of_a_missing_queue_is_an_error(tmp_path: Path) -> None:
    r = cli("archive", str(tmp_path / "nope"), str(tmp_path / "archive"))
    assert r.returncode == 1
    assert "litemq: error:" in r.stderr


# ------------------------------------------------------------------------------------------
# S3 (moto)


@pytest.fixture
def s3_dest(s3_server: S3Server, request: pytest.FixtureRequest) -> str:
    bucket = s3_server.bucket(f"lmq-{abs(hash(request.node.name)) % 10**8}")
    return s3_server.uri(bucket, "journals/orders")


def test_s3_archive_is_resumable_and_reads_back_by_ranges(filled: Path, s3_dest: str) -> None:
    report = litemq.archive_queue(filled, s3_dest)
    assert report.copied
    assert litemq.archive_queue(filled, s3_dest).copied == []
    a = litemq.open_archive(s3_dest)
    assert a.read_arrow().to_pylist() == local_rows(filled, 0, a.end_seq)
    assert a.read_arrow(start=777, end=790).to_pylist() == local_rows(filled, 777, 790)
    parent = s3_dest.replace("/orders?", "?")
    assert [name for name, _ in arc.find_archives(parent)] == ["orders"]


def test_a_run_killed_by_sigkill_mid_upload_is_finished_by_the_next(
    filled: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "archive"
    # The child dies (SIGKILL, no cleanup) halfway through writing its third data file.
    proc = run_python(
        """
        import os, signal, sys
        import litemq
        from litemq import archive

        real_write = archive._write
        count = [0]

        def dying_write(fs, path, data):
            if path.endswith(".data"):
                count[0] += 1
                if count[0] == 3:
                    with fs.open_output_stream(path) as out:
                        out.write(data[: len(data) // 2])
                    os.kill(os.getpid(), signal.SIGKILL)
            real_write(fs, path, data)

        archive._write = dying_write
        litemq.archive_queue(sys.argv[1], sys.argv[2])
        """,
        str(filled),
        str(dest),
        check=False,
    )
    assert proc.returncode == -9, proc.stderr
    assert not (dest / arc.MANIFEST).exists()
    with pytest.raises(FileNotFoundError, match="no archive"):
        litemq.open_archive(dest)
    halves = [
        p
        for p in sealed_data_files(filled)
        if (dest / p).exists() and (dest / p).stat().st_size < (filled / p).stat().st_size
    ]
    assert len(halves) == 1
    report = litemq.archive_queue(filled, dest)
    assert report.redone == halves
    assert len([p for p in report.adopted if p.endswith(".data")]) == 2
    a = litemq.open_archive(dest)
    assert a.read_arrow().to_pylist() == local_rows(filled, 0, a.end_seq)


def test_archiving_beside_a_live_writer_in_another_process(qpath: Path, tmp_path: Path) -> None:
    dest = tmp_path / "archive"
    writer = spawn_python(
        f"""
        import sys, litemq
        with litemq.Queue(sys.argv[1], file_size={SMALL_FILE}) as q:
            app = q.appender()
            for i in range(20000):
                app.append(b"live %d " % i * 3, key=b"k%d" % (i % 11))
                if i % 500 == 0:
                    app.flush()
            app.flush()
            print("done", flush=True)
            sys.stdin.readline()  # keep the writer (and its last file) open until told
        """,
        str(qpath),
    )
    try:
        runs = 0
        while writer.poll() is None and runs < 40:
            if (qpath / "metadata.json").exists():
                litemq.archive_queue(qpath, dest)
                runs += 1
            line = ""
            if runs >= 3:
                assert writer.stdout is not None
                line = writer.stdout.readline()
            if line.startswith("done"):
                break
        report = litemq.archive_queue(qpath, dest)
        a = litemq.open_archive(dest)
        with litemq.Queue(qpath, read_only=True) as q:
            assert a.end_seq == q.data_files()[-1].first_seq
        assert report.gaps == []
        assert a.read_arrow().to_pylist() == local_rows(qpath, 0, a.end_seq)
    finally:
        _out, err = writer.communicate(input="\n", timeout=60)
    assert writer.returncode == 0, err


def test_records_with_format_6_fields_archive_and_read_back(qpath: Path, tmp_path: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE) as q:
        app = q.appender()
        for i in range(3000):
            app.append(
                b"field %d " % i * 3,
                key=f"k{i % 5}",
                topic=f"t{i % 3}",
                tags=("a", f"b{i % 2}"),
                priority=i % 4,
                expires_at=4_000_000_000_000_000 + i,
            )
        app.flush()
    report = litemq.archive_queue(qpath, tmp_path / "archive")
    assert report.end_seq
    a = litemq.open_archive(tmp_path / "archive")
    assert a.read_arrow().to_pylist() == local_rows(qpath, 0, a.end_seq)
    assert a.read_arrow(start=100, end=110).to_pylist() == local_rows(qpath, 100, 110)


def test_raw_reads_of_an_archive_give_the_stored_bytes(qpath: Path, tmp_path: Path) -> None:
    with litemq.Queue(qpath, file_size=SMALL_FILE, compression="zstd") as q:
        app = q.appender()
        for i in range(2000):
            body = b'{"event": "page_view", "n": %d}' % i * (8 if i % 3 else 1)
            app.append(body, compress=None if i % 5 else False)
        app.flush()
        q.appender().roll()
        local_raw = q.read_arrow(raw=True).to_pylist()
    assert {r["codec"] for r in local_raw} == {None, "zstd"}
    litemq.archive_queue(qpath, tmp_path / "archive")
    a = litemq.open_archive(tmp_path / "archive")
    assert a.end_seq == 2000
    # A whole file (footer-checked) and a byte range (each frame checked) alike.
    assert a.read_arrow(raw=True).to_pylist() == local_raw
    part = a.read_arrow(start=101, end=140, raw=True, columns=["seq", "payload", "codec"])
    assert part.to_pylist() == [
        {k: r[k] for k in ("seq", "payload", "codec")} for r in local_raw[101:140]
    ]
    assert a.read_arrow(start=101, end=140).column("payload").to_pylist() == [
        b'{"event": "page_view", "n": %d}' % i * (8 if i % 3 else 1) for i in range(101, 140)
    ]


# ------------------------------------------------------------------------------------------
# manifests that cannot lie


def _manifest(dest: Path) -> dict[str, Any]:
    m: dict[str, Any] = json.loads((dest / arc.MANIFEST).read_text())
    return m


def _data_entries(m: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted((e for e in m["files"] if e["kind"] == "data"), key=lambda e: e["first_seq"])


def test_a_manifest_naming_another_file_of_the_same_size_is_an_archive_error(
    filled: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "archive"
    litemq.archive_queue(filled, dest)
    m = _manifest(dest)
    data = _data_entries(m)
    assert len(data) >= 3
    assert data[0]["size"] == data[2]["size"]
    # One bit off: "...-0001.data" becomes "...-0003.data", a file of the same size.
    name = data[0]["path"]
    assert name.endswith("1.data")
    data[0]["path"] = name[: -len("1.data")] + chr(ord("1") ^ 0x02) + ".data"
    assert data[0]["path"] == data[2]["path"]
    (dest / arc.MANIFEST).write_text(json.dumps(m))
    with pytest.raises(arc.ArchiveError, match=data[0]["path"]):
        litemq.open_archive(dest).read_arrow()


def test_archived_files_that_are_not_what_the_manifest_says_are_archive_errors(
    filled: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "archive"
    litemq.archive_queue(filled, dest)
    a = litemq.open_archive(dest)
    f, g = a.files[0], a.files[2]
    assert f.size == g.size
    # Two archived data files trade places (what a wrong name at upload would do).
    fb, gb = (dest / f.path).read_bytes(), (dest / g.path).read_bytes()
    (dest / f.path).write_bytes(gb)
    (dest / g.path).write_bytes(fb)
    a = litemq.open_archive(dest)
    with pytest.raises(arc.ArchiveError, match=f.path):
        a.read_arrow()  # whole files: header and footer against the manifest
    first = int(f.first_seq or 0)
    with pytest.raises(arc.ArchiveError, match=f.path):
        a.read_arrow(start=first + 10, end=first + 20)  # a range: the file's two ends
    # A dense index that belongs to another data file is not used either.
    h = a.files[1]
    fo, ho = (dest / (f.path[:-5] + ".offsets")), (dest / (h.path[:-5] + ".offsets"))
    (dest / f.path).write_bytes(fb)
    (dest / g.path).write_bytes(gb)
    fo.write_bytes(ho.read_bytes())
    a = litemq.open_archive(dest)
    with pytest.raises(arc.ArchiveError, match=f.path[:-5] + ".offsets"):
        a.read_arrow(start=first + 10, end=first + 20)
    assert a.read_arrow().num_rows == a.end_seq - a.first_seq  # whole files need no index


def _drop(key: str) -> Any:
    def edit(m: dict[str, Any]) -> None:
        del _data_entries(m)[1][key]

    return edit


def _set(key: str, value: Any, which: int = 1) -> Any:
    def edit(m: dict[str, Any]) -> None:
        _data_entries(m)[which][key] = value

    return edit


def _remove_middle_file(m: dict[str, Any]) -> None:
    gone = _data_entries(m)[1]["path"]
    m["files"] = [e for e in m["files"] if e["path"] != gone]


def _overlap(m: dict[str, Any]) -> None:
    d = _data_entries(m)
    d[1]["first_seq"] -= 1


MALFORMED: dict[str, Any] = {
    "bad JSON": b'{"litemq_archive": 1, "files": [',
    "not UTF-8": b'{"litemq_archive": 1, "queue": "\xff"}',
    "not an object": b"[1, 2]",
    "files not a list": lambda m: m.update(files={"a": 1}),
    "an entry not an object": lambda m: m["files"].append("x.data"),
    "no size": _drop("size"),
    "no path": _drop("path"),
    "no first_seq": _drop("first_seq"),
    "no end_seq": _drop("end_seq"),
    "no file_number": _drop("file_number"),
    "size a string": _set("size", "65536"),
    "size a bool": _set("size", True),
    "size negative": _set("size", -1),
    "crc64 a float": _set("crc64", 1.5),
    "first_seq null": _set("first_seq", None),
    "path a number": _set("path", 7),
    "path leaving the archive": _set("path", "../../etc/passwd.data"),
    "an unknown kind": _set("kind", "blob"),
    "end before first": _set("end_seq", 0),
    "a gap": _remove_middle_file,
    "an overlap": _overlap,
    "first_seq of the archive wrong": lambda m: m.update(first_seq=5),
    "gaps not a list": lambda m: m.update(gaps=3),
    "consumers not an object": lambda m: m.update(consumers=[1]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_manifest_is_an_archive_error(filled: Path, tmp_path: Path, case: str) -> None:
    dest = tmp_path / "archive"
    litemq.archive_queue(filled, dest)
    edit = MALFORMED[case]
    if isinstance(edit, bytes):
        (dest / arc.MANIFEST).write_bytes(edit)
    else:
        m = _manifest(dest)
        edit(m)
        (dest / arc.MANIFEST).write_text(json.dumps(m))
    with pytest.raises(arc.ArchiveError, match="manifest"):
        litemq.open_archive(dest).read_arrow()
    # The writer reads it too, and refuses to add to what it cannot trust.
    with pytest.raises(arc.ArchiveError, match="manifest"):
        litemq.archive_queue(filled, dest)


def test_a_gap_is_declared_by_the_writer_and_reads_across_it_are_archive_errors(
    filled: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "archive"
    first = litemq.archive_queue(filled, dest)
    assert first.end_seq is not None
    fill(filled, 4000, start=4000)
    with litemq.Queue(filled, read_only=True) as q:
        files = q.data_files()
        # Files archived never, deleted locally (retention ran before the next archive run).
        cut = files[-3].first_seq
        assert cut > first.end_seq
        q._delete_files_before(cut)
    report = litemq.archive_queue(filled, dest)
    assert report.gaps == [(first.end_seq, cut)]
    a = litemq.open_archive(dest)
    assert a.gaps == [(first.end_seq, cut)]
    assert a.manifest["gaps"] == [[first.end_seq, cut]]
    with pytest.raises(arc.ArchiveError, match=f"without {first.end_seq}..{cut}"):
        a.read_arrow()
    assert a.read_arrow(end=first.end_seq).num_rows == first.end_seq
    assert a.read_arrow(start=cut).to_pylist() == local_rows(filled, cut, a.end_seq)
    # A manifest written before `gaps` existed (no key) still opens: its gap
    # is taken from the files, and a read across it raises all the same.
    m = json.loads((dest / arc.MANIFEST).read_text())
    del m["gaps"]
    (dest / arc.MANIFEST).write_text(json.dumps(m))
    old = litemq.open_archive(dest)
    assert old.gaps == [(first.end_seq, cut)]
    with pytest.raises(arc.ArchiveError, match=f"without {first.end_seq}..{cut}"):
        old.read_arrow()
    assert old.read_arrow(start=cut).num_rows == old.end_seq - cut
