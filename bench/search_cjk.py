"""Finding Chinese, Japanese and Korean words by keyword: three ways to index, measured.

- ``unicode61``: FTS5's default tokenizer as tars had it: a run of CJK characters is one token,
  so a word is found only when the query is the whole run between two punctuation marks.
- ``trigram``: FTS5's trigram tokenizer: any substring of three characters or more; a query of
  one or two characters (most CJK words) finds nothing through MATCH.
- ``split``: what tars does (tarsd/markdown/tokens.py): every CJK character becomes a token and a CJK
  query word becomes the phrase of its characters, so a word is found wherever its characters
  stand side by side, whatever its length.

For each way: how many of the word look-ups below find their note (recall), how many notes
they return that do not hold the word (false hits), and the index size.

    python bench/search_cjk.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import print_table  # noqa: E402

from tarsd.markdown.tokens import index_text, query_phrase  # noqa: E402

NOTES = [
    "私は東京に住んでいます。毎朝、駅まで歩きます。",
    "日本語の勉強を続けています。漢字はまだ難しいです。",
    "京都の寺を見に行きました。紅葉がきれいでした。",
    "这是我的笔记，关于北京的旅行和长城。",
    "今天学习了中文语法，明天复习生词。",
    "上海的天气很热，我们去了外滩散步。",
    "서울에서 친구를 만났습니다. 같이 점심을 먹었어요.",
    "한국어 공부는 재미있지만 어렵습니다.",
    "부산 바다가 정말 아름다웠어요.",
    "A note in English about Tokyo and Kyoto, for contrast.",
]
# (word, index of the note that holds it)
LOOKUPS = [
    ("東京", 0),
    ("駅", 0),
    ("日本語", 1),
    ("漢字", 1),
    ("勉強", 1),
    ("京都", 2),
    ("紅葉", 2),
    ("寺", 2),
    ("笔记", 3),
    ("北京", 3),
    ("长城", 3),
    ("旅行", 3),
    ("语法", 4),
    ("中文", 4),
    ("上海", 5),
    ("外滩", 5),
    ("서울", 6),
    ("친구", 6),
    ("점심", 6),
    ("한국어", 7),
    ("부산", 8),
    ("바다", 8),
]


def build(kind: str) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    tokenize = {"unicode61": "unicode61", "trigram": "trigram", "split": "unicode61"}[kind]
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(body, tokenize = '{tokenize}')")
    for number, text in enumerate(NOTES):
        conn.execute("INSERT INTO t(rowid, body) VALUES (?, ?)", (number, index_text(text) if kind == "split" else text))
    return conn


def lookup(conn: apsw.Connection, kind: str, word: str) -> set[int]:
    phrase = query_phrase(word) if kind == "split" else word
    try:
        return {row[0] for row in conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (f'"{phrase}"',))}
    except apsw.SQLError:
        return set()


def index_bytes(conn: apsw.Connection) -> int:
    return conn.execute("SELECT sum(length(block)) FROM t_data").fetchall()[0][0]


def main() -> None:
    rows = []
    for kind in ("unicode61", "trigram", "split"):
        conn = build(kind)
        found = false = 0
        for word, note in LOOKUPS:
            hits = lookup(conn, kind, word)
            found += note in hits
            false += len({h for h in hits if word not in NOTES[h]})
        short = sum(1 for word, note in LOOKUPS if len(word) <= 2 and note in lookup(conn, kind, word))
        rows.append([kind, f"{found}/{len(LOOKUPS)}", f"{short}/{sum(len(w) <= 2 for w, _ in LOOKUPS)}", false, index_bytes(conn)])
    print_table(
        ["index", "words found", "of them 1-2 characters", "false hits", "index bytes"],
        rows,
        f"{len(LOOKUPS)} word look-ups over {len(NOTES)} notes in Japanese, Chinese and Korean",
    )


if __name__ == "__main__":
    main()
