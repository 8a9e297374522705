//! `metadata.json`: reading and writing it, the checks an open makes
//! against it (a foreign directory, the encryption key), and the queue's
//! identity.

use crate::catalog::Catalog;
use crate::config::Config;
use crate::consumers::work_queue::QueueIdentity;
use crate::error::{Error, Result};
use crate::format::crypto;
use crate::format::metadata::{is_queue_id, Metadata, StoredEncryption};
use crate::format::{FORMAT_VERSION, OLDEST_READABLE_VERSION};
use crate::storage::fsutil::write_atomic;
use crate::storage::layout::{KEY_INDEX_DIR, METADATA_FILE};
use crate::writer::append_lock::APPEND_LOCK_FILE;
use std::path::Path;
use std::sync::Arc;

/// The identity of the queue at `base` whose metadata is `meta`: its
/// `queue_id` (or an encrypted queue's id); for a queue without one yet
/// (a read-only handle of a queue no writer of this version has opened),
/// the metadata file's device and inode and the queue's creation time.
pub(super) fn queue_identity(base: &Path, meta: &Metadata) -> QueueIdentity {
    if let Some(id) = meta
        .effective_queue_id()
        .and_then(crypto::from_hex)
        .and_then(|b| <[u8; 16]>::try_from(b).ok())
    {
        return QueueIdentity::Id(u128::from_be_bytes(id));
    }
    let (dev, ino) = std::fs::metadata(base.join(METADATA_FILE))
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        })
        .unwrap_or((0, 0));
    QueueIdentity::File {
        dev,
        ino,
        created_us: meta.created_us,
    }
}

pub(super) fn read_metadata(path: &Path) -> Result<Option<Metadata>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let m: Metadata = serde_json::from_slice(&bytes).map_err(|e| {
                Error::corrupted(path, 0, None, format!("metadata.json does not parse: {e}"))
            })?;
            if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&m.format_version) {
                return Err(Error::UnsupportedVersion {
                    path: path.to_path_buf(),
                    found: m.format_version,
                    supported: FORMAT_VERSION,
                });
            }
            if let Some(id) = m.queue_id.as_deref().filter(|id| !is_queue_id(id)) {
                return Err(Error::corrupted(
                    path,
                    0,
                    None,
                    format!("queue_id {id:?} is not 32 lowercase hex digits"),
                ));
            }
            Ok(Some(m))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

pub(super) fn no_queue_here(base: &Path) -> Error {
    Error::io(
        "open queue",
        base,
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no litemq queue here (metadata.json missing)",
        ),
    )
}

/// Whether `name`, found in a directory without `metadata.json`, may be
/// litemq's own: a queue whose metadata file is missing (its writer died
/// while creating it, or the file was lost) is still opened and recovered.
fn is_queue_entry(name: &str) -> bool {
    // What an atomic write killed before its rename leaves (`write_atomic`).
    let tmp_of = |file: &str| name.strip_suffix(".tmp").is_some_and(|n| n == file);
    name.starts_with('.')
        || tmp_of(METADATA_FILE)
        || tmp_of(crate::storage::wake::WAKE_FILE)
        || [
            APPEND_LOCK_FILE,
            crate::storage::wake::WAKE_FILE,
            KEY_INDEX_DIR,
            crate::consumers::CONSUMERS_DIR,
            crate::consumers::work_queue::WORK_QUEUES_DIR,
        ]
        .contains(&name)
        || (name.len() == 4 && name.bytes().all(|b| b.is_ascii_digit()))
}

/// Refuses to create a queue in a directory that holds something else (a
/// Spark output dataset, a directory of queues, anyone's files): a queue
/// made there would hide what is in it from readers of datasets.
pub(super) fn refuse_foreign_directory(base: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(base) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        // Not a directory, or unreadable: the open reports it.
        Err(_) => return Ok(()),
    };
    let mut foreign: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !is_queue_entry(name))
        .collect();
    if foreign.is_empty() {
        return Ok(());
    }
    foreign.sort();
    let more = foreign.len().saturating_sub(5);
    foreign.truncate(5);
    let mut listed = foreign.join(", ");
    if more > 0 {
        listed.push_str(&format!(" and {more} more"));
    }
    Err(Error::io(
        "create queue",
        base,
        std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "{} is not empty and holds no litemq queue (no metadata.json; it holds {listed}): \
                 a queue is created only in a new or empty directory (to read a directory of \
                 queues, open each queue in it)",
                base.display()
            ),
        ),
    ))
}

/// The `"encryption"` entry of a new encrypted queue: a random queue id and
/// the key check value.
pub(super) fn new_encryption(
    key: &crate::config::EncryptionKey,
    id: Option<[u8; 16]>,
) -> StoredEncryption {
    StoredEncryption {
        cipher: crypto::CIPHER_NAME.to_owned(),
        queue_id: crypto::to_hex(&id.unwrap_or_else(crypto::new_queue_id)),
        key_check: crypto::to_hex(&crypto::key_check(&key.0)),
    }
}

/// Checks the key given (if any) against the queue's `metadata.json` and
/// hands the queue key to the catalog: an encrypted queue opened without
/// its key or with another one, or a key given to a queue created without
/// encryption, is an error here, at open, never garbage later.
pub(super) fn unlock(config: &Config, meta: &Metadata, catalog: &Catalog) -> Result<()> {
    if let Some(mut key) = check_key(&config.path, config.encryption_key.as_ref(), meta)? {
        if let (Some(_), Some(k)) = (config.fixture_queue_id, &config.encryption_key) {
            key = key.with_synthetic_nonces(&k.0);
        }
        catalog.set_key(Arc::new(key));
    }
    Ok(())
}

/// The queue key of a queue whose metadata is `meta`, opened with `key`
/// (see [`unlock`]); `None` when the queue is not encrypted.
pub(crate) fn check_key(
    path: &Path,
    key: Option<&crate::config::EncryptionKey>,
    meta: &Metadata,
) -> Result<Option<crypto::QueueKey>> {
    let refuse = |reason: &str| Error::Encryption {
        path: path.to_path_buf(),
        reason: reason.to_owned(),
    };
    match (&meta.encryption, key) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(refuse(
            "the queue is encrypted; open it with its encryption_key",
        )),
        (None, Some(_)) => Err(refuse(
            "the queue was created without encryption (encryption is chosen when a queue \
             is created); open it without encryption_key",
        )),
        (Some(e), Some(key)) => {
            if e.cipher != crypto::CIPHER_NAME {
                return Err(refuse(&format!(
                    "metadata.json names cipher {:?}; this litemq knows {:?}",
                    e.cipher,
                    crypto::CIPHER_NAME
                )));
            }
            let id: [u8; crypto::QUEUE_ID_LEN] = crypto::from_hex(&e.queue_id)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| refuse("metadata.json has a malformed encryption queue_id"))?;
            if crypto::from_hex(&e.key_check).is_none() {
                return Err(refuse("metadata.json has a malformed key_check"));
            }
            if crypto::from_hex(&e.key_check).as_deref() != Some(&crypto::key_check(&key.0)[..]) {
                return Err(Error::WrongKey {
                    path: path.to_path_buf(),
                });
            }
            Ok(Some(crypto::QueueKey::new(&key.0, id)))
        }
    }
}

pub(super) fn write_metadata(path: &Path, m: &Metadata) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(m).expect("metadata serializes");
    write_atomic(path, &bytes)
}
