//! The dense index (format 5): `get` and `seek` of every sequence through
//! it, and what happens when it is missing, damaged or behind the data.
//! Every answer is checked against the payload appended under that
//! sequence: a damaged index may cost speed, never a wrong message.

mod common;

use common::{data_files, payload, small};
use std::path::{Path, PathBuf};
use std::time::Duration;

use litemq::{Error, QueueBuilder, Start};

const CHILD_ENV: &str = "LITEMQ_DENSE_CHILD_DIR";

fn offsets_of(data: &Path) -> PathBuf {
    data.with_extension("offsets")
}

/// Writes `n` messages of varying length (several files with `small`).
fn fill(dir: &Path, n: u64) {
    let q = small(dir).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..n {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
    q.close().unwrap();
}

/// `get` of every sequence in `0..n`, in a scrambled order, from `q`.
fn check_every_get(q: &litemq::Queue, n: u64) {
    for k in 0..n {
        let seq = (k * 7919) % n;
        let m = q.get(seq).unwrap();
        assert_eq!(m.seq, seq);
        assert_eq!(m.payload, payload(seq), "payload of seq {seq}");
    }
}

/// `seek` to every sequence, then one read.
fn check_every_seek(q: &litemq::Queue, n: u64) {
    let mut t = q.tailer(Start::Beginning).unwrap();
    for k in 0..n {
        let seq = (k * 104_729) % n;
        t.seek(seq).unwrap();
        let m = t.read_next().unwrap().unwrap();
        assert_eq!((m.seq, m.payload), (seq, &payload(seq)[..]));
    }
}

fn entry_word(path: &Path, i: u64) -> u64 {
    let b = std::fs::read(path).unwrap();
    let at = 64 + 8 * i as usize;
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn set_entry_word(path: &Path, i: u64, word: u64) {
    let mut b = std::fs::read(path).unwrap();
    let at = 64 + 8 * i as usize;
    b[at..at + 8].copy_from_slice(&word.to_le_bytes());
    std::fs::write(path, b).unwrap();
}

#[test]
fn every_data_file_has_a_dense_index_and_every_get_uses_it() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2000;
    fill(dir.path(), n);
    let files = data_files(dir.path());
    assert!(files.len() > 3, "the test wants several rolls");
    for f in &files {
        let o = offsets_of(f);
        assert!(o.exists(), "{} has no dense index", f.display());
        // Entry 0 of every file points at its first frame.
        assert_eq!(entry_word(&o, 0) & ((1 << 40) - 1), 4096);
    }
    // Reopened as a writer, and read-only.
    let q = small(dir.path()).open().unwrap();
    check_every_get(&q, n);
    check_every_seek(&q, n);
    q.close().unwrap();
    let ro = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    check_every_get(&ro, n);
    check_every_seek(&ro, n);
    assert!(matches!(ro.get(n), Err(Error::NotFound { seq, next, .. }) if seq == n && next == n));
}

#[test]
fn the_writers_own_get_sees_what_it_just_appended() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..1500 {
        app.append(&payload(i)).unwrap();
        let m = q.get(i).unwrap();
        assert_eq!(m.payload, payload(i));
        if i > 0 {
            let back = (i * 31) % i;
            assert_eq!(q.get(back).unwrap().payload, payload(back));
        }
    }
}

#[test]
fn missing_dense_indexes_fall_back_and_the_last_one_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1500;
    fill(dir.path(), n);
    let files = data_files(dir.path());
    let last = offsets_of(files.last().unwrap());
    let before = std::fs::read(&last).unwrap();
    for f in &files {
        std::fs::remove_file(offsets_of(f)).unwrap();
    }
    let ro = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    check_every_get(&ro, n);
    drop(ro);
    // A writer rebuilds the last file's from the data (the data files are
    // the truth); older files stay readable through their sparse index.
    let q = small(dir.path()).open().unwrap();
    assert!(q.stats().recovery.dense_entries_rebuilt > 0);
    assert_eq!(std::fs::read(&last).unwrap(), before);
    check_every_get(&q, n);
}

#[test]
fn damaged_dense_entries_never_return_a_wrong_message() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1200;
    fill(dir.path(), n);
    let files = data_files(dir.path());
    let first = offsets_of(&files[0]);
    let second = offsets_of(&files[1]);
    // Entries 3 and 4 swapped (a misdirected write: each points at a real
    // frame, the wrong one), entry 6 with a flipped offset bit, entry 8
    // pointing at the middle of a frame with a made-up check, and the
    // second file's header damaged.
    let (w3, w4) = (entry_word(&first, 3), entry_word(&first, 4));
    set_entry_word(&first, 3, w4);
    set_entry_word(&first, 4, w3);
    set_entry_word(&first, 6, entry_word(&first, 6) ^ 8);
    set_entry_word(&first, 8, (0xABCDEF << 40) | 4104);
    let mut b = std::fs::read(&second).unwrap();
    b[20] ^= 0xFF;
    std::fs::write(&second, b).unwrap();
    let ro = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    for seq in [3, 4, 6, 8] {
        assert_eq!(ro.get(seq).unwrap().payload, payload(seq), "seq {seq}");
    }
    check_every_get(&ro, n);
    check_every_seek(&ro, n);
}

#[test]
fn a_writer_killed_with_its_dense_index_behind_the_data_recovers_it() {
    // The state SIGKILL between a frame and its entry leaves, made larger:
    // the last file's dense index misses its last entries, and the queue
    // was not closed cleanly. (A real kill -9: `get_after_kill9` below.)
    let dir = tempfile::tempdir().unwrap();
    let n = 700;
    fill(dir.path(), n);
    let files = data_files(dir.path());
    let last = offsets_of(files.last().unwrap());
    let before = std::fs::read(&last).unwrap();
    let mut b = before.clone();
    let used = before[64..].iter().rposition(|&x| x != 0).unwrap() + 64 + 1;
    let cut = (used - 64) / 8 / 2 * 8 + 64;
    b[cut..used].fill(0);
    std::fs::write(&last, b).unwrap();
    let meta = dir.path().join("metadata.json");
    let text = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(
        &meta,
        text.replace("\"clean_shutdown\": true", "\"clean_shutdown\": false"),
    )
    .unwrap();
    assert!(std::fs::read_to_string(&meta)
        .unwrap()
        .contains("\"clean_shutdown\": false"));
    let q = small(dir.path()).open().unwrap();
    assert!(q.stats().recovery.dense_entries_rebuilt > 0);
    assert_eq!(std::fs::read(&last).unwrap(), before);
    check_every_get(&q, n);
}

#[test]
fn get_after_kill9() {
    let dir = tempfile::tempdir().unwrap();
    drop(small(dir.path()).open().unwrap());
    let mut child = common::child_test("kill9_child")
        .env(CHILD_ENV, dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Let it write a few files, then kill it in the middle of appends.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while data_files(dir.path()).len() < 4 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let q = small(dir.path()).open().unwrap();
    let n = q.next_seq();
    assert!(n > 0);
    check_every_get(&q, n);
    check_every_seek(&q, n);
}

#[test]
#[ignore = "child process of get_after_kill9"]
fn kill9_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let q = small(Path::new(&dir)).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0.. {
        app.append(&payload(i)).unwrap();
    }
}

#[test]
fn a_read_only_process_gets_every_message_while_the_writer_appends() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let child = common::child_test("reader_child")
        .env(CHILD_ENV, dir.path())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..3000 {
        app.append(&payload(i)).unwrap();
        if i % 100 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    app.flush().unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {text}");
    assert!(text.contains("READER-GOT-ALL"), "{text}");
}

#[test]
#[ignore = "child process of a_read_only_process_gets_every_message_while_the_writer_appends"]
fn reader_child() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let ro = QueueBuilder::new(Path::new(&dir))
        .read_only(true)
        .open()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen = 0u64;
    while seen < 3000 {
        assert!(std::time::Instant::now() < deadline, "timed out at {seen}");
        match ro.get(seen) {
            Ok(m) => {
                assert_eq!(m.payload, payload(seen), "seq {seen}");
                // And a random earlier one, through the index of an older file.
                let back = mix_below(seen, seen + 1);
                assert_eq!(ro.get(back).unwrap().payload, payload(back));
                seen += 1;
            }
            Err(Error::NotFound { .. }) => std::thread::sleep(Duration::from_micros(200)),
            Err(e) => panic!("get({seen}): {e}"),
        }
    }
    println!("READER-GOT-ALL");
}

fn mix_below(x: u64, n: u64) -> u64 {
    common::mix(x) % n
}

#[test]
fn verify_on_startup_checks_and_rebuilds_sealed_dense_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1200;
    fill(dir.path(), n);
    let files = data_files(dir.path());
    let (first, second) = (offsets_of(&files[0]), offsets_of(&files[1]));
    let (a, b) = (
        std::fs::read(&first).unwrap(),
        std::fs::read(&second).unwrap(),
    );
    set_entry_word(&first, 5, entry_word(&first, 5) ^ 0x10);
    std::fs::remove_file(&second).unwrap();
    let q = small(dir.path()).verify_on_startup(true).open().unwrap();
    assert!(q.stats().recovery.dense_entries_rebuilt > 0);
    assert_eq!(
        std::fs::read(&first).unwrap(),
        a,
        "the damaged entry rewritten"
    );
    assert_eq!(
        std::fs::read(&second).unwrap(),
        b,
        "the missing index rebuilt"
    );
    check_every_get(&q, n);
}

/// Format version 11: data and dense-index files grow with their data, and
/// readers map them at full size but touch only what the files hold. A
/// damaged dense entry whose check matches but whose offset lies past the
/// data file's current length (below its `file_size`), and entries past
/// the `.offsets` file's current length, read as "no entry": the reader
/// scans, it never loads past end of file (SIGBUS).
#[test]
fn dense_entries_past_the_current_length_read_as_a_scan() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1000;
    let builder = QueueBuilder::new(dir.path())
        .file_size(16 << 20)
        .index_interval(64);
    let q = builder.clone().open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..n {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
    q.close().unwrap();
    let data = data_files(dir.path()).pop().unwrap();
    let offsets = offsets_of(&data);
    let data_len = std::fs::metadata(&data).unwrap().len();
    assert!(data_len < 16 << 20, "the data file is {data_len} bytes");
    // Seq 5's entry: a valid check for an offset past the file's end.
    let far = (data_len + (1 << 20)).next_multiple_of(8);
    set_entry_word(&offsets, 5, litemq::index::dense::encode_entry(5, far));
    // The dense index cut to its first page: entries 504.. are past it.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&offsets)
        .unwrap()
        .set_len(4096)
        .unwrap();
    let ro = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    check_every_get(&ro, n);
    check_every_seek(&ro, n);
    let mut t = ro.tailer(Start::Seq(5)).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().payload, payload(5));
    drop(t);
    ro.close().unwrap();
    // The writer reopens and writes on.
    let q = builder.open().unwrap();
    let app = q.appender().unwrap();
    assert_eq!(app.append(&payload(n)).unwrap(), n);
    app.flush().unwrap();
    check_every_get(&q, n + 1);
    q.close().unwrap();
}
