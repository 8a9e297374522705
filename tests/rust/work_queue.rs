//! Work queues: the state file's bytes, leases on a manual clock, and the
//! crash states a killed worker can leave (built by writing the words it
//! would have written, then opening the group as the next worker would).

mod common;

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::*;
use litemq::format::work_queue::{
    slot_word, JobState, SlotWord, WQ_HEADER_LEN, WQ_SLOT_LEN, W_CURSOR, W_LOW,
};
use litemq::{Queue, WorkQueueOptions};

const T0: u64 = 1_800_000_000_000_000;

fn fill(q: &Queue, n: u64) {
    let app = q.appender().unwrap();
    for i in 0..n {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
}

fn options(window: u64) -> WorkQueueOptions {
    WorkQueueOptions {
        visibility_timeout: Duration::from_secs(10),
        window,
        ..WorkQueueOptions::default()
    }
}

fn state_file(base: &Path) -> PathBuf {
    let dir = base.join("workqueues");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().unwrap()
}

fn write_word(path: &Path, word: usize, value: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&value.to_le_bytes(), (word * 8) as u64)
        .unwrap();
}

fn read_word(path: &Path, word: usize) -> u64 {
    let f = std::fs::File::open(path).unwrap();
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, (word * 8) as u64).unwrap();
    u64::from_le_bytes(b)
}

fn never(_: &mut ()) -> bool {
    false
}

fn get_now(wq: &litemq::WorkQueue) -> Option<litemq::Job> {
    wq.get(Duration::ZERO, &mut || never(&mut ())).unwrap()
}

/// An identity (`start_time << 22 | pid`) no live process has.
const DEAD_OWNER: u64 = (12_345 << 22) | ((1 << 22) - 1);

#[test]
fn a_new_group_has_the_documented_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = small(dir.path()).clock(clock).open().unwrap();
    fill(&q, 3);
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
    assert_eq!(&bytes[8..16], &1u64.to_le_bytes(), "version");
    assert_eq!(&bytes[16..24], &64u64.to_le_bytes(), "window");
    assert_eq!(&bytes[24..32], &T0.to_le_bytes(), "epoch");
    assert_eq!(&bytes[32..40], &10u64.to_le_bytes(), "name length");
    assert_eq!(&bytes[64..74], b"thumbnails");
    assert_eq!(read_word(&path, W_LOW), 0);
    assert_eq!(read_word(&path, W_CURSOR), 0);
    assert!(
        bytes[WQ_HEADER_LEN..].iter().all(|&b| b == 0),
        "slots start zero"
    );
}

#[test]
fn leases_run_out_on_the_queue_clock_and_acks_move_the_mark() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = small(dir.path()).clock(clock.clone()).open().unwrap();
    fill(&q, 3);
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
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).clock(clock_at(T0)).open().unwrap();
    fill(&q, 2);
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
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = small(dir.path()).clock(clock.clone()).open().unwrap();
    fill(&q, 1);
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
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(T0);
    let q = small(dir.path()).clock(clock.clone()).open().unwrap();
    fill(&q, 1);
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
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).clock(clock_at(T0)).open().unwrap();
    fill(&q, 100);
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
