#!/usr/bin/env python3
"""Writes tests/data/traces/*.pickle: PyTorch memory snapshots for the tests.

Run by hand (python3 tools/make_snapshot_fixtures.py); the output is
committed. A CPU-only torch cannot record a CUDA snapshot, so the dicts are
built here in exactly the shape torch.cuda.memory._snapshot() returns
(torch/csrc/cuda/Module.cpp, THCPModule_memorySnapshot): the same keys in the
same insertion order, frame dicts and frame lists shared between entries (as
py_symbolize shares them, so the pickle memo repeats them), and an oom entry
carrying "device_free" instead of "addr".

  snapshot_p2..p5.pickle  the same snapshot, pickle.dumps protocols 2 to 5
                          (what torch.cuda.memory._dump_snapshot writes)
  snapshot_jit.pickle     the same snapshot laid out as torch::jit::Pickler
                          writes it for the C++ API's _memory_snapshot_pickled
                          (torch/csrc/cuda/memory_snapshot.cpp): protocol 2,
                          BINPUT after each shared container, strings
                          memoized by value, 8-byte LONG1, one APPENDS/SETITEMS
  snapshot_legacy.pickle  PyTorch 1.13/2.0 shapes: blocks without "address"
                          (one with "history" instead of "frames"), no
                          is_expandable, entries without time_us
  segments_only.pickle    the oldest form: a bare list of segments
  unknown_action.pickle   an entry whose action gpumem does not know
  snapshot_oom.pickle     taken after an out-of-memory error: two 20 MiB
                          segments whose frees left 4 and 10 MiB holes, then
                          a 12 MiB request that fails with 3 MiB free on the
                          device (reserved 40 MiB, allocated 20 MiB, the
                          largest free block 10 MiB: fragmentation)
  snapshot_no_history.pickle  the same segments from _snapshot() without
                          _record_memory_history(): empty device_traces

tests/trace/test_pytorch_snapshot.cpp checks every value written here; keep
them in step.
"""
import pathlib
import pickle
import struct

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"

BASE = 0x7F3A00000000   # above 2**31, as CUDA addresses are
BASE2 = 0x7F4000000000
T0 = 1_700_000_000_000_000  # time_us
BIG_STREAM = 94_000_000_000_000  # a cudaStream_t as an int, above 2**31

# py_symbolize: one dict per distinct frame, one list per distinct stack,
# innermost frame first; keys in its order (name, filename, line).
F_TRAIN = {"name": "train_step", "filename": "/home/user/train.py", "line": 42}
F_LINEAR = {"name": "forward", "filename": "/usr/lib/python3/dist-packages/torch/nn/modules/linear.py", "line": 114}
F_BUFFER = {"name": "make_buffer", "filename": "/home/user/model.py", "line": 7}
STACK_A = [F_LINEAR, F_TRAIN]
STACK_B = [F_BUFFER, F_TRAIN]
EMPTY = []  # Module.cpp's shared empty_frames


def entry(action, addr, size, stream=0, time_us=None, frames=None):
    # Module.cpp inserts action, addr (device_free for oom), size, stream,
    # time_us, and frames last (filled in after symbolizing).
    e = {"action": action, "device_free" if action == "oom" else "addr": addr, "size": size, "stream": stream}
    if time_us is not None:
        e["time_us"] = time_us
    if frames is not None:
        e["frames"] = frames
    return e


def segment(device, address, total, allocated, active, requested, stream, kind, expandable, frames, blocks):
    return {"device": device, "address": address, "total_size": total, "allocated_size": allocated,
            "active_size": active, "requested_size": requested, "stream": stream, "segment_type": kind,
            "segment_pool_id": (0, 0), "is_expandable": expandable, "frames": frames, "blocks": blocks}


def block(address, size, requested, state, frames):
    return {"address": address, "size": size, "requested_size": requested, "state": state, "frames": frames}


def snapshot():
    device0 = [
        entry("segment_alloc", BASE, 2097152, 0, T0, STACK_B),
        entry("alloc", BASE, 512, 0, T0 + 1, STACK_A),
        entry("alloc", BASE + 512, 1024, 0, T0 + 2, STACK_B),
        entry("free_requested", BASE, 512, 0, T0 + 3, STACK_A),
        entry("free_completed", BASE, 512, 0, T0 + 4, STACK_A),
        entry("segment_map", BASE2, 20971520, BIG_STREAM, T0 + 5, STACK_A),
        entry("segment_unmap", BASE2, 20971520, BIG_STREAM, T0 + 6, STACK_A),
        entry("snapshot", 0, 1024, 0, T0 + 7),  # record_trace(SNAPSHOT, 0, total_active, nullptr...): no frames
        entry("oom", 1073741824, 8589934592, 0, T0 + 8, STACK_B),
        entry("alloc", BASE + 1536, 256, 0, None, STACK_B),  # no time_us, as older versions
    ]
    device2 = [
        entry("segment_alloc", BASE2, 20971520, 7, T0 + 100, STACK_A),
        entry("alloc", BASE2, 20971520, 7, T0 + 101, STACK_A),
        entry("free_requested", BASE2, 20971520, 7, T0 + 102, STACK_A),
    ]
    segments = [
        segment(0, BASE, 2097152, 1280, 1280, 1200, 0, "small", False, STACK_B, [
            block(BASE, 512, 0, "inactive", EMPTY),
            block(BASE + 512, 1024, 1000, "active_allocated", STACK_B),
            block(BASE + 1536, 256, 200, "active_allocated", STACK_B),
            block(BASE + 1792, 2097152 - 1792, 0, "inactive", EMPTY),
        ]),
        segment(2, BASE2, 20971520, 0, 20971520, 20971520, 7, "large", True, STACK_A, [
            block(BASE2, 20971520, 20971520, "active_pending_free", STACK_A),
        ]),
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "max_split_size": -1,
                "garbage_collection_threshold": 0.0, "expandable_segments": True,
                "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
                "pinned_use_cuda_host_register": False, "roundup_power2_divisions": {"1": 0, "2": 0}}
    return {"segments": segments, "device_traces": [device0, [], device2], "allocator_settings": settings,
            "external_annotations": [{"stage": "forward", "device": 0, "time_us": T0}]}


def legacy_snapshot():
    history = [{"addr": BASE + 512, "frames": STACK_B, "real_size": 1000}]
    seg = {"device": 0, "address": BASE, "total_size": 2097152, "allocated_size": 1024, "active_size": 1024,
           "stream": 0, "segment_type": "small", "blocks": [
               {"size": 512, "state": "inactive"},
               {"size": 1024, "state": "active_allocated", "history": history},
               {"size": 2097152 - 1536, "requested_size": 0, "state": "inactive", "frames": EMPTY},
           ]}
    trace = [entry("segment_alloc", BASE, 2097152, 0, None, STACK_B),
             entry("alloc", BASE + 512, 1024, 0, None, STACK_B)]
    return {"segments": [seg], "device_traces": [trace]}


def unknown_action_snapshot():
    trace = [entry("alloc", BASE, 512, 0, T0, STACK_A),
             entry("defragment", BASE, 512, 0, T0 + 1, STACK_A),
             entry("free_completed", BASE, 512, 0, T0 + 2, STACK_A)]
    return {"segments": [], "device_traces": [trace]}


MIB = 1 << 20
S1 = 0x7F5000000000
S2 = S1 + 0x40000000


def oom_segments():
    # The allocator's state after the failed request (nothing was freed by
    # the error): live blocks, holes and each segment's free tail.
    return [
        segment(0, S1, 20 * MIB, 14 * MIB, 14 * MIB, 14 * MIB, 0, "large", False, STACK_B, [
            block(S1, 8 * MIB, 8 * MIB, "active_allocated", STACK_B),
            block(S1 + 8 * MIB, 4 * MIB, 0, "inactive", EMPTY),
            block(S1 + 12 * MIB, 6 * MIB, 6 * MIB, "active_allocated", STACK_A),
            block(S1 + 18 * MIB, 2 * MIB, 0, "inactive", EMPTY),
        ]),
        segment(0, S2, 20 * MIB, 6 * MIB, 6 * MIB, 6 * MIB, 0, "large", False, STACK_A, [
            block(S2, 10 * MIB, 0, "inactive", EMPTY),
            block(S2 + 10 * MIB, 6 * MIB, 6 * MIB, "active_allocated", STACK_A),
            block(S2 + 16 * MIB, 4 * MIB, 0, "inactive", EMPTY),
        ]),
    ]


def oom_snapshot():
    t = T0
    trace = [
        entry("segment_alloc", S1, 20 * MIB, 0, t, STACK_B),
        entry("alloc", S1, 8 * MIB, 0, t + 1, STACK_B),
        entry("alloc", S1 + 8 * MIB, 4 * MIB, 0, t + 2, STACK_A),
        entry("alloc", S1 + 12 * MIB, 6 * MIB, 0, t + 3, STACK_A),
        entry("segment_alloc", S2, 20 * MIB, 0, t + 4, STACK_A),
        entry("alloc", S2, 10 * MIB, 0, t + 5, STACK_A),
        entry("alloc", S2 + 10 * MIB, 6 * MIB, 0, t + 6, STACK_A),
        entry("free_requested", S1 + 8 * MIB, 4 * MIB, 0, t + 7, STACK_A),
        entry("free_completed", S1 + 8 * MIB, 4 * MIB, 0, t + 8, STACK_A),
        entry("free_requested", S2, 10 * MIB, 0, t + 9, STACK_A),
        entry("free_completed", S2, 10 * MIB, 0, t + 10, STACK_A),
        # PyTorch records the request's size and the device's free memory.
        entry("oom", 3 * MIB, 12 * MIB, 0, t + 11, STACK_A),
    ]
    return {"segments": oom_segments(), "device_traces": [trace]}


class JitPickler:
    """torch::jit::Pickler's layout (torch/csrc/jit/serialization/pickler.cpp)
    as memory_snapshot.cpp uses it, without type tags."""

    def __init__(self, shared):
        self.out = bytearray(b"\x80\x02")
        self.shared = shared  # ids of containers whose use_count is above 1
        self.memo = {}
        self.strings = {}
        self.next_id = 0

    def binput(self):
        i = self.next_id
        self.out += b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)
        self.next_id += 1
        return i

    def binget(self, i):
        self.out += b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)

    def push(self, v):
        # Mutable values are memoized by pointer, after they are written.
        if isinstance(v, (dict, list)) and id(v) in self.shared:
            if id(v) in self.memo:
                return self.binget(self.memo[id(v)])
            self.push_impl(v)
            self.memo[id(v)] = self.binput()
            return
        self.push_impl(v)

    def push_impl(self, v):
        if v is None:
            self.out += b"N"
        elif isinstance(v, bool):
            self.out += b"\x88" if v else b"\x89"
        elif isinstance(v, int):
            if 0 <= v < 256:
                self.out += b"K" + bytes([v])
            elif 0 <= v < 65536:
                self.out += b"M" + struct.pack("<H", v)
            elif -2**31 <= v < 2**31:
                self.out += b"J" + struct.pack("<i", v)
            else:
                self.out += b"\x8a\x08" + struct.pack("<q", v)
        elif isinstance(v, float):
            self.out += b"G" + struct.pack(">d", v)
        elif isinstance(v, str):
            if v in self.strings:
                return self.binget(self.strings[v])
            data = v.encode()
            self.out += b"X" + struct.pack("<I", len(data)) + data
            self.strings[v] = self.binput()
        elif isinstance(v, dict):
            self.out += b"}("
            for k, x in v.items():
                self.push(k)
                self.push(x)
            self.out += b"u"
        elif isinstance(v, list):
            self.out += b"]("
            for x in v:
                self.push(x)
            self.out += b"e"
        elif isinstance(v, tuple):
            if len(v) == 0:
                self.out += b")"
            elif len(v) <= 3:
                for x in v:
                    self.push(x)
                self.out += bytes([0x84 + len(v)])
            else:
                self.out += b"("
                for x in v:
                    self.push(x)
                self.out += b"t"
        else:
            raise TypeError(type(v))

    def dumps(self, v):
        self.push(v)
        self.out += b"."
        return bytes(self.out)


def jit_shared(snap):
    """What memory_snapshot.cpp holds twice: every frame dict and stack
    (ivalue_symbolize keeps them in all_frames/py_unique_frames), the shared
    empty frames list, and every dict that got frames (frame_dict)."""
    shared = {id(EMPTY)}
    for f in (F_TRAIN, F_LINEAR, F_BUFFER, STACK_A, STACK_B):
        shared.add(id(f))
    for seg in snap["segments"]:
        shared.add(id(seg))
        for b in seg["blocks"]:
            if b.get("frames"):
                shared.add(id(b))
    for trace in snap["device_traces"]:
        for e in trace:
            if "frames" in e:
                shared.add(id(e))
    return shared


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    snap = snapshot()
    for protocol in (2, 3, 4, 5):
        (OUT / f"snapshot_p{protocol}.pickle").write_bytes(pickle.dumps(snap, protocol=protocol))
    # The C++ API's snapshot has no external_annotations.
    jit = {k: v for k, v in snap.items() if k != "external_annotations"}
    data = JitPickler(jit_shared(jit)).dumps(jit)
    assert pickle.loads(data) == jit
    (OUT / "snapshot_jit.pickle").write_bytes(data)
    (OUT / "snapshot_legacy.pickle").write_bytes(pickle.dumps(legacy_snapshot(), protocol=2))
    (OUT / "segments_only.pickle").write_bytes(pickle.dumps(snap["segments"], protocol=2))
    (OUT / "unknown_action.pickle").write_bytes(pickle.dumps(unknown_action_snapshot(), protocol=4))
    (OUT / "snapshot_oom.pickle").write_bytes(pickle.dumps(oom_snapshot(), protocol=4))
    (OUT / "snapshot_no_history.pickle").write_bytes(
        pickle.dumps({"segments": oom_segments(), "device_traces": [[]]}, protocol=4))
    for path in sorted(OUT.glob("*.pickle")):
        assert path.stat().st_size < 50_000, path
        print(f"{path.relative_to(OUT.parent.parent.parent)}: {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
