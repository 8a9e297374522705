//! What a long run holds: write then read many GiB in 256 MiB files and
//! report anonymous memory and how many data files are mapped at once.
//! `cargo bench --bench long_run` (10 GiB; `LITEMQ_LONG_GIB=2` for less).

use std::time::Instant;

use litemq::{QueueBuilder, Start};

/// `RssAnon` of this process in KiB.
fn anon_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Distinct `.data` files mapped by this process right now.
fn mapped_data_files() -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut files: Vec<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.ends_with(".data"))
        .collect();
    files.sort_unstable();
    files.dedup();
    files.len()
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo bench -- --list` asks benches to list themselves
    }
    let gib: u64 = std::env::var("LITEMQ_LONG_GIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let dir =
        tempfile::tempdir_in(std::env::var("LITEMQ_BENCH_DIR").unwrap_or_else(|_| "/tmp".into()))
            .unwrap();
    let payload = vec![0x5Au8; 64 * 1024];
    let total = gib << 30;
    let n = total / payload.len() as u64;
    let q = QueueBuilder::new(dir.path())
        .file_size(256 << 20)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let (mut peak_anon, mut peak_maps) = (0u64, 0usize);
    let start = Instant::now();
    for i in 0..n {
        app.append(&payload).unwrap();
        if i % 4096 == 0 {
            peak_anon = peak_anon.max(anon_kib());
            peak_maps = peak_maps.max(mapped_data_files());
        }
    }
    app.flush().unwrap();
    let write_s = start.elapsed().as_secs_f64();
    println!(
        "long_run/write: {gib} GiB in {write_s:.1} s ({:.2} GB/s); peak RssAnon {:.1} MiB; peak mapped data files {peak_maps}",
        total as f64 / write_s / 1e9,
        peak_anon as f64 / 1024.0
    );

    let start = Instant::now();
    let mut t = q.tailer(Start::Beginning).unwrap();
    let (mut read, mut bytes) = (0u64, 0u64);
    let (mut peak_anon_r, mut peak_maps_r) = (0u64, 0usize);
    while let Some(m) = t.read_next().unwrap() {
        bytes += m.payload.len() as u64;
        read += 1;
        if read % 4096 == 0 {
            peak_anon_r = peak_anon_r.max(anon_kib());
            peak_maps_r = peak_maps_r.max(mapped_data_files());
        }
    }
    assert_eq!((read, bytes), (n, total));
    let read_s = start.elapsed().as_secs_f64();
    println!(
        "long_run/read: {gib} GiB in {read_s:.1} s ({:.2} GB/s); peak RssAnon {:.1} MiB; peak mapped data files {peak_maps_r}",
        total as f64 / read_s / 1e9,
        peak_anon_r as f64 / 1024.0
    );
    println!("long_run/files: {} data files of 256 MiB", q.stats().files);
}
