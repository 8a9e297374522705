//! Arrow's column pieces joined: LSB-first bitmaps and `i32` offsets
//! appended after others (a parallel read's parts, untyped and typed).

/// Appends `src_rows` bits of `src` after the first `dst_rows` bits of
/// `dst` (LSB-first bitmaps whose bits past their rows are 0).
pub fn append_bits(dst: &mut Vec<u8>, dst_rows: usize, src: &[u8], src_rows: usize) {
    let src = &src[..src_rows.div_ceil(8).min(src.len())];
    let shift = dst_rows % 8;
    dst.resize(dst_rows.div_ceil(8), 0);
    if shift == 0 {
        dst.extend_from_slice(src);
    } else {
        dst.resize((dst_rows + src_rows).div_ceil(8), 0);
        let at = dst_rows / 8;
        for (j, &b) in src.iter().enumerate() {
            dst[at + j] |= b << shift;
            if let Some(d) = dst.get_mut(at + j + 1) {
                *d |= b >> (8 - shift);
            }
        }
    }
}

/// Appends `n` set bits after the first `dst_rows` bits of `dst` (as
/// [`append_bits`] of an all-valid bitmap).
pub fn append_ones(dst: &mut Vec<u8>, dst_rows: usize, n: usize) {
    let mut ones = vec![0xffu8; n.div_ceil(8)];
    if !n.is_multiple_of(8) {
        if let Some(last) = ones.last_mut() {
            *last = (1u8 << (n % 8)) - 1;
        }
    }
    append_bits(dst, dst_rows, &ones, n);
}

/// Appends offsets `src[1..]` rebased by `base` (`dst` and `src` both start
/// with their first row's start offset; both empty: a column left out).
pub fn append_offsets(dst: &mut Vec<i32>, src: &[i32], base: i32) {
    if let Some(rest) = src.get(1..) {
        dst.extend(rest.iter().map(|o| o + base));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(b: &[u8], n: usize) -> Vec<bool> {
        (0..n).map(|i| b[i / 8] & (1 << (i % 8)) != 0).collect()
    }

    #[test]
    fn bitmaps_join_at_every_shift() {
        let a: Vec<bool> = (0..23).map(|i| i % 3 == 0).collect();
        let b: Vec<bool> = (0..19).map(|i| i % 5 != 1).collect();
        for cut in 0..a.len() {
            let mut dst = vec![0u8; cut.div_ceil(8)];
            for (i, &v) in a[..cut].iter().enumerate() {
                dst[i / 8] |= u8::from(v) << (i % 8);
            }
            let mut src = vec![0u8; b.len().div_ceil(8)];
            for (i, &v) in b.iter().enumerate() {
                src[i / 8] |= u8::from(v) << (i % 8);
            }
            append_bits(&mut dst, cut, &src, b.len());
            let want: Vec<bool> = a[..cut].iter().chain(&b).copied().collect();
            assert_eq!(bits(&dst, want.len()), want, "cut at {cut}");
            let before = dst.len();
            append_ones(&mut dst, want.len(), 11);
            assert!(dst.len() >= before);
            let ones = bits(&dst, want.len() + 11);
            assert!(ones[want.len()..].iter().all(|&v| v));
            assert_eq!(ones[..want.len()], want[..]);
        }
    }
}
