"""The ``litemq`` command: look into queues from a shell.

    litemq info PATH                      files, sizes, sequence and time range, writer,
                                          a typed queue's schema and its versions
    litemq append PATH [--input lines|json|raw] [--key K] [--topic T] [--header N=V]...
                                          messages from stdin, as the writer
                                          (litemq/cli/console.py)
    litemq dump PATH [--from SEQ] [--limit N] [--topic T] [--tag TAG]... [--skip-damaged]
                [--format text|json|hex]
    litemq tail [-f] [-n N] [--since 10m|T] [--name NAME] [--topic T] [--tag TAG]... PATH
                                          the last messages (of a topic); -f keeps following;
                                          --since: all written since; --name: as a named
                                          tailer, committing each message printed
    litemq topics PATH [--format text|json]
                                          topic streams: messages, first and last sequence
    litemq verify PATH                    check every frame up to the tail seen at the start,
                                          and every secondary index file;
                                          exit 1 if any is bad or unreachable
    litemq get PATH SEQ                   one message
    litemq find PATH KEY [--start T] [--end T] [--limit N]
    litemq reindex PATH                   rebuild the key index, with a progress bar
                                          (takes the writer lock: not beside a writer)
    litemq consumers PATH [--format text|json]
                                          named tailers: position, lag, last commit
    litemq consumers PATH reset NAME --to SEQ|TIME|earliest|latest
                                          move (and commit) a named tailer's position
    litemq consumers PATH delete NAME     forget a named tailer
    litemq retain PATH [--max-age 7d] [--max-bytes 10G] [--max-files N] [--protect-unconsumed]
                                          delete old data files now (beside a live writer)
    litemq wq PATH [stats] [NAME] [--format text|json]
                                          work queues: pending, in flight, acked, dead, oldest age
    litemq read-commitlog FILE [--format text|json]
                                          a LiteMQ broker's commit-log file, record by record
    litemq import-litemq STORE QUEUE      a LiteMQ broker store into a queue (appends)
    litemq export-litemq QUEUE STORE      a queue as a new LiteMQ broker store
                                          (these three: litemq/cli/litemq_store.py)
    litemq import-ledgerq DIR QUEUE     a LedgerQ queue directory into a queue (appends;
                                          litemq/cli/ledgerq.py)
    litemq index add|list PATH ...        secondary indexes (litemq/cli/index.py)
    litemq where PATH FIELD OP VALUE... [--format json|text|hex]
                                          messages whose indexed header matches
    litemq compact PATH [--grace 1d]      key compaction: the latest message of each key
                                          (litemq/cli/compact.py)
    litemq archive PATH DEST [--delete-local] [--format text|json] [--follow [--every S]]
                                          copy sealed files to a path or s3://, gs:// URI;
                                          --follow ships each file as it is sealed
    litemq restore ARCHIVE QUEUE [--format text|json]
                                          rebuild a queue from an archive (these two:
                                          litemq/cli/archive.py)

Commands that only read open the queue read-only, so they run beside a live
writer; ``append``, ``reindex``, ``index add|drop``, ``import-litemq`` and
``import-ledgerq`` take the writer lock (they fail with LockedError while a writer
runs). ``--format json`` prints one JSON object per line (JSON Lines) for programs
(``archive --json`` is a deprecated alias). Ranges are printed half-open, as
``first..end`` with ``end`` the first sequence not included. Times (``find --start``,
``tail --since``) are an ISO 8601 time, µs since the epoch, or an age before now
(``1h``, ``7d``) as ``retain --max-age`` takes.
Errors print one line on stderr and exit with status 1 (2 for usage errors).
"""

from litemq.cli.main import _parser as _parser
from litemq.cli.main import main

__all__ = ["main"]
