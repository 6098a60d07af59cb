"""Records a CPU run's allocations as a torch.profiler (Kineto) Chrome trace.

Where PyTorch is built with Kineto, torch.profiler's own export_chrome_trace()
writes "[memory]" events and is used as is. Debian's PyTorch is built
without Kineto, and its export is the legacy format, which has none; there,
this module drives the profiler's low-level API (the one
torch.autograd.profiler.profile uses) and writes the same events itself from
the recorded event tree: operators as "X" spans, every allocation and free
as a "[memory]" instant with Kineto's argument names (profiler_kineto.cpp),
which `gpumem trace` reads. tools/record_trace.py records the test traces
the same way.
"""

from __future__ import annotations

import json
import os

import torch

# c10::DeviceType numbering, which the Kineto export writes as "Device Type".
_DEVICE_TYPES = {"cpu": 0, "cuda": 1}


def _microseconds(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


class LowLevelProfiler:
    """torch.autograd's profiler with memory on; write() the Chrome trace after stop()."""

    def __init__(self) -> None:
        from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, _ExperimentalConfig

        self._config = ProfilerConfig(ProfilerState.KINETO, True, True, False, False, False, _ExperimentalConfig())
        self._activities = {ProfilerActivity.CPU}
        self._result = None

    def start(self) -> None:
        from torch._C._autograd import _enable_profiler, _prepare_profiler

        _prepare_profiler(self._config, self._activities)
        _enable_profiler(self._config, self._activities)

    def stop(self) -> None:
        from torch._C._autograd import _disable_profiler

        self._result = _disable_profiler()

    def write(self, path: str, name: str) -> None:
        from torch._C._profiler import RecordScope, _EventType

        spans, memory = [], []

        def walk(event) -> bool:
            if event.tag == _EventType.Allocation:
                f = event.extra_fields
                memory.append((event.start_time_ns, event.start_tid, {
                    "Total Reserved": f.total_reserved, "Total Allocated": f.total_allocated,
                    "Bytes": f.alloc_size, "Addr": f.ptr,
                    "Device Id": -1 if f.device.index is None else f.device.index,
                    "Device Type": _DEVICE_TYPES.get(f.device.type, 0)}))
                return True
            has_memory = False
            for child in event.children:
                has_memory |= walk(child)
            # Only operators around an allocation can tag one: the others are left out.
            if event.tag == _EventType.TorchOp and has_memory:
                user = event.extra_fields.scope == RecordScope.USER_SCOPE
                spans.append((event.start_time_ns, event.duration_time_ns, event.start_tid, event.name,
                              "user_annotation" if user else "cpu_op"))
            return has_memory

        for root in self._result.experimental_event_tree():
            walk(root)
        spans.sort(key=lambda s: (s[0], -s[1]))
        memory.sort(key=lambda m: m[0])
        pid = os.getpid()
        lines = [
            f'{{"ph": "X", "cat": "{cat}", "name": {json.dumps(op)}, "pid": {pid}, "tid": {tid}, '
            f'"ts": {_microseconds(start)}, "dur": {_microseconds(duration)}, "args": {{"External id": {i}}}}}'
            for i, (start, duration, tid, op, cat) in enumerate(spans, 1)]
        lines += [
            f'{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": {pid}, "tid": {tid}, '
            f'"ts": {_microseconds(start)}, "args": {json.dumps(args)}}}'
            for start, tid, args in memory]
        with open(path, "w", encoding="utf-8") as out:
            out.write('{"schemaVersion": 1, "deviceProperties": [], "traceName": ' + json.dumps(name) + ',\n')
            out.write('"traceEvents": [\n' + ",\n".join(lines) + "\n]}\n")


def kineto_available() -> bool:
    return bool(torch.autograd.kineto_available())
