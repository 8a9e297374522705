//! Reading a range of sequences on several threads: one part per thread,
//! joined in sequence order into what a serial read returns. Used by the
//! columnar reads ([`super::columns`]) and the typed ones ([`super::typed`]).

use crate::error::Result;

/// Reads each of `ranges` (adjacent, ascending `(lo, hi)`) with `read` on a
/// thread of its own (the first on the calling thread; `read`'s third
/// argument says which), and joins the parts in order with `append`, as a
/// serial read over them would: the error of the earliest part that failed
/// after every part before it was read whole; the result ends after a part
/// that stopped short of its range (its `next_seq` before `hi`) or that
/// `append` refused (it keeps what it had). `None` when `ranges` is empty.
pub(crate) fn read_ranges<B: Send>(
    ranges: &[(u64, u64)],
    read: &(dyn Fn(u64, u64, bool) -> Result<B> + Sync),
    next_seq: fn(&B) -> u64,
    append: &mut dyn FnMut(&mut B, B) -> bool,
) -> Result<Option<B>> {
    let Some(&(first_lo, first_hi)) = ranges.first() else {
        return Ok(None);
    };
    let results: Vec<Result<B>> = std::thread::scope(|s| {
        let handles: Vec<_> = ranges[1..]
            .iter()
            .map(|&(lo, hi)| s.spawn(move || read(lo, hi, false)))
            .collect();
        let mut out = vec![read(first_lo, first_hi, true)];
        for h in handles {
            out.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        out
    });
    let mut joined: Option<B> = None;
    for (r, &(_, hi)) in results.into_iter().zip(ranges) {
        let part = r?;
        let whole = next_seq(&part) >= hi;
        match joined.as_mut() {
            None => joined = Some(part),
            Some(b) => {
                if !append(b, part) {
                    break;
                }
            }
        }
        if !whole {
            break;
        }
    }
    Ok(joined)
}
