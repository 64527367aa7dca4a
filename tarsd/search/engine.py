"""The index engine wired together: store, embedder, indexer and searcher for one vault."""

from __future__ import annotations

from tarsd.config.budget import Plan, plan_for
from tarsd.config.settings import Config
from tarsd.embed.embedder import make_embedder
from tarsd.index.indexer import Indexer
from tarsd.search.graph import NoteGraph
from tarsd.search.searcher import Searcher
from tarsd.store.database import Store


class Engine:
    def __init__(self, config: Config, plan: Plan | None = None):
        vault, db = config.vault_path, config.db_path
        if not vault.is_dir():
            raise FileNotFoundError(f"the vault {vault} is not a directory: pass --vault PATH or set TARS_VAULT")
        if db.is_relative_to(vault):
            # Writes inside the vault would wake the watcher and sync services for nothing.
            raise ValueError(f"the index database {db} must not live inside the vault {vault}: set [index] db_path elsewhere")
        self.config = config
        # The settings the memory budget picks (tarsd/config/budget.py); tarsd passes the plan it logged.
        self.plan = plan_for(config) if plan is None else plan
        self.store = Store(db, cache_mb=self.plan.sqlite_cache_mb)
        self.embedder = make_embedder(config.embedder, self.plan.keyword_only)
        # Loads in the background: nothing here or in the daemon waits for the model.
        self.embedder.start_loading()
        self.indexer = Indexer(config, self.store, self.embedder, self.plan.chunk_workers)
        self.graph = NoteGraph(self.store)
        self.searcher = Searcher(self.store, self.embedder, self.graph)

    def close(self) -> None:
        self.searcher.close()
        self.store.close()
