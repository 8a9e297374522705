"""The docs say what the code does: checked against the code, not by eye.

Each test reads README.md or a page of docs/ and compares it with what the
package exposes (signatures, the CLI parser) or with the bytes a queue writes.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import pytest

import litemq
from litemq import cli
from litemq.queue import Queue

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
FORMAT = (ROOT / "docs" / "FORMAT.md").read_text()
API = (ROOT / "docs" / "API.md").read_text()


def _section(text: str, title: str) -> str:
    """The body of the markdown section `title` (up to the next heading of any level)."""
    m = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert m, f"no section {title!r}"
    return m.group(1)


def _queue_options() -> dict[str, inspect.Parameter]:
    params = inspect.signature(Queue).parameters
    return {name: p for name, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}


def _readme_options() -> dict[str, str]:
    """README options table: option name -> default cell."""
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \| .* \|$", _section(README, "Options"), re.M)
    return dict(rows)


def test_every_queue_option_is_in_the_readme_table() -> None:
    options = _queue_options()
    assert len(options) >= 11
    table = _readme_options()
    assert set(options) - set(table) == set(), "options missing from the README table"
    assert set(table) - set(options) == set(), "README table rows that are not options"


def test_readme_defaults_match_the_signature() -> None:
    table = _readme_options()
    for name, param in _queue_options().items():
        if param.default is None:
            continue  # the engine's default: checked below where it is known
        shown = table[name].strip("`").replace('"', "'")
        assert shown == repr(param.default), name


def test_every_queue_option_is_in_the_docstring() -> None:
    doc = inspect.getdoc(Queue) or ""
    for name in _queue_options():
        assert f"``{name}`` (" in doc, name


def test_channel_capacity_default_is_the_engines() -> None:
    """256 batches, as `QueueBuilder::new` sets it (rust/config.rs)."""
    builder = (ROOT / "rust" / "config.rs").read_text()
    engine = re.search(r"channel_capacity: (\d+),", builder)
    assert engine, "QueueBuilder::new no longer sets channel_capacity"
    assert _readme_options()["channel_capacity"] == f"`{engine.group(1)}`"
    assert f"``channel_capacity`` (``{engine.group(1)}``)" in (inspect.getdoc(Queue) or "")


def _cli_commands() -> set[str]:
    parser = cli._parser()
    (sub,) = (a for a in parser._actions if a.dest == "command")
    assert isinstance(sub.choices, dict)
    return set(sub.choices)


def test_every_cli_command_is_in_the_readme_list() -> None:
    listed = set(re.findall(r"^litemq ([\w-]+)", _section(README, "Command line"), re.M))
    commands = _cli_commands()
    assert len(commands) >= 9
    assert commands == listed


def test_every_cli_command_is_in_the_cli_docstring() -> None:
    listed = set(re.findall(r"^\s+litemq ([\w-]+)", cli.__doc__ or "", re.M))
    assert _cli_commands() == listed


def test_cli_docs_do_not_claim_every_command_is_read_only() -> None:
    for text in (_section(README, "Command line"), cli.__doc__ or ""):
        assert "Every command opens the queue read-only" not in text
        assert "reindex" in text


# -- docs/FORMAT.md against the bytes a queue writes ----------------------------


@pytest.fixture(scope="module")
def full_queue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A queue with every kind of file: several writers (append.lock), keys,
    a named tailer, a retention pass, a roll."""
    path = tmp_path_factory.mktemp("format") / "q"
    with litemq.Queue(path, file_size=64 * 1024, roll="count:3", multi_writer=True) as q:
        app = q.appender()
        app.append_batch([(b"m", f"k{i}") for i in range(7)])
        app.flush()
        with q.tailer(name="billing") as t:
            next(t)
            t.commit()
        q.apply_retention(litemq.Retention(max_files=5))
    return path


def test_format_version_in_the_title_and_every_table(full_queue: Path) -> None:
    version = json.loads((full_queue / "metadata.json").read_text())["format_version"]
    data = next(full_queue.rglob("*.data")).read_bytes()
    index = next(full_queue.rglob("*.index")).read_bytes()
    dense = next(full_queue.rglob("*.offsets")).read_bytes()
    assert int.from_bytes(data[8:12], "little") == version
    assert int.from_bytes(index[8:12], "little") == version
    assert int.from_bytes(dense[8:12], "little") == version
    assert FORMAT.startswith(f"# litemq on-disk format, version {version}\n")
    tables = {
        "data file header": _section(FORMAT, "Header (4096 bytes; bytes 72..4096 are zero)"),
        "sparse index header": _section(FORMAT, "Header (256 bytes; bytes 48..256 are zero)"),
        "dense index header": _section(FORMAT, "Header (64 bytes)"),
        "metadata.json": _section(FORMAT, "metadata.json"),
    }
    # Each table names the version written today first; older versions still
    # read may follow ("`4`, or `3` for a file written before version 4").
    for what, text in tables.items():
        found = re.findall(
            r"format version[:,] `(\d+)`|format version of its data file, `(\d+)`(?: or `(\d+)`)?"
            r"|`format_version` \| int \| `(\d+)`",
            text,
        )
        assert found, what
        named = {int(n) for row in found for n in row if n}
        assert version in named, what
        assert max(named) == version, what
    refusal = re.search(r"whose version is not ([^(]*)\(", FORMAT)
    assert refusal
    assert str(version) in refusal.group(1)
    # README names the current format in prose too.
    stated = re.findall(r"current format is (\d+)", README)
    assert stated
    assert {int(n) for n in stated} == {version}


def test_append_lock_magic_as_documented(full_queue: Path) -> None:
    raw = (full_queue / "append.lock").read_bytes()[:8]
    section = _section(FORMAT, "append.lock")
    (row,) = [line for line in section.splitlines() if line.startswith("| 0 | 0 |")]
    text = re.search(r'magic `"(\w+)"`', row)
    number = re.search(r"`0x([0-9A-F]{16})` as a little-endian u64", row)
    spelled = re.search(r"bytes `((?:[0-9A-F]{2} ?){8})`", row)
    assert text, row
    assert number, row
    assert spelled, row
    assert raw == text.group(1).encode()
    assert raw == int(number.group(1), 16).to_bytes(8, "little")
    assert raw == bytes.fromhex(spelled.group(1))


def test_wake_ctl_as_documented(full_queue: Path) -> None:
    raw = (full_queue / "wake.ctl").read_bytes()
    section = _section(FORMAT, "wake.ctl")
    rows = {
        int(m.group(1)): line
        for line in section.splitlines()
        if (m := re.match(r"\| (\d+) \| \d+ \|", line))
    }
    spelled = re.search(r"bytes `((?:[0-9A-F]{2} ?){8})`", rows[0])
    version = re.search(r"`(\d+)`", rows[8])
    assert spelled, rows[0]
    assert version, rows[8]
    assert f"{len(raw)}\nbytes" in section or f"{len(raw)} bytes" in section
    assert raw[:8] == bytes.fromhex(spelled.group(1))
    assert int.from_bytes(raw[8:12], "little") == int(version.group(1))
    assert int.from_bytes(raw[16:20], "little") > 0, "the word was bumped by the appends"
    assert int.from_bytes(raw[24:28], "little") == 0, "nobody waits"
    assert sorted(rows) == [0, 8, 12, 16, 20, 24, 28]
    for at in (12, 20, 28):
        assert raw[at : at + 4] == bytes(4)
    assert raw[28:] == bytes(36)


def test_directory_tree_names_every_top_level_entry(full_queue: Path) -> None:
    tree = _section(FORMAT, "Directory layout")
    for entry in sorted(full_queue.iterdir()):
        name = entry.name + ("/" if entry.is_dir() else "")
        if re.fullmatch(r"\d{4}/", name):
            name = r"\d{4}/\d\d/\d\d/"  # one directory per UTC day
        assert re.search(rf"── {name}\s", tree), f"{entry.name} is not in the tree"


# -- paths the docs cite exist ------------------------------------------------------


def _cited_paths() -> list[tuple[str, str]]:
    cited = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for token in re.findall(
            r"`((?:tests|fuzz|docs|rust|python|benches)/[^`\s]*)`", doc.read_text()
        ):
            cited.append((doc.name, token))
    return cited


@pytest.mark.parametrize(("doc", "token"), _cited_paths())
def test_cited_paths_and_tests_exist(doc: str, token: str) -> None:
    path, _, test = token.partition("::")
    path = re.sub(r"<[^>]*>", "*", path)  # `fuzz/regressions/<target>/`
    matches = list(ROOT.glob(path)) if "*" in path else [ROOT / path]
    assert matches, f"{doc} cites {token}: nothing matches"
    assert all(p.exists() for p in matches), f"{doc} cites {token}, which does not exist"
    if test:
        source = matches[0].read_text()
        assert re.search(rf"\b(fn|def) {re.escape(test)}\b", source), (
            f"{doc} cites {token}: no such test"
        )


# -- docs/API.md: every public name, examples that run ----------------------------


def _quoted(name: str) -> bool:
    """`name` appears inside a backtick span of API.md."""
    return re.search(rf"`[^`\n]*\b{re.escape(name)}\b[^`\n]*`", API) is not None


def test_api_md_names_every_public_name() -> None:
    missing = [name for name in litemq.__all__ if not _quoted(name)]
    assert missing == []


def test_api_md_names_every_public_method_and_field() -> None:
    import dataclasses

    classes = [
        litemq.Queue,
        litemq.Tailer,
        litemq.Consumer,
        litemq.Appender,
        litemq.Message,
        litemq.Stats,
        litemq.RecoveryReport,
        litemq.DataFileInfo,
        litemq.ConsumerInfo,
        litemq.TopicInfo,
        litemq.WorkQueue,
        litemq.Job,
        litemq.WorkQueueInfo,
        litemq.Retention,
        litemq.RetentionReport,
        litemq.Batch,
    ]
    missing = []
    for cls in classes:
        names = {n for n in dir(cls) if not n.startswith("_")}
        if dataclasses.is_dataclass(cls):
            names |= {f.name for f in dataclasses.fields(cls)}
        missing += [f"{cls.__name__}.{n}" for n in sorted(names) if not _quoted(n)]
    assert missing == []


def test_api_md_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ```python blocks of API.md, in order, as one program."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    blocks = re.findall(r"^```python\n(.*?)^```", API, re.M | re.S)
    assert len(blocks) >= 15
    namespace: dict[str, object] = {"__name__": "api_md"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/API.md, example {i + 1}", "exec"), namespace)
    q = namespace["q"]
    assert isinstance(q, litemq.Queue)
    assert q.closed


def test_readme_links_the_api_reference() -> None:
    assert "(docs/API.md)" in README
