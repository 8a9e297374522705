//! Work queues beside the queue they read: key compaction dropping a
//! leased job, marks past the queue's end, tickets of another queue, clock
//! steps, boots and pid namespaces, pending/claim/release and key-ordered
//! groups (split from `work_queue.rs`, which holds the state file's bytes,
//! the ring and the priority groups).

mod common;

use std::os::unix::fs::FileExt;
use std::time::Duration;

use common::wq::*;
use common::*;
use litemq::format::work_queue::{slot_word, JobState, SlotWord, W_CURSOR, W_LOW};
use litemq::{Queue, WorkQueueOptions};

/// `n` messages of one key, 1 KiB each: a few small files, and compaction
/// drops every one of them in a sealed file (only the latest stays).
fn fill_one_key(q: &Queue, n: u64) {
    let app = q.appender().unwrap();
    for i in 0..n {
        let mut p = i.to_le_bytes().to_vec();
        p.resize(1024, 7);
        app.append_record(&litemq::Record {
            key: Some(b"k"),
            ..litemq::Record::new(&p)
        })
        .unwrap();
    }
    app.flush().unwrap();
}

fn compact_now(q: &Queue) {
    let opts = litemq::CompactOptions {
        grace_us: 0,
        ..Default::default()
    };
    q.compact(&opts, &mut |_, _| {}).unwrap();
}

/// Hands out and acks every job it can without waiting; returns their
/// sequences in handout order.
fn drain(wq: &litemq::WorkQueue) -> Vec<u64> {
    let mut got = Vec::new();
    while let Some(job) = get_now(wq) {
        got.push(job.ticket.seq);
        assert!(wq.ack(job.ticket).unwrap());
    }
    got
}

#[test]
fn a_job_whose_message_compaction_dropped_while_leased_is_finished() {
    use std::sync::{Arc, Mutex};
    const N: u64 = 200;
    let (_dir, clock, q) = fixture(0);
    fill_one_key(&q, N);
    assert!(q.data_files().unwrap().len() > 2);
    let letters: Arc<Mutex<Vec<u64>>> = Arc::default();
    let seen = letters.clone();
    let sink: litemq::DeadLetterSink = Arc::new(move |r: &litemq::Record<'_>| {
        seen.lock().unwrap().push(r.payload.len() as u64);
        Ok(())
    });
    // How the lease ends: a nack, its deadline, or (past max_deliveries)
    // the dead-letter queue, which has no message to send.
    let nacked = q.work_queue("nacked", options(16)).unwrap();
    let expired = q.work_queue("expired", options(16)).unwrap();
    let dead = q
        .work_queue(
            "dead",
            WorkQueueOptions {
                max_deliveries: 1,
                dead_letter: Some(sink),
                ..options(16)
            },
        )
        .unwrap();
    let held: Vec<_> = [&nacked, &expired, &dead]
        .iter()
        .map(|wq| get_now(wq).unwrap())
        .collect();
    assert!(held.iter().all(|j| j.ticket.seq == 0));
    compact_now(&q);
    assert!(matches!(q.get(0), Err(litemq::Error::Compacted { seq: 0 })));
    let kept: Vec<u64> = (1..N).filter(|&s| q.get(s).is_ok()).collect();
    assert!(kept.len() < N as usize - 16, "more holes than the ring");

    assert!(nacked.nack(held[0].ticket, Duration::ZERO).unwrap());
    assert!(dead.nack(held[2].ticket, Duration::ZERO).unwrap());
    clock.advance(Duration::from_secs(11)); // past the visibility timeout
    for (wq, job) in [&nacked, &expired, &dead].iter().zip(&held) {
        let name = wq.name();
        // The handle's reader may still hold the file compaction replaced
        // (and hand out what it reads there): every job the queue still
        // has is handed out, each once.
        let got = drain(wq);
        assert!(got.windows(2).all(|w| w[0] < w[1]), "{name}: {got:?}");
        assert!(kept.iter().all(|s| got.contains(s)), "{name}: {got:?}");
        let info = wq.info(N);
        assert_eq!((info.low, info.cursor), (N, N), "{name}: the mark moved on");
        assert_eq!(
            info.gone,
            N - got.len() as u64,
            "{name}: the hole held by a worker counts as gone too"
        );
        assert!(
            !wq.ack(job.ticket).unwrap(),
            "{name}: a late ack is harmless"
        );
        assert!(!wq.nack(job.ticket, Duration::ZERO).unwrap(), "{name}");
    }
    assert!(
        letters.lock().unwrap().is_empty(),
        "a hole is no dead letter"
    );
}

/// A machine crash that lost the data's tail and kept the state page, built
/// the simple way: the group's state file from a queue of `had` messages
/// (after `work` ran on it) beside a queue that holds only `has`.
fn state_ahead_of_its_data(
    had: u64,
    has: u64,
    work: impl FnOnce(&litemq::WorkQueue),
) -> (tempfile::TempDir, Queue) {
    let dir = tempfile::tempdir().unwrap();
    let kept = tempfile::tempdir().unwrap();
    {
        let q = small(dir.path()).clock(clock_at(T0)).open().unwrap();
        fill(&q, has);
        q.close().unwrap();
    }
    // What the disk keeps of the data: the queue at `has` messages.
    copy_tree(dir.path(), kept.path());
    {
        let q = small(dir.path()).clock(clock_at(T0)).open().unwrap();
        let app = q.appender().unwrap();
        for i in has..had {
            app.append(&payload(i)).unwrap();
        }
        app.flush().unwrap();
        work(&q.work_queue("w", options(16)).unwrap());
    }
    // The machine crash: the data's tail is lost, the state file (the same
    // file, the same group) is kept.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() == "workqueues" {
            continue;
        }
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        } else {
            std::fs::remove_file(&path).unwrap();
        }
    }
    copy_tree(kept.path(), dir.path());
    let q = small(dir.path()).clock(clock_at(T0)).open().unwrap();
    (dir, q)
}

fn append_more(q: &Queue, n: u64) {
    let app = q.appender().unwrap();
    for _ in 0..n {
        app.append(b"after the crash").unwrap();
    }
    app.flush().unwrap();
}

#[test]
fn marks_past_the_queues_end_move_back_to_it_and_say_so() {
    // Jobs 0..8 handed out, 0..6 acked; the data kept 4 messages. Jobs 0..4
    // stay finished; every message written since is handed out.
    let (_dir, q) = state_ahead_of_its_data(8, 4, |wq| {
        for _ in 0..8 {
            let job = get_now(wq).unwrap();
            if job.ticket.seq < 6 {
                assert!(wq.ack(job.ticket).unwrap());
            }
        }
    });
    // The worker opens the group before the producer writes again (once
    // the queue has grown past the marks, nothing tells them apart).
    let wq = q.work_queue("w", options(16)).unwrap();
    append_more(&q, 6);
    let info = wq.info(10);
    assert_eq!((info.low, info.cursor), (4, 4), "moved back to the end");
    assert_eq!(info.rewound, 4, "the cursor was 4 past the data");
    let got: Vec<_> = std::iter::from_fn(|| get_now(&wq))
        .map(|j| (j.ticket.seq, j.ticket.deliveries))
        .collect();
    assert_eq!(got, [(4, 1), (5, 1), (6, 1), (7, 1), (8, 1), (9, 1)]);
    drop(wq);
    // The repair is done once: a second open finds the marks in range.
    assert_eq!(q.work_queue("w", options(16)).unwrap().info(10).rewound, 4);
}

/// The writer's open after the crash moves the marks back before anything
/// is appended: producers that write past the old marks before any worker
/// opens the group do not make the state look consistent again.
#[test]
fn a_writer_open_moves_marks_back_before_new_messages_reach_them() {
    let (_dir, q) = state_ahead_of_its_data(8, 4, |wq| {
        for _ in 0..8 {
            let job = get_now(wq).unwrap();
            assert!(wq.ack(job.ticket).unwrap());
        }
    });
    append_more(&q, 10);
    let wq = q.work_queue("w", options(16)).unwrap();
    assert_eq!(wq.info(14).rewound, 4);
    let got: Vec<u64> = std::iter::from_fn(|| get_now(&wq))
        .map(|j| j.ticket.seq)
        .collect();
    assert_eq!(
        got,
        (4..14).collect::<Vec<_>>(),
        "every message written since"
    );
}

#[test]
fn a_cursor_past_the_end_moves_back_and_jobs_before_it_keep_their_leases() {
    // Jobs 0..8 handed out, 0..2 acked, 2..8 leased; the data kept 5.
    let mut leased = Vec::new();
    let (_dir, q) = state_ahead_of_its_data(8, 5, |wq| {
        for _ in 0..8 {
            let job = get_now(wq).unwrap();
            if job.ticket.seq < 2 {
                assert!(wq.ack(job.ticket).unwrap());
            } else {
                leased.push(job.ticket);
            }
        }
    });
    let wq = q.work_queue("w", options(16)).unwrap();
    append_more(&q, 4);
    let info = wq.info(9);
    assert_eq!((info.low, info.cursor, info.rewound), (2, 5, 3));
    let got: Vec<_> = std::iter::from_fn(|| get_now(&wq))
        .map(|j| (j.ticket.seq, j.ticket.deliveries))
        .collect();
    assert_eq!(
        got,
        [(5, 1), (6, 1), (7, 1), (8, 1)],
        "new jobs, not lost ones"
    );
    for t in &leased[..3] {
        assert!(wq.ack(*t).unwrap(), "job {} kept its lease", t.seq);
    }
    assert_eq!(wq.info(9).low, 5);
}

#[test]
fn a_mark_above_the_cursor_is_refused_as_corrupted() {
    let (dir, _, q) = fixture(4);
    drop(q.work_queue("w", options(16)).unwrap());
    let path = state_file(dir.path());
    write_word(&path, W_LOW, 3);
    write_word(&path, W_CURSOR, 1);
    match q.work_queue("w", options(16)) {
        Err(litemq::Error::Corrupted {
            path: p, offset, ..
        }) => {
            assert_eq!((p, offset), (path, (W_LOW * 8) as u64));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_group_cannot_start_past_the_queues_end() {
    // Such a start could not be told from a state ahead of its data.
    let (dir, _, q) = fixture(3);
    let at = |seq| WorkQueueOptions {
        start_seq: Some(seq),
        ..options(16)
    };
    match q.work_queue("later", at(4)) {
        Err(litemq::Error::InvalidArgument(m)) => assert!(m.contains("past"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(
        !dir.path().join("workqueues").join("nrqxizls.wq").exists(),
        "no group created"
    );
    let wq = q.work_queue("at-end", at(3)).unwrap();
    fill(&q, 1);
    assert_eq!(get_now(&wq).unwrap().ticket.seq, 3);
}

/// Issue 30, item 8: a ticket names the group and the queue that handed it
/// out, not only a sequence: another queue's, or a removed group's, is refused.
#[test]
fn a_ticket_of_another_queue_or_of_a_group_created_again_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let a = small(&dir.path().join("a"))
        .clock(clock_at(T0))
        .open()
        .unwrap();
    let b = small(&dir.path().join("b"))
        .clock(clock_at(T0))
        .open()
        .unwrap();
    fill(&a, 2);
    fill(&b, 2);
    let wa = a.work_queue("w", options(16)).unwrap();
    let wb = b.work_queue("w", options(16)).unwrap();
    let ja = get_now(&wa).unwrap();
    let jb = get_now(&wb).unwrap();
    assert_eq!((ja.ticket.seq, ja.ticket.deliveries), (0, 1));
    assert_eq!((jb.ticket.seq, jb.ticket.deliveries), (0, 1));
    for r in [
        wb.ack(ja.ticket),
        wb.nack(ja.ticket, Duration::ZERO),
        wb.extend(ja.ticket, Duration::from_secs(1)),
    ] {
        assert!(
            matches!(r, Err(litemq::Error::InvalidArgument(_))),
            "a job of queue a on queue b: {r:?}"
        );
    }
    assert_eq!(wb.info(2).in_flight, 1, "b's own job 0 is still leased");
    // Another handle of the same group takes it.
    let wa2 = a.work_queue("w", options(16)).unwrap();
    assert!(wa2.extend(ja.ticket, Duration::from_secs(5)).unwrap());
    // The group removed and created again: the old job is not its job.
    drop((wa, wa2));
    assert!(a.remove_work_queue("w").unwrap());
    let again = a.work_queue("w", options(16)).unwrap();
    let j0 = get_now(&again).unwrap();
    assert_eq!((j0.ticket.seq, j0.ticket.deliveries), (0, 1));
    assert!(matches!(
        again.ack(ja.ticket),
        Err(litemq::Error::InvalidArgument(_))
    ));
    assert!(again.ack(j0.ticket).unwrap());
}

/// Issue 30, item 9: a group created under an early-boot clock (1970), then
/// the clock set to the present: a lease still holds (it used to be already
/// expired, so every get handed out the same job).
#[test]
fn a_large_forward_clock_step_after_creation_does_not_end_every_lease() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(5_000_000); // five seconds after the Unix epoch
    let q = small(dir.path()).clock(clock.clone()).open().unwrap();
    fill(&q, 2);
    let wq = q.work_queue("w", options(16)).unwrap();
    clock.set(T0); // NTP steps the clock by 57 years
    let first = get_now(&wq).unwrap();
    std::thread::sleep(Duration::from_millis(30)); // a scan is due
    let second = get_now(&wq).unwrap();
    assert_eq!(
        (
            first.ticket.seq,
            second.ticket.seq,
            second.ticket.deliveries
        ),
        (0, 1, 1)
    );
    std::thread::sleep(Duration::from_millis(30));
    assert!(get_now(&wq).is_none(), "both jobs are leased");
    assert_eq!(wq.info(2).in_flight, 2);
    clock.advance(Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(30));
    let back = get_now(&wq).unwrap();
    assert_eq!((back.ticket.seq, back.ticket.deliveries), (0, 2));
}

/// Issue 30, item 9: steps of the wall clock, back or forward, neither
/// stretch nor cut a lease or a nack's delay: they run on the monotonic
/// clock.
#[test]
fn wall_clock_steps_neither_stretch_nor_cut_a_lease() {
    let (_dir, clock, q) = fixture(3);
    let half = WorkQueueOptions {
        visibility_timeout: Duration::from_millis(500),
        ..options(16)
    };
    let wq = q.work_queue("w", half).unwrap();
    clock.advance(Duration::from_secs(7200));
    let job = get_now(&wq).unwrap();
    assert_eq!(job.ticket.seq, 0);
    // An hour back: the 0.5 s lease still ends 0.5 s later.
    clock.set(T0 + 3_600_000_000);
    clock.advance(Duration::from_millis(600));
    std::thread::sleep(Duration::from_millis(30));
    let back = get_now(&wq).unwrap();
    assert_eq!((back.ticket.seq, back.ticket.deliveries), (0, 2));
    // An hour forward: the lease does not end at once.
    clock.set(T0 + 3 * 3_600_000_000);
    std::thread::sleep(Duration::from_millis(30));
    let next = get_now(&wq).unwrap();
    assert_eq!(next.ticket.seq, 1, "job 0's second lease holds");
    // A nack's delay: the same, on the monotonic clock.
    assert!(wq.nack(next.ticket, Duration::from_millis(400)).unwrap());
    clock.set(T0);
    clock.advance(Duration::from_millis(300));
    std::thread::sleep(Duration::from_millis(30));
    let third = get_now(&wq).unwrap();
    assert_eq!(third.ticket.seq, 2, "job 1 is not ready yet");
    clock.advance(Duration::from_millis(150));
    std::thread::sleep(Duration::from_millis(30));
    let ready = get_now(&wq).unwrap();
    assert_eq!((ready.ticket.seq, ready.ticket.deliveries), (1, 2));
}

/// Issue 30, item 9: a lease taken on another boot (another host, another
/// time namespace) is read through the boot table as a wall-clock deadline,
/// bounded by the lease length.
#[test]
fn a_lease_of_another_boot_holds_until_its_wall_clock_deadline_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let here = clock_at(T0);
    let q = small(dir.path()).clock(here.clone()).open().unwrap();
    fill(&q, 2);
    let wq = q.work_queue("w", options(16)).unwrap();
    let held = get_now(&wq).unwrap();
    assert_eq!(held.ticket.seq, 0);
    // A process of another boot, 5,000 s after its boot.
    let there = std::sync::Arc::new(litemq::ManualClock::on_boot(
        T0,
        7,
        Duration::from_secs(5_000),
    ));
    let other = small(dir.path())
        .read_only(true)
        .clock(there.clone())
        .open()
        .unwrap();
    let wo = other.work_queue("w", options(16)).unwrap();
    let one = get_now(&wo).unwrap();
    assert_eq!(one.ticket.seq, 1, "job 0 is leased");
    assert!(wo.ack(one.ticket).unwrap());
    there.advance(Duration::from_millis(9_900));
    std::thread::sleep(Duration::from_millis(30));
    assert!(get_now(&wo).is_none(), "until T0 + 10 s by the wall clock");
    there.advance(Duration::from_millis(200));
    std::thread::sleep(Duration::from_millis(30));
    let back = get_now(&wo).unwrap();
    assert_eq!((back.ticket.seq, back.ticket.deliveries), (0, 2));
    // Seen from the first boot, the new lease holds by the wall clock...
    here.advance(Duration::from_millis(10_100));
    std::thread::sleep(Duration::from_millis(30));
    assert!(get_now(&wq).is_none());
    // ...unless its wall-clock deadline is further ahead than a lease can
    // be long: this wall clock was stepped back an hour.
    here.set(T0 - 3_600_000_000);
    std::thread::sleep(Duration::from_millis(30));
    let bounded = get_now(&wq).unwrap();
    assert_eq!((bounded.ticket.seq, bounded.ticket.deliveries), (0, 3));
}

/// Issue 30, item 10: the owner of a lease lives in another pid namespace
/// (another container on the same volume): its pid means nothing here, so
/// its lease holds until the deadline instead of being taken at once.
#[test]
fn an_owner_in_another_pid_namespace_keeps_its_lease_until_the_deadline() {
    let (dir, clock, q) = fixture(1);
    let wq = q.work_queue("w", options(16)).unwrap();
    assert_eq!(get_now(&wq).unwrap().ticket.seq, 0);
    drop(wq);
    let path = state_file(dir.path());
    let slot = slot_word(0);
    // The owner word as a process of another namespace leaves it: a pid
    // that is no live process here, and that namespace's inode.
    write_word(&path, slot + 1, DEAD_OWNER);
    let clock_word = read_word(&path, slot + 3);
    let mine = clock_word & 0xFFFF_FFFF;
    write_word(
        &path,
        slot + 3,
        (clock_word & !0xFFFF_FFFF) | (mine ^ 0x5A5A),
    );
    let wq = q.work_queue("w", options(16)).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    assert!(get_now(&wq).is_none(), "held until its deadline");
    clock.advance(Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(30));
    let back = get_now(&wq).unwrap();
    assert_eq!((back.ticket.seq, back.ticket.deliveries), (0, 2));
}

/// A version-1 state file (written before monotonic deadlines) still runs,
/// by its own rules: deadlines in wall-clock ms since its epoch, no clock
/// word.
#[test]
fn a_version_1_state_file_still_runs_on_its_own_rules() {
    use litemq::format::work_queue::{encode_header, file_len, WqHeader};
    let (dir, clock, q) = fixture(2);
    let v1 = WqHeader {
        version: 1,
        window: 16,
        epoch_us: T0,
        group_id: 0,
        name: "w".into(),
    };
    let dir_wq = dir.path().join("workqueues");
    std::fs::create_dir_all(&dir_wq).unwrap();
    let path = dir_wq.join("o4.wq"); // base32("w")
    let f = std::fs::File::create(&path).unwrap();
    f.write_all_at(&encode_header(&v1, 0), 0).unwrap();
    f.set_len(file_len(16)).unwrap();
    drop(f);
    let wq = q.work_queue("w", options(16)).unwrap();
    let job = get_now(&wq).unwrap();
    assert_eq!(read_word(&path, slot_word(0) + 3), 0, "no clock word in v1");
    let deadline = SlotWord::decode(read_word(&path, slot_word(0)))
        .unwrap()
        .deadline_ms;
    assert_eq!(deadline, 10_000, "ms since the epoch");
    clock.advance(Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(30));
    let back = get_now(&wq).unwrap();
    assert_eq!((back.ticket.seq, back.ticket.deliveries), (0, 2));
    assert!(!wq.ack(job.ticket).unwrap());
    assert!(wq.ack(back.ticket).unwrap());
    assert_eq!(&std::fs::read(&path).unwrap()[8..16], &1u64.to_le_bytes());
}

#[test]
fn pending_claim_and_release_follow_the_queue_clock() {
    let (dir, clock, q) = fixture(3);
    let a = q.work_queue("w", options(16)).unwrap();
    let b = q.work_queue("w", options(16)).unwrap();
    let first = get_now(&a).unwrap();
    let second = get_now(&a).unwrap();
    let p = q.work_queue_pending("w", usize::MAX).unwrap();
    assert_eq!(p, a.pending(usize::MAX), "read without a handle, the same");
    assert_eq!(
        p.iter()
            .map(|j| (j.seq, j.state, j.deliveries, j.overdue))
            .collect::<Vec<_>>(),
        [
            (0, JobState::Leased, 1, false),
            (1, JobState::Leased, 1, false)
        ],
        "job 2, never handed out, is not listed"
    );
    assert_eq!(p[0].owner_pid, Some(std::process::id()));
    assert_eq!(p[0].owner_alive, Some(true));
    assert_eq!(p[0].deadline_ms, Some(T0 / 1000 + 10_000), "wall clock");
    assert!(b.claim(0, false).unwrap().is_none(), "a live lease");
    assert!(b.claim(2, true).unwrap().is_none(), "never handed out");
    clock.advance(Duration::from_millis(10_000));
    assert!(a.pending(1)[0].overdue, "its deadline came");
    let taken = b.claim(0, false).unwrap().unwrap();
    assert_eq!((taken.ticket.seq, taken.ticket.deliveries), (0, 2));
    assert_eq!(taken.message.payload, payload(0));
    assert!(!a.ack(first.ticket).unwrap(), "the lease moved to b");
    // Release: ready at once, deliveries kept; the holder's ack refused.
    assert!(b.release(0).unwrap());
    assert!(!b.release(0).unwrap(), "ready already");
    assert!(!b.ack(taken.ticket).unwrap());
    assert_eq!(a.pending(1)[0].state, JobState::Delayed);
    let third = b.claim(0, false).unwrap().unwrap();
    assert_eq!(third.ticket.deliveries, 3);
    assert!(b.ack(third.ticket).unwrap());
    assert!(b.claim(0, true).unwrap().is_none(), "finished");
    // A lease held by a process that is gone is claimed before its deadline.
    let path = state_file(dir.path());
    let i = slot_word(1);
    let raw = read_word(&path, i);
    write_word(&path, i + 1, DEAD_OWNER);
    let p = a.pending(usize::MAX);
    assert_eq!(
        (p[0].seq, p[0].owner_alive),
        (1, Some(false)),
        "tag {raw:x} still trusted"
    );
    let taken = b.claim(1, false).unwrap().unwrap();
    assert_eq!((taken.ticket.seq, taken.ticket.deliveries), (1, 2));
    assert!(!a.ack(second.ticket).unwrap());
    // Handed out 255 times: deliveries can no longer tell two tickets apart.
    let worn = SlotWord {
        deliveries: 255,
        ..SlotWord::decode(read_word(&path, i)).unwrap()
    }
    .encode();
    write_word(&path, i, worn);
    write_word(&path, i + 2, worn);
    assert!(a.claim(1, true).unwrap().is_none());
    assert!(q.work_queue_pending("nope", 1).is_err());
}

/// Appends `(key, payload)` messages (no key: `None`).
fn fill_keys(q: &Queue, keys: &[Option<&str>]) {
    let app = q.appender().unwrap();
    for (i, k) in keys.iter().enumerate() {
        let p = payload(i as u64);
        let record = litemq::Record {
            key: k.map(str::as_bytes),
            ..litemq::Record::new(&p)
        };
        app.append_record(&record).unwrap();
    }
    app.flush().unwrap();
}

#[test]
fn an_ordered_group_holds_one_job_per_key_in_sequence_order() {
    let (_dir, clock, q) = fixture(0);
    // 0:a 1:b 2:a 3:- 4:b 5:a
    fill_keys(
        &q,
        &[Some("a"), Some("b"), Some("a"), None, Some("b"), Some("a")],
    );
    let ordered = WorkQueueOptions {
        ordered_by_key: true,
        ..options(16)
    };
    let a = q.work_queue("w", ordered.clone()).unwrap();
    let b = q.work_queue("w", ordered).unwrap();
    let seqs = |jobs: &[&litemq::Job]| jobs.iter().map(|j| j.ticket.seq).collect::<Vec<_>>();
    let j0 = get_now(&a).unwrap();
    let j1 = get_now(&b).unwrap();
    let j3 = get_now(&a).unwrap();
    assert_eq!(
        seqs(&[&j0, &j1, &j3]),
        [0, 1, 3],
        "2 and 4 wait for 0 and 1"
    );
    assert!(get_now(&b).is_none());
    assert!(get_now(&a).is_none());
    assert!(a.ack(j3.ticket).unwrap());
    assert!(b.ack(j1.ticket).unwrap());
    let j4 = get_now(&a).unwrap();
    assert_eq!(j4.ticket.seq, 4, "b's next, once 1 is finished");
    assert!(a.ack(j4.ticket).unwrap());
    // A nacked job keeps its key's place: it comes back before 2.
    assert!(a.nack(j0.ticket, Duration::ZERO).unwrap());
    let again = get_now(&b).unwrap();
    assert_eq!((again.ticket.seq, again.ticket.deliveries), (0, 2));
    assert!(get_now(&a).is_none(), "2 still waits");
    // A lease that runs out keeps it too.
    clock.advance(Duration::from_millis(10_001));
    std::thread::sleep(Duration::from_millis(30)); // a scan is due
    let late = get_now(&a).unwrap();
    assert_eq!((late.ticket.seq, late.ticket.deliveries), (0, 3));
    assert!(!b.ack(again.ticket).unwrap());
    assert!(a.ack(late.ticket).unwrap());
    let j2 = get_now(&b).unwrap();
    assert_eq!(j2.ticket.seq, 2);
    assert!(get_now(&a).is_none(), "5 waits for 2");
    assert!(b.ack(j2.ticket).unwrap());
    assert_eq!(get_now(&a).unwrap().ticket.seq, 5);
    let both = WorkQueueOptions {
        ordered_by_key: true,
        priority: true,
        ..options(16)
    };
    assert!(matches!(
        q.work_queue("x", both),
        Err(litemq::Error::InvalidArgument(_))
    ));
}

/// Random gets, acks, nacks and lease ends on three handles of an ordered
/// group: every handout (first or again) is of a job all of whose key's
/// earlier jobs were finished (acked, or dead-lettered), and every job ends.
#[test]
fn an_ordered_group_never_hands_out_a_key_out_of_order() {
    use std::sync::{Arc, Mutex};
    const VIS: u64 = 1_000;
    let seeds = if soak() { 200 } else { 12 };
    for seed in 0..seeds {
        let mut rng = Rng(seed);
        let dir = tempfile::tempdir().unwrap();
        let clock = clock_at(T0);
        let q = small(dir.path()).clock(clock.clone()).open().unwrap();
        let app = q.appender().unwrap();
        let finished: Arc<Mutex<std::collections::BTreeSet<u64>>> = Arc::default();
        let sink_seen = finished.clone();
        let opts = WorkQueueOptions {
            visibility_timeout: Duration::from_millis(VIS),
            max_deliveries: 3,
            window: 16,
            ordered_by_key: true,
            dead_letter: Some(Arc::new(move |r: &litemq::Record<'_>| {
                let seq = r
                    .headers
                    .iter()
                    .find(|h| h.name == "litemq.dlq.seq")
                    .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                    .unwrap();
                sink_seen.lock().unwrap().insert(seq);
                Ok(())
            })),
            ..WorkQueueOptions::default()
        };
        let handles: Vec<_> = (0..3)
            .map(|_| q.work_queue("o", opts.clone()).unwrap())
            .collect();
        let mut keys: Vec<Option<u8>> = Vec::new();
        let mut held: Vec<(usize, litemq::Ticket)> = Vec::new();
        let check = |seq: u64, keys: &[Option<u8>]| {
            let done = finished.lock().unwrap();
            if let Some(k) = keys[seq as usize] {
                for earlier in 0..seq {
                    if keys[earlier as usize] == Some(k) {
                        assert!(
                            done.contains(&earlier),
                            "seed {seed}: job {seq} of key {k} handed out before {earlier} finished"
                        );
                    }
                }
            }
        };
        for _ in 0..300 {
            match rng.below(10) {
                0 | 1 => {
                    for _ in 0..=rng.below(3) {
                        let k = rng.below(4);
                        let key = (k < 3).then_some(k as u8);
                        let p = payload(keys.len() as u64);
                        let kb = key.map(|k| [b'a' + k]);
                        app.append_record(&litemq::Record {
                            key: kb.as_ref().map(|b| &b[..]),
                            ..litemq::Record::new(&p)
                        })
                        .unwrap();
                        keys.push(key);
                    }
                    app.flush().unwrap();
                }
                2..=4 => {
                    let h = rng.below(3) as usize;
                    if let Some(job) = get_now(&handles[h]) {
                        check(job.ticket.seq, &keys);
                        held.push((h, job.ticket));
                    }
                }
                5 | 6 if !held.is_empty() => {
                    let (h, t) = held.swap_remove(rng.below(held.len() as u64) as usize);
                    if handles[h].ack(t).unwrap() {
                        finished.lock().unwrap().insert(t.seq);
                    }
                }
                7 if !held.is_empty() => {
                    let (h, t) = held.swap_remove(rng.below(held.len() as u64) as usize);
                    handles[h].nack(t, Duration::ZERO).unwrap();
                }
                8 => clock.advance(Duration::from_millis(rng.below(2 * VIS))),
                _ => {}
            }
        }
        // Drain: every job ends (acked or dead-lettered), none out of order.
        for (h, t) in held.drain(..) {
            if handles[h].ack(t).unwrap() {
                finished.lock().unwrap().insert(t.seq);
            }
        }
        let mut rounds = 0;
        while finished.lock().unwrap().len() < keys.len() {
            rounds += 1;
            assert!(rounds < 200, "seed {seed}: jobs never finished");
            clock.advance(Duration::from_millis(VIS + 1));
            std::thread::sleep(Duration::from_millis(25)); // scans are due
            for wq in &handles {
                while let Some(job) = get_now(wq) {
                    check(job.ticket.seq, &keys);
                    if wq.ack(job.ticket).unwrap() {
                        finished.lock().unwrap().insert(job.ticket.seq);
                    }
                }
            }
        }
    }
}
