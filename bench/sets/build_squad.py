"""Builds the SQuAD set (BEIR layout) from SQuAD v1.1 dev (dev-v1.1.json, md5
3e85deb501d4e538b6bc56f786231552): every dev paragraph is a document (id ARTICLE-PARAGRAPH,
title the article's), every question a query judged against the paragraph it was written on.

    python build_squad.py dev-v1.1.json OUTDIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()
    articles = json.loads(args.source.read_text(encoding="utf-8"))["data"]
    docs, questions = [], []
    for a, article in enumerate(articles):
        for p, paragraph in enumerate(article["paragraphs"]):
            doc_id = f"{a}-{p}"
            docs.append({"_id": doc_id, "title": article["title"].replace("_", " "), "text": paragraph["context"]})
            questions += [(qa["id"], qa["question"].strip(), doc_id) for qa in paragraph["qas"]]
    (args.out / "qrels").mkdir(parents=True, exist_ok=True)
    with (args.out / "corpus.jsonl").open("w", encoding="utf-8") as corpus:
        corpus.writelines(json.dumps(doc, ensure_ascii=False) + "\n" for doc in docs)
    with (
        (args.out / "queries.jsonl").open("w", encoding="utf-8") as out,
        (args.out / "qrels" / "test.tsv").open("w", encoding="utf-8") as qrels,
    ):
        qrels.write("query-id\tcorpus-id\tscore\n")
        for question_id, text, doc_id in questions:
            out.write(json.dumps({"_id": question_id, "text": text}, ensure_ascii=False) + "\n")
            qrels.write(f"{question_id}\t{doc_id}\t1\n")
    print(f"docs={len(docs)} queries={len(questions)}")


if __name__ == "__main__":
    main()
