//! Arrow buffers → rows: the column-wise path of `append_batch` with a
//! `pyarrow.RecordBatch` (FORMAT.md "Typed records": each field's Arrow
//! type is the table's last column).
//!
//! The whole batch is checked before one byte is appended, then written a
//! column at a time into rows laid out up front (each row's length is known
//! from its var fields' lengths): tight loops, no per-row allocation.
//!
//! Strings: Arrow promises UTF-8, but the buffers come from users (pyarrow
//! builds string arrays from bytes without checking when asked to, and
//! `from_buffers` never checks), and a reader refuses a row whose string is
//! not UTF-8 as damage. So every string column is checked here and a bad
//! one refused with [`SchemaError`] naming the field and the row.

use super::row::RowLayout;
use super::schema::{FieldType, Schema, SchemaError};

/// One field's Arrow array, as its buffers (Arrow's C data layout).
#[derive(Debug, Clone, Copy, Default)]
pub struct ColumnIn<'a> {
    /// The validity bitmap (LSB first; bit set = has a value), or `None`
    /// when the array has no nulls.
    pub validity: Option<&'a [u8]>,
    /// The array's offset, in elements (bits for bools and validity).
    pub offset: usize,
    /// The values: fixed-width values little-endian, bools bit-packed,
    /// string/binary bytes.
    pub data: &'a [u8],
    /// String/binary: the offsets buffer, `i32` little-endian (`i64` when
    /// `large`).
    pub offsets: Option<&'a [u8]>,
    /// `large_string` / `large_binary`: the offsets are `i64`.
    pub large: bool,
}

impl ColumnIn<'_> {
    #[inline]
    fn is_valid(&self, r: usize) -> bool {
        match self.validity {
            None => true,
            Some(v) => bit(v, self.offset + r),
        }
    }

    /// The `[start, end)` of row `r`'s bytes in `data` (offsets checked).
    #[inline]
    fn span(&self, offs: &[u8], r: usize) -> (usize, usize) {
        let i = self.offset + r;
        if self.large {
            (read_i64(offs, i) as usize, read_i64(offs, i + 1) as usize)
        } else {
            (read_i32(offs, i) as usize, read_i32(offs, i + 1) as usize)
        }
    }
}

#[inline]
fn bit(b: &[u8], i: usize) -> bool {
    b[i >> 3] & (1 << (i & 7)) != 0
}

#[inline]
fn read_i32(b: &[u8], i: usize) -> i64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[i * 4..i * 4 + 4]);
    i64::from(i32::from_le_bytes(w))
}

#[inline]
fn read_i64(b: &[u8], i: usize) -> i64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i * 8..i * 8 + 8]);
    i64::from_le_bytes(w)
}

/// Appends `rows` rows built from `cols` (one per field of `schema`, in
/// order, in Arrow's layout) to `out`. Refused with [`SchemaError`] naming
/// the field (and the row, for a value): a column count that is not the
/// schema's, buffers too short for `rows`, a null in a non-nullable field,
/// offsets that decrease or run past their data, a string that is not
/// UTF-8, a decimal with more digits than its precision, a row whose var
/// bytes pass 4 GiB. Nothing is appended to `out` then.
pub fn encode_columns(
    schema: &Schema,
    layout: &RowLayout,
    cols: &[ColumnIn<'_>],
    rows: usize,
    out: &mut Vec<u8>,
) -> Result<(), SchemaError> {
    if cols.len() != schema.fields.len() {
        return Err(SchemaError(format!(
            "{} columns for {} fields",
            cols.len(),
            schema.fields.len()
        )));
    }
    for (i, c) in cols.iter().enumerate() {
        check_column(schema, i, c, rows)?;
    }
    let mut row_end = row_lengths(layout, cols, rows)?;
    // Running sums: row r is out[start + row_end[r-1]..start + row_end[r]].
    let mut total = 0usize;
    for e in row_end.iter_mut() {
        total += *e;
        *e = total;
    }
    let start = out.len();
    out.resize(start + total, 0);
    let buf = &mut out[start..];
    write_bitmaps(layout, cols, &row_end, buf);
    let mut var_end = vec![0u32; rows];
    for (i, c) in cols.iter().enumerate() {
        let at = layout.slots[i].at;
        let ty = layout.slots[i].ty;
        if ty.is_var() {
            write_var(layout.fixed_len, at, c, &row_end, &mut var_end, buf);
        } else {
            write_fixed(ty, at, c, &row_end, buf);
        }
    }
    Ok(())
}

/// Checks column `i` against its field: buffer lengths, nulls, offsets,
/// UTF-8, decimal digits.
fn check_column(
    schema: &Schema,
    i: usize,
    c: &ColumnIn<'_>,
    rows: usize,
) -> Result<(), SchemaError> {
    let f = &schema.fields[i];
    let bad = |why: String| SchemaError(format!("field {:?} ({}): {why}", f.name, f.ty.name()));
    let end = c
        .offset
        .checked_add(rows)
        .ok_or_else(|| bad("offset overflows".into()))?;
    if let Some(v) = c.validity {
        if v.len() < end.div_ceil(8) {
            return Err(bad(format!("validity bitmap shorter than {rows} rows")));
        }
        if !f.nullable {
            if let Some(r) = (0..rows).find(|&r| !c.is_valid(r)) {
                return Err(bad(format!("is not nullable and row {r} is null")));
            }
        }
    }
    if f.ty.is_var() {
        return check_var(f.ty, c, rows, &bad);
    }
    let need = match f.ty {
        FieldType::Bool => end.div_ceil(8),
        ty => end * ty.width(),
    };
    if c.data.len() < need {
        return Err(bad(format!("data buffer shorter than {rows} rows")));
    }
    if let FieldType::Decimal128 { precision, .. } = f.ty {
        let max = 10u128.pow(u32::from(precision));
        for r in 0..rows {
            let at = (c.offset + r) * 16;
            let mut w = [0u8; 16];
            w.copy_from_slice(&c.data[at..at + 16]);
            if c.is_valid(r) && i128::from_le_bytes(w).unsigned_abs() >= max {
                return Err(bad(format!("row {r} has more digits than its precision")));
            }
        }
    }
    Ok(())
}

/// A string/binary column's offsets never decrease and stay inside its
/// data; a string column's bytes are UTF-8 row by row.
fn check_var(
    ty: FieldType,
    c: &ColumnIn<'_>,
    rows: usize,
    bad: &dyn Fn(String) -> SchemaError,
) -> Result<(), SchemaError> {
    let offs = c.offsets.ok_or_else(|| bad("no offsets buffer".into()))?;
    let w = if c.large { 8 } else { 4 };
    if offs.len() < (c.offset + rows + 1) * w {
        return Err(bad(format!("offsets buffer shorter than {rows} rows")));
    }
    if rows == 0 {
        return Ok(());
    }
    let first = c.span(offs, 0).0;
    let mut prev = first;
    for r in 0..rows {
        let (s, e) = c.span(offs, r);
        // `as usize` of a negative offset is huge: caught by `e > len`.
        if s != prev || e < s || e > c.data.len() {
            return Err(bad(format!(
                "row {r}'s offsets ({s}..{e}) decrease or run past the data ({} bytes)",
                c.data.len()
            )));
        }
        prev = e;
    }
    if ty == FieldType::String {
        check_utf8(c, offs, rows, first, prev).map_err(|r| bad(format!("row {r} is not UTF-8")))?;
    }
    Ok(())
}

/// UTF-8 of every row of a string column, cheaply: the rows' bytes are
/// contiguous (`first..last`), so one validation of the whole range plus
/// "every row starts on a character boundary" is the same as validating
/// each row. On failure, the first bad row (found row by row).
fn check_utf8(
    c: &ColumnIn<'_>,
    offs: &[u8],
    rows: usize,
    first: usize,
    last: usize,
) -> Result<(), usize> {
    let all = &c.data[first..last];
    let whole = std::str::from_utf8(all).is_ok();
    let boundaries = (0..rows).all(|r| {
        let s = c.span(offs, r).0;
        s >= last || (c.data[s] as i8) >= -0x40 // not a continuation byte
    });
    if whole && boundaries {
        return Ok(());
    }
    (0..rows)
        .find(|&r| {
            let (s, e) = c.span(offs, r);
            c.is_valid(r) && std::str::from_utf8(&c.data[s..e]).is_err()
        })
        .map_or(Ok(()), Err)
}

/// Each row's length: the fixed part plus its var fields' bytes (nulls
/// have none).
fn row_lengths(
    layout: &RowLayout,
    cols: &[ColumnIn<'_>],
    rows: usize,
) -> Result<Vec<usize>, SchemaError> {
    let mut len = vec![0usize; rows];
    for (i, c) in cols.iter().enumerate() {
        if !layout.slots[i].ty.is_var() {
            continue;
        }
        let offs = c.offsets.unwrap_or_default();
        for (r, l) in len.iter_mut().enumerate() {
            if c.is_valid(r) {
                let (s, e) = c.span(offs, r);
                *l += e - s;
            }
        }
    }
    for (r, l) in len.iter_mut().enumerate() {
        if *l > u32::MAX as usize {
            return Err(SchemaError(format!(
                "row {r}: its string and binary values pass 4 GiB"
            )));
        }
        *l += layout.fixed_len;
    }
    Ok(len)
}

/// The null bitmaps: bit k of the k-th nullable field set when the row has
/// a value.
fn write_bitmaps(layout: &RowLayout, cols: &[ColumnIn<'_>], row_end: &[usize], buf: &mut [u8]) {
    // The bits of the columns without nulls are the same in every row:
    // written as one template, the others bit by bit after.
    let mut template = vec![0u8; layout.bitmap_len];
    for (i, c) in cols.iter().enumerate() {
        if let (Some(b), None) = (layout.slots[i].null_bit, c.validity) {
            template[b >> 3] |= 1 << (b & 7);
        }
    }
    if template.iter().any(|&b| b != 0) {
        let mut start = 0;
        for &end in row_end {
            buf[start..start + template.len()].copy_from_slice(&template);
            start = end;
        }
    }
    for (i, c) in cols.iter().enumerate() {
        let Some(b) = layout.slots[i].null_bit else {
            continue;
        };
        if c.validity.is_none() {
            continue;
        }
        let (byte, mask) = (b >> 3, 1u8 << (b & 7));
        let mut start = 0;
        for (r, &end) in row_end.iter().enumerate() {
            if c.is_valid(r) {
                buf[start + byte] |= mask;
            }
            start = end;
        }
    }
}

/// A fixed-width field's slot in every row (zero where null).
fn write_fixed(ty: FieldType, at: usize, c: &ColumnIn<'_>, row_end: &[usize], buf: &mut [u8]) {
    match ty {
        FieldType::Bool => {
            let mut start = 0;
            for (r, &end) in row_end.iter().enumerate() {
                buf[start + at] = (c.is_valid(r) && bit(c.data, c.offset + r)) as u8;
                start = end;
            }
        }
        ty => match ty.width() {
            1 => copy_slots::<1>(at, c, row_end, buf),
            2 => copy_slots::<2>(at, c, row_end, buf),
            4 => copy_slots::<4>(at, c, row_end, buf),
            8 => copy_slots::<8>(at, c, row_end, buf),
            _ => copy_slots::<16>(at, c, row_end, buf),
        },
    }
}

/// Copies `W`-byte values into their slots (a loop per width, so each is
/// a plain copy).
#[inline]
fn copy_slots<const W: usize>(at: usize, c: &ColumnIn<'_>, row_end: &[usize], buf: &mut [u8]) {
    let values = &c.data[c.offset * W..(c.offset + row_end.len()) * W];
    let mut start = 0;
    match c.validity {
        None => {
            for (v, &end) in values.chunks_exact(W).zip(row_end) {
                buf[start + at..start + at + W].copy_from_slice(v);
                start = end;
            }
        }
        Some(_) => {
            for (r, (v, &end)) in values.chunks_exact(W).zip(row_end).enumerate() {
                if c.is_valid(r) {
                    buf[start + at..start + at + W].copy_from_slice(v);
                }
                start = end;
            }
        }
    }
}

/// A string/binary field: its end in the slot and its bytes after the
/// previous var fields' (`var_end` holds each row's running end).
fn write_var(
    fixed_len: usize,
    at: usize,
    c: &ColumnIn<'_>,
    row_end: &[usize],
    var_end: &mut [u32],
    buf: &mut [u8],
) {
    let offs = c.offsets.unwrap_or_default();
    let mut start = 0;
    for (r, &end) in row_end.iter().enumerate() {
        let ve = &mut var_end[r];
        if c.is_valid(r) {
            let (s, e) = c.span(offs, r);
            let to = start + fixed_len + *ve as usize;
            buf[to..to + (e - s)].copy_from_slice(&c.data[s..e]);
            *ve += (e - s) as u32;
        }
        buf[start + at..start + at + 4].copy_from_slice(&ve.to_le_bytes());
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::typed::row::{decode_row, encode_row, Value};
    use crate::format::typed::schema::Field;

    fn field(name: &str, ty: FieldType, nullable: bool) -> Field {
        Field {
            name: name.into(),
            ty,
            nullable,
            aliases: vec![],
        }
    }

    fn schema(fields: Vec<Field>) -> Schema {
        Schema { version: 1, fields }
    }

    fn bitmap(bits: &[bool]) -> Vec<u8> {
        let mut b = vec![0u8; bits.len().div_ceil(8)];
        for (i, &v) in bits.iter().enumerate() {
            if v {
                b[i / 8] |= 1 << (i % 8);
            }
        }
        b
    }

    fn offsets32(parts: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
        let mut offs = 0i32.to_le_bytes().to_vec();
        let mut data = vec![];
        for p in parts {
            data.extend_from_slice(p);
            offs.extend_from_slice(&(data.len() as i32).to_le_bytes());
        }
        (offs, data)
    }

    /// Every row built from columns equals the row `encode_row` builds
    /// from the same values: every type, nulls, both offset widths, an
    /// array offset.
    #[test]
    fn columns_encode_the_rows_encode_row_does_for_every_type() {
        use FieldType::*;
        let s = schema(vec![
            field("b", Bool, true),
            field("i8", Int8, false),
            field("i16", Int16, true),
            field("i32", Int32, false),
            field("i64", Int64, true),
            field("u8", UInt8, false),
            field("u16", UInt16, false),
            field("u32", UInt32, false),
            field("u64", UInt64, true),
            field("f32", Float32, false),
            field("f64", Float64, true),
            field("ts", TimestampUs, false),
            field("d", Date32, false),
            field(
                "dec",
                Decimal128 {
                    precision: 10,
                    scale: 2,
                },
                true,
            ),
            field("s", String, true),
            field("bin", Binary, false),
            field("ls", String, false),
        ]);
        let l = RowLayout::of(&s);
        let rows = 11usize;
        // Columns with a leading element the arrays skip (offset 1).
        let off = 1usize;
        let valid: Vec<bool> = (0..rows + off).map(|r| r % 3 != 1).collect();
        let vbm = bitmap(&valid);
        let fixed = |w: usize, f: &dyn Fn(usize) -> Vec<u8>| -> Vec<u8> {
            (0..rows + off)
                .flat_map(|r| {
                    let v = f(r);
                    assert_eq!(v.len(), w);
                    v
                })
                .collect()
        };
        let bools = bitmap(&(0..rows + off).map(|r| r % 2 == 0).collect::<Vec<_>>());
        let i8s = fixed(1, &|r| (-(r as i8) * 9).to_le_bytes().to_vec());
        let i16s = fixed(2, &|r| (r as i16 * -1000).to_le_bytes().to_vec());
        let i32s = fixed(4, &|r| (r as i32 * -100_000).to_le_bytes().to_vec());
        let i64s = fixed(8, &|r| (r as i64 * -(1 << 40)).to_le_bytes().to_vec());
        let u8s = fixed(1, &|r| (r as u8 * 20).to_le_bytes().to_vec());
        let u16s = fixed(2, &|r| (r as u16 * 5000).to_le_bytes().to_vec());
        let u32s = fixed(4, &|r| (r as u32 * 300_000_000).to_le_bytes().to_vec());
        let u64s = fixed(8, &|r| (u64::MAX - r as u64).to_le_bytes().to_vec());
        let f32s = fixed(4, &|r| (r as f32 * 0.5).to_le_bytes().to_vec());
        let f64s = fixed(8, &|r| (r as f64 * -0.25).to_le_bytes().to_vec());
        let decs = fixed(16, &|r| (r as i128 * 12345 - 99).to_le_bytes().to_vec());
        let texts: Vec<std::string::String> =
            (0..rows + off).map(|r| "é".repeat(r % 4) + "x").collect();
        let parts: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
        let (soffs, sdata) = offsets32(&parts);
        let bins: Vec<Vec<u8>> = (0..rows + off).map(|r| vec![r as u8; r % 3]).collect();
        let bparts: Vec<&[u8]> = bins.iter().map(|b| b.as_slice()).collect();
        let (boffs, bdata) = offsets32(&bparts);
        let loffs: Vec<u8> = soffs
            .chunks(4)
            .flat_map(|c| i64::from(i32::from_le_bytes(c.try_into().unwrap())).to_le_bytes())
            .collect();
        let col = |data: &'static [u8], nullable: bool| {
            ColumnIn {
                validity: None,
                offset: off,
                data,
                offsets: None,
                large: false,
            }
            .with_validity(nullable.then_some(&vbm[..]))
        };
        let leak = |v: Vec<u8>| -> &'static [u8] { Box::leak(v.into_boxed_slice()) };
        let cols = vec![
            col(leak(bools), true),
            col(leak(i8s.clone()), false),
            col(leak(i16s.clone()), true),
            col(leak(i32s.clone()), false),
            col(leak(i64s.clone()), true),
            col(leak(u8s.clone()), false),
            col(leak(u16s.clone()), false),
            col(leak(u32s.clone()), false),
            col(leak(u64s.clone()), true),
            col(leak(f32s.clone()), false),
            col(leak(f64s.clone()), true),
            col(leak(i64s.clone()), false),
            col(leak(i32s.clone()), false),
            col(leak(decs.clone()), true),
            ColumnIn {
                offsets: Some(&soffs),
                ..col(leak(sdata.clone()), true)
            },
            ColumnIn {
                offsets: Some(&boffs),
                ..col(leak(bdata), false)
            },
            ColumnIn {
                offsets: Some(&loffs),
                large: true,
                ..col(leak(sdata), false)
            },
        ];
        let mut out = b"before".to_vec();
        encode_columns(&s, &l, &cols, rows, &mut out).unwrap();
        let mut want = b"before".to_vec();
        for r in off..rows + off {
            let v = valid[r];
            let n = |x: Value| if v { x } else { Value::Null };
            let g = |b: &[u8], w: usize| -> [u8; 16] {
                let mut a = [0u8; 16];
                a[..w].copy_from_slice(&b[r * w..r * w + w]);
                a
            };
            let i = |b: &[u8], w: usize| -> i64 {
                let a = g(b, w);
                let x = i128::from_le_bytes(a);
                // sign-extend from w bytes
                ((x << (128 - 8 * w)) >> (128 - 8 * w)) as i64
            };
            let u = |b: &[u8], w: usize| u128::from_le_bytes(g(b, w)) as u64;
            let vals = vec![
                n(Value::Bool(r % 2 == 0)),
                Value::Int(i(&i8s, 1)),
                n(Value::Int(i(&i16s, 2))),
                Value::Int(i(&i32s, 4)),
                n(Value::Int(i(&i64s, 8))),
                Value::UInt(u(&u8s, 1)),
                Value::UInt(u(&u16s, 2)),
                Value::UInt(u(&u32s, 4)),
                n(Value::UInt(u(&u64s, 8))),
                Value::Float(f64::from(r as f32 * 0.5)),
                n(Value::Float(r as f64 * -0.25)),
                Value::Int(i(&i64s, 8)),
                Value::Int(i(&i32s, 4)),
                n(Value::Decimal(r as i128 * 12345 - 99)),
                n(Value::Str(texts[r].clone())),
                Value::Bytes(bins[r].clone()),
                Value::Str(texts[r].clone()),
            ];
            encode_row(&s, &l, &vals, &mut want).unwrap();
            let row_start = want.len() - {
                let mut one = vec![];
                encode_row(&s, &l, &vals, &mut one).unwrap();
                one.len()
            };
            assert_eq!(decode_row(&l, &want[row_start..]).unwrap(), vals);
        }
        assert_eq!(out, want);
    }

    impl<'a> ColumnIn<'a> {
        fn with_validity(self, validity: Option<&'a [u8]>) -> Self {
            ColumnIn { validity, ..self }
        }
    }

    fn market() -> (Schema, RowLayout) {
        let s = schema(vec![
            field("time", FieldType::TimestampUs, false),
            field("symbol", FieldType::String, false),
            field("price", FieldType::Float64, true),
        ]);
        let l = RowLayout::of(&s);
        (s, l)
    }

    fn refused(cols: &[ColumnIn<'_>], rows: usize) -> String {
        let (s, l) = market();
        let mut out = b"kept".to_vec();
        let e = encode_columns(&s, &l, cols, rows, &mut out).unwrap_err();
        assert_eq!(out, b"kept", "nothing appended on error");
        e.0
    }

    /// Bad columns are refused naming the field and the row, nothing
    /// appended: a null in a non-nullable field, offsets out of range or
    /// decreasing, a string that is not UTF-8 (even one split across rows
    /// whose bytes together are UTF-8), short buffers, too few columns.
    #[test]
    fn bad_columns_are_refused_naming_field_and_row() {
        let times: Vec<u8> = (0..3i64).flat_map(|t| t.to_le_bytes()).collect();
        let prices: Vec<u8> = (0..3).flat_map(|t| f64::from(t).to_le_bytes()).collect();
        let (offs, data) = offsets32(&[b"AB", b"C", b"DEF"]);
        let ok = |offs: &'static [u8], data: &'static [u8]| {
            vec![
                ColumnIn {
                    data: Box::leak(times.clone().into_boxed_slice()),
                    ..Default::default()
                },
                ColumnIn {
                    data,
                    offsets: Some(offs),
                    ..Default::default()
                },
                ColumnIn {
                    data: Box::leak(prices.clone().into_boxed_slice()),
                    validity: Some(&[0b101]),
                    ..Default::default()
                },
            ]
        };
        let leak = |v: Vec<u8>| -> &'static [u8] { Box::leak(v.into_boxed_slice()) };
        let good = ok(leak(offs.clone()), leak(data.clone()));
        let (s, l) = market();
        let mut out = vec![];
        encode_columns(&s, &l, &good, 3, &mut out).unwrap();
        assert_eq!(
            decode_row(&l, &out[..l.fixed_len + 2]).unwrap()[2],
            Value::Float(0.0)
        );

        let mut c = good.clone();
        c[0].validity = Some(&[0b011]);
        let e = refused(&c, 3);
        assert!(e.contains("\"time\"") && e.contains("row 2 is null"), "{e}");

        let (o2, _) = offsets32(&[b"AB", b"C", b"DEFG"]);
        let e = refused(&ok(leak(o2), leak(data.clone())), 3);
        assert!(e.contains("\"symbol\"") && e.contains("row 2"), "{e}");

        let mut o3 = offs.clone();
        o3[4..8].copy_from_slice(&3i32.to_le_bytes());
        o3[8..12].copy_from_slice(&1i32.to_le_bytes());
        let e = refused(&ok(leak(o3), leak(data.clone())), 3);
        assert!(e.contains("\"symbol\"") && e.contains("row 1"), "{e}");

        let e = refused(&ok(leak(offs.clone()), leak(b"AB\xffDEF".to_vec())), 3);
        assert!(
            e.contains("\"symbol\"") && e.contains("row 1 is not UTF-8"),
            "{e}"
        );
        // "é" split across rows 0 and 1: the whole is UTF-8, rows are not.
        let (o4, d4) = offsets32(&[b"A\xc3", b"\xa9", b"D"]);
        let e = refused(&ok(leak(o4), leak(d4)), 3);
        assert!(
            e.contains("\"symbol\"") && e.contains("row 0 is not UTF-8"),
            "{e}"
        );

        let e = refused(&good, 4);
        assert!(e.contains("\"time\"") && e.contains("shorter"), "{e}");
        let e = refused(&good[..2], 3);
        assert!(e.contains("2 columns for 3 fields"), "{e}");
        let mut c = good.clone();
        c[1].offsets = None;
        assert!(refused(&c, 3).contains("no offsets"));
    }

    /// A decimal with more digits than its precision is refused, as
    /// `encode_row` refuses it; a null slot holding one is not looked at.
    #[test]
    fn decimals_past_their_precision_are_refused() {
        let s = schema(vec![field(
            "d",
            FieldType::Decimal128 {
                precision: 3,
                scale: 1,
            },
            true,
        )]);
        let l = RowLayout::of(&s);
        let data: Vec<u8> = [999i128, -1000, 5000]
            .iter()
            .flat_map(|d| d.to_le_bytes())
            .collect();
        let col = |validity| ColumnIn {
            validity,
            data: &data,
            ..Default::default()
        };
        let mut out = vec![];
        let e = encode_columns(&s, &l, &[col(None)], 3, &mut out).unwrap_err();
        assert!(
            e.0.contains("row 1") && e.0.contains("precision"),
            "{}",
            e.0
        );
        assert!(out.is_empty());
        encode_columns(&s, &l, &[col(Some(&[0b001]))], 3, &mut out).unwrap();
        assert_eq!(out.len(), 3 * l.fixed_len);
        assert_eq!(out[l.fixed_len + 1..], [0u8; 2 * 17 - 1], "nulls are zero");
    }
}
