//! Key index: lookup latency for one key among 10 million (p50/p99 printed, plus criterion),
//! and the cost of `add` next to the cost of the hash alone.
//!
//! `cargo bench --bench key_index` (set `KEY_INDEX_BENCH_KEYS` for a smaller run).
#![expect(
    missing_docs,
    reason = "criterion_group! defines an undocumented pub fn"
)]

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use litemq::index::key_index::{key_hash, KeyIndexConfig, KeyIndexReader, KeyIndexWriter};

const T0: u64 = 1_795_301_112_345_000;

fn n_keys() -> u64 {
    std::env::var("KEY_INDEX_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000)
}

fn key(i: u64, buf: &mut Vec<u8>) {
    use std::io::Write;
    buf.clear();
    write!(buf, "order-{i:010}").unwrap();
}

/// xorshift64*: deterministic pseudo-random key choice without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn build(dir: &std::path::Path, n: u64) -> KeyIndexWriter {
    let cfg = KeyIndexConfig::default();
    let mut w = KeyIndexWriter::open_or_create(dir, cfg).unwrap();
    let mut buf = Vec::new();
    let t = Instant::now();
    for i in 0..n {
        key(i, &mut buf);
        // ~10 messages per ms, positions as the engine makes them (64-byte frames).
        w.add(
            &buf,
            ((1 + i / 10_000_000) << 40) | (4096 + (i % 10_000_000) * 64),
            T0 + i * 100,
        )
        .unwrap();
    }
    let add = t.elapsed();
    let t = Instant::now();
    let mut h = 0u32;
    for i in 0..n {
        key(i, &mut buf);
        h ^= key_hash(black_box(&buf));
    }
    black_box(h);
    let hash = t.elapsed();
    println!(
        "key_index build: {n} adds in {:.2?} = {:.1} ns/add (key formatting + hash alone: {:.1} ns; {} files of {} MiB)",
        add,
        add.as_nanos() as f64 / n as f64,
        hash.as_nanos() as f64 / n as f64,
        w.file_count(),
        cfg.file_len() >> 20
    );
    w
}

fn report(label: &str, reader: &KeyIndexReader, n: u64, range: Option<(u64, u64)>) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut buf = Vec::new();
    let mut out = Vec::with_capacity(8);
    let samples = 200_000;
    let mut lat = Vec::with_capacity(samples);
    for _ in 0..samples {
        let i = rng.next() % n;
        key(i, &mut buf);
        let (s, e) = match range {
            Some((a, b)) => (Some(T0 + a), Some(T0 + b)),
            None => (None, None),
        };
        out.clear();
        let t = Instant::now();
        reader.lookup_into(&buf, s, e, &mut out).unwrap();
        lat.push(t.elapsed().as_nanos() as u64);
        black_box(&out);
    }
    lat.sort_unstable();
    println!(
        "key_index lookup {label} ({n} keys, {samples} random lookups): p50 {:.2} µs, p99 {:.2} µs, p99.9 {:.2} µs, max {:.2} µs",
        percentile(&lat, 0.50) as f64 / 1000.0,
        percentile(&lat, 0.99) as f64 / 1000.0,
        percentile(&lat, 0.999) as f64 / 1000.0,
        *lat.last().unwrap() as f64 / 1000.0
    );
}

fn benches(c: &mut Criterion) {
    let n = n_keys();
    let dir = tempfile::tempdir().unwrap();
    let mut w = build(dir.path(), n);
    w.flush().unwrap();
    let reader = w.reader();
    report("in-process, no range", &reader, n, None);
    // A range covering ~1/10 of the keys, in the middle: most files are skipped by header.
    let span = n * 100;
    report(
        "in-process, 10% time range",
        &reader,
        n,
        Some((span * 45 / 100, span * 55 / 100)),
    );
    let standalone = KeyIndexReader::open(dir.path()).unwrap();
    report("standalone (read-only mapping)", &standalone, n, None);

    let mut rng = Rng(42);
    let mut buf = Vec::new();
    c.bench_function("key_index/lookup_one_of_n", |b| {
        b.iter(|| {
            key(rng.next() % n, &mut buf);
            black_box(reader.lookup(&buf, None, None).unwrap())
        })
    });
    c.bench_function("key_index/hash_16b", |b| {
        b.iter(|| key_hash(black_box(b"order-0000123456")))
    });

    let dir2 = tempfile::tempdir().unwrap();
    let mut w2 = KeyIndexWriter::open_or_create(dir2.path(), KeyIndexConfig::default()).unwrap();
    let mut i = 0u64;
    c.bench_function("key_index/add", |b| {
        b.iter(|| {
            i += 1;
            w2.add(b"order-0000123456", i, T0 + i).unwrap()
        })
    });
}

criterion_group! {
    name = group;
    config = Criterion::default().sample_size(30).warm_up_time(std::time::Duration::from_secs(1)).measurement_time(std::time::Duration::from_secs(3));
    targets = benches
}
criterion_main!(group);
