//! Indexes over the data files: the sparse index (sequence and time to file
//! offset, one per data file) and the key index (message key to position).

pub mod dense;
mod file;
pub mod key_index;
pub mod sparse;
pub mod topics;
