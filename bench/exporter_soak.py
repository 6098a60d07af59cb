#!/usr/bin/env python3
"""The exporter under attack (issue 34's goal), as a local user could mount it:

  - forged blocks, rewritten every 50 ms: claiming pid 1, the exporter's own
    pid, made-up pids, impossible figures (fragmentation 1.8e13, reserved
    1.8e19), odd sequences, update counts going back;
  - a block truncated and restored as fast as the machine goes (SIGBUS bait);
  - squatted names (/dev/shm/<prefix><pid>.0 made before its publisher);
  - 50 slow clients that connect, send a byte now and then, and reconnect;
  - one probe of /metrics a second, with a 1 s timeout.

Goal: every probe answered within 1 s, the exporter's RSS under 100 MB, and
exactly one series for the simulated publisher throughout.

    /usr/bin/python3 bench/exporter_soak.py [--seconds 600] [--build build]

Run as root, forged files are also given to another user (nobody), as an
attacker's own would be. Prints the figures; exits 1 when a goal is missed.
"""
import argparse
import os
import random
import re
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request

MAGIC = 0x54534D454D555047  # "GPUMEMST"
WORDS = 28  # 224 bytes


def block(pid, device=0, start=1, sequence=2, updates=1, allocated=1 << 20, reserved=2 << 20, frag=0):
    """A PublishedStats as bytes (include/gpumem/alloc/stats_publisher.h)."""
    header = struct.pack("<QIIQQQQQQQQ", MAGIC, 1, 224, sequence, pid, device, start, 0, 0, updates, 5_000_000)
    figures = [allocated, allocated, reserved, reserved, allocated, allocated, allocated, reserved - allocated,
               reserved - allocated, frag, 1, 1, 1, 1, 0, 0, 0, 1 << 34]
    return header + struct.pack("<" + "Q" * len(figures), *figures)


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    except (OSError, AttributeError):
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--build", default="build")
    parser.add_argument("--blocks", type=int, default=300, help="forged blocks rewritten every 50 ms")
    args = parser.parse_args()

    prefix = f"gpumemsoak{os.getpid()}."
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    exporter = subprocess.Popen(
        [os.path.join(args.build, "gpumem"), "exporter", "--listen", f"127.0.0.1:{port}", "--interval", "200ms",
         "--simulate", os.path.join(root, "tests/data/traces/resnet18_train.json"), "--speed", "10",
         "--blocks-prefix", prefix],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()
    as_root = os.geteuid() == 0

    def put(name, data):
        path = f"/dev/shm/{prefix}{name}"
        try:
            with open(path + ".tmp", "wb") as f:
                f.write(data)
            if as_root:
                os.chown(path + ".tmp", 65534, 65534)
            os.replace(path + ".tmp", path)
        except OSError:
            pass

    def forger():
        n = 0
        while not stop.is_set():
            n += 1
            for i in range(args.blocks):
                kind = i % 6
                if kind == 0:
                    data = block(1, device=i)  # init's
                elif kind == 1:
                    data = block(exporter.pid, device=0, start=random.randrange(1, 1 << 40))  # the exporter's own
                elif kind == 2:
                    data = block(random.randrange(2, 4_000_000), device=i)
                elif kind == 3:
                    data = block(exporter.pid, device=1, frag=18_000_000_000_000, reserved=18_000_000_000_000_000_000)
                elif kind == 4:
                    data = block(exporter.pid, device=2, sequence=1)  # forever being written
                else:
                    data = block(exporter.pid, device=3, updates=1_000_000 - n)  # counts going back
                put(f"forged{i}", data)
            time.sleep(0.05)

    def flicker():
        path = f"/dev/shm/{prefix}flicker"
        data = block(exporter.pid, device=9)
        with open(path, "wb") as f:
            f.write(data)
        fd = os.open(path, os.O_RDWR)
        while not stop.is_set():
            os.ftruncate(fd, 0)
            os.ftruncate(fd, 224)
            os.pwrite(fd, data, 0)
        os.close(fd)

    def squatter():
        while not stop.is_set():
            put(f"{random.randrange(2, 4_000_000)}.0", b"squat")
            time.sleep(0.5)

    def slow_client():
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    c.sendall(b"GET /metrics HTTP/1.1\r\n")
                    while not stop.is_set():
                        time.sleep(1.5)
                        c.sendall(b"X")
            except OSError:
                time.sleep(0.1)

    threads = [threading.Thread(target=f, daemon=True) for f in (forger, flicker, squatter)]
    threads += [threading.Thread(target=slow_client, daemon=True) for _ in range(50)]
    time.sleep(0.5)  # the exporter listens
    for t in threads:
        t.start()

    probes = answered = 0
    worst = 0.0
    peak_rss = 0
    series_counts = set()
    rejected = 0
    deadline = time.time() + args.seconds
    while time.time() < deadline and exporter.poll() is None:
        time.sleep(1)
        probes += 1
        t0 = time.time()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
                text = r.read().decode()
            elapsed = time.time() - t0
            if elapsed <= 1:
                answered += 1
            worst = max(worst, elapsed)
            series_counts.add(len(re.findall(r"^gpumem_allocator_reserved_bytes\{", text, re.M)))
            m = re.search(r"^gpumem_exporter_rejected_blocks_total\{[^}]*\} (\S+)", text, re.M)
            rejected = int(float(m.group(1))) if m else rejected
        except OSError:
            worst = max(worst, time.time() - t0)
        peak_rss = max(peak_rss, rss_kb(exporter.pid))

    stop.set()
    crashed = exporter.poll() is not None
    exporter.terminate()
    try:
        exporter.wait(10)
    except subprocess.TimeoutExpired:
        exporter.kill()
    for name in os.listdir("/dev/shm"):
        if name.startswith(prefix):
            try:
                os.unlink(f"/dev/shm/{name}")
            except OSError:
                pass
    print(f"exporter soak, {args.seconds:.0f} s, {args.blocks} forged blocks every 50 ms, a flickering block, "
          f"squatted names, 50 slow clients{', forged files owned by nobody' if as_root else ''}")
    print(f"  probes answered within 1 s: {answered} of {probes} (slowest {worst * 1000:.0f} ms)")
    print(f"  exporter RSS at most: {peak_rss / 1024:.1f} MiB")
    print(f"  allocator series seen per scrape: {sorted(series_counts)} (the simulated publisher's only: [1])")
    print(f"  blocks rejected: {rejected:,}")
    print(f"  exporter {'DIED: ' + (exporter.stderr.read() if exporter.stderr else '') if crashed else 'alive'}")
    met = not crashed and probes > 0 and answered == probes and peak_rss < 100 * 1024 and series_counts == {1}
    print("  goal met" if met else "  GOAL NOT MET")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
