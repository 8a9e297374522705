//! Removal marks (format 10): litemq marks a data file before it deletes it
//! or puts another in its place, so a `get` in another process, which keeps
//! sealed files mapped, notices in memory, with no system call per read.
//! Files of older versions (an older litemq deletes them unmarked) are
//! checked with the file system on every `get`.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use litemq::{CompactOptions, Error, Queue, Record, RetentionPolicy, RollStrategy};

const MARK_AT: usize = 64;
const MARK: &[u8; 8] = b"LMQGONE\0";

/// A queue of `n` messages, 10 to a file, through the writer `Queue`.
fn filled(path: &Path, n: u64) -> Queue {
    let q = small(path).roll(RollStrategy::Count(10)).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..n {
        app.append_record(&Record {
            key: Some(format!("k{}", i % 3).as_bytes()),
            ..Record::new(&payload(i))
        })
        .unwrap();
    }
    app.flush().unwrap();
    q
}

/// A second name for `file` (outside the queue), through which its bytes
/// can still be read once litemq deleted or replaced it.
fn second_name(file: &Path, dir: &Path) -> PathBuf {
    let link = dir.join(format!(
        "{}.link",
        file.file_name().unwrap().to_str().unwrap()
    ));
    std::fs::hard_link(file, &link).unwrap();
    link
}

fn mark_of(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()[MARK_AT..MARK_AT + 8].to_vec()
}

#[test]
fn retention_marks_each_file_before_deleting_it() {
    let dir = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let q = filled(dir.path(), 50);
    let files = data_files(dir.path());
    let doomed = second_name(&files[0], links.path());
    let kept = second_name(&files[3], links.path());
    assert_eq!(mark_of(&doomed), [0; 8], "a file litemq keeps is unmarked");
    let report = q
        .apply_retention_with(&RetentionPolicy {
            max_files: Some(2),
            ..RetentionPolicy::default()
        })
        .unwrap();
    assert_eq!(report.deleted_files.len(), 3);
    assert_eq!(mark_of(&doomed), MARK);
    assert_eq!(mark_of(&kept), [0; 8]);
}

#[test]
fn a_get_through_a_kept_mapping_sees_what_compaction_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let links = tempfile::tempdir().unwrap();
    let q = filled(dir.path(), 50);
    let old = second_name(&data_files(dir.path())[0], links.path());
    // Another process has read from the first two files: it keeps them mapped.
    let ro = read_only(dir.path());
    assert_eq!(ro.get(0).unwrap().payload, payload(0));
    assert_eq!(ro.get(15).unwrap().payload, payload(15));
    let report = q
        .compact(
            &CompactOptions {
                grace_us: 0,
                ..Default::default()
            },
            &mut |_, _| {},
        )
        .unwrap();
    assert!(report.records_dropped > 0);
    assert_eq!(mark_of(&old), MARK, "the replaced file was marked");
    // Message 0 (key k0) has later ones: compaction dropped it. The reader
    // maps the new file instead of answering from the old one, also when
    // its last read was in that very file.
    assert!(
        matches!(ro.get(0), Err(Error::Compacted { .. })),
        "{:?}",
        ro.get(0)
    );
    assert_eq!(ro.get(48).unwrap().payload, payload(48));
    assert!(matches!(ro.get(3), Err(Error::Compacted { .. })));
    assert!(matches!(ro.get(1), Err(Error::Compacted { .. })));
    drop(ro);
}

/// A copy of the format-9 fixture: files an older litemq may delete
/// without marking them.
fn format_9_queue(to: &Path) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/queue-v9/queue");
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_file_of_format_9_deleted_unmarked_is_noticed_by_the_next_get() {
    let dir = tempfile::tempdir().unwrap();
    format_9_queue(dir.path());
    let files = data_files(dir.path());
    assert!(files.len() >= 3);
    let ro = read_only(dir.path());
    let in_first = ro.first_seq();
    let in_second = ro.data_files().unwrap()[1].first_seq;
    assert_eq!(ro.get(in_first).unwrap().seq, in_first);
    assert_eq!(ro.get(in_second).unwrap().seq, in_second);
    // Back in the first file (a kept mapping), then read again there (the
    // reader stands in it): both checks find it gone once an older litemq
    // deleted it, without a mark.
    assert_eq!(ro.get(in_first).unwrap().seq, in_first);
    std::fs::remove_file(&files[0]).unwrap();
    for _ in 0..2 {
        assert!(
            matches!(ro.get(in_first), Err(Error::NotFound { .. })),
            "{:?}",
            ro.get(in_first)
        );
    }
    assert_eq!(ro.get(in_second).unwrap().seq, in_second);
    // A file renamed away is gone too, though its inode lives on.
    assert_eq!(ro.get(in_second).unwrap().seq, in_second);
    std::fs::rename(&files[1], dir.path().join("elsewhere")).unwrap();
    std::thread::sleep(Duration::from_millis(1));
    assert!(
        matches!(ro.get(in_second), Err(Error::NotFound { .. })),
        "{:?}",
        ro.get(in_second)
    );
}

/// The check behind files of format 9 and older: a path lookup, or with
/// the file's descriptor kept an `fstat` while its link count and change
/// time are those of the last lookup. Every way a file leaves its name
/// changes one of them.
#[test]
fn a_watched_mapping_notices_every_way_its_file_leaves_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name);
    for name in ["kept", "relinked", "renamed", "replaced", "other"] {
        std::fs::write(path(name), vec![7u8; 4096]).unwrap();
    }
    // Change times settle after a second: only then does the fstat alone
    // answer (the case to test).
    std::thread::sleep(Duration::from_millis(1100));
    let maps: Vec<litemq::Mapping> = ["kept", "relinked", "renamed", "replaced"]
        .iter()
        .map(|n| litemq::Mapping::open_watched(&path(n)).unwrap())
        .collect();
    for m in &maps {
        assert!(m.still_named(), "{:?}", m.path());
        assert!(m.still_named(), "{:?} again, by its descriptor", m.path());
    }
    // Linked under another name, then unlinked: the same link count.
    std::fs::hard_link(path("relinked"), path("relinked.2")).unwrap();
    std::fs::remove_file(path("relinked")).unwrap();
    std::fs::rename(path("renamed"), path("renamed.2")).unwrap();
    std::fs::rename(path("other"), path("replaced")).unwrap();
    assert!(maps[0].still_named());
    for m in &maps[1..] {
        assert!(!m.still_named(), "{:?} left its name", m.path());
    }
}
