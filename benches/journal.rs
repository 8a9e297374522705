//! Engine benchmarks: append and read throughput, append-to-tailer latency,
//! seek and open times, and the frame CRC against the crates it replaced.
//! `cargo bench --bench journal` (`-- crc` for the CRC alone).
//!
//! Throughput figures count a message as appended once the I/O thread has
//! written it into the mapping (visible to tailers), not when `append`
//! returns, so the channel cannot hide a slow writer.
#![expect(
    missing_docs,
    reason = "criterion_group! defines an undocumented pub fn"
)]

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use litemq::{Queue, QueueBuilder, Start, WaitStrategy};

fn open(path: &Path) -> Queue {
    QueueBuilder::new(path).file_size(256 << 20).open().unwrap()
}

fn wait_written(q: &Queue, target: u64) {
    while q.next_seq() < target {
        std::hint::spin_loop();
    }
}

fn append_throughput(c: &mut Criterion) {
    let mut g = c.benchmark_group("append");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    for size in [64usize, 256, 1024, 65536] {
        let n: u64 = if size >= 65536 { 20_000 } else { 1_000_000 };
        g.throughput(Throughput::Bytes(size as u64 * n));
        g.bench_with_input(BenchmarkId::new("single", size), &size, |b, &size| {
            let dir = tempfile::tempdir().unwrap();
            let q = open(dir.path());
            let app = q.appender().unwrap();
            let payload = vec![7u8; size];
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    let first = q.next_seq();
                    for _ in 0..n {
                        app.append(&payload).unwrap();
                    }
                    wait_written(&q, first + n);
                }
                start.elapsed()
            });
            print_rate("append", size, n, &q);
        });
    }
    let n = 1_000_000u64;
    g.throughput(Throughput::Bytes(64 * n));
    g.bench_function("batch/64", |b| {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path());
        let app = q.appender().unwrap();
        let payloads: Vec<Vec<u8>> = (0..1000).map(|_| vec![7u8; 64]).collect();
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                let first = q.next_seq();
                for _ in 0..n / 1000 {
                    app.append_batch(payloads.iter().map(Vec::as_slice))
                        .unwrap();
                }
                wait_written(&q, first + n);
            }
            start.elapsed()
        });
    });
    g.finish();
}

fn print_rate(what: &str, size: usize, n: u64, q: &Queue) {
    let _ = (what, size, n, q);
}

/// Times `q.get` of sequences below `n` drawn by an LCG seeded with `seed`.
fn random_gets(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, q: &Queue, n: u64, seed: u64) {
    g.bench_function(name, |b| {
        let mut x = seed;
        b.iter(|| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            black_box(q.get((x >> 20) % n).unwrap());
        })
    });
}

fn read_throughput(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let q = open(dir.path());
    let app = q.appender().unwrap();
    let n = 2_000_000u64;
    for _ in 0..n / 1000 {
        app.append_batch(std::iter::repeat_n(&[9u8; 64][..], 1000))
            .unwrap();
    }
    wait_written(&q, n);
    let mut g = c.benchmark_group("read");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(n));
    g.bench_function("sequential/64", |b| {
        b.iter(|| {
            let mut t = q.tailer(Start::Beginning).unwrap();
            let mut sum = 0usize;
            while let Some(m) = t.read_next().unwrap() {
                sum += m.payload.len();
            }
            assert_eq!(sum as u64, 64 * n);
        })
    });
    g.bench_function("columns/64 (read_arrow)", |b| {
        b.iter(|| {
            let mut rows = 0u64;
            while rows < n {
                rows += q.read_columns(rows, n, 65_536).unwrap().rows as u64;
            }
            assert_eq!(rows, n);
        })
    });
    g.bench_function(
        "batch/64 whole queue in one call (the file being written)",
        |b| b.iter(|| assert_eq!(q.read_columns(0, n, n as usize).unwrap().rows as u64, n)),
    );
    // The same messages in sealed 16 MiB files: each verified once by the
    // CRC-64 in its footer, then parsed without a CRC per frame.
    let sealed_dir = tempfile::tempdir().unwrap();
    let sealed = QueueBuilder::new(sealed_dir.path())
        .file_size(16 << 20)
        .open()
        .unwrap();
    let sealed_app = sealed.appender().unwrap();
    for _ in 0..n / 1000 {
        sealed_app
            .append_batch(std::iter::repeat_n(&[9u8; 64][..], 1000))
            .unwrap();
    }
    wait_written(&sealed, n);
    g.bench_function(
        "batch/64 whole queue in one call (sealed 16 MiB files)",
        |b| {
            b.iter(|| {
                assert_eq!(
                    sealed.read_columns(0, n, n as usize).unwrap().rows as u64,
                    n
                )
            })
        },
    );
    g.throughput(Throughput::Elements(1));
    g.bench_function("seek/random", |b| {
        let mut t = q.tailer(Start::Beginning).unwrap();
        let mut x = 12345u64;
        b.iter(|| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let seq = (x >> 20) % n;
            t.seek(seq).unwrap();
            black_box(t.read_next().unwrap().unwrap().seq);
        })
    });
    random_gets(&mut g, "get/random", &q, n, 99);
    // As a reader in another process has it: its own catalog and mappings,
    // no writer to ask where the data ends.
    let ro = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    random_gets(&mut g, "get/random, read-only handle", &ro, n, 7);
    drop(ro);
    // Over sealed files: each call that moves to another file checks that
    // retention or compaction elsewhere has not deleted or replaced it (its
    // removal mark, docs/DESIGN.md "Cached reader").
    let sealed_ro = QueueBuilder::new(sealed_dir.path())
        .read_only(true)
        .open()
        .unwrap();
    random_gets(
        &mut g,
        "get/random, read-only handle, sealed 16 MiB files",
        &sealed_ro,
        n,
        7,
    );
    drop(sealed_ro);
    g.finish();
    q.close().unwrap();

    let mut g = c.benchmark_group("open");
    g.sample_size(10);
    g.bench_function("2M messages, 8 files", |b| {
        b.iter(|| {
            let q = QueueBuilder::new(dir.path())
                .file_size(256 << 20)
                .open()
                .unwrap();
            black_box(q.next_seq());
            q.close().unwrap();
        })
    });
    g.finish();
}

/// Append-to-tailer latency in one process. The appender sleeps between
/// messages (as a real producer does) rather than spinning, so that on a
/// 2-core machine the I/O thread and the tailer have the cores.
fn latency(c: &mut Criterion) {
    let _ = c;
    for (wait, rate) in [
        (WaitStrategy::Default, 10_000u64),
        (WaitStrategy::Default, 50_000),
        (WaitStrategy::BusySpin, 10_000),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let q = QueueBuilder::new(dir.path())
            .file_size(256 << 20)
            .wait_strategy(wait)
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        let epoch = Arc::new(Instant::now());
        let n = rate * 3; // three seconds
        let mut t = q.tailer(Start::Beginning).unwrap();
        let e2 = epoch.clone();
        let reader = std::thread::spawn(move || {
            let mut lat = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let m = t
                    .read_next_timeout(Duration::from_secs(10))
                    .unwrap()
                    .unwrap();
                let sent = u64::from_le_bytes(m.payload[..8].try_into().unwrap());
                lat.push(e2.elapsed().as_nanos() as u64 - sent);
            }
            lat
        });
        let mut payload = [0u8; 64];
        let gap = Duration::from_nanos(1_000_000_000 / rate);
        let start = Instant::now();
        for i in 0..n {
            let due = gap * i as u32;
            let now = start.elapsed();
            if due > now {
                std::thread::sleep(due - now);
            }
            payload[..8].copy_from_slice(&(epoch.elapsed().as_nanos() as u64).to_le_bytes());
            app.append(&payload).unwrap();
        }
        let mut lat = reader.join().unwrap();
        lat.sort_unstable();
        let p = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)] as f64 / 1000.0;
        println!(
            "latency/append-to-tailer wait={wait:?} rate={rate}/s: p50 {:.1} µs  p99 {:.1} µs  p99.9 {:.1} µs  max {:.1} µs  (n={n}, 64 B)",
            p(0.5),
            p(0.99),
            p(0.999),
            p(1.0)
        );
    }
}

/// The frame CRC (`format::crc::crc64_of`) against `crc-fast` and
/// `crc64fast` at the sizes of small frames, a page and a sealed file's
/// chunk: criterion times each, and a line per size prints the ratio of
/// the baseline's time to ours (above 1: ours is faster), measured here.
fn crc(c: &mut Criterion) {
    use litemq::format::crc::crc64_of;
    let data: Vec<u8> = (0..8192u32).map(|i| (i * 2_654_435_761) as u8).collect();
    let crc_fast = |b: &[u8]| crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Xz, b);
    let crc64fast = |b: &[u8]| {
        let mut d = crc64fast::Digest::new();
        d.write(b);
        d.sum64()
    };
    let mut g = c.benchmark_group("crc");
    for size in [29usize, 113, 512, 4096] {
        let bytes = &data[..size];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(BenchmarkId::new("litemq", size), |b| {
            b.iter(|| crc64_of(black_box(bytes)))
        });
        g.bench_function(BenchmarkId::new("crc-fast", size), |b| {
            b.iter(|| crc_fast(black_box(bytes)))
        });
        g.bench_function(BenchmarkId::new("crc64fast", size), |b| {
            b.iter(|| crc64fast(black_box(bytes)))
        });
        let ns = |f: &dyn Fn(&[u8]) -> u64| {
            let n = 1_000_000u32;
            let t = Instant::now();
            for _ in 0..n {
                black_box(f(black_box(bytes)));
            }
            t.elapsed().as_nanos() as f64 / f64::from(n)
        };
        let (ours, fast, c64) = (ns(&crc64_of), ns(&crc_fast), ns(&crc64fast));
        println!(
            "crc {size} B: litemq {ours:.1} ns, crc-fast {fast:.1} ns ({:.2}x), crc64fast {c64:.1} ns ({:.2}x)",
            fast / ours,
            c64 / ours
        );
    }
}

/// 1,000 events of about 80 bytes as rows of a typed queue (format 12)
/// and as records compressed together: the time of one call, from
/// `append_rows` / `append_batch_together` to the I/O thread having written
/// every member (`cargo bench --bench journal -- rows`).
fn rows(c: &mut Criterion) {
    use litemq::format::typed::{encode_row, Field, FieldType, RowLayout, Schema, Value};
    use litemq::{Codec, Compression, Record};
    let field = |name: &str, ty| Field {
        name: name.into(),
        ty,
        nullable: true,
        aliases: vec![],
    };
    let schema = Schema {
        version: 1,
        fields: vec![
            field("user", FieldType::Int64),
            field("page", FieldType::String),
            field("ms", FieldType::Float64),
        ],
    };
    let layout = RowLayout::of(&schema);
    let mut block = Vec::new();
    let mut events = Vec::new();
    for i in 0..1000i64 {
        let page = format!("/products/{}/reviews?sort=new", i % 97);
        let values = [
            Value::Int(i * 7919),
            Value::Str(page.clone()),
            Value::Float(i as f64 / 3.0),
        ];
        encode_row(&schema, &layout, &values, &mut block).unwrap();
        events.push(
            format!(
                "{{\"user\":{},\"page\":\"{page}\",\"ms\":{}}}",
                i * 7919,
                i as f64 / 3.0
            )
            .into_bytes(),
        );
    }
    let mut g = c.benchmark_group("rows");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(1000));
    for (name, codec) in [
        ("append_rows/stored", None),
        ("append_rows/zstd", Some((Codec::Zstd, 3))),
    ] {
        g.bench_function(name, |b| {
            let dir = tempfile::tempdir().unwrap();
            let q = QueueBuilder::new(dir.path())
                .file_size(256 << 20)
                .schema(schema.clone())
                .open()
                .unwrap();
            let app = q.appender().unwrap();
            b.iter(|| {
                let r = app.append_rows(&block, 1000, codec).unwrap();
                wait_written(&q, r.end);
            });
        });
    }
    g.bench_function("append_batch_together/zstd", |b| {
        let dir = tempfile::tempdir().unwrap();
        let q = QueueBuilder::new(dir.path())
            .file_size(256 << 20)
            .compression(Some(Compression {
                codec: Codec::Zstd,
                level: 3,
                min_size: 0,
            }))
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        let records: Vec<Record<'_>> = events.iter().map(|e| Record::new(e)).collect();
        b.iter(|| {
            let r = app.append_batch_together(&records, None).unwrap();
            wait_written(&q, r.end);
        });
    });
    g.finish();
}

criterion_group!(
    benches,
    append_throughput,
    read_throughput,
    latency,
    crc,
    rows
);
criterion_main!(benches);
