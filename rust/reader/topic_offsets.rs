//! Topic offsets: the dense 0, 1, 2, ... of each message within its topic
//! stream (topic and queue id), RocketMQ's consume-queue offset.
//!
//! They are not stored: the offset of message `seq` of stream `s` is the
//! number of `s`'s messages before it, summed from the per-file counts in
//! the directories of the topic index files (`NAME.topics`) of the files
//! before its own, plus its rank among `s`'s messages of its own file (the
//! index's entries; for the active file, the queue handle's map of its
//! topic messages, `catalog::topic_cache::ActiveTopics`; else a read of the file:
//! a sealed one whose index is not built yet or fails a check). The data files are the truth, so offsets are exact after a crash
//! or an index rebuild. They count the messages still in the queue:
//! retention deleting the oldest files lowers the offsets of the messages
//! left by the number deleted (see docs/DESIGN.md, "Topic offsets").

use std::collections::HashMap;
use std::sync::Arc;

use crate::catalog::{Catalog, FileInfo};
use crate::error::{Error, Result};
use crate::format::footer::CONTENT_TOPICS;
use crate::index::topics::{self, TopicsIndex};

/// A topic stream: (topic, queue id); topic "" for tags without a topic.
pub(crate) type Stream = (String, u16);

/// Reads data file `file_number` from sequence `from` to the end of what
/// is published in it, frame by frame (every frame's CRC checked; damage is
/// an error), calling `found(seq, topic, queue_id)` for each message with a
/// topic or tags; returns the sequence after the last message read. The
/// tailer provides it (`reader::tailer::scan_topics`).
pub(crate) type Scanner =
    fn(&Arc<Catalog>, u64, u64, &mut dyn FnMut(u64, &str, u16)) -> Result<u64>;

/// Sequences of each stream, in order.
type StreamSeqs = Vec<(Stream, Vec<u64>)>;

/// Which streams a reader asks offsets of: those of `topic` (any when
/// `None`) and `queue_id` (any when `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Streams {
    pub(crate) topic: Option<String>,
    pub(crate) queue_id: Option<u16>,
}

impl Streams {
    fn wants(&self, topic: &str, queue_id: u16) -> bool {
        self.topic.as_deref().is_none_or(|t| t == topic)
            && self.queue_id.is_none_or(|q| q == queue_id)
    }
}

/// The sequences of each wanted stream in one data file.
#[derive(Debug)]
struct FileSeqs {
    file_number: u64,
    first_seq: u64,
    /// Every message below this sequence is accounted for in `seqs`.
    upto: u64,
    /// The file is sealed and `seqs` holds all of it.
    complete: bool,
    seqs: StreamSeqs,
    /// Messages of a stream in the files before this one (computed once).
    bases: Vec<(Stream, u64)>,
    /// The rank asked last, `(index in seqs, rank)`: a reader moves
    /// forward, so the next is found from there in a step or two instead
    /// of by a binary search, whose loads miss the cache.
    hint: (usize, usize),
}

impl FileSeqs {
    fn of(&self, topic: &str, queue_id: u16) -> &[u64] {
        self.seqs
            .iter()
            .find(|((t, q), _)| t == topic && *q == queue_id)
            .map_or(&[], |(_, s)| s.as_slice())
    }

    /// How many of stream `(topic, queue_id)`'s messages in this file come
    /// before `seq`.
    fn rank(&mut self, topic: &str, queue_id: u16, seq: u64) -> usize {
        let Some(j) = self
            .seqs
            .iter()
            .position(|((t, q), _)| t == topic && *q == queue_id)
        else {
            return 0;
        };
        let seqs = &self.seqs[j].1;
        let hint = if self.hint.0 == j { self.hint.1 } else { 0 };
        let r = super::plan::position_by(seqs, |&s| s, seq, hint);
        self.hint = (j, r);
        r
    }
}

/// Computes topic offsets for one reader, caching what sealed files (which
/// never change) say.
#[derive(Debug)]
pub(crate) struct TopicOffsets {
    streams: Streams,
    scanner: Scanner,
    /// Messages of each wanted stream in a sealed file, by file number.
    counts: HashMap<u64, Vec<(Stream, u64)>>,
    /// The file whose messages' offsets were asked last.
    file: Option<FileSeqs>,
}

impl TopicOffsets {
    pub(crate) fn new(streams: Streams, scanner: Scanner) -> TopicOffsets {
        TopicOffsets {
            streams,
            scanner,
            counts: HashMap::new(),
            file: None,
        }
    }

    /// The topic offset of message `seq`, which belongs to stream
    /// `(topic, queue_id)`.
    pub(crate) fn offset_of(
        &mut self,
        catalog: &Arc<Catalog>,
        seq: u64,
        topic: &str,
        queue_id: u16,
    ) -> Result<u64> {
        // The usual case: the file read last, its base known.
        if let Some(f) = self
            .file
            .as_mut()
            .filter(|f| f.first_seq <= seq && seq < f.upto)
        {
            let base = f
                .bases
                .iter()
                .find(|((t, q), _)| t == topic && *q == queue_id)
                .map(|(_, b)| *b);
            if let Some(base) = base {
                return Ok(base + f.rank(topic, queue_id, seq) as u64);
            }
        }
        let Some(info) = catalog.locate(seq) else {
            return Ok(0); // not reached: the message was just read from a listed file
        };
        let sealed = catalog.successor(info.id).is_some();
        self.load_file(catalog, &info, sealed)?;
        let needs_scan = self
            .file
            .as_ref()
            .is_some_and(|f| !f.complete && f.upto <= seq);
        if needs_scan && !sealed {
            self.extend_from_map(catalog, &info);
        }
        if self
            .file
            .as_ref()
            .is_some_and(|f| !f.complete && f.upto <= seq)
        {
            self.extend(catalog, sealed)?;
        }
        let base = self.base(catalog, &info, topic, queue_id)?;
        let f = self.file.as_ref().expect("load_file set it");
        let rank = f.of(topic, queue_id).partition_point(|&s| s < seq) as u64;
        Ok(base + rank)
    }

    /// The sequence of message `offset` of stream `(topic, queue_id)`, or
    /// `Err((count, after))` when the stream holds only `count` messages
    /// (`offset >= count`): `after` is the sequence after its last message
    /// (the queue's first when it has none).
    pub(crate) fn seq_of(
        &mut self,
        catalog: &Arc<Catalog>,
        topic: &str,
        queue_id: u16,
        offset: u64,
    ) -> Result<std::result::Result<u64, (u64, u64)>> {
        catalog.refresh()?;
        let files = catalog.snapshot();
        let mut before = 0u64;
        let mut last_with: Option<(FileInfo, bool)> = None;
        for (i, info) in files.iter().enumerate() {
            let sealed = i + 1 < files.len();
            if sealed {
                let c = self.count(catalog, info, topic, queue_id)?;
                if c == 0 {
                    continue;
                }
                last_with = Some((*info, sealed));
                if offset >= before + c {
                    before += c;
                    continue;
                }
            }
            self.read_whole(catalog, info, sealed)?;
            let seqs = self.file.as_ref().expect("loaded").of(topic, queue_id);
            if let Some(&s) = usize::try_from(offset - before)
                .ok()
                .and_then(|i| seqs.get(i))
            {
                return Ok(Ok(s));
            }
            if !seqs.is_empty() {
                last_with = Some((*info, sealed));
            }
            before += seqs.len() as u64;
        }
        let after = match last_with {
            Some((info, sealed)) => {
                self.read_whole(catalog, &info, sealed)?;
                let seqs = self.file.as_ref().expect("loaded").of(topic, queue_id);
                seqs.last().map_or(info.header.first_seq, |&s| s + 1)
            }
            None => files.first().map_or(0, |f| f.header.first_seq),
        };
        Ok(Err((before, after)))
    }

    /// Makes `self.file` hold every message of `info` published so far.
    fn read_whole(&mut self, catalog: &Arc<Catalog>, info: &FileInfo, sealed: bool) -> Result<()> {
        self.load_file(catalog, info, sealed)?;
        if !sealed {
            self.extend_from_map(catalog, info);
        }
        if !self.file.as_ref().is_some_and(|f| f.complete) {
            self.extend(catalog, sealed)?;
        }
        Ok(())
    }

    /// Brings `self.file`, the active file `info`, up to what the queue
    /// handle's map of its topic messages has read (see
    /// `catalog::topic_cache::ActiveTopics`): the file is then read once per
    /// handle, not once per reader.
    fn extend_from_map(&mut self, catalog: &Arc<Catalog>, info: &FileInfo) {
        let (topic, queue_id) = (self.streams.topic.as_deref(), self.streams.queue_id);
        let Some(a) = active_frames(catalog, info, topic, queue_id) else {
            return;
        };
        let Some(f) = self.file.as_mut() else {
            return;
        };
        if f.file_number != info.header.file_number || a.upto <= f.upto {
            return;
        }
        // The map holds the file from its first message on.
        let mut seqs: StreamSeqs = Vec::new();
        for (seq, _, n, queue_id) in a.frames {
            let topic = &a.topics[n];
            match seqs
                .iter_mut()
                .find(|((t, q), _)| t == topic && *q == queue_id)
            {
                Some((_, list)) => list.push(seq),
                None => seqs.push(((topic.clone(), queue_id), vec![seq])),
            }
        }
        f.seqs = seqs;
        f.upto = a.upto;
    }

    /// Messages of stream `(topic, queue_id)` in the files before `info`.
    fn base(
        &mut self,
        catalog: &Arc<Catalog>,
        info: &FileInfo,
        topic: &str,
        queue_id: u16,
    ) -> Result<u64> {
        let cached = self.file.as_ref().and_then(|f| {
            f.bases
                .iter()
                .find(|((t, q), _)| t == topic && *q == queue_id)
                .map(|(_, b)| *b)
        });
        if let Some(b) = cached {
            return Ok(b);
        }
        let files = catalog.snapshot();
        let mut base = 0;
        for g in files
            .iter()
            .filter(|g| g.header.first_seq < info.header.first_seq)
        {
            base += self.count(catalog, g, topic, queue_id)?;
        }
        // Files this reader counted that retention deleted since: still
        // counted, so its offsets do not go back during a read.
        let number = info.header.file_number;
        for (n, counts) in &self.counts {
            let listed = files.iter().any(|g| g.header.file_number == *n);
            if *n < number && !listed {
                base += counts
                    .iter()
                    .find(|((t, q), _)| t == topic && *q == queue_id)
                    .map_or(0, |(_, c)| *c);
            }
        }
        if let Some(f) = self.file.as_mut() {
            f.bases.push(((topic.to_string(), queue_id), base));
        }
        Ok(base)
    }

    /// Messages of stream `(topic, queue_id)` in sealed file `info`.
    fn count(
        &mut self,
        catalog: &Arc<Catalog>,
        info: &FileInfo,
        topic: &str,
        queue_id: u16,
    ) -> Result<u64> {
        let number = info.header.file_number;
        if !self.counts.contains_key(&number) {
            let counts = self.sealed_counts(catalog, info)?;
            self.counts.insert(number, counts);
        }
        Ok(self.counts[&number]
            .iter()
            .find(|((t, q), _)| t == topic && *q == queue_id)
            .map_or(0, |(_, c)| *c))
    }

    /// The wanted streams' counts in sealed file `info`: from its topic
    /// index's directory when it checks out, else by reading the file.
    fn sealed_counts(&self, catalog: &Arc<Catalog>, info: &FileInfo) -> Result<Vec<(Stream, u64)>> {
        if info.header.version < 6 {
            return Ok(Vec::new());
        }
        let footer = catalog.read_footer(info);
        if footer.is_some_and(|f| f.content_flags & CONTENT_TOPICS == 0) {
            return Ok(Vec::new());
        }
        let path = info.id.topics_path(catalog.base());
        if let Some(ix) =
            footer.and_then(|f| TopicsIndex::open(&path, &topics::of(&info.header, &f)))
        {
            return Ok(ix
                .groups
                .iter()
                .filter(|g| self.streams.wants(&g.topic, g.queue_id))
                .map(|g| ((g.topic.clone(), g.queue_id), g.count))
                .collect());
        }
        let (seqs, _) = match self.scan(catalog, info, info.header.first_seq) {
            Ok(found) => found,
            // Deleted by retention meanwhile: no longer in the queue.
            Err(Error::NotFound { .. }) => return Ok(Vec::new()),
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Vec::new())
            }
            Err(e) => return Err(e),
        };
        Ok(seqs
            .into_iter()
            .map(|(s, list)| (s, list.len() as u64))
            .collect())
    }

    /// Makes `self.file` the sequences of `info`: from its topic index when
    /// it is sealed and the index checks out (every group's entries pass
    /// their CRC), else empty, to be read by [`TopicOffsets::extend`].
    fn load_file(&mut self, catalog: &Arc<Catalog>, info: &FileInfo, sealed: bool) -> Result<()> {
        let number = info.header.file_number;
        if self.file.as_ref().is_some_and(|f| f.file_number == number) {
            return Ok(());
        }
        let mut file = FileSeqs {
            file_number: number,
            first_seq: info.header.first_seq,
            upto: info.header.first_seq,
            complete: false,
            seqs: Vec::new(),
            bases: Vec::new(),
            hint: (0, 0),
        };
        let end = catalog.successor(info.id).map(|n| n.header.first_seq);
        if sealed && info.header.version < 6 {
            file.complete = true;
            file.upto = end.unwrap_or(file.upto);
        } else if sealed {
            let footer = catalog.read_footer(info);
            if footer.is_some_and(|f| f.content_flags & CONTENT_TOPICS == 0) {
                file.complete = true;
                file.upto = end.unwrap_or(file.upto);
            } else if let Some(ix) = footer.and_then(|f| {
                TopicsIndex::open(
                    &info.id.topics_path(catalog.base()),
                    &topics::of(&info.header, &f),
                )
            }) {
                let mut seqs = Vec::new();
                let mut ok = true;
                for g in ix
                    .groups
                    .iter()
                    .filter(|g| self.streams.wants(&g.topic, g.queue_id))
                {
                    match ix.entries(g) {
                        Some(entries) => seqs.push((
                            (g.topic.clone(), g.queue_id),
                            entries.iter().map(|e| e.seq).collect(),
                        )),
                        None => ok = false,
                    }
                }
                if ok {
                    file.seqs = seqs;
                    file.complete = true;
                    file.upto = end.unwrap_or(file.upto);
                }
            }
        }
        self.file = Some(file);
        Ok(())
    }

    /// Reads `self.file`'s messages from where it was read up to, to the
    /// end of what is published in it.
    fn extend(&mut self, catalog: &Arc<Catalog>, sealed: bool) -> Result<()> {
        let Some(f) = self.file.as_ref() else {
            return Ok(());
        };
        let Some(info) = catalog
            .snapshot()
            .iter()
            .find(|i| i.header.file_number == f.file_number)
            .copied()
        else {
            return Ok(());
        };
        let (found, upto) = self.scan(catalog, &info, f.upto)?;
        let f = self.file.as_mut().expect("checked above");
        for (stream, list) in found {
            match f.seqs.iter_mut().find(|(s, _)| *s == stream) {
                Some((_, seqs)) => seqs.extend(list),
                None => f.seqs.push((stream, list)),
            }
        }
        f.upto = upto.max(f.upto);
        f.complete = sealed;
        debug_assert!(f.upto >= f.first_seq);
        Ok(())
    }

    /// The wanted streams' sequences in file `info` from `from` to the end
    /// of what is published in it, read frame by frame (every frame's CRC
    /// checked; damage is an error), and the sequence after the last read.
    fn scan(
        &self,
        catalog: &Arc<Catalog>,
        info: &FileInfo,
        from: u64,
    ) -> Result<(StreamSeqs, u64)> {
        let mut out: StreamSeqs = Vec::new();
        let streams = &self.streams;
        let upto = (self.scanner)(
            catalog,
            info.header.file_number,
            from,
            &mut |seq, topic, queue_id| {
                if !streams.wants(topic, queue_id) {
                    return;
                }
                match out
                    .iter_mut()
                    .find(|((t, q), _)| t == topic && *q == queue_id)
                {
                    Some((_, seqs)) => seqs.push(seq),
                    None => out.push(((topic.to_string(), queue_id), vec![seq])),
                }
            },
        )?;
        Ok((out, upto))
    }
}

/// The messages of `topic` and `queue_id` (any when `None`) in active file
/// `info` that the handle's map of it lists (see [`crate::catalog::topic_cache::ActiveTopics`]); `None`
/// when the file cannot be mapped.
pub(crate) fn active_frames(
    catalog: &Catalog,
    info: &FileInfo,
    topic: Option<&str>,
    queue_id: Option<u16>,
) -> Option<crate::catalog::topic_cache::ActiveFrames> {
    let file = catalog.map_file(info).ok()?;
    let h = info.header;
    Some(
        catalog
            .active_topics
            .frames((h.file_number, h.first_seq), &file.map, topic, queue_id),
    )
}
