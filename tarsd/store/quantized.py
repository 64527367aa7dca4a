"""Passage vectors held as 8-bit rows: a quarter of float32's memory, and of its scan.

At 100,000 notes the float32 matrix alone was 612 MB (398,234 passages × 384 dimensions). Each
row is now rounded once, with a scale of its own: its largest component becomes ±127. A row is
stored as uint8 (the value plus 128) because onnxruntime's integer product (MatMulInteger, on
MLAS's x86 and arm64 kernels) is fast for uint8 rows times an int8 column: 400,000 rows in
about 8 ms on this 2-core box, where numpy's float32 product takes 20 and its int8 product 70.

A search scans every row with the query rounded too, then scores its best candidates again with
the query as it is (only the row's rounding is left: a cosine moves by about 0.001, see
tests/store/test_store.py). The query is rounded to ±63, not ±127: x86 CPUs without VNNI add
pairs of uint8 × int8 products in 16 bits, and 255 × 127 × 2 would overflow them.
"""

from __future__ import annotations

import base64

import numpy as np

ROW_LEVELS = 127
QUERY_LEVELS = 63
ZERO = 128  # a stored row's zero: uint8 codes hold value + 128


def quantize_rows(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(uint8 codes, float32 scale per row) for float rows: row ≈ (codes - 128) * scale."""
    vectors = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    largest = np.abs(vectors).max(axis=1) if vectors.shape[1] else np.zeros(len(vectors), np.float32)
    scales = np.where(largest > 0, largest / ROW_LEVELS, 1.0).astype(np.float32)
    codes = np.rint(vectors / scales[:, None]) + ZERO
    return np.clip(codes, 0, 255).astype(np.uint8), scales


def exact_scores(codes: np.ndarray, scales: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each given row's dot product with the float query (rows as stored: rounded once)."""
    return ((codes.astype(np.float32) - ZERO) @ query) * scales


def build_scan_model() -> bytes:
    """The scan as an ONNX graph: dots = (rows - 128) · query, in int32, the stored rows against
    the rounded query as a column. SCAN_MODEL holds what this returns (tests/store/test_store.py
    checks it): importing onnx here cost tarsd 11 MB."""
    from onnx import TensorProto, helper

    zero = helper.make_tensor("zero", TensorProto.UINT8, [], [ZERO])
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["rows", "query", "zero"], ["dots"])],
        "scan",
        [
            helper.make_tensor_value_info("rows", TensorProto.UINT8, [None, None]),
            helper.make_tensor_value_info("query", TensorProto.INT8, [None, 1]),
        ],
        [helper.make_tensor_value_info("dots", TensorProto.INT32, [None, 1])],
        initializer=[zero],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # readable by every onnxruntime tarsd installs
    return model.SerializeToString()


SCAN_MODEL = base64.b64decode(
    "CAg6fwooCgRyb3dzCgVxdWVyeQoEemVybxIEZG90cyINTWF0TXVsSW50ZWdlchIEc2NhbioMEAIqAoABQgR6ZXJvWhIKBHJvd3MSCgoI"
    "CAISBAoACgBaFQoFcXVlcnkSDAoKCAMSBgoACgIIAWIUCgRkb3RzEgwKCggGEgYKAAoCCAFCBAoAEA0="
)


class Scan:
    """Every stored row's approximate dot product with a query, on onnxruntime's threads."""

    def __init__(self, threads: int):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        # Idle threads sleep: spinning ones took the CPU a hybrid search's keyword query and the
        # next query's embedding needed (numpy's BLAS threads did the same, matrix.py).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.enable_cpu_mem_arena = False  # the output is freed after each scan, not kept in an arena
        options.log_severity_level = 3
        self._session = ort.InferenceSession(SCAN_MODEL, options, providers=["CPUExecutionProvider"])

    def __call__(self, codes: np.ndarray, scales: np.ndarray, query: np.ndarray) -> np.ndarray:
        """float32 scores of every row of ``codes`` (C-contiguous) against the unit ``query``."""
        largest = float(np.abs(query).max(initial=0.0))
        if len(codes) == 0 or largest == 0.0:
            return np.zeros(len(codes), dtype=np.float32)
        step = largest / QUERY_LEVELS
        column = np.rint(query / step).astype(np.int8).reshape(-1, 1)
        (dots,) = self._session.run(None, {"rows": codes, "query": column})
        scores = dots[:, 0].astype(np.float32)
        scores *= scales
        scores *= np.float32(step)
        return scores
