//! Column memory kept for the next read.
//!
//! A `read_arrow` of a million 100-byte messages fills about 120 MB of new
//! columns. Fresh memory costs more than filling it: the kernel zeroes every
//! page on its first touch (a third of the whole read in `perf`, in
//! `clear_page_erms`), and an allocation this large is a fresh `mmap` every
//! time (glibc serves at most 32 MiB from its heap). So when pyarrow lets go
//! of a large column the engine built, the column's memory goes on a shelf
//! here instead of back to the system, and the next read's columns are
//! taken from the shelf: their pages are mapped already and need no
//! zeroing, as they would not be under an allocator that keeps memory.
//!
//! Bounds: only buffers of at least [`SHELVE_MIN`] are kept, at most
//! [`shelf_max`] bytes in all (the oldest go first), and [`release`]
//! (Python: `litemq.release_memory()`) frees them all. The shelf is not
//! given back to the kernel on its own: `MADV_FREE` would let the kernel
//! take it when it needs memory, but measured, reads from such a shelf were
//! no faster than from fresh memory (docs/PERFORMANCE.md).
//!
//! The lock is only ever tried: a buffer is freed, or new memory taken,
//! rather than wait for another thread (or, after a `fork`, for a thread
//! that is gone).

use std::collections::VecDeque;
use std::mem::size_of;
use std::sync::Mutex;

/// Buffers smaller than this are freed as usual (the allocator reuses them).
pub const SHELVE_MIN: usize = 1 << 20;
/// The most bytes of capacity kept on the shelf when the machine's memory
/// is large enough ([`shelf_max`]).
pub const SHELF_MAX: usize = 1 << 30;
/// The environment variable that sets the most MiB kept (0: none).
pub const SHELF_ENV: &str = "LITEMQ_KEPT_MEMORY_MIB";

/// The most bytes the shelf keeps: `LITEMQ_KEPT_MEMORY_MIB` when set, else
/// a sixteenth of the machine's memory, at most [`SHELF_MAX`] (1 GiB from
/// 16 GiB of memory; 256 MiB, the bound before, from 4 GiB). A read of 10
/// million typed rows builds 580 MB of columns: with 256 MiB kept, every
/// read took the rest fresh and ran at 0.53x Parquet's rate, with 1 GiB at
/// 0.93x (docs/PERFORMANCE.md). Read once per process.
pub fn shelf_max() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        let total = std::fs::read_to_string("/proc/meminfo").ok();
        shelf_limit(std::env::var(SHELF_ENV).ok().as_deref(), total.as_deref())
    })
}

/// [`shelf_max`] from the variable's value and `/proc/meminfo`'s text
/// (`MemTotal:  N kB`); without either, 256 MiB.
fn shelf_limit(env: Option<&str>, meminfo: Option<&str>) -> usize {
    if let Some(mib) = env.and_then(|v| v.trim().parse::<usize>().ok()) {
        return mib.saturating_mul(1 << 20);
    }
    let total_kib = meminfo.and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
        line.split_whitespace().nth(1)?.parse::<usize>().ok()
    });
    match total_kib {
        Some(kib) => (kib.saturating_mul(1024) / 16).min(SHELF_MAX),
        None => 256 << 20,
    }
}

/// A shelved buffer, of one of the column element types.
#[derive(Debug)]
pub enum Spare {
    /// A byte column (data, validity).
    U8(Vec<u8>),
    /// An offsets column.
    I32(Vec<i32>),
    /// A 64-bit integer column (sequences, timestamps).
    I64(Vec<i64>),
}

impl Spare {
    fn bytes(&self) -> usize {
        match self {
            Spare::U8(v) => bytes_of(v),
            Spare::I32(v) => bytes_of(v),
            Spare::I64(v) => bytes_of(v),
        }
    }
}

fn bytes_of<T>(v: &Vec<T>) -> usize {
    v.capacity() * size_of::<T>()
}

/// Spare buffers, oldest first, and the bytes of capacity they hold.
struct Shelf {
    spares: VecDeque<Spare>,
    held: usize,
}

static SHELF: Mutex<Shelf> = Mutex::new(Shelf {
    spares: VecDeque::new(),
    held: 0,
});

/// A column element type the shelf keeps buffers of.
pub trait Element: Copy + Sized {
    /// `v` as a shelved buffer.
    fn wrap(v: Vec<Self>) -> Spare;
    /// The buffer, when `s` holds this element type.
    fn unwrap(s: &Spare) -> Option<&Vec<Self>>;
    /// The buffer taken out, when `s` holds this element type.
    fn into_vec(s: Spare) -> Option<Vec<Self>>;
}

macro_rules! element {
    ($t:ty, $variant:ident) => {
        impl Element for $t {
            fn wrap(v: Vec<$t>) -> Spare {
                Spare::$variant(v)
            }
            fn unwrap(s: &Spare) -> Option<&Vec<$t>> {
                match s {
                    Spare::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn into_vec(s: Spare) -> Option<Vec<$t>> {
                match s {
                    Spare::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}

element!(u8, U8);
element!(i32, I32);
element!(i64, I64);

/// Shelves `v`'s memory for a later [`take`] when it is large enough to be
/// worth keeping; otherwise frees it.
pub fn give<T: Element>(mut v: Vec<T>) {
    let size = bytes_of(&v);
    let max = shelf_max();
    if !(SHELVE_MIN..=max).contains(&size) {
        return;
    }
    v.clear();
    let Ok(mut shelf) = SHELF.try_lock() else {
        return;
    };
    while shelf.held + size > max {
        let Some(oldest) = shelf.spares.pop_front() else {
            break;
        };
        shelf.held -= oldest.bytes();
    }
    shelf.held += size;
    shelf.spares.push_back(T::wrap(v));
}

/// Makes room in `v` for `additional` more elements, from the shelf when
/// `v` holds few elements (they are copied over) and a shelved buffer is
/// large enough; `false` when the shelf had none (the caller reserves).
pub fn take<T: Element>(v: &mut Vec<T>, additional: usize) -> bool {
    const FEW: usize = 64;
    let need = v.len().saturating_add(additional);
    if v.len() > FEW || need.saturating_mul(size_of::<T>()) < SHELVE_MIN {
        return false;
    }
    let Ok(mut shelf) = SHELF.try_lock() else {
        return false;
    };
    // The smallest buffer that fits.
    let Some((i, _)) = shelf
        .spares
        .iter()
        .enumerate()
        .filter_map(|(i, s)| T::unwrap(s).map(|b| (i, b.capacity())))
        .filter(|&(_, capacity)| capacity >= need)
        .min_by_key(|&(_, capacity)| capacity)
    else {
        return false;
    };
    let Some(mut spare) = shelf.spares.remove(i).and_then(T::into_vec) else {
        return false;
    };
    shelf.held -= bytes_of(&spare);
    drop(shelf);
    spare.extend_from_slice(v);
    *v = spare;
    true
}

/// Makes room for `additional` more elements in column `v`: memory a
/// dropped result left on the shelf when there is some ([`take`]), else
/// new memory. What every column builder reserves with (untyped and
/// typed reads alike).
pub fn reserve<T: Element>(v: &mut Vec<T>, additional: usize) {
    if v.capacity() - v.len() >= additional || take(v, additional) {
        return;
    }
    v.reserve(additional);
}

/// Frees every shelved buffer; returns the bytes of capacity freed.
pub fn release() -> usize {
    let Ok(mut shelf) = SHELF.lock() else {
        return 0;
    };
    shelf.spares.clear();
    std::mem::take(&mut shelf.held)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_the_variable_or_a_sixteenth_of_memory_up_to_a_gib() {
        let mem = |gib: usize| format!("MemTotal:       {} kB\nMemFree: 1 kB\n", gib << 20);
        assert_eq!(shelf_limit(None, Some(&mem(4))), 256 << 20);
        assert_eq!(shelf_limit(None, Some(&mem(8))), 512 << 20);
        assert_eq!(shelf_limit(None, Some(&mem(24))), SHELF_MAX);
        assert_eq!(shelf_limit(Some("64"), Some(&mem(24))), 64 << 20);
        assert_eq!(shelf_limit(Some("0"), Some(&mem(24))), 0);
        // Unreadable: the variable ignored, the old bound.
        assert_eq!(shelf_limit(Some("lots"), None), 256 << 20);
        assert_eq!(shelf_limit(None, Some("no total here")), 256 << 20);
    }

    // One test: the shelf is one per process, and tests run in parallel.
    #[test]
    fn shelved_memory_is_reused_kept_within_bounds_and_released() {
        release();
        // Small buffers are freed as usual.
        give(vec![1u8; 1000]);
        assert_eq!(release(), 0);

        // A large one is kept and handed to the next column that fits,
        // with the few elements that column held copied over.
        let big: Vec<i64> = Vec::with_capacity(SHELVE_MIN);
        let at = big.as_ptr();
        give(big);
        let mut offsets = vec![0i64, 7];
        assert!(take(&mut offsets, SHELVE_MIN / 2));
        assert_eq!(offsets, [0, 7]);
        assert_eq!(offsets.as_ptr(), at);
        // Nothing left that fits.
        let mut other: Vec<i64> = Vec::new();
        assert!(!take(&mut other, SHELVE_MIN));

        // Never more than shelf_max(): the oldest go first.
        let each = shelf_max() / 3 + 1;
        for _ in 0..3 {
            give(Vec::<u8>::with_capacity(each));
        }
        assert_eq!(release(), 2 * each);
        assert_eq!(release(), 0);
    }
}
