//! Secondary indexes on header fields (`NAME.field-FIELD`): built from a
//! sealed data file, one per declared field, read by field queries
//! (`Queue::where_field`). The bytes are in [`crate::format::fields`]; the
//! data file stays the truth (an index that is missing or fails a check is
//! rebuilt by the writer and read around by readers).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::format::fields::{self, FieldKind, FieldsOf, FieldsTop, FIELDS_HEADER_LEN};
use crate::format::footer::Footer;
use crate::format::header::DataHeader;
use crate::format::record::RecordView;
use crate::format::typed::Schema;
use crate::storage::layout::FileId;
use crate::storage::mapped::Mapping;

/// Longest name of an indexed field, in bytes.
pub const MAX_FIELD_NAME: usize = 64;

/// The declared secondary indexes, shared by the queue handle (which adds
/// to them) and the writer's builder.
pub type SharedDefs = std::sync::Arc<std::sync::RwLock<Vec<FieldIndexDef>>>;

/// A declared secondary index: a header name (or a field of a typed
/// queue's schema) and the type of its values.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldIndexDef {
    /// The header name whose values are indexed.
    pub name: String,
    /// How its values are read and compared.
    pub kind: FieldKind,
    /// True when `name` is a field of the queue's schema (or an alias of
    /// one): the values are the rows' (see `reader::typed_where::ensure_indexes`),
    /// not headers'. Not remembered: an open derives it from the schema.
    pub schema_field: bool,
}

impl FieldIndexDef {
    /// A definition, checked: the name is 1 to [`MAX_FIELD_NAME`] bytes of
    /// ASCII letters, digits, `_` and `-` (it is part of a file name).
    pub fn new(name: &str, kind: &str) -> Result<FieldIndexDef> {
        if name.is_empty()
            || name.len() > MAX_FIELD_NAME
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(Error::InvalidConfig(format!(
                "index name {name:?}: 1 to {MAX_FIELD_NAME} ASCII letters, digits, '_' or '-'"
            )));
        }
        let Some(kind) = FieldKind::parse(kind) else {
            return Err(Error::InvalidConfig(format!(
                "index {name:?}: type {kind:?} is not \"str\" or \"int\""
            )));
        };
        Ok(FieldIndexDef {
            name: name.to_string(),
            kind,
            schema_field: false,
        })
    }

    /// This index, as it applies to a queue whose current schema is
    /// `current`: the index of a schema field when its name is one (or an
    /// alias of one), else of a header. An index on a field whose type has
    /// no index kind ([`FieldType::index_kind`]), or declared with another
    /// kind than the field's, is [`Error::Schema`] saying why.
    ///
    /// [`FieldType::index_kind`]: crate::format::typed::FieldType::index_kind
    pub fn for_schema(mut self, current: Option<&Schema>) -> Result<FieldIndexDef> {
        let field = current.and_then(|c| c.find(&self.name).map(|i| &c.fields[i]));
        self.schema_field = field.is_some();
        let Some(f) = field else {
            return Ok(self);
        };
        match f.ty.index_kind() {
            None => Err(Error::Schema(format!(
                "index {:?}: the schema field {:?} is {}, and float, decimal and uint64 \
                 fields have no index (where() reads them without one)",
                self.name,
                f.name,
                f.ty.name()
            ))),
            Some(k) if k != self.kind => Err(Error::Schema(format!(
                "index {:?} is declared as {:?}, but the schema field {:?} ({}) is \
                 indexed as {:?}",
                self.name,
                self.kind.name(),
                f.name,
                f.ty.name(),
                k.name()
            ))),
            Some(_) => Ok(self),
        }
    }

    /// Refuses this index on a schema field of an encrypted queue: its
    /// index files would hold the field's values in clear, which the
    /// queue keeps sealed in its rows ([`Error::InvalidArgument`]).
    pub fn check_encrypted(&self, encrypted: bool) -> Result<()> {
        if self.schema_field && encrypted {
            return Err(Error::InvalidArgument(format!(
                "index {:?}: the queue is encrypted, and an index on a schema field would \
                 store the field's values in clear (where() reads the field without one)",
                self.name
            )));
        }
        Ok(())
    }

    /// The keys of the record's values for this field: one per header of
    /// this name holding a value of this kind (a record may repeat a header
    /// name: each value is indexed, and a query matches when any does).
    /// None for a schema field's index (its values are in the row).
    pub fn keys<'a>(&'a self, rec: &RecordView<'a>) -> impl Iterator<Item = Vec<u8>> + 'a {
        rec.headers()
            .filter(move |h| !self.schema_field && h.name == self.name)
            .filter_map(move |h| self.kind.key_of(h.value, h.value_is_text))
    }
}

/// One condition on a field's key (keys compare as bytes, see
/// [`crate::format::fields`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPredicate {
    /// The key equals this one.
    Eq(Vec<u8>),
    /// The key lies in this inclusive range.
    Between(Vec<u8>, Vec<u8>),
    /// The key starts with these bytes (strings).
    Prefix(Vec<u8>),
}

impl KeyPredicate {
    fn matches(&self, k: &[u8]) -> bool {
        match self {
            KeyPredicate::Eq(v) => k == v.as_slice(),
            KeyPredicate::Between(lo, hi) => lo.as_slice() <= k && k <= hi.as_slice(),
            KeyPredicate::Prefix(p) => k.starts_with(p),
        }
    }

    /// The smallest key that may match.
    fn lower(&self) -> &[u8] {
        match self {
            KeyPredicate::Eq(v) | KeyPredicate::Between(v, _) | KeyPredicate::Prefix(v) => v,
        }
    }

    /// True when `k` and every larger key cannot match.
    fn past(&self, k: &[u8]) -> bool {
        match self {
            KeyPredicate::Eq(v) | KeyPredicate::Between(_, v) => k > v.as_slice(),
            KeyPredicate::Prefix(p) => k > p.as_slice() && !k.starts_with(p),
        }
    }
}

/// A query on one indexed field: a message matches when one of its values
/// satisfies one of the predicates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldQuery {
    /// The field.
    pub def: FieldIndexDef,
    /// Any of these (`in` gives several).
    pub any: Vec<KeyPredicate>,
}

impl FieldQuery {
    /// True when the record carries a value the query wants (the exact
    /// check every returned message passes).
    pub fn matches(&self, rec: &RecordView<'_>) -> bool {
        self.def
            .keys(rec)
            .any(|k| self.any.iter().any(|p| p.matches(&k)))
    }

    /// False when no value in `[min, max]` can match (the zone map check).
    pub fn may_match(&self, top: &FieldsTop) -> bool {
        top.value_count > 0
            && self
                .any
                .iter()
                .any(|p| !p.past(&top.min) && top.max.as_slice() >= p.lower())
    }
}

impl FieldQuery {
    /// The sequences `values` (key to ascending sequences, in key order)
    /// lists for keys the query wants, ascending: each predicate reads a
    /// range of the map.
    pub fn seqs_in(&self, values: &BTreeMap<Vec<u8>, Vec<u64>>) -> Vec<u64> {
        let mut out = Vec::new();
        for p in &self.any {
            for (k, seqs) in values.range(p.lower().to_vec()..) {
                if p.past(k) {
                    break;
                }
                if p.matches(k) {
                    out.extend_from_slice(seqs);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// The in-memory index of one field over the active data file, extended as
/// messages are published (see `Queue::where_field`).
#[derive(Debug, Default)]
pub struct ActiveIndex {
    /// The data file it covers.
    pub file_number: u64,
    /// Every message of that file below this is in `values`.
    pub upto: u64,
    /// Key to ascending sequences.
    pub values: BTreeMap<Vec<u8>, Vec<u64>>,
}

/// What a field index is of, from a sealed file's header and footer.
pub fn of(header: &DataHeader, footer: &Footer, def: &FieldIndexDef) -> FieldsOf {
    FieldsOf {
        file_number: header.file_number,
        first_seq: header.first_seq,
        end_seq: footer.end_seq,
        frames_crc: footer.frames_crc,
        name: def.name.clone(),
        kind: def.kind,
        schema_field: def.schema_field,
    }
}

/// The index file of `def` over one data file, from `values` (key to
/// ascending sequences of the file); an error when a key is longer than
/// an index file lists ([`fields::MAX_KEY_LEN`]).
pub fn encode_values(
    header: &DataHeader,
    footer: &Footer,
    def: &FieldIndexDef,
    values: BTreeMap<Vec<u8>, Vec<u64>>,
) -> std::result::Result<Vec<u8>, String> {
    for k in values.keys() {
        key_fits(&def.name, k)?;
    }
    let values: Vec<_> = values.into_iter().collect();
    Ok(fields::encode(&of(header, footer, def), &values))
}

/// An error unless `value` of field `name` fits an index file (at most
/// [`fields::MAX_KEY_LEN`] bytes).
pub fn key_fits(name: &str, value: &[u8]) -> std::result::Result<(), String> {
    if value.len() > fields::MAX_KEY_LEN {
        return Err(format!(
            "a value of {name:?} is {} bytes, more than an index lists ({})",
            value.len(),
            fields::MAX_KEY_LEN
        ));
    }
    Ok(())
}

/// Builds the index files of some declared fields over one sealed data
/// file: its bytes, header and footer, and the fields, to the index file
/// of each (in their order), or why not.
pub type BuildIndexes<'a> = dyn Fn(&[u8], &DataHeader, &Footer, &[FieldIndexDef]) -> std::result::Result<Vec<Vec<u8>>, String>
    + 'a;

/// The indexes on header fields `defs` of sealed data file `file` (its
/// bytes), in the order of `defs`, from one walk of its records (see
/// [`super::walk_sealed`] for what fails). A [`BuildIndexes`].
pub fn build(
    file: &[u8],
    header: &DataHeader,
    footer: &Footer,
    defs: &[FieldIndexDef],
) -> std::result::Result<Vec<Vec<u8>>, String> {
    let mut maps: Vec<BTreeMap<Vec<u8>, Vec<u64>>> = vec![BTreeMap::new(); defs.len()];
    super::walk_sealed(file, header, footer, &mut |seq, _, _, view| {
        for (def, map) in defs.iter().zip(maps.iter_mut()) {
            for k in def.keys(view) {
                let seqs = map.entry(k).or_default();
                // A header repeated with the same value lists the message once.
                if seqs.last() != Some(&seq) {
                    seqs.push(seq);
                }
            }
        }
    })?;
    defs.iter()
        .zip(maps)
        .map(|(def, map)| encode_values(header, footer, def, map))
        .collect()
}

/// A field index opened for reading: its top level, and the file to read
/// leaf blocks from.
#[derive(Debug)]
pub struct FieldIndex {
    file: File,
    first_seq: u64,
    /// Header and top level: zone map, counts, blocks.
    pub top: FieldsTop,
}

impl FieldIndex {
    /// Opens the index at `path` when it is valid and of `of`.
    pub fn open(path: &Path, of: &FieldsOf) -> Option<FieldIndex> {
        let file = File::open(path).ok()?;
        let mut head = [0u8; FIELDS_HEADER_LEN];
        file.read_exact_at(&mut head, 0).ok()?;
        let len = fields::head_len(&head)?;
        // A damaged length must not make us allocate more than the file.
        if len as u64 > file.metadata().ok()?.len() {
            return None;
        }
        let mut b = vec![0u8; len];
        file.read_exact_at(&mut b, 0).ok()?;
        let top = fields::decode_top(&b, of)?;
        Some(FieldIndex {
            file,
            first_seq: of.first_seq,
            top,
        })
    }

    fn block(&self, i: usize) -> Option<Vec<(Vec<u8>, Vec<u64>)>> {
        let blk = self.top.blocks.get(i)?;
        if blk.at.checked_add(u64::from(blk.len))? > self.file.metadata().ok()?.len() {
            return None;
        }
        let mut b = vec![0u8; blk.len as usize];
        self.file.read_exact_at(&mut b, blk.at).ok()?;
        blk.decode(&b, self.first_seq)
    }

    /// True when every block passes its CRC.
    pub fn verify(&self) -> bool {
        (0..self.top.blocks.len()).all(|i| self.block(i).is_some())
    }

    /// The sequences of the messages whose values `query` wants, ascending;
    /// reads only the blocks that may hold such values (a binary search of
    /// the top level per predicate). `None` when a block fails its check.
    pub fn seqs(&self, query: &FieldQuery) -> Option<Vec<u64>> {
        let mut out = Vec::new();
        if !query.may_match(&self.top) {
            return Some(out);
        }
        let blocks = &self.top.blocks;
        let mut read: Vec<usize> = Vec::new();
        for p in &query.any {
            // The last block whose first value is at or below the lower bound.
            let from = blocks
                .partition_point(|b| b.first.as_slice() <= p.lower())
                .saturating_sub(1);
            for (i, b) in blocks.iter().enumerate().skip(from) {
                if i > from && p.past(&b.first) {
                    break;
                }
                read.push(i);
            }
        }
        read.sort_unstable();
        read.dedup();
        for i in read {
            for (value, seqs) in self.block(i)? {
                if query.any.iter().any(|p| p.matches(&value)) {
                    out.extend(seqs);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }
}

/// What `verify` finds of one index file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexState {
    /// Present, of its data file, every block passing its CRC.
    Valid,
    /// Not there (not built yet: the writer builds it).
    Missing,
    /// There, but failing a check (another data file's, a bad CRC,
    /// truncated): readers read the data file instead, the writer
    /// rebuilds it.
    Damaged,
}

/// Checks the index on `def` of sealed file `id` (header `h`); `None` when
/// the data file has no valid footer (not sealed, or damaged: its frames
/// are what `verify` reports then).
pub fn check(base: &Path, id: FileId, h: &DataHeader, def: &FieldIndexDef) -> Option<IndexState> {
    let map = Mapping::open(&id.data_path(base)).ok()?;
    let footer = Footer::read(map.as_slice(), h.file_number, h.first_seq, h.file_size).ok()?;
    let path = id.field_path(base, &def.name);
    if !path.exists() {
        return Some(IndexState::Missing);
    }
    Some(
        match FieldIndex::open(&path, &of(h, &footer, def)).is_some_and(|ix| ix.verify()) {
            true => IndexState::Valid,
            false => IndexState::Damaged,
        },
    )
}

/// A unique temporary name beside `out`.
fn temp_path(out: &Path) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    out.with_file_name(name)
}

/// Writes `bytes` to `out` whole: a temporary file, then a rename.
fn write_whole(out: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temp_path(out);
    let r = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, out));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

/// Builds the indexes on `defs` of sealed file `id` (header `h`) that are
/// missing or fail a check, with `build` ([`build`] for header fields).
/// Returns how many of them are valid afterwards
/// (found valid, or written). A file not sealed
/// (yet) or damaged gets none: readers then read the data file, which
/// reports any damage itself.
pub fn ensure(
    base: &Path,
    id: FileId,
    h: &DataHeader,
    defs: &[FieldIndexDef],
    build: &BuildIndexes<'_>,
) -> usize {
    if defs.is_empty() {
        return 0;
    }
    let path = id.data_path(base);
    let Ok(map) = Mapping::open(&path) else {
        return 0;
    };
    let file = map.as_slice();
    let Ok(footer) = Footer::read(file, h.file_number, h.first_seq, h.file_size) else {
        return 0;
    };
    let before = defs.len();
    let todo: Vec<FieldIndexDef> = defs
        .iter()
        .filter(|d| {
            !FieldIndex::open(&id.field_path(base, &d.name), &of(h, &footer, d))
                .is_some_and(|ix| ix.verify())
        })
        .cloned()
        .collect();
    let valid = before - todo.len();
    if todo.is_empty() {
        return valid;
    }
    let Ok(built) = build(file, h, &footer, &todo) else {
        return valid;
    };
    let mut wrote = valid;
    for (def, bytes) in todo.iter().zip(built) {
        let out = id.field_path(base, &def.name);
        if write_whole(&out, &bytes).is_ok() {
            wrote += 1;
        }
        if !path.exists() {
            // Retention deleted the data file meanwhile.
            let _ = std::fs::remove_file(&out);
        }
    }
    wrote
}
