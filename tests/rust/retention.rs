//! Retention: whole sealed files deleted oldest first, by age, bytes and
//! count, never the file being written, never what a named consumer still
//! needs (when asked); reads of removed sequences; space really freed.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use litemq::{
    Error, ManualClock, Queue, QueueBuilder, RetentionPolicy, RetentionReport, RollStrategy, Start,
};

const PER_FILE: u64 = 10;
const T0: u64 = 1_790_000_000_000_000; // 2026-09-21, µs

fn builder(path: &Path, clock: &Arc<ManualClock>) -> QueueBuilder {
    small(path)
        .roll(RollStrategy::Count(PER_FILE))
        .clock(clock.clone())
}

/// Appends messages `from..to`, one file per PER_FILE, advancing the clock
/// by `step` per message.
fn write(q: &Queue, clock: &ManualClock, from: u64, to: u64, step: Duration) {
    let app = q.appender().unwrap();
    for i in from..to {
        app.append(&payload(i)).unwrap();
        app.flush().unwrap(); // one write per timestamp, so the clock steps show
        clock.advance(step);
    }
}

fn policy() -> RetentionPolicy {
    RetentionPolicy::default()
}

/// Applies retention keeping the newest `n` data files.
fn keep_files(q: &Queue, n: usize) -> RetentionReport {
    q.apply_retention_with(&RetentionPolicy {
        max_files: Some(n),
        ..policy()
    })
    .unwrap()
}

/// Bytes of disk (`st_blocks`) `paths` hold: what retention counts.
fn allocated(paths: &[std::path::PathBuf]) -> u64 {
    use std::os::unix::fs::MetadataExt;
    paths
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().blocks() * 512)
        .sum()
}

/// A data file with its sparse and dense indexes.
fn with_index(data: &Path) -> Vec<std::path::PathBuf> {
    vec![
        data.to_path_buf(),
        data.with_extension("index"),
        data.with_extension("offsets"),
    ]
}

#[test]
fn by_count_keeps_the_newest_files_and_reads_report_the_first_kept() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    write(&q, &clock, 0, 100, Duration::ZERO);
    assert_eq!(data_files(dir.path()).len(), 10);
    let doomed: u64 = data_files(dir.path())[..7]
        .iter()
        .map(|p| allocated(&with_index(p)))
        .sum();
    let report = keep_files(&q, 3);
    assert_eq!(report.deleted_files.len(), 7);
    assert_eq!(report.first_seq, 70);
    assert_eq!(report.deleted_bytes, doomed);
    assert_eq!(data_files(dir.path()).len(), 3);
    for deleted in &report.deleted_files {
        for p in with_index(deleted) {
            assert!(!p.exists(), "{} was left behind", p.display());
        }
    }
    assert_eq!(q.first_seq(), 70);
    assert_eq!(q.len(), 30);

    match q.get(5) {
        Err(Error::NotFound {
            seq: 5,
            first: 70,
            next: 100,
        }) => {}
        other => panic!("get of a removed message: {other:?}"),
    }
    let mut t = q.tailer(Start::Beginning).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, 70);
    match t.seek(69) {
        Err(Error::NotFound {
            seq: 69,
            first: 70,
            next: 100,
        }) => {}
        other => panic!("seek to a removed message: {other:?}"),
    }
    assert!(matches!(
        q.tailer(Start::Seq(0)),
        Err(Error::NotFound { first: 70, .. })
    ));
    let err = q.get(0).unwrap_err().to_string();
    assert!(
        err.contains("70"),
        "the message names the first kept sequence: {err}"
    );
    assert_eq!(read_all(&q, Start::Beginning).len(), 30);
    // Index files went with their data files.
    let indexes = walk_files(dir.path(), "index");
    assert_eq!(indexes.len(), 3, "{indexes:?}");
    let dense = walk_files(dir.path(), "offsets");
    assert_eq!(dense.len(), 3, "{dense:?}");
}

#[test]
fn policy_runs_at_every_roll_and_never_deletes_the_file_being_written() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let strict = RetentionPolicy {
        max_files: Some(1),
        max_bytes: Some(0),
        ..policy()
    };
    let q = builder(dir.path(), &clock)
        .retention(strict)
        .open()
        .unwrap();
    write(&q, &clock, 0, 95, Duration::ZERO);
    assert_eq!(data_files(dir.path()).len(), 1);
    assert_eq!(q.first_seq(), 90);
    assert_eq!(read_all(&q, Start::Beginning).len(), 5);
    assert_eq!(q.apply_retention().unwrap().deleted_files.len(), 0);
    // Writing goes on; reopening finds the queue whole.
    write(&q, &clock, 95, 100, Duration::ZERO);
    q.close().unwrap();
    drop(q);
    let q = builder(dir.path(), &clock)
        .retention(strict)
        .open()
        .unwrap();
    assert_eq!((q.first_seq(), q.next_seq()), (90, 100));
    write(&q, &clock, 100, 105, Duration::ZERO);
    assert_eq!(q.first_seq(), 100);
    let got: Vec<u64> = read_all(&q, Start::Beginning)
        .into_iter()
        .map(|m| m.0)
        .collect();
    assert_eq!(got, (100..105).collect::<Vec<_>>());
}

#[test]
fn by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    write(&q, &clock, 0, 60, Duration::ZERO);
    // What each file holds on disk, data, sparse and dense index (sealed files are
    // trimmed, the last one is not).
    let sizes: Vec<u64> = data_files(dir.path())
        .iter()
        .map(|p| allocated(&with_index(p)))
        .collect();
    let total: u64 = sizes.iter().sum();
    let keep4 = total - sizes[0] - sizes[1];
    let report = q
        .apply_retention_with(&RetentionPolicy {
            max_bytes: Some(keep4),
            ..policy()
        })
        .unwrap();
    assert_eq!(report.deleted_files.len(), 2);
    assert_eq!(report.deleted_bytes, sizes[0] + sizes[1]);
    assert_eq!(data_files(dir.path()).len(), 4);
    assert_eq!(q.first_seq(), 20);
    let report = q
        .apply_retention_with(&RetentionPolicy {
            max_bytes: Some(keep4 - 1),
            ..policy()
        })
        .unwrap();
    assert_eq!((report.deleted_files.len(), report.first_seq), (1, 30));
}

#[test]
fn by_age_with_a_manual_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    // A file a minute: file k holds messages written in minute k.
    write(&q, &clock, 0, 100, Duration::from_secs(6));
    let keep_5_min = RetentionPolicy {
        max_age: Some(Duration::from_secs(5 * 60)),
        ..policy()
    };
    // Now = T0 + 10 min. File k's newest message is older than the creation
    // of file k + 1 (T0 + (k + 1) min): files 0..=4 are older than 5 min.
    let report = q.apply_retention_with(&keep_5_min).unwrap();
    assert_eq!((report.deleted_files.len(), report.first_seq), (5, 50));
    // Nothing new expires until the clock moves.
    assert!(q
        .apply_retention_with(&keep_5_min)
        .unwrap()
        .deleted_files
        .is_empty());
    clock.advance(Duration::from_secs(60));
    let report = q.apply_retention_with(&keep_5_min).unwrap();
    assert_eq!((report.deleted_files.len(), report.first_seq), (1, 60));
    // However old, the last file stays.
    clock.advance(Duration::from_secs(86_400));
    let report = q.apply_retention_with(&keep_5_min).unwrap();
    assert_eq!(report.first_seq, 90);
    assert_eq!(data_files(dir.path()).len(), 1);
}

#[test]
fn a_lagging_named_tailer_keeps_what_it_has_not_consumed() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let keep_one = RetentionPolicy {
        max_files: Some(1),
        protect_unconsumed: true,
        ..policy()
    };
    let q = builder(dir.path(), &clock)
        .retention(keep_one)
        .open()
        .unwrap();
    let mut slow = q.consumer("slow", Start::Beginning).unwrap();
    write(&q, &clock, 0, 25, Duration::ZERO);
    let got: Vec<u64> = (0..25)
        .map(|_| slow.read_next().unwrap().unwrap().seq)
        .collect();
    assert_eq!(got, (0..25).collect::<Vec<_>>());
    // Read 25 but committed none: nothing may go.
    assert_eq!(q.first_seq(), 0);
    slow.seek(15).unwrap();
    slow.commit().unwrap(); // 0..15 consumed: file 0 may go, file 1 (10..20) not
    write(&q, &clock, 25, 100, Duration::ZERO);
    assert_eq!(q.first_seq(), 10);
    let report = q.apply_retention().unwrap();
    assert_eq!((report.deleted_files.len(), report.protected_files), (0, 8));
    // The consumer reads on from its position, across every kept file.
    let got: Vec<u64> = std::iter::from_fn(|| slow.read_next().unwrap().map(|m| m.seq)).collect();
    assert_eq!(got, (15..100).collect::<Vec<_>>());
    slow.commit().unwrap();
    let report = q.apply_retention().unwrap();
    assert_eq!((report.deleted_files.len(), report.first_seq), (8, 90));
    // A consumer that lags behind the others holds back retention too.
    let info = q.consumers().unwrap();
    assert_eq!((info[0].next_seq, info[0].lag_messages), (100, 0));
}

#[test]
fn without_protection_a_lagging_consumer_is_told_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    write(&q, &clock, 0, 50, Duration::ZERO);
    let mut c = q.consumer("late", Start::Beginning).unwrap();
    assert_eq!(c.read_next().unwrap().unwrap().seq, 0);
    c.commit().unwrap(); // at 1
    drop(c);
    keep_files(&q, 2);
    let mut c = q.consumer("late", Start::Beginning).unwrap();
    for _ in 0..2 {
        // Every read says so until the caller decides; nothing is skipped silently.
        match c.read_next() {
            Err(Error::NotFound {
                seq: 1,
                first: 30,
                next: 50,
            }) => {}
            other => panic!(
                "read of a removed position: {:?}",
                other.map(|m| m.map(|m| m.seq))
            ),
        }
    }
    c.seek(q.first_seq()).unwrap();
    assert_eq!(c.read_next().unwrap().unwrap().seq, 30);
}

#[test]
fn a_tailer_keeps_reading_a_deleted_file_it_has_open_then_hears_of_the_gap() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    write(&q, &clock, 0, 50, Duration::ZERO);
    let mut t = q.tailer(Start::Seq(5)).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, 5);
    keep_files(&q, 2);
    // File 0 is unlinked but mapped: 6..10 still read, checked by CRC.
    for i in 6..10 {
        let m = t.read_next().unwrap().unwrap();
        assert_eq!((m.seq, m.payload), (i, &payload(i)[..]));
    }
    match t.read_next() {
        Err(Error::NotFound {
            seq: 10,
            first: 30,
            next: 50,
        }) => {}
        other => panic!(
            "crossing into removed files: {:?}",
            other.map(|m| m.map(|m| m.seq))
        ),
    }
    t.seek(30).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, 30);
}

/// `get` on a read-only handle keeps its reader (and the file it maps)
/// between calls; a file retention deleted meanwhile must not keep
/// answering.
#[test]
fn read_only_get_stops_at_files_another_process_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    write(&q, &clock, 0, 50, Duration::ZERO);
    let ro = read_only(dir.path());
    assert_eq!(ro.get(25).unwrap().seq, 25);
    assert_eq!(
        ro.get(4).unwrap().seq,
        4,
        "the reader now maps the first file"
    );
    keep_files(&q, 2);
    assert!(
        matches!(
            ro.get(5),
            Err(Error::NotFound {
                seq: 5,
                first: 30,
                ..
            })
        ),
        "{:?}",
        ro.get(5)
    );
    assert_eq!(ro.get(35).unwrap().seq, 35);
    assert_eq!(ro.get(49).unwrap().seq, 49);
}

/// As above, when the reader has moved to another file in between: going
/// back to the deleted file goes through the handle's kept mapping of it,
/// which must be checked, not read.
#[test]
fn read_only_get_does_not_read_a_kept_mapping_of_a_deleted_file() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    write(&q, &clock, 0, 50, Duration::ZERO);
    let ro = read_only(dir.path());
    assert_eq!(ro.get(4).unwrap().seq, 4);
    assert_eq!(ro.get(25).unwrap().seq, 25, "the reader moves on");
    keep_files(&q, 2);
    for _ in 0..2 {
        assert!(
            matches!(
                ro.get(5),
                Err(Error::NotFound {
                    seq: 5,
                    first: 30,
                    ..
                })
            ),
            "{:?}",
            ro.get(5)
        );
    }
    assert_eq!(ro.get(35).unwrap().seq, 35);
}

#[test]
fn another_process_sees_first_seq_move() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    write(&q, &clock, 0, 50, Duration::ZERO);
    // A reader as another process has it: its own catalog, no lock.
    let ro = read_only(dir.path());
    assert_eq!(ro.first_seq(), 0);
    let mut t = ro.tailer(Start::Beginning).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, 0);
    drop(t);
    keep_files(&q, 2);
    assert_eq!(ro.first_seq(), 30);
    assert!(matches!(
        ro.get(3),
        Err(Error::NotFound {
            seq: 3,
            first: 30,
            ..
        })
    ));
    assert_eq!(
        ro.tailer(Start::Beginning)
            .unwrap()
            .read_next()
            .unwrap()
            .unwrap()
            .seq,
        30
    );
    // `litemq retain` from a read-only process works the same way.
    let report = keep_files(&ro, 1);
    assert_eq!(report.first_seq, 40);
    assert_eq!(q.first_seq(), 40);
}

#[test]
fn emptied_day_directories_go_too() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    // A file every ~2.4 hours: ten files over three UTC days.
    write(&q, &clock, 0, 100, Duration::from_secs(864));
    let days = |p: &Path| {
        walk_dirs(p)
            .into_iter()
            .filter(|d| d.components().count() == p.components().count() + 3)
            .count()
    };
    assert!(days(dir.path()) >= 2);
    keep_files(&q, 1);
    assert_eq!(days(dir.path()), 1, "{:?}", walk_dirs(dir.path()));
}

/// Deleted data files whose space this process still holds: open
/// descriptors (`/proc/self/fd`) and mappings (`/proc/self/maps`).
fn pinned_deleted(base: &Path) -> Vec<String> {
    let base = base.to_str().unwrap();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if let Ok(target) = std::fs::read_link(e.path()) {
            let t = target.to_string_lossy().to_string();
            if t.starts_with(base) && t.ends_with("(deleted)") {
                out.push(format!("fd {t}"));
            }
        }
    }
    for line in std::fs::read_to_string("/proc/self/maps").unwrap().lines() {
        if line.contains(base) && line.ends_with("(deleted)") {
            out.push(format!("map {line}"));
        }
    }
    out
}

#[test]
fn deleted_files_space_is_really_freed() {
    for flush in [litemq::FlushMode::Async, litemq::FlushMode::Sync] {
        let dir = tempfile::tempdir().unwrap();
        let clock = clock_at(T0);
        let keep = RetentionPolicy {
            max_files: Some(2),
            ..policy()
        };
        let q = builder(dir.path(), &clock)
            .flush_mode(flush)
            .retention(keep)
            .open()
            .unwrap();
        let mut follower = q.tailer(Start::Beginning).unwrap();
        let app = q.appender().unwrap();
        // No flush: in async mode the I/O thread keeps descriptors of sealed
        // files for the next flush, which must not pin deleted ones. The
        // follower keeps up (it reads each message before the next append),
        // so it passes every file before retention deletes it.
        for i in 0..200 {
            app.append(&payload(i)).unwrap();
            let m = follower
                .read_next_timeout(Duration::from_secs(10))
                .unwrap()
                .expect("published");
            assert_eq!((m.seq, m.payload), (i, &payload(i)[..]));
        }
        q.get(195).unwrap();
        assert_eq!(data_files(dir.path()).len(), 2);
        let pinned = pinned_deleted(dir.path());
        assert!(
            pinned.is_empty(),
            "{flush:?}: deleted files still held: {pinned:#?}"
        );
    }
}

fn walk_files(p: &Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk_files(&path, ext));
        } else if path.extension().is_some_and(|x| x == ext) {
            out.push(path);
        }
    }
    out
}

fn walk_dirs(p: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.push(path.clone());
            out.extend(walk_dirs(&path));
        }
    }
    out
}

#[test]
fn find_by_key_skips_retained_files_in_every_process() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..50u64 {
        let key = format!("k{}", i % 5);
        let payload = i.to_le_bytes();
        app.append_record(&litemq::Record {
            key: Some(key.as_bytes()),
            ..litemq::Record::new(&payload)
        })
        .unwrap();
    }
    app.flush().unwrap();
    let ro = read_only(dir.path());
    assert_eq!(ro.find(b"k3", None, None, None).unwrap().len(), 10);
    keep_files(&q, 2);
    for queue in [&q, &ro] {
        let seqs: Vec<u64> = queue
            .find(b"k3", None, None, None)
            .unwrap()
            .into_iter()
            .map(|m| m.seq)
            .collect();
        assert_eq!(seqs, vec![33, 38, 43, 48]);
    }
}

#[test]
fn unread_tailer_whose_files_were_retained_away_reports_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let q = litemq::QueueBuilder::new(dir.path())
        .file_size(64 * 1024)
        .roll(litemq::RollStrategy::Count(10))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..100u64 {
        app.append(&i.to_le_bytes()).unwrap();
    }
    app.flush().unwrap();
    let mut t = q.tailer(litemq::Start::Beginning).unwrap();
    keep_files(&q, 2);
    match t.read_next() {
        Err(litemq::Error::NotFound { seq: 0, first, .. }) => assert_eq!(first, q.first_seq()),
        other => panic!("expected NotFound naming the first kept sequence, got {other:?}"),
    }
}

fn idx_files(base: &Path) -> Vec<std::path::PathBuf> {
    let mut v = walk_files(&base.join("index"), "idx");
    v.sort();
    v
}

fn append_keyed(q: &Queue, seqs: std::ops::Range<u64>, keyed: impl Fn(u64) -> bool) {
    let app = q.appender().unwrap();
    for i in seqs {
        let key = format!("k{}", i % 7);
        let payload = i.to_le_bytes();
        app.append_record(&litemq::Record {
            key: keyed(i).then_some(key.as_bytes()),
            ..litemq::Record::new(&payload)
        })
        .unwrap();
    }
    app.flush().unwrap();
}

fn find_seqs(q: &Queue, k: u64) -> Vec<u64> {
    q.find(format!("k{k}").as_bytes(), None, None, None)
        .unwrap()
        .into_iter()
        .map(|m| m.seq)
        .collect()
}

#[test]
fn key_index_files_wholly_before_the_first_kept_file_go_too() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let open = || {
        builder(dir.path(), &clock)
            .key_index(litemq::KeyIndexConfig {
                slots: 8,
                items: 15,
            })
            .open()
            .unwrap()
    };
    let q = open();
    // 10 data files of 10 messages; key-index files of 15 items: 0..15, 15..30, ... 90..100.
    append_keyed(&q, 0..100, |_| true);
    let ro = read_only(dir.path());
    assert_eq!(find_seqs(&ro, 3).len(), 14);
    let before = idx_files(dir.path());
    assert_eq!(before.len(), 7);
    let doomed = data_files(dir.path())[..7]
        .iter()
        .map(|p| allocated(&with_index(p)))
        .sum::<u64>()
        + allocated(&before[..4]);
    let report = keep_files(&q, 3);
    assert_eq!(report.first_seq, 70);
    // The files holding only sequences below 70 (0..60) go; 60..75 straddles and stays.
    assert_eq!(report.deleted_key_index_files, before[..4]);
    assert_eq!(idx_files(dir.path()), before[4..]);
    assert_eq!(report.deleted_bytes, doomed);
    // `find` returns every message still kept, in this process and another.
    for queue in [&q, &ro] {
        for k in 0..7 {
            let want: Vec<u64> = (70..100).filter(|s| s % 7 == k).collect();
            assert_eq!(find_seqs(queue, k), want, "k{k}");
        }
    }
    // Once the writer starts its next key-index file it has let the deleted ones go, and
    // the other reader has already (its directory listing changed): no space stays pinned.
    append_keyed(&q, 100..106, |_| true);
    let pinned: Vec<String> = pinned_deleted(dir.path())
        .into_iter()
        .filter(|p| p.contains(".idx"))
        .collect();
    assert!(pinned.is_empty(), "{pinned:#?}");
    for (who, queue) in [("writer", &q), ("reader", &ro)] {
        let want: Vec<u64> = (70..106).filter(|s| s % 7 == 3).collect();
        assert_eq!(find_seqs(queue, 3), want, "{who}");
    }

    // The newest key-index file stays even when every item in it is older than the data
    // kept: here only unkeyed messages follow it.
    append_keyed(&q, 106..135, |_| false);
    let before = idx_files(dir.path());
    let report = keep_files(&q, 1);
    assert_eq!(report.first_seq, 130);
    assert_eq!(report.deleted_key_index_files, before[..before.len() - 1]);
    assert_eq!(idx_files(dir.path()), before[before.len() - 1..]);
    for queue in [&q, &ro] {
        assert!(find_seqs(queue, 3).is_empty());
    }
    // The writer reopens on what is left and goes on.
    q.close().unwrap();
    drop(q);
    let q = open();
    append_keyed(&q, 135..150, |_| true);
    for queue in [&q, &ro] {
        let want: Vec<u64> = (135..150).filter(|s| s % 7 == 3).collect();
        assert_eq!(find_seqs(queue, 3), want);
    }
}

#[test]
fn retention_at_roll_unmaps_the_deleted_key_index_files() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock)
        .key_index(litemq::KeyIndexConfig {
            slots: 8,
            items: 15,
        })
        .retention(RetentionPolicy {
            max_files: Some(2),
            ..policy()
        })
        .open()
        .unwrap();
    // Two key-index files (keys 0..30), then unkeyed messages: the index never rolls
    // again, so only the I/O thread's retention pass can let the first file go.
    append_keyed(&q, 0..95, |i| i < 30);
    q.get(94).unwrap();
    assert_eq!(idx_files(dir.path()).len(), 1);
    let pinned: Vec<String> = pinned_deleted(dir.path())
        .into_iter()
        .filter(|p| p.contains(".idx"))
        .collect();
    assert!(pinned.is_empty(), "{pinned:#?}");
}

/// `max_bytes` counts the key-index files too: a queue whose data and sparse
/// index fit the limit but whose key index does not loses its oldest files,
/// with the key-index files they free.
#[test]
fn max_bytes_counts_key_index_files() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = builder(dir.path(), &clock)
        .key_index(litemq::KeyIndexConfig {
            slots: 256,
            items: 15,
        })
        .open()
        .unwrap();
    // 10 data files of 10 messages; 7 key-index files of 15 items (1 KiB+ each).
    append_keyed(&q, 0..100, |_| true);
    let data_and_index: u64 = data_files(dir.path())
        .iter()
        .map(|p| allocated(&with_index(p)))
        .sum();
    let key_index = allocated(&idx_files(dir.path()));
    assert!(key_index > 0);
    let report = q
        .apply_retention_with(&RetentionPolicy {
            max_bytes: Some(data_and_index),
            ..policy()
        })
        .unwrap();
    assert!(
        !report.deleted_files.is_empty(),
        "data and sparse index fit, the key index does not: something must go"
    );
    assert!(!report.deleted_key_index_files.is_empty());
    let kept: u64 = data_files(dir.path())
        .iter()
        .map(|p| allocated(&with_index(p)))
        .sum::<u64>()
        + allocated(&idx_files(dir.path()));
    assert!(kept <= data_and_index, "{kept} > {data_and_index}");
}
