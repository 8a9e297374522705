//! Disk full: the writer runs on a small tmpfs mounted by the test.
//!
//! Phase 1 (a child process, so SIGBUS would be caught as a failure):
//! append until the file system is full. The append that cannot be stored
//! fails with an error naming ENOSPC (the next call in `Async` mode, the
//! append itself in `Sync` mode); every later append and `flush` fails with
//! `Error::Poisoned`; everything before stays readable and intact; no data
//! or index file is shorter than its header says (a file that could not be
//! preallocated is never mapped past its end) and no temporary file is left.
//! Phase 2 (after the test remounts the file system bigger): the queue
//! reopens, keeps every message phase 1 could read, and continues.
//!
//! The `chunk` variant uses 8 MiB files on a 1.6 MiB file system: a data
//! file gets its disk blocks in chunks ahead of the writer (the first 1 MiB
//! when it is created), so the disk fills at a chunk boundary in the middle
//! of a file, and the allocation of the next chunk must fail with ENOSPC
//! before the writer touches it (SIGBUS otherwise).
//!
//! Mounting needs root (it is here). Where `mount` fails, the test falls
//! back to an injected failure (RLIMIT_FSIZE below one data file: the first
//! preallocation fails with EFBIG) and prints that it did.

mod common;

use std::path::Path;
use std::process::Command;

use litemq::{Error, FlushMode, QueueBuilder, Record, Start};

const FILE_SIZE: u64 = 64 * 1024;

fn payload(seq: u64) -> Vec<u8> {
    let mut v = seq.to_le_bytes().to_vec();
    v.resize(700 + (seq % 300) as usize, (seq % 251) as u8);
    v
}

/// Files of the `chunk` variant: several 1 MiB chunks each.
const CHUNK_FILE_SIZE: u64 = 8 << 20;

fn file_size(variant: &str) -> u64 {
    if variant == "chunk" {
        CHUNK_FILE_SIZE
    } else {
        FILE_SIZE
    }
}

fn builder(path: &Path, variant: &str) -> QueueBuilder {
    let mode = if variant == "sync" {
        FlushMode::Sync
    } else {
        FlushMode::Async
    };
    let b = QueueBuilder::new(path)
        .file_size(file_size(variant))
        .index_interval(8)
        .flush_mode(mode);
    if variant == "keyed" {
        // Small key-index files, so data and index fill the disk together.
        b.key_index(litemq::KeyIndexConfig {
            slots: 64,
            items: 128,
        })
    } else {
        b
    }
}

fn is_space_error(e: &Error) -> bool {
    let s = e.to_string();
    s.contains("No space left")
        || s.contains("File too large")
        || s.contains("os error 28")
        || s.contains("os error 27")
}

/// Reads everything and checks it; returns the count.
fn read_all_checked(path: &Path, variant: &str) -> u64 {
    let q = builder(path, variant)
        .read_only(true)
        .open()
        .expect("read-only open after disk full");
    let mut t = q.tailer(Start::Beginning).unwrap();
    let mut n = 0;
    while let Some(m) = t.read_next().expect("every stored message reads back") {
        assert_eq!(m.seq, n);
        assert_eq!(m.payload, payload(n).as_slice(), "payload of {n}");
        n += 1;
    }
    n
}

fn check_files(dir: &Path, variant: &str) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            check_files(&p, variant);
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        // A key-index file that could not be preallocated leaves its
        // `.idx.tmp` behind until the next open removes it (reported).
        if !name.ends_with(".idx.tmp") {
            assert!(
                !name.ends_with(".tmp"),
                "temporary file left behind: {}",
                p.display()
            );
        }
        if name.ends_with(".data") {
            // While written, as long as its data and a chunk, in whole
            // pages, at most its full size (format 11: a file grows with
            // its data; a full disk stops the growth with an error, never
            // leaves a frame past the end); a sealed file is trimmed and
            // ends with its footer.
            let bytes = std::fs::read(&p).unwrap();
            let len = bytes.len() as u64;
            let sealed_and_trimmed = len < file_size(variant)
                && len.is_multiple_of(4096)
                && litemq::format::footer::Footer::decode(
                    &bytes[bytes.len() - litemq::format::footer::FOOTER_LEN..],
                )
                .is_ok();
            let active =
                len <= file_size(variant) && len.is_multiple_of(4096) && holds_its_frames(&bytes);
            assert!(
                active || sealed_and_trimmed,
                "{} is {len} bytes: neither an active file that holds its frames \
                 nor a trimmed sealed file",
                p.display()
            );
        }
    }
}

/// True when every frame of data file `bytes` lies inside it with room for
/// the end-of-file marker and the footer after the last (format 11: the
/// writer grows the file before it publishes a frame).
fn holds_its_frames(bytes: &[u8]) -> bool {
    use litemq::format::frame::{self, FrameAt, DATA_HEADER_LEN};
    let mut at = DATA_HEADER_LEN;
    loop {
        let Some(len) = frame::plain_len(bytes, at) else {
            return false;
        };
        match frame::decode(bytes, at, len) {
            Ok(FrameAt::Frame { next, .. }) => at = next,
            Ok(_) => return at + 8 + litemq::format::footer::FOOTER_LEN <= bytes.len(),
            Err(_) => return false,
        }
    }
}

const DIR: &str = "LITEMQ_DISK_FULL_DIR";
const VARIANT: &str = "LITEMQ_DISK_FULL_VARIANT";
const PHASE: &str = "LITEMQ_DISK_FULL_PHASE";
const RLIMIT: &str = "LITEMQ_DISK_FULL_RLIMIT";

#[test]
#[ignore = "child-process entry point, run by the disk_full tests"]
fn disk_full_child() {
    let dir = std::path::PathBuf::from(std::env::var(DIR).unwrap());
    let variant = std::env::var(VARIANT).unwrap();
    let phase = std::env::var(PHASE).unwrap();
    if let Ok(limit) = std::env::var(RLIMIT) {
        #[expect(
            unsafe_code,
            reason = "setrlimit and signal have no safe wrapper in std"
        )]
        // SAFETY: plain libc calls on this process only.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let l: libc::rlim_t = limit.parse().unwrap();
            let r = libc::rlimit {
                rlim_cur: l,
                rlim_max: libc::RLIM_INFINITY,
            };
            assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &r), 0);
        }
    }
    if phase == "1" {
        let q = builder(&dir, &variant)
            .open()
            .expect("open on the small file system");
        let app = q.appender().unwrap();
        let keyed = variant == "keyed";
        let mut last_ok = None;
        let mut failure = None;
        for seq in 0..100_000u64 {
            let p = payload(seq);
            let k = format!("key{}", seq % 7);
            let r = if keyed {
                app.append_record(&Record {
                    key: Some(k.as_bytes()),
                    ..Record::new(&p)
                })
            } else {
                app.append(&p)
            };
            match r {
                Ok(s) => {
                    assert_eq!(s, seq);
                    last_ok = Some(seq);
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
            if seq % 16 == 0 && variant != "sync" {
                if let Err(e) = app.flush() {
                    failure = Some(e);
                    break;
                }
            }
        }
        let failure = failure.expect("the file system must fill up");
        println!("\n@@FAILURE {failure}");
        match &failure {
            Error::Poisoned { cause } => {
                assert!(is_space_error(cause), "cause names the full disk: {cause}")
            }
            other => assert!(is_space_error(other), "a clear error: {other}"),
        }
        // Poisoned from now on: appends and flushes fail, nothing pretends.
        assert!(
            matches!(app.append(b"more"), Err(Error::Poisoned { .. })),
            "append after failure"
        );
        assert!(
            matches!(app.flush(), Err(Error::Poisoned { .. })),
            "flush after failure"
        );
        // Everything the writer stored reads back (in this process too).
        let mut t = q.tailer(Start::Beginning).unwrap();
        let mut n = 0;
        while let Some(m) = t.read_next().unwrap() {
            assert_eq!(m.payload, payload(n).as_slice());
            n += 1;
        }
        if variant == "sync" {
            // Each sync append that returned was stored and synced.
            assert!(
                n >= last_ok.map_or(0, |s| s + 1),
                "{n} readable, {last_ok:?} acknowledged"
            );
        }
        let close = q.close();
        println!("\n@@CLOSE {close:?}");
        drop(q);
        check_files(&dir, &variant);
        assert_eq!(read_all_checked(&dir, &variant), n);
        println!("\n@@STORED {n}");
    } else {
        let stored: u64 = std::env::var("LITEMQ_DISK_FULL_STORED")
            .unwrap()
            .parse()
            .unwrap();
        let q = builder(&dir, &variant)
            .open()
            .expect("reopen after space was freed");
        assert_eq!(q.next_seq(), stored, "reopen keeps what was stored");
        let app = q.appender().unwrap();
        for seq in stored..stored + 50 {
            assert_eq!(
                app.append(&payload(seq)).unwrap(),
                seq,
                "continues the sequence"
            );
        }
        app.flush().unwrap();
        q.close().unwrap();
        assert_eq!(read_all_checked(&dir, &variant), stored + 50);
        check_files(&dir, &variant);
        println!("\n@@CONTINUED {}", stored + 50);
    }
}

fn run_child(dir: &Path, variant: &str, phase: &str, extra: &[(&str, String)]) -> String {
    let mut cmd = common::child_test("disk_full_child");
    cmd.env(DIR, dir).env(VARIANT, variant).env(PHASE, phase);
    for (k, v) in extra {
        cmd.env(k, v);
    }
    let out = common::output_of_child(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    {
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.signal().is_none(),
            "{variant} phase {phase}: the writer died of signal {:?} (SIGBUS=7): {stdout}",
            out.status.signal()
        );
    }
    assert!(
        out.status.success(),
        "{variant} phase {phase} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn tag(out: &str, tag: &str) -> String {
    let at = out
        .find(&format!("@@{tag} "))
        .unwrap_or_else(|| panic!("no {tag} in {out}"));
    out[at + tag.len() + 3..]
        .lines()
        .next()
        .unwrap()
        .to_string()
}

fn mount_tmpfs(dir: &Path, size: &str) -> bool {
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success())
}

fn run_variant(variant: &str) {
    let outer = tempfile::tempdir().unwrap();
    let mnt = outer.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let size = if variant == "chunk" { "1600k" } else { "400k" };
    if mount_tmpfs(&mnt, size) {
        struct Unmount<'a>(&'a Path);
        impl Drop for Unmount<'_> {
            fn drop(&mut self) {
                let _ = Command::new("umount").arg(self.0).status();
            }
        }
        let _guard = Unmount(&mnt);
        let q = mnt.join("q");
        let out = run_child(&q, variant, "1", &[]);
        let stored: u64 = tag(&out, "STORED").parse().unwrap();
        let failure = tag(&out, "FAILURE");
        println!("disk full ({variant}, {size} tmpfs): {stored} messages stored; failure: {failure}; close: {}", tag(&out, "CLOSE"));
        if variant == "chunk" {
            // The disk filled inside the first file, at the allocation of a
            // next chunk of the data file or of one of its indexes (sparse,
            // dense: each grows by chunks too, so which one meets the full
            // disk first depends on timing): not when a file was created,
            // which used to reserve all 8 MiB at once and store nothing.
            let first_file = ["-0001.data", "-0001.index", "-0001.offsets"];
            assert!(
                failure.contains(" allocate /") && first_file.iter().any(|f| failure.contains(f)),
                "the next chunk's allocation fails: {failure}"
            );
            assert!(
                stored > 500,
                "most of the first 1 MiB chunk was used: {stored}"
            );
        }
        assert!(
            stored > 100,
            "a few files' worth fit before the disk filled"
        );
        // Free space: grow the file system.
        let ok = Command::new("mount")
            .args(["-o", "remount,size=4m"])
            .arg(&mnt)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount bigger");
        let out = run_child(
            &q,
            variant,
            "2",
            &[("LITEMQ_DISK_FULL_STORED", stored.to_string())],
        );
        println!(
            "disk full ({variant}): after freeing space: {}",
            tag(&out, "CONTINUED")
        );
    } else {
        println!(
            "disk full ({variant}): mount -t tmpfs failed (not root?): FALLING BACK to an injected \
             failure, RLIMIT_FSIZE below one data file"
        );
        let q = mnt.join("q");
        let out = run_child(&q, variant, "1", &[(RLIMIT, (FILE_SIZE / 2).to_string())]);
        let stored: u64 = tag(&out, "STORED").parse().unwrap();
        let out = run_child(
            &q,
            variant,
            "2",
            &[("LITEMQ_DISK_FULL_STORED", stored.to_string())],
        );
        println!(
            "disk full ({variant}, injected): {stored} stored, then {}",
            tag(&out, "CONTINUED")
        );
    }
}

#[test]
fn disk_full_async_mode() {
    run_variant("async");
}

#[test]
fn disk_full_sync_mode() {
    run_variant("sync");
}

/// The disk fills in the middle of a data file, where its next chunk of disk
/// blocks cannot be allocated.
#[test]
fn disk_full_at_a_chunk_boundary() {
    run_variant("chunk");
}

/// Keyed messages also write the key index, whose files are sparse: a full
/// disk must fail the append, not kill the process with SIGBUS.
#[test]
fn disk_full_with_key_index() {
    run_variant("keyed");
}

/// Fills the file system of `dir` with `dir/filler` until it is full.
fn fill_disk(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("filler"))
        .unwrap();
    let block = vec![0x55u8; 4096];
    while f.write_all(&block).is_ok() {}
    // Whatever a partial write left is full too.
}

const WQ_WINDOW: u64 = 1 << 13;

#[test]
#[ignore = "child-process entry point, run by a_work_queue_on_a_full_disk_fails_with_enospc"]
fn disk_full_work_queue_child() {
    use litemq::format::work_queue::{encode_header, file_len, WqHeader};
    use litemq::WorkQueueOptions;
    let dir = std::path::PathBuf::from(std::env::var(DIR).unwrap());
    let q = QueueBuilder::new(dir.join("q"))
        .file_size(FILE_SIZE)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for seq in 0..3 {
        app.append(&payload(seq)).unwrap();
    }
    app.flush().unwrap();
    let options = || WorkQueueOptions {
        window: WQ_WINDOW,
        ..WorkQueueOptions::default()
    };
    let space = |e: &Error, what: &str| {
        assert!(is_space_error(e), "{what}: {e}");
        assert!(e.to_string().contains(".wq"), "{what} names the file: {e}");
    };
    // A state file as litemq wrote it before it allocated them: the header,
    // then a hole where the slots are.
    let wq_dir = dir.join("q").join("workqueues");
    std::fs::create_dir_all(&wq_dir).unwrap();
    let path = wq_dir.join("o4.wq"); // base32 of "w"
    let header = WqHeader {
        version: 1,
        window: WQ_WINDOW,
        epoch_us: 1_700_000_000_000_000,
        group_id: 0,
        name: "w".into(),
    };
    std::fs::write(&path, encode_header(&header, 0)).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(file_len(WQ_WINDOW))
        .unwrap();
    fill_disk(&dir);
    // The slots get their blocks before anything is written into them:
    // refused with ENOSPC at open, not SIGBUS at the first lease.
    match q.work_queue("w", options()) {
        Err(e) => space(&e, "opening a group whose slots are a hole"),
        Ok(wq) => {
            let job = wq.get(std::time::Duration::ZERO, &mut || false);
            panic!("opened on a full disk; then get gave {job:?}");
        }
    }
    // A new group: refused whole, nothing left behind.
    match q.work_queue("fresh", options()) {
        Err(e) => space(&e, "creating a group"),
        Ok(_) => panic!("created a group on a full disk"),
    }
    let left: Vec<_> = std::fs::read_dir(&wq_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["o4.wq"], "no temporary, no partial state file");
    // Space again: both open and work.
    std::fs::remove_file(dir.join("filler")).unwrap();
    for group in ["w", "fresh"] {
        let wq = q.work_queue(group, options()).unwrap();
        let job = wq
            .get(std::time::Duration::ZERO, &mut || false)
            .unwrap()
            .unwrap();
        assert_eq!(job.ticket.seq, 0, "{group}");
        assert!(wq.ack(job.ticket).unwrap());
    }
    println!("\n@@WQ ok");
}

/// A work queue's state file is mapped and written through the mapping: a
/// page of it without disk blocks (a hole) on a full disk would kill the
/// worker with SIGBUS at its first write.
#[test]
fn a_work_queue_on_a_full_disk_fails_with_enospc() {
    let outer = tempfile::tempdir().unwrap();
    let mnt = outer.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    if !mount_tmpfs(&mnt, "1m") {
        println!("work queue on a full disk: mount -t tmpfs failed (not root?): SKIPPED");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(self.0).status();
        }
    }
    let _guard = Unmount(&mnt);
    let mut cmd = common::child_test("disk_full_work_queue_child");
    cmd.env(DIR, &mnt);
    let out = common::output_of_child(&mut cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    {
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.signal().is_none(),
            "the worker died of signal {:?} (SIGBUS=7): {stdout}",
            out.status.signal()
        );
    }
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("@@WQ ok"), "{stdout}");
}
