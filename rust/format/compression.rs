//! Payload compression (format 7): the codecs a record may name, and the
//! rule for when a compressed payload is worth storing.
//!
//! A compressed record carries `codec:u8 | raw_len:u32` after its other
//! optional fields (flag [`super::record::FLAG_COMPRESSED`]), then the
//! compressed payload. Decoding is bounded: `raw_len` above the reader's
//! limit, a stream that inflates past `raw_len`, or one that stops short of
//! it is an error, so a decompression bomb costs at most `limit` bytes of
//! memory, never an out-of-memory kill.

use std::cell::RefCell;
use std::io::{Read, Write};

/// Default bound on one decompressed payload: 100 MiB (LedgerQ's
/// `MaxDecompressedSize`).
pub const DEFAULT_MAX_DECOMPRESSED: usize = 100 << 20;
/// Default smallest payload worth trying to compress.
pub const DEFAULT_MIN_SIZE: usize = 64;
/// Bytes the compressed form adds to a record: codec and raw length.
pub const COMPRESSION_FIELD_LEN: usize = 5;

/// A compression codec, as its byte in a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Codec {
    /// Zstandard (one frame, content size written).
    Zstd = 1,
    /// LZ4 block format, without a size prefix (the record has `raw_len`).
    Lz4 = 2,
    /// gzip (RFC 1952): one member.
    Gzip = 3,
}

impl TryFrom<u8> for Codec {
    type Error = &'static str;

    fn try_from(b: u8) -> Result<Codec, &'static str> {
        match b {
            1 => Ok(Codec::Zstd),
            2 => Ok(Codec::Lz4),
            3 => Ok(Codec::Gzip),
            _ => Err("unknown compression codec"),
        }
    }
}

impl Codec {
    /// Every codec, in byte order.
    pub const ALL: [Codec; 3] = [Codec::Zstd, Codec::Lz4, Codec::Gzip];

    /// The codec's name: `"zstd"`, `"lz4"` or `"gzip"`.
    pub fn name(self) -> &'static str {
        match self {
            Codec::Zstd => "zstd",
            Codec::Lz4 => "lz4",
            Codec::Gzip => "gzip",
        }
    }

    /// The codec called `name`.
    pub fn from_name(name: &str) -> Option<Codec> {
        Codec::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The level used when none is given: zstd 3, gzip 6 (lz4 has none).
    pub fn default_level(self) -> i32 {
        match self {
            Codec::Zstd => 3,
            Codec::Lz4 => 0,
            Codec::Gzip => 6,
        }
    }

    /// Checks a level for this codec: zstd -7..=22, gzip 0..=9, lz4 only 0.
    pub fn check_level(self, level: i32) -> Result<(), String> {
        let (lo, hi) = match self {
            Codec::Zstd => (-7, 22),
            Codec::Lz4 => (0, 0),
            Codec::Gzip => (0, 9),
        };
        if (lo..=hi).contains(&level) {
            Ok(())
        } else if self == Codec::Lz4 {
            Err("lz4 has no compression levels: give none".into())
        } else {
            Err(format!(
                "{} compression level {level} must be between {lo} and {hi}",
                self.name()
            ))
        }
    }
}

/// How an appender compresses payloads: codec, level and the smallest
/// payload it tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compression {
    /// The codec.
    pub codec: Codec,
    /// Its level (see [`Codec::check_level`]).
    pub level: i32,
    /// Payloads shorter than this are stored as they are.
    pub min_size: usize,
}

impl Compression {
    /// `codec` at its default level, trying payloads of [`DEFAULT_MIN_SIZE`]
    /// bytes or more.
    pub fn new(codec: Codec) -> Compression {
        Compression {
            codec,
            level: codec.default_level(),
            min_size: DEFAULT_MIN_SIZE,
        }
    }

    /// Checks the level.
    pub fn validate(&self) -> Result<(), String> {
        self.codec.check_level(self.level)
    }
}

/// Compresses `data` with `codec` at `level`.
pub fn compress(codec: Codec, level: i32, data: &[u8]) -> Vec<u8> {
    match codec {
        // Compressing into memory fails only on a bad level, which
        // `Codec::check_level` rules out; store raw (empty means "not
        // worth it" to the caller) rather than panic if it ever does.
        Codec::Zstd => zstd_compress(data, level).unwrap_or_default(),
        Codec::Lz4 => lz4_flex::block::compress(data),
        Codec::Gzip => {
            let mut e = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2 + 32),
                flate2::Compression::new(level.clamp(0, 9) as u32),
            );
            e.write_all(data)
                .and_then(|()| e.finish())
                .unwrap_or_default()
        }
    }
}

thread_local! {
    /// This thread's zstd compression context and the level it is set to.
    /// Creating a context costs more than compressing a 200-byte payload
    /// (an append of JSON events ran 20 times slower with one per call).
    static ZSTD_COMPRESSOR: RefCell<Option<(i32, zstd::bulk::Compressor<'static>)>> =
        const { RefCell::new(None) };
    /// This thread's zstd decompression context.
    static ZSTD_DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { RefCell::new(None) };
}

/// Compresses with this thread's zstd context (made or re-levelled as needed).
fn zstd_compress(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    ZSTD_COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        match slot.as_mut() {
            Some((l, c)) if *l == level => c.compress(data),
            _ => {
                let mut c = zstd::bulk::Compressor::new(level)?;
                let out = c.compress(data);
                *slot = Some((level, c));
                out
            }
        }
    })
}

/// Decompresses into at most `capacity` bytes with this thread's context.
fn zstd_decompress(data: &[u8], capacity: usize) -> std::io::Result<Vec<u8>> {
    ZSTD_DECOMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new()?);
        }
        slot.as_mut().expect("set above").decompress(data, capacity)
    })
}

/// LedgerQ's `ShouldCompress`: the payload is at least `min_size` bytes and
/// its stored form (`stored_len`, codec field included) saves at least 5 %.
pub fn should_compress(original: usize, stored_len: usize, min_size: usize) -> bool {
    original >= min_size && stored_len > 0 && stored_len.saturating_mul(20) <= original * 19
}

/// Decompresses `data` (compressed with `codec`) into exactly `raw_len`
/// bytes, refusing `raw_len` above `limit`. The error says what is wrong.
pub fn decompress(
    codec: Codec,
    data: &[u8],
    raw_len: usize,
    limit: usize,
) -> Result<Vec<u8>, String> {
    if raw_len > limit {
        return Err(format!(
            "compressed payload declares {raw_len} bytes, above the decompression limit of \
             {limit} bytes"
        ));
    }
    let short = |got: usize| {
        format!(
            "{} payload inflates to {got} bytes, not the {raw_len} its record declares",
            codec.name()
        )
    };
    let out = match codec {
        Codec::Zstd => {
            // `capacity` bounds the output: a frame that inflates past it
            // is an error, whatever its header claims.
            zstd_decompress(data, raw_len).map_err(|e| {
                format!("zstd payload does not decompress into {raw_len} bytes: {e}")
            })?
        }
        Codec::Lz4 => {
            // Into `raw_len` bytes of capacity, which bound the output (a
            // block that inflates past them is an error), not zeroed first:
            // zeroing each block cost as much as a tenth of a typed read.
            lz4_flex::block::decompress(data, raw_len)
                .map_err(|e| format!("lz4 payload does not decompress into {raw_len} bytes: {e}"))?
        }
        Codec::Gzip => {
            let mut v = Vec::with_capacity(raw_len);
            // One byte past `raw_len` tells a longer stream from an exact one.
            let mut d = flate2::read::GzDecoder::new(data).take(raw_len as u64 + 1);
            d.read_to_end(&mut v)
                .map_err(|e| format!("gzip payload does not decompress: {e}"))?;
            v
        }
    };
    if out.len() != raw_len {
        return Err(short(out.len()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        (0..4000u32)
            .flat_map(|i| format!("{{\"id\":{i},\"kind\":\"click\"}}").into_bytes())
            .collect()
    }

    #[test]
    fn every_codec_round_trips_and_names_itself() {
        let data = sample();
        for codec in Codec::ALL {
            let packed = compress(codec, codec.default_level(), &data);
            assert!(packed.len() < data.len() / 3, "{codec:?}");
            let back = decompress(codec, &packed, data.len(), DEFAULT_MAX_DECOMPRESSED).unwrap();
            assert_eq!(back, data);
            assert_eq!(Codec::try_from(codec as u8), Ok(codec));
            assert_eq!(Codec::from_name(codec.name()), Some(codec));
        }
        assert!(Codec::try_from(0).is_err() && Codec::try_from(4).is_err());
    }

    #[test]
    fn a_bomb_or_a_wrong_length_is_an_error_not_an_allocation() {
        let zeros = vec![0u8; 10 << 20];
        for codec in Codec::ALL {
            let packed = compress(codec, codec.default_level(), &zeros);
            // Declared above the limit: refused before any allocation.
            let e = decompress(codec, &packed, zeros.len(), 1 << 20).unwrap_err();
            assert!(e.contains("decompression limit"), "{e}");
            // Declared small, inflating further: stops at the declared size.
            assert!(
                decompress(codec, &packed, 1000, 1 << 30).is_err(),
                "{codec:?}"
            );
            // Declared larger than it is.
            assert!(
                decompress(codec, &packed, zeros.len() + 1, 1 << 30).is_err(),
                "{codec:?}"
            );
            // Garbage.
            assert!(
                decompress(codec, &[1, 2, 3, 4, 5], 100, 1 << 30).is_err(),
                "{codec:?}"
            );
        }
    }

    #[test]
    fn the_five_percent_rule() {
        assert!(should_compress(100, 95, 10));
        assert!(!should_compress(100, 96, 10));
        assert!(!should_compress(9, 1, 10));
        assert!(!should_compress(100, 0, 10));
    }

    #[test]
    fn levels_are_checked_per_codec() {
        assert!(Codec::Zstd.check_level(22).is_ok() && Codec::Zstd.check_level(23).is_err());
        assert!(Codec::Gzip.check_level(9).is_ok() && Codec::Gzip.check_level(10).is_err());
        assert!(Codec::Lz4.check_level(0).is_ok() && Codec::Lz4.check_level(1).is_err());
    }
}
