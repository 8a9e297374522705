//! Files on disk: mapped data, the directory layout, the writer lock and
//! atomically replaced small files. `mapped.rs` is the only module of the
//! engine allowed to use `unsafe`.

pub mod alloc;
pub mod fsutil;
pub mod layout;
pub mod lock;
pub mod mapped;
