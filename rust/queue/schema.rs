//! A typed queue's schema at open (format 12): the versions stored in
//! `metadata.json` (or, where it lost them, in the data files' headers),
//! and what an open's declared schema does to them (FORMAT.md "Typed
//! records": "Evolution").

use std::path::Path;
use std::sync::Arc;

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::format::metadata::Metadata;
use crate::format::typed::{Schema, SchemaVersions};

/// The schema versions a queue records: `metadata.json`'s `schema`, else
/// the ones its data files' headers hold (a queue whose metadata was lost
/// and recreated), else `None` (an untyped queue).
pub(super) fn stored(
    meta: &Metadata,
    meta_path: &Path,
    catalog: &Catalog,
) -> Result<Option<SchemaVersions>> {
    if let Some(v) = &meta.schema {
        let versions = SchemaVersions::from_json_value(v).map_err(|e| {
            Error::corrupted(meta_path, 0, None, format!("metadata.json schema: {e}"))
        })?;
        return Ok(Some(versions));
    }
    from_headers(catalog)
}

/// The schema versions the data files' headers hold, when each of 1..=n
/// is there (each file records one; a version no file holds any more is
/// lost with `metadata.json`, and then so is the queue's schema history).
fn from_headers(catalog: &Catalog) -> Result<Option<SchemaVersions>> {
    let mut found: Vec<Option<Schema>> = Vec::new();
    for info in catalog.snapshot().iter() {
        let Some(t) = catalog.typed_file(info)? else {
            continue;
        };
        let v = t.schema.version as usize;
        if found.len() < v {
            found.resize(v, None);
        }
        found[v - 1] = Some(t.schema.clone());
    }
    if found.is_empty() {
        return Ok(None);
    }
    let Some(versions) = found.into_iter().collect::<Option<Vec<Schema>>>() else {
        return Err(Error::Schema(
            "metadata.json has no schema and the data files do not hold every \
             schema version: the queue's schema history is lost"
                .into(),
        ));
    };
    Ok(Some(SchemaVersions { versions }))
}

/// A read-only handle's schema: the stored one; a declared schema must be
/// its current version.
pub(super) fn for_reader(
    declared: Option<&Schema>,
    stored: Option<SchemaVersions>,
) -> Result<Option<SchemaVersions>> {
    must_be_current(
        declared,
        stored,
        "a read-only handle cannot declare a schema: the one given is not the \
         queue's current schema (open for writing to declare it)",
    )
}

/// A writer's schema: the stored one, after `declared` (a new queue's
/// first version, the same fields, or a valid evolution).
/// `holds_messages`: the queue has messages (an untyped queue with
/// messages cannot become typed).
pub(super) fn for_writer(
    declared: Option<&Schema>,
    stored: Option<SchemaVersions>,
    holds_messages: bool,
) -> Result<Option<SchemaVersions>> {
    let Some(d) = declared else {
        return Ok(stored);
    };
    match stored {
        None if holds_messages => Err(Error::Schema(
            "the queue already holds untyped messages: a schema is declared on a new \
             or empty queue"
                .into(),
        )),
        None => Ok(Some(SchemaVersions::default().declare(d)?)),
        Some(s) => Ok(Some(s.declare(d)?)),
    }
}

/// One more writer process's schema (`multi_writer`, joining writers that
/// already hold the queue): a declared schema must be the current one, as
/// the others write rows of it.
pub(super) fn for_joined(
    declared: Option<&Schema>,
    stored: Option<SchemaVersions>,
) -> Result<Option<SchemaVersions>> {
    must_be_current(
        declared,
        stored,
        "other writer processes have the queue open with its current schema: \
         a new schema version is declared with every writer closed (close them \
         and reopen)",
    )
}

/// `stored`, when `declared` is absent or has the current version's
/// fields; else [`Error::Schema`] saying `why`.
fn must_be_current(
    declared: Option<&Schema>,
    stored: Option<SchemaVersions>,
    why: &str,
) -> Result<Option<SchemaVersions>> {
    if let Some(d) = declared {
        let same = stored
            .as_ref()
            .and_then(SchemaVersions::current)
            .is_some_and(|c| c.same_fields(d));
        if !same {
            return Err(Error::Schema(why.into()));
        }
    }
    Ok(stored)
}

/// Refuses an evolution from `old` to `new` that drops a field an index is
/// declared on (the index would silently turn into a header's): the index
/// is dropped first.
pub(super) fn check_dropped_indexes(
    old: Option<&SchemaVersions>,
    new: Option<&SchemaVersions>,
    fields: &crate::index::fields::SharedDefs,
) -> Result<()> {
    let (Some(old), Some(new)) = (
        old.and_then(SchemaVersions::current),
        new.and_then(SchemaVersions::current),
    ) else {
        return Ok(());
    };
    let defs = fields.read().unwrap_or_else(|e| e.into_inner());
    match defs
        .iter()
        .find(|d| old.find(&d.name).is_some() && new.find(&d.name).is_none())
    {
        Some(d) => Err(Error::Schema(format!(
            "the new schema drops the field {:?}, which has an index: drop the index \
             first (drop_index)",
            d.name
        ))),
        None => Ok(()),
    }
}

/// Records `versions` in the handle's catalog (the writer and readers
/// find them there), and marks the declared indexes `fields` whose name is
/// a field of the current schema as indexes of that field
/// ([`FieldIndexDef::for_schema`]: an index that cannot be one is
/// [`Error::Schema`]).
///
/// [`FieldIndexDef::for_schema`]: crate::index::fields::FieldIndexDef::for_schema
pub(super) fn install(
    catalog: &Catalog,
    versions: Option<SchemaVersions>,
    fields: &crate::index::fields::SharedDefs,
) -> Result<()> {
    let current = versions.as_ref().and_then(SchemaVersions::current);
    let mut defs = fields.write().unwrap_or_else(|e| e.into_inner());
    let marked = defs
        .iter()
        .map(|d| d.clone().for_schema(current))
        .collect::<Result<Vec<_>>>()?;
    *defs = marked;
    catalog.set_schema_versions(versions.map(Arc::new));
    Ok(())
}
