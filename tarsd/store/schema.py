"""The index database's schema: every table's DDL (also those whose SQL lives elsewhere:
conversations in tarsd/chat, memory-line vectors, pending rules and the memory review in tarsd/memory, the messages
a channel took in in tarsd/channels, routine runs and the inbox in tarsd/routines), the
migrations from one version to the next, and the check that refuses an index newer than
this tars. The vector table is not here: its layout follows the embedder (vectors.py)."""

from __future__ import annotations

from pathlib import Path

import apsw

from tarsd.store.errors import StoreError

SCHEMA_VERSION = 12
COLLECTION = "vault"

_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE collections (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, root TEXT NOT NULL);
CREATE TABLE files (
    id INTEGER PRIMARY KEY,
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    path TEXT NOT NULL,
    title TEXT NOT NULL DEFAULT '',
    memory_type TEXT NOT NULL DEFAULT 'note',
    content_hash TEXT,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    indexed_at REAL NOT NULL,
    chunker TEXT NOT NULL DEFAULT '',
    tags TEXT NOT NULL DEFAULT '',
    aliases TEXT NOT NULL DEFAULT '',
    conflict INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0,  -- 1: not indexed, see problem
    problem TEXT,                          -- why it was skipped, or what was repaired
    UNIQUE (collection_id, path)
);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    heading_path TEXT NOT NULL,
    text TEXT NOT NULL,
    embed_text TEXT NOT NULL,
    embedded INTEGER NOT NULL DEFAULT 0   -- 1: has a row in chunk_vectors
);
CREATE INDEX chunks_file ON chunks(file_id, seq);
CREATE INDEX chunks_hash ON chunks(content_hash);
CREATE INDEX chunks_pending ON chunks(id) WHERE embedded = 0;
CREATE VIRTUAL TABLE chunks_fts USING fts5(title, headings, body, tokenize = 'porter unicode61');
CREATE TABLE embedding_cache (
    fingerprint TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (fingerprint, content_hash)
) WITHOUT ROWID;
"""

# Version 2: conversations survive a daemon restart.
_SCHEMA_V2 = """
CREATE TABLE conversations (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    summary TEXT NOT NULL DEFAULT '',   -- the model's summary of compacted messages
    context TEXT NOT NULL DEFAULT '',   -- relevant notes found with the opening message
    logged_seq INTEGER NOT NULL DEFAULT 0  -- messages up to this seq are in a session log
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    body BLOB NOT NULL,                 -- a msgspec-JSON ChatMessage
    compacted INTEGER NOT NULL DEFAULT 0,
    UNIQUE (conversation_id, seq)
);
"""

# Version 3: links, tags and aliases for note-aware search, and a keyword table that folds
# every accent. The keyword rows are rewritten by re-chunking every note at the next sync
# (vectors come back from the embedding cache).
_SCHEMA_V3 = """
CREATE TABLE links (
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    line INTEGER NOT NULL,
    kind TEXT NOT NULL,                 -- wiki | embed | markdown
    target TEXT NOT NULL,               -- as written (markdown links: the vault path they name)
    target_key TEXT NOT NULL,           -- links.link_key(target): what backlinks look up
    label_key TEXT NOT NULL DEFAULT '', -- the label as a target (Dendron writes [[label|note]])
    heading TEXT NOT NULL DEFAULT '',
    label TEXT NOT NULL DEFAULT '',
    exact INTEGER NOT NULL DEFAULT 0    -- 1: a path, not a name to look up
);
CREATE INDEX links_file ON links(file_id);
CREATE INDEX links_key ON links(target_key);
CREATE INDEX links_label_key ON links(label_key) WHERE label_key != '';
CREATE TABLE note_tags (
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    tag TEXT NOT NULL,                  -- lower case, without '#'; nested tags keep their '/'
    PRIMARY KEY (file_id, tag)
) WITHOUT ROWID;
CREATE INDEX note_tags_tag ON note_tags(tag);
CREATE TABLE note_aliases (
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    alias TEXT NOT NULL,
    PRIMARY KEY (file_id, alias)
) WITHOUT ROWID;
DROP TABLE chunks_fts;
CREATE VIRTUAL TABLE chunks_fts USING fts5(title, headings, body, tokenize = 'porter unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row');  -- term -> passages holding it, for IDF
INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('automerge', 16);  -- fewer merges while indexing (bench: 18% faster)
UPDATE files SET chunker = '' WHERE skipped = 0;
"""


# Version 4: vectors of memory lines for dedup and selective recall (tarsd/memory/vectors.py
# holds its SQL). A table of their own: prune_cache keeps only vectors of chunks in use.
_SCHEMA_MEMORY_VECTORS = """
CREATE TABLE memory_line_vectors (
    fingerprint TEXT NOT NULL,   -- the embedder's
    line_hash TEXT NOT NULL,     -- sha256 of the normalised line (tarsd/memory/facts.py key)
    vector BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (fingerprint, line_hash)
) WITHOUT ROWID;
"""

# Version 5: rules the model proposed in a chat, waiting for the user's approval
# (tarsd/memory/pending_rules.py). Here rather than in the vault: a proposal is not a rule yet, so it
# must not be in Procedural.md, nor in any note the index would hand back to the model.
_SCHEMA_PENDING_RULES = """
CREATE TABLE pending_rules (
    id INTEGER PRIMARY KEY,
    rule TEXT NOT NULL,
    rule_key TEXT NOT NULL UNIQUE,   -- tarsd/memory/facts.py key: the same rule proposed twice is one proposal
    conversation TEXT NOT NULL DEFAULT '',
    proposed_at REAL NOT NULL
);
"""

# Version 6: the message ids a messenger channel has taken in (tarsd/channels/seen.py holds its SQL),
# kept a day, so that a webhook delivered twice (a retry, a restart in between) is answered once,
# and a message taken in but never answered (tarsd killed meanwhile) is found at the next start.
_SCHEMA_CHANNEL_MESSAGES = """
CREATE TABLE channel_messages (
    channel TEXT NOT NULL,           -- whatsapp
    message_id TEXT NOT NULL,        -- the messenger's own id (a wamid)
    sender TEXT NOT NULL,
    received_at REAL NOT NULL,
    state TEXT NOT NULL,             -- received | answered | notified (told it was never answered)
    preview TEXT NOT NULL DEFAULT '',  -- the message's first words, for that notice
    PRIMARY KEY (channel, message_id)
) WITHOUT ROWID;
CREATE INDEX channel_messages_state ON channel_messages(state, received_at);
"""

# Version 7: each passage's text stored once. FTS5 kept a copy of every passage's folded text that
# nothing reads (snippets come from chunks.text, phrases and bm25 from the index itself), and
# chunks.embed_text repeated the text after its context line: together 950 MB of a 1.9 GB index
# at 100,000 notes, and writing them cost a cold index 13% of its speed (bench/search_scale.py).
# The keyword table is now contentless (contentless_delete lets a passage's row go when its note
# changes) and chunks keep the context line alone (chunker.embedding_input joins them).
# Every passage is written again: the passages are emptied here and every note is re-chunked at
# the next sync, its vectors taken from the embedding cache (by content hash, unchanged); the
# vector table goes with the passages (new passages take their ids from 1 again), and the sync
# makes it again for the embedder in use (vectors.use_vector_space; the store has loaded
# sqlite-vec before migrating). Until the sync reaches a note, search does not find it, as
# after version 3.
_SCHEMA_PASSAGES_STORED_ONCE = """
DROP TABLE chunks_vocab;
DROP TABLE chunks_fts;
CREATE VIRTUAL TABLE chunks_fts USING fts5(
    title, headings, body, content = '', contentless_delete = 1, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE chunks_vocab USING fts5vocab(chunks_fts, 'row');
INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('automerge', 16);
DELETE FROM chunks;
DROP TABLE IF EXISTS chunk_vectors;
DELETE FROM meta WHERE key IN ('vector_fingerprint', 'vector_dims');
ALTER TABLE chunks DROP COLUMN embed_text;
ALTER TABLE chunks ADD COLUMN embed_context TEXT NOT NULL DEFAULT '';  -- the line before the text the embedder sees
UPDATE files SET chunker = '' WHERE skipped = 0;
"""

# Version 8: what a model proposed, waiting for the user (tarsd/memory/pending_rules.py): rules as
# before, and now changes to memory lines the model did not write (replace, remove). Ids are never
# reused (AUTOINCREMENT: a card left open cannot approve a later proposal under the same number),
# and ``state`` lets a decision be claimed in one transaction and an approval interrupted by a kill
# be finished at the next start. The waiting rules keep their ids.
_SCHEMA_PROPOSALS = """
CREATE TABLE proposals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    action TEXT NOT NULL DEFAULT 'rule',     -- rule | replace | remove
    kind TEXT NOT NULL DEFAULT 'procedural', -- the memory file it changes: semantic | procedural
    text TEXT NOT NULL,                      -- the rule; replace: the new text; remove: the line to remove
    target TEXT NOT NULL DEFAULT '',         -- replace: the line it replaces
    proposal_key TEXT NOT NULL UNIQUE,       -- the same proposal made twice is one
    conversation TEXT NOT NULL DEFAULT '',
    proposed_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending'    -- pending | approving (applied, not yet dropped)
);
INSERT INTO proposals(id, action, kind, text, proposal_key, conversation, proposed_at)
    SELECT id, 'rule', 'procedural', rule, 'rule|procedural||' || rule_key, conversation, proposed_at FROM pending_rules;
DROP TABLE pending_rules;
"""

# Version 9: how many lines of the memory file read as the line an approved remove or replace
# changes, counted just before the change is written (NULL: not counted yet). A start that
# finishes an approval a kill interrupted tells by it whether the change was written already,
# rather than applying it again to a second line that reads the same.
_SCHEMA_PROPOSAL_LINES = """
ALTER TABLE proposals ADD COLUMN lines_before INTEGER;
"""

# Version 10: routines and reminders (tarsd/routines/ledger.py holds their SQL). Each occurrence of a
# routine taken is one row of routine_runs (UNIQUE: a restart, a second clock, cannot run it twice;
# a row left 'running' by a kill is marked interrupted at the next start). What tars says first is
# a message in the inbox, whatever its targets; each other target (telegram, whatsapp, note) is a
# delivery of that message, retried until sent or given up, so a messenger down loses nothing.
# In the database rather than the vault: run history and undelivered messages are tarsd's
# bookkeeping, not notes to index (the routines themselves are in the user's routines file).
_SCHEMA_ROUTINES = """
CREATE TABLE routine_runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    routine TEXT NOT NULL,               -- the routine's or reminder's name
    scheduled_at REAL NOT NULL,          -- the occurrence (unix time)
    started_at REAL NOT NULL,
    finished_at REAL,
    state TEXT NOT NULL DEFAULT 'running',  -- running | done
    outcome TEXT NOT NULL DEFAULT '',    -- spoke | quiet | skipped | limited | failed | interrupted | reminded
    late INTEGER NOT NULL DEFAULT 0,     -- 1: run after its time (catching up)
    detail TEXT NOT NULL DEFAULT '',
    conversation TEXT NOT NULL DEFAULT '',
    message_id INTEGER,                  -- the inbox message it posted
    UNIQUE (routine, scheduled_at)
);
CREATE INDEX routine_runs_started ON routine_runs(routine, started_at);
CREATE INDEX routine_runs_running ON routine_runs(state) WHERE state = 'running';
CREATE TABLE inbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL NOT NULL,
    source TEXT NOT NULL,                -- routine:NAME | reminder:NAME
    title TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    read INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX inbox_unread ON inbox(id) WHERE read = 0;
CREATE TABLE deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id INTEGER NOT NULL REFERENCES inbox(id) ON DELETE CASCADE,
    target TEXT NOT NULL,                -- telegram | whatsapp | note
    state TEXT NOT NULL DEFAULT 'pending',  -- pending | sent | failed (given up)
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL,
    last_error TEXT NOT NULL DEFAULT '',
    sent_at REAL
);
CREATE INDEX deliveries_message ON deliveries(message_id);
CREATE INDEX deliveries_due ON deliveries(next_attempt_at) WHERE state = 'pending';
"""

# Version 11: the memory review (tarsd/memory/review_store.py holds its SQL). Each review run; each
# change it proposed (its change_key is UNIQUE: a change proposed, rejected, applied or undone once is
# never proposed again); each change applied to Memory.md, with the file before and after it (the
# undo), written first and marked applied after the file, so a kill in between is finished or rolled
# back at the next start; and when each line was first seen, and last seen missing (how old a line
# without a stamp is).
# In the database rather than the vault, like the other proposals: the history the user reads is a
# note in the vault (tarsd/memory/review_history.py).
_SCHEMA_MEMORY_REVIEW = """
CREATE TABLE memory_reviews (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started_at REAL NOT NULL,
    finished_at REAL,
    source TEXT NOT NULL DEFAULT '',      -- who asked: terminal | browser | phone | routine:NAME
    lines INTEGER NOT NULL DEFAULT 0,     -- Memory.md's lines then
    proposed INTEGER NOT NULL DEFAULT 0,
    left_out TEXT NOT NULL DEFAULT '',    -- what the cap on removals left for the next review, for people
    sessions_until REAL                   -- the model read the session logs up to this time
);
CREATE TABLE memory_proposals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    review_id INTEGER NOT NULL,
    kind TEXT NOT NULL,                   -- duplicate | supersede | expired | budget | missing
    change_key TEXT NOT NULL UNIQUE,      -- one change, proposed once
    body TEXT NOT NULL,                   -- JSON: the lines it removes, keeps, adds; the section; the note
    why TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT '',      -- Memory.md lines, or sessions/...md#L12
    proposed_at REAL NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',  -- pending | approving | applied | rejected | undone | gone
    decided_at REAL,
    change_id INTEGER
);
CREATE INDEX memory_proposals_state ON memory_proposals(state);
CREATE TABLE memory_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    applied_at REAL NOT NULL,
    path TEXT NOT NULL,                   -- the memory file, relative to the vault
    before TEXT NOT NULL,
    after TEXT NOT NULL,
    note_path TEXT NOT NULL DEFAULT '',   -- a section moved out: the note it went to
    note_before TEXT,                     -- NULL: the note did not exist
    note_after TEXT,
    summary TEXT NOT NULL DEFAULT '',     -- JSON: what it removed, added, moved, and why (for the history and the undo)
    state TEXT NOT NULL DEFAULT 'writing',  -- writing | applied | undone
    recorded INTEGER NOT NULL DEFAULT 0,  -- 1: in the history note
    undone_at REAL
);
CREATE TABLE memory_lines_seen (
    line_key TEXT PRIMARY KEY,            -- sha256 of the line's text as facts.key reads it
    first_seen REAL NOT NULL,             -- the first look that found it: it was written by then
    absent_at REAL                        -- the look before, which did not: written after it (NULL: no look before)
);
"""

# Version 12: recall by lines (tarsd/store/line_units.py, tarsd/search/recall.py). Each line of a
# note recalled by its lines (a session log: one turn a line) is a unit with a vector of its own,
# beside the passages that hold it: line_vectors is in the passages' vector space (the embedding
# cache serves both), its rows also held in memory. And every note's date, when it says one (a
# session log's start, a daily note's day: markdown/note_dates.py), which recall shows
# beside what it recalls. Every note is re-chunked at the next sync (the chunker's version moved
# too), its vectors taken from the embedding cache; only the lines are embedded anew.
_SCHEMA_LINE_UNITS = """
ALTER TABLE files ADD COLUMN note_date REAL;  -- when the note took place (seconds since the epoch); NULL: it says no date
CREATE TABLE line_units (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id) ON DELETE CASCADE,
    line INTEGER NOT NULL,               -- 1-based line of the note
    content_hash TEXT NOT NULL,          -- sha256 of text: the embedding cache key
    text TEXT NOT NULL,                  -- what the embedder sees: the line without its list mark, cut to the token budget
    embedded INTEGER NOT NULL DEFAULT 0  -- 1: has a row in line_vectors
);
CREATE INDEX line_units_file ON line_units(file_id, line);
CREATE INDEX line_units_hash ON line_units(content_hash);
CREATE INDEX line_units_pending ON line_units(id) WHERE embedded = 0;
CREATE TABLE line_vectors (id INTEGER PRIMARY KEY, vector BLOB NOT NULL);  -- a line unit's vector (float32, vector_dims)
UPDATE files SET chunker = '' WHERE skipped = 0;
"""

MIGRATIONS = {
    1: _SCHEMA_V1,
    2: _SCHEMA_V2,
    3: _SCHEMA_V3,
    4: _SCHEMA_MEMORY_VECTORS,
    5: _SCHEMA_PENDING_RULES,
    6: _SCHEMA_CHANNEL_MESSAGES,
    7: _SCHEMA_PASSAGES_STORED_ONCE,
    8: _SCHEMA_PROPOSALS,
    9: _SCHEMA_PROPOSAL_LINES,
    10: _SCHEMA_ROUTINES,
    11: _SCHEMA_MEMORY_REVIEW,
    12: _SCHEMA_LINE_UNITS,
}


def migrate(conn: apsw.Connection, path: Path) -> None:
    """Bring the schema of the index at ``path`` up to SCHEMA_VERSION (inside the caller's transaction)."""
    version = conn.execute("PRAGMA user_version").fetchall()[0][0]
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the index {path} has schema version {version}, newer than this tars ({SCHEMA_VERSION}); "
            "upgrade tars, or delete the file (it is rebuilt from the vault)"
        )
    for target in range(version + 1, SCHEMA_VERSION + 1):
        conn.execute(MIGRATIONS[target])
        conn.execute(f"PRAGMA user_version = {target}")


def collection_id(conn: apsw.Connection) -> int:
    """The id of the one collection (the vault), made on first use (inside the caller's transaction)."""
    conn.execute("INSERT OR IGNORE INTO collections(name, root) VALUES (?, '')", (COLLECTION,))
    return conn.execute("SELECT id FROM collections WHERE name = ?", (COLLECTION,)).fetchall()[0][0]
