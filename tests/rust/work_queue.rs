//! Work queues: the state file's bytes, leases on a manual clock, and the
//! crash states a killed worker can leave (built by writing the words it
//! would have written, then opening the group as the next worker would).

mod common;

use std::time::Duration;

use common::wq::*;
use common::*;
use litemq::format::work_queue::{
    slot_word, JobState, SlotWord, WQ_HEADER_LEN, WQ_SLOT_LEN, W_BOOTS, W_BOOT_NEXT, W_CURSOR,
    W_LOW,
};
use litemq::{Queue, WorkQueueOptions};

#[test]
fn a_new_group_has_the_documented_bytes() {
    let (dir, _, q) = fixture(3);
    let _wq = q.work_queue("thumbnails", options(64)).unwrap();
    let path = state_file(dir.path());
    assert_eq!(
        path.file_name().unwrap(),
        "oruhk3lcnzqws3dt.wq",
        "base32 of the name"
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), WQ_HEADER_LEN + 64 * WQ_SLOT_LEN);
    assert_eq!(&bytes[0..8], b"LMQWORKQ");
    assert_eq!(&bytes[8..16], &2u64.to_le_bytes(), "version");
    assert_eq!(&bytes[16..24], &64u64.to_le_bytes(), "window");
    assert_eq!(&bytes[24..32], &T0.to_le_bytes(), "epoch");
    assert_eq!(&bytes[32..40], &10u64.to_le_bytes(), "name length");
    assert_ne!(&bytes[48..56], &[0; 8], "a random group id");
    assert_eq!(&bytes[56..64], &[0; 8]);
    assert_eq!(&bytes[64..74], b"thumbnails");
    assert_eq!(read_word(&path, W_LOW), 0);
    assert_eq!(read_word(&path, W_CURSOR), 0);
    // The boot table: this handle's boot (the manual clock's) and the wall
    // time of its monotonic zero, in ms.
    assert_eq!(read_word(&path, W_BOOT_NEXT), 1);
    assert_eq!(
        read_word(&path, W_BOOTS),
        u64::from(litemq::ManualClock::BOOT)
    );
    assert_eq!(read_word(&path, W_BOOTS + 1), T0 / 1000);
    assert!(
        bytes[264..2040].iter().all(|&b| b == 0)
            && bytes[2064..WQ_HEADER_LEN].iter().all(|&b| b == 0),
        "the rest of the header is zero"
    );
    assert!(
        bytes[WQ_HEADER_LEN..].iter().all(|&b| b == 0),
        "slots start zero"
    );
}

#[test]
fn leases_run_out_on_the_queue_clock_and_acks_move_the_mark() {
    let (dir, clock, q) = fixture(3);
    let wq = q.work_queue("w", options(16)).unwrap();
    let jobs: Vec<_> = (0..3).map(|_| get_now(&wq).unwrap()).collect();
    assert_eq!(
        jobs.iter().map(|j| j.ticket.seq).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert_eq!(jobs[1].message.payload, payload(1));
    assert!(wq.ack(jobs[2].ticket).unwrap());
    assert!(wq.ack(jobs[0].ticket).unwrap());
    let path = state_file(dir.path());
    assert_eq!(read_word(&path, W_LOW), 1, "job 1 holds the mark");
    clock.advance(Duration::from_millis(9_999));
    std::thread::sleep(Duration::from_millis(30)); // a scan is due
    assert!(get_now(&wq).is_none(), "1 ms before its deadline");
    clock.advance(Duration::from_millis(2));
    std::thread::sleep(Duration::from_millis(30));
    let again = get_now(&wq).unwrap();
    assert_eq!((again.ticket.seq, again.ticket.deliveries), (1, 2));
    assert!(!wq.ack(jobs[1].ticket).unwrap(), "the first lease is lost");
    assert!(wq.ack(again.ticket).unwrap());
    assert_eq!(read_word(&path, W_LOW), 3);
}

#[test]
fn a_worker_killed_between_the_cursor_and_the_slot_loses_no_job() {
    let (dir, _, q) = fixture(2);
    drop(q.work_queue("w", options(16)).unwrap());
    // A worker moved the cursor past job 0, then died before claiming its slot.
    write_word(&state_file(dir.path()), W_CURSOR, 1);
    let wq = q.work_queue("w", options(16)).unwrap();
    let first = get_now(&wq).unwrap();
    assert_eq!((first.ticket.seq, first.ticket.deliveries), (0, 1));
    assert_eq!(get_now(&wq).unwrap().ticket.seq, 1);
}

#[test]
fn an_owner_is_trusted_only_once_its_claim_is_complete() {
    let (dir, _, q) = fixture(1);
    drop(q.work_queue("w", options(16)).unwrap());
    let path = state_file(dir.path());
    let leased = SlotWord {
        lap: 0,
        state: JobState::Leased,
        deliveries: 1,
        deadline_ms: 10_000,
    }
    .encode();
    let slot = slot_word(0);
    write_word(&path, W_CURSOR, 1);
    write_word(&path, slot, leased);
    // Killed after the compare-and-swap, before the owner and the claim
    // tag: the owner word is a dead process's, but the tag does not match,
    // so the lease stands until its deadline.
    write_word(&path, slot + 1, DEAD_OWNER);
    let wq = q.work_queue("w", options(16)).unwrap();
    assert!(
        get_now(&wq).is_none(),
        "a half-done claim is left to its deadline"
    );
    // The claim completed: the owner is dead, so the job comes back at once.
    write_word(&path, slot + 2, leased);
    std::thread::sleep(Duration::from_millis(30)); // a scan is due
    let job = get_now(&wq).unwrap();
    assert_eq!((job.ticket.seq, job.ticket.deliveries), (0, 2));
    assert!(wq.ack(job.ticket).unwrap());
}

#[test]
fn a_half_done_claim_comes_back_at_its_deadline() {
    let (dir, clock, q) = fixture(1);
    drop(q.work_queue("w", options(16)).unwrap());
    let path = state_file(dir.path());
    let slot = slot_word(0);
    write_word(&path, W_CURSOR, 1);
    write_word(
        &path,
        slot,
        SlotWord {
            lap: 0,
            state: JobState::Leased,
            deliveries: 1,
            deadline_ms: 10_000,
        }
        .encode(),
    );
    let wq = q.work_queue("w", options(16)).unwrap();
    assert!(get_now(&wq).is_none());
    clock.advance(Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(30));
    let job = get_now(&wq).unwrap();
    assert_eq!((job.ticket.seq, job.ticket.deliveries), (0, 2));
}

#[test]
fn the_ring_reuses_slots_lap_after_lap() {
    let (_dir, _, q) = fixture(100);
    let wq = q.work_queue("ring", options(16)).unwrap();
    let mut held = std::collections::VecDeque::new();
    let mut seen = Vec::new();
    while seen.len() < 100 {
        match get_now(&wq) {
            Some(job) => {
                seen.push(job.ticket.seq);
                held.push_back(job.ticket);
            }
            None => {
                // The ring is full: ack the oldest half, newest first.
                assert_eq!(held.len(), 16, "nothing else stops a get");
                let half: Vec<_> = held.drain(..8).collect();
                for t in half.into_iter().rev() {
                    assert!(wq.ack(t).unwrap());
                }
            }
        }
    }
    for t in held {
        assert!(wq.ack(t).unwrap());
    }
    assert_eq!(seen, (0..100).collect::<Vec<_>>());
    let info = &q.work_queues().unwrap()[0];
    assert_eq!(
        (info.low, info.cursor, info.acked, info.pending),
        (100, 100, 100, 0)
    );
}

/// The model's view of one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Model {
    Leased { deliveries: u8, deadline: u64 },
    Delayed { deliveries: u8, ready: u64 },
    Acked,
    Dead,
}

/// Random appends, gets, acks, nacks, extends and clock jumps on one handle,
/// against a model of every job (deadlines on a manual clock, so every
/// lease end and nack delay is exact). Checked after every step: which job
/// `get` hands out (the oldest ready redelivery, else the job at the
/// cursor, with dead letters on the way), what acks and nacks return, the
/// figures, and the dead-letter queue.
#[test]
fn random_operations_match_a_model() {
    let seeds = if soak() { 300 } else { 25 };
    for seed in 0..seeds {
        run_model(seed, false);
    }
}

/// The same for a priority group, messages at random priorities 0 to 3:
/// new jobs come highest priority first (the oldest among equals) within the
/// window, unless the oldest has waited 60 s (`max_wait`).
#[test]
fn a_priority_group_matches_the_model() {
    let seeds = if soak() { 300 } else { 25 };
    for seed in 0..seeds {
        run_model(seed, true);
    }
}

fn run_model(seed: u64, priority: bool) {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    const MAX: u8 = 3;
    const WINDOW: u64 = 16;
    const VIS: u64 = 1_000; // ms
    let mut rng = Rng(seed);
    let (_dir, clock, q) = fixture(0);
    let app = q.appender().unwrap();
    let dead_letters: Arc<Mutex<Vec<u64>>> = Arc::default();
    let sink_seen = dead_letters.clone();
    let wq = q
        .work_queue(
            "model",
            WorkQueueOptions {
                visibility_timeout: Duration::from_millis(VIS),
                max_deliveries: MAX,
                window: WINDOW,
                start_seq: None,
                priority,
                dead_letter: Some(Arc::new(move |r: &litemq::Record<'_>| {
                    let seq = r
                        .headers
                        .iter()
                        .find(|h| h.name == "litemq.dlq.seq")
                        .map(|h| std::str::from_utf8(h.value).unwrap().parse().unwrap())
                        .unwrap();
                    sink_seen.lock().unwrap().push(seq);
                    Ok(())
                })),
                ..WorkQueueOptions::default()
            },
        )
        .unwrap();
    let mut published = 0u64;
    let mut cursor = 0u64;
    let mut prio: Vec<u8> = Vec::new();
    let mut written: Vec<u64> = Vec::new();
    let mut now = 0u64;
    let mut jobs: BTreeMap<u64, Model> = BTreeMap::new();
    let mut held: Vec<litemq::Ticket> = Vec::new();
    let mut dead_expected: Vec<u64> = Vec::new();
    let ctx = |step: usize| format!("seed {seed}, priority {priority}, step {step}");
    for step in 0..200 {
        match rng.below(10) {
            0 => {
                let k = 1 + rng.below(4);
                for _ in 0..k {
                    let p = if priority { rng.below(4) as u8 } else { 0 };
                    app.append_record(&litemq::Record {
                        payload: &payload(published),
                        priority: p,
                        ..litemq::Record::default()
                    })
                    .unwrap();
                    prio.push(p);
                    written.push(now);
                    published += 1;
                }
                app.flush().unwrap();
            }
            1..=3 => {
                // The oldest ready redelivery, dead-lettering on the way.
                let mut expected = None;
                for (&seq, m) in jobs.iter_mut() {
                    let (deliveries, ready) = match *m {
                        Model::Leased {
                            deliveries,
                            deadline,
                        } => (deliveries, deadline <= now),
                        Model::Delayed { deliveries, ready } => (deliveries, ready <= now),
                        _ => continue,
                    };
                    if !ready {
                        continue;
                    }
                    if deliveries >= MAX {
                        *m = Model::Dead;
                        dead_expected.push(seq);
                        continue;
                    }
                    expected = Some((seq, deliveries + 1));
                    break;
                }
                // Dead letters on the way may have moved the mark.
                let low = (0..cursor)
                    .find(|s| !matches!(jobs.get(s), Some(Model::Acked | Model::Dead)))
                    .unwrap_or(cursor);
                if expected.is_none() && cursor < published && cursor < low + WINDOW {
                    // Sequence order; with priority, the highest priority not
                    // handed out yet in the window (the oldest among equals),
                    // unless the oldest waited 60 s (max_wait).
                    let seq = if !priority || written[cursor as usize] + 60_000 <= now {
                        cursor
                    } else {
                        (cursor..published.min(low + WINDOW))
                            .filter(|s| !jobs.contains_key(s))
                            .max_by_key(|&s| (prio[s as usize], std::cmp::Reverse(s)))
                            .unwrap()
                    };
                    expected = Some((seq, 1));
                    jobs.insert(seq, Model::Dead); // replaced below: claimed
                    while cursor < published && jobs.contains_key(&cursor) {
                        cursor += 1;
                    }
                }
                let got = get_now(&wq);
                assert_eq!(
                    got.as_ref().map(|j| (j.ticket.seq, j.ticket.deliveries)),
                    expected,
                    "{}: get",
                    ctx(step)
                );
                if let Some(job) = got {
                    assert_eq!(job.message.payload, payload(job.ticket.seq));
                    jobs.insert(
                        job.ticket.seq,
                        Model::Leased {
                            deliveries: job.ticket.deliveries,
                            deadline: now + VIS,
                        },
                    );
                    held.push(job.ticket);
                }
            }
            4 | 5 if !held.is_empty() => {
                let t = held.swap_remove(rng.below(held.len() as u64) as usize);
                let holds = matches!(jobs.get(&t.seq),
                    Some(Model::Leased { deliveries, .. }) if *deliveries == t.deliveries);
                if rng.chance(50) {
                    assert_eq!(wq.ack(t).unwrap(), holds, "{}: ack {t:?}", ctx(step));
                    if holds {
                        jobs.insert(t.seq, Model::Acked);
                    }
                } else {
                    let delay = if rng.chance(50) { 0 } else { 500 };
                    let nacked = wq.nack(t, Duration::from_millis(delay)).unwrap();
                    assert_eq!(nacked, holds, "{}: nack {t:?}", ctx(step));
                    if holds {
                        jobs.insert(
                            t.seq,
                            Model::Delayed {
                                deliveries: t.deliveries,
                                ready: now + delay,
                            },
                        );
                    }
                }
            }
            6 if !held.is_empty() => {
                let t = held[rng.below(held.len() as u64) as usize];
                let holds = matches!(jobs.get(&t.seq),
                    Some(Model::Leased { deliveries, .. }) if *deliveries == t.deliveries);
                let extended = wq.extend(t, Duration::from_millis(VIS)).unwrap();
                assert_eq!(extended, holds, "{}: extend {t:?}", ctx(step));
                if holds {
                    jobs.insert(
                        t.seq,
                        Model::Leased {
                            deliveries: t.deliveries,
                            deadline: now + VIS,
                        },
                    );
                }
            }
            _ => {
                let by = rng.below(1_500);
                clock.advance(Duration::from_millis(by));
                now += by;
            }
        }
        let info = wq.info(published);
        let count = |f: &dyn Fn(&Model) -> bool| jobs.values().filter(|m| f(m)).count() as u64;
        let in_flight = count(&|m| matches!(m, Model::Leased { deadline, .. } if *deadline > now));
        let acked = count(&|m| *m == Model::Acked);
        let low = (0..cursor)
            .find(|s| !matches!(jobs.get(s), Some(Model::Acked | Model::Dead)))
            .unwrap_or(cursor);
        assert_eq!(
            (info.cursor, info.in_flight, info.acked, info.low),
            (cursor, in_flight, acked, low),
            "{}: figures",
            ctx(step)
        );
        let claimed_ahead = jobs.range(cursor..).count() as u64;
        assert_eq!(
            info.pending,
            published - cursor - claimed_ahead
                + count(&|m| !matches!(m, Model::Acked | Model::Dead))
                - in_flight,
            "{}: pending",
            ctx(step)
        );
        assert_eq!(info.dead_lettered, dead_expected.len() as u64);
        assert_eq!(
            *dead_letters.lock().unwrap(),
            dead_expected,
            "{}",
            ctx(step)
        );
    }
}

#[test]
fn a_slot_reused_by_the_next_lap_is_never_handed_out_for_the_old_job() {
    // A scan that read the mark before it moved on, or a header page older
    // than the slot pages after a machine crash: the slot of a finished job
    // already holds the claim of the job one lap later. Neither job may be
    // handed out again.
    let (dir, _, q) = fixture(20);
    let wq = q.work_queue("lap", options(16)).unwrap();
    for _ in 0..16 {
        let job = get_now(&wq).unwrap();
        assert!(wq.ack(job.ticket).unwrap());
    }
    let sixteen = get_now(&wq).unwrap();
    assert_eq!(sixteen.ticket.seq, 16, "in slot 0, one lap on");
    drop(wq);
    let path = state_file(dir.path());
    write_word(&path, W_LOW, 0);
    write_word(&path, W_CURSOR, 16);
    let wq = q.work_queue("lap", options(16)).unwrap();
    let next = get_now(&wq).unwrap();
    assert_eq!(
        (next.ticket.seq, next.ticket.deliveries),
        (17, 1),
        "job 0 (acked) and job 16 (leased) are not handed out"
    );
    assert!(wq.ack(sixteen.ticket).unwrap(), "job 16's lease survived");
}

#[test]
fn a_damaged_slot_gives_its_job_back_instead_of_blocking_the_mark() {
    let (dir, _, q) = fixture(2);
    let wq = q.work_queue("damage", options(16)).unwrap();
    let zero = get_now(&wq).unwrap();
    let one = get_now(&wq).unwrap();
    assert!(wq.ack(one.ticket).unwrap());
    // State code 9 is undefined: the slot of job 0 is damaged.
    write_word(&state_file(dir.path()), slot_word(0), (9 << 12) | 0xABC);
    assert!(
        !wq.ack(zero.ticket).unwrap(),
        "the lease is gone with the damage"
    );
    std::thread::sleep(Duration::from_millis(30)); // a scan is due
    let again = get_now(&wq).unwrap();
    assert_eq!(again.ticket.seq, 0, "job 0 comes back");
    assert!(wq.ack(again.ticket).unwrap());
    assert_eq!(read_word(&state_file(dir.path()), W_LOW), 2);
}

fn append_with(q: &Queue, priority: u8, expires_at: Option<u64>) -> u64 {
    let app = q.appender().unwrap();
    let seq = app
        .append_record(&litemq::Record {
            payload: b"job",
            priority,
            expires_at,
            ..litemq::Record::default()
        })
        .unwrap();
    app.flush().unwrap();
    seq
}

fn priority_options(max_wait: Option<Duration>) -> WorkQueueOptions {
    WorkQueueOptions {
        priority: true,
        max_wait,
        ..options(16)
    }
}

#[test]
fn a_priority_group_hands_out_higher_priorities_first_fifo_within_one() {
    let (_dir, _, q) = fixture(0);
    for p in [0, 5, 1, 5, 0, 9] {
        append_with(&q, p, None);
    }
    let a = q.work_queue("p", priority_options(None)).unwrap();
    let b = q.work_queue("p", priority_options(None)).unwrap();
    let mut order = Vec::new();
    for i in 0..6 {
        let job = get_now(if i % 2 == 0 { &a } else { &b }).unwrap();
        assert_eq!(job.ticket.deliveries, 1);
        order.push(job.ticket.seq);
    }
    assert_eq!(
        order,
        [5, 1, 3, 2, 0, 4],
        "9, then 5 and 5 in order, then 1, then 0s"
    );
    assert!(get_now(&a).is_none());
    let info = a.info(6);
    assert_eq!((info.cursor, info.in_flight, info.pending), (6, 6, 0));
    // The ordinary path on the same group sees nothing left either.
    let fifo = q.work_queue("p", options(16)).unwrap();
    assert!(get_now(&fifo).is_none());
}

#[test]
fn max_wait_serves_an_old_low_priority_job_first() {
    let (_dir, clock, q) = fixture(0);
    let old = append_with(&q, 0, None);
    clock.advance(Duration::from_secs(61));
    let urgent = append_with(&q, 200, None);
    let starving = q
        .work_queue("s", priority_options(Some(Duration::from_secs(60))))
        .unwrap();
    assert_eq!(
        get_now(&starving).unwrap().ticket.seq,
        old,
        "waited 61 s > 60 s"
    );
    assert_eq!(get_now(&starving).unwrap().ticket.seq, urgent);
    let unbounded = q.work_queue("u", priority_options(None)).unwrap();
    assert_eq!(
        get_now(&unbounded).unwrap().ticket.seq,
        urgent,
        "no bound: priority wins"
    );
}

#[test]
fn a_priority_claim_ahead_of_the_cursor_comes_back_when_its_owner_dies() {
    let (dir, _, q) = fixture(0);
    for p in [0, 0, 7] {
        append_with(&q, p, None);
    }
    let a = q.work_queue("d", priority_options(None)).unwrap();
    let job = get_now(&a).unwrap();
    assert_eq!(job.ticket.seq, 2, "claimed ahead of the cursor");
    drop(a);
    // Its owner dies (the claim was complete).
    let path = state_file(dir.path());
    assert_eq!(read_word(&path, W_CURSOR), 0);
    write_word(&path, slot_word(2) + 1, DEAD_OWNER);
    let b = q.work_queue("d", priority_options(None)).unwrap();
    let again = get_now(&b).unwrap();
    assert_eq!((again.ticket.seq, again.ticket.deliveries), (2, 2));
}

#[test]
fn expired_messages_are_never_handed_out_and_may_be_dead_lettered() {
    use std::sync::{Arc, Mutex};
    let (_dir, clock, q) = fixture(0);
    let short = append_with(&q, 0, Some(T0 + 1_000_000));
    let long = append_with(&q, 0, Some(T0 + 100_000_000));
    let forever = append_with(&q, 0, None);
    clock.advance(Duration::from_secs(2));
    let letters: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();
    let seen = letters.clone();
    let sink: litemq::DeadLetterSink = Arc::new(move |r: &litemq::Record<'_>| {
        let header = |n: &str| {
            let h = r.headers.iter().find(|h| h.name == n).unwrap();
            String::from_utf8(h.value.to_vec()).unwrap()
        };
        assert_eq!(r.expires_at, None, "a dead letter does not expire");
        let seq = header("litemq.dlq.seq").parse().unwrap();
        seen.lock()
            .unwrap()
            .push((seq, header("litemq.dlq.reason")));
        Ok(())
    });
    for (name, to_dlq) in [("plain", false), ("dlq", true)] {
        let wq = q
            .work_queue(
                name,
                WorkQueueOptions {
                    dead_letter: Some(sink.clone()),
                    dead_letter_expired: to_dlq,
                    ..options(16)
                },
            )
            .unwrap();
        let first = get_now(&wq).unwrap();
        assert_eq!(first.ticket.seq, long, "{name}: the expired one is skipped");
        let info = wq.info(3);
        assert_eq!((info.expired, info.low), (1, 1), "{name}");
        // A lease that outlives its message: not handed out again.
        clock.advance(Duration::from_secs(200));
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(get_now(&wq).unwrap().ticket.seq, forever, "{name}");
        std::thread::sleep(Duration::from_millis(30));
        assert!(
            get_now(&wq).is_none(),
            "{name}: job {long} expired while leased"
        );
        assert_eq!(wq.info(3).expired, 2, "{name}");
        assert!(!wq.ack(first.ticket).unwrap(), "{name}: too late");
        clock.set(T0 + 2_000_000);
    }
    assert_eq!(
        *letters.lock().unwrap(),
        [
            (short, "expired".to_string()),
            (long, "expired".to_string())
        ],
        "only the group that asked dead-letters expired jobs"
    );
}
