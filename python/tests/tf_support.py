"""Real TensorFlow on the other side of ocf.tensorflow's tests, in a subprocess.

Importing TensorFlow takes seconds, so one TensorFlow process serves the
whole test session (:func:`run`): ``python tf_support.py serve`` imports
TensorFlow once and runs commands read from stdin, one JSON list per line,
answering each with a JSON line on its own stdout (TensorFlow's output goes
to stderr). It serves the test_tf_bundle_*.py files (the first two commands) and
test_tf_interop.py (the ``scenarios`` commands of tf_scenarios.py), so a
session starts TensorFlow once, not four times. Each command also runs on
its own as ``python tf_support.py COMMAND ARGS...``:

    python tf_support.py generate OUT
        TensorFlow writes checkpoints under OUT (every dtype through the
        SaveV2 op, the sub-byte and quantized ones in a checkpoint of their
        own, an object-based tf.train.Checkpoint with a tf.data
        iterator, a MaxShardSizePolicy multi-shard checkpoint, an index of
        thousands of keys, a tf.compat.v1 Saver with a partitioned variable,
        a sharded v1 Saver over two devices) and then reads each back with
        its own reader, tf.train.load_checkpoint, into OUT/<name>.json.

    python tf_support.py readback OUT PREFIX...
        TensorFlow reads each PREFIX (written by OCF) into OUT/<basename>.json,
        and what tf.train.latest_checkpoint / get_checkpoint_state make of the
        directory of each into OUT/<basename>.state.json.

    python tf_support.py scenarios-build OUT
    python tf_support.py scenarios-check JOBS OUT
        tf_scenarios.py's ``build`` and ``check``.

A manifest maps each tensor key to {"dtype": TensorFlow's dtype name,
"numpy_dtype": the NumPy dtype name of what TensorFlow's reader returned
(int8 for a qint8), "shape": [...], "data": base64 of the raw row-major
bytes} or, for strings, {"strings": [base64 per element]}; dtypes OCF
refuses to read (variant, resource) are recorded as {"dtype": ...,
"unsupported": true}. The tests
compare OCF's results with these values bit for bit, so every expected
value comes from TensorFlow, not from the code under test.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import select
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np

SCRIPT = Path(__file__).resolve()
# The checkpoints `generate` writes: name -> prefix relative to OUT.
GENERATED = {
    "alldtypes": "alldtypes/ckpt",
    "subbyte": "subbyte/ckpt",
    "object": "object/ckpt-1",
    "sharded": "sharded/ckpt",
    "manykeys": "manykeys/ckpt",
    "v1_partitioned": "v1_partitioned/model.ckpt-5",
    "v1_sharded": "v1_sharded/model.ckpt",
}
MANY_KEYS = 6000
LONG_STRING = bytes(range(256)) * 400  # 100 KiB, every byte value
STRINGS = [b"", b"a", b"\x00\xff\x00", "ünïcode ✓".encode(), LONG_STRING, b"end"]


def complex_from(real: np.ndarray, imag: np.ndarray) -> np.ndarray:
    """Complex values with exactly these parts (arithmetic would turn inf into nan)."""
    out = np.empty(real.shape, np.complex128)
    out.real, out.imag = real, imag
    return out


def numeric_samples() -> dict[str, np.ndarray]:
    """A vector, a scalar and empty tensors per fixed-width dtype TensorFlow saves."""
    rng = np.random.default_rng(5)
    floats = np.concatenate(
        [rng.standard_normal(20) * 50, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-4]]
    )
    base: dict[str, np.ndarray] = {
        "float16": floats.astype(np.float16),
        "float32": floats.astype(np.float32).reshape(2, 13),
        "float64": floats,
        "bfloat16": floats.astype(ml_dtypes.bfloat16),
        "int8": np.array([-128, -1, 0, 1, 127], np.int8),
        "int16": np.array([-32768, -2, 0, 32767], np.int16),
        "int32": rng.integers(-(2**31), 2**31 - 1, size=(3, 2, 2), dtype=np.int32),
        "int64": np.array([-(2**63), -1, 0, 2**63 - 1], np.int64),
        "uint8": np.arange(256, dtype=np.uint8).reshape(16, 16),
        "uint16": np.array([0, 1, 65535], np.uint16),
        "uint32": np.array([0, 7, 2**32 - 1], np.uint32),
        "uint64": np.array([0, 7, 2**64 - 1], np.uint64),
        "complex64": complex_from(floats[:13], floats[13:]).astype(np.complex64),
        "complex128": complex_from(floats[13:], floats[:13]),
        "bool": np.array([[True, False, True], [False, False, True]]),
        "float8_e5m2": floats.astype(ml_dtypes.float8_e5m2),
        "float8_e4m3fn": np.clip(floats, -448, 448).astype(ml_dtypes.float8_e4m3fn),
    }
    out: dict[str, np.ndarray] = {}
    for name, array in base.items():
        out[f"t/{name}"] = array
        out[f"t/{name}_scalar"] = array.reshape(-1)[1].copy()
        out[f"t/{name}_empty"] = array.reshape(-1)[:0].reshape(2, 0, 3)
    return out


# TensorFlow's sub-byte types: every value of each, as ml_dtypes holds them.
SUB_BYTE = {
    "int4": np.arange(-8, 8),
    "uint4": np.arange(16),
    "int2": np.arange(-2, 2),
    "uint2": np.arange(4),
    # Every float4_e2m1fn value: both signs of 0, 0.5, 1, 1.5, 2, 3, 4, 6.
    "float4_e2m1fn": np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]),
}
# TensorFlow's quantized types, and the plain integers its reader returns for them.
QUANTIZED = {
    "qint8": np.int8,
    "quint8": np.uint8,
    "qint16": np.int16,
    "quint16": np.uint16,
    "qint32": np.int32,
}


def exotic_samples() -> dict[str, tuple[np.ndarray, str]]:
    """Per sub-byte and quantized dtype, an array in the NumPy dtype TensorFlow's reader
    returns for it and the TensorFlow dtype name: every sub-byte value (as a 2-d tensor,
    a scalar and an empty tensor), the extremes of each quantized type."""
    out: dict[str, tuple[np.ndarray, str]] = {}
    for name, values in SUB_BYTE.items():
        array = values.astype(getattr(ml_dtypes, name))
        out[f"x/{name}"] = (array.reshape(2, -1), name)
        out[f"x/{name}_scalar"] = (array[-1].copy(), name)
        out[f"x/{name}_empty"] = (array[:0].reshape(0, 3), name)
    for name, base in QUANTIZED.items():
        info = np.iinfo(base)
        out[f"x/{name}"] = (np.array([[info.min, info.max], [0, 1], [info.max // 3, 7]],
                                     dtype=base), name)
    return out


def string_samples() -> dict[str, np.ndarray]:
    def strings(values: list[bytes], shape: tuple[int, ...]) -> np.ndarray:
        array = np.empty(len(values), dtype=object)
        array[:] = values
        return array.reshape(shape)

    return {
        "s/vector": strings(STRINGS, (6,)),
        "s/matrix": strings(STRINGS, (2, 3)),
        "s/scalar": strings([b"just one"], ()),
        "s/empty_scalar": strings([b""], ()),
        "s/empty": strings([], (0, 4)),
    }


# Manifests (both sides).


def manifest_entry(value: np.ndarray, dtype_name: str) -> dict[str, Any]:
    if dtype_name == "string":
        flat = [bytes(v) for v in np.asarray(value, dtype=object).reshape(-1)]
        return {
            "dtype": "string",
            "shape": list(np.shape(value)),
            "strings": [base64.b64encode(v).decode() for v in flat],
        }
    array = np.asarray(value)  # not ascontiguousarray: it makes scalars 1-d
    return {
        "dtype": dtype_name,
        "numpy_dtype": array.dtype.name,
        "shape": list(array.shape),
        "data": base64.b64encode(array.tobytes()).decode(),
    }


def load_manifest(path: Path) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = json.loads(path.read_text())
    return result


def expected_bytes(entry: dict[str, Any]) -> bytes:
    return base64.b64decode(entry["data"])


def expected_strings(entry: dict[str, Any]) -> list[bytes]:
    return [base64.b64decode(s) for s in entry["strings"]]


class TensorFlowWorker:
    """The session's TensorFlow process (``tf_support.py serve``), started on first use."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
            self._log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
            self._process = subprocess.Popen(
                [sys.executable, str(SCRIPT), "serve"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                cwd=SCRIPT.parent,
                env=env,
            )
        return self._process

    def call(self, args: tuple[str, ...], timeout: float) -> None:
        """Run one command; fail with TensorFlow's traceback and the process's output."""
        process = self._start()
        assert process.stdin is not None
        assert process.stdout is not None
        process.stdin.write(json.dumps(list(args)).encode() + b"\n")
        process.stdin.flush()
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        line = process.stdout.readline() if ready else b""
        reply = json.loads(line) if line else {"error": "no answer (timeout or crash)"}
        if "error" in reply:
            output = self.output
            self.close()
            raise RuntimeError(f"tf_support {args[0]} failed:\n{reply['error']}\n{output}")

    @property
    def output(self) -> str:
        """The last 5000 characters the process wrote to stderr."""
        if self._log is None or self._log.closed:
            return ""
        self._log.seek(0)
        return str(self._log.read().decode(errors="replace"))[-5000:]

    def close(self) -> None:
        """End the process (end of input ends its loop)."""
        process, self._process = self._process, None
        if process is not None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            assert process.stdout is not None
            process.stdout.close()
        if self._log is not None:  # else left to the garbage collector at exit
            self._log.close()
            self._log = None


WORKER = TensorFlowWorker()
atexit.register(WORKER.close)


def run(*args: str, timeout: float = 600) -> None:
    """Run one command in the session's TensorFlow process; fail with its output (skip
    the test that asked when TensorFlow is not installed)."""
    from frameworks import skip_unless_installed

    skip_unless_installed("tensorflow")
    WORKER.call(args, timeout)


# The TensorFlow side (only ever run in the subprocess).


# Partitioned string tensors TensorFlow writes but its own reader refuses
# ("Dtype string not supported"): their expected value is what was saved.
SAVED_PARTITIONED_STRINGS = {
    "words/.ATTRIBUTES/VARIABLE_VALUE": [b"x" * 700, b"y" * 900],
    "words": [[b"a", b"bb"], [b"ccc", b""], [b"d", b"e"]],
}


# Dtypes OCF lists but refuses to read.
UNSUPPORTED = ("variant", "resource")


def tf_dump(tf: Any, prefix: str, out: Path) -> None:
    """Read every tensor of ``prefix`` with TensorFlow's reader into a manifest."""
    reader = tf.train.load_checkpoint(prefix)
    manifest: dict[str, Any] = {}
    for key, dtype in sorted(reader.get_variable_to_dtype_map().items()):
        if dtype.name in UNSUPPORTED:
            manifest[key] = {"dtype": dtype.name, "unsupported": True}
            continue
        try:
            value = reader.get_tensor(key)
        except ValueError:
            if dtype.name != "string" or key not in SAVED_PARTITIONED_STRINGS:
                raise
            value = np.array(SAVED_PARTITIONED_STRINGS[key], dtype=object)
        manifest[key] = manifest_entry(value, dtype.name)
    out.write_text(json.dumps(manifest))


def tf_save_v2(tf: Any, prefix: str, tensors: dict[str, Any]) -> None:
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=prefix,
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tensors[n] for n in names],
    )


def tf_alldtypes(tf: Any, prefix: str) -> None:
    tensors: dict[str, Any] = {k: tf.constant(v) for k, v in numeric_samples().items()}
    tensors.update({k: tf.constant(v, dtype=tf.string) for k, v in string_samples().items()})
    tf_save_v2(tf, prefix, tensors)


def tf_subbyte(tf: Any, prefix: str) -> None:
    """Every sub-byte and quantized dtype through SaveV2, beside a plain tensor."""
    tensors = {
        key: tf.constant(array, dtype=tf.as_dtype(name))
        for key, (array, name) in exotic_samples().items()
    }
    tensors["u/plain"] = tf.constant(np.array([1, 2], np.int32))
    tf_save_v2(tf, prefix, tensors)


def tf_object(tf: Any, prefix_dir: str) -> None:
    class Net(tf.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.kernel = tf.Variable(np.arange(12, dtype=np.float32).reshape(3, 4))
            self.bias = tf.Variable(np.array([0.5, -1.5, 2.5, 0.0], np.float16))
            self.step = tf.Variable(np.int64(42))

    net = Net()
    iterator = iter(tf.data.Dataset.range(10))
    next(iterator)
    ckpt = tf.train.Checkpoint(net=net, it=iterator, name=tf.Variable("model-\u03b1"))
    ckpt.save(os.path.join(prefix_dir, "ckpt"))


def tf_sharded(tf: Any, prefix: str) -> None:
    variables = {f"v{i}": tf.Variable(tf.fill([300], float(i))) for i in range(4)}
    variables["big"] = tf.Variable(np.arange(3000, dtype=np.float64).reshape(1000, 3))
    words = SAVED_PARTITIONED_STRINGS["words/.ATTRIBUTES/VARIABLE_VALUE"]
    variables["words"] = tf.Variable(tf.constant(words))
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=5000)
    options = tf.train.CheckpointOptions(experimental_sharding_callback=policy)
    tf.train.Checkpoint(**variables).write(prefix, options=options)


def tf_manykeys(tf: Any, prefix: str) -> None:
    tensors = {
        f"layer_{i:05d}/{(i * 2654435761) % 2**32:08x}{i * 7919:012d}/.ATTRIBUTES/VALUE": (
            tf.constant([float(i)], dtype=tf.float32)
        )
        for i in range(MANY_KEYS)
    }
    tf_save_v2(tf, prefix, tensors)


def tf_v1_partitioned(tf: Any, prefix: str) -> None:
    v1 = tf.compat.v1
    with tf.Graph().as_default(), v1.Session() as session:
        part = v1.get_variable(
            "emb",
            initializer=tf.constant(np.arange(40, dtype=np.float32).reshape(10, 4)),
            partitioner=v1.fixed_size_partitioner(3),
        )
        del part
        v1.get_variable("dense/kernel", initializer=tf.constant(np.eye(3, dtype=np.float64)))
        words = tf.constant(np.array(SAVED_PARTITIONED_STRINGS["words"], dtype=object))
        v1.get_variable(
            "words", initializer=words, partitioner=v1.fixed_size_partitioner(2), dtype=tf.string
        )
        session.run(v1.global_variables_initializer())
        v1.train.Saver().save(session, prefix.removesuffix("-5"), global_step=5)


def tf_v1_sharded(tf: Any, prefix: str) -> None:
    v1 = tf.compat.v1
    with tf.Graph().as_default(), v1.Session() as session:
        for device in range(2):
            with tf.device(f"/cpu:{device}"):
                for i in range(3):
                    v1.get_variable(
                        f"dev{device}/w{i}",
                        initializer=tf.constant(np.full((5,), device * 10 + i, np.int32)),
                    )
        session.run(v1.global_variables_initializer())
        v1.train.Saver(sharded=True).save(session, prefix)


def generate(out: Path) -> None:
    import tensorflow as tf  # type: ignore[import-untyped]

    writers = {
        "alldtypes": tf_alldtypes,
        "subbyte": tf_subbyte,
        "sharded": tf_sharded,
        "manykeys": tf_manykeys,
        "v1_partitioned": tf_v1_partitioned,
        "v1_sharded": tf_v1_sharded,
    }
    for name, write in writers.items():
        (out / GENERATED[name]).parent.mkdir(parents=True, exist_ok=True)
        write(tf, str(out / GENERATED[name]))
    tf_object(tf, str(out / "object"))
    for name, relative in GENERATED.items():
        tf_dump(tf, str(out / relative), out / f"{name}.json")


def readback(out: Path, prefixes: list[str]) -> None:
    import tensorflow as tf

    for prefix in prefixes:
        tf_dump(tf, prefix, out / f"{Path(prefix).name}.json")
        # What TensorFlow makes of the directory's `checkpoint` file, if any.
        directory = os.path.dirname(prefix)
        state = {"latest": tf.train.latest_checkpoint(directory)}
        if state["latest"] is not None:
            kept = tf.train.get_checkpoint_state(directory).all_model_checkpoint_paths
            state["all"] = list(kept)
        (out / f"{Path(prefix).name}.state.json").write_text(json.dumps(state))


def command(args: list[str]) -> None:
    """Run one command (``generate OUT``, ``readback OUT PREFIX...``, ``scenarios-build
    OUT``, ``scenarios-check JOBS OUT``)."""
    import tf_scenarios

    name, rest = args[0], args[1:]
    if name == "generate":
        Path(rest[0]).mkdir(parents=True, exist_ok=True)
        generate(Path(rest[0]))
    elif name == "readback":
        Path(rest[0]).mkdir(parents=True, exist_ok=True)
        readback(Path(rest[0]), rest[1:])
    elif name == "scenarios-build":
        tf_scenarios.build(rest[0])
    elif name == "scenarios-check":
        tf_scenarios.check(rest[0], rest[1])
    else:
        raise ValueError(f"unknown command {name!r}")


def start_tensorflow() -> None:
    """Two logical CPUs (for the sharded v1 Saver), set before TensorFlow starts its runtime."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def serve() -> None:
    """Run commands from stdin until it ends; answer each on the original stdout."""
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever TensorFlow or Keras prints goes to stderr, not into replies
    sys.stdout = sys.stderr
    start_tensorflow()
    for line in sys.stdin:
        try:
            command(json.loads(line))
            reply: dict[str, Any] = {"ok": True}
        except Exception:  # reported to the test that asked; the next command still runs
            reply = {"error": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve()
    else:
        start_tensorflow()
        command(sys.argv[1:])


# Hand-built files for hostile-input tests, independent of ocf.tensorflow:
# LevelDB's table layout assembled from scratch, so the reader is tested
# against the format rather than against its own writer.

TABLE_MAGIC = (0xDB4775248B80FB57).to_bytes(8, "little")


def varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def masked(data: bytes) -> int:
    import crc32c

    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def block(entries: list[tuple[bytes, bytes]], restart_interval: int = 16) -> bytes:
    """Block contents: prefix-compressed entries, restart array, restart count."""
    out, restarts, previous = bytearray(), [], b""
    for i, (key, value) in enumerate(entries):
        shared = 0
        if i % restart_interval == 0:
            restarts.append(len(out))
        else:
            while shared < min(len(key), len(previous)) and key[shared] == previous[shared]:
                shared += 1
        out += varint(shared) + varint(len(key) - shared) + varint(len(value))
        out += key[shared:] + value
        previous = key
    restarts = restarts or [0]
    out += b"".join(r.to_bytes(4, "little") for r in restarts)
    return bytes(out + len(restarts).to_bytes(4, "little"))


def framed(contents: bytes, block_type: int = 0) -> bytes:
    """A block on disk: contents, type byte, masked CRC-32C of both."""
    trailer = bytes([block_type])
    return contents + trailer + masked(contents + trailer).to_bytes(4, "little")


def table(
    blocks: list[list[tuple[bytes, bytes]]],
    *,
    encode: Any = None,
    block_type: int = 0,
) -> bytes:
    """A whole table: the data blocks (contents optionally re-encoded), metaindex, index, footer."""
    out = bytearray()
    index_entries = []
    for entries in blocks:
        contents = block(entries)
        stored = encode(contents) if encode is not None else contents
        handle = varint(len(out)) + varint(len(stored))
        out += framed(stored, block_type)
        index_entries.append((entries[-1][0], handle))
    metaindex = varint(len(out)) + varint(8)
    out += framed(block([]))
    index_contents = block(index_entries, restart_interval=1)
    index = varint(len(out)) + varint(len(index_contents))
    out += framed(index_contents)
    return bytes(out + (metaindex + index).ljust(40, b"\0") + TABLE_MAGIC)


def snappy_literals(data: bytes, chunk: int = 70) -> bytes:
    """A raw Snappy block of literal elements only (a valid, if poor, encoding)."""
    out = bytearray(varint(len(data)))
    for i in range(0, len(data), chunk):
        piece = data[i : i + chunk]
        if len(piece) <= 60:
            out.append((len(piece) - 1) << 2)
        else:
            out += bytes([60 << 2, len(piece) - 1])
        out += piece
    return bytes(out)
