//! Several writer processes: what `multi_writer` costs a single process, and
//! what four writers sharing one queue reach. Every figure is measured in
//! this run against the default single-writer mode as the baseline.
//! `cargo bench --bench multi_writer` (`-- --quick` for fewer repeats).
//!
//! Four writers are four queue handles in one process, each with its own I/O
//! thread: they take `append.lock` exactly as four processes would.

use std::path::Path;
use std::time::{Duration, Instant};

use litemq::{Queue, QueueBuilder};

const SIZE: usize = 64;

fn open(path: &Path, multi: bool) -> Queue {
    QueueBuilder::new(path)
        .file_size(256 << 20)
        .multi_writer(multi)
        .open()
        .unwrap()
}

/// Time to append `n` messages from `writers` threads (batches of `batch`,
/// or one `append` per message when `batch` is 1), until written. With
/// `multi` each thread has its own handle (as a process would); without,
/// the threads share the one handle a single writer process has.
fn run(multi: bool, writers: usize, n: u64, batch: usize) -> Duration {
    let dir = tempfile::tempdir().unwrap();
    let handles = if multi { writers } else { 1 };
    let queues: Vec<Queue> = (0..handles).map(|_| open(dir.path(), multi)).collect();
    let payloads: Vec<Vec<u8>> = (0..batch).map(|_| vec![7u8; SIZE]).collect();
    let per = n / writers as u64;
    let start = Instant::now();
    std::thread::scope(|s| {
        for k in 0..writers {
            let q = &queues[k % handles];
            let payloads = &payloads;
            s.spawn(move || {
                let app = q.appender().unwrap();
                let mut done = 0;
                while done < per {
                    if batch == 1 {
                        app.append(&payloads[0]).unwrap();
                        done += 1;
                    } else {
                        app.append_batch(payloads.iter().map(Vec::as_slice))
                            .unwrap();
                        done += batch as u64;
                    }
                }
            });
        }
    });
    // Written (visible), not merely queued.
    while queues[0].next_seq() < per * writers as u64 {
        std::thread::yield_now();
    }
    let took = start.elapsed();
    drop(queues);
    took
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let repeat = if quick { 3 } else { 7 };
    let cases: [(&str, usize, u64, usize); 3] = [
        ("append_batch(1000) x 64 B, 1 writer", 1, 2_000_000, 1000),
        ("append() x 64 B, 1 writer", 1, 500_000, 1),
        ("append_batch(1000) x 64 B, 4 writers", 4, 2_000_000, 1000),
    ];
    println!(
        "{:<40} {:>14} {:>14} {:>7}",
        "case", "single M/s", "multi M/s", "ratio"
    );
    for (name, writers, n, batch) in cases {
        // Interleave baseline and subject so machine noise hits both alike.
        let (mut base, mut multi) = (Vec::new(), Vec::new());
        for _ in 0..repeat {
            base.push(run(false, writers, n, batch));
            multi.push(run(true, writers, n, batch));
        }
        let rate = |d: Duration| n as f64 / d.as_secs_f64() / 1e6;
        let (b, m) = (rate(median(base)), rate(median(multi)));
        println!("{name:<40} {b:>14.2} {m:>14.2} {:>6.2}x", m / b);
    }
}
