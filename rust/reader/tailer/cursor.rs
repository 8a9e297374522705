//! The tailer's cursor: the file it reads, where, and the hints that
//! place it (dense and sparse index, a footer that verified the file).

use std::sync::{Arc, OnceLock};

use super::scan::{count_frames, entry_matches};
use crate::catalog::{Catalog, FileInfo};
use crate::error::{Error, Result};
use crate::format::frame::DATA_HEADER_LEN;
use crate::format::record::{self};
use crate::format::walk::FrameBytes;
use crate::index::dense::{DenseIndex, DENSE_SINCE_VERSION};
use crate::index::sparse::{Entry, SparseIndex};
use crate::storage::frames::{frame_at, Check, Step};
use crate::storage::mapped::Mapping;

#[derive(Debug)]
pub(super) struct Cursor {
    pub(super) info: FileInfo,
    pub(super) map: Arc<Mapping>,
    pub(super) offset: usize,
    /// The file's sparse index, opened on first use (`Some(None)`: unusable).
    pub(super) index: Option<Option<SparseIndex>>,
    /// The file's footer when it is a sealed file, looked up on a bulk
    /// read's first use (`Some(None)`: none usable).
    pub(super) footer: Option<Option<crate::catalog::sealed::Sealed>>,
    /// Its frame area matched the footer's CRC in this process.
    pub(super) verified: bool,
    /// Frames runs ([`Tailer::read_run_frames`]) read from this file: once
    /// they and the run asked for reach a quarter of a sealed file, the
    /// file is verified whole (see there).
    pub(super) run_frames: u64,
    /// The file's dense index (format 5), opened on first use (`None`
    /// inside: none, or unusable); shared with the catalog's other tailers
    /// for a sealed file it keeps.
    pub(super) dense: Arc<OnceLock<Option<Arc<DenseIndex>>>>,
    /// Where the frames of a sealed file this handle verified end (see
    /// [`Cursor::trust`]): frames before it are read without their own CRC.
    pub(super) trusted_end: Option<usize>,
    /// [`Cursor::trust`] looked already.
    pub(super) trust_checked: bool,
    /// `(offset, length word)` of the frame [`Cursor::dense_frame`] just
    /// CRC-checked, so that reading it next does not check it again (once:
    /// taken by that read).
    pub(super) checked_frame: Option<(usize, u32)>,
    /// Opened by the tailer's current [`Tailer::read_at`], so
    /// [`Catalog::map_file`] has just checked that the file is still there
    /// (see [`Tailer::file_just_checked`]).
    pub(super) fresh: bool,
}

impl Cursor {
    pub(super) fn open(catalog: &Catalog, info: FileInfo) -> Result<Cursor> {
        let file = catalog.map_file(&info)?;
        Ok(Cursor::new(
            info,
            file.map,
            file.dense,
            DATA_HEADER_LEN,
            true,
        ))
    }

    /// A cursor at `offset` of the mapped file, nothing about it looked up.
    pub(super) fn new(
        info: FileInfo,
        map: Arc<Mapping>,
        dense: Arc<OnceLock<Option<Arc<DenseIndex>>>>,
        offset: usize,
        fresh: bool,
    ) -> Cursor {
        Cursor {
            info,
            map,
            offset,
            index: None,
            footer: None,
            verified: false,
            run_frames: 0,
            dense,
            trusted_end: None,
            trust_checked: false,
            checked_frame: None,
            fresh,
        }
    }

    /// A filtered read (which reads a few frames here and there, never a
    /// whole file) trusts the frames of a sealed file whose frame area this
    /// queue handle verified against its footer's CRC (a bulk read did, see
    /// `catalog::sealed`): each frame is then CRC-checked by that checksum
    /// instead of its own. Looked up once per file.
    pub(super) fn trust(&mut self, catalog: &Catalog) {
        if self.trust_checked {
            return;
        }
        self.trust_checked = true;
        let footer = *self
            .footer
            .get_or_insert_with(|| crate::catalog::sealed::footer(&self.map, &self.info.header));
        if let Some(sealed) = footer {
            if self.verified || catalog.verified.contains(&sealed) {
                self.verified = true;
                self.trusted_end = Some(sealed.footer.frames_end as usize);
            }
        }
    }

    /// The length word of the frame at the cursor, which is message `seq`'s
    /// (or a marker). A damaged file whose frames reach its (trimmed) end,
    /// with no room left for a word, is an error.
    /// The word is loaded through [`FrameBytes::length_word`], which makes
    /// sure the mapping's cached length holds the frame it announces (a
    /// growing file: format version 11).
    pub(super) fn length_word(&self, seq: u64) -> Result<u32> {
        FrameBytes::length_word(&*self.map, self.offset).ok_or_else(|| {
            Error::corrupted(
                self.map.path(),
                self.offset as u64,
                Some(seq),
                "frames run to the end of the file without an end-of-file marker",
            )
        })
    }

    /// Offset of message `seq`'s frame from the dense index, if the file has
    /// one, its entry for `seq` is written and matches, and the frame there
    /// passes its CRC and decodes. A damaged entry must not send a reader to
    /// the wrong message: anything else is `None`, and the caller scans.
    ///
    /// `held`: the offset of a batch frame of this file whose block the
    /// tailer holds, checked when it was loaded: a member of it is answered
    /// from the block, so its frame (up to 1 MiB) is not checked again.
    pub(super) fn dense_frame(
        &mut self,
        catalog: &Catalog,
        seq: u64,
        held: Option<usize>,
    ) -> Option<usize> {
        let ix = self.dense_index(catalog)?.clone();
        let at = ix.offset(seq, self.map.mapped_len())?;
        if held == Some(at) {
            let len = FrameBytes::length_word(&*self.map, at)?;
            self.checked_frame = Some((at, len));
            return Some(at);
        }
        match frame_at(&*self.map, at, Check::Crc) {
            Step::Frame(f) => {
                let ok = record::decode(f.record).is_ok();
                self.checked_frame = ok.then_some((at, f.record.len() as u32));
                ok.then_some(at)
            }
            _ => None,
        }
    }

    /// The first message after `seq` (whose frame, damaged, is at the
    /// cursor) that the dense index places in a later frame that checks
    /// out: `(its sequence, its frame's offset)`. The members of a batch
    /// share its frame and are passed over; a few entries that do not check
    /// out (damaged, or dropped by key compaction) are looked past; `None`
    /// when the file has no dense index or none of those entries answers.
    pub(super) fn next_by_dense(&mut self, catalog: &Catalog, seq: u64) -> Option<(u64, usize)> {
        const LOOK: u64 = 64;
        let here = self.offset;
        self.dense_index(catalog)?;
        let mut s = seq + 1;
        let mut misses = 0;
        while misses < LOOK && s - seq <= u64::from(u16::MAX) + 1 {
            match self.dense_frame(catalog, s, None) {
                Some(at) if at > here => return Some((s, at)),
                Some(_) => {}
                None => misses += 1,
            }
            s += 1;
        }
        None
    }

    /// Whether the batch frame at `at`, whose record names `first` as its
    /// first member, stands at sequence `first` (a batch whose `first_seq`
    /// disagrees with its place is corrupted for every member, FORMAT.md):
    /// the dense index, written from the writer's own count, has message
    /// `first` at `at` and message `first - 1` before it (or `first` is the
    /// file's first). Two probes per batch decoded. Where the dense index
    /// does not say so (none, an entry not written yet or damaged), the
    /// file's frames are counted from its start up to `at`.
    pub(super) fn batch_starts_at(&self, catalog: &Catalog, at: usize, first: u64) -> bool {
        let file_first = self.info.header.first_seq;
        if first < file_first {
            return false;
        }
        let len = self.map.mapped_len();
        if let Some(ix) = self.dense_index(catalog) {
            let here = ix.offset(first, len);
            let before = if first > file_first {
                ix.offset(first - 1, len).filter(|&b| b < at)
            } else {
                Some(DATA_HEADER_LEN)
            };
            if here == Some(at) && before.is_some() {
                return true;
            }
        }
        count_frames(&self.map, DATA_HEADER_LEN, Some(at))
            .is_some_and(|(n, end)| end == at && file_first + n == first)
    }

    /// The file's dense index, opened on first use.
    pub(super) fn dense_index(&self, catalog: &Catalog) -> Option<&Arc<DenseIndex>> {
        let info = self.info;
        self.dense
            .get_or_init(|| {
                (info.header.version >= DENSE_SINCE_VERSION)
                    .then(|| {
                        DenseIndex::open(
                            &info.id.offsets_path(catalog.base()),
                            info.header.first_seq,
                            info.header.file_number,
                        )
                    })
                    .flatten()
                    .map(Arc::new)
            })
            .as_ref()
    }

    /// A sparse-index entry chosen by `pick`, if the frame it points at
    /// checks out. An entry is a hint: a damaged one must not send a reader
    /// to the wrong message, so it is ignored and the caller scans instead.
    pub(super) fn entry(
        &mut self,
        catalog: &Catalog,
        pick: impl FnOnce(&SparseIndex) -> Option<Entry>,
    ) -> Option<Entry> {
        let e = self.index(catalog).and_then(pick)?;
        entry_matches(&self.map, &e).then_some(e)
    }

    pub(super) fn index(&mut self, catalog: &Catalog) -> Option<&SparseIndex> {
        let (info, len) = (self.info, self.map.mapped_len() as u64);
        self.index
            .get_or_insert_with(|| {
                SparseIndex::open(
                    &info.id.index_path(catalog.base()),
                    info.header.first_seq,
                    len,
                )
            })
            .as_ref()
    }
}
