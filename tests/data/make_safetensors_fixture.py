#!/usr/bin/env python3
"""Write tests/data/fixtures/small.safetensors with only the standard library (struct, json),
laid out as the Hugging Face safetensors library lays it out (header padded with spaces to a
multiple of 8, tensors back to back). test_data_safetensors reads it and checks every value.

To check compatibility with PyTorch by hand, where torch and safetensors are installed:
    python3 -c "from safetensors.torch import load_file; print(load_file('small.safetensors'))"
and the other way round: save_file({...}, 'x.safetensors') and open it with clp_st_open."""
import json
import os
import struct

TENSORS = [
    # name, dtype, shape, struct format, values
    ("weight.f32", "F32", [2, 3], "<6f", [1.0, -2.5, 3.25, 0.0, 1e-3, -1e10]),
    ("half.f16", "F16", [4], "<4e", [1.0, -2.0, 0.5, 65504.0]),
    ("brain.bf16", "BF16", [3], None, [1.0, -3.5, 0.15625]),
    ("steps.i64", "I64", [2], "<2q", [-(2 ** 40), 7]),
    ("ids.i32", "I32", [3], "<3i", [-1, 0, 2 ** 31 - 1]),
    ("empty.f32", "F32", [0, 4], "<0f", []),
    ("scalar.f32", "F32", [], "<1f", [42.0]),
]


def bf16_bytes(values):
    # bfloat16 is the top half of float32; these values are exact in bfloat16
    return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", v))[0])[2:]
                    for v in values)


def main():
    header, data = {}, b""
    for name, dtype, shape, fmt, values in TENSORS:
        raw = bf16_bytes(values) if fmt is None else struct.pack(fmt, *values)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"format": "pt", "note": "clpipe fixture"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                       "small.safetensors")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    print(out, 8 + len(text) + len(data), "bytes")


if __name__ == "__main__":
    main()
