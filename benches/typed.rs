//! Typed journals, the two column conversions on their own (no I/O):
//! encoding a 1,000-row market-data RecordBatch's Arrow buffers into rows
//! (`append_batch`'s Rust side) and decoding row-batch blocks into Arrow
//! columns (`read_arrow`'s), and a whole typed queue read into columns.
//! Rates are rows/s (criterion's "elem/s").
//! `cargo bench --bench typed`.
#![expect(
    missing_docs,
    reason = "criterion_group! defines an undocumented pub fn"
)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use litemq::format::typed::{
    encode_columns, ColumnIn, Field, FieldType, Projection, RowLayout, Schema, SchemaVersions,
    TypedColumns,
};
use litemq::QueueBuilder;

/// The market-data schema: int64 time, str symbol, float64 price,
/// int64 size, int8 side, int64 id (nullable, as pyarrow's fields are by
/// default).
fn market() -> Schema {
    let f = |name: &str, ty| Field {
        name: name.into(),
        ty,
        nullable: true,
        aliases: vec![],
    };
    Schema {
        version: 1,
        fields: vec![
            f("time", FieldType::Int64),
            f("symbol", FieldType::String),
            f("price", FieldType::Float64),
            f("size", FieldType::Int64),
            f("side", FieldType::Int8),
            f("id", FieldType::Int64),
        ],
    }
}

/// One RecordBatch's buffers, as pyarrow holds them.
struct Batch {
    time: Vec<u8>,
    sym_offsets: Vec<u8>,
    sym_data: Vec<u8>,
    price: Vec<u8>,
    size: Vec<u8>,
    side: Vec<u8>,
    id: Vec<u8>,
}

const SYMBOLS: [&str; 8] = [
    "AAPL", "MSFT", "GOOG", "AMZN", "TSLA", "NVDA", "META", "BRK.B",
];

fn batch(rows: usize) -> Batch {
    let mut b = Batch {
        time: vec![],
        sym_offsets: 0i32.to_le_bytes().to_vec(),
        sym_data: vec![],
        price: vec![],
        size: vec![],
        side: vec![],
        id: vec![],
    };
    for r in 0..rows {
        b.time
            .extend_from_slice(&(1_700_000_000_000_000i64 + r as i64).to_le_bytes());
        b.sym_data
            .extend_from_slice(SYMBOLS[r % SYMBOLS.len()].as_bytes());
        b.sym_offsets
            .extend_from_slice(&(b.sym_data.len() as i32).to_le_bytes());
        b.price
            .extend_from_slice(&(100.0 + r as f64 * 0.01).to_le_bytes());
        b.size.extend_from_slice(&(r as i64 % 500).to_le_bytes());
        b.side.push((r % 2) as u8);
        b.id.extend_from_slice(&(r as i64).to_le_bytes());
    }
    b
}

fn columns(b: &Batch) -> Vec<ColumnIn<'_>> {
    let fixed = |data| ColumnIn {
        data,
        ..Default::default()
    };
    vec![
        fixed(&b.time),
        ColumnIn {
            offsets: Some(&b.sym_offsets),
            ..fixed(&b.sym_data)
        },
        fixed(&b.price),
        fixed(&b.size),
        fixed(&b.side),
        fixed(&b.id),
    ]
}

fn encode(c: &mut Criterion) {
    let s = market();
    let l = RowLayout::of(&s);
    let rows = 1000;
    let b = batch(rows);
    let cols = columns(&b);
    let mut out = Vec::with_capacity(rows * 64);
    let mut g = c.benchmark_group("typed_encode");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements(rows as u64));
    g.bench_function("market_1000_rows", |bench| {
        bench.iter(|| {
            out.clear();
            encode_columns(&s, &l, black_box(&cols), rows, &mut out).unwrap();
            black_box(out.len())
        })
    });
    g.finish();
}

fn decode(c: &mut Criterion) {
    let s = market();
    let l = RowLayout::of(&s);
    let versions = SchemaVersions {
        versions: vec![s.clone()],
    };
    let rows = 1000;
    let b = batch(rows);
    let mut block = vec![];
    encode_columns(&s, &l, &columns(&b), rows, &mut block).unwrap();
    let blocks = 100;
    let mut g = c.benchmark_group("typed_decode");
    g.sample_size(20).measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Elements((rows * blocks) as u64));
    for (name, wanted) in [
        ("all_6_fields", vec![0, 1, 2, 3, 4, 5]),
        ("3_fields", vec![0, 2, 3]),
    ] {
        let p = Projection::new(&versions, &s, &wanted).unwrap();
        g.bench_function(format!("market_{name}_100x1000_rows"), |bench| {
            bench.iter(|| {
                let mut cols = TypedColumns::new(&s, &wanted, rows * blocks);
                for _ in 0..blocks {
                    cols.push_rows(&p, black_box(&block), rows).unwrap();
                }
                black_box(cols.rows)
            })
        });
    }
    g.finish();
}

/// `Queue::read_typed` of a whole queue of row batches (1 M rows appended
/// with `append_rows` in 1,000-row batches, stored), all six fields: the
/// Rust side of `read_arrow` on a typed queue, walk and decode.
fn read_queue(c: &mut Criterion) {
    let s = market();
    let l = RowLayout::of(&s);
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path().join("q"))
        .file_size(256 << 20)
        .schema(s.clone())
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let rows = 1000;
    let mut block = vec![];
    encode_columns(&s, &l, &columns(&batch(rows)), rows, &mut block).unwrap();
    let n = 1_000_000u64;
    for _ in 0..n / rows as u64 {
        app.append_rows(&block, rows, None).unwrap();
    }
    app.flush().unwrap();
    let mut g = c.benchmark_group("typed_read");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    g.throughput(Throughput::Elements(n));
    g.bench_function("read_typed_1m_rows_6_fields", |bench| {
        bench.iter(|| {
            let b = q.read_typed(0, n, usize::MAX, None).unwrap();
            assert_eq!(b.rows as u64, n);
            black_box(b.rows)
        })
    });
    g.finish();
    q.close().unwrap();
}

criterion_group!(benches, encode, decode, read_queue);
criterion_main!(benches);
