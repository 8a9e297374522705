//! Field queries: a filter a [`super::tailer::Tailer`] applies to return
//! the messages whose header field satisfies a [`FieldQuery`].
//!
//! Each sealed data file is planned once: with a secondary index
//! (`NAME.field-FIELD`) that checks out, a file whose zone map (the
//! index's min and max value) excludes the query is skipped without
//! reading its blocks, and any other is read only at the sequences the
//! index lists for matching values; a sealed file without a valid index
//! (not built yet, damaged) is read frame by frame; the active file is
//! read at the sequences the queue handle's in-memory index lists (see
//! `Queue::where_field`) up to where that index reaches, and frame by frame
//! from there. Every message returned is compared exactly.

use super::plan::{Jump, Plan, Planned};
use super::topic::read_footer;
use crate::catalog::{Catalog, FileInfo};
use crate::format::record::RecordView;
use crate::index::fields::{self, FieldIndex, FieldQuery};

/// What the in-memory index of the active file says for a query: in data
/// file `file_number`, the sequences below `upto` that can match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveSeqs {
    /// The (then) active data file.
    pub file_number: u64,
    /// Every message of the file below this was indexed.
    pub upto: u64,
    /// The matching ones, ascending.
    pub seqs: Vec<u64>,
}

/// A [`FieldQuery`] and the plan for the file the tailer is in.
#[derive(Debug)]
pub(crate) struct FieldFilter {
    query: FieldQuery,
    active: Option<ActiveSeqs>,
    planned: Planned,
}

impl FieldFilter {
    pub(crate) fn new(query: FieldQuery, active: Option<ActiveSeqs>) -> FieldFilter {
        FieldFilter {
            query,
            active,
            planned: Planned::default(),
        }
    }

    pub(crate) fn matches(&self, rec: &RecordView<'_>) -> bool {
        self.query.matches(rec)
    }

    /// Where a tailer standing at `seq` should read next (see
    /// [`Planned::jump`]).
    pub(crate) fn jump(&mut self, catalog: &Catalog, seq: u64) -> Option<Jump> {
        let (query, active) = (&self.query, &self.active);
        self.planned.jump(
            catalog,
            seq,
            &mut |c, info| plan_sealed(query, c, info),
            &mut |info| match active {
                Some(a) if a.file_number == info.header.file_number => {
                    Plan::SeqsThenScan(a.seqs.iter().map(|&s| (s, None)).collect(), a.upto, None)
                }
                _ => Plan::Scan,
            },
        )
    }
}

fn plan_sealed(query: &FieldQuery, catalog: &Catalog, info: &FileInfo) -> Plan {
    let Some(footer) = read_footer(catalog, info) else {
        return Plan::Scan;
    };
    let path = info.id.field_path(catalog.base(), &query.def.name);
    let Some(index) = FieldIndex::open(&path, &fields::of(&info.header, &footer, &query.def))
    else {
        return Plan::Scan;
    };
    if !query.may_match(&index.top) {
        return Plan::Skip;
    }
    match index.seqs(query) {
        Some(seqs) => Plan::Seqs(seqs.into_iter().map(|s| (s, None)).collect()),
        None => Plan::Scan,
    }
}
