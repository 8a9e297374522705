//! The prefault thread of an idle writer sleeps: a queue open for writing
//! and not written to costs no steady stream of wake-ups (it once woke every
//! 500 µs, 2,000 times a second, for as long as the queue was open). Its own
//! test binary, so that the process has one prefault thread to look at.

use std::time::Duration;

use litemq::QueueBuilder;

/// Context switches of the thread named `name` in this process (Linux:
/// `/proc/self/task/*/status`), or None when there is no such thread.
fn switches(name: &str) -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = task.ok()?.path();
        if std::fs::read_to_string(dir.join("comm")).ok()?.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let count = |key: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        return Some(count("voluntary_ctxt_switches:") + count("nonvoluntary_ctxt_switches:"));
    }
    None
}

#[test]
fn an_idle_writers_prefault_thread_sleeps() {
    for file_size in [64 << 10, 32 << 20] {
        let dir = tempfile::tempdir().unwrap();
        let q = QueueBuilder::new(dir.path())
            .file_size(file_size)
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        app.append(b"one message creates the first file").unwrap();
        app.flush().unwrap();
        // Let it populate what it keeps ahead, then count a second of idling.
        std::thread::sleep(Duration::from_millis(300));
        let before = switches("litemq-prefault").expect("a prefault thread runs");
        std::thread::sleep(Duration::from_secs(1));
        let woke = switches("litemq-prefault").unwrap() - before;
        assert!(
            woke <= 30,
            "file_size {file_size}: the idle prefault thread woke {woke} times in a second"
        );
        // It still keeps up once written to: a burst of appends reads back whole.
        let body = vec![7u8; 1000];
        for _ in 0..5000 {
            app.append(&body).unwrap();
        }
        app.flush().unwrap();
        assert_eq!(q.next_seq(), 5001);
        drop(app);
        q.close().unwrap();
    }
}
