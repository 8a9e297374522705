//! Key lookups (`find`, `get_latest`): the key index's positions, and the
//! data read where the index does not cover it.

use crate::error::{Error, Result};
use crate::format::position;
use crate::index::coverage::Coverage;
use crate::index::key_index::KeyIndexReader;
use crate::reader::tailer::OwnedMessage;
use crate::reader::topic::TopicSelector;
use crate::storage::layout::KEY_INDEX_DIR;

use super::Queue;

impl Queue {
    /// Messages whose key is exactly `key`, in sequence order, stored in
    /// `[start_us, end_us)` when given, at most `limit` of them. Answered
    /// from the key index: only files whose time range can match are read;
    /// a batch frame (format 9) it points at is decoded, and each member
    /// with the key is a match.
    /// Items pointing into a data file missing from the middle of the queue
    /// are [`Error::Corrupted`] (those retention deleted are skipped).
    pub fn find(
        &self,
        key: &[u8],
        start_us: Option<u64>,
        end_us: Option<u64>,
        limit: Option<usize>,
    ) -> Result<Vec<OwnedMessage>> {
        self.find_where(key, None, start_us, end_us, limit)
    }

    /// As [`Queue::find`], returning only the messages `selector` wants (its
    /// topic, queue id and tags, compared exactly on each message the key
    /// index finds): RocketMQ's query by key within a topic.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let queue = litemq::QueueBuilder::new(dir.path()).open()?;
    /// let app = queue.appender()?;
    /// for topic in ["orders", "audit"] {
    ///     app.append_record(&litemq::Record {
    ///         key: Some(b"k"),
    ///         topic: Some(topic),
    ///         ..litemq::Record::new(b"v")
    ///     })?;
    /// }
    /// let orders = litemq::TopicSelector { topic: Some("orders".into()), ..Default::default() };
    /// let found = queue.find_in_topic(b"k", &orders, None, None, None)?;
    /// assert_eq!(found.iter().map(|m| m.seq).collect::<Vec<_>>(), [0]);
    /// # Ok::<(), litemq::Error>(())
    /// ```
    pub fn find_in_topic(
        &self,
        key: &[u8],
        selector: &TopicSelector,
        start_us: Option<u64>,
        end_us: Option<u64>,
        limit: Option<usize>,
    ) -> Result<Vec<OwnedMessage>> {
        self.find_where(key, Some(selector), start_us, end_us, limit)
    }

    fn find_where(
        &self,
        key: &[u8],
        selector: Option<&TopicSelector>,
        start_us: Option<u64>,
        end_us: Option<u64>,
        limit: Option<usize>,
    ) -> Result<Vec<OwnedMessage>> {
        let positions = self.key_positions(key, start_us, end_us)?;
        let limit = limit.unwrap_or(usize::MAX);
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        self.read_key_positions(key, positions, false, &mut |m| {
            let in_range = start_us.is_none_or(|s| m.timestamp >= s)
                && end_us.is_none_or(|e| m.timestamp < e)
                && selector.is_none_or(|s| s.matches(m.record()));
            if in_range {
                out.push(m.to_owned());
            }
            out.len() < limit
        })?;
        Ok(out)
    }

    /// The last message appended with `key`, through the key index: `None`
    /// when there is none, or when the last one is a tombstone
    /// ([`Record::tombstone`](crate::Record), the key's value deleted).
    /// Kafka's compacted-topic reading of a key: the latest value wins, by
    /// sequence, members of batches (format 9) included.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let queue = litemq::QueueBuilder::new(dir.path()).open()?;
    /// let app = queue.appender()?;
    /// app.append_record(&litemq::Record { key: Some(b"k"), ..litemq::Record::new(b"v1") })?;
    /// app.append_record(&litemq::Record { key: Some(b"k"), ..litemq::Record::new(b"v2") })?;
    /// assert_eq!(queue.get_latest(b"k")?.unwrap().payload, b"v2");
    /// app.append_record(&litemq::Record { key: Some(b"k"), tombstone: true, ..litemq::Record::new(b"") })?;
    /// assert!(queue.get_latest(b"k")?.is_none());
    /// # Ok::<(), litemq::Error>(())
    /// ```
    pub fn get_latest(&self, key: &[u8]) -> Result<Option<OwnedMessage>> {
        let positions = self.key_positions(key, None, None)?;
        let mut latest = None;
        self.read_key_positions(key, positions, true, &mut |m| {
            latest = Some(m.to_owned());
            false
        })?;
        Ok(latest.filter(|m| !m.tombstone))
    }

    /// The positions between the data's start and the key index's last
    /// item that no key-index file covers (a writer's own index, complete:
    /// they hold no keyed message). `None` without an index to ask.
    pub(super) fn key_index_gaps(&self) -> Option<Vec<(u64, u64)>> {
        let guard = self
            .inner()
            .key_reader
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let (covered, last) = guard.as_ref()?.coverage().ok()?;
        let first = self.inner().catalog.first_position()?;
        let within = first..last?.saturating_add(1);
        Some(
            covered
                .gaps(within)
                .into_iter()
                .map(|r| (r.start, r.end))
                .collect(),
        )
    }

    /// Positions of the frames that may hold a message with `key` stored in
    /// `[start_us, end_us)`, ascending (hash collisions included): the key
    /// index's, and, for the positions the index does not cover (see
    /// `index::coverage`: a file of it lost, none at all, or its newest
    /// items not yet added by a writer in another process), those read from
    /// the data itself. Never fewer than the queue holds: what cannot be
    /// read is an error. Data files out of order (swapped) are
    /// [`Error::Corrupted`].
    fn key_positions(
        &self,
        key: &[u8],
        start_us: Option<u64>,
        end_us: Option<u64>,
    ) -> Result<Vec<u64>> {
        self.check_open()?;
        self.wait_visible()?;
        let catalog = &self.inner().catalog;
        catalog.check_order()?;
        let mut positions = Vec::new();
        let mut covered = Coverage::new();
        {
            let mut guard = self
                .inner()
                .key_reader
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if guard.is_none() {
                let dir = self.path().join(KEY_INDEX_DIR);
                if dir.is_dir() {
                    *guard = Some(KeyIndexReader::open(&dir)?);
                }
            }
            if let Some(reader) = guard.as_ref() {
                let (c, last) = reader.coverage()?;
                covered = c;
                if !reader.is_standalone() {
                    // The writer of this handle adds every keyed message it
                    // writes (and brought the index level with the data
                    // when it opened): past the last item, it covers all.
                    covered.add(last.map_or(0, |l| l + 1)..u64::MAX);
                }
                match catalog.key() {
                    Some(k) => {
                        reader.lookup_into(&k.index_key(key), start_us, end_us, &mut positions)?
                    }
                    None => reader.lookup_into(key, start_us, end_us, &mut positions)?,
                }
            }
        }
        let Some(first) = catalog.first_position() else {
            return Ok(positions);
        };
        let mut scanned = self
            .inner()
            .key_scanned
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        covered.add_all(&scanned);
        {
            // A clean close (before this handle opened) recorded that no
            // keyed message follows the index's last item up to where the
            // data then ended.
            let m = self
                .inner()
                .metadata
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if m.clean_shutdown {
                covered.add(m.key_index_last.map_or(0, |l| l + 1)..m.key_index_upto);
            }
            // Where the last writer found no keyed message outside the files.
            for &(start, end) in &m.key_index_clear {
                covered.add(start..end);
            }
        }
        let gaps = covered.gaps(first..u64::MAX);
        if gaps.is_empty() {
            return Ok(positions);
        }
        let mut found = Vec::new();
        for gap in gaps {
            let clear = crate::reader::keys::scan_for_key(catalog, gap, key, &mut found)?;
            scanned.add(clear);
        }
        drop(scanned);
        if !found.is_empty() {
            positions.extend(found);
            positions.sort_unstable();
            positions.dedup();
        }
        Ok(positions)
    }

    /// Reads the message at each position (ascending, as the key index
    /// gives them) that really has `key` (hash collisions and files removed
    /// by retention fall out), handing it to `visit` until it returns
    /// false; newest first when `newest_first`. A position that is a batch
    /// frame (format 9; its keyed members share it) is decoded, and every
    /// member with `key` is a match, in sequence order (reversed too when
    /// `newest_first`).
    fn read_key_positions(
        &self,
        key: &[u8],
        mut positions: Vec<u64>,
        newest_first: bool,
        visit: &mut dyn FnMut(&crate::reader::tailer::Message<'_>) -> bool,
    ) -> Result<()> {
        positions.dedup();
        if newest_first {
            positions.reverse();
        }
        // The reader `get` keeps: its file stays mapped between calls, so a
        // lookup costs no mmap.
        let mut guard = self
            .inner()
            .getter
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(self.new_tailer());
        }
        let t = guard.as_mut().expect("set above");
        let mut refreshed = false;
        for pos in positions {
            t.seek_position(pos)?;
            let Some(m) = t.read_next()? else { continue };
            if position::decode(m.position()).0 != position::decode(pos).0 {
                // The file the item points into is gone: retention deleted
                // it (it is older than every file kept), or it is missing
                // from the middle of the queue, which is damage.
                self.check_file_kept(pos, &mut refreshed)?;
                continue;
            }
            if m.position() != pos {
                continue;
            }
            let Some(end) = m.batch_end() else {
                if m.key == Some(key) && !visit(&m) {
                    break;
                }
                continue;
            };
            // A batch frame: its members from the first on (the seek
            // landed on it), those with `key` matching.
            let mut matched = Vec::new();
            let mut next = Some(m);
            while let Some(m) = next {
                if m.key == Some(key) {
                    if newest_first {
                        matched.push(m.seq);
                    } else if !visit(&m) {
                        return Ok(());
                    }
                }
                if m.seq + 1 >= end {
                    break;
                }
                next = t.read_next()?;
            }
            for seq in matched.into_iter().rev() {
                t.seek(seq)?;
                if let Some(m) = t.read_next()? {
                    if !visit(&m) {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    /// For a key-index item at `pos` whose data file is not in the catalog:
    /// fine when retention deleted it, [`Error::Corrupted`] when it is
    /// missing between files that are there.
    fn check_file_kept(&self, pos: u64, refreshed: &mut bool) -> Result<()> {
        let (number, offset) = position::decode(pos);
        let catalog = &self.inner().catalog;
        if !std::mem::replace(refreshed, true) {
            catalog.refresh()?;
        }
        let files = catalog.snapshot();
        if files.iter().any(|f| f.header.file_number == number) {
            return Ok(());
        }
        let before = files.iter().rev().find(|f| f.header.file_number < number);
        let after = files.iter().find(|f| f.header.file_number > number);
        match (before, after) {
            (Some(b), Some(a)) => Err(Error::corrupted(
                catalog.data_path(a.id),
                0,
                None,
                format!(
                    "data file number {number} is missing from the middle of the queue \
                     (between {} and {}); the key index points into it at offset {offset}",
                    catalog.data_path(b.id).display(),
                    catalog.data_path(a.id).display()
                ),
            )),
            _ => Ok(()),
        }
    }
}
