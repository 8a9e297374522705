//! The write path: [`appender::Appender`] on callers' threads, a bounded
//! channel of [`command::Command`]s, and the [`io_thread::IoThread`] that
//! writes frames into the [`active::ActiveFile`].

pub mod active;
pub mod append_lock;
pub mod appender;
pub mod command;
pub mod derived;
pub mod handoff;
pub mod io_thread;
pub mod options;
pub mod prefault;
pub mod shared;
