//! A plain model of FORMAT.md's frame and record-kind rules, for checking
//! [`Walker`] against (not API: built with the `model` feature, which this
//! crate's tests and `fuzz/` turn on). `tests/rust/frame_vectors.rs`
//! checks the walker against it on random frames, and the fuzz target
//! `frame_decode` on arbitrary bytes.
//!
//! The model shares nothing with the walker but [`Check`]: its CRC is
//! computed bit by bit, its words read byte by byte.

use super::{Check, Event, Walker};

/// A walk as `(at, seq, what)` per event, `what` being
/// `frame:<kind>:<count>`, `empty`, `end_of_file` or `damage:<reason>`.
pub type Events = Vec<(usize, u64, String)>;

/// CRC-64/XZ, bit by bit: the model's own, independent of `format::crc`.
fn model_crc(bytes: &[u8]) -> u64 {
    let mut crc = !0u64;
    for &b in bytes {
        crc ^= u64::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xC96C_5795_D787_0F42
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// What a walker must report from `at` (message `seq`) in mode `check`,
/// read straight off FORMAT.md; stops after the first non-frame.
pub fn model_walk(data: &[u8], mut at: usize, mut seq: u64, check: Check) -> Events {
    let word = |at: usize, n: usize| -> Option<u64> {
        let b = data.get(at..at.checked_add(n)?)?;
        Some(b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x)))
    };
    let mut out = Vec::new();
    loop {
        let Some(len) = word(at, 4) else {
            out.push((at, seq, "damage:truncated".into()));
            return out;
        };
        if len == 0 {
            out.push((at, seq, "empty".into()));
            return out;
        }
        if len == 0xFFFF_FFFF {
            out.push((at, seq, "end_of_file".into()));
            return out;
        }
        let limit = match check {
            Check::Trusted(end) => end.min(data.len()),
            _ => data.len(),
        };
        let len = len as usize;
        if at + 4 + len + 8 > limit {
            out.push((at, seq, "damage:length_out_of_bounds".into()));
            return out;
        }
        if check == Check::Crc && word(at + 4 + len, 8) != Some(model_crc(&data[at..at + 4 + len]))
        {
            out.push((at, seq, "damage:crc".into()));
            return out;
        }
        let rec = &data[at + 4..at + 4 + len];
        // Extension byte 0x04: a hole; 0x08: a batch; 0x18: a row batch
        // (format 12), counted as a batch.
        let count = if len >= 10 && rec[0] == 0x80 && matches!(rec[9], 0x04 | 0x08 | 0x18) {
            let head = if rec[9] == 0x04 { 12 } else { 25 };
            let n = if len >= head {
                u16::from_le_bytes([rec[10], rec[11]])
            } else {
                0
            };
            if n == 0 {
                out.push((at, seq, "damage:record_malformed".into()));
                return out;
            }
            if rec[9] != 0x04 && u64::from_le_bytes(rec[12..20].try_into().unwrap()) != seq {
                out.push((at, seq, "damage:batch_seq_mismatch".into()));
                return out;
            }
            let kind = if rec[9] == 0x04 { "hole" } else { "batch" };
            out.push((at, seq, format!("frame:{kind}:{n}")));
            u64::from(n)
        } else {
            out.push((at, seq, "frame:plain:1".into()));
            1
        };
        at += (4 + len + 8).next_multiple_of(8);
        seq = seq.saturating_add(count);
    }
}

/// What [`Walker`] reports from `at` (message `seq`) in mode `check`, in
/// the model's terms; panics if a frame's `next` is not where the walker
/// then stands.
pub fn walker_walk(data: &[u8], at: usize, seq: u64, check: Check) -> Events {
    let mut w = Walker::new(at, seq, check);
    let mut out = Vec::new();
    loop {
        match w.step(data) {
            Event::Frame { frame, seq, kind } => {
                assert_eq!(frame.next, w.at);
                out.push((
                    frame.at,
                    seq,
                    format!("frame:{}:{}", kind.name(), kind.count()),
                ))
            }
            Event::Empty { at } => {
                out.push((at, w.seq, "empty".into()));
                return out;
            }
            Event::EndOfFile { at } => {
                out.push((at, w.seq, "end_of_file".into()));
                return out;
            }
            Event::Damage { at, seq, error } => {
                out.push((at, seq, format!("damage:{}", error.reason())));
                return out;
            }
        }
    }
}
