//! The key hash and the slot it selects: stable across processes, versions and platforms.
//!
//! The hash is part of the on-disk format (items store it, slots are chosen by it), so it is
//! written out here rather than borrowed from a crate whose output might change: XXH32 with
//! seed 0 (Yann Collet's xxHash, 32-bit variant, as specified in `xxhash_spec.md`). Every read
//! is explicitly little-endian, so big-endian hosts compute the same values.

const PRIME32_1: u32 = 0x9E37_79B1;
const PRIME32_2: u32 = 0x85EB_CA77;
const PRIME32_3: u32 = 0xC2B2_AE3D;
const PRIME32_4: u32 = 0x27D4_EB2F;
const PRIME32_5: u32 = 0x1656_67B1;

#[inline]
fn read_u32(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

#[inline]
fn round(acc: u32, lane: u32) -> u32 {
    acc.wrapping_add(lane.wrapping_mul(PRIME32_2))
        .rotate_left(13)
        .wrapping_mul(PRIME32_1)
}

/// XXH32 of `input` with seed 0: the key hash stored in every index item.
///
/// Test vectors: `""` → `0x02CC5D05`, `"a"` → `0x550D7456`, `"abc"` → `0x32D153FF`,
/// `"Nobody inspects the spammish repetition"` → `0xE2293B2F`.
pub fn key_hash(input: &[u8]) -> u32 {
    xxh32(input, 0)
}

/// XXH32 with an explicit seed (the index always uses seed 0).
pub fn xxh32(input: &[u8], seed: u32) -> u32 {
    let len = input.len();
    let mut rest = input;
    let mut acc = if len >= 16 {
        let mut v1 = seed.wrapping_add(PRIME32_1).wrapping_add(PRIME32_2);
        let mut v2 = seed.wrapping_add(PRIME32_2);
        let mut v3 = seed;
        let mut v4 = seed.wrapping_sub(PRIME32_1);
        while rest.len() >= 16 {
            v1 = round(v1, read_u32(&rest[0..4]));
            v2 = round(v2, read_u32(&rest[4..8]));
            v3 = round(v3, read_u32(&rest[8..12]));
            v4 = round(v4, read_u32(&rest[12..16]));
            rest = &rest[16..];
        }
        v1.rotate_left(1)
            .wrapping_add(v2.rotate_left(7))
            .wrapping_add(v3.rotate_left(12))
            .wrapping_add(v4.rotate_left(18))
    } else {
        seed.wrapping_add(PRIME32_5)
    };
    // The spec adds the input length modulo 2^32.
    acc = acc.wrapping_add(len as u32);
    while rest.len() >= 4 {
        acc = acc
            .wrapping_add(read_u32(&rest[0..4]).wrapping_mul(PRIME32_3))
            .rotate_left(17)
            .wrapping_mul(PRIME32_4);
        rest = &rest[4..];
    }
    for &byte in rest {
        acc = acc
            .wrapping_add(u32::from(byte).wrapping_mul(PRIME32_5))
            .rotate_left(11)
            .wrapping_mul(PRIME32_1);
    }
    acc ^= acc >> 15;
    acc = acc.wrapping_mul(PRIME32_2);
    acc ^= acc >> 13;
    acc = acc.wrapping_mul(PRIME32_3);
    acc ^ (acc >> 16)
}

/// The slot a hash selects in a table of `slots` slots: `(hash * slots) >> 32`.
///
/// Multiply-shift (Lemire's "fast range") instead of `hash % slots`: one multiplication
/// instead of a division on the add path, and it uses the hash's well-mixed high bits. Any
/// `slots` in `1..=u32::MAX` works; the result is always `< slots`.
#[inline]
pub fn slot_of(hash: u32, slots: u32) -> u32 {
    ((u64::from(hash) * u64::from(slots)) >> 32) as u32
}
