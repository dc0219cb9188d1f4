"""Storage: where summaries, their versions, question banks and refine jobs live.

``store`` (:class:`~cos_integrations.storage.store.SummaryStore` over SQLite or
PostgreSQL), ``db`` (the two database backends), ``refine_queue`` (the durable queue of
refine jobs), ``migrate`` (copy a store to another database).
"""
