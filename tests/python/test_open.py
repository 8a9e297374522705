"""Opening a queue: where one may be created, and datasets of queues in the CLI (issue 33)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import litemq

from conftest import SMALL_FILE, cli

def test_queue_is_not_created_in_a_directory_that_holds_other_things(tmp_path: Path) -> None:
    dataset = tmp_path / "out"
    (dataset / "job-1" / "part-00000").mkdir(parents=True)
    (dataset / "_SUCCESS").write_text("")
    with pytest.raises(FileExistsError) as info:
        litemq.Queue(dataset, file_size=SMALL_FILE)
    text = str(info.value)
    assert str(dataset) in text
    assert "_SUCCESS" in text and "job-1" in text
    assert not (dataset / "metadata.json").exists()
    # An empty directory, a new one, and an existing queue still open.
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "empty", tmp_path / "new", tmp_path / "empty"):
        with litemq.Queue(path, file_size=SMALL_FILE) as q:
            q.appender().append(b"x")


def test_info_lists_the_queues_of_a_dataset(tmp_path: Path) -> None:
    dataset = tmp_path / "ds"
    for part, n in (("part-00000", 3), ("part-00001", 2)):
        with litemq.Queue(dataset / "job-1" / part, file_size=SMALL_FILE) as q:
            q.appender().append_batch([b"m"] * n)
    (dataset / "_litemq_dataset").write_text("")
    res = cli("info", str(dataset))
    assert res.returncode == 0, res.stderr
    assert "job-1/part-00000" in res.stdout and "job-1/part-00001" in res.stdout
    res = cli("info", str(dataset), "--format", "json")
    assert res.returncode == 0, res.stderr
    info = json.loads(res.stdout)
    assert info["messages"] == 5
    assert [(q["name"], q["messages"]) for q in info["queues"]] == [
        ("job-1/part-00000", 3),
        ("job-1/part-00001", 2),
    ]
