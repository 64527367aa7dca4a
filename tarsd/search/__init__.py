"""Answering a query from the index: keyword and vector search fused by rank (searcher),
the note graph of links, backlinks and related notes (graph), and the Engine that wires store,
embedder, indexer and searcher for one vault (engine).

May import: config, markdown, vault, embed, store, index.
"""
