"""The keyword index: chunks_fts (FTS5, one row per passage: its note's title terms, its
headings, its body, folded by tarsd/markdown/tokens.py) and chunks_vocab over it; keyword
search with bm25 and which query phrases each row holds (connection.matched_phrases), the tokens
snippets mark, and the token and passage counts that IDF is made of."""

from __future__ import annotations

import apsw

from tarsd.markdown.chunker import Chunk
from tarsd.markdown.tokens import index_text
from tarsd.store.connection import Connections
from tarsd.store.filters import NO_FILTER, Filter, filter_sql
from tarsd.store.status import Counts

# The keyword table's tokenizer (porter over unicode61), as in the schema.
FTS_TOKENIZER_ARGS = ("unicode61", "remove_diacritics", "2")
# bm25() weights of the keyword columns: a title (with aliases, tags and file name) match
# counts four times a body match, a heading match twice.
BM25_WEIGHTS = "4.0, 2.0, 1.0"


def title_terms(title: str, aliases: list[str], tags: list[str], path: str) -> str:
    """What a note's passages hold in their title column: title, aliases, tags and file name."""
    return index_text(" ".join([title, *aliases, *tags, path.rsplit("/", 1)[-1].removesuffix(".md")]))


class Keywords:
    """chunks_fts and chunks_vocab, over the store's connections."""

    def __init__(self, db: Connections, counts: Counts):
        self.db = db
        self.counts = counts

    def add(self, first_id: int, titles: str, chunks: list[Chunk]) -> None:
        """The rows of new chunks numbered from ``first_id``, inside the caller's write."""
        self.db.conn.executemany(
            "INSERT INTO chunks_fts(rowid, title, headings, body) VALUES (?, ?, ?, ?)",
            [(first_id + i, titles, index_text(c.heading_path), index_text(c.text)) for i, c in enumerate(chunks)],
        )

    def drop(self, ids: list[int], marks: str) -> None:
        """The rows of deleted chunks (``marks``: one '?' per id), inside the caller's write."""
        self.db.conn.execute(f"DELETE FROM chunks_fts WHERE rowid IN ({marks})", ids)

    def fts_search(self, match: str, limit: int, where: Filter = NO_FILTER) -> list[tuple[int, float, bytes]]:
        """(chunk id, bm25, phrases matched) best first. bm25 is negative, more negative is
        better; phrases matched holds a byte per query phrase in order, PHRASE_IN_ROW and
        PHRASE_IN_TITLE (see connection.matched_phrases)."""
        if not where:
            # FTS5 sorts "ORDER BY rank" itself, so tars_phrases runs only for the rows returned,
            # not for every match; and one collection per database makes the joins unneeded.
            sql = f"""SELECT rowid, rank, tars_phrases(chunks_fts) FROM chunks_fts
                      WHERE chunks_fts MATCH ? AND rank MATCH 'bm25({BM25_WEIGHTS})' ORDER BY rank LIMIT ?"""
            rows = self.db.reader().execute(sql, (match, limit))
        else:
            clauses, params = filter_sql(where, self.db.collection_id)
            sql = f"""SELECT chunks_fts.rowid, bm25(chunks_fts, {BM25_WEIGHTS}) AS score, tars_phrases(chunks_fts)
                      FROM chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid JOIN files f ON f.id = c.file_id
                      WHERE chunks_fts MATCH ? AND {clauses} ORDER BY score LIMIT ?"""
            rows = self.db.reader().execute(sql, (match, *params, limit))
        return rows.fetchall()

    def keyword_tokens(self, text: str) -> list[str]:
        """``text`` cut into keyword tokens exactly as the index cuts it (stemmed, folded)."""
        return self._tokenizer()(text.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False, include_colocated=False)

    def _tokenizer(self):
        """The keyword table's tokenizer, one per reading thread."""
        local = self.db._local
        tokenizer = getattr(local, "tokenizer", None)
        if tokenizer is None:
            tokenizer = local.tokenizer = self.db.reader().fts5_tokenizer("porter", list(FTS_TOKENIZER_ARGS))
        return tokenizer

    def passage_frequencies(self, tokens: list[str]) -> tuple[int, dict[str, int]]:
        """(passages in the index, passages holding each token): what IDF is made of."""
        reader = self.db.reader()
        total = self.counts.coverage_counts()["chunks"]  # counted again only after a commit
        if not tokens:
            return total, {}
        marks = ",".join("?" * len(tokens))
        return total, dict(reader.execute(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", tokens).fetchall())

    def keyword_token_spans(self, text: str) -> list[tuple[int, int, str]]:
        """Where each keyword token of ``text`` stands (start and end offsets in its UTF-8 bytes),
        cut, stemmed and folded as the index does it: what snippets mark."""
        spans = self._tokenizer()(text.encode("utf-8"), apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=True, include_colocated=False)
        return [(start, end, token) for start, end, token in spans]
