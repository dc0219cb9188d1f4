"""Storage: where summaries, their versions, question banks and refine jobs live.

``store`` (:class:`~cos_integrations.storage.store.SummaryStore` over SQLite or
PostgreSQL: the schema, its migrations, the documents; it composes the parts below over one
connection), ``versions`` (summary versions and question banks), ``refine_queue`` (the
durable queue of refine jobs), ``traffic`` (hits, misses, the audit log, the overview),
``records`` (the plain records the store returns), ``db`` (the two database backends and
:class:`~cos_integrations.storage.db.StorePart`), ``migrate`` (copy a store to another
database).
"""
