"""Tensor names, dtypes and shapes of a checkpoint directory, read from the safetensors headers only.

A .safetensors file starts with an 8-byte little-endian header length N, then N bytes of JSON:
`{"name": {"dtype": "BF16", "shape": [4096, 12288], "data_offsets": [begin, end]}, ...,
"__metadata__": {...}}`, then the raw tensor bytes. Reading the header is a few KB even for a
multi-GB shard; no weights are loaded and no torch is needed.

`read_header(path)` parses one file; `read_dir(path)` collects every tensor of a checkpoint directory
(`model.safetensors.index.json` shards, or every top-level *.safetensors). `write_file()` writes a
valid file with zero-filled data (tests and fixtures).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the safetensors format's own limit

DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
               "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


class HeaderError(Exception):
    """A file that is not a readable safetensors file (the message is one sentence)."""


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]
    file: str = ""


@dataclass
class DirTensors:
    tensors: dict[str, TensorInfo] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # the safetensors files read (names relative to the dir)
    note: str = ""  # why nothing (or not everything) was read; "" when every weight file was read

    @property
    def read(self) -> bool:
        return bool(self.tensors)

    def shape(self, name: str) -> tuple[int, ...] | None:
        t = self.tensors.get(name)
        return None if t is None else t.shape

    def as_json(self) -> dict[str, Any]:
        return {"files": list(self.files), "count": len(self.tensors), "note": self.note,
                "tensors": {k: {"dtype": v.dtype, "shape": list(v.shape)} for k, v in sorted(self.tensors.items())}}


def read_header(path: str | Path) -> dict[str, TensorInfo]:
    """name -> TensorInfo of one .safetensors file (raises HeaderError)."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise HeaderError(f"{p.name} is shorter than a safetensors header ({len(head)} bytes)")
            (n,) = struct.unpack("<Q", head)
            if n == 0 or n > MAX_HEADER_BYTES:
                raise HeaderError(f"{p.name} declares a {n}-byte header: not a safetensors file")
            raw = f.read(n)
    except OSError as exc:
        raise HeaderError(f"cannot read {p.name}: {exc.strerror or exc}") from None
    if len(raw) < n:
        raise HeaderError(f"{p.name} is truncated inside its header ({len(raw)} of {n} bytes)")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HeaderError(f"{p.name} has a header that is not JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise HeaderError(f"{p.name} has a header that is not a JSON object")
    out: dict[str, TensorInfo] = {}
    for name, spec in obj.items():
        if name == "__metadata__":
            continue
        if not isinstance(spec, dict) or not isinstance(spec.get("shape"), list):
            raise HeaderError(f"{p.name}: tensor {name!r} has no shape in the header")
        try:
            shape = tuple(int(x) for x in spec["shape"])
        except (TypeError, ValueError):
            raise HeaderError(f"{p.name}: tensor {name!r} has a malformed shape {spec['shape']!r}") from None
        out[name] = TensorInfo(str(spec.get("dtype", "?")), shape, p.name)
    return out


def read_dir(path: str | Path) -> DirTensors:
    """Every tensor of a checkpoint directory, from its safetensors headers. Never raises."""
    d = Path(path)
    res = DirTensors()
    names: list[str] = []
    index = d / "model.safetensors.index.json"
    if index.is_file():
        try:
            wm = json.loads(index.read_text(encoding="utf-8")).get("weight_map") or {}
            names = sorted({str(v) for v in wm.values()})
        except (OSError, UnicodeDecodeError, ValueError, AttributeError) as exc:
            res.note = f"model.safetensors.index.json is unreadable ({exc})"
    if not names:
        names = sorted(p.name for p in d.glob("*.safetensors") if p.is_file())
    if not names:
        bins = sorted(p.name for p in d.glob("*.bin") if p.is_file())
        if bins:
            res.note = (f"weights are {', '.join(bins[:3])} (PyTorch pickle): tensor names are not read "
                        "without loading them")
        elif not res.note:
            res.note = "no .safetensors files"
        return res
    problems: list[str] = []
    for name in names:
        try:
            res.tensors.update(read_header(d / name))
            res.files.append(name)
        except HeaderError as exc:
            problems.append(str(exc))
    if problems:
        res.note = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
    return res


def write_file(path: str | Path, tensors: Mapping[str, tuple[str, tuple[int, ...] | list[int]]],
               metadata: Mapping[str, str] | None = None) -> Path:
    """Write a valid .safetensors file whose tensors are all zeros (name -> (dtype, shape))."""
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, (dtype, shape) in tensors.items():
        n = DTYPE_BYTES[dtype]
        for x in shape:
            n *= int(x)
        header[name] = {"dtype": dtype, "shape": [int(x) for x in shape], "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the reference writer pads the header to 8 bytes
    p = Path(path)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        f.write(b"\0" * offset)
    return p


__all__ = ["DirTensors", "HeaderError", "TensorInfo", "read_dir", "read_header", "write_file"]
