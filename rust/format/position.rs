//! Positions: where a frame is, in one `u64`, as the key index stores it.
//!
//! `position = (file_number << 40) | offset_in_file`. File numbers start at 1,
//! so no real position is 0; offsets stay below 2^40 because files do.

/// Bits of the offset part.
pub const OFFSET_BITS: u32 = 40;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// The position of the frame at `offset` of data file `file_number`.
pub fn encode(file_number: u64, offset: u64) -> u64 {
    (file_number << OFFSET_BITS) | (offset & OFFSET_MASK)
}

/// `(file_number, offset)` of a position.
pub fn decode(position: u64) -> (u64, u64) {
    (position >> OFFSET_BITS, position & OFFSET_MASK)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip() {
        let p = super::encode(3, 4096);
        assert_eq!(p, (3 << 40) | 4096);
        assert_eq!(super::decode(p), (3, 4096));
    }
}
