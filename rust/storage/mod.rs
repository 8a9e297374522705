//! Files on disk: mapped data, the directory layout, the writer lock and
//! atomically replaced small files. `mapped.rs` (file mappings) and `wake.rs`
//! (the wake-up word's mapping and futex) are the only modules of the engine
//! allowed to use `unsafe`.

pub mod alloc;
pub mod frames;
pub mod fsutil;
pub mod layout;
pub mod lock;
pub mod mapped;
pub mod process;
pub mod wake;
