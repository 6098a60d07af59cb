#!/usr/bin/python3
"""Writes the gzip files the tests and the gzip fuzz target's corpus read,
with Python's own gzip and zlib modules (an encoder other than the zlib
calls gpumem makes), so that reading is checked against files gpumem did
not write. Run from anywhere, with no arguments:

    /usr/bin/python3 tools/make_gzip_fixtures.py

It writes:
- tests/data/traces/leaky_mlp_train.json.gz: the recorded trace in two
  members (as `cat a.gz b.gz` makes), each with a file name in its header;
- fuzz/corpus/gzip/seed_*: small gzip files of the other formats, one with
  every optional header field, one truncated, one with a bad CRC, one with
  data after its end.
Every header has time 0, so rerunning gives the same bytes.
"""
import gzip
import os
import struct
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRACES = os.path.join(ROOT, "tests", "data", "traces")
SEEDS = os.path.join(ROOT, "fuzz", "corpus", "gzip")


def member(data, name=None):
    """One gzip member as Python's GzipFile writes it (FNAME when named)."""
    import io
    out = io.BytesIO()
    with gzip.GzipFile(filename=name or "", mode="wb", fileobj=out, mtime=0) as g:
        g.write(data)
    return out.getvalue()


def member_with_every_header_field(data):
    """FTEXT, FHCRC, FEXTRA, FNAME and FCOMMENT, built by hand: Python's
    gzip writes only FNAME."""
    flags = 0x01 | 0x02 | 0x04 | 0x08 | 0x10
    header = b"\x1f\x8b\x08" + bytes([flags]) + struct.pack("<I", 0) + b"\x00\x03"
    extra = b"gp" + struct.pack("<H", 4) + b"test"
    header += struct.pack("<H", len(extra)) + extra + b"trace.csv\x00" + b"a comment\x00"
    header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = deflate.compress(data) + deflate.flush()
    return header + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def main():
    mlp = read(os.path.join(TRACES, "leaky_mlp_train.json"))
    half = len(mlp) // 2
    write(os.path.join(TRACES, "leaky_mlp_train.json.gz"),
          member(mlp[:half], "leaky_mlp_train.json") + member(mlp[half:], "leaky_mlp_train.json"))

    chrome = os.path.join(ROOT, "fuzz", "corpus", "chrome_trace")
    rmm = read(os.path.join(chrome, "seed_rmm_sample.csv"))
    history = read(os.path.join(chrome, "seed_history.jsonl"))
    kineto = read(os.path.join(chrome, "seed_kineto_resnet_head.json"))
    write(os.path.join(SEEDS, "seed_rmm_sample.csv.gz"), member(rmm, "rmm_sample.csv"))
    lines = history.splitlines(keepends=True)
    write(os.path.join(SEEDS, "seed_history_three_members.jsonl.gz"),
          member(b"".join(lines[:2])) + member(b"") + member(b"".join(lines[2:])))
    write(os.path.join(SEEDS, "seed_every_header_field.csv.gz"), member_with_every_header_field(rmm))
    whole = member(kineto)
    write(os.path.join(SEEDS, "seed_truncated.json.gz"), whole[:len(whole) * 2 // 3])
    bad_crc = bytearray(whole)
    bad_crc[-8] ^= 0x01
    write(os.path.join(SEEDS, "seed_bad_crc.json.gz"), bytes(bad_crc))
    write(os.path.join(SEEDS, "seed_trailing_garbage.csv.gz"), member(rmm) + b"\x00\x00junk")


if __name__ == "__main__":
    main()
