"""Other programs' on-disk formats, read (and, for LiteMQ broker stores, written):

- `litemq.interop.litemq_store`: a LiteMQ broker's ``commitlog/`` and ``consumequeue/``
  (``litemq read-commitlog``, ``import-litemq``, ``export-litemq``, and the Spark source
  ``litemq-commitlog``);
- `litemq.interop.ledgerq`: a LedgerQ queue directory's segments (``litemq import-ledgerq``).

Neither is the queue's own format (docs/FORMAT.md describes both, apart from it); the
modules are imported by name, not re-exported here, so ``import litemq`` never loads them.
"""
