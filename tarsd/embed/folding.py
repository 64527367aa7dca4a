"""The local model's int8 weights folded to float once, into the user cache, by a child process.

The shipped all-MiniLM-L6-v2 stores its weights as int8 that the graph casts to float and
scales as it runs (Cast, then Mul by a scale). onnxruntime folds those into float copies when
it loads the model and keeps the int8 ones too: about 190 MB for a 22 MB file. tars folds
them once and runs the result, in a child process so that tarsd never holds the folding's peak.

Folded whole, the word-embedding table alone is 30,522 x 384 floats, 47 MB of the model's 91,
though a query looks up a few dozen of its rows. So before folding, each lookup of an int8
table (Gather of Mul(Cast(q), scale)) is rewritten to look up the int8 rows and their scales
first and convert only those (Mul(Cast(Gather(q)), Gather(scale))). The numbers are the same,
row by row, so the vectors are too (tests/embed/test_folding.py); the table stays 12 MB.

The fold also drops the NaN guard torch's export puts after each attention softmax
(Where(IsNaN(p), 0, p)). A softmax gives NaN only for a row whose every key is masked with
-inf: a text of no tokens. This model masks with the float minimum instead, so the guard never
fires, and onnx_model.py gives a text of no tokens the zero vector for models that do. The
guard read every attention matrix twice: 13% of the model's time, for vectors bit for bit the
same.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from pathlib import Path

log = logging.getLogger(__name__)

FOLD_TIMEOUT_SECONDS = 300
# In the folded file's name: a change to how models are folded makes a new file.
FOLDING = "v3"


def folded_model(model: Path, cache: Path) -> Path:
    """The model with its weights folded to float (its embedding tables kept int8), made once
    and kept in ``cache``; the original when folding fails (it still works, with more memory)."""
    digest = hashlib.sha256(model.read_bytes()).hexdigest()[:16]
    target = cache / f"folded-{FOLDING}-{digest}.onnx"
    if target.is_file():
        return target
    try:
        cache.mkdir(parents=True, exist_ok=True)
        temp = cache / f".folded-{digest}.{os.getpid()}.tmp"
        subprocess.run(
            [sys.executable, "-m", "tarsd.embed.folding", str(model), str(temp)],
            check=True,
            capture_output=True,
            text=True,
            timeout=FOLD_TIMEOUT_SECONDS,
        )
        os.replace(temp, target)
        for older in cache.glob(f"folded-*{digest}.onnx"):  # the same model folded by an older tars: 90 MB each
            if older != target:
                older.unlink(missing_ok=True)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = exc.stderr.strip().splitlines()[-1] if isinstance(exc, subprocess.CalledProcessError) and exc.stderr else exc
        log.warning("could not fold the embedding model's weights (%s): running %s as it is, with more memory", detail, model)
        return model
    return target


def look_up_int8_rows(model) -> int:
    """Rewrite each Gather from a dequantized int8 table (axis 0, a scale per row or one for
    all) to gather the int8 rows and scales, then convert: see the module's docstring. Returns
    how many lookups were rewritten. ``model`` is an onnx.ModelProto, changed in place."""
    from onnx import TensorProto, helper

    graph = model.graph
    initializers = {init.name: init for init in graph.initializer}
    producer = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            consumers[name] = consumers.get(name, 0) + 1

    rewritten = 0
    for gather in [node for node in graph.node if node.op_type == "Gather"]:
        axis = next((attribute.i for attribute in gather.attribute if attribute.name == "axis"), 0)
        scaled = producer.get(gather.input[0])
        if axis != 0 or scaled is None or scaled.op_type != "Mul" or consumers.get(gather.input[0]) != 1:
            continue
        cast = next((producer.get(name) for name in scaled.input if getattr(producer.get(name), "op_type", "") == "Cast"), None)
        scale_name = next((name for name in scaled.input if name in initializers), None)
        if cast is None or scale_name is None or cast.input[0] not in initializers:
            continue
        table, scale = initializers[cast.input[0]], initializers[scale_name]
        per_row = list(scale.dims) == [table.dims[0], 1]
        if table.data_type != TensorProto.INT8 or not (per_row or all(size == 1 for size in scale.dims)):
            continue
        ids, out = gather.input[1], gather.output[0]
        steps = [
            helper.make_node("Gather", [table.name, ids], [f"{out}/int8"], axis=0),
            helper.make_node("Cast", [f"{out}/int8"], [f"{out}/float"], to=TensorProto.FLOAT),
        ]
        if per_row:
            steps.append(helper.make_node("Gather", [scale.name, ids], [f"{out}/scale"], axis=0))
        steps.append(helper.make_node("Mul", [f"{out}/float", f"{out}/scale" if per_row else scale.name], [out]))
        at = list(graph.node).index(gather)
        graph.node.remove(gather)
        for offset, step in enumerate(steps):
            graph.node.insert(at + offset, step)
        # The float table's nodes go when this lookup was all that read them, or onnxruntime
        # would still fold them into the 47 MB table.
        graph.node.remove(scaled)
        if consumers.get(cast.output[0]) == 1:
            graph.node.remove(cast)
        rewritten += 1
    return rewritten


def drop_softmax_nan_guards(model) -> int:
    """Rewrite each Where(IsNaN(p), c, p) over a Softmax's output p to p itself: see the
    module's docstring. Returns how many were dropped. ``model`` is changed in place."""
    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    graph_outputs = {output.name for output in graph.output}
    dropped = 0
    for where in [node for node in graph.node if node.op_type == "Where"]:
        is_nan = producer.get(where.input[0])
        probabilities = where.input[2]
        if is_nan is None or is_nan.op_type != "IsNaN" or is_nan.input[0] != probabilities:
            continue
        if getattr(producer.get(probabilities), "op_type", "") != "Softmax" or where.output[0] in graph_outputs:
            continue
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name == where.output[0]:
                    node.input[i] = probabilities
        graph.node.remove(where)
        if not any(is_nan.output[0] in node.input for node in graph.node):
            graph.node.remove(is_nan)
        dropped += 1
    return dropped


def fold(source: Path, target: Path) -> None:
    """Rewrite the int8 lookups and drop the NaN guards, then let onnxruntime fold the rest
    (the basic level only: the result stays portable, unlike the hardware-specific higher
    levels)."""
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(source))
    rewritten = look_up_int8_rows(model)
    dropped = drop_softmax_nan_guards(model)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(target)
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    print(f"{rewritten} int8 table lookups kept int8, {dropped} softmax NaN guards dropped")


if __name__ == "__main__":
    fold(Path(sys.argv[1]), Path(sys.argv[2]))
