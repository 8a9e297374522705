//! Power loss: crash images built from only the durable bytes.
//!
//! A machine crash keeps, for each page of each file, either what was last
//! forced to disk or some later version the kernel happened to write back,
//! in any order across pages and files. The test reproduces that:
//!
//! 1. write messages and `flush()`; copy the queue directory: the durable
//!    state `D` (its data was msync'd or fdatasync'd by the flush);
//! 2. write more messages without flushing, wait until they are written to
//!    the mappings, and copy the directory again: the latest state `L`;
//! 3. work out from the file names what the writer forced since the flush
//!    (`forced_since_flush`: sealed files at rolls, per flush mode);
//! 4. build crash images (`crash_image`): forced files as in `L`; every
//!    other page that differs between `D` and `L` taken from `D` (not
//!    written back: zeroes or the old contents), from `L` (written back), or
//!    mixed at 512-byte sector granularity (a torn page); index pages
//!    nothing forced possibly zero; names of files created since the flush
//!    and not yet covered by a directory fsync surviving each on its own,
//!    in any order (`Async` mode);
//!    `metadata.json` one or the other (it is replaced atomically).
//!
//! Opening an image must not panic, must succeed, must keep every message
//! `flush()` had covered, intact, must give a dense prefix with nothing
//! partial in it, must report what it cut (`Stats::recovery`), and the
//! queue must accept the next append and then pass `verify_on_startup`.
//!
//! `SOAK=1` builds thousands of images; `CRASH_SEED=n` replays a run;
//! `POWER_LOSS_KEEP=dir` copies the first failing image there.

mod common;

use common::{env_u64, mix, soak, Rng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use litemq::{FlushMode, Queue, QueueBuilder, RollStrategy, Start};

const PAGE: usize = 4096;
const SECTOR: usize = 512;

/// Every regular file under `base` but the lock, by relative path.
type Snapshot = BTreeMap<PathBuf, Vec<u8>>;

fn snapshot(base: &Path) -> Snapshot {
    fn walk(base: &Path, dir: &Path, out: &mut Snapshot) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(base, &p, out);
            } else if p.file_name().is_some_and(|n| n != ".lock") {
                // The writer is live: a file listed may be renamed or
                // removed before it is read (a temp name, a file retention
                // deleted). Left out, it is a crash before its creation
                // reached the disk, which the images cover anyway.
                match std::fs::read(&p) {
                    Ok(bytes) => {
                        out.insert(p.strip_prefix(base).unwrap().to_path_buf(), bytes);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => panic!("{}: {e}", p.display()),
                }
            }
        }
    }
    let mut out = Snapshot::new();
    walk(base, base, &mut out);
    out
}

fn write_image(base: &Path, image: &Snapshot) {
    for (rel, bytes) in image {
        let p = base.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
    }
}

/// What a page of a file holds after the crash: old, new or torn.
fn mix_pages(rng: &mut Rng, old: &[u8], new: &[u8], out: &mut Vec<u8>, stats: &mut ImageStats) {
    out.clear();
    out.extend_from_slice(old);
    for p in (0..new.len()).step_by(PAGE) {
        let end = (p + PAGE).min(new.len());
        if old[p..end] == new[p..end] {
            continue;
        }
        stats.dirty_pages += 1;
        match rng.below(10) {
            0..=3 => stats.lost_pages += 1, // never written back
            4..=8 => out[p..end].copy_from_slice(&new[p..end]),
            _ => {
                stats.torn_pages += 1;
                for s in (p..end).step_by(SECTOR) {
                    let se = (s + SECTOR).min(end);
                    if rng.chance(50) {
                        out[s..se].copy_from_slice(&new[s..se]);
                    }
                }
            }
        }
    }
}

#[derive(Default, Debug)]
struct ImageStats {
    dirty_pages: u64,
    lost_pages: u64,
    torn_pages: u64,
    dropped_files: u64,
    forced_files: u64,
    /// Trimmed files whose trim was lost (full length again).
    untrimmed: u64,
    /// Files grown since the flush whose new length was lost (format 11).
    short_lengths: u64,
}

/// Data files of a snapshot, in queue order (`YYYYMMDD-N…`, counters compared as numbers).
fn data_files(snap: &Snapshot) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = snap
        .keys()
        .filter(|p| p.extension().is_some_and(|e| e == "data"))
        .cloned()
        .collect();
    v.sort_by_key(|p| {
        let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
        let (d, c) = stem.split_once('-').unwrap();
        (d.parse::<u64>().unwrap(), c.parse::<u64>().unwrap())
    });
    v
}

/// Mirror of `MAX_UNSYNCED_SEALED` in `rust/writer/io_thread.rs` (it is
/// `pub(crate)`): in `Async` mode each roll puts the file it seals on a list
/// that `flush()` empties, and when the list grows longer than this the roll
/// fdatasyncs the oldest file on it (`IoThread::roll`) before it creates
/// the next file. Keep the two equal.
const MAX_UNSYNCED_SEALED: usize = 4;

/// What the writer forced to disk after its last write to it, between the
/// flush (state `D`) and the crash (state `L`): what every image keeps.
#[derive(Debug, Default)]
struct Forced {
    /// Data files read back exactly as in `L` (if their name survived).
    data: BTreeSet<PathBuf>,
    /// Sparse-index files read back exactly as in `L`.
    index: BTreeSet<PathBuf>,
    /// The directory entries of files created since the flush: when false
    /// only those of the first `names_durable` such files are kept; the
    /// others survive or not each on its own (see `crash_image`).
    dir_entries: bool,
    names_durable: usize,
}

/// Derives from the file names of `D` and `L` what the writer must have
/// forced since the flush. The flush followed an append, so the last data
/// file of `D` was the active one; every file after it in `L` was created by
/// a roll since, and every file of `L` but the last was sealed by one, in
/// name order (one writer process, no retention here).
fn forced_since_flush(durable: &Snapshot, latest: &Snapshot, mode: u8) -> Forced {
    let before = data_files(durable);
    let after = data_files(latest);
    assert!(
        !before.is_empty() && after.starts_with(&before),
        "data files of the flushed state must all still be there"
    );
    let index_of = |p: &PathBuf| p.with_extension("index");
    if mode == 0 {
        // `Async`: the flush emptied the list, so after the i-th roll since
        // it the list held min(i, MAX) files and rolls past the MAX-th each
        // fdatasync'd one, oldest first: all sealed files but the newest
        // MAX. fdatasync covers the data file's pages (those written through
        // the mapping included), not its index; after it the writer fsyncs
        // the directory, which makes the name of every file created before
        // that roll durable: the sealed files and the MAX - 1 newer ones
        // (`IoThread::keep_unsynced`).
        let sealed = &after[before.len() - 1..after.len() - 1];
        let n = sealed.len().saturating_sub(MAX_UNSYNCED_SEALED);
        let names_durable = if n == 0 {
            0
        } else {
            n + MAX_UNSYNCED_SEALED - 1
        };
        Forced {
            data: sealed[..n].iter().cloned().collect(),
            index: BTreeSet::new(),
            dir_entries: false,
            names_durable: names_durable.min(after.len() - before.len()),
        }
    } else {
        // `Batch` and `Sync`: every roll msyncs the sealed file's data up to
        // and including its end-of-file marker (`ActiveFile::sync`) and its
        // whole index (`SparseIndexWriter::sync`), and `ActiveFile::create`
        // fsyncs the directory after renaming the new data file into place
        // (its index was created in the same directory just before). Files
        // sealed before the flush were forced the same way at their rolls.
        let sealed = &after[..after.len() - 1];
        Forced {
            data: sealed.iter().cloned().collect(),
            index: sealed.iter().map(index_of).collect(),
            dir_entries: true,
            names_durable: after.len() - before.len(),
        }
    }
}

/// True when data file `bytes` is shorter than the `file_size` its header
/// records and ends with a footer: sealed and trimmed (format version 4).
/// An active file is shorter too from format version 11 (it grows with its
/// data), but has no footer.
fn trimmed(bytes: &[u8]) -> bool {
    bytes.len() >= 4096 + 128
        && (bytes.len() as u64) < u64::from_le_bytes(bytes[40..48].try_into().unwrap())
        && bytes[bytes.len() - 128..bytes.len() - 120] == *b"LMQFOOT\0"
}

/// Pages of a file nothing forced since its creation: each is zero (never
/// written back), the version of `D` if there is one, the version of `L`,
/// or a mix of sectors.
fn unforced_pages(
    rng: &mut Rng,
    durable: Option<&Vec<u8>>,
    new: &[u8],
    stats: &mut ImageStats,
) -> Vec<u8> {
    let zeros = vec![0u8; new.len()];
    let mut mid = Vec::new();
    match durable {
        Some(old) if old.len() == new.len() => {
            mix_pages(rng, &zeros, old, &mut mid, &mut ImageStats::default())
        }
        _ => mid = zeros,
    }
    let mut out = Vec::new();
    mix_pages(rng, &mid, new, &mut out, stats);
    out
}

/// Builds one crash image from the flushed state `D` and the latest `L`.
///
/// - A file in `forced` reads as in `L`.
/// - A data file of `D` not forced since: pages that differ from `D` are
///   old, new or torn (`D` itself was forced by the flush, which msyncs the
///   active file and fdatasyncs every sealed file not yet synced).
/// - A data file created since and not forced: preallocated zeroes, the
///   header page as in `L` (msync'd before the rename that names the file),
///   other pages old, new or torn.
/// - A sparse-index file not forced (`Async` mode never syncs one, and no
///   mode syncs the active file's): every page zero, as in `D`, as in `L`
///   or torn. Recovery and readers take index entries as hints only.
/// - `metadata.json` is one or the other (`write_atomic`).
/// - Names of files created since the flush and not made durable by a
///   directory fsync (`forced.names_durable`): each creation (index file,
///   temporary data file, rename) survives or not on its own, in any order
///   (POSIX promises nothing more); a data file whose rename was lost stays
///   as `.data.tmp`, which recovery removes. Files of `D` keep their names
///   (`flush()` fsyncs the directories that gained files).
fn crash_image(
    rng: &mut Rng,
    durable: &Snapshot,
    latest: &Snapshot,
    forced: &Forced,
    stats: &mut ImageStats,
) -> Snapshot {
    let new_data: Vec<PathBuf> = data_files(latest)
        .into_iter()
        .filter(|p| !durable.contains_key(p))
        .collect();
    // Creations since the flush, per file: index, temporary data file,
    // rename. Past the durable ones, each survives on its own (often all).
    let lossy = !forced.dir_entries && rng.chance(40);
    let lost: Vec<[bool; 3]> = new_data
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let may_lose = lossy && i >= forced.names_durable;
            [0, 1, 2].map(|_| may_lose && rng.chance(30))
        })
        .collect();
    let survives = |rel: &PathBuf, step: usize| -> bool {
        let stem = rel.with_extension("data");
        match new_data.iter().position(|p| *p == stem) {
            Some(i) => !lost[i][step],
            None => true, // not created since the flush
        }
    };
    let mut image = Snapshot::new();
    for (rel, new) in latest {
        let is_meta = rel.file_name().is_some_and(|n| n == "metadata.json");
        let is_data = rel.extension().is_some_and(|e| e == "data");
        // Sparse and dense indexes: created before their data file, written
        // through the mapping, never forced by a flush.
        let is_index = rel
            .extension()
            .is_some_and(|e| e == "index" || e == "offsets");
        let old = durable.get(rel);
        if is_meta {
            // Replaced atomically: one or the other.
            let pick = match old {
                Some(old) if rng.chance(50) => old,
                _ => new,
            };
            image.insert(rel.clone(), pick.clone());
            continue;
        }
        if is_index && !survives(rel, 0) {
            stats.dropped_files += 1;
            continue;
        }
        let mut name = rel.clone();
        if is_data && !survives(rel, 2) {
            stats.dropped_files += 1;
            if !survives(rel, 1) {
                continue;
            }
            // Created under its temporary name; the rename was lost.
            name = rel.with_extension("data.tmp");
        }
        let bytes = if forced.data.contains(rel) || forced.index.contains(rel) {
            stats.forced_files += 1;
            new.clone()
        } else if is_index {
            unforced_pages(rng, old, new, stats)
        } else if is_data && trimmed(new) {
            // Sealed and trimmed since the flush, nothing forced it: pages
            // old, new or torn over the trimmed length, and the trim itself
            // (a change of length) reached the disk or not.
            let full = u64::from_le_bytes(new[40..48].try_into().unwrap()) as usize;
            // Format 11: the file may have been shorter than its trimmed
            // length at the flush (it grows with its data); past its old
            // length it read as zeros.
            let base: Vec<u8> = match old {
                Some(old) => {
                    let mut b = old[..new.len().min(old.len())].to_vec();
                    b.resize(new.len(), 0);
                    b
                }
                None => vec![0u8; new.len()],
            };
            let mut out = Vec::new();
            mix_pages(rng, &base, new, &mut out, stats);
            if old.is_none() {
                // Its header was msync'd before the rename that named it.
                out[..PAGE].copy_from_slice(&new[..PAGE]);
            }
            if rng.chance(50) {
                stats.untrimmed += 1;
                match old {
                    Some(old) if old.len() > new.len() => out.extend_from_slice(&old[new.len()..]),
                    // Grown after the flush, then trimmed: untrimmed, it is
                    // at least as long as the frames, marker and footer.
                    Some(_) => {}
                    None => out.resize(full, 0),
                }
            }
            out
        } else {
            match old {
                Some(old) if old.len() == new.len() => {
                    let mut out = Vec::new();
                    mix_pages(rng, old, new, &mut out, stats);
                    out
                }
                Some(old) if is_data && old.len() < new.len() => {
                    // Grown since the flush (format 11: an active file is
                    // as long as its data and a chunk): pages old (zeros
                    // past the old length), new or torn, and the new
                    // length reached the disk or not.
                    let mut base = old.clone();
                    base.resize(new.len(), 0);
                    let mut out = Vec::new();
                    mix_pages(rng, &base, new, &mut out, stats);
                    if rng.chance(50) {
                        stats.short_lengths += 1;
                        out.truncate(old.len());
                    }
                    out
                }
                Some(old) => {
                    // Not written in place (none but trims, above): one or the other.
                    if rng.chance(50) {
                        old.clone()
                    } else {
                        new.clone()
                    }
                }
                None => {
                    let zeros = vec![0u8; new.len()];
                    let mut out = Vec::new();
                    mix_pages(rng, &zeros, new, &mut out, stats);
                    if is_data {
                        let keep = PAGE.min(new.len());
                        out[..keep].copy_from_slice(&new[..keep]);
                    }
                    out
                }
            }
        };
        image.insert(name, bytes);
    }
    // Files that exist only in the durable state (none today: nothing is
    // deleted while writing) stay as they were.
    for (rel, old) in durable {
        image.entry(rel.clone()).or_insert_with(|| old.clone());
    }
    image
}

#[derive(Debug, Clone, Copy)]
struct Scenario {
    mode: u8,
    file_size: u64,
    roll_count: u64,
    index_interval: u32,
    big: bool,
    salt: u64,
}

impl Scenario {
    fn random(rng: &mut Rng) -> Scenario {
        Scenario {
            mode: 0,
            file_size: [64 * 1024, 128 * 1024][rng.below(2) as usize],
            roll_count: if rng.chance(30) { 5 + rng.below(60) } else { 0 },
            index_interval: [1, 4, 32][rng.below(3) as usize],
            big: rng.chance(30),
            salt: rng.next(),
        }
    }

    fn builder(&self, path: &Path) -> QueueBuilder {
        let flush = match self.mode {
            0 => FlushMode::Async,
            1 => FlushMode::Sync,
            _ => FlushMode::Batch {
                bytes: 1 << 30,
                interval: Duration::from_secs(3600),
            },
        };
        let mut b = QueueBuilder::new(path)
            .file_size(self.file_size)
            .index_interval(self.index_interval)
            .flush_mode(flush);
        if self.roll_count > 0 {
            b = b.roll(RollStrategy::Count(self.roll_count));
        }
        b
    }

    fn payload(&self, seq: u64) -> Vec<u8> {
        let h = mix(seq ^ self.salt);
        let len = if self.big && h.is_multiple_of(3) {
            2000 + h % 9000
        } else {
            h % 300
        } as usize;
        let mut out = Vec::with_capacity(len + 8);
        out.extend_from_slice(&seq.to_le_bytes());
        let mut s = h;
        while out.len() < len + 8 {
            s = mix(s);
            out.push(s as u8);
        }
        out
    }
}

fn append_n(q: &Queue, sc: &Scenario, rng: &mut Rng, n: u64) {
    let app = q.appender().unwrap();
    let mut seq = q.next_seq();
    let end = seq + n;
    while seq < end {
        if rng.chance(30) {
            let k = (1 + rng.below(20)).min(end - seq);
            let ps: Vec<Vec<u8>> = (seq..seq + k).map(|s| sc.payload(s)).collect();
            assert_eq!(
                app.append_batch(ps.iter().map(Vec::as_slice)).unwrap(),
                seq..seq + k
            );
            seq += k;
        } else {
            assert_eq!(app.append(&sc.payload(seq)).unwrap(), seq);
            seq += 1;
        }
    }
}

fn wait_written(q: &Queue, n: u64) {
    let start = Instant::now();
    while q.next_seq() < n {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "writer never caught up"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Opens one image and checks it; `Err` describes what went wrong.
fn check_image(
    base: &Path,
    sc: &Scenario,
    flushed: u64,
    image_stats: &mut Figures,
) -> Result<(), String> {
    let q = sc
        .builder(base)
        .open()
        .map_err(|e| format!("open failed: {e}"))?;
    let rec = q.stats().recovery;
    if rec.cut_at.is_some() || rec.cut_bytes > 0 {
        image_stats.cut += 1;
        image_stats.cut_bytes += rec.cut_bytes;
    }
    image_stats.finished_seals += rec.finished_seals;
    image_stats.restored_lengths += u64::from(rec.restored_length);
    if rec.repaired_end_marker {
        image_stats.repaired_markers += 1;
    }
    let next = q.next_seq();
    if next < flushed {
        return Err(format!(
            "lost flushed messages: {flushed} were flushed, {next} recovered ({rec:?})"
        ));
    }
    image_stats.kept_unflushed += next - flushed;
    let mut t = q
        .tailer(Start::Beginning)
        .map_err(|e| format!("tailer: {e}"))?;
    let mut seq = 0;
    loop {
        match t.read_next() {
            Ok(Some(m)) => {
                if m.seq != seq {
                    return Err(format!("seq {} read where {seq} was expected", m.seq));
                }
                if m.payload != sc.payload(seq).as_slice() {
                    return Err(format!("seq {seq}: payload differs from what was appended"));
                }
                seq += 1;
            }
            Ok(None) => break,
            Err(e) => return Err(format!("reading seq {seq}: {e} (recovery {rec:?})")),
        }
    }
    if seq != next {
        return Err(format!("tailer stopped at {seq}, next_seq is {next}"));
    }
    let app = q.appender().unwrap();
    let got = app
        .append(&sc.payload(next))
        .map_err(|e| format!("append after recovery: {e}"))?;
    if got != next {
        return Err(format!(
            "append after recovery got seq {got}, expected {next}"
        ));
    }
    q.close()
        .map_err(|e| format!("close after recovery: {e}"))?;
    let q = sc
        .builder(base)
        .verify_on_startup(true)
        .open()
        .map_err(|e| format!("verify_on_startup after recovery: {e}"))?;
    if q.next_seq() != next + 1 {
        return Err(format!(
            "after reopen next_seq is {}, expected {}",
            q.next_seq(),
            next + 1
        ));
    }
    q.close().map_err(|e| e.to_string())?;
    Ok(())
}

#[derive(Default, Debug)]
struct Figures {
    images: u64,
    cut: u64,
    cut_bytes: u64,
    repaired_markers: u64,
    kept_unflushed: u64,
    finished_seals: u64,
    restored_lengths: u64,
}

/// Runs `scenarios` scenarios of one flush mode; returns the failures.
fn run_power_loss(mode: u8, name: &str) {
    let seed = env_u64("CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let scenarios = env_u64("POWER_LOSS_SCENARIOS").unwrap_or(if soak() { 600 } else { 25 });
    let images_per = if soak() { 16 } else { 8 };
    println!("power loss ({name}): CRASH_SEED={seed}, {scenarios} scenarios x {images_per} images");
    let mut rng = Rng(seed ^ mode as u64);
    let mut figures = Figures::default();
    let mut stats = ImageStats::default();
    let mut failures: Vec<String> = Vec::new();
    let started = Instant::now();
    for s in 0..scenarios {
        let sc = Scenario {
            mode,
            ..Scenario::random(&mut rng)
        };
        let src = tempfile::tempdir().unwrap();
        let q = sc.builder(src.path()).open().unwrap();
        // Some history first, sometimes with a clean close before the reopen.
        let n = rng.below(400);
        append_n(&q, &sc, &mut rng, n);
        if rng.chance(30) {
            q.close().unwrap();
        }
        drop(q);
        let q = sc.builder(src.path()).open().unwrap();
        let n = 1 + rng.below(300);
        append_n(&q, &sc, &mut rng, n);
        q.appender().unwrap().flush().unwrap();
        let flushed = q.next_seq();
        let durable = snapshot(src.path());
        // Past the flush: up to a few files' worth, often across a roll;
        // with `roll_count` up to about 180 rolls, so in `Async` mode the
        // writer fdatasyncs sealed files on its own (see `Forced`).
        let more = 1 + rng.below(if sc.big { 40 } else { 900 });
        append_n(&q, &sc, &mut rng, more);
        wait_written(&q, flushed + more);
        let latest = snapshot(src.path());
        let forced = forced_since_flush(&durable, &latest, mode);
        for i in 0..images_per {
            let image = crash_image(&mut rng, &durable, &latest, &forced, &mut stats);
            let dst = tempfile::tempdir().unwrap();
            write_image(dst.path(), &image);
            figures.images += 1;
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                check_image(dst.path(), &sc, flushed, &mut figures)
            }));
            let err = match outcome {
                Ok(Ok(())) => continue,
                Ok(Err(e)) => e,
                Err(_) => "PANIC while opening or reading".to_string(),
            };
            let msg = format!(
                "scenario {s} {sc:?}, image {i} (flushed {flushed}, written {}): {err}",
                flushed + more
            );
            if failures.is_empty() {
                if let Ok(keep) = std::env::var("POWER_LOSS_KEEP") {
                    write_image(Path::new(&keep), &image);
                }
            }
            failures.push(msg);
        }
        drop(q);
    }
    println!(
        "power loss ({name}): {} images in {:.1} s; {} dirty pages ({} lost, {} torn), {} files forced by the writer \
         kept whole, {} new file names lost, {} trims lost, {} growths lost; {} recoveries cut a tail ({} bytes), {} repaired an end marker, \
         {} finished a seal (footer or trim), {} gave a trimmed last file its length back, {} unflushed messages survived",
        figures.images,
        started.elapsed().as_secs_f64(),
        stats.dirty_pages,
        stats.lost_pages,
        stats.torn_pages,
        stats.forced_files,
        stats.dropped_files,
        stats.untrimmed,
        stats.short_lengths,
        figures.cut,
        figures.cut_bytes,
        figures.repaired_markers,
        figures.finished_seals,
        figures.restored_lengths,
        figures.kept_unflushed
    );
    for f in failures.iter().take(5) {
        println!("FAILED {f}");
    }
    if !failures.is_empty() {
        panic!(
            "{} of {} crash images failed (CRASH_SEED={seed}); first: {}",
            failures.len(),
            figures.images,
            failures[0]
        );
    }
}

/// `Batch` mode (only `flush()` and rolls sync, as configured here): every
/// sealed file is forced at its roll; the active file's unsynced pages may
/// be lost or torn in any order.
#[test]
fn power_loss_batch_mode_keeps_flushed_messages() {
    run_power_loss(2, "batch");
}

/// `Async` mode: `flush()` syncs, and a roll fdatasyncs the oldest sealed
/// file once more than `MAX_UNSYNCED_SEALED` wait; the newest sealed files
/// and the active one may be partly written back, and files created since
/// the flush may have lost their names.
#[test]
fn power_loss_async_mode_keeps_flushed_messages() {
    run_power_loss(0, "async");
}
