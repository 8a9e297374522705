//! Process crashes: a writer killed with SIGKILL at random moments, and live
//! tailers in other processes following a writer across many rolls.
//!
//! Both tests re-execute this test binary as the child process (the
//! `#[ignore]`d `*_child` entry points, run with `--ignored`), as
//! `tests/rust/processes.rs` does.
//!
//! * `kill9_at_random_moments`: a child writer appends self-describing
//!   messages in one flush mode and reports over its stdout pipe what it has
//!   been told is durable (`D n`: a sync append or a flush returned, so every
//!   sequence below `n` is durable) and what it has seen published (`V n`).
//!   The parent SIGKILLs it at a random moment (during open and recovery, in
//!   the middle of appends, near rolls), reopens the queue and checks that
//!   everything reported is there and intact, that sequences are dense, that
//!   no reader returns a partial message, and that the next append continues
//!   the sequence. Each queue is killed again and again, so recovery runs on
//!   what the previous recovery left.
//! * `live_tailers_across_rolls`: a writer (this process) and four tailer
//!   processes started at random moments; files roll every few thousand
//!   messages; every tailer checks every message once, in order, against a
//!   hash chain.
//!
//! Environment: `SOAK=1` runs thousands of kills and more messages;
//! `CRASH_SEED=n` replays a run (the seed is printed); `CRASH_KILLS=n` and
//! `LIVE_MESSAGES=n` set the sizes directly.

mod common;

use common::{child_test, env_u64, mix, soak, spawn_child, Rng};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use litemq::{FlushMode, Queue, QueueBuilder, Record, RollStrategy, Start};

// ---------------------------------------------------------------------------
// Small deterministic tools (no rand crate in dev-dependencies).

fn run_seed() -> u64 {
    env_u64("CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    })
}

/// 1 MiB of fixed pseudo-random bytes that payloads are cut from.
fn noise() -> &'static [u8] {
    static NOISE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    NOISE.get_or_init(|| {
        let mut r = Rng(0x5EED);
        (0..(1 << 17))
            .flat_map(|_| r.next().to_le_bytes())
            .collect()
    })
}

// ---------------------------------------------------------------------------
// Scenario: what one crash-tested queue is written with.

#[derive(Debug, Clone, Copy)]
struct Scenario {
    /// 0 Async, 1 Sync, 2 Batch.
    mode: u8,
    file_size: u64,
    /// Roll by count as well (0: only when a file is full).
    roll_count: u64,
    /// 0: 0..64 bytes, 1: 0..1500, 2: up to most of a file, 3: mixed.
    size_class: u8,
    /// Appends per `append_batch` (1: single appends).
    batch: u64,
    /// Flush after this many appends (non-sync modes).
    flush_every: u64,
    index_interval: u32,
    /// Every `keyed`-th message carries a key and a header (0: none).
    keyed: u64,
    salt: u64,
}

impl Scenario {
    fn random(rng: &mut Rng) -> Scenario {
        let sizes = [64 * 1024, 64 * 1024, 128 * 1024, 256 * 1024, 1 << 20];
        // 1 MiB files make a debug-build reopen slow (CRC of the tail): soak only.
        let file_size = sizes[rng.below(if soak() { 5 } else { 4 }) as usize];
        Scenario {
            mode: rng.below(3) as u8,
            file_size,
            roll_count: if rng.chance(30) { 1 + rng.below(40) } else { 0 },
            size_class: rng.below(4) as u8,
            batch: if rng.chance(40) { 1 + rng.below(64) } else { 1 },
            flush_every: 1 + rng.below(300),
            index_interval: [1, 4, 16, 1024][rng.below(4) as usize],
            keyed: if rng.chance(50) { 1 + rng.below(5) } else { 0 },
            salt: rng.next(),
        }
    }

    fn encode(&self) -> String {
        format!(
            "{} {} {} {} {} {} {} {} {}",
            self.mode,
            self.file_size,
            self.roll_count,
            self.size_class,
            self.batch,
            self.flush_every,
            self.index_interval,
            self.keyed,
            self.salt
        )
    }

    fn decode(s: &str) -> Scenario {
        let v: Vec<u64> = s.split(' ').map(|x| x.parse().unwrap()).collect();
        Scenario {
            mode: v[0] as u8,
            file_size: v[1],
            roll_count: v[2],
            size_class: v[3] as u8,
            batch: v[4],
            flush_every: v[5],
            index_interval: v[6] as u32,
            keyed: v[7],
            salt: v[8],
        }
    }

    fn flush_mode(&self) -> FlushMode {
        match self.mode {
            0 => FlushMode::Async,
            1 => FlushMode::Sync,
            _ => FlushMode::Batch {
                bytes: 16 * 1024,
                interval: Duration::from_millis(2),
            },
        }
    }

    fn builder(&self, path: &Path) -> QueueBuilder {
        let mut b = QueueBuilder::new(path)
            .file_size(self.file_size)
            .index_interval(self.index_interval)
            .flush_mode(self.flush_mode());
        if self.roll_count > 0 {
            b = b.roll(RollStrategy::Count(self.roll_count));
        }
        b
    }

    /// The largest body a message may have in this scenario.
    fn max_len(&self) -> usize {
        litemq::format::data_file::max_record_len(self.file_size) - 9 - 64
    }

    /// Length of message `seq`: a function of the scenario, so the parent
    /// knows every payload without being told.
    fn len_of(&self, seq: u64) -> usize {
        let h = mix(seq ^ self.salt);
        let class = if self.size_class == 3 {
            (h >> 60) % 3
        } else {
            self.size_class as u64
        };
        let len = match class {
            0 => h % 65,
            1 => h % 1501,
            _ => {
                // Large: a quarter to all of what a file can take, so
                // messages fill files and force rolls every few appends.
                let max = self.max_len() as u64;
                max / 4 + h % (max - max / 4 + 1)
            }
        };
        // Empty payloads are valid messages; keep a few.
        if h.is_multiple_of(53) {
            0
        } else {
            len as usize
        }
    }

    /// Message `seq`'s payload: its sequence, then a window of a fixed
    /// random buffer chosen by the sequence (cheap to make and to compare
    /// even in a debug build).
    fn payload(&self, seq: u64) -> Vec<u8> {
        let len = self.len_of(seq);
        let noise = noise();
        let start = (mix(seq ^ self.salt) % (noise.len() - len) as u64) as usize;
        let mut out = noise[start..start + len].to_vec();
        let stamp = (seq ^ self.salt).to_le_bytes();
        let n = out.len().min(8);
        out[..n].copy_from_slice(&stamp[..n]);
        out
    }

    fn key(&self, seq: u64) -> Option<Vec<u8>> {
        (self.keyed > 0 && seq.is_multiple_of(self.keyed))
            .then(|| format!("k{}", seq % 97).into_bytes())
    }
}

// ---------------------------------------------------------------------------
// The child writer.

const CRASH_DIR: &str = "LITEMQ_CRASH_DIR";
const CRASH_SCENARIO: &str = "LITEMQ_CRASH_SCENARIO";

fn report(tag: &str, n: u64) {
    // Straight to fd 1 (not `println!`, which libtest may capture): the line
    // must be in the pipe before the next append starts.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "\n@@{tag} {n}");
    let _ = out.flush();
}

/// Opens a queue, retrying `Locked` for up to 2 s. The parent has two
/// workers: one's fork may briefly hold a duplicate of the other's lock
/// descriptor (flock semantics) until it execs, so a `Locked` right after
/// the parent closed its queue is not a bug.
fn open_retrying(builder: litemq::QueueBuilder) -> litemq::Result<Queue> {
    let mut tries = 0;
    loop {
        match builder.clone().open() {
            Err(litemq::Error::Locked { .. }) if tries < 200 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

#[test]
#[ignore = "child-process entry point, run by kill9_at_random_moments"]
fn kill9_writer_child() {
    let dir = std::env::var(CRASH_DIR).expect("started by the parent test");
    let sc = Scenario::decode(&std::env::var(CRASH_SCENARIO).unwrap());
    let q = open_retrying(sc.builder(Path::new(&dir)))
        .unwrap_or_else(|e| panic!("child opens the queue: {e}"));
    let app = q.appender().unwrap();
    let mut seq = q.next_seq();
    noise(); // made before "ready", so the kill lands in appends
    report("R", seq);
    let sync = sc.mode == 1;
    let mut since_flush = 0;
    let mut rng = Rng(sc.salt ^ seq);
    loop {
        let n = if sc.batch > 1 {
            1 + rng.below(sc.batch)
        } else {
            1
        };
        let payloads: Vec<Vec<u8>> = (seq..seq + n).map(|s| sc.payload(s)).collect();
        let keys: Vec<Option<Vec<u8>>> = (seq..seq + n).map(|s| sc.key(s)).collect();
        let records: Vec<Record<'_>> = payloads
            .iter()
            .zip(&keys)
            .map(|(p, k)| Record {
                key: k.as_deref(),
                ..Record::new(p)
            })
            .collect();
        let range = if n == 1 {
            let s = if records[0].key.is_some() {
                app.append_record(&records[0]).unwrap()
            } else {
                app.append(records[0].payload).unwrap()
            };
            s..s + 1
        } else if keys.iter().any(Option::is_some) {
            app.append_records(&records).unwrap()
        } else {
            app.append_batch(payloads.iter().map(Vec::as_slice))
                .unwrap()
        };
        assert_eq!(range, seq..seq + n, "sequences are dense and continue");
        seq += n;
        if sync {
            report("D", seq);
        } else {
            since_flush += n;
            if since_flush >= sc.flush_every {
                since_flush = 0;
                app.flush().unwrap();
                report("D", seq);
            }
        }
        if rng.chance(5) {
            report("V", q.next_seq());
        }
    }
}

// ---------------------------------------------------------------------------
// The parent.

#[derive(Default)]
struct Figures {
    kills: u64,
    kills_before_ready: u64,
    cut_tails: u64,
    repaired_markers: u64,
    index_rebuilt: u64,
    messages_checked: u64,
    by_mode: [u64; 3],
    /// Start and run, kill and wait, reopen and check.
    timing: [Duration; 3],
}

struct Reports {
    ready: AtomicBool,
    durable: AtomicU64,
    visible: AtomicU64,
}

fn spawn_writer(dir: &Path, sc: &Scenario) -> (Child, Arc<Reports>, std::thread::JoinHandle<()>) {
    let mut child = spawn_child(
        child_test("kill9_writer_child")
            .env(CRASH_DIR, dir)
            .env(CRASH_SCENARIO, sc.encode())
            .env_remove("RUST_BACKTRACE")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let reports = Arc::new(Reports {
        ready: AtomicBool::new(false),
        durable: AtomicU64::new(0),
        visible: AtomicU64::new(0),
    });
    let out = child.stdout.take().unwrap();
    let r = reports.clone();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            let Some(at) = line.find("@@") else { continue };
            let mut it = line[at + 2..].splitn(2, ' ');
            let (Some(tag), Some(n)) = (it.next(), it.next()) else {
                continue;
            };
            let Ok(n) = n.trim().parse::<u64>() else {
                continue;
            };
            match tag {
                "R" => r.ready.store(true, Ordering::Release),
                "D" => {
                    r.durable.fetch_max(n, Ordering::AcqRel);
                }
                "V" => {
                    r.visible.fetch_max(n, Ordering::AcqRel);
                }
                _ => {}
            }
        }
    });
    (child, reports, reader)
}

/// Reads the whole queue and checks every message against the scenario.
/// Returns the number of messages.
/// Reads the queue from `from` and checks every message against the
/// scenario. Returns the number of messages read.
fn check_contents(q: &litemq::Queue, sc: &Scenario, from: u64, ctx: &str) -> u64 {
    let next = q.next_seq();
    let mut t = q
        .tailer(Start::Seq(from))
        .unwrap_or_else(|e| panic!("{ctx}: tailer at {from}: {e}"));
    let mut expect = from;
    loop {
        match t.read_next() {
            Ok(Some(m)) => {
                assert_eq!(m.seq, expect, "{ctx}: sequences must be dense");
                assert!(
                    m.payload == sc.payload(m.seq).as_slice(),
                    "{ctx}: payload of seq {} is not what was appended ({} bytes read, {} expected)",
                    m.seq,
                    m.payload.len(),
                    sc.len_of(m.seq)
                );
                assert_eq!(
                    m.key,
                    sc.key(m.seq).as_deref(),
                    "{ctx}: key of seq {}",
                    m.seq
                );
                expect += 1;
            }
            Ok(None) => break,
            Err(e) => panic!("{ctx}: reading seq {expect} after recovery: {e}"),
        }
    }
    assert_eq!(expect, next, "{ctx}: a tailer must reach next_seq");
    expect - from
}

/// One of the parallel workers of `kill9_at_random_moments`: scenarios, each
/// killed `kills_per_queue` times, until `total_kills` kills are done in all.
fn kill_worker(
    seed: u64,
    worker: u64,
    total_kills: u64,
    done: &AtomicU64,
    started: Instant,
) -> Figures {
    let kills_per_queue = if soak() { 20 } else { 10 };
    let mut rng = Rng(seed ^ worker.wrapping_mul(0xA5A5_5A5A_1234_4321));
    let mut figures = Figures::default();
    while done.load(Ordering::Relaxed) < total_kills {
        let sc = Scenario::random(&mut rng);
        let dir = tempfile::tempdir().unwrap();
        let mut prev_next = 0u64;
        for round in 0..kills_per_queue {
            let ctx = format!(
                "seed {seed} worker {worker}, scenario {:?} ({}), round {round}",
                sc,
                sc.encode()
            );
            let (mut child, reports, reader) = spawn_writer(dir.path(), &sc);
            let spawned = Instant::now();
            let t0 = Instant::now();
            if rng.chance(20) {
                // During start-up: exec, open, recovery of the previous crash.
                std::thread::sleep(Duration::from_micros(rng.below(25_000)));
            } else {
                while !reports.ready.load(Ordering::Acquire) {
                    if spawned.elapsed() > Duration::from_secs(20) {
                        let _ = child.kill();
                        let out = child.wait_with_output().unwrap();
                        panic!(
                            "{ctx}: child never got ready: {}",
                            String::from_utf8_lossy(&out.stderr)
                        );
                    }
                    if let Some(status) = child.try_wait().unwrap() {
                        let mut err = String::new();
                        let _ =
                            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
                        panic!("{ctx}: child exited before ready ({status}): {err}");
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                let max = match sc.mode {
                    1 => 60_000,
                    _ => 40_000,
                };
                std::thread::sleep(Duration::from_micros(rng.below(max)));
            }
            figures.timing[0] += t0.elapsed();
            let t1 = Instant::now();
            if !reports.ready.load(Ordering::Acquire) {
                figures.kills_before_ready += 1;
            }
            // A child that already died by itself failed an assertion.
            if let Some(status) = child.try_wait().unwrap() {
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
                panic!("{ctx}: writer child exited by itself ({status}): {err}");
            }
            child.kill().unwrap(); // SIGKILL
            let status = child.wait().unwrap();
            assert!(!status.success());
            reader.join().unwrap();
            figures.kills += 1;
            done.fetch_add(1, Ordering::Relaxed);
            figures.by_mode[sc.mode as usize] += 1;
            figures.timing[1] += t1.elapsed();
            let t2 = Instant::now();
            let durable = reports.durable.load(Ordering::Acquire);
            let visible = reports.visible.load(Ordering::Acquire);

            let q = open_retrying(sc.builder(dir.path()))
                .unwrap_or_else(|e| panic!("{ctx}: reopening after SIGKILL failed: {e}"));
            let stats = q.stats();
            if stats.recovery.cut_bytes > 0 || stats.recovery.cut_at.is_some() {
                figures.cut_tails += 1;
            }
            if stats.recovery.repaired_end_marker {
                figures.repaired_markers += 1;
            }
            if stats.recovery.index_entries_rebuilt > 0 {
                figures.index_rebuilt += 1;
            }
            let next = q.next_seq();
            assert!(
                next >= durable,
                "{ctx}: lost durable messages: the writer was told {durable} were durable, \
                 the queue holds {next} (recovery: {:?})",
                stats.recovery
            );
            assert!(
                next >= visible,
                "{ctx}: lost published messages: {visible} were visible to readers before \
                 the kill, the queue holds {next} (recovery: {:?})",
                stats.recovery
            );
            // Everything the previous reopen had (and closed cleanly) must
            // survive this kill too.
            assert!(
                next >= prev_next,
                "{ctx}: {prev_next} messages were closed cleanly before this run, {next} remain"
            );
            // Recovery only touches the tail; the whole queue is read again
            // at the end of the scenario.
            figures.messages_checked +=
                check_contents(&q, &sc, prev_next.saturating_sub(300), &ctx);
            prev_next = next;
            // The next append continues the sequence (checked again by the
            // next child, which asserts on the ranges it gets).
            if round + 1 == kills_per_queue {
                let (payload, key) = (sc.payload(next), sc.key(next));
                let rec = Record {
                    key: key.as_deref(),
                    ..Record::new(&payload)
                };
                let seq = q.appender().unwrap().append_record(&rec).unwrap();
                assert_eq!(seq, next, "{ctx}: next append continues the sequence");
            }
            q.close().unwrap();
            figures.timing[2] += t2.elapsed();
        }
        // Finally every frame of every file must verify.
        let q = open_retrying(sc.builder(dir.path()).verify_on_startup(true)).unwrap_or_else(|e| {
            panic!(
                "seed {seed}, scenario {}: verify_on_startup after kills: {e}",
                sc.encode()
            )
        });
        figures.messages_checked += check_contents(&q, &sc, 0, "final verify");
        q.close().unwrap();
        if started.elapsed() > Duration::from_secs(if soak() { 7200 } else { 65 }) {
            println!("worker {worker}: time budget reached; stopping early");
            break;
        }
    }
    figures
}

#[test]
fn kill9_at_random_moments() {
    let seed = run_seed();
    let total_kills = env_u64("CRASH_KILLS").unwrap_or(if soak() { 3000 } else { 210 });
    println!("kill9_at_random_moments: CRASH_SEED={seed}, {total_kills} kills");
    let started = Instant::now();
    let done = AtomicU64::new(0);
    // Two workers: while one child writes, the other queue is being checked.
    let results: Vec<Figures> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2u64)
            .map(|w| {
                let done = &done;
                s.spawn(move || kill_worker(seed, w, total_kills, done, started))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut figures = Figures::default();
    for f in results {
        figures.kills += f.kills;
        figures.kills_before_ready += f.kills_before_ready;
        figures.cut_tails += f.cut_tails;
        figures.repaired_markers += f.repaired_markers;
        figures.index_rebuilt += f.index_rebuilt;
        figures.messages_checked += f.messages_checked;
        for i in 0..3 {
            figures.by_mode[i] += f.by_mode[i];
            figures.timing[i] += f.timing[i];
        }
    }
    let (by_mode, timing) = (figures.by_mode, figures.timing);
    println!(
        "kill9_at_random_moments: {} kills (async {}, sync {}, batch {}; {} during start-up) in {:.1} s; \
         {} recoveries cut a tail, {} repaired an end marker, {} rebuilt index entries; \
         {} messages checked",
        figures.kills,
        by_mode[0],
        by_mode[1],
        by_mode[2],
        figures.kills_before_ready,
        started.elapsed().as_secs_f64(),
        figures.cut_tails,
        figures.repaired_markers,
        figures.index_rebuilt,
        figures.messages_checked
    );
    println!(
        "timing (summed over workers): start+run {:?}, kill+wait {:?}, reopen+check {:?}",
        timing[0], timing[1], timing[2]
    );
    assert!(
        figures.kills >= total_kills.min(200) || figures.kills >= 100,
        "too few kills ran"
    );
}

/// The length of the newest data file of the queue at `dir` (0 when none).
fn last_file_len(dir: &Path) -> u64 {
    common::data_files(dir)
        .last()
        .and_then(|p| std::fs::metadata(p).ok())
        .map_or(0, |m| m.len())
}

/// Format version 11: a data file is only as long as the chunks its writer
/// reached, and grows as it is written. A writer killed (SIGKILL) just
/// after or while it grows the file leaves a last file shorter than its
/// `file_size`, without a footer: the reopen treats it as the active file
/// (it does not give it back its full length), keeps every durable
/// message, and writes on, growing it further.
#[test]
fn kill9_mid_growth_reopens_and_continues() {
    let seed = run_seed();
    let mut rng = Rng(seed ^ 0x6772_6f77);
    let dir = tempfile::tempdir().unwrap();
    let mut prev_next = 0u64;
    let mut grown_short = false;
    for round in 0..8u64 {
        let sc = Scenario {
            mode: (round % 2) as u8, // Async, Sync
            file_size: 4 << 20,      // 256 KiB chunks: growth every few hundred messages
            roll_count: 0,
            size_class: 1,
            batch: if round % 3 == 2 { 16 } else { 1 },
            flush_every: 50,
            index_interval: 16,
            keyed: 0,
            salt: seed,
        };
        let ctx = format!("seed {seed}, round {round}, scenario {}", sc.encode());
        let (mut child, reports, reader) = spawn_writer(dir.path(), &sc);
        let spawned = Instant::now();
        while !reports.ready.load(Ordering::Acquire) {
            assert!(
                spawned.elapsed() < Duration::from_secs(20),
                "{ctx}: child never got ready"
            );
            assert!(child.try_wait().unwrap().is_none(), "{ctx}: child exited");
            std::thread::sleep(Duration::from_micros(200));
        }
        // Wait for the file to grow (the writer is writing across chunk
        // boundaries), then kill it at a random moment shortly after.
        let before = last_file_len(dir.path());
        while last_file_len(dir.path()) == before {
            assert!(
                spawned.elapsed() < Duration::from_secs(30),
                "{ctx}: the data file never grew past {before} bytes"
            );
            assert!(child.try_wait().unwrap().is_none(), "{ctx}: child exited");
            std::thread::sleep(Duration::from_micros(100));
        }
        std::thread::sleep(Duration::from_micros(rng.below(3000)));
        child.kill().unwrap(); // SIGKILL
        assert!(!child.wait().unwrap().success());
        reader.join().unwrap();
        let durable = reports.durable.load(Ordering::Acquire);
        let visible = reports.visible.load(Ordering::Acquire);
        let len = last_file_len(dir.path());

        let q = open_retrying(sc.builder(dir.path()))
            .unwrap_or_else(|e| panic!("{ctx}: reopening after SIGKILL failed: {e}"));
        let stats = q.stats();
        assert!(
            !stats.recovery.restored_length,
            "{ctx}: {:?}",
            stats.recovery
        );
        let after = last_file_len(dir.path());
        assert!(
            after <= len,
            "{ctx}: recovery must not give the active file its full length back \
             ({len} bytes before, {after} after, file_size {})",
            sc.file_size
        );
        grown_short |= after < sc.file_size;
        let next = q.next_seq();
        assert!(
            next >= durable.max(visible).max(prev_next),
            "{ctx}: lost messages"
        );
        check_contents(&q, &sc, prev_next.saturating_sub(300), &ctx);
        // The queue continues: the next append gets the next sequence.
        let payload = sc.payload(next);
        let seq = q.appender().unwrap().append(&payload).unwrap();
        assert_eq!(seq, next, "{ctx}: next append continues the sequence");
        q.close().unwrap();
        prev_next = next + 1;
    }
    let q = open_retrying(
        QueueBuilder::new(dir.path())
            .file_size(4 << 20)
            .verify_on_startup(true),
    )
    .unwrap_or_else(|e| panic!("seed {seed}: verify_on_startup after kills: {e}"));
    assert_eq!(q.next_seq(), prev_next);
    assert!(
        grown_short,
        "some kill left an active file shorter than its file_size"
    );
    assert!(
        common::data_files(dir.path()).len() >= 2,
        "the rounds crossed a roll"
    );
    q.close().unwrap();
}

// ---------------------------------------------------------------------------
// Live tailers across rolls.

const LIVE_DIR: &str = "LITEMQ_LIVE_DIR";
const LIVE_COUNT: &str = "LITEMQ_LIVE_COUNT";
const LIVE_START: &str = "LITEMQ_LIVE_START";

/// Hash chain: message `i` carries `h(i)`, `h(i) = mix(h(i-1) ^ i)`.
fn chain_next(prev: u64, i: u64) -> u64 {
    mix(prev ^ i.wrapping_mul(0x2545_F491_4F6C_DD1D))
}

fn live_payload(i: u64, h: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&i.to_le_bytes());
    out.extend_from_slice(&h.to_le_bytes());
    let filler = (h % 24) as usize;
    out.extend(std::iter::repeat_n((h >> 8) as u8, filler));
}

#[test]
#[ignore = "child-process entry point, run by live_tailers_across_rolls"]
fn live_tailer_child() {
    let dir = std::env::var(LIVE_DIR).unwrap();
    let count: u64 = std::env::var(LIVE_COUNT).unwrap().parse().unwrap();
    let start: u64 = std::env::var(LIVE_START).unwrap().parse().unwrap();
    let q = QueueBuilder::new(&dir)
        .read_only(true)
        .open()
        .expect("tailer opens read-only");
    let mut t = q.tailer(Start::Beginning).unwrap();
    assert_eq!(t.next_seq(), 0);
    let mut h = 0u64;
    let mut expect_buf = Vec::new();
    let mut i = 0u64;
    let _ = start;
    while i < count {
        match t.read_next_timeout(Duration::from_secs(30)) {
            Ok(Some(m)) => {
                assert_eq!(m.seq, i, "every message once, in order");
                h = chain_next(h, i);
                live_payload(i, h, &mut expect_buf);
                if m.payload != expect_buf.as_slice() {
                    panic!("content of seq {i} breaks the hash chain");
                }
                i += 1;
            }
            Ok(None) => panic!("tailer stuck at seq {i}: nothing for 30 s"),
            Err(e) => panic!("tailer error at seq {i}: {e}"),
        }
    }
    // Nothing after the last message.
    assert!(t.read_next().unwrap().is_none());
    report("TAILED", i);
    report("HASH", h);
}

#[test]
fn live_tailers_across_rolls() {
    let seed = run_seed();
    let count = env_u64("LIVE_MESSAGES").unwrap_or(if soak() { 20_000_000 } else { 5_000_000 });
    let roll_every = 3_000;
    let mut rng = Rng(seed ^ 0x11FE);
    let dir = tempfile::tempdir().unwrap();
    // 3000 messages of at most 24 + 9 + 12 bytes (+ padding) fit in 256 KiB.
    let q = QueueBuilder::new(dir.path())
        .file_size(256 * 1024)
        .roll(RollStrategy::Count(roll_every))
        .index_interval(256)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    // Four tailers start at random points of the run.
    let mut starts: Vec<u64> = (0..4).map(|_| rng.below(count)).collect();
    starts[0] = 0;
    starts.sort_unstable();
    let mut tailers: Vec<Child> = Vec::new();
    let started = Instant::now();
    let mut h = 0u64;
    let mut buf = Vec::new();
    let mut next_start = 0;
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut i = 0u64;
    while i < count {
        while next_start < starts.len() && starts[next_start] <= i {
            tailers.push(spawn_child(
                child_test("live_tailer_child")
                    .env(LIVE_DIR, dir.path())
                    .env(LIVE_COUNT, count.to_string())
                    .env(LIVE_START, i.to_string())
                    .stdout(Stdio::piped()),
            ));
            next_start += 1;
        }
        // Mostly batches (the fast path), sometimes single appends.
        let n = (1 + rng.below(512)).min(count - i);
        if n < 8 {
            for j in i..i + n {
                h = chain_next(h, j);
                live_payload(j, h, &mut buf);
                assert_eq!(app.append(&buf).unwrap(), j);
            }
        } else {
            batch.resize_with(n as usize, Vec::new);
            for (k, b) in batch.iter_mut().enumerate() {
                let j = i + k as u64;
                h = chain_next(h, j);
                live_payload(j, h, b);
            }
            let r = app.append_batch(batch.iter().map(Vec::as_slice)).unwrap();
            assert_eq!(r, i..i + n);
        }
        i += n;
    }
    app.flush().unwrap();
    let written = started.elapsed();
    let rolls = q.stats().rolls;
    for child in tailers {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "tailer failed: {stdout}");
        assert!(stdout.contains(&format!("@@TAILED {count}")), "{stdout}");
        assert!(stdout.contains(&format!("@@HASH {h}")), "{stdout}");
    }
    println!(
        "live_tailers_across_rolls: CRASH_SEED={seed}: {count} messages, {rolls} rolls, written in {:.1} s, \
         4 tailers (started at {starts:?}) done in {:.1} s",
        written.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(rolls >= count / roll_every - 1);
    q.close().unwrap();
}

// ---------------------------------------------------------------------------
// ENGINE BUG 8 reproduction (found by the power-loss harness).

/// One thread mixing `append`, `append_batch`, `flush` and short pauses in
/// `Async` mode. The I/O thread can take the appenders' pending batch (in
/// `take_pending` or `prepare_sleep`) while the channel still holds an
/// earlier `append_batch` command, so it writes a later sequence first and
/// poisons itself: "internal: appender sent seq N, writer expected M".
/// (Engine bug 8, fixed: the pending batch is taken only when the channel is
/// empty under the hand-off lock.) `MIXED_SECONDS` sets how long it runs.
#[test]
fn mixed_single_and_batch_appends_keep_their_order() {
    let secs = env_u64("MIXED_SECONDS").unwrap_or(10);
    let started = Instant::now();
    let mut rng = Rng(run_seed());
    let mut rounds = 0;
    while started.elapsed() < Duration::from_secs(secs) {
        let dir = tempfile::tempdir().unwrap();
        let q = QueueBuilder::new(dir.path())
            .file_size(64 * 1024)
            .index_interval(4)
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        let mut seq = 0u64;
        for _ in 0..3000 {
            match rng.below(10) {
                0..=2 => {
                    let k = 1 + rng.below(20);
                    let ps: Vec<Vec<u8>> = (0..k)
                        .map(|i| vec![i as u8; rng.below(300) as usize])
                        .collect();
                    let r = app
                        .append_batch(ps.iter().map(Vec::as_slice))
                        .unwrap_or_else(|e| panic!("round {rounds}, seq {seq}: {e}"));
                    assert_eq!(r, seq..seq + k);
                    seq += k;
                }
                3 if rng.chance(15) => std::thread::sleep(Duration::from_micros(rng.below(3000))),
                4 if rng.chance(2) => app.flush().unwrap(),
                _ => {
                    let s = app
                        .append(&vec![1u8; rng.below(200) as usize])
                        .unwrap_or_else(|e| panic!("round {rounds}, seq {seq}: {e}"));
                    assert_eq!(s, seq);
                    seq += 1;
                }
            }
        }
        q.close().unwrap();
        rounds += 1;
    }
}
