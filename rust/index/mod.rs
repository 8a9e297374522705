//! Indexes over the data files: the sparse index (sequence and time to file
//! offset, one per data file) and the key index (message key to position).

pub mod coverage;
pub mod dense;
pub mod fields;
mod file;
pub mod key_index;
pub mod sparse;
pub mod topics;

use crate::format::error::DecodeError;
use crate::format::footer::Footer;
use crate::format::frame::DATA_HEADER_LEN;
use crate::format::header::DataHeader;
use crate::format::kind::RecordKind;
use crate::format::record::{self, RecordView};
use crate::format::walk::{frame_at, Check, Step};

/// Walks every record of sealed data file `file` (its bytes), whose header
/// and footer are given, handing `(seq, frame offset, record length,
/// record)` to `each`: what the derived indexes (topics, fields) are built
/// from. Every frame is CRC-checked: all at once by the footer's CRC of the
/// frame area (one pass at memory speed, cheaper than a CRC per small
/// frame), or, when that does not match, frame by frame to say where the
/// damage is; a damaged frame or record, or a count that disagrees with the
/// footer, is an error (the file then gets no derived index, and readers
/// read it whole and report the damage).
pub fn walk_sealed(
    file: &[u8],
    header: &DataHeader,
    footer: &Footer,
    each: &mut dyn FnMut(u64, usize, usize, &RecordView<'_>),
) -> Result<(), String> {
    let mut at = DATA_HEADER_LEN;
    let mut seq = header.first_seq;
    let end = footer.frames_end as usize;
    let verified = Footer::frames_crc_of(file, footer.frames_end) == Some(footer.frames_crc);
    let check = if verified {
        Check::Trusted(end)
    } else {
        Check::Crc
    };
    while at < end {
        match frame_at(file, at, check) {
            Step::Frame(f) => {
                let view = record::decode(f.record).map_err(|r| format!("offset {at}: {r}"))?;
                each(seq, at, f.record.len(), &view);
                at = f.next;
                seq += RecordKind::of_or_plain(f.record).count(); // a hole stands for several
            }
            Step::Damage(DecodeError::Truncated) => return Err("frame past the end".into()),
            Step::Empty | Step::EndOfFile => {
                return Err(format!("no frame at offset {at} before the footer's end"))
            }
            Step::Damage(e) => return Err(format!("offset {at}: {e}")),
        }
    }
    if seq != footer.end_seq {
        return Err(format!(
            "{} messages, the footer says {}",
            seq - header.first_seq,
            footer.end_seq - header.first_seq
        ));
    }
    Ok(())
}
