"""Search filters: which notes a keyword or vector search may return (Filter), and the SQL
condition over files (and their note_tags) that applies one inside the query."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Filter:
    """Which notes a search may return; applied inside the keyword and vector queries, before
    their top-k cut, so a filter never empties a page that matching notes could fill."""

    memory_types: tuple[str, ...] = ()
    path_prefix: str = ""
    tags: tuple[str, ...] = ()  # lower case, no '#'; all must be present (nested ones count)
    since_ns: int | None = None  # modified at or after (ns since the epoch)
    before_ns: int | None = None  # modified before

    def __bool__(self) -> bool:
        return bool(self.memory_types or self.path_prefix or self.tags) or self.since_ns is not None or self.before_ns is not None


NO_FILTER = Filter()


def filter_sql(where: Filter, collection_id: int) -> tuple[str, list[object]]:
    """The WHERE condition (over files aliased f) and its parameters."""
    clauses, params = ["f.collection_id = ?"], [collection_id]
    if where.memory_types:
        clauses.append(f"f.memory_type IN ({','.join('?' * len(where.memory_types))})")
        params.extend(where.memory_types)
    if where.path_prefix:
        # Compare a prefix exactly: LIKE would treat % and _ in paths as wildcards.
        clauses.append("substr(f.path, 1, ?) = ?")
        params.extend([len(where.path_prefix), where.path_prefix])
    for tag in where.tags:  # every tag asked for; a tag also matches the tags nested under it
        clauses.append("f.id IN (SELECT file_id FROM note_tags WHERE tag = ? OR substr(tag, 1, ?) = ?)")
        params.extend([tag, len(tag) + 1, tag + "/"])
    if where.since_ns is not None:
        clauses.append("f.mtime_ns >= ?")
        params.append(where.since_ns)
    if where.before_ns is not None:
        clauses.append("f.mtime_ns < ?")
        params.append(where.before_ns)
    return " AND ".join(clauses), params
