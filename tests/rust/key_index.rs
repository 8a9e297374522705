//! Key index scenarios against the public API: collision chains, several files, time-range
//! boundaries, crash images, corruption, truncation, rebuild byte-equality, and a property
//! test against a `HashMap<key, Vec<(position, ts)>>` model.

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use litemq::index::key_index::file::{format_name, parse_name, TRAILER_LEN};
use litemq::index::key_index::{
    key_hash, lookup, remove_files_before, slot_of, KeyIndexConfig, KeyIndexReader, KeyIndexWriter,
};
use litemq::{Error, QueueBuilder, Record};
use proptest::prelude::*;

const T0: u64 = 1_795_301_112_345_000; // 2026-11-21T22:45:12.345Z in µs

fn tiny(slots: u32, items: u32) -> KeyIndexConfig {
    KeyIndexConfig { slots, items }
}

fn idx_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    v.sort();
    v
}

/// Positions are (file_number << 40) | offset, as the engine makes them.
fn pos(i: u64) -> u64 {
    ((i / 1000 + 1) << 40) | (4096 + (i % 1000) * 64)
}

fn key(i: u64) -> Vec<u8> {
    format!("order-{i}").into_bytes()
}

#[test]
fn hash_test_vectors() {
    assert_eq!(key_hash(b""), 0x02CC_5D05);
    assert_eq!(key_hash(b"a"), 0x550D_7456);
    assert_eq!(key_hash(b"abc"), 0x32D1_53FF);
    assert_eq!(
        key_hash(b"Nobody inspects the spammish repetition"),
        0xE229_3B2F
    );
    assert_eq!(slot_of(0, 4), 0);
    assert_eq!(slot_of(u32::MAX, 4), 3);
    assert_eq!(slot_of(0x8000_0000, 5), 2);
    assert_eq!(slot_of(u32::MAX, u32::MAX), u32::MAX - 1);
}

#[test]
fn file_names_are_utc_milliseconds() {
    assert_eq!(format_name(1_795_301_112_345).unwrap(), "20261121224512345");
    assert_eq!(format_name(0).unwrap(), "19700101000000000");
    assert_eq!(format_name(951_782_400_000).unwrap(), "20000229000000000");
    assert_eq!(parse_name("20261121224512345"), Some(1_795_301_112_345));
    assert_eq!(parse_name("20000229000000000"), Some(951_782_400_000));
    assert_eq!(parse_name("20010229000000000"), None); // not a leap year
    assert_eq!(parse_name("2026112122451234"), None);
    assert_eq!(parse_name("2026112122451234x"), None);
    assert!(format_name(253_402_300_800_000).is_none()); // year 10000
}

#[test]
fn tiny_slot_table_forces_long_chains() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), tiny(4, 100_000)).unwrap();
    let mut model: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
    for i in 0..5_000u64 {
        let k = key(i % 97);
        w.add(&k, pos(i), T0 + i * 10).unwrap();
        model.entry(k).or_default().push(pos(i));
    }
    let r = w.reader();
    for (k, want) in &model {
        assert_eq!(
            &r.lookup(k, None, None).unwrap(),
            want,
            "key {:?}",
            String::from_utf8_lossy(k)
        );
    }
    assert!(r.lookup(b"absent", None, None).unwrap().is_empty());
    // The first file holds 4096 items (with one slot), the second 4 times more.
    assert_eq!(w.file_count(), 2);
}

#[test]
fn files_start_small_and_grow_to_the_configured_geometry() {
    let cfg = KeyIndexConfig::default();
    let mut prev = None;
    let mut seen = Vec::new();
    for _ in 0..8 {
        let (slots, items) = cfg.geometry_after(prev);
        seen.push((slots, items));
        prev = Some(items);
    }
    assert_eq!(
        seen,
        vec![
            (2048, 4096),
            (8192, 16384),
            (32768, 65536),
            (131072, 262144),
            (524288, 1048576),
            (1 << 20, 1 << 21),
            (1 << 20, 1 << 21),
            (1 << 20, 1 << 21),
        ]
    );
    // A configuration smaller than the first size is used as it is.
    assert_eq!(tiny(8, 100).geometry_after(None), (8, 100));
    // Live files follow it, and lookups span them exactly.
    let dir = tempfile::tempdir().unwrap();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), tiny(1 << 10, 1 << 16)).unwrap();
    for i in 0..30_000u64 {
        w.add(&key(i % 1000), pos(i), T0 + i).unwrap();
    }
    w.close().unwrap();
    let lens: Vec<u64> = idx_files(dir.path())
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .collect();
    assert_eq!(
        lens,
        vec![
            40 + 4 * 64 + 20 * 4096 + 56,
            40 + 4 * 256 + 20 * 16384 + 56,
            40 + 4 * 1024 + 20 * 65536 + 56,
        ]
    );
    let r = KeyIndexReader::open(dir.path()).unwrap();
    let want: Vec<u64> = (0..30).map(|j| pos(7 + j * 1000)).collect();
    assert_eq!(r.lookup(&key(7), None, None).unwrap(), want);
}

#[test]
fn many_items_per_key_and_single_slot() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), tiny(1, 50_000)).unwrap();
    let mut hot = Vec::new();
    for i in 0..20_000u64 {
        let k: &[u8] = if i % 3 == 0 { b"hot" } else { b"cold" };
        w.add(k, pos(i), T0 + i).unwrap();
        if i % 3 == 0 {
            hot.push(pos(i));
        }
    }
    assert_eq!(w.reader().lookup(b"hot", None, None).unwrap(), hot);
    assert_eq!(
        w.reader().lookup(b"cold", None, None).unwrap().len(),
        20_000 - hot.len()
    );
}

#[test]
fn keys_spread_over_several_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), tiny(3, 7)).unwrap();
    let mut model: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
    for i in 0..100u64 {
        let k = key(i % 9);
        // Several items per millisecond: files share first-item milliseconds, so names bump.
        w.add(&k, pos(i), T0 + i * 300).unwrap();
        model.entry(k).or_default().push(pos(i));
    }
    assert_eq!(w.file_count(), 15);
    let names: Vec<u64> = idx_files(dir.path())
        .iter()
        .map(|p| parse_name(p.file_stem().unwrap().to_str().unwrap()).unwrap())
        .collect();
    assert_eq!(names.len(), 15);
    assert!(names.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(names[0], T0 / 1000);
    for (k, want) in &model {
        assert_eq!(&w.reader().lookup(k, None, None).unwrap(), want);
    }
    // A standalone reader (another process's view) sees the same.
    w.flush().unwrap();
    let r = KeyIndexReader::open(dir.path()).unwrap();
    for (k, want) in &model {
        assert_eq!(&r.lookup(k, None, None).unwrap(), want);
        assert_eq!(&lookup(dir.path(), k, None, None).unwrap(), want);
    }
}

#[test]
fn time_range_start_inclusive_end_exclusive() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), tiny(8, 16)).unwrap();
    // One item per millisecond-aligned step of 5 ms, over several files.
    let ts = |i: u64| T0 - T0 % 1000 + i * 5_000;
    for i in 0..100u64 {
        w.add(b"k", pos(i), ts(i)).unwrap();
    }
    let r = w.reader();
    let range = |a: u64, b: u64| (a..b).map(pos).collect::<Vec<_>>();
    assert_eq!(
        r.lookup(b"k", Some(ts(10)), Some(ts(20))).unwrap(),
        range(10, 20)
    );
    assert_eq!(r.lookup(b"k", Some(ts(10)), None).unwrap(), range(10, 100));
    assert_eq!(r.lookup(b"k", None, Some(ts(20))).unwrap(), range(0, 20));
    assert_eq!(
        r.lookup(b"k", Some(ts(10) + 1000), Some(ts(20) - 999))
            .unwrap(),
        range(11, 20)
    );
    assert_eq!(
        r.lookup(b"k", Some(ts(15)), Some(ts(15))).unwrap(),
        Vec::<u64>::new()
    );
    assert_eq!(
        r.lookup(b"k", Some(ts(15)), Some(ts(15) + 1)).unwrap(),
        vec![pos(15)]
    );
    assert_eq!(
        r.lookup(b"k", Some(ts(99) + 1000), None).unwrap(),
        Vec::<u64>::new()
    );
    assert_eq!(
        r.lookup(b"k", None, Some(ts(0))).unwrap(),
        Vec::<u64>::new()
    );
    // File boundaries (16 items per file): ranges that start or end exactly there.
    assert_eq!(
        r.lookup(b"k", Some(ts(16)), Some(ts(32))).unwrap(),
        range(16, 32)
    );
    assert_eq!(
        r.lookup(b"k", Some(ts(15)), Some(ts(17))).unwrap(),
        range(15, 17)
    );
    // The same through a standalone reader, which prunes by file name before opening.
    w.close().unwrap();
    let s = KeyIndexReader::open(dir.path()).unwrap();
    assert_eq!(
        s.lookup(b"k", Some(ts(16)), Some(ts(32))).unwrap(),
        range(16, 32)
    );
    assert_eq!(s.lookup(b"k", Some(ts(95)), None).unwrap(), range(95, 100));
}

#[test]
fn sub_millisecond_bounds_return_a_superset_of_at_most_the_edge_millisecond() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), tiny(8, 64)).unwrap();
    let base = T0 - T0 % 1000;
    w.add(b"k", 1, base + 100).unwrap(); // ms 0
    w.add(b"k", 2, base + 900).unwrap(); // ms 0
    w.add(b"k", 3, base + 1_500).unwrap(); // ms 1
    let r = w.reader();
    // start inside ms 0: both ms-0 items are candidates (the caller drops the one at +100).
    assert_eq!(
        r.lookup(b"k", Some(base + 500), None).unwrap(),
        vec![1, 2, 3]
    );
    // end inside ms 1 (exclusive): ms 1 overlaps, so item 3 is a candidate.
    assert_eq!(
        r.lookup(b"k", None, Some(base + 1_001)).unwrap(),
        vec![1, 2, 3]
    );
    // end at the start of ms 1: excluded.
    assert_eq!(
        r.lookup(b"k", None, Some(base + 1_000)).unwrap(),
        vec![1, 2]
    );
    // start after ms 0 ends: only ms 1.
    assert_eq!(r.lookup(b"k", Some(base + 1_000), None).unwrap(), vec![3]);
}

#[test]
fn out_of_order_adds_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), tiny(8, 8)).unwrap();
    assert!(matches!(
        w.add(b"k", 0, T0),
        Err(Error::InvalidArgument(m)) if m.contains("position 0")
    ));
    w.add(b"k", 10, T0).unwrap();
    assert!(matches!(
        w.add(b"k", 9, T0),
        Err(Error::Internal(m)) if m.contains("out of order: position 9 after 10")
    ));
    // The keyed members of one batch frame (format 9) share its position.
    w.add(b"j", 10, T0).unwrap();
    assert!(matches!(
        w.add(b"k", 11, T0 - 1000),
        Err(Error::Internal(m)) if m.contains("out of order: timestamp_ms")
    ));
    w.add(b"k", 11, T0).unwrap();
    assert_eq!(w.last_position(), Some(11));
    assert!(matches!(
        KeyIndexWriter::open_or_create(dir.path(), tiny(0, 8)),
        Err(Error::InvalidConfig(m)) if m.contains("key index")
    ));
    assert!(KeyIndexConfig::default().validate().is_ok());
    assert_eq!(
        KeyIndexConfig::default().file_len(),
        40 + 4 * (1 << 20) + 20 * (1 << 21) + 56
    );
}

#[test]
fn time_diff_overflow_starts_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), tiny(8, 1000)).unwrap();
    w.add(b"k", 1, T0).unwrap();
    let limit = T0 / 1000 + u64::from(u32::MAX); // last ms the first file can take
    w.add(b"k", 2, limit * 1000).unwrap();
    assert_eq!(w.file_count(), 1);
    w.add(b"k", 3, (limit + 1) * 1000).unwrap();
    assert_eq!(w.file_count(), 2);
    assert_eq!(w.reader().lookup(b"k", None, None).unwrap(), vec![1, 2, 3]);
    assert_eq!(
        w.reader()
            .lookup(b"k", Some((limit + 1) * 1000), None)
            .unwrap(),
        vec![3]
    );
}

/// Builds `n` items of a fixed pattern into `dir`, calling `close` at the end if asked.
fn build(
    dir: &Path,
    cfg: KeyIndexConfig,
    range: std::ops::Range<u64>,
    close: bool,
) -> KeyIndexWriter {
    let mut w = KeyIndexWriter::open_or_create(dir, cfg).unwrap();
    for i in range {
        w.add(&key(i % 13), pos(i), T0 + i * 700).unwrap();
    }
    if close {
        w.close().unwrap();
    }
    w
}

fn assert_same_files(a: &Path, b: &Path) {
    let fa = idx_files(a);
    let fb = idx_files(b);
    let names = |v: &[PathBuf]| {
        v.iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&fa), names(&fb));
    for (x, y) in fa.iter().zip(&fb) {
        assert!(
            fs::read(x).unwrap() == fs::read(y).unwrap(),
            "{} differs",
            x.display()
        );
    }
}

#[test]
fn rebuild_is_byte_equal_to_live_build_across_reopens() {
    let cfg = tiny(5, 11);
    let live = tempfile::tempdir().unwrap();
    // Live: three sessions, one ending without close (like a killed process), flushes between.
    let mut w = build(live.path(), cfg, 0..20, false);
    w.flush().unwrap();
    drop(w);
    let w = build(live.path(), cfg, 20..45, true);
    drop(w);
    let mut w = KeyIndexWriter::open_or_create(live.path(), cfg).unwrap();
    assert_eq!(w.last_position(), Some(pos(44)));
    for i in 45..80 {
        w.add(&key(i % 13), pos(i), T0 + i * 700).unwrap();
    }
    w.close().unwrap();
    drop(w);

    let rebuilt = tempfile::tempdir().unwrap();
    fs::write(rebuilt.path().join("20000101000000000.idx"), b"junk").unwrap();
    KeyIndexWriter::remove_all(rebuilt.path()).unwrap();
    build(rebuilt.path(), cfg, 0..80, true);
    assert_same_files(live.path(), rebuilt.path());

    // Rebuild in place through `clear`, readers follow.
    let mut w = KeyIndexWriter::open_or_create(live.path(), cfg).unwrap();
    let r = w.reader();
    w.clear().unwrap();
    assert!(r.lookup(&key(3), None, None).unwrap().is_empty());
    for i in 0..80 {
        w.add(&key(i % 13), pos(i), T0 + i * 700).unwrap();
    }
    w.close().unwrap();
    assert_eq!(r.lookup(&key(3), None, None).unwrap().len(), 6);
    assert_same_files(live.path(), rebuilt.path());
}

/// Byte offset of item `i` in a file of geometry `cfg` (docs/FORMAT.md).
fn item_off(cfg: KeyIndexConfig, i: u64) -> u64 {
    40 + 4 * u64::from(cfg.slots) + 20 * i
}

#[test]
fn crash_mid_add_is_rolled_back_to_the_published_items() {
    let cfg = tiny(4, 64);
    let dir = tempfile::tempdir().unwrap();
    drop(build(dir.path(), cfg, 0..10, false)); // not closed: file stays open (unsealed)
    let path = idx_files(dir.path()).remove(0);
    // Simulate a kill after item 10 and its slot were written but before the count was
    // published: a plausible item at index 10 and its slot pointing at it.
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    let h = key_hash(b"ghost");
    let s = slot_of(h, cfg.slots);
    let mut item = Vec::new();
    item.extend_from_slice(&h.to_le_bytes());
    item.extend_from_slice(&pos(10).to_le_bytes());
    item.extend_from_slice(&7u32.to_le_bytes());
    item.extend_from_slice(&0u32.to_le_bytes());
    f.write_all_at(&item, item_off(cfg, 10)).unwrap();
    f.write_all_at(&11u32.to_le_bytes(), 40 + 4 * u64::from(s))
        .unwrap();
    // Lookups before recovery ignore the unpublished item.
    assert!(lookup(dir.path(), b"ghost", None, None).unwrap().is_empty());
    // Reopen: recovered to the 10 published items, identical to a clean build.
    let mut w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap();
    assert_eq!(w.last_position(), Some(pos(9)));
    assert!(w.reader().lookup(b"ghost", None, None).unwrap().is_empty());
    for k in 0..13 {
        let want: Vec<u64> = (0..10).filter(|i| i % 13 == k).map(pos).collect();
        assert_eq!(w.reader().lookup(&key(k), None, None).unwrap(), want);
    }
    w.close().unwrap();
    let clean = tempfile::tempdir().unwrap();
    build(clean.path(), cfg, 0..10, true);
    assert_same_files(dir.path(), clean.path());
}

#[test]
fn torn_image_with_count_ahead_of_zero_items_is_detected() {
    let cfg = tiny(4, 64);
    let dir = tempfile::tempdir().unwrap();
    drop(build(dir.path(), cfg, 0..20, false));
    let path = idx_files(dir.path()).remove(0);
    // Power-loss image: the header (count 20) reached the disk, items 12.. did not.
    let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&[0u8; 20 * 8], item_off(cfg, 12)).unwrap();
    // A reader on the torn image never returns position 0 or garbage, only real positions.
    for k in 0..13 {
        let got = lookup(dir.path(), &key(k), None, None).unwrap();
        let all: Vec<u64> = (0..20).filter(|i| i % 13 == k).map(pos).collect();
        assert!(got.iter().all(|p| all.contains(p)), "{got:?}");
    }
    // A forward-pointing chain (prev >= own number) is not followed.
    let h = key_hash(&key(1));
    let s = slot_of(h, cfg.slots);
    let mut loopy = Vec::new();
    loopy.extend_from_slice(&h.to_le_bytes());
    loopy.extend_from_slice(&pos(1).to_le_bytes());
    loopy.extend_from_slice(&0u32.to_le_bytes());
    loopy.extend_from_slice(&5u32.to_le_bytes()); // points at itself (item number 5)
    f.write_all_at(&loopy, item_off(cfg, 4)).unwrap();
    f.write_all_at(&5u32.to_le_bytes(), 40 + 4 * u64::from(s))
        .unwrap();
    assert!(lookup(dir.path(), &key(1), None, None).unwrap().len() <= 2);
    // The writer keeps the longest valid prefix and reports where the data must be re-indexed.
    let mut w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap();
    let last = w.last_position().unwrap();
    assert!(last < pos(12));
    let resume = (0..20).find(|&i| pos(i) > last).unwrap();
    for i in resume..20 {
        w.add(&key(i % 13), pos(i), T0 + i * 700).unwrap();
    }
    for k in 0..13 {
        let want: Vec<u64> = (0..20).filter(|i| i % 13 == k).map(pos).collect();
        assert_eq!(w.reader().lookup(&key(k), None, None).unwrap(), want);
    }
    w.close().unwrap();
    let clean = tempfile::tempdir().unwrap();
    build(clean.path(), cfg, 0..20, true);
    assert_same_files(dir.path(), clean.path());
}

#[test]
fn damaged_header_or_trailer_is_corrupt_and_repaired_by_removal() {
    let cfg = tiny(4, 8);
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), cfg, 0..30, true); // 4 files, all sealed
    let files = idx_files(dir.path());
    assert_eq!(files.len(), 4);
    // Flip a bit in the second file's header (end position).
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&files[1])
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, 24).unwrap();
    f.write_all_at(&[b[0] ^ 0x10], 24).unwrap();
    match KeyIndexWriter::open_or_create(dir.path(), cfg) {
        Err(Error::Corrupted { path, .. }) => assert_eq!(path, files[1]),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A standalone reader refuses to trust it either.
    assert!(matches!(
        lookup(dir.path(), &key(1), None, None),
        Err(Error::Corrupted { .. })
    ));
    let (mut w, removed) = KeyIndexWriter::open_or_repair(dir.path(), cfg).unwrap();
    assert_eq!(removed.len(), 1);
    assert_eq!(w.file_count(), 1);
    assert_eq!(w.last_position(), Some(pos(7)));
    for i in 8..30 {
        w.add(&key(i % 13), pos(i), T0 + i * 700).unwrap();
    }
    w.close().unwrap();
    let clean = tempfile::tempdir().unwrap();
    build(clean.path(), cfg, 0..30, true);
    assert_same_files(dir.path(), clean.path());

    // Trailer damage: wrong magic, then a geometry that does not match the length.
    let last = idx_files(dir.path()).pop().unwrap();
    let len = fs::metadata(&last).unwrap().len();
    let f = fs::OpenOptions::new().write(true).open(&last).unwrap();
    f.write_all_at(b"X", len - TRAILER_LEN).unwrap();
    assert!(matches!(
        KeyIndexWriter::open_or_create(dir.path(), cfg),
        Err(Error::Corrupted { .. })
    ));
    f.write_all_at(b"L", len - TRAILER_LEN).unwrap();
    f.write_all_at(&9u32.to_le_bytes(), len - TRAILER_LEN + 12)
        .unwrap();
    assert!(matches!(
        KeyIndexWriter::open_or_create(dir.path(), cfg),
        Err(Error::Corrupted { .. })
    ));
    // A stray file with a bad name is corrupt too; a leftover .tmp is ignored and removed.
    KeyIndexWriter::remove_all(dir.path()).unwrap();
    fs::write(dir.path().join("20261121224512345.idx.tmp"), b"partial").unwrap();
    let w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap();
    assert_eq!(w.file_count(), 0);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    fs::write(dir.path().join("notatime.idx"), b"x").unwrap();
    assert!(matches!(
        KeyIndexWriter::open_or_create(dir.path(), cfg),
        Err(Error::Corrupted { .. })
    ));
}

/// XORs `mask` into the byte at `at` of `path`.
fn flip(path: &Path, at: u64, mask: u8) {
    let f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ mask], at).unwrap();
}

#[test]
fn damaged_item_or_slot_in_a_sealed_file_is_corrupt_and_repaired_by_removal() {
    let cfg = tiny(4, 8);
    let slot_of_key1 = u64::from(slot_of(key_hash(&key(1)), cfg.slots));
    // (what, byte offset in the second file): an item's position, an item's hash, a slot.
    let damages = [
        ("item position", item_off(cfg, 2) + 4),
        ("item hash", item_off(cfg, 5)),
        ("slot", 40 + 4 * slot_of_key1),
    ];
    for (what, at) in damages {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path(), cfg, 0..30, true); // 4 files of 8 items, all sealed
        let files = idx_files(dir.path());
        flip(&files[1], at, 0x01);
        // Another process's reader reports it instead of answering from it.
        match lookup(dir.path(), &key(1), None, None) {
            Err(Error::Corrupted { path, .. }) => assert_eq!(path, files[1], "{what}"),
            other => panic!("{what}: expected Corrupt, got {other:?}"),
        }
        match KeyIndexWriter::open_or_create(dir.path(), cfg) {
            Err(Error::Corrupted { path, .. }) => assert_eq!(path, files[1], "{what}"),
            other => panic!("{what}: expected Corrupt, got {other:?}"),
        }
        // The writer removes it and the later files; the engine re-adds from there.
        let (mut w, removed) = KeyIndexWriter::open_or_repair(dir.path(), cfg).unwrap();
        assert_eq!(removed.len(), 1, "{what}");
        assert_eq!(w.last_position(), Some(pos(7)), "{what}");
        for i in 8..30 {
            w.add(&key(i % 13), pos(i), T0 + i * 700).unwrap();
        }
        for k in 0..13 {
            let want: Vec<u64> = (0..30).filter(|i| i % 13 == k).map(pos).collect();
            assert_eq!(
                w.reader().lookup(&key(k), None, None).unwrap(),
                want,
                "{what}"
            );
        }
        w.close().unwrap();
        let clean = tempfile::tempdir().unwrap();
        build(clean.path(), cfg, 0..30, true);
        assert_same_files(dir.path(), clean.path());
    }
}

#[test]
fn damaged_sealed_key_index_file_is_reported_by_find_and_repaired_by_the_writer() {
    let cfg = tiny(8, 16);
    let open = |p: &Path| QueueBuilder::new(p).file_size(64 * 1024).key_index(cfg);
    let keyed = |seq: u64| format!("k{}", seq % 5).into_bytes();
    for damage in ["item", "slot"] {
        let dir = tempfile::tempdir().unwrap();
        let q = open(dir.path()).open().unwrap();
        let app = q.appender().unwrap();
        for seq in 0..40u64 {
            let k = keyed(seq);
            app.append_record(&Record {
                key: Some(&k),
                ..Record::new(&seq.to_le_bytes())
            })
            .unwrap();
        }
        q.close().unwrap();
        drop(q);
        let files = idx_files(&dir.path().join("index"));
        assert_eq!(files.len(), 3);
        // Item 3's position (low byte) or the slot of key k3, in the first (sealed) file.
        let at = match damage {
            "item" => item_off(cfg, 3) + 4,
            _ => 40 + 4 * u64::from(slot_of(key_hash(b"k3"), cfg.slots)),
        };
        flip(&files[0], at, 0x01);
        let ro = open(dir.path()).read_only(true).open().unwrap();
        match ro.find(b"k3", None, None, None) {
            Err(Error::Corrupted { path, .. }) => assert_eq!(path, files[0], "{damage}"),
            other => panic!("{damage}: expected Corrupted, got {other:?}"),
        }
        drop(ro);
        let q = open(dir.path()).open().unwrap();
        for k in 0..5u64 {
            let found: Vec<u64> = q
                .find(format!("k{k}").as_bytes(), None, None, None)
                .unwrap()
                .iter()
                .map(|m| m.seq)
                .collect();
            let want: Vec<u64> = (0..40).filter(|s| s % 5 == k).collect();
            assert_eq!(found, want, "{damage}: k{k} after the writer's repair");
        }
        q.close().unwrap();
        drop(q);
        // The repaired files pass a fresh reader's checks.
        let ro = open(dir.path()).read_only(true).open().unwrap();
        assert_eq!(ro.find(b"k3", None, None, None).unwrap().len(), 8);
    }
}

/// Whether this process maps `path` (`/proc/self/maps` names a deleted file with a
/// `(deleted)` suffix).
fn mapped(path: &Path) -> bool {
    let maps = fs::read_to_string("/proc/self/maps").unwrap();
    let name = path.to_str().unwrap();
    maps.lines().any(|l| l.contains(name))
}

#[test]
fn files_wholly_before_a_position_are_removed_and_forgotten() {
    let cfg = tiny(4, 5);
    let dir = tempfile::tempdir().unwrap();
    let mut w = build(dir.path(), cfg, 0..23, false); // 5 files; positions 1000 per data file
    w.flush().unwrap();
    let files = idx_files(dir.path());
    assert_eq!(files.len(), 5);
    let standalone = KeyIndexReader::open(dir.path()).unwrap();
    assert_eq!(standalone.lookup(&key(0), None, None).unwrap().len(), 2);
    assert!(files.iter().all(|p| mapped(p)));
    // Items 0..=9 end before pos(10): the first two files go, however far the position.
    let removed = remove_files_before(dir.path(), pos(10)).unwrap();
    let removed: Vec<PathBuf> = removed.into_iter().map(|(p, _)| p).collect();
    assert_eq!(removed, files[..2]);
    // A file with one item at or after the position stays, and so does the newest file
    // even when every item in it is older.
    assert!(remove_files_before(dir.path(), pos(11)).unwrap().is_empty());
    assert_eq!(
        remove_files_before(dir.path(), u64::MAX).unwrap().len(),
        2,
        "all but the newest"
    );
    assert_eq!(idx_files(dir.path()), files[4..]);
    // The writer drops its mappings of the deleted files; lookups see what is left.
    assert!(files[..4].iter().all(|p| mapped(p)));
    assert_eq!(w.forget_deleted(), 4);
    assert_eq!(w.file_count(), 1);
    assert_eq!(
        w.reader().lookup(&key(7), None, None).unwrap(),
        vec![pos(20)]
    );
    // A standalone reader drops them at its next lookup (the directory changed).
    assert_eq!(
        standalone.lookup(&key(7), None, None).unwrap(),
        vec![pos(20)]
    );
    assert_eq!(standalone.file_count(), 1);
    assert!(files[..4].iter().all(|p| !mapped(p)), "space is freed");
    // The writer goes on in the newest file, and a reopen accepts what is left.
    for i in 23..30 {
        w.add(&key(i % 13), pos(i), T0 + i * 700).unwrap();
    }
    w.close().unwrap();
    drop(w);
    let w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap();
    assert_eq!(w.last_position(), Some(pos(29)));
    assert_eq!(
        w.reader().lookup(&key(7), None, None).unwrap(),
        vec![pos(20)]
    );
}

#[test]
fn truncate_after_drops_items_beyond_the_data_and_rebuilds_equal() {
    let cfg = tiny(3, 10);
    let dir = tempfile::tempdir().unwrap();
    let mut w = build(dir.path(), cfg, 0..47, false);
    let r = w.reader();
    w.truncate_after(pos(22)).unwrap();
    assert_eq!(w.last_position(), Some(pos(22)));
    assert_eq!(w.file_count(), 3);
    for k in 0..13 {
        let want: Vec<u64> = (0..=22).filter(|i| i % 13 == k).map(pos).collect();
        assert_eq!(r.lookup(&key(k), None, None).unwrap(), want);
    }
    // Cutting exactly at a file boundary deletes the files after it.
    w.truncate_after(pos(19)).unwrap();
    assert_eq!(w.file_count(), 2);
    w.truncate_after(0).unwrap();
    assert_eq!(w.file_count(), 0);
    assert_eq!(w.last_position(), None);
    for i in 0..47 {
        w.add(&key(i % 13), pos(i), T0 + i * 700).unwrap();
    }
    w.truncate_after(pos(33)).unwrap();
    for i in 34..47 {
        w.add(&key(i % 13), pos(i), T0 + i * 700).unwrap();
    }
    w.close().unwrap();
    let clean = tempfile::tempdir().unwrap();
    build(clean.path(), cfg, 0..47, true);
    assert_same_files(dir.path(), clean.path());
}

#[test]
fn standalone_reader_follows_the_writer() {
    let cfg = tiny(4, 5);
    let dir = tempfile::tempdir().unwrap();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap();
    let r = KeyIndexReader::open(&dir.path().join("")).unwrap();
    assert!(r.lookup(b"k", None, None).unwrap().is_empty());
    for i in 0..23u64 {
        w.add(b"k", pos(i), T0 + i * 2_000).unwrap();
        // Every published item is visible at once, including across new files.
        assert_eq!(
            r.lookup(b"k", None, None).unwrap(),
            (0..=i).map(pos).collect::<Vec<_>>()
        );
    }
    assert_eq!(r.file_count(), 5);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Random adds (small key space, random time steps, tiny geometry), reopens and
    /// truncations, checked against a model; lookups with random ranges use the documented
    /// millisecond-overlap rule.
    #[test]
    fn matches_a_hashmap_model(
        slots in 1u32..6,
        items in 1u32..12,
        ops in prop::collection::vec((0u8..6, 0u64..3_000, 0u8..20), 1..120),
        queries in prop::collection::vec((0u8..6, 0u64..400_000, 0u64..400_000), 1..20),
    ) {
        let cfg = tiny(slots, items);
        let dir = tempfile::tempdir().unwrap();
        let mut w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap();
        let mut model: Vec<(u8, u64, u64)> = Vec::new(); // (key, position, ts)
        let mut ts = T0;
        let mut next_pos = 1u64;
        for (k, step, action) in ops {
            match action {
                0 => { w.close().unwrap(); w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap(); }
                1 => { drop(w); w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap(); }
                2 if !model.is_empty() => {
                    let cut = model[(step as usize) % model.len()].1;
                    w.truncate_after(cut).unwrap();
                    model.retain(|m| m.1 <= cut);
                }
                _ => {
                    ts += step;
                    next_pos += 1 + step % 5;
                    w.add(&[b'k', k], next_pos, ts).unwrap();
                    model.push((k, next_pos, ts));
                }
            }
            prop_assert_eq!(w.last_position(), model.last().map(|m| m.1));
        }
        let r = w.reader();
        for (k, a, b) in queries {
            let (start, end) = (T0 + a.min(b), T0 + a.max(b));
            let overlaps = |t: u64| (t / 1000) * 1000 + 999 >= start && (t / 1000) * 1000 < end;
            let want: Vec<u64> = model.iter().filter(|m| m.0 == k && overlaps(m.2)).map(|m| m.1).collect();
            prop_assert_eq!(r.lookup(&[b'k', k], Some(start), Some(end)).unwrap(), want);
            let all: Vec<u64> = model.iter().filter(|m| m.0 == k).map(|m| m.1).collect();
            prop_assert_eq!(r.lookup(&[b'k', k], None, None).unwrap(), all);
        }
        w.close().unwrap();
        let fresh = tempfile::tempdir().unwrap();
        let mut b = KeyIndexWriter::open_or_create(fresh.path(), cfg).unwrap();
        for (k, p, t) in &model { b.add(&[b'k', *k], *p, *t).unwrap(); }
        b.close().unwrap();
        let fa = idx_files(dir.path());
        let fb = idx_files(fresh.path());
        prop_assert_eq!(fa.len(), fb.len());
        for (x, y) in fa.iter().zip(&fb) {
            prop_assert_eq!(x.file_name(), y.file_name());
            prop_assert!(fs::read(x).unwrap() == fs::read(y).unwrap());
        }
    }
}
