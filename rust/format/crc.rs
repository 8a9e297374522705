//! CRC-64/XZ (also called CRC-64/GO-ECMA): polynomial 0x42F0E1EBA9EA3693,
//! reflected, init and xorout all ones; check value of "123456789" is
//! 0x995DC9BBDF1939FA.
//!
//! Two crates compute it, each where it is fastest. `crc64fast` folds with
//! carry-less multiplication from 128 bytes on but uses a table below, and a
//! frame of a small message is well below (77 bytes for a 64-byte payload);
//! there `crc-fast`, SIMD from 16 bytes, is about 2.5 times faster. Measured
//! on the reference machine, ns per call: 29 B 36 vs 25, 77 B 88 vs 34,
//! 141 B 36 vs 42, 1037 B 76 vs 77 (crc64fast vs crc-fast, in one run).
//! The CRC was 44 % of the I/O thread's samples (`perf`) when appending
//! 64-byte messages before this split.

/// Inputs shorter than this go to `crc-fast`.
const SHORT: usize = 128;

/// CRC-64/XZ of one slice.
#[inline]
pub fn crc64_of(bytes: &[u8]) -> u64 {
    if bytes.len() < SHORT {
        crc_fast::checksum(crc_fast::CrcAlgorithm::Crc64Xz, bytes)
    } else {
        let mut digest = crc64fast::Digest::new();
        digest.write(bytes);
        digest.sum64()
    }
}

/// CRC-32C (Castagnoli, iSCSI: polynomial 0x1EDC6F41 reflected, init and
/// xorout all ones; check value of "123456789" is 0xE3069283). litemq's own
/// files never use it: it checks LedgerQ segments on import.
pub fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::checksum(crc_fast::CrcAlgorithm::Crc32Iscsi, bytes) as u32
}

/// CRC-64/XZ of the concatenation of `parts`.
#[inline]
pub fn crc64(parts: &[&[u8]]) -> u64 {
    if let [one] = parts {
        return crc64_of(one);
    }
    let mut digest = Crc64::new();
    for p in parts {
        digest.write(p);
    }
    digest.finish()
}

/// CRC-64/XZ of `a ‖ b` from the CRC of `a` and the CRC and length of `b`
/// (for files checked piece by piece, e.g. read back from an archive).
pub fn crc64_combine(crc_a: u64, crc_b: u64, len_b: u64) -> u64 {
    crc_fast::checksum_combine(crc_fast::CrcAlgorithm::Crc64Xz, crc_a, crc_b, len_b)
}

/// CRC-64/XZ over bytes that come in pieces (large ones, or many).
pub struct Crc64(crc64fast::Digest);

impl Crc64 {
    /// An empty digest.
    pub fn new() -> Crc64 {
        Crc64(crc64fast::Digest::new())
    }

    /// Adds `bytes` to the digest.
    pub fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    /// The CRC-64 of everything written.
    pub fn finish(&self) -> u64 {
        self.0.sum64()
    }
}

impl Default for Crc64 {
    fn default() -> Crc64 {
        Crc64::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_value() {
        assert_eq!(crc64(&[b"123456789"]), 0x995D_C9BB_DF19_39FA);
        assert_eq!(crc64(&[b"1234", b"56789"]), 0x995D_C9BB_DF19_39FA);
    }

    #[test]
    fn crc32c_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn combining_pieces_gives_the_crc_of_the_whole() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 3) as u8).collect();
        for cut in [0, 1, 127, 128, 500, 1000] {
            let (a, b) = data.split_at(cut);
            assert_eq!(
                crc64_combine(crc64_of(a), crc64_of(b), b.len() as u64),
                crc64_of(&data),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn both_crates_agree_at_every_length_around_the_switch() {
        let data: Vec<u8> = (0..400u32).map(|i| (i * 131 + 17) as u8).collect();
        for len in 0..data.len() {
            let b = &data[..len];
            let mut d = crc64fast::Digest::new();
            d.write(b);
            assert_eq!(crc64_of(b), d.sum64(), "length {len}");
            assert_eq!(crc64(&[&b[..len / 3], &b[len / 3..]]), d.sum64());
        }
    }
}
