"""Keeping the index in step with the vault: the watchdog observer and its supervisor
(watcher), the one-writer sync queue that debounces, retries and reconciles (sync_queue),
preparing notes in worker processes (preparing) and writing them to the store (indexer).

The path a note takes: vault -> watcher -> sync_queue -> preparing (chunks, links, tags) ->
indexer -> store. May import: config, markdown, vault, embed, store.
"""
