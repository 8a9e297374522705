"""Peer benchmark: litemq against what a Python user would pick instead.

The library behind ``benches/peers.py``, the entry point (``make bench-peers``). The modules:

- ``stores``: one small adapter class per store, all with the same interface;
- ``phases``: times the append and read phases of one store in one process;
- ``worker``: the child-process entry that runs one store in one variant;
- ``redis_server``: starts and stops a private ``redis-server`` on 127.0.0.1;
- ``latency``: append-to-tailer latency between two processes (litemq);
- ``report``: the table, the goals, the charts and ``docs/PERFORMANCE.md``.
"""
