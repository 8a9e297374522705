//! `where()` on a typed queue's schema fields ([`typed_where`]): the field
//! of every row decoded and compared, or, for a sealed file with a valid
//! secondary index on the field, the index asked. The indexes are the same
//! files as on headers (`NAME.field-FIELD`, [`crate::format::fields`],
//! source byte 1), built from the rows of a sealed file by a typed read of
//! the fields (so rows in batches, compressed or not, are indexed too):
//! [`ensure_indexes`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::catalog::{Catalog, FileInfo};
use crate::error::Result;
use crate::format::fields::{encode_groups, int_key, FieldKind};
use crate::format::footer::Footer;
use crate::format::header::DataHeader;
use crate::format::typed::{SchemaVersions, TypedColumn};
use crate::index::fields::{
    self as field_index, FieldIndex, FieldIndexDef, FieldQuery, KeyPredicate,
};
use crate::reader::field::ActiveSeqs;
use crate::reader::tailer::Tailer;
use crate::reader::typed::{
    cell, prepare, satisfies, Operand, TypedBatch, TypedOp, TypedPredicate, WHERE_STEP,
};
use crate::reader::wait::WaitStrategy;

/// The sequences in `[tailer's position, end)` whose field satisfies
/// `pred`, ascending, decoding only that field. With `index` (the catalog,
/// `pred` as a query of a declared index on the field, and what the
/// handle's in-memory index of the active file lists for it), a sealed file
/// with a valid index file is answered by it, unread, and the active file
/// by the in-memory index as far as it goes; the rest is read.
pub(crate) fn typed_where(
    tailer: &mut Tailer,
    versions: &SchemaVersions,
    pred: &TypedPredicate,
    (end, limit): (u64, usize),
    index: Option<(&Catalog, &FieldQuery, Option<&ActiveSeqs>)>,
) -> Result<Vec<u64>> {
    let (i, operands) = prepare(versions, pred)?;
    let mut out = Vec::new();
    while tailer.next_seq() < end {
        let at = tailer.next_seq();
        let mut stop = end;
        if let Some((catalog, query, active)) = index {
            if let Some((seqs, next)) = sealed_seqs(catalog, at, query) {
                out.extend(seqs.into_iter().filter(|s| (at..end).contains(s)));
                if next >= end {
                    break;
                }
                tailer.seek(next)?;
                continue;
            }
            // The active file, as far as the handle's index of it goes.
            let in_file = |a: &&ActiveSeqs| {
                at < a.upto
                    && catalog
                        .locate(at)
                        .is_some_and(|f| f.header.file_number == a.file_number)
            };
            if let Some(a) = active.filter(in_file) {
                out.extend(a.seqs.iter().filter(|&&s| at <= s && s < end.min(a.upto)));
                if a.upto >= end {
                    break;
                }
                tailer.seek(a.upto)?;
                continue;
            }
            // This file only: the next may have its index.
            stop = next_file(catalog, at).map_or(end, |n| n.min(end));
        }
        let b = TypedBatch::read(tailer, versions, &[i], (stop, WHERE_STEP), limit)?;
        let c = &b.columns.columns[0];
        for r in 0..b.rows {
            if c.is_valid(r) && satisfies(pred.op, &cell(c, r), &operands) {
                out.push(b.seq[r] as u64);
            }
        }
        if tailer.next_seq() == at {
            break;
        }
    }
    Ok(out)
}

/// Builds or checks the index files of `defs` over sealed file `info`
/// (those missing or failing a check): header fields from a walk of its
/// records, schema fields from a typed read of its rows. Returns how many
/// are valid afterwards. A file that cannot be read whole gets none of the
/// failing kind (readers then read the data file, which reports damage).
pub fn ensure_indexes(catalog: &Arc<Catalog>, info: &FileInfo, defs: &[FieldIndexDef]) -> usize {
    let (of_rows, of_headers): (Vec<FieldIndexDef>, Vec<FieldIndexDef>) =
        defs.iter().cloned().partition(|d| d.schema_field);
    let base = catalog.base();
    field_index::ensure(
        base,
        info.id,
        &info.header,
        &of_headers,
        &field_index::build,
    ) + field_index::ensure(
        base,
        info.id,
        &info.header,
        &of_rows,
        &|_, header, footer, defs| build(catalog, header, footer, defs),
    )
}

/// The index files of schema fields `defs` over the sealed data file of
/// `header` and `footer`, in the order of `defs`, from one typed read of
/// its rows (nulls are not listed); or why not (the file does not read
/// whole, a value has no key).
fn build(
    catalog: &Arc<Catalog>,
    header: &DataHeader,
    footer: &Footer,
    defs: &[FieldIndexDef],
) -> Result<Vec<Vec<u8>>, String> {
    let versions = catalog.schema_versions().ok_or("the queue has no schema")?;
    let current = versions.current().ok_or("the queue has no schema")?;
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    let wanted = current.field_indexes(&names).map_err(|e| e.0)?;
    let mut pairs: Vec<Pairs> = defs.iter().map(|d| Pairs::new(d.kind)).collect();
    let mut t = Tailer::new(catalog.clone(), WaitStrategy::default());
    t.seek(header.first_seq).map_err(|e| e.to_string())?;
    let limit = catalog.max_decompressed();
    while t.next_seq() < footer.end_seq {
        let at = t.next_seq();
        let b = TypedBatch::read(
            &mut t,
            &versions,
            &wanted,
            (footer.end_seq, WHERE_STEP),
            limit,
        )
        .map_err(|e| e.to_string())?;
        for (c, p) in b.columns.columns.iter().zip(pairs.iter_mut()) {
            p.add(c, &b.seq)?;
        }
        if t.next_seq() == at {
            return Err(format!(
                "the rows end at {at}, the footer says {}",
                footer.end_seq
            ));
        }
    }
    Ok(defs
        .iter()
        .zip(pairs)
        .map(|(d, p)| p.encode(&field_index::of(header, footer, d)))
        .collect())
}

/// Calls `f(value, sequence)` for each non-null row of int-indexed column
/// `c` (sequences `seq`).
fn each_int(c: &TypedColumn, seq: &[i64], f: &mut dyn FnMut(i64, u64)) -> Result<(), String> {
    for r in (0..seq.len()).filter(|&r| c.is_valid(r)) {
        let Operand::Int(x) = cell(c, r) else {
            return Err(format!("{:?} ({}) has no int index", c.name, c.ty.name()));
        };
        let x =
            i64::try_from(x).map_err(|_| format!("{x} in {:?} is past an int index", c.name))?;
        f(x, seq[r] as u64);
    }
    Ok(())
}

/// Calls `f(value, sequence)` for each non-null row of str-indexed column
/// `c` (sequences `seq`); a value longer than an index lists is an error.
fn each_str(c: &TypedColumn, seq: &[i64], f: &mut dyn FnMut(&[u8], u64)) -> Result<(), String> {
    if !c.ty.is_var() {
        return Err(format!("{:?} ({}) has no str index", c.name, c.ty.name()));
    }
    for r in (0..seq.len()).filter(|&r| c.is_valid(r)) {
        let value = &c.data[c.offsets[r] as usize..c.offsets[r + 1] as usize];
        field_index::key_fits(&c.name, value)?;
        f(value, seq[r] as u64);
    }
    Ok(())
}

/// Adds the rows `[index.upto, end)` of the active file to `index`, the
/// in-memory index of schema field `field` (of kind `kind`) over that file:
/// what `where()` asks for the active file, as the files of sealed ones.
/// Reading stops at `end` or the end of what is published.
pub(crate) fn extend_active(
    catalog: &Arc<Catalog>,
    versions: &SchemaVersions,
    (field, kind): (usize, FieldKind),
    end: u64,
    index: &mut crate::index::fields::ActiveIndex,
) -> Result<()> {
    if index.upto >= end {
        return Ok(());
    }
    let mut t = Tailer::new(catalog.clone(), WaitStrategy::default());
    match t.seek(index.upto) {
        Ok(()) => {}
        // Nothing published past it yet (appended, not yet written).
        Err(crate::error::Error::NotFound { .. }) => return Ok(()),
        Err(e) => return Err(e),
    }
    let limit = catalog.max_decompressed();
    while t.next_seq() < end {
        let at = t.next_seq();
        let b = TypedBatch::read(&mut t, versions, &[field], (end, WHERE_STEP), limit)?;
        let mut delta = Pairs::new(kind);
        delta
            .add(&b.columns.columns[0], &b.seq)
            .map_err(crate::error::Error::Schema)?;
        delta.merge_into(&mut index.values);
        index.upto = t.next_seq();
        if index.upto == at {
            break;
        }
    }
    Ok(())
}

/// One field's values and the sequences holding each, as a build collects
/// them (sorted by value when encoded: a tree of millions of values costs
/// a cache miss per level per row).
enum Pairs {
    /// An `int` index: (value, sequence) pairs.
    Int(Vec<(i64, u64)>),
    /// A `str` index: each value's sequences.
    Str(HashMap<Vec<u8>, Vec<u64>>),
}

impl Pairs {
    /// None yet, for an index of kind `kind`.
    fn new(kind: FieldKind) -> Pairs {
        match kind {
            FieldKind::Int => Pairs::Int(Vec::new()),
            FieldKind::Str => Pairs::Str(HashMap::new()),
        }
    }

    /// Adds them to `values` (key to ascending sequences), whose
    /// sequences all come before these.
    fn merge_into(self, values: &mut BTreeMap<Vec<u8>, Vec<u64>>) {
        match self {
            Pairs::Int(v) => {
                for (x, s) in v {
                    values.entry(int_key(x).to_vec()).or_default().push(s);
                }
            }
            Pairs::Str(m) => {
                for (k, seqs) in m {
                    values.entry(k).or_default().extend(seqs);
                }
            }
        }
    }

    /// Adds the non-null rows of column `c` (sequences `seq`).
    fn add(&mut self, c: &TypedColumn, seq: &[i64]) -> Result<(), String> {
        match self {
            Pairs::Int(v) => each_int(c, seq, &mut |x, s| v.push((x, s))),
            Pairs::Str(m) => each_str(c, seq, &mut |value, s| match m.get_mut(value) {
                Some(seqs) => seqs.push(s),
                None => {
                    m.insert(value.to_vec(), vec![s]);
                }
            }),
        }
    }

    /// The index file of `of` listing them.
    fn encode(self, of: &crate::format::fields::FieldsOf) -> Vec<u8> {
        match self {
            Pairs::Int(mut v) => {
                v.sort_unstable();
                let seqs: Vec<u64> = v.iter().map(|p| p.1).collect();
                let mut groups: Vec<([u8; 8], usize, usize)> = Vec::new();
                for (i, &(x, _)) in v.iter().enumerate() {
                    match groups.last_mut() {
                        Some(g) if i > 0 && v[i - 1].0 == x => g.2 = i + 1,
                        _ => groups.push((int_key(x), i, i + 1)),
                    }
                }
                encode_groups(of, groups.iter().map(|(k, a, b)| (&k[..], &seqs[*a..*b])))
            }
            Pairs::Str(m) => {
                let mut entries: Vec<(Vec<u8>, Vec<u64>)> = m.into_iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
                crate::format::fields::encode(of, &entries)
            }
        }
    }
}

/// `pred` as conditions on the keys of an index on its field (whose cells
/// are of type `ty`): `None` when the index cannot answer it exactly
/// (`!=`; `<` and `>` on strings and binary), and `where()` reads the
/// rows. An empty list matches nothing (an int operand past i64).
pub(crate) fn key_predicates(
    pred: &TypedPredicate,
    ty: crate::format::typed::FieldType,
) -> Option<Vec<KeyPredicate>> {
    let operands = pred.operands(ty).ok()?;
    if let Some(Operand::Int(_)) = operands.first() {
        let ints: Vec<i128> = operands
            .iter()
            .map(|o| match o {
                Operand::Int(x) => Some(*x),
                _ => None,
            })
            .collect::<Option<_>>()?;
        return int_predicates(pred.op, &ints);
    }
    let bytes: Vec<Vec<u8>> = operands
        .into_iter()
        .map(|o| match o {
            Operand::Bytes(b) => Some(b),
            _ => None,
        })
        .collect::<Option<_>>()?;
    // Above every key an index lists (keys are at most MAX_KEY_LEN bytes).
    let top = || vec![0xff; crate::format::fields::MAX_KEY_LEN + 1];
    Some(match pred.op {
        TypedOp::Eq | TypedOp::In => bytes.into_iter().map(KeyPredicate::Eq).collect(),
        TypedOp::Prefix => bytes.into_iter().map(KeyPredicate::Prefix).collect(),
        TypedOp::Ge => vec![KeyPredicate::Between(bytes[0].clone(), top())],
        TypedOp::Le => vec![KeyPredicate::Between(Vec::new(), bytes[0].clone())],
        TypedOp::Between if bytes[0] <= bytes[1] => {
            vec![KeyPredicate::Between(bytes[0].clone(), bytes[1].clone())]
        }
        TypedOp::Between => Vec::new(),
        TypedOp::Ne | TypedOp::Lt | TypedOp::Gt => return None,
    })
}

/// [`key_predicates`] of integer operands: ranges clamped to i64 (the keys'
/// domain), `<` and `>` as the inclusive bounds next to them.
fn int_predicates(op: TypedOp, v: &[i128]) -> Option<Vec<KeyPredicate>> {
    let (min, max) = (i128::from(i64::MIN), i128::from(i64::MAX));
    let range = |lo: i128, hi: i128| {
        let (lo, hi) = (lo.max(min), hi.min(max));
        if lo > hi {
            return Vec::new();
        }
        // In range after the clamp.
        let k = |x: i128| int_key(x as i64).to_vec();
        vec![KeyPredicate::Between(k(lo), k(hi))]
    };
    Some(match op {
        TypedOp::Eq | TypedOp::In => v
            .iter()
            .filter(|x| (min..=max).contains(*x))
            .map(|&x| KeyPredicate::Eq(int_key(x as i64).to_vec()))
            .collect(),
        TypedOp::Ge => range(v[0], max),
        TypedOp::Gt => range(v[0] + 1, max),
        TypedOp::Le => range(min, v[0]),
        TypedOp::Lt => range(min, v[0] - 1),
        TypedOp::Between => range(v[0], v[1]),
        TypedOp::Ne | TypedOp::Prefix => return None,
    })
}

/// When sequence `at` is in a sealed file with a valid index of `query`'s
/// field: the sequences of that file the index lists for the query, and
/// the first sequence of the next file. `None` otherwise (the active file,
/// no index, a check failing): the file's rows are read.
pub(crate) fn sealed_seqs(
    catalog: &Catalog,
    at: u64,
    query: &FieldQuery,
) -> Option<(Vec<u64>, u64)> {
    let files = catalog.snapshot();
    let k = files
        .partition_point(|f| f.header.first_seq <= at)
        .checked_sub(1)?;
    let next = files.get(k + 1)?.header.first_seq;
    let info = &files[k];
    let footer = catalog.read_footer(info)?;
    let path = info.id.field_path(catalog.base(), &query.def.name);
    let index = FieldIndex::open(&path, &field_index::of(&info.header, &footer, &query.def))?;
    Some((index.seqs(query)?, next))
}

/// The first sequence of the file after the one holding `at` (`None`: `at`
/// is in the active file).
pub(crate) fn next_file(catalog: &Catalog, at: u64) -> Option<u64> {
    let files = catalog.snapshot();
    let k = files.partition_point(|f| f.header.first_seq <= at);
    files.get(k).map(|f| f.header.first_seq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::typed::{FieldType, Value};
    use crate::reader::typed::tests::pred;

    fn k(v: i64) -> Vec<u8> {
        int_key(v).to_vec()
    }

    /// Int operands become key ranges clamped to i64 (an operand past it
    /// matches what it would, never a wrapped value); `<` and `>` the
    /// inclusive bounds beside them.
    #[test]
    fn int_operands_become_clamped_key_ranges() {
        use KeyPredicate::{Between, Eq};
        let big = Value::UInt(u64::MAX);
        let keys = |op: &str, v: Vec<Value>| key_predicates(&pred(op, v), FieldType::Int64);
        assert_eq!(keys("=", vec![big.clone()]), Some(vec![]));
        assert_eq!(
            keys("in", vec![Value::Int(3), big.clone()]),
            Some(vec![Eq(k(3))])
        );
        assert_eq!(keys(">=", vec![big.clone()]), Some(vec![]));
        assert_eq!(
            keys("<", vec![big]),
            Some(vec![Between(k(i64::MIN), k(i64::MAX))])
        );
        assert_eq!(keys("<", vec![Value::Int(i64::MIN)]), Some(vec![]));
        assert_eq!(
            keys(">", vec![Value::Int(-1)]),
            Some(vec![Between(k(0), k(i64::MAX))])
        );
        assert_eq!(
            keys("between", vec![Value::Int(5), Value::Int(2)]),
            Some(vec![])
        );
        assert_eq!(keys("!=", vec![Value::Int(1)]), None);
        // Bools compare as 0 and 1, as the index lists them.
        assert_eq!(
            key_predicates(&pred("=", vec![Value::Bool(true)]), FieldType::Bool),
            Some(vec![Eq(k(1))])
        );
    }

    /// String operands: exact ranges where the index answers exactly,
    /// `None` (read the rows) where it cannot.
    #[test]
    fn string_operands_become_key_ranges_or_a_scan() {
        use KeyPredicate::{Between, Prefix};
        let s = |t: &str| Value::Str(t.into());
        let keys = |op: &str, v: Vec<Value>| key_predicates(&pred(op, v), FieldType::String);
        assert_eq!(
            keys("prefix", vec![s("AA")]),
            Some(vec![Prefix(b"AA".to_vec())])
        );
        assert_eq!(
            keys("<=", vec![s("M")]),
            Some(vec![Between(vec![], b"M".to_vec())])
        );
        let Some(ge) = keys(">=", vec![s("M")]) else {
            panic!("no key range for >=")
        };
        // Above every key an index file can hold.
        let long = vec![0xff; crate::format::fields::MAX_KEY_LEN];
        assert!(
            matches!(&ge[..], [Between(lo, hi)] if lo == b"M" && hi.as_slice() > long.as_slice())
        );
        assert_eq!(keys("between", vec![s("b"), s("a")]), Some(vec![]));
        for op in ["<", ">", "!="] {
            assert_eq!(keys(op, vec![s("M")]), None, "{op}");
        }
        assert_eq!(
            key_predicates(&pred("=", vec![Value::Float(1.0)]), FieldType::Float64),
            None
        );
    }
}
