"""Memory in the vault: Memory.md and Procedural.md (files, lines), the one check on text
written there (text), who wrote each line (provenance), telling the same fact from a new one
(facts, vectors), the guard against an editor's stale save (guard), rules the model proposed
waiting for the user (pending_rules), and the session logs of episodic memory (sessions).

May import: config, markdown, vault, embed, store. Never search or chat: memory is written by
the daemon on the user's word, and read by whoever asks.
"""
