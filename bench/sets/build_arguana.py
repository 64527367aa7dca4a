"""Builds the ArguAna set (BEIR layout) from the original corpus of Wachsmuth et al., ACL 2018.

The corpus is arguana-counterargs-corpus/02-extracted-arguments/{training,validation,test}/
THEME/DEBATE/{pro,con}/NN{a-point,b-counter}.txt in a git repository. Ids follow BEIR:
SPLIT-THEME-INITIALS OF THE DEBATE-pro|conNNa|b. A document's text is its non-empty lines
joined by two spaces, its title the debate's words for test documents and empty otherwise (as
BEIR). The queries are the test points (…a), each judged against its counter-argument (…b).

    python build_arguana.py GIT_DIR COMMIT OUTDIR [--splits test,validation,training]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

ROOT = "arguana-counterargs-corpus/02-extracted-arguments/"
ARGUMENT = re.compile(r"/(pro|con)\d+[ab]-(point|counter)\.txt$")


def blobs(git_dir: str, commit: str, paths: list[str]) -> list[str]:
    """The files' texts at commit, read in one git cat-file --batch call."""
    request = "".join(f"{commit}:{path}\n" for path in paths).encode()
    out = subprocess.run(["git", "--git-dir", git_dir, "cat-file", "--batch"], input=request, capture_output=True, check=True).stdout
    texts, at = [], 0
    for _ in paths:
        header_end = out.index(b"\n", at)
        size = int(out[at:header_end].split()[2])
        texts.append(out[header_end + 1 : header_end + 1 + size].decode("utf-8"))
        at = header_end + 1 + size + 1
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir")
    parser.add_argument("commit")
    parser.add_argument("out", type=Path)
    parser.add_argument("--splits", default="test,validation,training")
    args = parser.parse_args()
    listing = subprocess.run(
        ["git", "--git-dir", args.git_dir, "ls-tree", "-r", "--name-only", args.commit, ROOT], capture_output=True, check=True
    )
    paths = [p for p in listing.stdout.decode().splitlines() if ARGUMENT.search(p)]
    splits = args.splits.split(",")
    docs: dict[str, dict] = {}
    for path, text in zip(paths, blobs(args.git_dir, args.commit, paths), strict=True):
        split, theme, debate, _side, name = path[len(ROOT) :].split("/")
        if split not in splits:
            continue
        kind = re.match(r"((pro|con)\d+)([ab])-", name)
        doc_id = f"{split}-{theme}-{''.join(word[0] for word in debate.split('-') if word)}-{kind.group(1)}{kind.group(3)}"
        assert doc_id not in docs, f"id collision: {doc_id}"
        lines = [line.strip() for line in text.replace("\r", "").split("\n") if line.strip()]
        docs[doc_id] = {"_id": doc_id, "title": debate.replace("-", " ") if split == "test" else "", "text": "  ".join(lines)}
    (args.out / "qrels").mkdir(parents=True, exist_ok=True)
    with (args.out / "corpus.jsonl").open("w", encoding="utf-8") as corpus:
        corpus.writelines(json.dumps(doc, ensure_ascii=False) + "\n" for doc in docs.values())
    queries = [doc_id for doc_id in docs if doc_id.startswith("test-") and doc_id.endswith("a")]
    with (args.out / "queries.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps({"_id": q, "text": docs[q]["text"]}, ensure_ascii=False) + "\n" for q in queries)
    judged = [(q, q[:-1] + "b") for q in queries if q[:-1] + "b" in docs]
    with (args.out / "qrels" / "test.tsv").open("w", encoding="utf-8") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        qrels.writelines(f"{q}\t{counter}\t1\n" for q, counter in judged)
    print(f"docs={len(docs)} queries={len(queries)} judged={len(judged)}")


if __name__ == "__main__":
    main()
