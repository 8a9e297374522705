//! Secondary indexes on header fields (`NAME.field-FIELD`): a field query
//! returns exactly the messages whose header satisfies it, in sequence
//! order, whatever the state of the index files (built, missing, damaged,
//! not built yet for the active file); a file whose zone map excludes the
//! query is skipped unread; indexes are remembered, added later, rebuilt
//! and deleted by retention with their data file.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use litemq::{
    FieldIndexDef, FieldQuery, HeaderField, KeyPredicate, Queue, QueueBuilder, Record,
    RetentionPolicy, RollStrategy,
};

fn body(i: u64) -> Vec<u8> {
    format!("message-{i:08}-body").into_bytes()
}

/// The customer header values of message `i` (a message may carry several).
fn customers(i: u64) -> Vec<String> {
    match i % 11 {
        0 => vec![],                                               // no header
        1 => vec![format!("c{}", i % 7), format!("vip{}", i % 3)], // two values
        _ => vec![format!("c{}", i % 7)],
    }
}

/// The price of message `i`: grows with `i` (so files have disjoint
/// ranges); every fifth is given as 8 bytes little-endian.
fn price(i: u64) -> i64 {
    i as i64 - 500
}

fn append(q: &Queue, range: std::ops::Range<u64>) {
    let app = q.appender().unwrap();
    for i in range {
        let cs = customers(i);
        let p = price(i);
        let text = p.to_string();
        let le = p.to_le_bytes();
        let mut headers: Vec<HeaderField<'_>> = cs
            .iter()
            .map(|c| HeaderField {
                name: "customer",
                value: c.as_bytes(),
                value_is_text: true,
            })
            .collect();
        headers.push(if i % 5 == 0 {
            HeaderField {
                name: "price",
                value: &le,
                value_is_text: false,
            }
        } else {
            HeaderField {
                name: "price",
                value: text.as_bytes(),
                value_is_text: true,
            }
        });
        let b = body(i);
        let seq = app
            .append_record(&Record {
                headers: &headers,
                ..Record::new(&b)
            })
            .unwrap();
        assert_eq!(seq, i);
    }
    app.flush().unwrap();
}

fn customer() -> FieldIndexDef {
    FieldIndexDef::new("customer", "str").unwrap()
}
fn price_def() -> FieldIndexDef {
    FieldIndexDef::new("price", "int").unwrap()
}
fn int(v: i64) -> Vec<u8> {
    litemq::FieldKind::Int
        .key_of(v.to_string().as_bytes(), true)
        .unwrap()
}

/// Queries and the model of what each returns.
#[expect(
    clippy::type_complexity,
    reason = "a table of queries and their models"
)]
fn queries() -> Vec<(FieldQuery, Box<dyn Fn(u64) -> bool>)> {
    let q = |def: FieldIndexDef, any: Vec<KeyPredicate>| FieldQuery { def, any };
    vec![
        (
            q(customer(), vec![KeyPredicate::Eq(b"c3".to_vec())]),
            Box::new(|i| customers(i).iter().any(|c| c == "c3")),
        ),
        (
            q(customer(), vec![KeyPredicate::Eq(b"vip1".to_vec())]),
            Box::new(|i| customers(i).iter().any(|c| c == "vip1")),
        ),
        (
            q(
                customer(),
                vec![
                    KeyPredicate::Eq(b"c1".to_vec()),
                    KeyPredicate::Eq(b"c5".to_vec()),
                ],
            ),
            Box::new(|i| customers(i).iter().any(|c| c == "c1" || c == "c5")),
        ),
        (
            q(customer(), vec![KeyPredicate::Prefix(b"vip".to_vec())]),
            Box::new(|i| customers(i).iter().any(|c| c.starts_with("vip"))),
        ),
        (
            q(customer(), vec![KeyPredicate::Eq(b"nobody".to_vec())]),
            Box::new(|_| false),
        ),
        (
            q(price_def(), vec![KeyPredicate::Between(int(-20), int(40))]),
            Box::new(|i| (-20..=40).contains(&price(i))),
        ),
        (
            q(price_def(), vec![KeyPredicate::Eq(int(1000))]),
            Box::new(|i| price(i) == 1000),
        ),
    ]
}

fn run(q: &Queue, query: &FieldQuery) -> litemq::Result<Vec<u64>> {
    let mut t = q.where_field(query.clone())?;
    let mut out = Vec::new();
    while let Some(m) = t.read_next()? {
        assert_eq!(m.payload, body(m.seq));
        out.push(m.seq);
    }
    Ok(out)
}

fn check_all(q: &Queue, n: u64) {
    for (query, model) in queries() {
        let want: Vec<u64> = (0..n).filter(|&i| model(i)).collect();
        assert_eq!(run(q, &query).unwrap(), want, "{query:?}");
    }
}

fn field_files(base: &Path, name: &str) -> Vec<PathBuf> {
    data_files(base)
        .into_iter()
        .map(|p| p.with_extension(format!("field-{name}")))
        .filter(|p| p.exists())
        .collect()
}

fn indexed(path: &Path) -> QueueBuilder {
    small(path)
        .roll(RollStrategy::Count(300))
        .index(customer())
        .index(price_def())
}

#[test]
fn field_queries_are_exact_with_built_missing_and_damaged_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2000;
    let q = indexed(dir.path()).open().unwrap();
    append(&q, 0..n);
    // The active file has no index: read by scanning.
    check_all(&q, n);
    q.close().unwrap();
    let sealed = data_files(dir.path()).len() - 1;
    assert!(sealed >= 5, "{sealed} sealed files");
    assert_eq!(field_files(dir.path(), "customer").len(), sealed);
    assert_eq!(field_files(dir.path(), "price").len(), sealed);
    check_all(&read_only(dir.path()), n);

    // One index gone, one damaged, one of another field's name: still exact.
    let files = field_files(dir.path(), "customer");
    std::fs::remove_file(&files[0]).unwrap();
    let mut b = std::fs::read(&files[1]).unwrap();
    let last = b.len() - 3;
    b[last] ^= 0x40;
    std::fs::write(&files[1], &b).unwrap();
    std::fs::copy(&files[3], &files[2]).unwrap(); // of another data file
    check_all(&read_only(dir.path()), n);

    // The writer's builder rebuilds them after open (indexes remembered:
    // none given), in the background.
    let copied = std::fs::read(&files[2]).unwrap();
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.indexes(), vec![customer(), price_def()]);
    let rebuilt = |f: &PathBuf, bad: &[u8]| std::fs::read(f).is_ok_and(|r| r != bad);
    let start = std::time::Instant::now();
    while !(rebuilt(&files[0], b"") && rebuilt(&files[1], &b) && rebuilt(&files[2], &copied)) {
        assert!(start.elapsed().as_secs() < 10, "indexes not rebuilt");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    q.close().unwrap();
    assert_eq!(field_files(dir.path(), "customer").len(), sealed);
    check_all(&read_only(dir.path()), n);
}

/// Finds `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn a_file_whose_zone_map_excludes_the_query_is_skipped_unread() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1500;
    let q = indexed(dir.path()).open().unwrap();
    append(&q, 0..n);
    q.close().unwrap();
    let data = data_files(dir.path());
    let price_files = field_files(dir.path(), "price");
    // Damage message 10's body in the first data file (prices -500..-201)
    // and the first and last blocks of its price index (the top level
    // stays valid).
    let mut d = std::fs::read(&data[0]).unwrap();
    let at = find(&d, &body(10)).unwrap();
    d[at + 3] ^= 0xff;
    std::fs::write(&data[0], &d).unwrap();
    let mut ix = std::fs::read(&price_files[0]).unwrap();
    // The first entry of the first block (its value also opens the zone map).
    let key = int(price(0));
    let entry = ix.windows(8).rposition(|w| w == key.as_slice()).unwrap();
    ix[entry + 8] ^= 0xff;
    let last = ix.len() - 1; // and the last block
    ix[last] ^= 0xff;
    std::fs::write(&price_files[0], &ix).unwrap();

    let query = FieldQuery {
        def: price_def(),
        any: vec![KeyPredicate::Between(int(100), int(120))],
    };
    let ro = read_only(dir.path());
    // The zone map says no price of file 0 is in 100..=120: neither its
    // damaged blocks nor its damaged frame are read.
    let want: Vec<u64> = (600..=620).collect();
    assert_eq!(run(&ro, &query).unwrap(), want);
    // A query its zone map admits reads around the damaged index (the
    // data file) and meets the damaged frame: reported, not skipped.
    let near = FieldQuery {
        def: price_def(),
        any: vec![KeyPredicate::Eq(int(price(12)))],
    };
    assert!(matches!(
        run(&ro, &near),
        Err(litemq::Error::Corrupted { .. })
    ));
}

#[test]
fn an_index_added_later_covers_old_files_and_goes_with_retention() {
    let dir = tempfile::tempdir().unwrap();
    let n = 1500;
    let q = small(dir.path())
        .roll(RollStrategy::Count(300))
        .open()
        .unwrap();
    append(&q, 0..n);
    let query = FieldQuery {
        def: customer(),
        any: vec![KeyPredicate::Eq(b"c2".to_vec())],
    };
    // Not declared: refused, not a silent full scan.
    assert!(matches!(
        q.where_field(query.clone()),
        Err(litemq::Error::InvalidArgument(_))
    ));
    let mut seen = Vec::new();
    let wrote = q
        .add_index(customer(), &mut |d, t| seen.push((d, t)))
        .unwrap();
    let sealed = data_files(dir.path()).len() - 1;
    assert_eq!(wrote, sealed);
    assert_eq!(seen.last(), Some(&(sealed, sealed)));
    assert_eq!(field_files(dir.path(), "customer").len(), sealed);
    // Another type for the same name is refused.
    assert!(matches!(
        q.add_index(
            FieldIndexDef::new("customer", "int").unwrap(),
            &mut |_, _| {}
        ),
        Err(litemq::Error::InvalidConfig(_))
    ));
    let want: Vec<u64> = (0..n)
        .filter(|&i| customers(i).contains(&"c2".into()))
        .collect();
    assert_eq!(run(&q, &query).unwrap(), want);
    q.close().unwrap();

    // Remembered; retention deletes the index files with their data files.
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.indexes(), vec![customer()]);
    let first = data_files(dir.path())[0].clone();
    let first_ix = first.with_extension("field-customer");
    assert!(first_ix.exists());
    q.apply_retention_with(&RetentionPolicy {
        max_files: Some(2),
        ..RetentionPolicy::default()
    })
    .unwrap();
    assert!(!first.exists() && !first_ix.exists());
    assert_eq!(
        field_files(dir.path(), "customer").len(),
        data_files(dir.path()).len() - 1
    );
}

#[test]
fn retention_sweeps_index_files_left_without_their_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let q = indexed(dir.path()).open().unwrap();
    append(&q, 0..1500);
    q.close().unwrap();
    // An older build's retention (or a pass interrupted between unlinks)
    // deleted a data file and left its derived files behind.
    let data = data_files(dir.path());
    std::fs::remove_file(&data[0]).unwrap();
    let orphans = [
        data[0].with_extension("field-customer"),
        data[0].with_extension("field-price"),
        data[0].with_extension("topics"),
    ];
    std::fs::write(&orphans[2], b"left over").unwrap();
    assert!(orphans.iter().all(|p| p.exists()));
    let q = indexed(dir.path()).open().unwrap();
    q.apply_retention_with(&RetentionPolicy {
        max_files: Some(3),
        ..RetentionPolicy::default()
    })
    .unwrap();
    for p in &orphans {
        assert!(!p.exists(), "{} left behind", p.display());
    }
    assert!(!data[1].exists() && data[3].exists());
}

#[test]
fn the_active_file_is_indexed_in_memory_and_extended_as_messages_come() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .file_size(1 << 20)
        .index(customer())
        .open()
        .unwrap();
    append(&q, 0..300);
    assert_eq!(data_files(dir.path()).len(), 1, "one active file");
    let c3 = FieldQuery {
        def: customer(),
        any: vec![KeyPredicate::Eq(b"c3".to_vec())],
    };
    let want = |n: u64| -> Vec<u64> {
        (0..n)
            .filter(|&i| customers(i).contains(&"c3".into()))
            .collect()
    };
    assert_eq!(run(&q, &c3).unwrap(), want(300));
    // Messages published since the last query are indexed by the next one.
    append(&q, 300..500);
    assert_eq!(run(&q, &c3).unwrap(), want(500));
    q.close().unwrap();

    // A reader's first query indexes the active file; damage to a message
    // it does not want is then jumped over, not read (a scan reports it).
    let ro = read_only(dir.path());
    assert_eq!(run(&ro, &c3).unwrap(), want(500));
    let data = &data_files(dir.path())[0];
    let mut d = std::fs::read(data).unwrap();
    assert!(!customers(401).contains(&"c3".into()));
    let at = find(&d, &body(401)).unwrap();
    d[at + 2] ^= 0xff;
    std::fs::write(data, &d).unwrap();
    assert_eq!(run(&ro, &c3).unwrap(), want(500));
    assert!(matches!(
        run(&read_only(dir.path()), &c3),
        Err(litemq::Error::Corrupted { .. })
    ));
}

#[test]
fn field_columns_hold_the_first_indexed_value_and_a_query_read_matches_where() {
    let dir = tempfile::tempdir().unwrap();
    let q = indexed(dir.path()).open().unwrap();
    let n = 1_000;
    append(&q, 0..n);
    let defs = [customer(), price_def()];
    let (all, next) = q
        .read_field_columns(None, 0, n, usize::MAX, litemq::ColumnSet::ALL, &defs)
        .unwrap();
    assert_eq!(next, n);
    assert_eq!(all.rows, n as usize);
    let (cust, pr) = (&all.fields[0], &all.fields[1]);
    for i in 0..n as usize {
        let valid = cust.valid[i / 8] & (1 << (i % 8)) != 0;
        let text = &cust.data[cust.offsets[i] as usize..cust.offsets[i + 1] as usize];
        // A message with two customer headers shows the first.
        match customers(i as u64).first() {
            Some(c) => assert!(valid && text == c.as_bytes(), "row {i}"),
            None => assert!(!valid && text.is_empty(), "row {i}"),
        }
        assert_eq!(pr.ints[i], price(i as u64));
    }
    assert_eq!(
        cust.nulls,
        (0..n).filter(|i| customers(*i).is_empty()).count()
    );
    assert_eq!(pr.nulls, 0);
    // Through the index: the rows `where_field` returns, between the bounds asked.
    for (query, _) in queries() {
        let want: Vec<i64> = run(&q, &query)
            .unwrap()
            .into_iter()
            .filter(|s| (100..900).contains(s))
            .map(|s| s as i64)
            .collect();
        let (got, next) = q
            .read_field_columns(
                Some(query.clone()),
                100,
                900,
                usize::MAX,
                litemq::ColumnSet::ALL,
                &defs,
            )
            .unwrap();
        assert!(next <= 900, "{query:?}");
        assert_eq!(got.seq, want, "{query:?}");
        assert_eq!(
            got.fields[1].ints,
            want.iter().map(|s| price(*s as u64)).collect::<Vec<_>>()
        );
    }
    let undeclared = FieldIndexDef::new("region", "str").unwrap();
    assert!(matches!(
        q.read_field_columns(None, 0, n, 10, litemq::ColumnSet::ALL, &[undeclared]),
        Err(litemq::Error::InvalidArgument(_))
    ));
    q.close().unwrap();
}

#[test]
fn a_dropped_index_loses_its_files_and_its_queries_until_declared_again() {
    let dir = tempfile::tempdir().unwrap();
    let q = indexed(dir.path()).open().unwrap();
    append(&q, 0..1_000);
    let sealed = data_files(dir.path()).len() - 1;
    q.add_index(customer(), &mut |_, _| {}).unwrap();
    // The background builder may still be indexing the last file sealed:
    // wait until every sealed file has its customer index, so the count
    // below is of them all.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while field_files(dir.path(), "customer").len() < sealed {
        assert!(
            std::time::Instant::now() < deadline,
            "customer indexes never built"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(q.drop_index("customer").unwrap(), sealed);
    assert!(field_files(dir.path(), "customer").is_empty());
    assert_eq!(field_files(dir.path(), "price").len(), sealed);
    let query = FieldQuery {
        def: customer(),
        any: vec![KeyPredicate::Eq(b"c3".to_vec())],
    };
    assert!(matches!(
        q.where_field(query.clone()),
        Err(litemq::Error::InvalidArgument(_))
    ));
    assert!(matches!(
        q.drop_index("customer"),
        Err(litemq::Error::InvalidArgument(_))
    ));
    q.close().unwrap();
    let q = indexed(dir.path()).open().unwrap(); // declares it again
    assert_eq!(q.add_index(customer(), &mut |_, _| {}).unwrap(), sealed);
    check_all(&q, 1_000);
    q.close().unwrap();
}
