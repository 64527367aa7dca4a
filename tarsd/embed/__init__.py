"""Passage vectors: the ONNX model run in process (onnx_model), and the embedders that load
it in the background, batch passages and say when they are not ready (embedder).

May import: config, markdown.
"""
