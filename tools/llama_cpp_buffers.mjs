#!/usr/bin/env node
// Records llama.cpp's own memory figures for llama-architecture models of
// known shapes, for `gpumem llm` to be checked against: for each shape it
// writes a sparse GGUF (tensor data as holes, no disk) with
// gpumem_make_llama_gguf, loads it on the CPU through node-llama-cpp
// (gpuLayers 0, mmap on), creates contexts of each size, batch, KV cache
// type and flash-attention setting, and parses llama.cpp's debug log: model
// buffer, KV cache (total, K, V, cells, layers), output and compute buffers
// per backend, graph nodes and splits. Writes tests/data/llm/llama_cpp_buffers.json.
//
// To rerun (about 4 minutes on 2 cores; llama.cpp prefetches the mapping, so
// the Llama-3-8B F16 file fills 15 GiB of page cache with zero pages, which
// the kernel can reclaim; the largest context, Llama-2-7B at n_ctx 8192,
// allocates about 5 GiB, 4 of them KV cache):
//
//   mkdir -p /work/node && (cd /work/node && npm install node-llama-cpp@3.21.1)
//   cmake --build build --target gpumem_make_llama_gguf
//   GPUMEM_NODE_MODULES=/work/node node tools/llama_cpp_buffers.mjs [--quick] [--out FILE]
//
// GPUMEM_NODE_MODULES is a folder holding node_modules/node-llama-cpp (the
// prebuilt CPU binaries come in its optional dependency
// @node-llama-cpp/linux-x64); GPUMEM_MAKE_LLAMA_GGUF overrides the writer's
// path (default build/gpumem_make_llama_gguf); TMPDIR is where the sparse
// files go; GPUMEM_LLM_SHAPES=a,b records only those shapes. --quick records
// one run per shape. Without node-llama-cpp,
// exits 77 with a line on stderr.
//
// What node-llama-cpp's JS API cannot set: n_ubatch apart from n_batch (its
// addon sets n_ubatch = n_batch, the batch queue being in JS), so every run
// has n_batch == n_ubatch; llama.cpp sizes its compute buffer from n_ubatch
// alone (the reserve graph has min(n_ctx, n_ubatch) tokens), so an
// n_batch 512 / n_ubatch 128 context's compute buffer is the n_batch 128
// run's. A quantized V cache needs flash attention in llama.cpp, so with
// flash attention off the q8_0 runs quantize K only (type_v stays f16).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { MiB, loadNodeLlamaCpp } from "./node_llama_cpp.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");

// The shapes: published configurations, all in llama.cpp's "llama"
// architecture (Qwen2-0.5B without its q/k/v biases, which llama lacks).
const SHAPES = [
  { name: "llama-3-8b", n_layer: 32, n_embd: 4096, n_head: 32, n_head_kv: 8, n_ff: 14336, n_vocab: 128256,
    n_ctx_train: 8192, tied_embeddings: false, weight_type: "F16", rope_freq_base: 500000 },
  { name: "llama-3-8b-q4_k", n_layer: 32, n_embd: 4096, n_head: 32, n_head_kv: 8, n_ff: 14336, n_vocab: 128256,
    n_ctx_train: 8192, tied_embeddings: false, weight_type: "Q4_K", rope_freq_base: 500000 },
  { name: "llama-2-7b", n_layer: 32, n_embd: 4096, n_head: 32, n_head_kv: 32, n_ff: 11008, n_vocab: 32000,
    n_ctx_train: 4096, tied_embeddings: false, weight_type: "F16", rope_freq_base: 10000 },
  { name: "tinyllama-1.1b", n_layer: 22, n_embd: 2048, n_head: 32, n_head_kv: 4, n_ff: 5632, n_vocab: 32000,
    n_ctx_train: 2048, tied_embeddings: false, weight_type: "F16", rope_freq_base: 10000 },
  { name: "qwen2-0.5b-llama", n_layer: 24, n_embd: 896, n_head: 14, n_head_kv: 2, n_ff: 4864, n_vocab: 151936,
    n_ctx_train: 32768, tied_embeddings: true, weight_type: "F16", rope_freq_base: 1000000 },
];

// The contexts: every shape at 512, 2048 and 8192 cells, n_ubatch 128 and
// 512, KV f16 and q8_0, flash attention off and on; one shape also at 32768.
function contextsFor(shape, quick) {
  const out = [];
  const ctxs = shape.name === "tinyllama-1.1b" ? [512, 2048, 8192, 32768] : [512, 2048, 8192];
  for (const n_ctx of ctxs)
    for (const n_ubatch of [128, 512])
      for (const kv of ["f16", "q8_0"])
        for (const flash_attn of [false, true]) {
          const type_k = kv;
          const type_v = kv === "q8_0" && !flash_attn ? "f16" : kv;
          out.push({ n_ctx, n_batch: n_ubatch, n_ubatch, type_k, type_v, flash_attn });
        }
  return quick ? out.slice(0, 1) : out;
}

const mib = (s) => Math.round(parseFloat(s) * MiB);

// llama.cpp's log lines of one model load or context creation, parsed.
function parse(lines) {
  const f = { compute_buffer_bytes: {}, output_buffer_bytes: {}, kv_buffer_bytes: {}, model_buffer_bytes: {} };
  const kept = [];
  const keep = (l) => kept.push(l.replace(/\s+$/, ""));
  for (const line of lines) {
    let m;
    if ((m = line.match(/(\S+)\s+compute buffer size is\s+([\d.]+) MiB/))) {
      // printed when the context is freed, with 4 decimals (within 53 bytes)
      (f.compute_buffer_bytes_4dp ??= {})[m[1]] = mib(m[2]);
      keep(line);
    } else if ((m = line.match(/(\S+)\s+compute buffer size\s*=\s*([\d.]+) MiB/))) {
      f.compute_buffer_bytes[m[1]] = mib(m[2]);
      keep(line);
    } else if ((m = line.match(/(\S+)\s+output buffer size\s*=\s*([\d.]+) MiB/))) {
      f.output_buffer_bytes[m[1]] = mib(m[2]);
      keep(line);
    } else if ((m = line.match(/(\S+)\s+KV buffer size\s*=\s*([\d.]+) MiB/))) {
      f.kv_buffer_bytes[m[1]] = mib(m[2]);
      keep(line);
    } else if ((m = line.match(/(\S+)\s+model buffer size\s*=\s*([\d.]+) MiB/))) {
      f.model_buffer_bytes[m[1]] = mib(m[2]);
      keep(line);
    } else if (
      (m = line.match(
        /size\s*=\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)\/(\d+) seqs\), K \((\w+)\):\s*([\d.]+) MiB, V \((\w+)\):\s*([\d.]+) MiB/,
      ))
    ) {
      f.kv_cache = {
        total_bytes: mib(m[1]), cells: +m[2], layers: +m[3], seqs: +m[4], seqs_max: +m[5],
        type_k: m[6], k_bytes: mib(m[7]), type_v: m[8], v_bytes: mib(m[9]),
      };
      keep(line);
    } else if ((m = line.match(/graph nodes\s*=\s*(\d+)/))) {
      f.graph_nodes = +m[1];
      keep(line);
    } else if ((m = line.match(/graph splits\s*=\s*(\d+)/))) {
      f.graph_splits = +m[1];
      keep(line);
    } else if ((m = line.match(/^llama_context:\s+(n_ctx|n_ctx_seq|n_ctx_per_seq|n_batch|n_ubatch|n_seq_max|flash_attn|causal_attn|kv_unified|freq_base|freq_scale)\s*=\s*(\S+)/))) {
      (f.llama_context ??= {})[m[1]] = /^-?[\d.]+$/.test(m[2]) ? +m[2] : m[2];
      keep(line);
    } else if (/reserv|n_tokens|build|commit|attn_rot|print_info: (file type|file size|model params|n_vocab)/i.test(line)) {
      keep(line);
    }
  }
  return { figures: f, log: kept };
}

function makeGguf(shape, dir) {
  const tool = process.env.GPUMEM_MAKE_LLAMA_GGUF ?? path.join(root, "build", "gpumem_make_llama_gguf");
  const file = path.join(dir, `${shape.name}.gguf`);
  const args = ["--name", shape.name, "--layers", shape.n_layer, "--embd", shape.n_embd, "--heads", shape.n_head,
    "--kv-heads", shape.n_head_kv, "--ff", shape.n_ff, "--vocab", shape.n_vocab, "--ctx-train", shape.n_ctx_train,
    "--type", shape.weight_type, "--rope-base", shape.rope_freq_base, "-o", file].map(String);
  if (shape.tied_embeddings) args.push("--tied");
  const { path: _tmp, ...info } = JSON.parse(execFileSync(tool, args, { encoding: "utf8" }));  // no temp path in the record
  return { file, info };
}

const settle = () => new Promise((r) => setTimeout(r, 200));  // the addon's log callbacks arrive async

async function main() {
  const argv = process.argv.slice(2);
  const quick = argv.includes("--quick");
  const outAt = argv.indexOf("--out");
  const outPath = outAt >= 0 ? argv[outAt + 1] : path.join(root, "tests", "data", "llm", "llama_cpp_buffers.json");
  const only = process.env.GPUMEM_LLM_SHAPES?.split(",");
  const { lib, resolved } = await loadNodeLlamaCpp(here);
  const { getLlama, LlamaLogLevel } = lib;
  let lines = [];
  const llama = await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, progressLogs: false,
    logLevel: LlamaLogLevel.debug,
    logger: (level, message) => { for (const l of String(message).split("\n")) if (l.trim()) lines.push(l); },
  });
  const pkg = JSON.parse(fs.readFileSync(path.join(path.dirname(resolved), "..", "package.json"), "utf8"));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpumem_llm_"));
  const runs = [];
  try {
    for (const shape of SHAPES) {
      if (only && !only.includes(shape.name)) continue;
      const { file, info } = makeGguf(shape, dir);
      lines = [];
      const t0 = Date.now();
      const model = await llama.loadModel({ modelPath: file, gpuLayers: 0, useMmap: true, ignoreMemorySafetyChecks: true });
      await settle();
      const load = parse(lines);
      process.stderr.write(`${shape.name}: loaded in ${Date.now() - t0} ms\n`);
      for (const c of contextsFor(shape, quick)) {
        lines = [];
        let error = null;
        try {
          const ctx = await model.createContext({
            contextSize: c.n_ctx, batchSize: c.n_batch, sequences: 1, flashAttention: c.flash_attn,
            // GgmlType's keys are upper case; a lower-case name is silently ignored (f16 is used)
            experimentalKvCacheKeyType: c.type_k.toUpperCase(), experimentalKvCacheValueType: c.type_v.toUpperCase(),
            ignoreMemorySafetyChecks: true, failedCreationRemedy: false,
          });
          await settle();
          await ctx.dispose();
          await settle();
        } catch (e) {
          error = String(e?.message ?? e);
        }
        const got = parse(lines);
        const kv = got.figures.kv_cache;
        if (!error && (kv?.type_k !== c.type_k || kv?.type_v !== c.type_v || kv?.cells !== c.n_ctx))
          throw new Error(`llama.cpp did not take ${JSON.stringify(c)}: its KV cache is ${JSON.stringify(kv)}`);
        const run = {
          shape: { ...shape, head_dim: shape.n_embd / shape.n_head },
          gguf: info,
          context_params: c,
          ...(error ? { error } : {}),
          ...got.figures,
          model_buffer_bytes: load.figures.model_buffer_bytes,
          log: [...load.log.filter((l) => /model buffer size|print_info/.test(l)), ...got.log],
        };
        runs.push(run);
        process.stderr.write(`  ctx ${c.n_ctx} ub ${c.n_ubatch} k ${c.type_k} v ${c.type_v} fa ${c.flash_attn}: ` +
          (error ? `error ${error}` : `compute ${JSON.stringify(got.figures.compute_buffer_bytes)}`) + "\n");
      }
      await model.dispose();
      fs.rmSync(file);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const doc = {
    comment: "llama.cpp's own memory figures for sparse llama-architecture GGUFs on the CPU backend, " +
      "recorded by tools/llama_cpp_buffers.mjs (see its header to rerun; tests/data/llm/README.md for the formulas).",
    mib_rounding: "llama.cpp prints sizes in MiB with 2 decimals; *_bytes = printed MiB x 1048576, " +
      "so each figure is within 0.005 MiB (5243 bytes) of the true size; compute_buffer_bytes_4dp " +
      "comes from the line llama.cpp prints when the context is freed, with 4 decimals (within 53 bytes)",
    node_llama_cpp: pkg.version,
    llama_cpp_release: llama.llamaCppRelease,
    build_type: llama.buildType,
    system_info: llama.systemInfo,
    limits: "n_ubatch always equals n_batch (node-llama-cpp's addon ties them); q8_0 V cache only with flash attention",
    runs,
  };
  fs.mkdirSync(path.dirname(outPath), { recursive: true });
  fs.writeFileSync(outPath, JSON.stringify(doc, null, 1) + "\n");
  process.stderr.write(`${runs.length} runs -> ${outPath}\n`);
  await llama.dispose();
}

main().catch((e) => {
  process.stderr.write(`${e.stack ?? e}\n`);
  process.exit(1);
});
