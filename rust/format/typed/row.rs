//! One event as a row: null bitmap, fixed slots, var area (FORMAT.md
//! "Typed records", "Row").

use super::schema::{FieldType, Schema, SchemaError};
use crate::format::le_u32;

/// Where each field of a schema lies in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowLayout {
    /// Bytes of the null bitmap: `ceil(nullable fields / 8)`.
    pub bitmap_len: usize,
    /// Bitmap plus every slot: the length of a row without var bytes.
    pub fixed_len: usize,
    /// One per field, in field order.
    pub slots: Vec<Slot>,
    /// The slot of the last string/binary field (its end is the var
    /// area's length), if any.
    pub last_var: Option<usize>,
    /// Nullable fields (bits used in the bitmap).
    pub nullable: usize,
}

/// One field's place in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Byte offset of the slot in the row.
    pub at: usize,
    /// The field's type.
    pub ty: FieldType,
    /// Its bit in the bitmap, when it is nullable.
    pub null_bit: Option<usize>,
}

impl RowLayout {
    /// The layout of `schema`'s rows.
    pub fn of(schema: &Schema) -> RowLayout {
        let nullable = schema.fields.iter().filter(|f| f.nullable).count();
        let bitmap_len = nullable.div_ceil(8);
        let mut at = bitmap_len;
        let mut bit = 0;
        let mut last_var = None;
        let slots = schema
            .fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let s = Slot {
                    at,
                    ty: f.ty,
                    null_bit: f.nullable.then(|| {
                        bit += 1;
                        bit - 1
                    }),
                };
                if f.ty.is_var() {
                    last_var = Some(i);
                }
                at += f.ty.width();
                s
            })
            .collect();
        RowLayout {
            bitmap_len,
            fixed_len: at,
            slots,
            last_var,
            nullable,
        }
    }

    /// The length of the row that starts at `b[0]` (`b` may run on past
    /// it, as in a row batch's block): `F` plus its last var end. Only the
    /// bytes needed to know the length are checked.
    #[inline]
    pub fn row_len(&self, b: &[u8]) -> Result<usize, &'static str> {
        if b.len() < self.fixed_len {
            return Err("typed row shorter than its schema's fixed part");
        }
        let var = match self.last_var {
            Some(i) => le_u32(b, self.slots[i].at).unwrap_or(0) as usize,
            None => 0,
        };
        let len = self.fixed_len + var;
        if len > b.len() {
            return Err("typed row runs past its record");
        }
        Ok(len)
    }

    /// True when field `i`'s value is present in `row` (non-nullable
    /// fields always are).
    #[inline]
    pub fn is_valid(&self, row: &[u8], i: usize) -> bool {
        match self.slots[i].null_bit {
            None => true,
            Some(bit) => row[bit / 8] & (1 << (bit % 8)) != 0,
        }
    }

    /// The var bytes of string/binary field `i` in a checked `row`.
    #[inline]
    pub fn var_bytes<'a>(&self, row: &'a [u8], i: usize) -> &'a [u8] {
        let end = le_u32(row, self.slots[i].at).unwrap_or(0) as usize;
        let start = self.slots[..i]
            .iter()
            .rev()
            .find(|s| s.ty.is_var())
            .map_or(0, |s| le_u32(row, s.at).unwrap_or(0) as usize);
        &row[self.fixed_len + start..self.fixed_len + end]
    }

    /// Checks everything FORMAT.md asks of a row that is exactly `row`:
    /// its length, ends that never decrease, bitmap bits past the nullable
    /// fields zero, nulls with zero slots, bools 0/1, strings UTF-8.
    pub fn check_row(&self, row: &[u8]) -> Result<(), &'static str> {
        if self.row_len(row)? != row.len() {
            return Err("typed row longer than its fields");
        }
        for bit in self.nullable..self.bitmap_len * 8 {
            if row[bit / 8] & (1 << (bit % 8)) != 0 {
                return Err("typed row sets a null-bitmap bit past its nullable fields");
            }
        }
        let mut prev_end = 0usize;
        for (i, s) in self.slots.iter().enumerate() {
            let slot = &row[s.at..s.at + s.ty.width()];
            let valid = self.is_valid(row, i);
            if s.ty.is_var() {
                let end = le_u32(slot, 0).unwrap_or(0) as usize;
                if end < prev_end {
                    return Err("typed row's var ends decrease");
                }
                if !valid && end != prev_end {
                    return Err("typed row's null string or binary has bytes");
                }
                if s.ty == FieldType::String
                    && std::str::from_utf8(&row[self.fixed_len + prev_end..self.fixed_len + end])
                        .is_err()
                {
                    return Err("typed row's string is not UTF-8");
                }
                prev_end = end;
            } else if !valid {
                if slot.iter().any(|&b| b != 0) {
                    return Err("typed row's null value has a non-zero slot");
                }
            } else if s.ty == FieldType::Bool && slot[0] > 1 {
                return Err("typed row's bool is neither 0 nor 1");
            }
        }
        Ok(())
    }

    /// Checks that `block` is exactly `count` rows back to back, each
    /// checked by [`RowLayout::check_row`]; returns where each row starts
    /// (and, last, where the block ends).
    pub fn split_block(&self, block: &[u8], count: usize) -> Result<Vec<usize>, &'static str> {
        let mut starts = Vec::with_capacity(count + 1);
        let mut at = 0usize;
        for _ in 0..count {
            starts.push(at);
            let len = self.row_len(&block[at..])?;
            self.check_row(&block[at..at + len])?;
            at += len;
        }
        if at != block.len() {
            return Err("row batch longer than its rows");
        }
        starts.push(at);
        Ok(starts)
    }
}

/// One field's value, for [`encode_row`] and [`decode_row`].
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value (nullable fields only).
    Null,
    /// `bool`.
    Bool(bool),
    /// Signed ints, `timestamp_us`, `date32`.
    Int(i64),
    /// Unsigned ints.
    UInt(u64),
    /// `float32`, `float64`.
    Float(f64),
    /// `decimal128`: the value × 10^scale.
    Decimal(i128),
    /// `string`.
    Str(String),
    /// `binary`.
    Bytes(Vec<u8>),
}

/// Appends the row of `values` (one per field of `schema`, in order) to
/// `out`. A value of the wrong kind, out of its type's range, or null in a
/// non-nullable field is refused naming the field; `out` is then as it was.
pub fn encode_row(
    schema: &Schema,
    layout: &RowLayout,
    values: &[Value],
    out: &mut Vec<u8>,
) -> Result<(), SchemaError> {
    if values.len() != schema.fields.len() {
        return Err(SchemaError(format!(
            "{} values for {} fields",
            values.len(),
            schema.fields.len()
        )));
    }
    let start = out.len();
    out.resize(start + layout.fixed_len, 0);
    let mut var_len = 0usize;
    let res = (|| {
        for (i, (f, v)) in schema.fields.iter().zip(values).enumerate() {
            let s = layout.slots[i];
            let bad =
                |why: &str| SchemaError(format!("field {:?} ({}): {why}", f.name, f.ty.name()));
            if matches!(v, Value::Null) {
                if !f.nullable {
                    return Err(bad("is not nullable and has no value"));
                }
                if s.ty.is_var() {
                    let at = start + s.at;
                    out[at..at + 4].copy_from_slice(&(var_len as u32).to_le_bytes());
                }
                continue;
            }
            if let Some(bit) = s.null_bit {
                out[start + bit / 8] |= 1 << (bit % 8);
            }
            let at = start + s.at;
            let mut put = |b: &[u8]| out[at..at + b.len()].copy_from_slice(b);
            match (s.ty, v) {
                (FieldType::Bool, Value::Bool(b)) => put(&[*b as u8]),
                (FieldType::Int8, Value::Int(n)) => put(&i8::try_from(*n)
                    .map_err(|_| bad("out of range"))?
                    .to_le_bytes()),
                (FieldType::Int16, Value::Int(n)) => put(&i16::try_from(*n)
                    .map_err(|_| bad("out of range"))?
                    .to_le_bytes()),
                (FieldType::Int32 | FieldType::Date32, Value::Int(n)) => put(&i32::try_from(*n)
                    .map_err(|_| bad("out of range"))?
                    .to_le_bytes()),
                (FieldType::Int64 | FieldType::TimestampUs, Value::Int(n)) => put(&n.to_le_bytes()),
                (FieldType::UInt8, Value::UInt(n)) => put(&u8::try_from(*n)
                    .map_err(|_| bad("out of range"))?
                    .to_le_bytes()),
                (FieldType::UInt16, Value::UInt(n)) => put(&u16::try_from(*n)
                    .map_err(|_| bad("out of range"))?
                    .to_le_bytes()),
                (FieldType::UInt32, Value::UInt(n)) => put(&u32::try_from(*n)
                    .map_err(|_| bad("out of range"))?
                    .to_le_bytes()),
                (FieldType::UInt64, Value::UInt(n)) => put(&n.to_le_bytes()),
                (FieldType::Float32, Value::Float(x)) => put(&(*x as f32).to_le_bytes()),
                (FieldType::Float64, Value::Float(x)) => put(&x.to_le_bytes()),
                (FieldType::Decimal128 { precision, .. }, Value::Decimal(d)) => {
                    if d.unsigned_abs() >= 10u128.pow(u32::from(precision)) {
                        return Err(bad("more digits than its precision"));
                    }
                    put(&d.to_le_bytes())
                }
                (FieldType::String, Value::Str(t)) => {
                    var_len += t.len();
                    put(&u32::try_from(var_len)
                        .map_err(|_| bad("row over 4 GiB"))?
                        .to_le_bytes())
                }
                (FieldType::Binary, Value::Bytes(b)) => {
                    var_len += b.len();
                    put(&u32::try_from(var_len)
                        .map_err(|_| bad("row over 4 GiB"))?
                        .to_le_bytes())
                }
                _ => return Err(bad("a value of another kind")),
            }
        }
        Ok(())
    })();
    if let Err(e) = res {
        out.truncate(start);
        return Err(e);
    }
    for v in values {
        match v {
            Value::Str(t) => out.extend_from_slice(t.as_bytes()),
            Value::Bytes(b) => out.extend_from_slice(b),
            _ => {}
        }
    }
    Ok(())
}

/// The values of `row` (checked with [`RowLayout::check_row`] first), one
/// per field.
pub fn decode_row(layout: &RowLayout, row: &[u8]) -> Result<Vec<Value>, &'static str> {
    layout.check_row(row)?;
    let mut out = Vec::with_capacity(layout.slots.len());
    let mut prev_end = 0usize;
    for (i, s) in layout.slots.iter().enumerate() {
        let slot = &row[s.at..s.at + s.ty.width()];
        let end = if s.ty.is_var() {
            le_u32(slot, 0).unwrap_or(0) as usize
        } else {
            0
        };
        if !layout.is_valid(row, i) {
            out.push(Value::Null);
            if s.ty.is_var() {
                prev_end = end;
            }
            continue;
        }
        let int = |n: usize| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&slot[..n]);
            b
        };
        out.push(match s.ty {
            FieldType::Bool => Value::Bool(slot[0] == 1),
            FieldType::Int8 => Value::Int(i64::from(slot[0] as i8)),
            FieldType::Int16 => Value::Int(i64::from(i16::from_le_bytes([slot[0], slot[1]]))),
            FieldType::Int32 | FieldType::Date32 => Value::Int(i64::from(i32::from_le_bytes(
                slot[..4].try_into().unwrap_or_default(),
            ))),
            FieldType::Int64 | FieldType::TimestampUs => Value::Int(i64::from_le_bytes(int(8))),
            FieldType::UInt8 | FieldType::UInt16 | FieldType::UInt32 | FieldType::UInt64 => {
                Value::UInt(u64::from_le_bytes(int(s.ty.width())))
            }
            FieldType::Float32 => Value::Float(f64::from(f32::from_le_bytes(
                slot[..4].try_into().unwrap_or_default(),
            ))),
            FieldType::Float64 => Value::Float(f64::from_le_bytes(int(8))),
            FieldType::Decimal128 { .. } => Value::Decimal(i128::from_le_bytes(
                slot[..16].try_into().unwrap_or_default(),
            )),
            FieldType::String => {
                let b = &row[layout.fixed_len + prev_end..layout.fixed_len + end];
                prev_end = end;
                Value::Str(String::from_utf8_lossy(b).into_owned())
            }
            FieldType::Binary => {
                let b = &row[layout.fixed_len + prev_end..layout.fixed_len + end];
                prev_end = end;
                Value::Bytes(b.to_vec())
            }
        });
    }
    Ok(out)
}

/// `row`, a row of schema `from`, as a row of `to`, a later version of
/// the same queue's schema: each field of `to` takes the value of the
/// field of `from` with its name or one of its aliases (a rename), widened
/// as `to` says, or null when `from` has none (a field added since). An
/// error when the row does not check against `from` or a value does not
/// fit `to` (not a valid evolution of `from`).
pub fn convert_row(from: &Schema, row: &[u8], to: &Schema) -> Result<Vec<u8>, SchemaError> {
    let values = decode_row(&RowLayout::of(from), row)
        .map_err(|why| SchemaError(format!("a row of schema version {}: {why}", from.version)))?;
    let moved: Vec<Value> = to
        .fields
        .iter()
        .map(|f| {
            std::iter::once(&f.name)
                .chain(&f.aliases)
                .find_map(|n| from.fields.iter().position(|g| &g.name == n))
                .map_or(Value::Null, |i| match (&values[i], f.ty) {
                    // An unsigned field widened to a signed one.
                    (Value::UInt(n), FieldType::Int16 | FieldType::Int32 | FieldType::Int64) => {
                        i64::try_from(*n).map_or(Value::UInt(*n), Value::Int)
                    }
                    (v, _) => v.clone(),
                })
        })
        .collect();
    let mut out = Vec::new();
    encode_row(to, &RowLayout::of(to), &moved, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::typed::schema::Field;

    fn market() -> Schema {
        let f = |name: &str, ty, nullable| Field {
            name: name.into(),
            ty,
            nullable,
            aliases: vec![],
        };
        Schema {
            version: 1,
            fields: vec![
                f("time", FieldType::TimestampUs, false),
                f("symbol", FieldType::String, false),
                f("price", FieldType::Float64, true),
                f("size", FieldType::Int64, false),
                f("side", FieldType::Int8, false),
                f("note", FieldType::Binary, true),
            ],
        }
    }

    /// A row of one version in a later one: renamed through an alias,
    /// widened (unsigned into signed too), a dropped field gone, an added
    /// one null.
    #[test]
    fn a_row_converts_to_a_later_version() {
        let f = |name: &str, ty, aliases: &[&str]| Field {
            name: name.into(),
            ty,
            nullable: true,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
        };
        let v1 = Schema {
            version: 1,
            fields: vec![
                f("n", FieldType::UInt32, &[]),
                f("gone", FieldType::String, &[]),
                f("x", FieldType::Float32, &[]),
            ],
        };
        let v2 = Schema {
            version: 2,
            fields: vec![
                f("x", FieldType::Float64, &[]),
                f("count", FieldType::Int64, &["n"]),
                f("added", FieldType::String, &[]),
            ],
        };
        let mut row = Vec::new();
        let old = [
            Value::UInt(4_000_000_000),
            Value::Str("z".into()),
            Value::Float(0.5),
        ];
        encode_row(&v1, &RowLayout::of(&v1), &old, &mut row).unwrap();
        let new = convert_row(&v1, &row, &v2).unwrap();
        assert_eq!(
            decode_row(&RowLayout::of(&v2), &new).unwrap(),
            [Value::Float(0.5), Value::Int(4_000_000_000), Value::Null]
        );
        assert!(convert_row(&v1, &row[..row.len() - 1], &v2).is_err());
    }

    #[test]
    fn a_row_round_trips_and_its_bytes_are_as_documented() {
        let s = market();
        let l = RowLayout::of(&s);
        assert_eq!((l.bitmap_len, l.fixed_len), (1, 1 + 8 + 4 + 8 + 8 + 1 + 4));
        let vals = vec![
            Value::Int(7),
            Value::Str("ABC".into()),
            Value::Null,
            Value::Int(-3),
            Value::Int(1),
            Value::Bytes(vec![9, 8]),
        ];
        let mut out = vec![];
        encode_row(&s, &l, &vals, &mut out).unwrap();
        assert_eq!(out.len(), l.fixed_len + 5);
        assert_eq!(out[0], 0b10, "price null, note present");
        assert_eq!(&out[9..13], &3u32.to_le_bytes(), "symbol ends at 3");
        assert_eq!(&out[30..34], &5u32.to_le_bytes(), "note ends at 5");
        assert_eq!(&out[l.fixed_len..], b"ABC\x09\x08");
        assert_eq!(decode_row(&l, &out).unwrap(), vals);
        assert_eq!(
            l.row_len(&[out.clone(), vec![0; 9]].concat()).unwrap(),
            out.len()
        );
    }

    #[test]
    fn bad_values_name_their_field_and_leave_nothing() {
        let s = market();
        let l = RowLayout::of(&s);
        let mut out = vec![1, 2];
        let mut vals = vec![
            Value::Int(7),
            Value::Null,
            Value::Null,
            Value::Int(-3),
            Value::Int(1),
            Value::Null,
        ];
        let e = encode_row(&s, &l, &vals, &mut out).unwrap_err();
        assert!(
            e.0.contains("\"symbol\"") && e.0.contains("not nullable"),
            "{e}"
        );
        vals[1] = Value::Str("x".into());
        vals[4] = Value::Int(300);
        let e = encode_row(&s, &l, &vals, &mut out).unwrap_err();
        assert!(
            e.0.contains("\"side\"") && e.0.contains("out of range"),
            "{e}"
        );
        assert_eq!(out, vec![1, 2]);
    }

    #[test]
    fn damaged_rows_are_refused() {
        let s = market();
        let l = RowLayout::of(&s);
        let mut row = vec![];
        let vals = [
            Value::Int(7),
            Value::Str("ABC".into()),
            Value::Float(1.5),
            Value::Int(-3),
            Value::Int(1),
            Value::Null,
        ];
        encode_row(&s, &l, &vals, &mut row).unwrap();
        l.check_row(&row).unwrap();
        let mut bad = row.clone();
        bad[0] |= 0x80;
        assert!(l.check_row(&bad).is_err(), "bit past the nullable fields");
        let mut bad = row.clone();
        bad[30..34].copy_from_slice(&9u32.to_le_bytes());
        assert!(
            l.check_row(&bad).is_err(),
            "null binary with bytes / past the row"
        );
        let mut bad = row.clone();
        bad[l.fixed_len] = 0xff;
        assert!(l.check_row(&bad).is_err(), "not UTF-8");
        assert!(l.check_row(&row[..row.len() - 1]).is_err());
        let block = [row.clone(), row.clone()].concat();
        assert_eq!(
            l.split_block(&block, 2).unwrap(),
            vec![0, row.len(), 2 * row.len()]
        );
        assert!(l.split_block(&block, 1).is_err());
    }

    #[test]
    fn evolution_takes_widening_renames_and_nullable_additions_only() {
        let v1 = market();
        let mut v2 = v1.clone();
        v2.fields[4].ty = FieldType::Int32;
        v2.fields[3].name = "qty".into();
        v2.fields[3].aliases = vec!["size".into()];
        v2.fields.push(Field {
            name: "venue".into(),
            ty: FieldType::String,
            nullable: true,
            aliases: vec![],
        });
        v1.check_evolution(&v2).unwrap();
        let mut bad = v1.clone();
        bad.fields[0].ty = FieldType::Int32;
        assert!(v1.check_evolution(&bad).unwrap_err().0.contains("\"time\""));
        let mut bad = v1.clone();
        bad.fields[2].nullable = false;
        assert!(v1
            .check_evolution(&bad)
            .unwrap_err()
            .0
            .contains("non-nullable"));
        let mut bad = v1.clone();
        bad.fields.push(Field {
            name: "x".into(),
            ty: FieldType::Int64,
            nullable: false,
            aliases: vec![],
        });
        assert!(v1.check_evolution(&bad).unwrap_err().0.contains("\"x\""));
        let versions = SchemaVersions::default().declare(&v1).unwrap();
        let versions = versions.declare(&v2).unwrap();
        assert_eq!(versions.versions.len(), 2);
        assert_eq!(
            versions.declare(&v2).unwrap(),
            versions,
            "same fields: no new version"
        );
        let back = SchemaVersions::from_json_value(&versions.to_json_value()).unwrap();
        assert_eq!(back, versions);
        assert_eq!(Schema::from_json(&v1.to_json()).unwrap(), v1);
    }

    use crate::format::typed::schema::SchemaVersions;
}
