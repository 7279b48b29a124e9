#!/usr/bin/env python3
"""gen_tf.py — Keras models through tf2onnx, for the zoo (issue 14).

TensorFlow users reach ONNX through tf2onnx, which writes its own shape
idioms (NHWC <-> NCHW transposes, Shape/StridedSlice chains, Keras's
masks). Two small Keras models with random weights (fixed seeds), converted
by tf2onnx.convert.from_function at opset 17 with dynamic axes, written
like gen_zoo.py's cases with ONNX Runtime's outputs (checked against
Keras's own) at three shapes:

    tests/zoo/keras_text/tf2onnx   ids: i32[batch, seq] -> f32[batch, 4]:
                                   Embedding, Conv1D 'same', global average
                                   and max pooling over the length, Dense
                                   softmax
    tests/zoo/keras_cnn/tf2onnx    x: f32[batch, 24, 24, 3] (NHWC) -> f32[batch, 10]:
                                   Conv2D, MaxPool2D, Conv2D 'same',
                                   BatchNormalization, global average pool,
                                   Dense

TensorFlow is a large install, kept out of the main environment:

    python3 -m venv /tmp/tfenv
    /tmp/tfenv/bin/pip install tensorflow-cpu tf2onnx onnx==1.17.0 onnxruntime
    /tmp/tfenv/bin/python tests/zoo/gen_tf.py

(made with TensorFlow 2.21, Keras 3.15, tf2onnx 1.17). The files are
committed; tests/zoo/expect.txt holds them like the other cases.
"""
import os
import shutil
import sys

import numpy as np
import onnx
import onnxruntime as ort
import tensorflow as tf
import tf2onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
keras = tf.keras


def keras_text():
    tf.random.set_seed(11)
    ids = keras.Input(shape=(None,), dtype="int32", name="ids")
    x = keras.layers.Embedding(100, 16)(ids)
    x = keras.layers.Conv1D(16, 3, padding="same", activation="relu")(x)
    x = keras.layers.Concatenate()([keras.layers.GlobalAveragePooling1D()(x),
                                    keras.layers.GlobalMaxPooling1D()(x)])
    out = keras.layers.Dense(4, activation="softmax")(x)
    model = keras.Model(ids, out)
    spec = [tf.TensorSpec([None, None], tf.int32, name="ids")]
    rng = np.random.default_rng(11)
    data = [[rng.integers(0, 100, size=s).astype(np.int32)] for s in [(2, 6), (1, 13), (3, 4)]]
    return model, spec, data


def keras_cnn():
    tf.random.set_seed(12)
    inp = keras.Input(shape=(24, 24, 3), name="x")
    x = keras.layers.Conv2D(8, 3, activation="relu")(inp)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(8, 3, padding="same")(x)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    out = keras.layers.Dense(10)(x)
    model = keras.Model(inp, out)
    bn = model.layers[4]  # non-trivial running statistics
    g = np.random.default_rng(12)
    bn.set_weights([g.uniform(0.5, 1.5, 8), g.normal(0, 0.1, 8), g.normal(0, 0.1, 8), g.uniform(0.5, 1.5, 8)])
    spec = [tf.TensorSpec([None, 24, 24, 3], tf.float32, name="x")]
    rng = np.random.default_rng(12)
    data = [[rng.standard_normal((b, 24, 24, 3)).astype(np.float32)] for b in (2, 1, 3)]
    return model, spec, data


MODELS = [keras_text, keras_cnn]


def write(name, model, spec, data):
    fn = tf.function(lambda *a: model(*a, training=False), input_signature=spec)
    m, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=17, output_path=None)
    m.producer_name = "disc gen_tf.py (tf2onnx %s, TensorFlow %s)" % (tf2onnx.__version__, tf.__version__)
    m.doc_string = ""
    onnx.checker.check_model(m, full_check=True)
    d = os.path.join(HERE, name, "tf2onnx")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, "model.onnx")
    onnx.save(m, path)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    in_names = [i.name for i in sess.get_inputs()]
    out_names = [o.name for o in sess.get_outputs()]
    for k, inputs in enumerate(data):
        outputs = sess.run(None, dict(zip(in_names, inputs)))
        want = model(*inputs, training=False)
        np.testing.assert_allclose(outputs[0], np.asarray(want), rtol=1e-4, atol=1e-5)
        sd = os.path.join(d, "test_data_set_%d" % k)
        os.makedirs(sd)
        for i, (n, a) in enumerate(zip(in_names, inputs)):
            onnx.save_tensor(numpy_helper.from_array(a, n), os.path.join(sd, "input_%d.pb" % i))
        for i, (n, a) in enumerate(zip(out_names, outputs)):
            onnx.save_tensor(numpy_helper.from_array(np.asarray(a), n), os.path.join(sd, "output_%d.pb" % i))
    print("%-12s %3d nodes  %s" % (name, len(m.graph.node), " ".join(sorted({n.op_type for n in m.graph.node}))))


def main(argv):
    for fn in MODELS:
        if not argv or fn.__name__ in argv:
            write(fn.__name__, *fn())


if __name__ == "__main__":
    main(sys.argv[1:])
