"""The vault on disk, trusted for nothing: which files are notes, reading them through races and
symlinks (safe_open), whether the vault is there at all (root), atomic updates of files the
user edits too (atomic), and reading a note's lines for a client (notes).

May import: config, markdown.
"""
