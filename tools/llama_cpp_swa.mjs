#!/usr/bin/env node
// Records llama.cpp's KV caches for Gemma 2 shapes, whose every other layer
// has a sliding window, for `gpumem llm` to be checked against
// (tests/llm/test_llama_cpp_swa.cpp): for each shape a sparse GGUF written
// by gpumem_make_llama_gguf --arch gemma2, loaded on the CPU through
// node-llama-cpp, and contexts of several sizes and n_ubatch; from the log,
// each of llama.cpp's two caches (llama_kv_cache_iswa: the whole-context
// layers' and the windowed layers'): cells, layers, bytes. Writes
// tests/data/llm/llama_cpp_swa.json.
//
// To rerun (under a minute on 2 cores), as tools/llama_cpp_buffers.mjs:
//   mkdir -p /work/node && (cd /work/node && npm install node-llama-cpp@3.21.1)
//   cmake --build build --target gpumem_make_llama_gguf
//   GPUMEM_NODE_MODULES=/work/node node tools/llama_cpp_swa.mjs [--out FILE]
// Without node-llama-cpp it exits 77 with a line on stderr.
//
// node-llama-cpp asks llama.cpp for n_ubatch = batchSize + 1 here (its log
// says so); the record keeps what llama.cpp reports taking.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { MiB, loadNodeLlamaCpp } from "./node_llama_cpp.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");

// Published configurations (google/gemma-2-2b and google/gemma-2-9b's config.json).
const SHAPES = [
  { name: "gemma-2-2b", architecture: "gemma2", n_layer: 26, n_embd: 2304, n_head: 8, n_head_kv: 4, head_dim: 256, n_ff: 9216,
    n_vocab: 256000, n_ctx_train: 8192, sliding_window: 4096 },
  { name: "gemma-2-9b", architecture: "gemma2", n_layer: 42, n_embd: 3584, n_head: 16, n_head_kv: 8, head_dim: 256, n_ff: 14336,
    n_vocab: 256000, n_ctx_train: 8192, sliding_window: 4096 },
];
const CONTEXTS = [
  { n_ctx: 2048, batch: 512 }, { n_ctx: 8192, batch: 512 }, { n_ctx: 8192, batch: 128 },
  { n_ctx: 16384, batch: 512 }, { n_ctx: 32768, batch: 256 },
];

// The two caches of one context, in the order llama.cpp creates them.
function parse(lines) {
  const caches = [];
  let n_ubatch = null;
  const log = [];
  for (const line of lines) {
    let m;
    if ((m = line.match(/^llama_context:\s+n_ubatch\s*=\s*(\d+)/))) {
      n_ubatch = +m[1];
      log.push(line.trimEnd());
    } else if ((m = line.match(/creating\s+(non-SWA|SWA) KV cache, size = (\d+) cells/))) {
      caches.push({ kind: m[1], cells: +m[2] });
      log.push(line.trimEnd());
    } else if ((m = line.match(/size\s*=\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers/)) && caches.length) {
      Object.assign(caches[caches.length - 1], { bytes: Math.round(parseFloat(m[1]) * MiB), layers: +m[3] });
      log.push(line.trimEnd());
    }
  }
  return { n_ubatch, caches, log };
}

async function main() {
  const argv = process.argv.slice(2);
  const outAt = argv.indexOf("--out");
  const outPath = outAt >= 0 ? argv[outAt + 1] : path.join(root, "tests", "data", "llm", "llama_cpp_swa.json");
  const { lib, resolved } = await loadNodeLlamaCpp(here);
  let lines = [];
  const llama = await lib.getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, progressLogs: false, logLevel: lib.LlamaLogLevel.debug,
    logger: (level, message) => { for (const l of String(message).split("\n")) if (l.trim()) lines.push(l); },
  });
  const pkg = JSON.parse(fs.readFileSync(path.join(path.dirname(resolved), "..", "package.json"), "utf8"));
  const settle = () => new Promise((r) => setTimeout(r, 200));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpumem_swa_"));
  const runs = [];
  try {
    for (const shape of SHAPES) {
      const file = path.join(dir, `${shape.name}.gguf`);
      const tool = process.env.GPUMEM_MAKE_LLAMA_GGUF ?? path.join(root, "build", "gpumem_make_llama_gguf");
      execFileSync(tool, ["--name", shape.name, "--arch", "gemma2", "--sliding-window", shape.sliding_window,
        "--layers", shape.n_layer, "--embd", shape.n_embd, "--heads", shape.n_head, "--kv-heads", shape.n_head_kv,
        "--head-dim", shape.head_dim, "--ff", shape.n_ff, "--vocab", shape.n_vocab, "--ctx-train", shape.n_ctx_train,
        "-o", file].map(String));
      const model = await llama.loadModel({ modelPath: file, gpuLayers: 0, useMmap: true, ignoreMemorySafetyChecks: true });
      for (const c of CONTEXTS) {
        lines = [];
        const ctx = await model.createContext({ contextSize: c.n_ctx, batchSize: c.batch, sequences: 1,
          flashAttention: true, ignoreMemorySafetyChecks: true, failedCreationRemedy: false });
        await settle();
        await ctx.dispose();
        await settle();
        const got = parse(lines);
        if (got.caches.length !== 2) throw new Error(`${shape.name} ${c.n_ctx}: expected two caches, got ${JSON.stringify(got)}`);
        runs.push({ shape, n_ctx: c.n_ctx, n_ubatch: got.n_ubatch, type_k: "f16", type_v: "f16", caches: got.caches, log: got.log });
        process.stderr.write(`${shape.name} ctx ${c.n_ctx} ub ${got.n_ubatch}: ${JSON.stringify(got.caches)}\n`);
      }
      await model.dispose();
      fs.rmSync(file);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const doc = {
    comment: "llama.cpp's two KV caches (whole-context layers, windowed layers) for sparse Gemma 2 GGUFs on the CPU " +
      "backend, recorded by tools/llama_cpp_swa.mjs; bytes = printed MiB x 1048576 (2 decimals)",
    node_llama_cpp: pkg.version,
    llama_cpp_release: llama.llamaCppRelease,
    runs,
  };
  fs.writeFileSync(outPath, JSON.stringify(doc, null, 1) + "\n");
  process.stderr.write(`${runs.length} runs -> ${outPath}\n`);
  await llama.dispose();
}

main().catch((e) => {
  process.stderr.write(`${e.stack ?? e}\n`);
  process.exit(1);
});
