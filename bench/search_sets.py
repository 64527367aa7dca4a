"""The judged query sets search quality is measured on, each turned into a vault of notes.

Four shapes, so that a ranking tuned on one cannot hide a loss on another (two of them help
vaults' questions):

- ``scifact``: BEIR SciFact (../shared/data/beir-scifact): short scientific claims, 5,183
  abstracts, the 300 judged test queries.
- ``dendron``: the golden set in bench/golden/dendron.jsonl over the shared Dendron vault: 90
  questions of five styles (paraphrase, keywords, title, deep, linked), graded 1 or 2.
- ``arguana``: paragraph-length queries (ArguAna, Wachsmuth et al. 2018, as BEIR builds it):
  each query is an argument, the relevant note its counter-argument, among 13,532 arguments
  (BEIR keeps 8,674 of them). The query's own argument is in the corpus and never counts.
- ``squad``: natural questions (SQuAD v1.1 dev): a question a person wrote while reading a
  Wikipedia paragraph, the relevant note that paragraph, among all 2,067 dev paragraphs; a
  fixed sample of 600 of the 10,570 questions.
- ``foam``: the golden set in bench/golden/foam.jsonl over Foam's documentation (86 notes, MIT,
  archived in bench/sets): 60 questions in the same five styles as the Dendron set, written
  before any ranking was run on them.
- ``demo``: the golden set in bench/golden/demo.jsonl over the demo vault (examples/vault, 5
  notes, copied once under the cache): the README's examples, titles, words found in one note
  only and questions in a person's own words; small, so its figures say what a new user sees
  rather than what a big vault does.

bench/sets/README.md says where the archived sets come from and under which licence. Every
set is split once, by a hash of set and query id, into ``dev`` (tune on it) and ``held-out``
(report it; never tune on it).
"""

from __future__ import annotations

import hashlib
import json
import re
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from common import DENDRON, SCIFACT, note_markdown

BENCH = Path(__file__).resolve().parent
SETS_DIR = BENCH / "sets"
GOLDEN = BENCH / "golden"
SQUAD_SAMPLE = 600
LENGTH_BANDS = ("<=5", "6-20", ">20")  # query length in words
_WORD = re.compile(r"\S*[^\W_]\S*")  # a whitespace-separated token holding a letter or digit


def words(text: str) -> int:
    return len(_WORD.findall(text))


def length_band(text: str) -> str:
    n = words(text)
    return "<=5" if n <= 5 else "6-20" if n <= 20 else ">20"


def split_of(set_name: str, query_id: str) -> str:
    """dev or held-out, half each, fixed by the ids alone (never by what the query scores)."""
    digest = hashlib.sha256(f"{set_name}\0{query_id}".encode()).digest()
    return "held-out" if digest[0] & 1 else "dev"


@dataclass(frozen=True, slots=True)
class Query:
    id: str
    text: str
    grades: dict[str, int]  # note path -> grade (> 0 relevant)
    style: str = ""  # the golden set's question style; "" elsewhere
    ignore: frozenset[str] = frozenset()  # notes that never count as hits (ArguAna: the query itself)


@dataclass(slots=True)
class QuerySet:
    name: str
    queries: list[Query]
    vault: Path | None = None  # an existing vault, or None: notes() writes one
    docs: list[dict] = field(default_factory=list)  # BEIR corpus entries for notes()

    def notes(self) -> Iterator[tuple[str, str]]:
        """(vault path, markdown) of every note to write for a BEIR-shaped set."""
        for doc in self.docs:
            title, text = doc.get("title", "").strip(), doc["text"]
            yield doc_path(doc["_id"]), note_markdown(title, text) if title else text + "\n"


def doc_path(doc_id: str) -> str:
    return f"{doc_id}.md"


def _jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _qrels(path: Path) -> dict[str, dict[str, int]]:
    grades: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        next(handle)  # header
        for line in handle:
            query_id, doc_id, score = line.rstrip("\n").split("\t")
            if int(score) > 0:
                grades.setdefault(query_id, {})[doc_path(doc_id)] = int(score)
    return grades


def _unpacked(name: str, cache: Path) -> Path:
    """bench/sets/NAME.tar.xz unpacked under cache (once per archive content)."""
    archive = SETS_DIR / f"{name}.tar.xz"
    stamp = hashlib.sha256(archive.read_bytes()).hexdigest()[:12]
    target = cache / f"{name}-{stamp}"
    done = target / ".unpacked"
    if not done.is_file():
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
        done.touch()
    return target / name


def _copied(folder: Path, cache: Path) -> Path:
    """The notes of ``folder`` copied under cache (once per content): the bench never edits the checkout."""
    files = sorted(p for p in folder.rglob("*.md") if p.is_file())
    stamp = hashlib.sha256(b"".join(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes() for p in files)).hexdigest()[:12]
    target = cache / f"{folder.name}-{stamp}"
    done = target / ".copied"
    if not done.is_file():
        for path in files:
            copy = target / path.relative_to(folder)
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_bytes(path.read_bytes())
        done.touch()
    return target


def _beir(name: str, folder: Path, sample: int = 0) -> QuerySet:
    grades = _qrels(folder / "qrels" / "test.tsv")
    texts = {q["_id"]: q["text"] for q in _jsonl(folder / "queries.jsonl")}
    ids = [q for q in texts if q in grades]
    if sample:
        ids = sorted(ids, key=lambda q: hashlib.md5(q.encode()).hexdigest())[:sample]
    ignore = name == "arguana"  # the argument itself is a note of the corpus
    queries = [Query(q, texts[q], grades[q], ignore=frozenset({doc_path(q)}) if ignore else frozenset()) for q in ids]
    return QuerySet(name, queries, docs=_jsonl(folder / "corpus.jsonl"))


def _golden(name: str, vault: Path) -> QuerySet:
    queries = [Query(q["id"], q["query"], q["relevant"], q["style"]) for q in _jsonl(GOLDEN / f"{name}.jsonl")]
    return QuerySet(name, queries, vault=vault)


def load(name: str, cache: Path) -> QuerySet:
    if name == "scifact":
        return _beir("scifact", SCIFACT)
    if name == "dendron":
        return _golden("dendron", DENDRON)
    if name == "demo":
        return _golden("demo", _copied(BENCH.parent / "examples" / "vault", cache))
    if name == "foam":
        return _golden("foam", _unpacked("foam-docs", cache))
    if name == "arguana":
        return _beir("arguana", _unpacked("arguana", cache))
    if name == "squad":
        return _beir("squad", _unpacked("squad-dev", cache), sample=SQUAD_SAMPLE)
    raise ValueError(f"unknown set {name!r}")


NAMES = ("scifact", "dendron", "arguana", "squad", "foam", "demo")
