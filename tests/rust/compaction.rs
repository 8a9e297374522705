//! Key compaction: the latest message of every key survives, sequences stay
//! where they were (dropped ones become holes every reader steps over),
//! tombstones go after their grace period, the key index stays exact, a
//! crash at any step leaves the old file or the new one, readers holding the
//! old file keep reading it, and compaction waits for retention.

mod common;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use common::*;
use litemq::{CompactOptions, CompactStep, Error, ManualClock, Queue, Record, Start};

const N: u64 = 1500;
const KEYS: u64 = 23;

/// Message `i`: every 7th has no key, every 97th is a tombstone of its
/// key; keys k0..k2 end with a tombstone at about a third (their last
/// message), so it is their latest and sits in a sealed file.
#[derive(Debug, Clone)]
struct Msg {
    key: Option<Vec<u8>>,
    tombstone: bool,
    payload: Vec<u8>,
}

fn msg(i: u64) -> Msg {
    let mut k = i % KEYS;
    if i >= N / 3 && k < 3 {
        k += 3;
    }
    let last_of_early = i < N / 3 && i + KEYS >= N / 3 && k < 3;
    let key = (i % 7 != 3 || last_of_early).then(|| format!("k{k}").into_bytes());
    let tombstone = key.is_some() && (i % 97 == 50 || last_of_early);
    Msg {
        key,
        tombstone,
        payload: if tombstone { Vec::new() } else { payload(i) },
    }
}

fn append_all(q: &Queue, clock: &ManualClock, range: std::ops::Range<u64>) {
    let app = q.appender().unwrap();
    for i in range {
        let m = msg(i);
        app.append_record(&Record {
            key: m.key.as_deref(),
            tombstone: m.tombstone,
            ..Record::new(&m.payload)
        })
        .unwrap();
        if i % 50 == 0 {
            app.flush().unwrap();
            clock.advance(Duration::from_millis(1));
        }
    }
    app.flush().unwrap();
}

/// A queue of `N` messages over many small files, the last one active.
fn filled(path: &Path) -> (Queue, std::sync::Arc<ManualClock>) {
    let clock = clock_at(1_700_000_000_000_000);
    let q = small(path).clock(clock.clone()).open().unwrap();
    append_all(&q, &clock, 0..N);
    (q, clock)
}

/// The first sequence of the active (last) file: nothing at or after it is
/// ever dropped.
fn active_from(q: &Queue) -> u64 {
    q.data_files().unwrap().last().unwrap().first_seq
}

/// The sequences compaction keeps: messages without a key, every message of
/// the active file, and the latest message of each key (a tombstone among
/// them only when `tombstones_kept`).
fn survivors(active_from: u64, tombstones_kept: bool) -> Vec<u64> {
    let mut latest: HashMap<Vec<u8>, u64> = HashMap::new();
    for i in 0..N {
        if let Some(k) = msg(i).key {
            latest.insert(k, i);
        }
    }
    (0..N)
        .filter(|&i| {
            let m = msg(i);
            match &m.key {
                None => true,
                Some(_) if i >= active_from => true,
                Some(k) => latest[k] == i && (!m.tombstone || tombstones_kept),
            }
        })
        .collect()
}

fn compact(q: &Queue, grace: Duration) -> litemq::CompactReport {
    let opts = CompactOptions {
        grace_us: grace.as_micros() as u64,
        ..Default::default()
    };
    q.compact(&opts, &mut |_, _| {}).unwrap()
}

fn check_reads(q: &Queue, kept: &[u64]) {
    // Forward: exactly the survivors, payloads intact.
    let got = read_all(q, Start::Beginning);
    let seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, kept);
    for (s, p) in &got {
        assert_eq!(p, &msg(*s).payload, "seq {s}");
    }
    // Backward: the same, newest first.
    let mut b = q.backward_tailer(Start::End).unwrap();
    let mut back = Vec::new();
    while let Some(m) = b.read_next().unwrap() {
        back.push(m.seq);
    }
    back.reverse();
    assert_eq!(back, kept);
    // Columns: every range, never a row past its end.
    for (start, end) in [(0, N), (0, 10), (37, 400), (N - 5, N)] {
        let mut rows = Vec::new();
        let mut at = start;
        while at < end {
            let c = q.read_columns(at, end, 64).unwrap();
            if c.rows == 0 {
                break;
            }
            rows.extend(c.seq.iter().map(|&s| s as u64));
            at = *rows.last().unwrap() + 1;
        }
        let want: Vec<u64> = kept
            .iter()
            .copied()
            .filter(|s| (start..end).contains(s))
            .collect();
        assert_eq!(rows, want, "columns {start}..{end}");
    }
    // By sequence: a survivor as it was, a hole is `Compacted`.
    for s in 0..N {
        match q.get(s) {
            Ok(m) => {
                assert!(kept.contains(&s), "seq {s} should be a hole");
                assert_eq!(m.payload, msg(s).payload);
            }
            Err(Error::Compacted { seq }) => {
                assert_eq!(seq, s);
                assert!(!kept.contains(&s), "seq {s} should survive");
            }
            Err(e) => panic!("get({s}): {e}"),
        }
    }
}

/// `find` and `get_latest` answer exactly from the survivors.
fn check_keys(q: &Queue, kept: &[u64]) {
    for k in 0..KEYS {
        let key = format!("k{k}").into_bytes();
        let want: Vec<u64> = kept
            .iter()
            .copied()
            .filter(|&s| msg(s).key.as_deref() == Some(&key[..]))
            .collect();
        let found: Vec<u64> = q
            .find(&key, None, None, None)
            .unwrap()
            .iter()
            .map(|m| m.seq)
            .collect();
        assert_eq!(found, want, "find {k}");
        let latest = q.get_latest(&key).unwrap().map(|m| m.seq);
        let want_latest = want.last().copied().filter(|&s| !msg(s).tombstone);
        assert_eq!(latest, want_latest, "get_latest {k}");
    }
}

#[test]
fn the_latest_message_of_each_key_survives_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let (q, _clock) = filled(dir.path());
    let (first, next) = (q.first_seq(), q.next_seq());
    let active = active_from(&q);
    assert!(active > N / 2, "several sealed files");
    let r = compact(&q, Duration::from_secs(3600));
    let kept = survivors(active, true);
    assert_eq!(r.records_dropped, N - kept.len() as u64);
    assert_eq!(r.tombstones_dropped, 0);
    assert!(r.files_rewritten > 1);
    assert!(r.bytes_after <= r.bytes_before);
    // Sequences do not move: the range is the same, gaps are holes.
    assert_eq!((q.first_seq(), q.next_seq()), (first, next));
    check_reads(&q, &kept);
    check_keys(&q, &kept);
    // Another handle (another process) reads the same.
    let ro = read_only(dir.path());
    check_reads(&ro, &kept);
    check_keys(&ro, &kept);
    // A second pass has nothing left to drop.
    assert_eq!(compact(&q, Duration::from_secs(3600)).records_dropped, 0);
    // Appending goes on, after the holes.
    let clock = clock_at(1_700_000_100_000_000);
    drop(ro);
    drop(q);
    let q = small(dir.path()).clock(clock).open().unwrap();
    let s = q.appender().unwrap().append(b"after").unwrap();
    assert_eq!(s, N);
    assert_eq!(q.get(N).unwrap().payload, b"after");
}

#[test]
fn tombstones_stay_through_the_grace_period_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let (q, clock) = filled(dir.path());
    let active = active_from(&q);
    compact(&q, Duration::from_secs(3600));
    let kept = survivors(active, true);
    let tombs: Vec<u64> = kept
        .iter()
        .copied()
        .filter(|&s| msg(s).tombstone && s < active)
        .collect();
    assert!(
        !tombs.is_empty(),
        "the workload leaves a latest tombstone in a sealed file"
    );
    check_keys(&q, &kept);
    // An hour and a bit later: past the grace, the tombstones go.
    clock.advance(Duration::from_secs(3700));
    let r = compact(&q, Duration::from_secs(3600));
    assert_eq!(r.tombstones_dropped, tombs.len() as u64);
    assert_eq!(r.records_dropped, tombs.len() as u64);
    let kept = survivors(active, false);
    check_reads(&q, &kept);
    check_keys(&q, &kept);
}

#[test]
fn tailers_skip_holes_while_following() {
    let dir = tempfile::tempdir().unwrap();
    let (q, clock) = filled(dir.path());
    let active = active_from(&q);
    let mut t = q.tailer(Start::Beginning).unwrap();
    compact(&q, Duration::ZERO);
    let kept = survivors(active, false);
    let mut seqs = Vec::new();
    while let Some(m) = t.read_next().unwrap() {
        seqs.push(m.seq);
    }
    assert_eq!(seqs, kept);
    append_all(&q, &clock, N..N + 3);
    assert_eq!(t.read_next().unwrap().unwrap().seq, N);
    // Seeking onto a hole lands on the next survivor.
    let hole = (0..N).find(|s| !kept.contains(s)).unwrap();
    t.seek(hole).unwrap();
    let next = kept.iter().copied().find(|&s| s > hole).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, next);
}

#[test]
fn a_reader_holding_the_old_file_keeps_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let (q, _clock) = filled(dir.path());
    let ro = read_only(dir.path());
    let mut t = ro.tailer(Start::Beginning).unwrap();
    let first = t.read_next().unwrap().unwrap();
    assert_eq!(first.seq, 0);
    let r = compact(&q, Duration::ZERO);
    assert!(r.records_dropped > 0);
    // The tailer maps the first file as it was: it reads every message of
    // that file, dropped ones included, intact.
    let first_file_end = ro.data_files().unwrap()[1].first_seq;
    for s in 1..first_file_end {
        let m = t.read_next().unwrap().unwrap();
        assert_eq!(m.seq, s);
        assert_eq!(m.payload, msg(s).payload);
    }
}

/// What a queue reads as, forward, with payloads.
fn content(path: &Path) -> Vec<(u64, Vec<u8>)> {
    read_all(&read_only(path), Start::Beginning)
}

#[test]
fn a_crash_at_any_step_leaves_the_old_file_or_the_new_one() {
    for step in [
        CompactStep::Written,
        CompactStep::Synced,
        CompactStep::Renamed,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (q, _clock) = filled(dir.path());
        let active = active_from(&q);
        let before = content(dir.path());
        let opts = CompactOptions {
            grace_us: 0,
            fail_after: Some(step),
        };
        let e = q.compact(&opts, &mut |_, _| {}).unwrap_err();
        assert!(matches!(e, Error::Internal(_)), "{step:?}: {e}");
        // The first file is old or new as a whole, the others untouched.
        let now = content(dir.path());
        let first_end = q.data_files().unwrap()[1].first_seq;
        let kept = survivors(active, false);
        let new_first: Vec<(u64, Vec<u8>)> = kept
            .iter()
            .filter(|&&s| s < first_end)
            .map(|&s| (s, msg(s).payload))
            .collect();
        let old_first: Vec<(u64, Vec<u8>)> = before
            .iter()
            .filter(|(s, _)| *s < first_end)
            .cloned()
            .collect();
        let now_first: Vec<(u64, Vec<u8>)> = now
            .iter()
            .filter(|(s, _)| *s < first_end)
            .cloned()
            .collect();
        if step == CompactStep::Renamed {
            assert_eq!(now_first, new_first, "{step:?}");
        } else {
            assert_eq!(now_first, old_first, "{step:?}");
        }
        assert_eq!(
            now.iter().filter(|(s, _)| *s >= first_end).count(),
            before.iter().filter(|(s, _)| *s >= first_end).count()
        );
        // The writer reopens (a crash is a new process) and the next pass
        // finishes the work and leaves no temp file.
        drop(q);
        let q = small(dir.path()).open().unwrap();
        compact(&q, Duration::ZERO);
        let tmp = walk_names(dir.path())
            .into_iter()
            .filter(|n| n.ends_with(".tmp"))
            .collect::<Vec<_>>();
        assert!(tmp.is_empty(), "{step:?}: {tmp:?}");
        check_reads(&q, &kept);
        check_keys(&q, &kept);
    }
}

fn walk_names(p: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk_names(&e.path()));
        } else {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    out
}

#[test]
fn compaction_waits_for_a_retention_pass() {
    let dir = tempfile::tempdir().unwrap();
    let (q, _clock) = filled(dir.path());
    // Another process's retention pass holds the lock.
    let lock = std::fs::File::create(dir.path().join(".retention.lock")).unwrap();
    lock.lock().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let r = compact(&q, Duration::ZERO);
            tx.send(r).unwrap();
        });
        assert!(
            rx.recv_timeout(Duration::from_millis(300)).is_err(),
            "compaction ran while retention held the lock"
        );
        lock.unlock().unwrap();
        let r = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(r.records_dropped > 0);
    });
}

#[test]
fn the_active_file_is_never_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(1_700_000_000_000_000);
    let q = small(dir.path()).clock(clock.clone()).open().unwrap();
    append_all(&q, &clock, 0..40); // one file
    assert_eq!(q.data_files().unwrap().len(), 1);
    let r = compact(&q, Duration::ZERO);
    assert_eq!((r.files_rewritten, r.records_dropped), (0, 0));
    assert_eq!(read_all(&q, Start::Beginning).len(), 40);
}

#[test]
fn runs_of_holes_give_their_disk_blocks_back() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).file_size(256 * 1024).open().unwrap();
    let app = q.appender().unwrap();
    let body = [7u8; 100];
    for i in 0..12_000u64 {
        let key = format!("k{}", i % 10);
        app.append_record(&Record {
            key: Some(key.as_bytes()),
            ..Record::new(&body)
        })
        .unwrap();
    }
    app.flush().unwrap();
    let files = q.data_files().unwrap();
    assert!(files.len() > 3);
    let r = compact(&q, Duration::ZERO);
    // Every message of the sealed files is superseded: each file becomes
    // one hole (or a few), whose blocks are never written.
    assert_eq!(r.files_rewritten, files.len() - 1);
    assert!(
        r.bytes_after * 10 < r.bytes_before,
        "{} -> {} bytes",
        r.bytes_before,
        r.bytes_after
    );
    let active = files.last().unwrap().first_seq;
    let got: Vec<u64> = read_all(&q, Start::Beginning)
        .iter()
        .map(|(s, _)| *s)
        .collect();
    assert_eq!(got, (active..12_000).collect::<Vec<_>>());
    assert!(matches!(q.get(active - 1), Err(Error::Compacted { .. })));
    assert!(matches!(q.get(5), Err(Error::Compacted { seq: 5 })));
    for k in 0..10u64 {
        let m = q.get_latest(format!("k{k}").as_bytes()).unwrap().unwrap();
        assert_eq!(m.seq, 11_990 + k);
    }
    // Another handle, reading backward from the end, stops at the holes' start.
    let ro = read_only(dir.path());
    let mut b = ro.backward_tailer(Start::End).unwrap();
    let mut n = 0;
    while let Some(m) = b.read_next().unwrap() {
        assert!(m.seq >= active);
        n += 1;
    }
    assert_eq!(n, 12_000 - active);
}

#[test]
fn compact_on_roll_compacts_in_the_background() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(1_700_000_000_000_000);
    let q = small(dir.path())
        .clock(clock.clone())
        .compact_on_roll(Duration::ZERO)
        .open()
        .unwrap();
    append_all(&q, &clock, 0..N);
    // Once every file holding the N messages is sealed.
    let kept = survivors(N, false);
    let app = q.appender().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    // Each roll starts a pass unless one still runs: roll until a pass has
    // seen all N messages (the ticks have no key and stay).
    loop {
        let got: Vec<u64> = read_all(&q, Start::Beginning)
            .iter()
            .map(|(s, _)| *s)
            .filter(|&s| s < N)
            .collect();
        if got == kept {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no compaction after the rolls"
        );
        app.append(b"tick").unwrap();
        app.roll().unwrap();
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = q.stats();
    assert!(s.compactions >= 1);
    assert_eq!(s.compaction_errors, 0);
    q.close().unwrap(); // joins a pass still running
}

/// The messages a tailer reads from the start of `q`.
fn readable(q: &Queue) -> u64 {
    read_all(q, Start::Beginning).len() as u64
}

/// The sealed data files of the queue at `dir` with their bytes.
fn sealed_files(q: &Queue) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let files = q.data_files().unwrap();
    files[..files.len() - 1]
        .iter()
        .map(|f| (f.path.clone(), std::fs::read(&f.path).unwrap()))
        .collect()
}

/// Issue 33, "count what is there": after compaction `len`, `Stats::messages`,
/// a consumer's lag and a work queue's pending jobs count the messages a
/// reader finds, not the holes' sequences; and each compacted file's footer
/// (format 11) says how many sequences its holes stand for.
#[test]
fn len_stats_lag_and_pending_count_the_messages_that_are_there() {
    use litemq::format::footer::{Footer, FOOTER_LEN};
    let dir = tempfile::tempdir().unwrap();
    let (q, _clock) = filled(dir.path());
    // A consumer that committed a third of the way; a work queue whose
    // first 11 jobs were handed out and acked.
    let mut c = q.consumer("audit", Start::Beginning).unwrap();
    for _ in 0..N / 3 {
        c.read_next().unwrap().unwrap();
    }
    c.commit().unwrap();
    let pos = c.committed_seq();
    drop(c);
    let wq = q
        .work_queue(
            "jobs",
            litemq::WorkQueueOptions {
                window: 64,
                ..Default::default()
            },
        )
        .unwrap();
    let mut handed = Vec::new();
    for _ in 0..11 {
        let job = wq.get(Duration::ZERO, &mut || false).unwrap().unwrap();
        handed.push(job.message.seq);
        assert!(wq.ack(job.ticket).unwrap());
    }
    let top = handed.iter().max().unwrap() + 1;
    assert_eq!(
        top, 11,
        "seq 11 (key k11, superseded) becomes a hole at the low mark"
    );
    assert_eq!(q.len(), N, "no holes yet");

    let active = active_from(&q);
    let r = compact(&q, Duration::from_secs(3600));
    let kept = survivors(active, true);
    assert!(r.records_dropped > 0);
    assert!(!kept.contains(&11), "the low mark is a hole");
    let count_from = |from: u64| kept.iter().filter(|&&s| s >= from).count() as u64;
    for handle in [&q, &read_only(dir.path())] {
        assert_eq!(handle.len(), kept.len() as u64);
        assert_eq!(handle.len(), readable(handle));
        let s = handle.stats();
        assert_eq!(s.messages, kept.len() as u64);
        assert_eq!(s.next_seq - s.first_seq, N, "the sequences stay");
        let lag = handle.consumers().unwrap();
        assert_eq!(lag.len(), 1);
        assert_eq!(lag[0].lag_messages, count_from(pos), "consumer at {pos}");
        let infos = handle.work_queues().unwrap();
        assert_eq!(
            infos[0].pending,
            count_from(top),
            "group past {top}: {:?}",
            infos[0]
        );
        // The oldest unfinished job is the first message at or after the
        // low mark, holes stepped over.
        let low = infos[0].low;
        let first_left = *kept.iter().find(|&&s| s >= low).unwrap();
        let ts = handle.get(first_left).unwrap().timestamp;
        assert_eq!(infos[0].oldest_timestamp, Some(ts));
    }
    let info = wq.info(q.next_seq());
    assert_eq!(info.pending, count_from(top));
    let first_left = *kept.iter().find(|&&s| s >= info.low).unwrap();
    assert_eq!(
        info.oldest_timestamp,
        Some(q.get(first_left).unwrap().timestamp)
    );

    // The footers count the holes: every sealed file's `hole_seqs` is its
    // sequences less its messages.
    let files = q.data_files().unwrap();
    let mut total = 0;
    for (f, (path, bytes)) in files.iter().zip(sealed_files(&q)) {
        assert_eq!(
            &bytes[8..12],
            &litemq::FORMAT_VERSION.to_le_bytes(),
            "{}",
            path.display()
        );
        let footer = Footer::decode(&bytes[bytes.len() - FOOTER_LEN..]).unwrap();
        let here = kept
            .iter()
            .filter(|&&s| (f.first_seq..f.end_seq).contains(&s))
            .count() as u64;
        assert_eq!(
            footer.hole_seqs,
            f.end_seq - f.first_seq - here,
            "{}",
            path.display()
        );
        total += footer.hole_seqs;
    }
    assert_eq!(total, N - kept.len() as u64);
}

/// A file compacted by format 8 to 10 has zeros where format 11 counts its
/// holes: readers count them by walking it (once per handle), and the
/// counts are the same. Built here by writing the compacted files back as
/// version 10 did (header version 10, `hole_seqs` zero).
#[test]
fn a_file_compacted_before_format_11_is_counted_by_walking() {
    use litemq::format::footer::{Footer, FOOTER_LEN};
    use litemq::format::header::DataHeader;
    let dir = tempfile::tempdir().unwrap();
    let (q, _clock) = filled(dir.path());
    let mut c = q.consumer("audit", Start::Beginning).unwrap();
    for _ in 0..N / 2 {
        c.read_next().unwrap().unwrap();
    }
    c.commit().unwrap();
    let pos = c.committed_seq();
    drop(c);
    let active = active_from(&q);
    compact(&q, Duration::from_secs(3600));
    let files = sealed_files(&q);
    q.close().unwrap();
    drop(q);
    let mut zeroed = 0;
    for (path, mut bytes) in files {
        let h = DataHeader::decode(&bytes[..64]).unwrap();
        let at = bytes.len() - FOOTER_LEN;
        let f = Footer::decode(&bytes[at..]).unwrap();
        if f.hole_seqs > 0 {
            zeroed += 1;
        }
        bytes[..64].copy_from_slice(&DataHeader { version: 10, ..h }.encode());
        bytes[at..].copy_from_slice(&Footer { hole_seqs: 0, ..f }.encode());
        std::fs::write(&path, &bytes).unwrap();
    }
    assert!(zeroed > 1, "several files had holes");
    let kept = survivors(active, true);
    let ro = read_only(dir.path());
    assert_eq!(readable(&ro), kept.len() as u64);
    assert_eq!(ro.len(), kept.len() as u64);
    assert_eq!(ro.stats().messages, kept.len() as u64);
    assert_eq!(
        ro.consumers().unwrap()[0].lag_messages,
        kept.iter().filter(|&&s| s >= pos).count() as u64
    );
}

/// Recovery finishing the seal of a compacted file whose footer was damaged
/// (after an unclean shutdown) writes its hole count back into the new
/// footer (format 11), counted from the frames: `len` stays exact.
#[test]
fn recovery_rewriting_a_compacted_files_footer_counts_its_holes() {
    use litemq::format::footer::{Footer, FOOTER_LEN};
    let dir = tempfile::tempdir().unwrap();
    let (q, clock) = filled(dir.path());
    let active = active_from(&q);
    compact(&q, Duration::from_secs(3600));
    let kept = survivors(active, true);
    // The newest sealed file: recovery checks the newest files' seals.
    let (path, bytes) = sealed_files(&q).pop().unwrap();
    q.close().unwrap();
    drop(q);
    let at = bytes.len() - FOOTER_LEN;
    let want = Footer::decode(&bytes[at..]).unwrap();
    assert!(want.hole_seqs > 0, "the file has holes");
    let mut damaged = bytes.clone();
    damaged[at + 100] ^= 0xFF; // a reserved byte: the footer's CRC fails
    std::fs::write(&path, &damaged).unwrap();
    let meta = dir.path().join("metadata.json");
    let text = std::fs::read_to_string(&meta)
        .unwrap()
        .replace("\"clean_shutdown\": true", "\"clean_shutdown\": false");
    std::fs::write(&meta, text).unwrap();

    let q = small(dir.path()).clock(clock).open().unwrap();
    assert!(q.stats().recovery.finished_seals >= 1);
    let after = std::fs::read(&path).unwrap();
    assert_eq!(Footer::decode(&after[at..]).unwrap(), want);
    assert_eq!(q.len(), kept.len() as u64);
    assert_eq!(readable(&q), kept.len() as u64);
}

/// A handle that counted the holes of files whose directory had not changed
/// for a while trusts those counts while the directory stays the same (one
/// `stat` per day directory); compaction by another handle renames files in
/// it, which changes the directory: the next count sees the new holes.
#[test]
fn a_count_kept_by_another_handle_follows_a_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let (q, _clock) = filled(dir.path());
    let active = active_from(&q);
    let ro = read_only(dir.path());
    assert_eq!(ro.len(), N);
    // Older than the settling time: the next count trusts the directory.
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(ro.len(), N);
    assert_eq!(ro.len(), N);
    compact(&q, Duration::from_secs(3600));
    let kept = survivors(active, true).len() as u64;
    assert_eq!(ro.len(), kept);
    assert_eq!(ro.stats().messages, kept);
    assert_eq!(q.len(), kept);
}
