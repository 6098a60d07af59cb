#pragma once
// PyTorch's memory snapshots, read and written (a row of formats.cpp's table).
#include <iosfwd>
#include <string>
#include <string_view>

#include "gpumem/trace/trace.h"

namespace gpumem::trace {

// PyTorch memory snapshots (torch.cuda.memory._dump_snapshot(): a pickle,
// protocols 2 to 5): device_traces become events (frames become contexts),
// segments become Trace::segments. gpumem's own pickle reader: it
// understands the opcodes these files use and executes nothing (no GLOBAL,
// REDUCE or BUILD); a pickle that needs them is rejected.
Trace read_pytorch_snapshot(std::string_view data, const std::string& name, const ReadOptions& options = {});
// Writes the subset of the snapshot format that PyTorch's memory_viz reads:
// {"segments": [...], "device_traces": [[...], ...]} with per-event action,
// addr, size, stream, time_us and frames. protocol: 2 or 4.
// Host memory (device -1) is numbered after the GPUs (device 0 in a
// CPU-only trace): the format has no negative devices. The top-level key
// "gpumem_host_devices_from" says where that numbering starts (memory_viz
// ignores it), and read_pytorch_snapshot numbers those devices back.
void write_pytorch_snapshot(const Trace& trace, std::ostream& out, int protocol = 4);
bool is_pytorch_snapshot(std::string_view head);  // a pickle: its first byte is 0x80

}  // namespace gpumem::trace
