"""The index database (one SQLite file with FTS5 and sqlite-vec, rebuilt from the vault at
any time): its schema and migrations, the SQL for each table family behind the Store, and
the in-memory vector matrix kept in step with its commits (matrix).

May import: config, markdown. Nothing here reads the vault or runs the model.
"""
