"""Damaged and crafted variants of a real input file, for the hostile sweep.

Every mutation is a pure function of (content, rng): the sweep seeds one
random.Random per case from the seed file's name and the case's index, so a
failing case is reproduced by its name alone. Text mutations aim at what
parsers get wrong (numbers past every integer width, nesting past any stack,
types swapped, control characters, lines repeated); binary ones at what
format readers trust (counts and offsets overwritten with extremes, bytes
flipped, chunks spliced, the file cut short).
"""

import gzip
import random
import re
import struct
import zlib

# Values that each break some width or assumption: signed and unsigned 32- and
# 64-bit edges, beyond a double, not a number, a fraction where a count goes.
EXTREME_NUMBERS = [
    "0", "-1", "-2147483649", "2147483648", "4294967296", "4294967297",
    "9223372036854775807", "-9223372036854775808", "9223372036854775808",
    "18446744073709551616", "1e308", "1e400", "-1e400", "1e-400", "0.5",
    "NaN", "Infinity", "-Infinity", "1" + "0" * 400,
]
EXTREME_U64 = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x100000000, 1 << 40,
               (1 << 62), (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
SWAPPED_VALUES = ['"text"', "null", "{}", "[]", "true", '""', '{"a": 1}', "[1, 2, 3]"]
CONTROL_TEXT = "evil\x00name\n\x1b[31mred\r\x7f\u202e"
NUMBER = re.compile(rb"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
STRING = re.compile(rb'"(?:[^"\\\n]|\\.){1,40}"')


def _pick(rng, pattern, content):
    found = [m.span() for m in pattern.finditer(content[:1 << 20])]
    return rng.choice(found) if found else None


def _replace(content, span, new):
    return content[: span[0]] + new + content[span[1]:]


# --- text ---------------------------------------------------------------------

def number_extreme(content, rng):
    span = _pick(rng, NUMBER, content)
    return _replace(content, span, rng.choice(EXTREME_NUMBERS).encode()) if span else content + b"1e400"


def deep_nesting(content, rng):
    depth = rng.choice([63, 64, 65, 1000, 100000])
    opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
    inner = opener * depth + b"1" + closer * depth
    span = _pick(rng, NUMBER, content)
    return _replace(content, span, inner) if span else inner


def type_swap(content, rng):
    span = _pick(rng, rng.choice([NUMBER, STRING]), content)
    return _replace(content, span, rng.choice(SWAPPED_VALUES).encode()) if span else content


def control_characters(content, rng):
    span = _pick(rng, STRING, content)
    evil = CONTROL_TEXT.encode("utf-8", "surrogatepass")
    if not span:
        return content + evil
    return content[: span[0] + 1] + evil + content[span[0] + 1:]


def key_renamed(content, rng):
    span = _pick(rng, STRING, content)
    return _replace(content, span, b'"renamed_' + str(rng.randrange(1000)).encode() + b'"') if span else content


def span_deleted(content, rng):
    if len(content) < 2:
        return b""
    start = rng.randrange(len(content) - 1)
    return content[:start] + content[start + rng.randint(1, 40):]


def line_repeated(content, rng):
    lines = content.split(b"\n")
    i = rng.randrange(len(lines))
    times = rng.choice([2, 1000, 20000])
    return b"\n".join(lines[: i + 1] + [lines[i]] * times + lines[i + 1:])


def lines_shuffled(content, rng):
    lines = content.split(b"\n")
    head, rest = lines[:1], lines[1:]
    rng.shuffle(rest)
    return b"\n".join(head + rest)


def line_dropped(content, rng):
    lines = content.split(b"\n")
    del lines[rng.randrange(len(lines))]
    return b"\n".join(lines)


def invalid_utf8(content, rng):
    at = rng.randrange(len(content) + 1)
    return content[:at] + rng.choice([b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\x00"]) + content[at:]


TEXT_MUTATIONS = [number_extreme, number_extreme, number_extreme, deep_nesting, type_swap, type_swap,
                  control_characters, key_renamed, span_deleted, line_repeated, lines_shuffled, line_dropped,
                  invalid_utf8]


# --- binary -------------------------------------------------------------------

def bytes_flipped(content, rng):
    if not content:
        return b"\x00"
    data = bytearray(content)
    for _ in range(rng.choice([1, 4, 32])):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def field_extreme(content, rng):
    """A little-endian 32- or 64-bit field near the start set to an extreme."""
    data = bytearray(content)
    width = rng.choice([4, 8])
    limit = min(len(data), 512) - width
    if limit <= 0:
        return bytes(data) + struct.pack("<Q", rng.choice(EXTREME_U64))
    at = rng.randrange(0, limit + 1, width if rng.random() < 0.7 else 1)
    value = rng.choice(EXTREME_U64) & ((1 << (8 * width)) - 1)
    data[at: at + width] = value.to_bytes(width, "little")
    return bytes(data)


def varint_extreme(content, rng):
    """A protobuf varint made 10 bytes of 0xff (a length or a count past 2^63)."""
    if len(content) < 3:
        return content + b"\xff" * 10
    at = rng.randrange(len(content))
    return content[:at] + b"\xff" * 9 + b"\x01" + content[at + 1:]


def chunk_spliced(content, rng):
    if len(content) < 4:
        return content * 2
    a, b = sorted(rng.sample(range(len(content)), 2))
    at = rng.randrange(len(content))
    return content[:at] + content[a:b] + content[at:]


def chunk_zeroed(content, rng):
    if not content:
        return b"\x00" * 64
    at = rng.randrange(len(content))
    n = rng.randint(1, 256)
    return content[:at] + b"\x00" * n + content[at + n:]


def random_bytes_inserted(content, rng):
    at = rng.randrange(len(content) + 1)
    return content[:at] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64))) + content[at:]


BINARY_MUTATIONS = [bytes_flipped, bytes_flipped, field_extreme, field_extreme, varint_extreme, chunk_spliced,
                    chunk_zeroed, random_bytes_inserted, span_deleted]


# --- formats with a JSON header inside a binary file ---------------------------

def safetensors_header(mutate):
    """Applies a text mutation to a safetensors header and fixes its length
    (half the time: the other half leaves the length stale)."""

    def mutation(content, rng):
        if len(content) < 8:
            return mutate(content, rng)
        n = int.from_bytes(content[:8], "little")
        header, rest = content[8: 8 + n], content[8 + n:]
        new = mutate(header, rng)
        length = len(new) if rng.random() < 0.5 else n
        return struct.pack("<Q", length) + new + rest

    mutation.__name__ = "safetensors_header_" + mutate.__name__
    return mutation


SAFETENSORS_MUTATIONS = [safetensors_header(m) for m in (number_extreme, number_extreme, deep_nesting, type_swap,
                                                           control_characters, key_renamed, span_deleted)]


def truncated(content, rng):
    return content[: rng.randrange(len(content))] if content else b""


def gzipped(mutate):
    """The mutated text, gzip-compressed (the readers decompress by magic)."""

    def mutation(content, rng):
        return gzip.compress(mutate(content, rng), mtime=0)

    mutation.__name__ = "gzip_" + mutate.__name__
    return mutation


def gzip_cut(content, rng):
    packed = gzip.compress(content, mtime=0)
    return packed[: rng.randrange(10, max(11, len(packed)))]


# The fixed cases every seed gets before its random ones.
def fixed_variants(content):
    yield "original", content
    yield "empty", b""
    yield "one_byte", content[:1]
    yield "half", content[: len(content) // 2]
    yield "all_but_last_byte", content[:-1]
    yield "doubled", content + content
    yield "zeros", b"\x00" * max(len(content), 1)


def variants(content, kinds, count, rng_for):
    """The seed's fixed variants, then `count` random ones drawn from the
    mutations of the given kinds ('text', 'binary', 'safetensors', 'gzip')."""
    yield from fixed_variants(content)
    pool = []
    if "text" in kinds:
        pool += TEXT_MUTATIONS
    if "binary" in kinds:
        pool += BINARY_MUTATIONS
    if "safetensors" in kinds:
        pool += SAFETENSORS_MUTATIONS
    if "gzip" in kinds:
        pool += [gzipped(number_extreme), gzipped(deep_nesting), gzipped(span_deleted), gzip_cut]
    pool.append(truncated)
    for i in range(count):
        rng = rng_for(i)
        mutation = rng.choice(pool)
        yield f"{mutation.__name__}_{i}", mutation(content, rng)


def gzip_bomb(megabytes):
    """Zeros compressed about 1000:1: past the readers' 64 MiB cap."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(1 << 20)
    return b"".join([compressor.compress(chunk) for _ in range(megabytes)] + [compressor.flush()])


def seeded(name, index):
    return random.Random(f"{name}#{index}")
