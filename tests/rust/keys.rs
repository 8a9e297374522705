//! Finding messages by key through the queue: exact results, time ranges,
//! recovery of an index that lags the data, and rebuilds.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use litemq::format::record::HeaderField;
use litemq::{KeyIndexConfig, QueueBuilder, Record, Start};

/// Tiny key index: 4 slots force long collision chains, 50 items per file
/// force many files.
fn tiny(path: &Path) -> QueueBuilder {
    small(path).key_index(KeyIndexConfig {
        slots: 4,
        items: 50,
    })
}

fn keyed<'a>(payload: &'a [u8], key: &'a [u8]) -> Record<'a> {
    Record {
        payload,
        key: Some(key),
        ..Record::new(payload)
    }
}

fn key_of(i: u64) -> Vec<u8> {
    format!("k{}", i % 17).into_bytes()
}

/// Appends 600 messages, 17 distinct keys, every third without a key.
fn fill(q: &litemq::Queue, clock: &litemq::ManualClock) {
    let app = q.appender().unwrap();
    for i in 0..600u64 {
        let p = payload(i);
        if i % 3 == 2 {
            app.append(&p).unwrap();
        } else {
            app.append_record(&keyed(&p, &key_of(i))).unwrap();
        }
        // The I/O thread stamps messages when it writes them: flush so each
        // one is written before the clock moves.
        app.flush().unwrap();
        clock.advance(Duration::from_millis(3));
    }
}

/// A queue at `dir` holding the 600 messages of [`fill`], and its clock.
fn filled(dir: &Path) -> (std::sync::Arc<litemq::ManualClock>, litemq::Queue) {
    let clock = clock_at(1_000_000_000);
    let q = tiny(dir).clock(clock.clone()).open().unwrap();
    fill(&q, &clock);
    (clock, q)
}

fn expected(key: &[u8], range: std::ops::Range<u64>) -> Vec<u64> {
    (0..600u64)
        .filter(|i| i % 3 != 2 && key_of(*i) == key && range.contains(i))
        .collect()
}

fn seqs(v: &[litemq::OwnedMessage]) -> Vec<u64> {
    v.iter().map(|m| m.seq).collect()
}

#[test]
fn find_returns_exactly_the_messages_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let (_clock, q) = filled(dir.path());
    assert!(
        std::fs::read_dir(dir.path().join("index")).unwrap().count() > 3,
        "keys must span several index files"
    );
    assert!(q.stats().rolls > 0, "and several data files");
    for k in 0..17u64 {
        let key = key_of(k);
        let found = q.find(&key, None, None, None).unwrap();
        assert_eq!(seqs(&found), expected(&key, 0..600), "key {k}");
        assert!(found
            .iter()
            .all(|m| m.key.as_deref() == Some(&key[..]) && m.payload == payload(m.seq)));
    }
    assert!(q.find(b"absent", None, None, None).unwrap().is_empty());
    assert_eq!(q.find(b"k1", None, None, Some(3)).unwrap().len(), 3);
}

#[test]
fn time_range_is_inclusive_start_exclusive_end() {
    let dir = tempfile::tempdir().unwrap();
    let start = 1_000_000_000u64;
    let clock = clock_at(start);
    let q = tiny(dir.path()).clock(clock.clone()).open().unwrap();
    fill(&q, &clock);
    // Message i was written at start + 3 ms * i.
    let ts = |i: u64| start + i * 3000;
    let key = key_of(5);
    let from = ts(100);
    let to = ts(400);
    let found = q.find(&key, Some(from), Some(to), None).unwrap();
    assert_eq!(seqs(&found), expected(&key, 100..400));
    // One microsecond either side moves the boundary messages.
    let found = q.find(&key, Some(from + 1), Some(to + 1), None).unwrap();
    assert_eq!(seqs(&found), expected(&key, 101..401));
}

#[test]
fn text_keys_non_ascii_and_binary_keys() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    let text = "ключ-🔑";
    let bin = [0u8, 255, 0, 10];
    let h = [HeaderField {
        name: "größe",
        value: "∞".as_bytes(),
        value_is_text: true,
    }];
    app.append_record(&Record {
        payload: b"t",
        key: Some(text.as_bytes()),
        key_is_text: true,
        headers: &h,
        ..Record::default()
    })
    .unwrap();
    app.append_record(&keyed(b"b", &bin)).unwrap();
    app.flush().unwrap();
    let t = q.find(text.as_bytes(), None, None, None).unwrap();
    assert_eq!(t.len(), 1);
    assert!(t[0].key_is_text);
    assert_eq!(
        t[0].headers,
        vec![("größe".to_string(), "∞".as_bytes().to_vec(), true)]
    );
    assert_eq!(q.find(&bin, None, None, None).unwrap()[0].payload, b"b");
}

#[test]
fn index_lagging_the_data_is_caught_up_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, q) = filled(dir.path());
    q.close().unwrap();
    // A crash between data and index: the newest index files never made it.
    let mut idx: Vec<_> = std::fs::read_dir(dir.path().join("index"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    idx.sort();
    for p in &idx[idx.len() / 2..] {
        std::fs::remove_file(p).unwrap();
    }
    let q = tiny(dir.path()).clock(clock.clone()).open().unwrap();
    for k in 0..17u64 {
        let key = key_of(k);
        assert_eq!(
            seqs(&q.find(&key, None, None, None).unwrap()),
            expected(&key, 0..600),
            "key {k}"
        );
    }
    // And with the index gone entirely, read-only readers still see nothing wrong after reopen.
    q.close().unwrap();
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let q = tiny(dir.path()).clock(clock).open().unwrap();
    assert_eq!(
        seqs(&q.find(b"k3", None, None, None).unwrap()),
        expected(b"k3", 0..600)
    );
}

#[test]
fn reindex_produces_files_equal_to_the_live_built_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (_clock, q) = filled(dir.path());
    q.close().unwrap();
    drop(q);
    let read = |d: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(d.join("index"))
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                (
                    p.file_name().unwrap().to_owned(),
                    std::fs::read(&p).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let live = read(dir.path());
    let keys = litemq::reindex(
        dir.path(),
        KeyIndexConfig {
            slots: 4,
            items: 50,
        },
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(keys, 400);
    assert_eq!(read(dir.path()), live);
}

#[test]
fn read_only_queue_finds_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (_clock, _writer) = filled(dir.path());
    let r = tiny(dir.path()).read_only(true).open().unwrap();
    assert_eq!(
        seqs(&r.find(b"k7", None, None, None).unwrap()),
        expected(b"k7", 0..600)
    );
}

/// Key-index files of the queue at `base`, oldest first.
fn index_files(base: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(base.join("index"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    v.sort();
    v
}

/// Every key's `find` and `get_latest` through `q` give exactly what
/// `fill` appended.
fn assert_finds_every_key(q: &litemq::Queue, what: &str) {
    for k in 0..17u64 {
        let key = key_of(k);
        let want = expected(&key, 0..600);
        assert_eq!(
            seqs(&q.find(&key, None, None, None).unwrap()),
            want,
            "{what}: find key {k}"
        );
        assert_eq!(
            q.get_latest(&key).unwrap().map(|m| m.seq),
            want.last().copied(),
            "{what}: get_latest key {k}"
        );
    }
}

#[test]
fn read_only_handle_without_a_key_index_scans_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let (_clock, q) = filled(dir.path());
    q.close().unwrap();
    drop(q);
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let r = tiny(dir.path()).read_only(true).open().unwrap();
    assert_finds_every_key(&r, "no index directory");
    // And with the directory there but empty.
    std::fs::create_dir(dir.path().join("index")).unwrap();
    let r = tiny(dir.path()).read_only(true).open().unwrap();
    assert_finds_every_key(&r, "empty index directory");
}

/// A key-index file deleted by hand (the oldest, one in the middle, the
/// newest): a read-only handle scans the data the index no longer covers,
/// and the next writer open rebuilds the index to the files it had.
#[test]
fn a_deleted_key_index_file_is_scanned_by_readers_and_rebuilt_by_the_writer() {
    for which in ["oldest", "middle", "newest"] {
        let dir = tempfile::tempdir().unwrap();
        let (clock, q) = filled(dir.path());
        q.close().unwrap();
        drop(q);
        let files = index_files(dir.path());
        assert!(files.len() > 3, "keys must span several index files");
        let live: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
        let victim = match which {
            "oldest" => &files[0],
            "middle" => &files[files.len() / 2],
            _ => &files[files.len() - 1],
        };
        std::fs::remove_file(victim).unwrap();

        let r = tiny(dir.path()).read_only(true).open().unwrap();
        assert_finds_every_key(&r, &format!("read-only, {which} index file deleted"));

        let w = tiny(dir.path()).clock(clock.clone()).open().unwrap();
        assert_finds_every_key(&w, &format!("writer, {which} index file deleted"));
        w.close().unwrap();
        drop(w);
        let rebuilt: Vec<Vec<u8>> = index_files(dir.path())
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        assert!(
            rebuilt == live,
            "{which}: the writer rebuilt the index as it was"
        );
        assert_finds_every_key(&r, "read-only handle after the rebuild");
    }
}

/// Two sealed data files swapped (each under the other's name): the
/// headers' sequences no longer follow on, and a key lookup reports the
/// damage, as a tailer does, instead of returning the messages of the
/// files that still read in order.
#[test]
fn swapped_sealed_data_files_make_key_lookups_fail() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(1_000_000_000);
    let q = tiny(dir.path()).clock(clock.clone()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..100u64 {
        app.append_record(&keyed(&payload(i), &key_of(i))).unwrap();
        if i % 20 == 19 {
            app.roll().unwrap();
        }
    }
    q.close().unwrap();
    drop(q);
    let files = common::data_files(dir.path());
    assert!(files.len() > 3, "messages must span several data files");
    let (a, b) = (&files[1], &files[2]);
    let tmp = dir.path().join("swap.tmp");
    std::fs::rename(a, &tmp).unwrap();
    std::fs::rename(b, a).unwrap();
    std::fs::rename(&tmp, b).unwrap();

    let r = tiny(dir.path()).read_only(true).open().unwrap();
    for k in 0..17u64 {
        let key = key_of(k);
        let err = r.find(&key, None, None, None).unwrap_err();
        assert!(
            matches!(err, litemq::Error::Corrupted { .. }),
            "find key {k}: {err:?}"
        );
        let err = r.get_latest(&key).unwrap_err();
        assert!(
            matches!(err, litemq::Error::Corrupted { .. }),
            "get_latest key {k}: {err:?}"
        );
    }
}

/// `key_index_clear` in metadata.json: where the key-index files leave
/// positions holding no keyed message (here an unkeyed prefix, and the
/// unkeyed message between two files). A single writer's clean close
/// records them from its own complete index; a writer open of a queue whose
/// metadata lacks them (written before them) reads those positions and
/// records the same. Lookups and the next open skip them (lost files are
/// still found: the test above deletes files after such a close).
#[test]
fn writers_record_where_the_key_index_leaves_no_keyed_message() {
    let dir = tempfile::tempdir().unwrap();
    let q = tiny(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..600u64 {
        if i < 50 || i % 3 == 2 {
            app.append(&payload(i)).unwrap();
        } else {
            app.append_record(&keyed(&payload(i), &key_of(i))).unwrap();
        }
    }
    app.flush().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    let at = |t: &mut litemq::Tailer| t.read_next().unwrap().unwrap().position();
    let first_pos = at(&mut t);
    // 50 % 3 == 2: the first keyed message is 51.
    let first_keyed = (1..=51).map(|_| at(&mut t)).last().unwrap();
    q.close().unwrap();
    drop(q);
    let meta_path = dir.path().join("metadata.json");
    let clear = |p: &std::path::Path| -> Vec<(u64, u64)> {
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        serde_json::from_value(m["key_index_clear"].clone()).unwrap_or_default()
    };
    let at_close = clear(&meta_path);
    assert!(
        at_close.len() > 1,
        "the prefix and gaps between files: {at_close:?}"
    );
    assert!(
        at_close[0].0 <= first_pos && at_close[0].1 == first_keyed,
        "{at_close:?} {first_pos} {first_keyed}"
    );

    let mut m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    m.as_object_mut().unwrap().remove("key_index_clear");
    std::fs::write(&meta_path, serde_json::to_vec(&m).unwrap()).unwrap();
    let w = tiny(dir.path()).open().unwrap();
    assert_eq!(
        clear(&meta_path),
        at_close,
        "written by the open, from the data"
    );
    for i in (50..600u64).filter(|i| i % 3 != 2).step_by(7) {
        let found = w.find(&key_of(i), None, None, None).unwrap();
        assert!(seqs(&found).contains(&i), "key of {i}");
    }
}
