//! Rows → Arrow columns: a typed read's columns, one per requested field
//! of the queue's **current** schema, filled from rows of any version
//! through a [`Projection`] (FORMAT.md "Typed records", "Evolution").
//!
//! The hot path is [`TypedColumns::push_rows`]: a row batch's whole block
//! in two passes, one finding where each row starts (and checking that the
//! rows tile the block), then one tight loop per column over those starts.
//! Nothing is allocated per row.
//!
//! Checks: every row's structure (its length, ends that never decrease,
//! bitmap bits past the nullable fields zero, the rows tiling the block)
//! and, for each field the read decodes, its values (a null's slot zero, a
//! bool 0 or 1, a string UTF-8). A field the read leaves out is not
//! looked at.

use super::row::RowLayout;
use super::schema::{FieldType, Schema, SchemaError, SchemaVersions};
use crate::format::bits::{append_bits, append_offsets, append_ones};

/// Most bytes a string/binary column holds: Arrow's `i32` offsets.
pub const COLUMN_LIMIT: usize = i32::MAX as usize;

/// Damage found in a row: which row of the block (0 for a lone row) and
/// what is wrong. The reader turns it into `Corrupted` naming the file,
/// offset and sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowDamage {
    /// The row, counted from the block's first.
    pub row: usize,
    /// What is wrong with it.
    pub why: &'static str,
}

fn damage<T>(row: usize, why: &'static str) -> Result<T, RowDamage> {
    Err(RowDamage { row, why })
}

/// One field's column in Arrow's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedColumn {
    /// The field's name in the current schema.
    pub name: String,
    /// Its type in the current schema (values of older files widened).
    pub ty: FieldType,
    /// Whether the field is nullable in the current schema.
    pub nullable: bool,
    /// Validity bitmap, LSB first (bit set: has a value); empty while no
    /// row is null (Arrow: no validity buffer).
    pub valid: Vec<u8>,
    /// Rows without a value.
    pub nulls: usize,
    /// Fixed-width types: the values little-endian, `width` bytes each
    /// (zeros where null); `bool`: bit-packed, LSB first; string/binary:
    /// the bytes, row `i`'s are `data[offsets[i]..offsets[i+1]]`.
    pub data: Vec<u8>,
    /// String/binary: `rows + 1` offsets, from 0; empty for other types.
    pub offsets: Vec<i32>,
}

impl TypedColumn {
    /// True when row `r` is not null.
    pub fn is_valid(&self, r: usize) -> bool {
        self.valid.is_empty() || self.valid[r / 8] & (1 << (r % 8)) != 0
    }

    fn new(name: &str, ty: FieldType, nullable: bool) -> TypedColumn {
        TypedColumn {
            name: name.to_string(),
            ty,
            nullable,
            valid: Vec::new(),
            nulls: 0,
            data: Vec::new(),
            offsets: if ty.is_var() { vec![0] } else { Vec::new() },
        }
    }

    /// Makes the bitmap cover `rows` rows, all valid (the first null of
    /// the column comes: until now none was needed).
    fn materialize(&mut self, rows: usize) {
        self.valid.clear();
        self.valid.resize(rows / 8, 0xff);
        if !rows.is_multiple_of(8) {
            self.valid.push((1u8 << (rows % 8)) - 1);
        }
    }
}

/// Columns of a typed read, one per requested field of the current
/// schema, in the order asked for.
#[derive(Debug, Clone, Default)]
pub struct TypedColumns {
    /// Rows pushed.
    pub rows: usize,
    /// The columns.
    pub columns: Vec<TypedColumn>,
    /// Where each row of the block being pushed starts (reused).
    starts: Vec<usize>,
    /// The rows the read expects (from [`TypedColumns::new`]): once the
    /// first rows give the string/binary columns' average length, their
    /// data is reserved for this many (no doubling and copying on the way).
    hint: usize,
    /// Where the columns' memory comes from ([`Room`]).
    room: Room,
}

impl PartialEq for TypedColumns {
    fn eq(&self, o: &TypedColumns) -> bool {
        self.rows == o.rows && self.columns == o.columns
    }
}

/// How one output column gets its value from a file's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// The file's version lacks the field: null.
    Missing,
    /// A value from the slot at `at` (file layout), `null_bit` when the
    /// file's field is nullable, converted from `from` to the column's
    /// type.
    Value {
        at: usize,
        null_bit: Option<usize>,
        from: FieldType,
        /// String/binary: where the previous var field's end is (its
        /// start), `None` for the first.
        prev_end_at: Option<usize>,
    },
}

/// How rows of one file's schema version become columns of the current
/// schema: per requested field, where its value is in the file's row and
/// how it widens. Built once per file.
#[derive(Debug, Clone)]
pub struct Projection {
    /// The file's row layout.
    pub layout: RowLayout,
    ops: Vec<Op>,
    /// Slots of the file's var fields, in order (their ends are checked
    /// in every row).
    var_ats: Vec<usize>,
    /// Mask of the bitmap's last byte bits past the nullable fields.
    pad_mask: u8,
}

impl Projection {
    /// The projection of rows of `file` (a version of `versions`, or the
    /// current one) onto fields `wanted` (indexes into the current schema).
    /// A field is followed back through every version in between, by name
    /// or by the aliases a rename lists; one that a version lacks reads as
    /// null. Errors when a type does not widen to the current one (a
    /// schema that breaks FORMAT.md's evolution rules).
    pub fn new(
        versions: &SchemaVersions,
        file: &Schema,
        wanted: &[usize],
    ) -> Result<Projection, SchemaError> {
        let current = versions
            .current()
            .ok_or_else(|| SchemaError("the queue has no schema".into()))?;
        let layout = RowLayout::of(file);
        let mut ops = Vec::with_capacity(wanted.len());
        for &i in wanted {
            let cf = current
                .fields
                .get(i)
                .ok_or_else(|| SchemaError(format!("no field {i} in the current schema")))?;
            let Some(j) = source_field(versions, file, i) else {
                ops.push(Op::Missing);
                continue;
            };
            let from = file.fields[j].ty;
            if !from.widens_to(&cf.ty) {
                return Err(SchemaError(format!(
                    "field {:?}: version {}'s {} does not widen to {}",
                    cf.name,
                    file.version,
                    from.name(),
                    cf.ty.name()
                )));
            }
            let prev_end_at = layout.slots[..j]
                .iter()
                .rev()
                .find(|s| s.ty.is_var())
                .map(|s| s.at);
            ops.push(Op::Value {
                at: layout.slots[j].at,
                null_bit: layout.slots[j].null_bit,
                from,
                prev_end_at,
            });
        }
        let var_ats = layout
            .slots
            .iter()
            .filter(|s| s.ty.is_var())
            .map(|s| s.at)
            .collect();
        let pad_mask = match layout.nullable % 8 {
            0 => 0,
            k => !((1u8 << k) - 1),
        };
        Ok(Projection {
            layout,
            ops,
            var_ats,
            pad_mask,
        })
    }
}

/// The index in `file` of the current schema's field `i`, followed back
/// version by version (a rename lists the old name in its aliases); by
/// name and aliases directly when `file` is not one of `versions`.
fn source_field(versions: &SchemaVersions, file: &Schema, i: usize) -> Option<usize> {
    let current = versions.current()?;
    let same = |a: &Schema, b: &Schema| a.version == b.version && a.same_fields(b);
    if !versions.get(file.version).is_some_and(|v| same(v, file)) {
        let f = &current.fields[i];
        return file
            .fields
            .iter()
            .position(|of| of.name == f.name || f.aliases.contains(&of.name));
    }
    let mut at = i;
    for v in (file.version + 1..=current.version).rev() {
        let newer = &versions.get(v)?.fields[at];
        let older = versions.get(v - 1)?;
        at = older
            .fields
            .iter()
            .position(|of| of.name == newer.name || newer.aliases.contains(&of.name))?;
    }
    Some(at)
}

/// Per-column lengths before a push, to undo it on damage.
struct Mark {
    rows: usize,
    cols: Vec<(usize, usize, usize, usize)>,
}

/// How a read's columns get their memory: `bytes` reserves room for more
/// bytes in a data or validity column, `offsets` in an offsets column. A
/// reader passes functions that take memory earlier reads let go of
/// (`reader::spare`): fresh memory must be zeroed by the kernel first, 40 %
/// of a large typed read in `perf`.
#[derive(Debug, Clone, Copy)]
pub struct Room {
    /// Room for `n` more bytes in a byte column.
    pub bytes: fn(&mut Vec<u8>, usize),
    /// Room for `n` more offsets.
    pub offsets: fn(&mut Vec<i32>, usize),
}

impl Default for Room {
    fn default() -> Room {
        Room::FRESH
    }
}

impl Room {
    /// Fresh memory (`Vec::reserve`).
    pub const FRESH: Room = Room {
        bytes: Vec::reserve,
        offsets: Vec::reserve,
    };
}

impl TypedColumns {
    /// Empty columns for fields `wanted` (indexes) of `current`, room for
    /// `hint` rows, in fresh memory.
    pub fn new(current: &Schema, wanted: &[usize], hint: usize) -> TypedColumns {
        TypedColumns::new_in(current, wanted, hint, Room::FRESH)
    }

    /// As [`TypedColumns::new`], the columns' memory reserved by `room`.
    pub fn new_in(current: &Schema, wanted: &[usize], hint: usize, room: Room) -> TypedColumns {
        let reserve = room.bytes;
        let columns = wanted
            .iter()
            .map(|&i| {
                let f = &current.fields[i];
                let mut c = TypedColumn::new(&f.name, f.ty, f.nullable);
                // From memory an earlier read's dropped columns left
                // (`reader::spare`): fresh memory must be zeroed by the
                // kernel first, 40 % of a large typed read in `perf`.
                match f.ty {
                    FieldType::Bool => reserve(&mut c.data, hint.div_ceil(8)),
                    t if t.is_var() => (room.offsets)(&mut c.offsets, hint),
                    t => reserve(&mut c.data, hint * t.width()),
                }
                c
            })
            .collect();
        TypedColumns {
            rows: 0,
            columns,
            starts: Vec::new(),
            hint,
            room,
        }
    }

    /// Appends the one row `row` (exactly a row: a plain typed record's
    /// payload). `Ok(false)`: a string/binary column would pass
    /// [`COLUMN_LIMIT`] bytes; nothing was pushed.
    pub fn push_row(&mut self, proj: &Projection, row: &[u8]) -> Result<bool, RowDamage> {
        Ok(self.push_rows(proj, row, 1)? == 1)
    }

    /// Appends the `count` rows of a row batch's `block` (rows back to
    /// back, tiling it exactly). Returns the rows taken: `count`, or fewer
    /// when a string/binary column would pass [`COLUMN_LIMIT`] bytes (the
    /// rest are for the next batch). On damage nothing is pushed.
    pub fn push_rows(
        &mut self,
        proj: &Projection,
        block: &[u8],
        count: usize,
    ) -> Result<usize, RowDamage> {
        self.push_block(proj, block, count, 0, count)
    }

    /// As [`TypedColumns::push_rows`], taking only rows `skip..` of the
    /// block, at most `max` of them (a read that starts inside a batch or
    /// ends before its end); the whole block is checked all the same.
    pub fn push_block(
        &mut self,
        proj: &Projection,
        block: &[u8],
        count: usize,
        skip: usize,
        max: usize,
    ) -> Result<usize, RowDamage> {
        let mut starts = std::mem::take(&mut self.starts);
        let res = self.push_split(proj, block, count, (skip, max), &mut starts);
        self.starts = starts;
        res
    }

    fn push_split(
        &mut self,
        proj: &Projection,
        block: &[u8],
        count: usize,
        (skip, max): (usize, usize),
        starts: &mut Vec<usize>,
    ) -> Result<usize, RowDamage> {
        split_rows(proj, block, count, starts)?;
        let skip = skip.min(starts.len());
        starts.drain(..skip);
        starts.truncate(max);
        let take = self.rows_that_fit(proj, block, starts);
        starts.truncate(take);
        let mark = self.mark();
        let all_valid = bitmap_and(proj, block, starts);
        for (c, op) in self.columns.iter_mut().zip(&proj.ops) {
            if let Err(e) = push_column(c, *op, proj, block, starts, (mark.rows, &all_valid)) {
                self.undo(mark);
                return Err(RowDamage {
                    row: e.row + skip,
                    why: e.why,
                });
            }
        }
        if self.rows == 0 && take > 0 && self.hint > take {
            self.reserve_var(take);
        }
        self.rows += take;
        Ok(take)
    }

    /// Appends `other`'s rows (columns of the same fields, read after
    /// these: a parallel read's later part) and gives its memory to `give`
    /// (the reader's shelf). False, with nothing changed, when a
    /// string/binary column would pass [`COLUMN_LIMIT`] bytes.
    pub fn append(
        &mut self,
        other: TypedColumns,
        give: fn(Vec<u8>),
        give_offsets: fn(Vec<i32>),
    ) -> bool {
        let fits = self
            .columns
            .iter()
            .zip(&other.columns)
            .all(|(c, o)| !c.ty.is_var() || c.data.len() + o.data.len() <= COLUMN_LIMIT);
        if !fits {
            return false;
        }
        let (rows, more) = (self.rows, other.rows);
        for (c, o) in self.columns.iter_mut().zip(other.columns) {
            if c.nulls > 0 || o.nulls > 0 {
                if c.nulls == 0 {
                    c.materialize(rows);
                }
                match o.nulls {
                    0 => append_ones(&mut c.valid, rows, more),
                    _ => append_bits(&mut c.valid, rows, &o.valid, more),
                }
                c.nulls += o.nulls;
            }
            match c.ty {
                FieldType::Bool => append_bits(&mut c.data, rows, &o.data, more),
                t if t.is_var() => {
                    let base = c.offsets.last().copied().unwrap_or(0);
                    append_offsets(&mut c.offsets, &o.offsets, base);
                    c.data.extend_from_slice(&o.data);
                }
                _ => c.data.extend_from_slice(&o.data),
            }
            give(o.data);
            give(o.valid);
            give_offsets(o.offsets);
        }
        self.rows += more;
        true
    }

    /// Reserves the string/binary columns' data for `hint` rows of the
    /// average length of the first `rows` (with an eighth more).
    fn reserve_var(&mut self, rows: usize) {
        for c in self.columns.iter_mut().filter(|c| c.ty.is_var()) {
            let per_row = c.data.len().div_ceil(rows);
            let want = (per_row * self.hint + per_row * self.hint / 8).min(COLUMN_LIMIT);
            let more = want.saturating_sub(c.data.len());
            (self.room.bytes)(&mut c.data, more);
        }
    }

    /// How many of the rows at `starts` fit under [`COLUMN_LIMIT`] in
    /// every string/binary column.
    fn rows_that_fit(&self, proj: &Projection, block: &[u8], starts: &[usize]) -> usize {
        let mut take = starts.len();
        if self
            .columns
            .iter()
            .all(|c| c.data.len() + block.len() <= COLUMN_LIMIT)
        {
            return take; // no column can take more than the whole block
        }
        for (c, op) in self.columns.iter().zip(&proj.ops) {
            let Op::Value {
                at,
                from,
                prev_end_at,
                ..
            } = *op
            else {
                continue;
            };
            if !from.is_var() {
                continue;
            }
            let mut len = c.data.len();
            for (r, &s) in starts[..take].iter().enumerate() {
                let (b, e) = var_span(block, s, at, prev_end_at);
                len += e - b;
                if len > COLUMN_LIMIT {
                    take = r;
                    break;
                }
            }
        }
        take
    }

    fn mark(&self) -> Mark {
        Mark {
            rows: self.rows,
            cols: self
                .columns
                .iter()
                .map(|c| (c.valid.len(), c.nulls, c.data.len(), c.offsets.len()))
                .collect(),
        }
    }

    /// Puts every column back as it was at `m`.
    fn undo(&mut self, m: Mark) {
        for (c, &(valid, nulls, data, offsets)) in self.columns.iter_mut().zip(&m.cols) {
            if nulls == 0 {
                c.valid.clear();
            } else {
                c.valid.truncate(valid);
                clear_bits_from(&mut c.valid, m.rows);
            }
            c.nulls = nulls;
            c.data.truncate(data);
            if c.ty == FieldType::Bool {
                clear_bits_from(&mut c.data, m.rows);
            }
            c.offsets.truncate(offsets);
        }
    }
}

/// Clears the bits of `b`'s last byte from bit `rows % 8` on.
fn clear_bits_from(b: &mut [u8], rows: usize) {
    if !rows.is_multiple_of(8) {
        if let Some(last) = b.get_mut(rows / 8) {
            *last &= (1u8 << (rows % 8)) - 1;
        }
    }
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> usize {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w) as usize
}

/// The `[start, end)` of a var field's bytes, relative to the row's var
/// area, in the (split, so checked) row at `s`.
#[inline]
fn var_span(block: &[u8], s: usize, at: usize, prev_end_at: Option<usize>) -> (usize, usize) {
    let start = prev_end_at.map_or(0, |p| u32_at(block, s + p));
    (start, u32_at(block, s + at))
}

/// Finds where each of `count` rows starts in `block`, checking each row's
/// structure (length, ends never decreasing, bitmap padding zero) and that
/// the rows tile the block.
fn split_rows(
    proj: &Projection,
    block: &[u8],
    count: usize,
    starts: &mut Vec<usize>,
) -> Result<(), RowDamage> {
    let l = &proj.layout;
    let pad_at = l.bitmap_len.wrapping_sub(1);
    starts.clear();
    starts.reserve(count);
    let mut at = 0usize;
    for r in 0..count {
        if block.len() - at < l.fixed_len {
            return damage(r, "typed row shorter than its schema's fixed part");
        }
        if proj.pad_mask != 0 && block[at + pad_at] & proj.pad_mask != 0 {
            return damage(
                r,
                "typed row sets a null-bitmap bit past its nullable fields",
            );
        }
        let mut end = 0usize;
        for &v in &proj.var_ats {
            let e = u32_at(block, at + v);
            if e < end {
                return damage(r, "typed row's var ends decrease");
            }
            end = e;
        }
        if block.len() - at - l.fixed_len < end {
            return damage(r, "typed row runs past its record");
        }
        starts.push(at);
        at += l.fixed_len + end;
    }
    if at != block.len() {
        return damage(
            count.saturating_sub(1),
            "typed row batch longer than its rows",
        );
    }
    Ok(())
}

/// The AND of the null bitmaps of the rows at `starts`: a bit set there
/// is a field with a value in every row (its validity needs no pass).
fn bitmap_and(proj: &Projection, block: &[u8], starts: &[usize]) -> Vec<u8> {
    let n = proj.layout.bitmap_len;
    let mut and = vec![0xffu8; n];
    if n == 1 {
        // The common case, one byte: a loop the compiler keeps in a register.
        and[0] = starts.iter().fold(0xff, |a, &s| a & block[s]);
        return and;
    }
    for &s in starts {
        for (a, b) in and.iter_mut().zip(&block[s..s + n]) {
            *a &= b;
        }
    }
    and
}

/// Fills column `c` for the rows at `starts` (`rows` pushed before them;
/// `all_valid` from [`bitmap_and`]).
fn push_column(
    c: &mut TypedColumn,
    op: Op,
    proj: &Projection,
    block: &[u8],
    starts: &[usize],
    (rows, all_valid): (usize, &[u8]),
) -> Result<(), RowDamage> {
    let Op::Value {
        at,
        null_bit,
        from,
        prev_end_at,
    } = op
    else {
        push_nulls(c, starts.len(), rows);
        return Ok(());
    };
    let mut null_bit = null_bit;
    if let Some(bit) = null_bit {
        let every_row = all_valid[bit >> 3] & (1 << (bit & 7)) != 0;
        if !(every_row && c.nulls == 0) {
            push_validity(c, bit, block, starts, rows);
        }
        if every_row {
            null_bit = None; // no null to check the slot of
        }
    }
    let fixed_len = proj.layout.fixed_len;
    match from {
        FieldType::Bool => push_bools(c, at, null_bit, block, starts, rows),
        f if f.is_var() => push_var(c, (at, prev_end_at, null_bit), fixed_len, block, starts),
        f if f == c.ty => match f.width() {
            1 => push_fixed::<1>(c, at, null_bit, block, starts),
            2 => push_fixed::<2>(c, at, null_bit, block, starts),
            4 => push_fixed::<4>(c, at, null_bit, block, starts),
            8 => push_fixed::<8>(c, at, null_bit, block, starts),
            _ => push_fixed::<16>(c, at, null_bit, block, starts),
        },
        f => push_widened(c, f, at, null_bit, block, starts),
    }
}

/// `n` nulls (a field the file's version lacks).
fn push_nulls(c: &mut TypedColumn, n: usize, rows: usize) {
    if c.nulls == 0 {
        c.materialize(rows);
    }
    c.nulls += n;
    c.valid.resize((rows + n).div_ceil(8), 0);
    match c.ty {
        FieldType::Bool => c.data.resize((rows + n).div_ceil(8), 0),
        t if t.is_var() => {
            let end = c.offsets.last().copied().unwrap_or(0);
            c.offsets.extend(std::iter::repeat_n(end, n));
        }
        t => c.data.resize(c.data.len() + n * t.width(), 0),
    }
}

#[inline]
fn has_value(block: &[u8], s: usize, null_bit: Option<usize>) -> bool {
    match null_bit {
        None => true,
        Some(b) => block[s + (b >> 3)] & (1 << (b & 7)) != 0,
    }
}

/// The validity bits of a nullable file field; the bitmap is made only
/// once a null comes.
fn push_validity(c: &mut TypedColumn, bit: usize, block: &[u8], starts: &[usize], rows: usize) {
    let (byte, mask) = (bit >> 3, 1u8 << (bit & 7));
    let nulls = starts
        .iter()
        .filter(|&&s| block[s + byte] & mask == 0)
        .count();
    if nulls == 0 && c.nulls == 0 {
        return;
    }
    if c.nulls == 0 {
        c.materialize(rows);
    }
    c.nulls += nulls;
    c.valid.resize((rows + starts.len()).div_ceil(8), 0);
    for (r, &s) in (rows..).zip(starts) {
        if block[s + byte] & mask != 0 {
            c.valid[r >> 3] |= 1 << (r & 7);
        }
    }
}

/// `W`-byte values copied as they are (same type in file and schema); a
/// null's slot must be zero.
fn push_fixed<const W: usize>(
    c: &mut TypedColumn,
    at: usize,
    null_bit: Option<usize>,
    block: &[u8],
    starts: &[usize],
) -> Result<(), RowDamage> {
    // Sized first, then each slot a fixed-size store: a loop that keeps
    // its position in a register (pushing reloads and stores the length
    // per row). The zeroing pass touches a block's worth, in cache.
    let old = c.data.len();
    c.data.resize(old + starts.len() * W, 0);
    for (d, &s) in c.data[old..].chunks_exact_mut(W).zip(starts) {
        let slot: &[u8; W] = block[s + at..s + at + W].try_into().expect("W bytes");
        d.copy_from_slice(slot);
    }
    if null_bit.is_some() {
        check_null_slots(at, W, null_bit, block, starts)?;
    }
    Ok(())
}

/// A null's slot is zero in every row.
fn check_null_slots(
    at: usize,
    w: usize,
    null_bit: Option<usize>,
    block: &[u8],
    starts: &[usize],
) -> Result<(), RowDamage> {
    for (r, &s) in starts.iter().enumerate() {
        if !has_value(block, s, null_bit) && block[s + at..s + at + w].iter().any(|&b| b != 0) {
            return damage(r, "typed row's null value has a non-zero slot");
        }
    }
    Ok(())
}

/// Values of a narrower file type widened to the column's (FORMAT.md
/// "Evolution": ints sign- or zero-extended, float32 to float64).
fn push_widened(
    c: &mut TypedColumn,
    from: FieldType,
    at: usize,
    null_bit: Option<usize>,
    block: &[u8],
    starts: &[usize],
) -> Result<(), RowDamage> {
    check_null_slots(at, from.width(), null_bit, block, starts)?;
    let w = from.width();
    let to = c.ty.width();
    let signed = matches!(
        from,
        FieldType::Int8 | FieldType::Int16 | FieldType::Int32 | FieldType::Int64
    );
    for &s in starts {
        let slot = &block[s + at..s + at + w];
        if from == FieldType::Float32 {
            let x = f32::from_le_bytes([slot[0], slot[1], slot[2], slot[3]]);
            c.data.extend_from_slice(&f64::from(x).to_le_bytes());
            continue;
        }
        let mut v = [0u8; 8];
        v[..w].copy_from_slice(slot);
        let fill = if signed && slot[w - 1] & 0x80 != 0 {
            0xff
        } else {
            0
        };
        v[w..].fill(fill);
        c.data.extend_from_slice(&v[..to]);
    }
    Ok(())
}

/// Bools, bit-packed as Arrow wants; a slot other than 0/1 is damage.
fn push_bools(
    c: &mut TypedColumn,
    at: usize,
    null_bit: Option<usize>,
    block: &[u8],
    starts: &[usize],
    rows: usize,
) -> Result<(), RowDamage> {
    c.data.resize((rows + starts.len()).div_ceil(8), 0);
    for (r, &s) in starts.iter().enumerate() {
        let v = block[s + at];
        if v > 1 {
            return damage(r, "typed row's bool is neither 0 nor 1");
        }
        if v == 1 && !has_value(block, s, null_bit) {
            return damage(r, "typed row's null value has a non-zero slot");
        }
        let i = rows + r;
        c.data[i >> 3] |= v << (i & 7);
    }
    Ok(())
}

/// String/binary values: offsets and bytes; a null has no bytes; strings
/// are checked as UTF-8 once for all the rows pushed (see
/// [`check_utf8`]).
fn push_var(
    c: &mut TypedColumn,
    (at, prev_end_at, null_bit): (usize, Option<usize>, Option<usize>),
    fixed_len: usize,
    block: &[u8],
    starts: &[usize],
) -> Result<(), RowDamage> {
    let old = c.data.len();
    let first = c.offsets.len() - 1;
    let mut end = c.offsets[first];
    let mut total = 0usize;
    c.offsets.resize(first + 1 + starts.len(), 0);
    for ((o, &s), r) in c.offsets[first + 1..].iter_mut().zip(starts).zip(0..) {
        let (b, e) = var_span(block, s, at, prev_end_at);
        if e != b && !has_value(block, s, null_bit) {
            c.offsets.truncate(first + 1);
            return damage(r, "typed row's null string or binary has bytes");
        }
        total += e - b;
        // Fits: rows_that_fit kept the column under i32::MAX bytes.
        end += (e - b) as i32;
        *o = end;
    }
    copy_var_bytes(
        &mut c.data,
        total,
        fixed_len,
        block,
        starts,
        (at, prev_end_at),
    );
    if c.ty == FieldType::String {
        check_utf8(&c.data, old, &c.offsets[first..])
            .map_or(Ok(()), |r| damage(r, "typed row's string is not UTF-8"))?;
    }
    Ok(())
}

/// Appends the var bytes of the rows at `starts` (`total` of them) to
/// `data`. Short values (the usual symbol or id) are moved as one 16-byte
/// store where the block has 16 bytes left, the next value overwriting
/// what was copied past this one's end: a fixed-size move instead of a
/// `memcpy` call per row.
fn copy_var_bytes(
    data: &mut Vec<u8>,
    total: usize,
    fixed_len: usize,
    block: &[u8],
    starts: &[usize],
    (at, prev_end_at): (usize, Option<usize>),
) {
    const WIDE: usize = 16;
    let mut pos = data.len();
    data.resize(pos + total + WIDE, 0);
    for &s in starts {
        let (b, e) = var_span(block, s, at, prev_end_at);
        let from = s + fixed_len + b;
        let n = e - b;
        if n <= WIDE && from + WIDE <= block.len() {
            let wide: &[u8; WIDE] = block[from..from + WIDE].try_into().expect("16 bytes");
            data[pos..pos + WIDE].copy_from_slice(wide);
        } else {
            data[pos..pos + n].copy_from_slice(&block[from..from + n]);
        }
        pos += n;
    }
    data.truncate(pos);
}

/// The first of the rows delimited by `offsets` whose bytes in `data` are
/// not UTF-8. The rows are contiguous from `from`: one validation of all
/// their bytes plus "each row starts on a character boundary" says the
/// same as validating each row; only on failure is each looked at.
pub(crate) fn check_utf8(data: &[u8], from: usize, offsets: &[i32]) -> Option<usize> {
    let whole = std::str::from_utf8(&data[from..]).is_ok();
    let boundaries = offsets
        .iter()
        .all(|&o| o as usize >= data.len() || (data[o as usize] as i8) >= -0x40);
    if whole && boundaries {
        return None;
    }
    offsets
        .windows(2)
        .position(|w| std::str::from_utf8(&data[w[0] as usize..w[1] as usize]).is_err())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::typed::row::{decode_row, encode_row, Value};
    use crate::format::typed::schema::Field;

    fn field(name: &str, ty: FieldType, nullable: bool, aliases: &[&str]) -> Field {
        Field {
            name: name.into(),
            ty,
            nullable,
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
        }
    }

    fn every_type() -> Schema {
        use FieldType::*;
        let f = |n: &str, t, null| field(n, t, null, &[]);
        Schema {
            version: 1,
            fields: vec![
                f("b", Bool, true),
                f("i8", Int8, false),
                f("i16", Int16, true),
                f("i32", Int32, false),
                f("i64", Int64, true),
                f("u8", UInt8, false),
                f("u16", UInt16, true),
                f("u32", UInt32, false),
                f("u64", UInt64, false),
                f("f32", Float32, false),
                f("f64", Float64, true),
                f("ts", TimestampUs, false),
                f("d", Date32, true),
                f(
                    "dec",
                    Decimal128 {
                        precision: 20,
                        scale: 3,
                    },
                    true,
                ),
                f("s", String, true),
                f("bin", Binary, true),
                f("s2", String, false),
            ],
        }
    }

    fn values(r: usize) -> Vec<Value> {
        let n = |x: Value| if r % 4 == 1 { Value::Null } else { x };
        let i = r as i64;
        vec![
            n(Value::Bool(r.is_multiple_of(3))),
            Value::Int(i - 60),
            n(Value::Int(-300 * i)),
            Value::Int(i * 70_000),
            n(Value::Int(-i << 40)),
            Value::UInt(r as u64 % 256),
            n(Value::UInt(r as u64 * 200)),
            Value::UInt(r as u64 * 30_000_000),
            Value::UInt(u64::MAX - r as u64),
            Value::Float(i as f64 * 0.5),
            n(Value::Float(-(i as f64) / 3.0)),
            Value::Int(1_700_000_000_000_000 + i),
            n(Value::Int(19_000 + i)),
            n(Value::Decimal(-(i as i128) * 1_000_000_007)),
            n(Value::Str("ü".repeat(r % 5))),
            n(Value::Bytes(vec![r as u8; r % 3])),
            Value::Str(format!("row {r}")),
        ]
    }

    fn rows(s: &Schema, n: std::ops::Range<usize>, f: impl Fn(usize) -> Vec<Value>) -> Vec<u8> {
        let l = RowLayout::of(s);
        let mut out = vec![];
        for r in n {
            encode_row(s, &l, &f(r), &mut out).unwrap();
        }
        out
    }

    /// Row `r` of column `c` as a [`Value`], decoded from the Arrow layout
    /// (what pyarrow would see).
    fn cell(c: &TypedColumn, r: usize) -> Value {
        if !c.is_valid(r) {
            return Value::Null;
        }
        let w = c.ty.width();
        let fixed = |w: usize| -> [u8; 16] {
            let mut a = [0u8; 16];
            a[..w].copy_from_slice(&c.data[r * w..r * w + w]);
            a
        };
        let signed = |w: usize| -> i64 {
            let x = i128::from_le_bytes(fixed(w));
            ((x << (128 - 8 * w)) >> (128 - 8 * w)) as i64
        };
        let var = || &c.data[c.offsets[r] as usize..c.offsets[r + 1] as usize];
        use FieldType::*;
        match c.ty {
            Bool => Value::Bool(c.data[r / 8] & (1 << (r % 8)) != 0),
            Int8 | Int16 | Int32 | Int64 | TimestampUs | Date32 => Value::Int(signed(w)),
            UInt8 | UInt16 | UInt32 | UInt64 => Value::UInt(u128::from_le_bytes(fixed(w)) as u64),
            Float32 => Value::Float(f64::from(f32::from_le_bytes(
                fixed(4)[..4].try_into().unwrap(),
            ))),
            Float64 => Value::Float(f64::from_le_bytes(fixed(8)[..8].try_into().unwrap())),
            Decimal128 { .. } => Value::Decimal(i128::from_le_bytes(fixed(16))),
            String => Value::Str(std::str::from_utf8(var()).unwrap().to_string()),
            Binary => Value::Bytes(var().to_vec()),
        }
    }

    fn versions(list: Vec<Vec<Field>>) -> SchemaVersions {
        SchemaVersions {
            versions: list
                .into_iter()
                .enumerate()
                .map(|(i, fields)| Schema {
                    version: i as u32 + 1,
                    fields,
                })
                .collect(),
        }
    }

    /// Every type, with nulls, pushed as blocks of several sizes and as
    /// single rows, reads back as the values written; a column without
    /// nulls has no bitmap; the bitmaps and bool bits are Arrow's.
    #[test]
    fn every_type_reads_back_as_written_in_blocks_and_rows() {
        let s = every_type();
        let vs = versions(vec![s.fields.clone()]);
        let all: Vec<usize> = (0..s.fields.len()).collect();
        let p = Projection::new(&vs, &s, &all).unwrap();
        let l = RowLayout::of(&s);
        let n = 53;
        for split in [1usize, 7, 8, 53] {
            let mut c = TypedColumns::new(&s, &all, 4);
            let mut r = 0;
            while r < n {
                let k = split.min(n - r);
                let block = rows(&s, r..r + k, values);
                if k == 1 {
                    assert!(c.push_row(&p, &block).unwrap());
                } else {
                    assert_eq!(c.push_rows(&p, &block, k).unwrap(), k);
                }
                r += k;
            }
            assert_eq!(c.rows, n);
            for r in 0..n {
                let want = values(r);
                for (i, col) in c.columns.iter().enumerate() {
                    assert_eq!(cell(col, r), want[i], "split {split} row {r} {}", col.name);
                }
            }
            for col in &c.columns {
                let nulls = (0..n).filter(|r| cell(col, *r) == Value::Null).count();
                assert_eq!(col.nulls, nulls, "{}", col.name);
                assert_eq!(col.valid.is_empty(), nulls == 0, "{}", col.name);
                if !col.valid.is_empty() {
                    assert_eq!(col.valid.len(), n.div_ceil(8));
                    assert_eq!(col.valid[n / 8] >> (n % 8), 0, "bits past the rows are 0");
                }
                if col.ty.is_var() {
                    assert_eq!(col.offsets.len(), n + 1);
                }
            }
            // The same as decode_row, row by row.
            let block = rows(&s, 0..n, values);
            let mut at = 0;
            for r in 0..n {
                let len = l.row_len(&block[at..]).unwrap();
                let vals = decode_row(&l, &block[at..at + len]).unwrap();
                assert_eq!(vals, values(r));
                at += len;
            }
        }
    }

    /// Only the fields asked for, in the order asked for; a column that
    /// has no nulls in the rows pushed so far gets its bitmap when the
    /// first null comes, earlier rows marked valid.
    #[test]
    fn a_projection_reads_the_fields_asked_for_and_bitmaps_appear_with_the_first_null() {
        let s = every_type();
        let vs = versions(vec![s.fields.clone()]);
        let want = [16usize, 4, 0];
        let p = Projection::new(&vs, &s, &want).unwrap();
        let mut c = TypedColumns::new(&s, &want, 0);
        // rows 2..5: row 5 is the first null (r % 4 == 1).
        c.push_rows(&p, &rows(&s, 2..5, values), 3).unwrap();
        assert!(c.columns[1].valid.is_empty());
        c.push_rows(&p, &rows(&s, 5..15, values), 10).unwrap();
        assert_eq!(
            c.columns
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["s2", "i64", "b"]
        );
        for r in 0..13 {
            let v = values(r + 2);
            assert_eq!(cell(&c.columns[0], r), v[16]);
            assert_eq!(cell(&c.columns[1], r), v[4]);
            assert_eq!(cell(&c.columns[2], r), v[0]);
        }
        assert_eq!(c.columns[1].valid, [0b0111_0111, 0b1_0111]);
    }

    /// Rows of older versions read in the current one: a field added
    /// since is null, a field renamed (twice, each rename listing only the
    /// name before) by its current name, int8 → int32 → int64 and
    /// uint16 → int32 and float32 → float64 widened keeping their values.
    #[test]
    fn rows_of_older_versions_read_in_the_current_schema() {
        use FieldType::*;
        let v1 = vec![
            field("a", Int8, false, &[]),
            field("name", String, false, &[]),
            field("u", UInt16, true, &[]),
            field("f", Float32, false, &[]),
        ];
        let v2 = vec![
            field("a", Int32, false, &[]),
            field("label", String, false, &["name"]),
            field("u", Int32, true, &[]),
            field("f", Float64, false, &[]),
            field("extra", Binary, true, &[]),
        ];
        let v3 = vec![
            field("added", Int64, true, &[]),
            field("a", Int64, false, &[]),
            field("title", String, false, &["label"]),
            field("u", Int32, true, &[]),
            field("f", Float64, false, &[]),
            field("extra", Binary, true, &[]),
        ];
        let vs = versions(vec![v1, v2, v3]);
        for v in 1..3 {
            vs.versions[v - 1].check_evolution(&vs.versions[v]).unwrap();
        }
        let cur = vs.current().unwrap();
        let all: Vec<usize> = (0..cur.fields.len()).collect();
        let s1 = vs.get(1).unwrap();
        let block = rows(s1, 0..4, |r| {
            vec![
                Value::Int(-(r as i64) * 40),
                Value::Str(format!("n{r}")),
                if r == 2 {
                    Value::Null
                } else {
                    Value::UInt(60_000 + r as u64)
                },
                Value::Float(r as f64 - 0.5),
            ]
        });
        let mut c = TypedColumns::new(cur, &all, 0);
        c.push_rows(&Projection::new(&vs, s1, &all).unwrap(), &block, 4)
            .unwrap();
        let s3 = vs.get(3).unwrap();
        let block3 = rows(s3, 0..1, |_| {
            vec![
                Value::Int(1 << 40),
                Value::Int(-5),
                Value::Str("x".into()),
                Value::Int(-1),
                Value::Float(0.1),
                Value::Bytes(b"e".to_vec()),
            ]
        });
        c.push_rows(&Projection::new(&vs, s3, &all).unwrap(), &block3, 1)
            .unwrap();
        for r in 0..4 {
            let got: Vec<Value> = c.columns.iter().map(|col| cell(col, r)).collect();
            let u = if r == 2 {
                Value::Null
            } else {
                Value::Int(60_000 + r as i64)
            };
            assert_eq!(
                got,
                [
                    Value::Null,
                    Value::Int(-(r as i64) * 40),
                    Value::Str(format!("n{r}")),
                    u,
                    Value::Float(r as f64 - 0.5),
                    Value::Null,
                ]
            );
        }
        assert_eq!(cell(&c.columns[0], 4), Value::Int(1 << 40));
        assert_eq!(cell(&c.columns[5], 4), Value::Bytes(b"e".to_vec()));
        assert_eq!(c.columns[0].nulls, 4);
        assert_eq!(c.columns[5].nulls, 4);
    }

    /// A type that does not widen to the current one is an error naming
    /// the field (a schema list breaking the evolution rules).
    #[test]
    fn a_narrowing_projection_is_refused() {
        let v1 = vec![field("a", FieldType::Int64, false, &[])];
        let v2 = vec![field("a", FieldType::Int32, false, &[])];
        let vs = versions(vec![v1, v2]);
        let e = Projection::new(&vs, vs.get(1).unwrap(), &[0]).unwrap_err();
        assert!(e.0.contains("\"a\"") && e.0.contains("int64"), "{}", e.0);
    }

    /// Damage anywhere in a block is found, names the row, and leaves the
    /// columns as they were (later pushes start where the last good one
    /// ended).
    #[test]
    fn damaged_rows_are_refused_naming_the_row_and_nothing_is_pushed() {
        let s = every_type();
        let vs = versions(vec![s.fields.clone()]);
        let all: Vec<usize> = (0..s.fields.len()).collect();
        let p = Projection::new(&vs, &s, &all).unwrap();
        let l = RowLayout::of(&s);
        let good = rows(&s, 0..6, values);
        let mut c = TypedColumns::new(&s, &all, 0);
        c.push_rows(&p, &rows(&s, 0..3, values), 3).unwrap();
        let before = c.clone();
        let row_at = |r: usize| {
            let mut at = 0;
            for _ in 0..r {
                at += l.row_len(&good[at..]).unwrap();
            }
            at
        };
        let slot = |f: usize| l.slots[f].at;
        let at4 = row_at(4);
        let at1 = row_at(1);
        // row 1 has nulls (r % 4 == 1); row 4 has values.
        type Damage<'a> = Box<dyn Fn(&mut Vec<u8>) + 'a>;
        let cases: Vec<(Damage, usize, &str)> = vec![
            (Box::new(|b| b.truncate(b.len() - 1)), 5, "runs past"),
            (Box::new(|b| b.push(0)), 5, "longer than its rows"),
            (Box::new(|b| b[at4 + 1] |= 0x80), 4, "past its nullable"),
            (Box::new(|b| b[at4 + slot(0)] = 2), 4, "bool"),
            (Box::new(|b| b[at1 + slot(0)] = 1), 1, "null value"),
            (Box::new(|b| b[at1 + slot(4)] = 1), 1, "null value"),
            (Box::new(|b| b[at1 + slot(14)] += 1), 1, "decrease"),
            (
                Box::new(|b| {
                    let i = at4 + l.fixed_len;
                    b[i] = 0xff;
                }),
                4,
                "UTF-8",
            ),
        ];
        for (i, (f, row, why)) in cases.iter().enumerate() {
            let mut b = good.clone();
            f(&mut b);
            let mut c2 = c.clone();
            let e = c2.push_rows(&p, &b, 6).unwrap_err();
            assert_eq!(e.row, *row, "case {i}: {e:?}");
            assert!(e.why.contains(why), "case {i}: {e:?}");
            assert_eq!(c2, before, "case {i}: nothing pushed");
            // And the same columns take good rows after.
            assert_eq!(c2.push_rows(&p, &good, 6).unwrap(), 6);
        }
        // A lone row longer than its fields.
        let mut one = rows(&s, 0..1, values);
        one.push(b'x');
        assert!(c.push_row(&p, &one).is_err());
        assert_eq!(c, before);
    }

    #[test]
    fn utf8_check_finds_strings_split_across_rows() {
        // "é" split over two rows: together UTF-8, each not.
        assert_eq!(check_utf8(b"a\xc3\xa9b", 0, &[0, 2, 4]), Some(0));
        assert_eq!(check_utf8(b"a\xc3\xa9b", 0, &[0, 3, 4]), None);
        assert_eq!(check_utf8(b"zz\xff", 2, &[2, 2, 3]), Some(1));
    }
}
