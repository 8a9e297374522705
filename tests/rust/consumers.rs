//! Named tailers (consumers): positions that survive close, reopen and
//! SIGKILL; at-least-once delivery; names; listing with lag.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use litemq::{ConsumerOptions, Error, QueueBuilder, Start};

/// Between fork and exec a child shares every descriptor of this process,
/// flocks included: a test that checks who holds a lock must not overlap a
/// spawn. Spawning takes this for writing; every other test for reading.
static SPAWN: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn no_spawn() -> std::sync::RwLockReadGuard<'static, ()> {
    SPAWN.read().unwrap_or_else(|e| e.into_inner())
}

fn fill(q: &litemq::Queue, n: u64) {
    let app = q.appender().unwrap();
    for i in 0..n {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
}

/// Reads up to `n` messages, checking payloads; returns their sequences.
fn take(c: &mut litemq::Consumer, n: usize) -> Vec<u64> {
    let mut seqs = Vec::new();
    while seqs.len() < n {
        match c.read_next().unwrap() {
            Some(m) => {
                assert_eq!(m.payload, payload(m.seq), "payload of {}", m.seq);
                seqs.push(m.seq);
            }
            None => break,
        }
    }
    seqs
}

#[test]
fn resumes_at_the_last_commit_after_close_and_reopen() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    fill(&q, 500);
    let mut c = q.consumer("billing", Start::Beginning).unwrap();
    assert_eq!(take(&mut c, 120), (0..120).collect::<Vec<_>>());
    c.commit().unwrap();
    assert_eq!(c.committed_seq(), 120);
    // Read more without committing: these come again after reopening.
    assert_eq!(take(&mut c, 30), (120..150).collect::<Vec<_>>());
    drop(c);
    q.close().unwrap();
    drop(q);

    let q = small(dir.path()).open().unwrap();
    let mut c = q.consumer("billing", Start::End).unwrap(); // start_if_new ignored
    assert_eq!(c.next_seq(), 120);
    assert_eq!(take(&mut c, 1000), (120..500).collect::<Vec<_>>());
    c.commit_durable().unwrap();
    drop(c);
    let c = q.consumer("billing", Start::Beginning).unwrap();
    assert_eq!(c.committed_seq(), 500);
}

#[test]
fn start_if_new_applies_to_new_names_only() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    fill(&q, 50);
    let mut end = q.consumer("from-end", Start::End).unwrap();
    assert_eq!(end.next_seq(), 50);
    assert!(end.read_next().unwrap().is_none());
    let mut mid = q.consumer("from-20", Start::Seq(20)).unwrap();
    assert_eq!(take(&mut mid, 1), vec![20]);
    // A new consumer's start is committed at once: it is listed and protects.
    let listed: Vec<_> = q
        .consumers()
        .unwrap()
        .into_iter()
        .map(|c| (c.name, c.next_seq))
        .collect();
    assert_eq!(
        listed,
        vec![("from-20".to_string(), 20), ("from-end".to_string(), 50)]
    );
    let app = q.appender().unwrap();
    for i in 50..55 {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
    assert_eq!(take(&mut end, 10), (50..55).collect::<Vec<_>>());
}

#[test]
fn auto_commit_commits_what_was_handed_out_before_each_read() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    fill(&q, 100);
    let opts = ConsumerOptions {
        start_if_new: Start::Beginning,
        auto_commit: true,
        ..ConsumerOptions::default()
    };
    let mut c = q.consumer("auto", opts).unwrap();
    assert_eq!(take(&mut c, 10), (0..10).collect::<Vec<_>>());
    // Message 9 was handed out but the caller has not asked for the next
    // one: it may still be in hand, so it is not committed.
    assert_eq!(c.committed_seq(), 9);
    drop(c); // no close: a crash, as far as the position knows
    let mut c = q.consumer("auto", opts).unwrap();
    assert_eq!(take(&mut c, 5), (9..14).collect::<Vec<_>>());
    c.close().unwrap(); // close commits everything handed out
    let c = q.consumer("auto", opts).unwrap();
    assert_eq!(c.committed_seq(), 14);
}

#[test]
fn one_open_handle_per_name_and_remove() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    fill(&q, 10);
    let c = q.consumer("solo", Start::Beginning).unwrap();
    match q.consumer("solo", Start::Beginning) {
        Err(Error::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("second handle for one name: {other:?}"),
    }
    assert!(matches!(
        q.remove_consumer("solo"),
        Err(Error::Locked { .. })
    ));
    drop(c);
    assert!(q.remove_consumer("solo").unwrap());
    assert!(!q.remove_consumer("solo").unwrap());
    assert!(q.consumers().unwrap().is_empty());
    // The name is new again.
    let c = q.consumer("solo", Start::End).unwrap();
    assert_eq!(c.next_seq(), 10);
}

#[test]
fn bad_names_are_rejected_and_names_never_reach_paths_raw() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let long = "x".repeat(129);
    for bad in [
        "",
        ".",
        "..",
        "a/b",
        "../../etc",
        "a\\b",
        "nul\0",
        "tab\t",
        "line\n",
        "\u{7f}",
        long.as_str(),
    ] {
        match q.consumer(bad, Start::Beginning) {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("consumer name"), "{msg}"),
            other => panic!("{bad:?} accepted: {other:?}"),
        }
    }
    let ok = [
        "billing",
        "Billing",
        "ünïcødé ✓ spaces",
        "..x",
        &"y".repeat(128),
    ];
    for name in ok {
        q.consumer(name, Start::Beginning).unwrap();
    }
    let files: Vec<String> = std::fs::read_dir(dir.path().join("consumers"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files.len(), ok.len(), "{files:?}");
    for f in &files {
        assert!(f.len() <= 255);
        assert!(
            f.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.'),
            "{f}"
        );
    }
    // "billing" and "Billing" are different consumers.
    let names: Vec<String> = q.consumers().unwrap().into_iter().map(|c| c.name).collect();
    assert!(names.contains(&"billing".to_string()) && names.contains(&"Billing".to_string()));
}

#[test]
fn concurrent_consumers_with_different_names() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    const N: u64 = 4000;
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..4)
            .map(|r| {
                let q = &q;
                s.spawn(move || {
                    let name = format!("reader-{r}");
                    let mut c = q.consumer(&name, Start::Beginning).unwrap();
                    let mut expect = 0;
                    while expect < N {
                        let m = c
                            .read_next_timeout(Duration::from_secs(20))
                            .unwrap()
                            .expect("message arrives");
                        assert_eq!(m.seq, expect, "{name}");
                        assert_eq!(m.payload, payload(expect));
                        expect += 1;
                        if expect % (r + 1) == 0 {
                            c.commit().unwrap();
                        }
                    }
                    c.commit().unwrap();
                })
            })
            .collect();
        let app = q.appender().unwrap();
        for i in 0..N {
            app.append(&payload(i)).unwrap();
        }
        app.flush().unwrap();
        for r in readers {
            r.join().unwrap();
        }
    });
    let infos = q.consumers().unwrap();
    assert_eq!(infos.len(), 4);
    for c in infos {
        assert_eq!(
            (c.next_seq, c.lag_messages, c.lag_bytes),
            (N, 0, 0),
            "{}",
            c.name
        );
    }
}

#[test]
fn listing_reports_lag_in_messages_and_bytes() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(1_700_000_000_000_000);
    let q = small(dir.path()).clock(clock.clone()).open().unwrap();
    // 107-byte payloads make 128-byte frames (4 + 9 + 107 + 8, aligned to 8).
    let app = q.appender().unwrap();
    for _ in 0..2000 {
        app.append(&[7u8; 107]).unwrap();
    }
    app.flush().unwrap();
    assert!(q.stats().files >= 3, "the lag must span files");
    for (i, at) in [0u64, 1, 333, 511, 512, 1500, 1999, 2000]
        .into_iter()
        .enumerate()
    {
        let name = format!("c{i}");
        let mut c = q.consumer(&name, Start::Seq(at)).unwrap();
        c.commit().unwrap();
        clock.advance(Duration::from_secs(1));
    }
    let infos = q.consumers().unwrap();
    for c in &infos {
        assert_eq!(c.lag_messages, 2000 - c.next_seq, "{}", c.name);
        assert_eq!(
            c.lag_bytes,
            128 * c.lag_messages,
            "{} at {}",
            c.name,
            c.next_seq
        );
        assert_eq!(
            c.committed_at,
            1_700_000_000_000_000 + c.name[1..].parse::<u64>().unwrap() * 1_000_000
        );
    }
    // Another process would open read-only: same listing, no lock taken.
    let ro = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    assert_eq!(ro.consumers().unwrap(), infos);
}

#[test]
fn named_tailers_work_on_read_only_queues() {
    let _guard = no_spawn();
    // The usual deployment: the writer in one process, consumers elsewhere.
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    fill(&q, 300);
    let ro = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    let mut c = ro.consumer("reader", Start::Beginning).unwrap();
    assert_eq!(take(&mut c, 100).len(), 100);
    c.commit().unwrap();
    drop(c);
    let mut c = ro.consumer("reader", Start::Beginning).unwrap();
    assert_eq!(take(&mut c, 1), vec![100]);
}

#[test]
fn a_torn_commit_falls_back_to_the_previous_commit_and_spares_other_consumers() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    fill(&q, 100);
    let mut other = q.consumer("other", Start::Beginning).unwrap();
    take(&mut other, 77);
    other.commit().unwrap();
    drop(other);

    let mut c = q.consumer("torn", Start::Beginning).unwrap();
    let path = c.path().to_path_buf();
    take(&mut c, 10);
    c.commit().unwrap();
    let before = std::fs::read(&path).unwrap();
    take(&mut c, 10);
    c.commit().unwrap();
    let after = std::fs::read(&path).unwrap();
    drop(c);
    let changed: Vec<usize> = (0..before.len())
        .filter(|&i| before[i] != after[i])
        .collect();
    assert!(!changed.is_empty());
    // Every prefix of the commit's stores, as a crash could leave them.
    for cut in 0..changed.len() {
        let mut image = before.clone();
        for &i in &changed[..cut] {
            image[i] = after[i];
        }
        std::fs::write(&path, &image).unwrap();
        let c = q.consumer("torn", Start::End).unwrap();
        assert_eq!(c.committed_seq(), 10, "cut after {cut} changed bytes");
    }
    std::fs::write(&path, &after).unwrap();
    assert_eq!(q.consumer("torn", Start::End).unwrap().committed_seq(), 20);
    let other = q
        .consumers()
        .unwrap()
        .into_iter()
        .find(|c| c.name == "other")
        .unwrap();
    assert_eq!(other.next_seq, 77);
}

const CHILD_QUEUE: &str = "LITEMQ_TEST_CONSUMER_QUEUE";
const CHILD_LOG: &str = "LITEMQ_TEST_CONSUMER_LOG";
const KILL_N: u64 = 6000;
/// The child commits after every `COMMIT_EVERY` messages it has handled.
const COMMIT_EVERY: u64 = 7;

/// Child-process entry for `sigkill_loses_no_message_and_repeats_at_most_the_uncommitted`:
/// consumes the queue read-only, logging each handled sequence before
/// committing, slowly enough to be killed part way.
#[test]
#[ignore = "child-process entry point, run by sigkill_loses_no_message_and_repeats_at_most_the_uncommitted"]
fn child_consumer_entry() {
    let path = std::env::var(CHILD_QUEUE).expect("started by the parent test");
    let log_path = std::env::var(CHILD_LOG).unwrap();
    let q = QueueBuilder::new(&path).read_only(true).open().unwrap();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&log_path)
        .unwrap();
    let mut c = q.consumer("killable", Start::Beginning).unwrap();
    // One write(2) per line: a kill never leaves half a line.
    let mut line = |s: String| log.write_all(s.as_bytes()).unwrap();
    line(format!("start {}\n", c.next_seq()));
    let mut handled = 0u64;
    while let Some(m) = c.read_next_timeout(Duration::from_secs(5)).unwrap() {
        assert_eq!(m.payload, payload(m.seq));
        let seq = m.seq;
        // "Handling" a message: one unbuffered write, then (sometimes) commit.
        line(format!("{seq}\n"));
        handled += 1;
        if handled.is_multiple_of(COMMIT_EVERY) {
            c.commit().unwrap();
        }
        if seq % 16 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        if seq + 1 == KILL_N {
            c.commit().unwrap();
            line("done\n".into());
            break;
        }
    }
}

#[test]
fn sigkill_loses_no_message_and_repeats_at_most_the_uncommitted() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    fill(&q, KILL_N);
    let log = dir.path().join("handled.log");
    let lines = |log: &Path| -> Vec<String> {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect()
    };
    let spawn = || {
        let _guard = SPAWN.write().unwrap_or_else(|e| e.into_inner());
        spawn_child(
            child_test("child_consumer_entry")
                .env(CHILD_QUEUE, dir.path())
                .env(CHILD_LOG, &log)
                .stdout(Stdio::null()),
        )
    };
    // Kill three children part way, at different points; a fourth finishes.
    for kill_after in [700usize, 2500, 4100] {
        let mut child = spawn();
        let deadline = Instant::now() + Duration::from_secs(60);
        while lines(&log).len() < kill_after && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    let status = spawn().wait().unwrap();
    assert!(status.success());

    let lines = lines(&log);
    assert_eq!(
        lines.last().map(String::as_str),
        Some("done"),
        "the last run finished"
    );
    let mut runs: Vec<(u64, Vec<u64>)> = Vec::new();
    for l in &lines {
        if let Some(s) = l.strip_prefix("start ") {
            runs.push((s.parse().unwrap(), Vec::new()));
        } else if l != "done" {
            runs.last_mut().unwrap().1.push(l.parse().unwrap());
        }
    }
    assert_eq!(runs.len(), 4);
    let mut next_unhandled = 0u64; // everything below was handled by some run
    for (i, (start, seqs)) in runs.iter().enumerate() {
        // No gap: a run starts at or before the first message not handled yet.
        assert!(
            *start <= next_unhandled,
            "run {i} starts at {start}, after unhandled {next_unhandled}"
        );
        // At most the messages handled since the last commit come again:
        // up to COMMIT_EVERY, when the kill lands after the last of them was
        // handled and before its commit.
        assert!(
            next_unhandled - start <= COMMIT_EVERY,
            "run {i} repeats {} messages",
            next_unhandled - start
        );
        for (k, s) in seqs.iter().enumerate() {
            assert_eq!(*s, start + k as u64, "run {i} reads in order without gaps");
        }
        next_unhandled = next_unhandled.max(start + seqs.len() as u64);
    }
    assert_eq!(next_unhandled, KILL_N);
    let info = q.consumers().unwrap().pop().unwrap();
    assert_eq!(
        (info.name.as_str(), info.next_seq, info.lag_messages),
        ("killable", KILL_N, 0)
    );
}

/// Commit rate: `cargo test --release --test consumers -- --ignored --nocapture commit_rate`.
#[test]
#[ignore = "measurement; prints figures"]
fn commit_rate() {
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path())
        .file_size(256 << 20)
        .open()
        .unwrap();
    const N: u64 = 2_000_000;
    let app = q.appender().unwrap();
    app.append_batch((0..N).map(|_| &[0u8; 64][..])).unwrap();
    app.flush().unwrap();
    let run = |name: &str, per_message: &dyn Fn(&mut litemq::Consumer)| {
        let mut c = q.consumer(name, Start::Beginning).unwrap();
        let t = Instant::now();
        let mut k = 0u64;
        while c.read_next().unwrap().is_some() {
            k += 1;
            per_message(&mut c);
        }
        assert_eq!(k, N);
        let secs = t.elapsed().as_secs_f64();
        println!(
            "{name}: {:.2} M msg/s ({:.1} ns/msg)",
            N as f64 / secs / 1e6,
            secs * 1e9 / N as f64
        );
    };
    run("read-only", &|_| {});
    run("read+commit-each", &|c| c.commit().unwrap());
    let opts = ConsumerOptions {
        start_if_new: Start::Beginning,
        auto_commit: true,
        ..ConsumerOptions::default()
    };
    let mut c = q.consumer("read+auto-commit", opts).unwrap();
    let t = Instant::now();
    while c.read_next().unwrap().is_some() {}
    let secs = t.elapsed().as_secs_f64();
    println!("read+auto-commit: {:.2} M msg/s", N as f64 / secs / 1e6);
    let mut c = q.consumer("durable", Start::Beginning).unwrap();
    let t = Instant::now();
    for _ in 0..2000 {
        c.read_next().unwrap();
        c.commit_durable().unwrap();
    }
    println!(
        "commit_durable (msync each): {:.0} /s",
        2000.0 / t.elapsed().as_secs_f64()
    );
}

#[test]
fn a_topic_filter_is_remembered_with_the_name_and_counts_the_lag() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..30u64 {
        let topic = if i % 3 == 0 { "audit" } else { "orders" };
        app.append_record(&litemq::Record {
            topic: Some(topic),
            ..litemq::Record::new(&payload(i))
        })
        .unwrap();
    }
    app.flush().unwrap();
    let audit = litemq::TopicSelector {
        topic: Some("audit".into()),
        ..Default::default()
    };
    let mut c = q.consumer("auditor", Start::Beginning).unwrap();
    c.select(audit.clone()).unwrap();
    assert_eq!(take(&mut c, 2), vec![0, 3]);
    c.commit().unwrap();
    drop(c);
    // Reopened without select: the same filter.
    let mut c = q.consumer("auditor", Start::Beginning).unwrap();
    assert_eq!(c.selector(), Some(&audit));
    assert_eq!(take(&mut c, 2), vec![6, 9]);
    // Another filter is refused without a reset.
    let orders = litemq::TopicSelector {
        topic: Some("orders".into()),
        ..Default::default()
    };
    assert!(matches!(
        c.select(orders.clone()),
        Err(Error::InvalidArgument(_))
    ));
    drop(c);
    let info = q.consumers().unwrap();
    assert_eq!((info[0].next_seq, info[0].lag_messages), (4, 8));
    assert_eq!(info[0].selector.as_ref(), Some(&audit));
    let opts = ConsumerOptions {
        start_if_new: Start::Seq(0),
        reset: true,
        ..ConsumerOptions::default()
    };
    let mut c = q.consumer("auditor", opts).unwrap();
    assert_eq!((c.committed_seq(), c.selector()), (0, None));
    c.select(orders).unwrap();
    assert_eq!(take(&mut c, 3), vec![1, 2, 4]);
}

#[test]
fn auto_reset_goes_on_where_retention_left_off() {
    let _guard = no_spawn();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .roll(litemq::RollStrategy::Count(10))
        .open()
        .unwrap();
    fill(&q, 50);
    q.consumer("slow", Start::Beginning)
        .unwrap()
        .close()
        .unwrap();
    let report = q
        .apply_retention_with(&litemq::RetentionPolicy {
            max_files: Some(1),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(report.first_seq, 40);
    let mut c = q.consumer("slow", Start::Beginning).unwrap();
    assert!(matches!(c.read_next(), Err(Error::NotFound { .. })));
    drop(c);
    for (reset, first) in [
        (litemq::AutoReset::Earliest, Some(40)),
        (litemq::AutoReset::Latest, None),
    ] {
        let opts = ConsumerOptions {
            auto_reset: reset,
            ..ConsumerOptions::default()
        };
        let mut c = q.consumer("slow", opts).unwrap();
        assert_eq!(c.read_next().unwrap().map(|m| m.seq), first, "{reset:?}");
        // Not committed: the next open meets the deleted position again.
        drop(c);
    }
    let mut c = q.consumer("slow", Start::Beginning).unwrap();
    assert!(c.commit_seq(51).is_err());
    c.commit_seq(45).unwrap();
    assert_eq!(c.committed_seq(), 45);
    assert_eq!(q.seq_for_time(0).unwrap(), 40);
    assert_eq!(q.seq_for_time(u64::MAX).unwrap(), 50);
}
