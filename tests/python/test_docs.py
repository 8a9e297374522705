"""The docs say what the code does: checked against the code, not by eye.

Each test reads README.md or a page of docs/ and compares it with what the
package exposes (signatures, the CLI parser) or with the bytes a queue writes.
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import re
import tokenize
import tomllib
from pathlib import Path
from types import CodeType

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
        "data file header": _section(
            FORMAT, "Header (4096 bytes; bytes 72..4096 are zero in an untyped file)"
        ),
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


# -- examples that run: README.md and docs/API.md, one mechanism ------------------
#
# Every ```python block of a page runs, in order, as one program (a temp
# directory stands in for tempfile's), so later blocks may use what earlier
# ones defined. On a line of an example, a comment `# -> VALUE` is checked: the
# statement it ends (an expression, or an assignment to a name) must have a
# `repr` that VALUE matches (`...` matches anything; text after `: ` at the
# outermost level is explanation, not part of VALUE). A block that does not run
# (shell commands, a diagram) has the line
# `<!-- not run: REASON -->` right above its fence; any other block is an error.

NOT_RUN = re.compile(r"^<!-- not run: (\S[^\n]*?) -->\n\Z")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.M | re.S)


def _examples(text: str, page: str) -> tuple[list[tuple[int, str]], list[str]]:
    """The ```python blocks of `page` that run, as (first line, source), and
    the reasons given for the blocks that do not."""
    run: list[tuple[int, str]] = []
    not_run: list[str] = []
    for m in FENCE.finditer(text):
        before = text[: m.start()]
        line = before.count("\n") + 2  # the block's first line of code
        previous = before[before.rstrip("\n").rfind("\n") + 1 :] if before else ""
        marker = NOT_RUN.match(previous.rstrip("\n") + "\n")
        if marker:
            not_run.append(marker.group(1))
        elif m.group(1) == "python":
            run.append((line, m.group(2)))
        else:
            raise AssertionError(
                f"{page}, line {line - 1}: a ```{m.group(1)} block without "
                "`<!-- not run: REASON -->` above it"
            )
    return run, not_run


def _expected_value(comment: str) -> str | None:
    """VALUE of a `# -> VALUE[: explanation]` comment, else None."""
    m = re.match(r"#\s*->\s*(.*)", comment)
    if not m:
        return None
    text, depth, quote = m.group(1), 0, ""
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote and text[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(": ", i):
            return text[:i].strip()
    return text.strip()


def _arrow(value: object, expected: str, where: str) -> None:
    pattern = ".*?".join(re.escape(part) for part in expected.split("..."))
    shown = repr(value)
    assert re.fullmatch(pattern, shown, re.S), f"{where}: {shown} is not {expected}"


def _compile_example(source: str, page: str, line: int) -> CodeType:
    """`source` compiled with a `_arrow` check after every `# -> VALUE` statement."""
    comments = {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type == tokenize.COMMENT
    }
    arrows = {n: v for n, c in comments.items() if (v := _expected_value(c)) is not None}
    checked: set[int] = set()

    def check(node: ast.expr, stmt: ast.stmt) -> ast.stmt:
        end = stmt.end_lineno or stmt.lineno
        where = f"{page}, line {line + end - 1}"
        call = ast.Call(
            ast.Name("_arrow", ast.Load()),
            [node, ast.Constant(arrows[end]), ast.Constant(where)],
            [],
        )
        checked.add(end)
        for new in (call, call.func, *call.args[1:]):
            ast.copy_location(new, stmt)
        return ast.copy_location(ast.Expr(call), stmt)

    def rewrite(body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list):
                    setattr(stmt, field, rewrite(inner))
            for handler in getattr(stmt, "handlers", []):
                handler.body = rewrite(handler.body)
            end = stmt.end_lineno or stmt.lineno
            if hasattr(stmt, "body") or end not in arrows:
                out.append(stmt)
            elif isinstance(stmt, ast.Expr):
                out.append(check(stmt.value, stmt))
            elif isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                target = ast.copy_location(ast.Name(stmt.targets[0].id, ast.Load()), stmt)
                out += [stmt, check(target, stmt)]
            else:
                raise AssertionError(f"{page}, line {line + end - 1}: `# ->` on {stmt}")
        return out

    tree = ast.parse(source)
    tree.body = rewrite(tree.body)
    unused = sorted(set(arrows) - checked)
    assert not unused, f"{page}: `# ->` comments on no statement, lines {unused}"
    ast.increment_lineno(tree, line - 1)
    return compile(ast.fix_missing_locations(tree), page, "exec")


def _run_examples(
    text: str, page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, object]:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run, _ = _examples(text, page)
    namespace: dict[str, object] = {"__name__": page, "_arrow": _arrow}
    for line, source in run:
        exec(_compile_example(source, page, line), namespace)
    return namespace


def test_api_md_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ```python blocks of API.md, in order, as one program."""
    assert len(_examples(API, "docs/API.md")[0]) >= 15
    namespace = _run_examples(API, "docs/API.md", tmp_path, monkeypatch)
    q = namespace["q"]
    assert isinstance(q, litemq.Queue)
    assert q.closed


def test_readme_examples_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ```python blocks of README.md, in order, as one program: each
    `# -> VALUE` comment holds, and only the few marked blocks are left out."""
    run, not_run = _examples(README, "README.md")
    assert len(run) >= 12
    assert len(not_run) <= 8, not_run
    arrows = sum(_expected_value(c) is not None for _, s in run for c in re.findall(r"#.*", s))
    assert arrows >= 20, "the README's `# ->` comments are no longer checked"
    _run_examples(README, "README.md", tmp_path, monkeypatch)
    printed = capsys.readouterr().out
    assert "order 1" in printed


def test_a_wrong_arrow_fails() -> None:
    """The check is live: a `# ->` comment that does not hold fails the run."""
    code = _compile_example("x = 1 + 1   # -> 3: wrong\n", "example", 1)
    with pytest.raises(AssertionError, match="example, line 1: 2 is not 3"):
        exec(code, {"_arrow": _arrow})
    exec(_compile_example("[1, 2]   # -> [1, ...]\n", "example", 1), {"_arrow": _arrow})


def test_readme_links_the_api_reference() -> None:
    assert "(docs/API.md)" in README


# -- installing: from a checkout or a built wheel, not from an index ----------------


def _extras() -> dict[str, set[str]]:
    """pyproject.toml's extras: extra -> the distribution names it installs."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return {
        extra: {re.split(r"[\[<>=!~ ;]", req, maxsplit=1)[0].lower() for req in reqs}
        for extra, reqs in extras.items()
    }


def test_arrow_and_pandas_extras_do_not_pull_pyspark() -> None:
    extras = _extras()
    assert extras["arrow"] == {"pyarrow"}
    assert extras["pandas"] == {"pyarrow", "pandas"}
    assert {"pyspark", "pyarrow", "pandas"} <= extras["spark"]


def test_install_docs_build_the_package_instead_of_naming_an_index() -> None:
    """litemq is not published: no doc may say `pip install "litemq[...]"`;
    the README and SPARK.md say how to install from a checkout or a wheel."""
    spark = (ROOT / "docs" / "SPARK.md").read_text()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text()
        assert not re.search(r"pip install [\"']?litemq\b", text), doc.name
    install = _section(README, "Installing")
    for text in (install, spark):
        assert "make wheel" in text
        assert "pip install dist/litemq-" in text or 'pip install "dist/litemq-' in text
        assert "Linux" in text
    assert 'pip install ".[arrow]"' in install
    extras = set(re.findall(r"\[(\w+)\]", install))
    assert {"arrow", "pandas", "spark"} <= extras <= set(_extras())


def test_make_wheel_builds_a_wheel_into_dist_with_maturin() -> None:
    makefile = (ROOT / "Makefile").read_text()
    rule = re.search(r"^wheel:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert rule, "no `wheel` target"
    assert "maturin build --release --out dist" in rule.group(1)
    assert re.search(r"^\.PHONY:.* wheel\b", makefile, re.M)
    assert re.search(r"make wheel\s", makefile), "`make help` does not list it"
