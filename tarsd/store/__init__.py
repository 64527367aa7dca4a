"""The index database (one SQLite file with FTS5 and sqlite-vec, rebuilt from the vault at
any time). Callers import everything from database, whose Store is the one facade; behind it,
one module per concern or table family:

- schema: every table's DDL, the migrations, the check against a newer index
- errors: StoreError, and explain (a database failure in the user's words)
- connection: the writing connection and its lock, a reader per thread, transactions and sync
  batches, the meta table
- files: the files table, and writing or deleting a note's rows in every table at once
- chunks: the passages (chunks table) and the ids they get
- fts: the keyword table (FTS5), keyword search, the tokens snippets mark, IDF counts
- vectors: chunk_vectors (sqlite-vec), the embedding cache, pending passages, vector search
- links: the note graph (links, tags, aliases)
- filters: Filter, and its SQL condition inside keyword and vector queries
- status: row counts for search replies and status
- matrix: the in-memory vector matrix kept in step with the commits

May import: config, markdown. Nothing here reads the vault or runs the model.
"""
