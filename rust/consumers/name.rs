//! Consumer names: what is allowed, and how a name becomes a file name.
//!
//! A name is never used in a path as given. It is encoded with RFC 4648
//! base32 (lowercase alphabet `a-z2-7`, no padding), which is reversible,
//! uses only characters every file system accepts, does not depend on case
//! sensitivity, and keeps the longest name (128 bytes, 205 characters plus
//! `.pos`) under the usual 255-byte limit of a file name.

use crate::error::{Error, Result};

/// Longest consumer name, in bytes of UTF-8.
pub const MAX_NAME_LEN: usize = 128;

/// Suffix of position files.
pub const POSITION_SUFFIX: &str = ".pos";

const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Checks a consumer name: 1..=128 bytes, no path separator (`/`, `\`), no
/// control character (C0, DEL, C1, NUL), and not `.` or `..`.
pub fn validate(name: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::InvalidArgument(format!(
            "consumer name {name:?} {why}"
        )))
    };
    if name.is_empty() {
        return bad("is empty");
    }
    if name.len() > MAX_NAME_LEN {
        return bad(&format!(
            "is {} bytes; at most {MAX_NAME_LEN} are allowed",
            name.len()
        ));
    }
    if name == "." || name == ".." {
        return bad("is a directory name");
    }
    if name.contains(['/', '\\']) {
        return bad("contains a path separator");
    }
    if name.chars().any(char::is_control) {
        return bad("contains a control character");
    }
    Ok(())
}

/// The file name (without directory) of the position file of `name`.
pub fn file_name(name: &str) -> String {
    let mut s = encode(name.as_bytes());
    s.push_str(POSITION_SUFFIX);
    s
}

/// The consumer name a position file name stands for, if it is one.
pub fn from_file_name(file: &str) -> Option<String> {
    let stem = file.strip_suffix(POSITION_SUFFIX)?;
    let name = String::from_utf8(decode(stem)?).ok()?;
    validate(&name).ok()?;
    // Only the canonical encoding counts (no stray trailing bits).
    (encode(name.as_bytes()) == stem).then_some(name)
}

/// Base32 (RFC 4648 alphabet, lowercase, no padding).
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(5) * 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc = (acc << 8) | u32::from(b);
        bits += 8;
        while bits >= 5 {
            bits -= 5;
            out.push(ALPHABET[((acc >> bits) & 31) as usize] as char);
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(ALPHABET[((acc << (5 - bits)) & 31) as usize] as char);
    }
    out
}

/// Inverse of [`encode`]; `None` for characters outside the alphabet.
pub fn decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 5 / 8);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = ALPHABET.iter().position(|&a| a == c)? as u32;
        acc = (acc << 5) | v;
        bits += 5;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1 << bits) - 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4648_vectors() {
        for (plain, coded) in [
            ("", ""),
            ("f", "my"),
            ("fo", "mzxq"),
            ("foo", "mzxw6"),
            ("foob", "mzxw6yq"),
            ("fooba", "mzxw6ytb"),
            ("foobar", "mzxw6ytboi"),
        ] {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).unwrap(), plain.as_bytes());
        }
    }

    #[test]
    fn names_round_trip_through_file_names() {
        for name in [
            "billing",
            "a",
            "ünïcødé ✓",
            "x.y-z_1",
            &"n".repeat(MAX_NAME_LEN),
        ] {
            validate(name).unwrap();
            let f = file_name(name);
            assert!(f.len() <= 255, "{f}");
            assert!(f
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.'));
            assert_eq!(from_file_name(&f).as_deref(), Some(name));
        }
    }

    #[test]
    fn bad_names() {
        for name in [
            "",
            ".",
            "..",
            "a/b",
            "a\\b",
            "a\0b",
            "a\nb",
            "\u{7f}",
            "\u{85}",
            &"n".repeat(129),
        ] {
            assert!(validate(name).is_err(), "{name:?} accepted");
        }
        assert!(from_file_name("1.pos").is_none());
        assert!(from_file_name("mzxw6.tmp").is_none());
    }
}
