//! CRC-64/XZ (also called CRC-64/GO-ECMA): polynomial 0x42F0E1EBA9EA3693,
//! reflected, init and xorout all ones; check value of "123456789" is
//! 0x995DC9BBDF1939FA. This is what `crc64fast` computes.

/// CRC-64/XZ of the concatenation of `parts`.
pub fn crc64(parts: &[&[u8]]) -> u64 {
    let mut digest = crc64fast::Digest::new();
    for p in parts {
        digest.write(p);
    }
    digest.sum64()
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value() {
        assert_eq!(super::crc64(&[b"123456789"]), 0x995D_C9BB_DF19_39FA);
        assert_eq!(super::crc64(&[b"1234", b"56789"]), 0x995D_C9BB_DF19_39FA);
    }
}
