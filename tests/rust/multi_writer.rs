//! Several writer processes appending to one queue (`QueueBuilder::multi_writer`).

mod common;

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{data_files, env_u64, mix, Rng};
use litemq::format::footer::Footer;
use litemq::{Error, FlushMode, Queue, QueueBuilder, Record, RetentionPolicy, RollStrategy, Start};

const ROLE_ENV: &str = "LITEMQ_TEST_MULTI_ROLE";
const PATH_ENV: &str = "LITEMQ_TEST_MULTI_PATH";

fn builder(path: &Path) -> QueueBuilder {
    QueueBuilder::new(path)
        .file_size(256 * 1024)
        .index_interval(16)
        .multi_writer(true)
}

/// Payload of writer `w`'s message `i`: says who wrote it, plus bytes that
/// depend on both, so a mixed-up or torn message is caught.
fn body(w: u64, i: u64) -> Vec<u8> {
    let mut out = format!("{w}:{i}:").into_bytes();
    let h = mix(w << 32 | i);
    out.extend((0..(h % 120) as usize).map(|j| (h >> (j % 56)) as u8));
    out
}

fn key(w: u64, i: u64) -> String {
    format!("k{w}-{i}")
}

fn keyed<'a>(payload: &'a [u8], key: &'a str) -> Record<'a> {
    Record {
        key: Some(key.as_bytes()),
        key_is_text: true,
        ..Record::new(payload)
    }
}

/// Writer and index of a payload, after checking its bytes.
fn parse(p: &[u8]) -> (u64, u64) {
    let text = String::from_utf8_lossy(&p[..p.len().min(24)]);
    let mut parts = text.split(':');
    let w: u64 = parts.next().unwrap().parse().unwrap();
    let i: u64 = parts.next().unwrap().parse().unwrap();
    assert_eq!(
        p,
        body(w, i).as_slice(),
        "payload of writer {w} message {i}"
    );
    (w, i)
}

/// Appends `n` messages as writer `w`: single appends, keyed appends and
/// batches mixed; returns the sequences each got.
fn write_as(q: &Queue, w: u64, n: u64, seed: u64) -> Vec<u64> {
    let app = q.appender().unwrap();
    let mut rng = Rng(seed);
    let mut seqs = Vec::with_capacity(n as usize);
    let mut i = 0;
    while i < n {
        match rng.below(10) {
            0..=1 => {
                seqs.push(app.append(&body(w, i)).unwrap());
                i += 1;
            }
            2 => {
                let k = key(w, i);
                let b = body(w, i);
                seqs.push(app.append_record(&keyed(&b, &k)).unwrap());
                i += 1;
            }
            _ => {
                let m = (1 + rng.below(200)).min(n - i);
                let bodies: Vec<Vec<u8>> = (i..i + m).map(|j| body(w, j)).collect();
                let range = app
                    .append_batch(bodies.iter().map(|b| b.as_slice()))
                    .unwrap();
                assert_eq!(range.end - range.start, m);
                seqs.extend(range);
                i += m;
            }
        }
    }
    seqs
}

/// Reads every message and checks: sequences dense from 0, each writer's
/// messages in order without gaps or repeats. Returns messages per writer.
fn check_all(q: &Queue) -> HashMap<u64, u64> {
    let mut t = q.tailer(Start::Beginning).unwrap();
    let mut next: HashMap<u64, u64> = HashMap::new();
    let mut seq = 0;
    while let Some(m) = t.read_next().unwrap() {
        assert_eq!(m.seq, seq, "sequences are dense");
        let (w, i) = parse(m.payload);
        let want = next.entry(w).or_insert(0);
        assert_eq!(i, *want, "writer {w}'s messages in order, once each");
        *want += 1;
        seq += 1;
    }
    next
}

#[test]
fn two_writers_in_one_process_share_one_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let a = builder(dir.path()).open().unwrap();
    let b = builder(dir.path()).open().unwrap();
    let n = 20_000;
    let (sa, sb) = std::thread::scope(|s| {
        let ha = s.spawn(|| write_as(&a, 0, n, 1));
        let hb = s.spawn(|| write_as(&b, 1, n, 2));
        (ha.join().unwrap(), hb.join().unwrap())
    });
    // Appends return before they are written, as with one writer process
    // (the I/O thread holds the append lock across bundles): b's may still
    // be on their way when a reads.
    b.appender().unwrap().flush().unwrap();
    // Returned sequences: increasing per writer, unique across both.
    assert!(sa.windows(2).all(|p| p[0] < p[1]));
    assert!(sb.windows(2).all(|p| p[0] < p[1]));
    let mut all: Vec<u64> = sa.iter().chain(&sb).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..2 * n).collect::<Vec<_>>());
    // Each returned sequence holds that writer's message.
    for (w, seqs) in [(0, &sa), (1, &sb)] {
        for (i, &seq) in seqs.iter().enumerate().step_by(97) {
            assert_eq!(a.get(seq).unwrap().payload, body(w, i as u64));
        }
    }
    assert_eq!(check_all(&a), HashMap::from([(0, n), (1, n)]));
    assert_eq!(b.next_seq(), 2 * n);
    // Keys written by either are found through either.
    for (w, q) in [(0, &b), (1, &a)] {
        let seqs = if w == 0 { &sa } else { &sb };
        let found = (0..n)
            .step_by(7)
            .filter_map(|i| {
                q.find(key(w, i).as_bytes(), None, None, None)
                    .unwrap()
                    .pop()
            })
            .collect::<Vec<_>>();
        assert!(!found.is_empty());
        for m in found {
            let (fw, fi) = parse(&m.payload);
            assert_eq!((fw, m.seq), (w, seqs[fi as usize]));
        }
    }
    a.close().unwrap();
    b.close().unwrap();
    // The last to close recorded a clean shutdown: a single writer opens it
    // and continues the sequence.
    let q = QueueBuilder::new(dir.path())
        .file_size(256 * 1024)
        .verify_on_startup(true)
        .open()
        .unwrap();
    assert_eq!(q.stats().recovery.cut_at, None);
    assert_eq!(q.appender().unwrap().append(b"after").unwrap(), 2 * n);
}

#[test]
fn two_writers_in_sync_and_batch_modes() {
    for flush in [
        FlushMode::Sync,
        FlushMode::Batch {
            bytes: 64 * 1024,
            interval: Duration::from_millis(2),
        },
    ] {
        let dir = tempfile::tempdir().unwrap();
        let open = || builder(dir.path()).flush_mode(flush).open().unwrap();
        let (a, b) = (open(), open());
        let n = 1500;
        let (sa, sb) = std::thread::scope(|s| {
            let ha = s.spawn(|| write_as(&a, 0, n, 3));
            let hb = s.spawn(|| write_as(&b, 1, n, 4));
            (ha.join().unwrap(), hb.join().unwrap())
        });
        if flush == FlushMode::Sync {
            // A Sync append returns once durable: so did a's last one.
            assert!(a.stats().durable_seq > *sa.last().unwrap());
        }
        b.appender().unwrap().flush().unwrap();
        assert!(b.stats().durable_seq > *sb.last().unwrap(), "{flush:?}");
        assert_eq!(check_all(&a), HashMap::from([(0, n), (1, n)]), "{flush:?}");
        drop((a, b));
        let q = QueueBuilder::new(dir.path())
            .verify_on_startup(true)
            .open()
            .unwrap();
        assert_eq!(q.next_seq(), 2 * n);
    }
}

#[test]
fn retention_deletes_files_under_writers_that_lag_behind() {
    // Two writers roll every 200 messages and keep 3 files: each one's
    // retention pass deletes files the other may still have mapped as its
    // old active file, which it must leave without touching.
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        builder(dir.path())
            .roll(RollStrategy::Count(200))
            .retention(RetentionPolicy {
                max_age: None,
                max_bytes: None,
                max_files: Some(3),
                protect_unconsumed: false,
            })
            .open()
            .unwrap()
    };
    let (a, b) = (open(), open());
    let n = 5000;
    let (sa, sb) = std::thread::scope(|s| {
        let ha = s.spawn(|| write_as(&a, 0, n, 5));
        // b writes in bursts with pauses, so a rolls past its file.
        let hb = s.spawn(|| {
            let mut seqs = Vec::new();
            let app = b.appender().unwrap();
            for i in 0..n {
                seqs.push(app.append(&body(1, i)).unwrap());
                if i % 500 == 499 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            seqs
        });
        (ha.join().unwrap(), hb.join().unwrap())
    });
    // Both handles' appends written before one of them reads (appends
    // return before they are written, as with one writer process).
    a.appender().unwrap().flush().unwrap();
    b.appender().unwrap().flush().unwrap();
    let mut all: Vec<u64> = sa.iter().chain(&sb).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..2 * n).collect::<Vec<_>>());
    assert!(
        data_files(dir.path()).len() <= 4,
        "retention kept the queue short"
    );
    // What is kept is dense up to the end and holds the right messages.
    let first = a.first_seq();
    assert!(first > 0);
    let mut t = a.tailer(Start::Beginning).unwrap();
    let mut seq = first;
    while let Some(m) = t.read_next().unwrap() {
        assert_eq!(m.seq, seq);
        let (w, i) = parse(m.payload);
        let want = if w == 0 {
            sa[i as usize]
        } else {
            sb[i as usize]
        };
        assert_eq!(want, seq);
        seq += 1;
    }
    assert_eq!(seq, 2 * n);
}

#[test]
fn single_and_multi_writers_exclude_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let single = QueueBuilder::new(dir.path()).open().unwrap();
    assert!(matches!(
        builder(dir.path()).open(),
        Err(Error::Locked { .. })
    ));
    single.close().unwrap();
    let multi = builder(dir.path()).open().unwrap();
    assert!(matches!(
        QueueBuilder::new(dir.path()).multi_writer(false).open(),
        Err(Error::Locked { .. })
    ));
    let again = builder(dir.path()).open().unwrap();
    again.appender().unwrap().append(b"x").unwrap();
    drop(again);
    // The queue remembers it was last opened for several writers: a plain
    // open joins them.
    let plain = QueueBuilder::new(dir.path()).open().unwrap();
    assert!(plain.is_multi_writer());
    drop(plain);
    drop(multi);
    let single = QueueBuilder::new(dir.path())
        .multi_writer(false)
        .open()
        .unwrap();
    assert!(!single.is_multi_writer());
}

/// Entry point of the child processes the tests below start.
#[test]
#[ignore = "child-process entry point, run by the multi-process tests"]
fn child_entry() {
    let path = std::env::var(PATH_ENV).expect("started by a parent test");
    let role = std::env::var(ROLE_ENV).unwrap();
    let mut parts = role.split(':');
    match (parts.next().unwrap(), parts.next()) {
        ("writer", Some(w)) => {
            let w: u64 = w.parse().unwrap();
            let n = env_u64("LITEMQ_TEST_MULTI_N").unwrap();
            let q = builder(Path::new(&path)).open().unwrap();
            let seqs = write_as(&q, w, n, 100 + w);
            assert!(seqs.windows(2).all(|p| p[0] < p[1]));
            q.close().unwrap();
            println!("WRITER-DONE");
        }
        ("tailer", Some(total)) => {
            let total: u64 = total.parse().unwrap();
            let q = QueueBuilder::new(&path).read_only(true).open().unwrap();
            let mut t = q.tailer(Start::Beginning).unwrap();
            let mut next: HashMap<u64, u64> = HashMap::new();
            for seq in 0..total {
                let m = t
                    .read_next_timeout(Duration::from_secs(60))
                    .unwrap()
                    .unwrap_or_else(|| panic!("message {seq} arrives"));
                assert_eq!(m.seq, seq);
                let (w, i) = parse(m.payload);
                let want = next.entry(w).or_insert(0);
                assert_eq!(i, *want, "writer {w} in order");
                *want += 1;
            }
            println!("TAILER-DONE");
        }
        ("flood", Some(w)) => {
            // Appends big batches until killed: holds the lock much of the time.
            let w: u64 = w.parse().unwrap();
            let q = builder(Path::new(&path)).open().unwrap();
            let app = q.appender().unwrap();
            println!("FLOOD-READY");
            let mut i = 0;
            loop {
                let bodies: Vec<Vec<u8>> = (i..i + 300).map(|j| body(w, j)).collect();
                app.append_batch(bodies.iter().map(|b| b.as_slice()))
                    .unwrap();
                i += 300;
            }
        }
        ("acker", Some(w)) => {
            // Appends per call until killed, flushing every 64 messages and
            // saying how many are acknowledged (durable) after each flush.
            let w: u64 = w.parse().unwrap();
            let q = builder(Path::new(&path)).open().unwrap();
            let app = q.appender().unwrap();
            let mut out = std::io::stdout().lock();
            let mut i = 0;
            loop {
                app.append(&body(w, i)).unwrap();
                i += 1;
                if i % 64 == 0 {
                    app.flush().unwrap();
                    use std::io::Write;
                    writeln!(out, "ACK {i}").unwrap();
                    out.flush().unwrap();
                }
            }
        }
        other => panic!("unknown role {other:?}"),
    }
}

fn spawn(path: &Path, role: &str, n: u64) -> Child {
    common::spawn_child(
        common::child_test("child_entry")
            .env(PATH_ENV, path)
            .env(ROLE_ENV, role)
            .env("LITEMQ_TEST_MULTI_N", n.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
}

fn expect_ok(child: Child, marker: &str) {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(marker),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn four_writer_processes_and_two_tailers() {
    let dir = tempfile::tempdir().unwrap();
    let n = env_u64("MULTI_N").unwrap_or(100_000);
    let writers = 4;
    // Create the queue so tailers can open it read-only at once.
    drop(builder(dir.path()).open().unwrap());
    let tailers: Vec<Child> = (0..2)
        .map(|_| spawn(dir.path(), &format!("tailer:{}", writers * n), 0))
        .collect();
    let children: Vec<Child> = (0..writers)
        .map(|w| spawn(dir.path(), &format!("writer:{w}"), n))
        .collect();
    for c in children {
        expect_ok(c, "WRITER-DONE");
    }
    for t in tailers {
        expect_ok(t, "TAILER-DONE");
    }
    let q = QueueBuilder::new(dir.path())
        .verify_on_startup(true)
        .open()
        .unwrap();
    let per_writer = check_all(&q);
    assert_eq!(per_writer, (0..writers).map(|w| (w, n)).collect());
    assert!(
        data_files(dir.path()).len() > 20,
        "files rolled under contention"
    );
    // Keys from every writer are found, each exactly once.
    let mut keyed = Vec::new();
    let mut t = q.tailer(Start::Beginning).unwrap();
    while let Some(m) = t.read_next().unwrap() {
        if let Some(k) = m.key {
            keyed.push((k.to_vec(), m.seq));
        }
    }
    assert!(keyed.len() > 100, "keyed messages: {}", keyed.len());
    for (k, seq) in keyed.iter().step_by(keyed.len() / 500 + 1) {
        let found = q.find(k, None, None, None).unwrap();
        assert_eq!(found.iter().map(|m| m.seq).collect::<Vec<_>>(), [*seq]);
    }
}

/// Where the queue's tail is, per `append.lock` (see docs/FORMAT.md).
fn recorded_tail(base: &Path) -> (u64, u64) {
    let f = std::fs::File::open(base.join("append.lock")).unwrap();
    let mut w = [0u8; 16];
    f.read_exact_at(&mut w, 32).unwrap();
    (
        u64::from_le_bytes(w[..8].try_into().unwrap()),
        u64::from_le_bytes(w[8..].try_into().unwrap()),
    )
}

/// Waits until no writer holds the append lock (word 2 of `append.lock`).
fn wait_until_free(base: &Path) {
    let f = std::fs::File::open(base.join("append.lock")).unwrap();
    let start = Instant::now();
    loop {
        let mut w = [0u8; 8];
        f.read_exact_at(&mut w, 16).unwrap();
        if u64::from_le_bytes(w) == 0 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "lock let go when idle"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The lock word of a process that has exited: `start_time << 22 | pid`.
fn dead_holder() -> u64 {
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 1..];
    let start: u64 = rest.split_whitespace().nth(19).unwrap().parse().unwrap();
    child.wait().unwrap();
    start << 22 | u64::from(pid)
}

#[test]
fn lock_left_by_a_dead_writer_is_taken_over_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let q = builder(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    let k = 500;
    for i in 0..k {
        app.append_record(&keyed(&body(0, i), &key(0, i))).unwrap();
    }
    // This process's I/O thread keeps the lock while it has work and lets
    // it go (recording the tail) once idle: the dead writer below took it
    // after that.
    app.flush().unwrap();
    wait_until_free(dir.path());
    // What a writer killed in the middle of a frame leaves: its pid in the
    // lock word, and record bytes past the tail without a length word.
    let (file_number, pos) = recorded_tail(dir.path());
    let data = data_files(dir.path());
    let last = data.last().unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(last).unwrap();
    f.write_all_at(&[0xA5; 3000], pos + 4).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("append.lock"))
        .unwrap()
        .write_all_at(&dead_holder().to_le_bytes(), 16)
        .unwrap();
    assert!(file_number > 0);

    let t0 = Instant::now();
    let seq = app.append(&body(0, k)).unwrap();
    let took = t0.elapsed();
    assert_eq!(seq, k);
    // Documented bound (GUARANTEES.md): the first liveness check after 10 ms,
    // plus the repair (here: replaying a default-size key-index file); with
    // room for a loaded machine and a debug build.
    println!("took over after {took:?}");
    assert!(took < Duration::from_secs(2), "took over after {took:?}");
    assert_eq!(q.stats().takeovers, 1);
    for i in k + 1..2 * k {
        app.append(&body(0, i)).unwrap();
    }
    assert_eq!(check_all(&q), HashMap::from([(0, 2 * k)]));
    q.close().unwrap();
    let q = QueueBuilder::new(dir.path())
        .verify_on_startup(true)
        .open()
        .unwrap();
    assert_eq!(check_all(&q), HashMap::from([(0, 2 * k)]));
    assert_eq!(
        q.find(key(0, 7).as_bytes(), None, None, None)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn writers_continue_after_another_writer_process_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let q = builder(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    let mut rng = Rng(env_u64("CRASH_SEED").unwrap_or(5));
    let rounds = if common::soak() { 50 } else { 6 };
    let mut mine = 0u64;
    let mut worst = Duration::ZERO;
    for round in 0..rounds {
        let mut child = spawn(dir.path(), &format!("flood:{}", round + 1), 0);
        // Wait until it writes, then kill it at a random moment.
        let start = Instant::now();
        let before = q.next_seq();
        while q.next_seq() == before && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(rng.below(60)));
        child.kill().unwrap();
        child.wait().unwrap();
        let t0 = Instant::now();
        for _ in 0..50 {
            app.append(&body(0, mine)).unwrap();
            mine += 1;
        }
        worst = worst.max(t0.elapsed());
    }
    assert!(worst < Duration::from_secs(2), "slowest recovery {worst:?}");
    let per_writer = check_all(&q);
    assert_eq!(per_writer[&0], mine);
    assert!(per_writer.len() > 1, "the killed writers wrote something");
    println!("takeovers: {} in {rounds} kills", q.stats().takeovers);
    q.close().unwrap();
    let q = QueueBuilder::new(dir.path())
        .verify_on_startup(true)
        .open()
        .unwrap();
    assert_eq!(check_all(&q)[&0], mine);
}

/// A sealed file's footer gives the time of its own first and last message,
/// whichever writer wrote them (the writer that seals a file often wrote
/// neither): archive manifests and time pushdown trust these ranges.
#[test]
fn footers_of_files_sealed_among_writers_hold_their_messages_times() {
    let dir = tempfile::tempdir().unwrap();
    let a = builder(dir.path()).open().unwrap();
    let b = builder(dir.path()).open().unwrap();
    // Strictly alternating frames: the writer that seals a file did not
    // write its last frame.
    let (app_a, app_b) = (a.appender().unwrap(), b.appender().unwrap());
    let body = vec![7u8; 2000];
    for _ in 0..600 {
        app_a.append(&body).unwrap();
        a.wait_visible().unwrap();
        app_b.append(&body).unwrap();
        b.wait_visible().unwrap();
    }
    let files = a.data_files().unwrap();
    assert!(files.len() >= 3, "{} files", files.len());
    for f in &files[..files.len() - 1] {
        let bytes = std::fs::read(&f.path).unwrap();
        let footer = Footer::read(&bytes, f.file_number, f.first_seq, f.size).unwrap();
        let first = a.get(f.first_seq).unwrap().timestamp;
        let last = a.get(f.end_seq - 1).unwrap().timestamp;
        assert_eq!(
            (footer.first_ts, footer.last_ts),
            (first, last),
            "{}",
            f.path.display()
        );
    }
}

/// Kill -9 of any writer at any moment while the others append per call:
/// the survivors continue, every acknowledged (flushed) message is there
/// exactly once, sequences stay dense and each writer's messages in order,
/// and a reader following the queue meanwhile never waits for a message
/// that does not come. Writers take the append lock for bursts of appends
/// (a lease), so most kills hit a holder: in the middle of a frame, between
/// frames of a bundle, or idle.
#[test]
fn writers_killed_at_random_moments_leave_every_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let q = builder(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    let mut rng = Rng(env_u64("CRASH_SEED").unwrap_or(11));
    let rounds = if common::soak() { 40 } else { 5 };
    // A reader in this process follows everything as it is written.
    let reader = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut acked: HashMap<u64, u64> = HashMap::new();
    let mut mine = 0u64;
    let read = std::thread::scope(|s| {
        let follower = s.spawn(|| {
            let mut t = reader.tailer(Start::Beginning).unwrap();
            let mut seq = 0u64;
            loop {
                match t.read_next_timeout(Duration::from_millis(200)).unwrap() {
                    Some(m) => {
                        assert_eq!(m.seq, seq, "the reader sees dense sequences");
                        parse(m.payload);
                        seq += 1;
                    }
                    None if stop.load(std::sync::atomic::Ordering::SeqCst) => return seq,
                    None => {}
                }
            }
        });
        let mut next_w = 1;
        for _ in 0..rounds {
            let kids: Vec<(u64, Child)> = (0..2)
                .map(|_| {
                    next_w += 1;
                    (next_w, spawn(dir.path(), &format!("acker:{next_w}"), 0))
                })
                .collect();
            // Both write (first ack) before the kills, at random moments.
            std::thread::sleep(Duration::from_millis(20 + rng.below(40)));
            for (w, mut child) in kids {
                std::thread::sleep(Duration::from_millis(rng.below(30)));
                child.kill().unwrap();
                let out = child.wait_with_output().unwrap();
                let last = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter_map(|l| l.strip_prefix("ACK ")?.parse::<u64>().ok())
                    .max()
                    .unwrap_or(0);
                acked.insert(w, last);
                // The survivor continues within the bound.
                let t0 = Instant::now();
                for _ in 0..20 {
                    app.append(&body(0, mine)).unwrap();
                    mine += 1;
                }
                app.flush().unwrap();
                assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
            }
        }
        let end = q.next_seq();
        // The follower reaches the end without waiting for anything more.
        let t0 = Instant::now();
        while reader.next_seq() < end && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        (follower.join().unwrap(), end)
    });
    assert_eq!(read.0, read.1, "the follower read every message");
    let per_writer = check_all(&q);
    assert_eq!(per_writer[&0], mine);
    for (w, n) in &acked {
        let kept = per_writer.get(w).copied().unwrap_or(0);
        assert!(kept >= *n, "writer {w}: {n} acknowledged, {kept} kept");
    }
    assert!(
        acked.values().any(|&n| n > 0),
        "the killed writers acknowledged something"
    );
    println!("takeovers: {}, acknowledged {acked:?}", q.stats().takeovers);
    q.close().unwrap();
    let q = QueueBuilder::new(dir.path())
        .verify_on_startup(true)
        .open()
        .unwrap();
    assert_eq!(check_all(&q)[&0], mine);
}
