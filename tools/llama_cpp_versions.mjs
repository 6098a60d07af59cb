#!/usr/bin/env node
// Records, for ONE installed node-llama-cpp (and so one llama.cpp release),
// a compact matrix of llama.cpp's own memory figures on the CPU backend, to
// learn how they changed between llama.cpp releases: KV cache (bytes, cells,
// layers, and the windowed cache of Gemma 2 where llama.cpp makes one),
// compute buffer, output buffer, graph nodes and splits, and the n_ctx /
// n_batch / n_ubatch / flash_attn / KV types llama.cpp reports taking. The
// version's entry is written into tests/data/llm/llama_cpp_versions.json
// (replacing an earlier entry of the same node-llama-cpp version, keeping the
// others), so running it once per installed version builds the file. The
// findings are in tests/data/llm/llama_cpp_versions.md.
//
// To rerun (about 2 minutes a version on 2 cores; llama.cpp prefetches the
// mapping, so the F16 sparse files fill up to 17 GiB of page cache with zero
// pages, which the kernel reclaims; the largest context, Llama-2-7B at
// n_ctx 8192, allocates about 4.5 GiB):
//
//   for v in 3.1.1 3.3.0 3.5.0 3.7.0 3.9.0 3.12.0 3.16.0 3.20.0 3.21.1; do
//     mkdir -p /work/nlc/$v && (cd /work/nlc/$v && echo '{"private":true}' > package.json &&
//       npm install --omit=optional node-llama-cpp@$v @node-llama-cpp/linux-x64@$v)
//     GPUMEM_NODE_MODULES=/work/nlc/$v node tools/llama_cpp_versions.mjs [--out FILE]
//   done
//
// (--omit=optional plus the explicit @node-llama-cpp/linux-x64 skips the CUDA
// and Vulkan binary packages, hundreds of MiB, that are not used here.)
// GPUMEM_NODE_MODULES is a folder holding node_modules/node-llama-cpp;
// GPUMEM_MAKE_LLAMA_GGUF is the sparse-GGUF writer (default
// build/gpumem_make_llama_gguf); TMPDIR is where the sparse files go;
// GPUMEM_LLM_SHAPES=a,b records only those shapes; --quick one run a shape.
// Without node-llama-cpp, exits 77 with a line on stderr.
//
// Old releases print other log lines than the newest: `llama_kv_cache_init:
// CPU KV buffer size`, `llama_new_context_with_model: KV self size`,
// `llama_init_from_model:` / `llama_new_context_with_model:` instead of
// `llama_context:`, `llama_kv_cache_unified(_iswa):`, `init: kv_size = ...`,
// `create_memory: n_ctx = N (padded)`; the parser takes every variant met in
// node-llama-cpp 3.1.1 .. 3.21.1 and keeps the raw lines. Where the log prints
// no cell count (before b5590), `kv.cells` is `kv_size` from `init:` /
// `llama_kv_cache_init:`, else the n_ctx llama.cpp reports, and
// `kv.cells_from` says which. The 4-decimal compute-buffer line (printed when
// the context is freed) exists only in recent releases.
//
// What node-llama-cpp cannot set: n_ubatch apart from n_batch (every run has
// n_batch == n_ubatch; node-llama-cpp asks batchSize + 1 for models with a
// sliding window in some versions, and the record keeps what llama.cpp
// reports); the KV cache type before node-llama-cpp 3.20.0 (its addon has no
// such option), so the q8_0 runs are recorded only from 3.20.0 on and listed
// as `skipped` before; flash attention for Gemma 2: node-llama-cpp's JS
// always refuses it (GgufInsights.flashAttentionSupported is false for
// gemma2), so this tool overrides that check on the model object
// (`flash_attn_override` in the run) and lets llama.cpp decide;
// `llama_context.flash_attn` says what llama.cpp took. A quantized V cache needs flash attention, so with
// flash attention off the q8_0 runs quantize K only.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { MiB, loadNodeLlamaCpp } from "./node_llama_cpp.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");

// Fields as in llama_cpp_buffers.json / llama_cpp_swa.json.
const SHAPES = [
  { name: "llama-3-8b", architecture: "llama", n_layer: 32, n_embd: 4096, n_head: 32, n_head_kv: 8, head_dim: 128,
    n_ff: 14336, n_vocab: 128256, n_ctx_train: 8192, tied_embeddings: false, weight_type: "F16", rope_freq_base: 500000 },
  { name: "llama-2-7b", architecture: "llama", n_layer: 32, n_embd: 4096, n_head: 32, n_head_kv: 32, head_dim: 128,
    n_ff: 11008, n_vocab: 32000, n_ctx_train: 4096, tied_embeddings: false, weight_type: "F16", rope_freq_base: 10000 },
  { name: "qwen2-0.5b-llama", architecture: "llama", n_layer: 24, n_embd: 896, n_head: 14, n_head_kv: 2, head_dim: 64,
    n_ff: 4864, n_vocab: 151936, n_ctx_train: 32768, tied_embeddings: true, weight_type: "F16", rope_freq_base: 1000000 },
  { name: "gemma-2-9b", architecture: "gemma2", sliding_window: 4096, n_layer: 42, n_embd: 3584, n_head: 16, n_head_kv: 8,
    head_dim: 256, n_ff: 14336, n_vocab: 256000, n_ctx_train: 8192, tied_embeddings: true, weight_type: "F16",
    rope_freq_base: 10000 },
];

// n_ctx 2000 (not a multiple of 32 or 256: shows the padding), 2048, 8192;
// flash attention off and on; batch 512, f16 KV; Llama-3-8B also at batch
// 128, Llama-2-7B also with a q8_0 cache.
function contextsFor(shape, quick) {
  const out = [];
  const variants = [{ batch: 512, kv: "f16" }];
  if (shape.name === "llama-3-8b") variants.push({ batch: 128, kv: "f16" });
  if (shape.name === "llama-2-7b") variants.push({ batch: 512, kv: "q8_0" });
  for (const v of variants)
    for (const n_ctx of [2000, 2048, 8192])
      for (const flash_attn of [false, true]) {
        const type_v = v.kv === "q8_0" && !flash_attn ? "f16" : v.kv;
        out.push({ n_ctx, n_batch: v.batch, type_k: v.kv, type_v, flash_attn });
      }
  return quick ? out.slice(0, 1) : out;
}

const mib = (s) => Math.round(parseFloat(s) * MiB);
const num = (s) => (/^-?[\d.]+$/.test(s) ? +s : s);

// llama.cpp's log lines of one context creation (and its freeing), parsed.
const CTX_PREFIX = "(?:llama_context|llama_new_context_with_model|llama_init_from_model)";
const CTX_FIELD = new RegExp(
  `^${CTX_PREFIX}:\\s+(n_ctx|n_ctx_seq|n_ctx_per_seq|n_batch|n_ubatch|n_seq_max|flash_attn|causal_attn|kv_unified|freq_base|freq_scale)\\s*=\\s*(\\S+)(\\s*\\(padded\\))?`);
function parse(lines) {
  const ctx = {};
  const caches = [];      // one per KV cache made (two with iSWA)
  const compute = {}, compute4 = {}, output = {};
  let graph_nodes = null, graph_splits = null;
  let kvSizeAt = null, layersAt = null, types = null;
  const log = [];
  const keep = (l) => log.push(l.replace(/\s+$/, ""));
  const cur = () => {
    if (!caches.length || caches[caches.length - 1].done) caches.push({ kind: null });
    return caches[caches.length - 1];
  };
  for (const line of lines) {
    let m;
    if ((m = line.match(/(\S+)\s+compute buffer size is\s+([\d.]+) MiB/))) {
      compute4[m[1]] = mib(m[2]); keep(line);
    } else if ((m = line.match(/(\S+)\s+compute buffer size\s*=\s*([\d.]+) MiB/))) {
      compute[m[1]] = mib(m[2]); keep(line);
    } else if ((m = line.match(/(\S+)\s+output buffer size\s*=\s*([\d.]+) MiB/))) {
      output[m[1]] = mib(m[2]); keep(line);
    } else if ((m = line.match(/creating\s+(non-SWA|SWA) KV cache, size = (\d+) cells/))) {
      caches.push({ kind: m[1], cells: +m[2], cells_from: "printed" }); keep(line);
    } else if ((m = line.match(/(\S+)\s+KV buffer size\s*=\s*([\d.]+) MiB/))) {
      const c = cur();
      (c.buffers ??= {})[m[1]] = mib(m[2]);
      keep(line);
    } else if ((m = line.match(
      /size\s*=\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)(?:\/(\d+))? seqs\), K \((\w+)\):\s*([\d.]+) MiB, V \((\w+)\):\s*([\d.]+) MiB/))) {
      Object.assign(cur(), { bytes: mib(m[1]), cells: +m[2], cells_from: "printed", layers: +m[3], type_k: m[6],
        k_bytes: mib(m[7]), type_v: m[8], v_bytes: mib(m[9]), done: true });
      keep(line);
    } else if ((m = line.match(/KV self size\s*=\s*([\d.]+) MiB, K \((\w+)\):\s*([\d.]+) MiB, V \((\w+)\):\s*([\d.]+) MiB/))) {
      Object.assign(cur(), { bytes: mib(m[1]), type_k: m[2], k_bytes: mib(m[3]), type_v: m[4], v_bytes: mib(m[5]), done: true });
      keep(line);
    } else if ((m = line.match(/kv_size = (\d+), offload = \d+, type_k = '(\w+)', type_v = '(\w+)', n_layer = (\d+)/))) {
      kvSizeAt = +m[1]; types = { type_k: m[2], type_v: m[3] }; layersAt = +m[4]; keep(line);
    } else if ((m = line.match(/^create_memory: n_ctx = (\d+) \(padded\)/))) {
      ctx.n_ctx_padded = +m[1]; keep(line);
    } else if ((m = line.match(/graph nodes\s*=\s*(\d+)/))) {
      graph_nodes = +m[1]; keep(line);
    } else if ((m = line.match(/graph splits\s*=\s*(\d+)/))) {
      graph_splits = +m[1]; keep(line);
    } else if ((m = line.match(CTX_FIELD))) {
      if (m[3]) ctx.n_ctx_padded = +m[2];         // "n_ctx = 2016 (padded)" after "n_ctx = 2000"
      else if (!(m[1] in ctx)) ctx[m[1]] = num(m[2]);
      keep(line);
    } else if (/reserv|worst-case|n_tokens|attn_rot|swa|flash|soft.?cap|padding|kv_size|type_k/i.test(line)
        && !/^graph_reserve: reserving a graph/.test(line)) {
      keep(line);
    }
  }
  // What the log did not print: cells from kv_size or n_ctx, layers from n_layer.
  for (const c of caches) {
    if (c.cells == null) {
      if (kvSizeAt != null) Object.assign(c, { cells: kvSizeAt, cells_from: "kv_size" });
      else Object.assign(c, { cells: ctx.n_ctx_padded ?? ctx.n_ctx, cells_from: "n_ctx" });
    }
    if (c.layers == null && layersAt != null) c.layers = layersAt;
    if (c.bytes == null && c.buffers) c.bytes = Object.values(c.buffers).reduce((a, b) => a + b, 0);
    delete c.done;
  }
  const t = caches.find((c) => c.type_k) ?? types ?? {};
  ctx.type_k = t.type_k ?? null;
  ctx.type_v = t.type_v ?? null;
  const full = caches.find((c) => c.kind !== "SWA");
  const swa = caches.find((c) => c.kind === "SWA");
  const kv = full ? {
    bytes: caches.reduce((a, c) => a + (c.bytes ?? 0), 0),
    buffer_bytes: caches.reduce((a, c) => a + Object.values(c.buffers ?? {}).reduce((x, y) => x + y, 0), 0),
    cells: full.cells, cells_from: full.cells_from, layers: full.layers ?? null,
    type_k: full.type_k ?? ctx.type_k, type_v: full.type_v ?? ctx.type_v,
    swa: swa ? { cells: swa.cells, layers: swa.layers ?? null, bytes: swa.bytes ?? null,
      whole_context: { cells: full.cells, layers: full.layers ?? null, bytes: full.bytes ?? null } } : null,
  } : null;
  const sum = (o) => (Object.keys(o).length ? Object.values(o).reduce((a, b) => a + b, 0) : null);
  return {
    llama_context: ctx, kv,
    compute_buffer_bytes: sum(compute), compute_buffer_bytes_4dp: sum(compute4),
    compute_buffer_by_backend: compute,
    output_buffer_bytes: sum(output), graph_nodes, graph_splits, log,
  };
}

function makeGguf(shape, dir) {
  const tool = process.env.GPUMEM_MAKE_LLAMA_GGUF ?? path.join(root, "build", "gpumem_make_llama_gguf");
  const file = path.join(dir, `${shape.name}.gguf`);
  const args = ["--name", shape.name, "--layers", shape.n_layer, "--embd", shape.n_embd, "--heads", shape.n_head,
    "--kv-heads", shape.n_head_kv, "--head-dim", shape.head_dim, "--ff", shape.n_ff, "--vocab", shape.n_vocab,
    "--ctx-train", shape.n_ctx_train, "--type", shape.weight_type, "--rope-base", shape.rope_freq_base, "-o", file];
  if (shape.architecture !== "llama") args.push("--arch", shape.architecture, "--sliding-window", shape.sliding_window);
  if (shape.tied_embeddings) args.push("--tied");
  const { path: _tmp, ...info } = JSON.parse(execFileSync(tool, args.map(String), { encoding: "utf8" }));
  return { file, info };
}

const settle = () => new Promise((r) => setTimeout(r, 300));  // the addon's log callbacks arrive async

// "3.12.0" < "3.16.0" as numbers.
const cmpVersion = (a, b) => {
  const x = a.split(".").map(Number), y = b.split(".").map(Number);
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i] - y[i];
  return 0;
};

async function main() {
  const argv = process.argv.slice(2);
  const quick = argv.includes("--quick");
  const outAt = argv.indexOf("--out");
  const outPath = outAt >= 0 ? argv[outAt + 1] : path.join(root, "tests", "data", "llm", "llama_cpp_versions.json");
  const only = process.env.GPUMEM_LLM_SHAPES?.split(",");
  const { lib, resolved } = await loadNodeLlamaCpp(here);
  const pkgDir = path.join(path.dirname(resolved), "..");
  const pkg = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8"));
  // KV cache types: node-llama-cpp 3.20.0 added experimentalKvCache{Key,Value}Type.
  const typings = fs.readFileSync(path.join(pkgDir, "dist", "evaluator", "LlamaContext", "types.d.ts"), "utf8");
  const canSetKvType = typings.includes("experimentalKvCacheKeyType");
  let lines = [];
  const llama = await lib.getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, progressLogs: false,
    logLevel: lib.LlamaLogLevel.debug,
    logger: (level, message) => { for (const l of String(message).split("\n")) if (l.trim()) lines.push(l); },
  });
  const release = llama.llamaCppRelease;
  process.stderr.write(`node-llama-cpp ${pkg.version}: llama.cpp ${JSON.stringify(release)} (${llama.buildType})\n`);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "gpumem_versions_"));
  const runs = [], skipped = [];
  try {
    for (const shape of SHAPES) {
      if (only && !only.includes(shape.name)) continue;
      const { file, info } = makeGguf(shape, dir);
      lines = [];
      const t0 = Date.now();
      const model = await llama.loadModel({ modelPath: file, gpuLayers: 0, useMmap: true, ignoreMemorySafetyChecks: true });
      await settle();
      const loadLog = lines.filter((l) => /model buffer size|print_info: (file type|n_swa|n_vocab|n_embd_head|f_attn_logit)|n_swa|sliding/i.test(l))
        .map((l) => l.trimEnd());
      process.stderr.write(`${shape.name}: loaded in ${Date.now() - t0} ms\n`);
      // node-llama-cpp (every 3.x) never asks for flash attention on Gemma 2 (its GgufInsights says
      // unsupported); override its check so that llama.cpp itself decides (recorded as
      // flash_attn_override, and llama_context.flash_attn says what llama.cpp took).
      const override = shape.architecture === "gemma2" && !model.flashAttentionSupported;
      if (override) Object.defineProperty(model, "flashAttentionSupported", { get: () => true, configurable: true });
      for (const c of contextsFor(shape, quick)) {
        if (c.type_k !== "f16" && !canSetKvType) {
          skipped.push({ shape: shape.name, context_params: c, why: "this node-llama-cpp cannot set the KV cache type" });
          continue;
        }
        lines = [];
        let error = null, node_context_size = null;
        try {
          const opts = {
            contextSize: c.n_ctx, batchSize: c.n_batch, sequences: 1, flashAttention: c.flash_attn,
            ignoreMemorySafetyChecks: true, failedCreationRemedy: false,
          };
          if (canSetKvType) {
            // GgmlType's keys are upper case; a lower-case name is silently ignored (f16 is used)
            opts.experimentalKvCacheKeyType = c.type_k.toUpperCase();
            opts.experimentalKvCacheValueType = c.type_v.toUpperCase();
          }
          const ctx = await model.createContext(opts);
          node_context_size = ctx.contextSize;
          await settle();
          await ctx.dispose();
          await settle();
        } catch (e) {
          error = String(e?.message ?? e);
        }
        const got = parse(lines);
        if (!error && (got.kv?.type_k !== c.type_k || got.kv?.type_v !== c.type_v))
          throw new Error(`llama.cpp did not take ${JSON.stringify(c)}: its KV cache is ${JSON.stringify(got.kv)}`);
        const { log, ...figures } = got;
        runs.push({
          shape, gguf: info, context_params: c, ...(override && c.flash_attn ? { flash_attn_override: true } : {}),
          ...(error ? { error } : {}), node_context_size, ...figures,
          log: [...loadLog, ...log],
        });
        process.stderr.write(`  ctx ${c.n_ctx} b ${c.n_batch} k ${c.type_k} v ${c.type_v} fa ${c.flash_attn}: ` +
          (error ? `error ${error}` : `n_ctx ${got.llama_context.n_ctx_padded ?? got.llama_context.n_ctx} ` +
            `ub ${got.llama_context.n_ubatch} fa ${got.llama_context.flash_attn} kv ${got.kv?.bytes} ` +
            `(${got.kv?.cells} cells${got.kv?.swa ? `, swa ${got.kv.swa.cells}` : ""}) ` +
            `compute ${got.compute_buffer_bytes} nodes ${got.graph_nodes}`) + "\n");
      }
      await model.dispose();
      fs.rmSync(file);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const entry = {
    node_llama_cpp: pkg.version,
    llama_cpp_release: release?.release ?? null,
    llama_cpp_repo: release?.repo ?? null,
    build_type: llama.buildType,
    can_set_kv_type: canSetKvType,
    runs,
    skipped,
  };
  let doc = {
    comment: "llama.cpp's own memory figures for sparse GGUFs on the CPU backend, one entry per node-llama-cpp " +
      "version (and so llama.cpp release), recorded by tools/llama_cpp_versions.mjs (its header says how to rerun it); " +
      "findings in llama_cpp_versions.md. *_bytes = printed MiB x 1048576 (2 decimals: within 5243 bytes; " +
      "compute_buffer_bytes_4dp, where the release prints it, within 53 bytes). kv.bytes sums every KV cache " +
      "(both caches with iSWA); kv.cells/layers are the whole-context cache's, kv.swa the windowed cache's.",
    recorded: "2026-12-03",
    system_info: llama.systemInfo,
    versions: [],
  };
  if (fs.existsSync(outPath)) doc = { ...doc, versions: JSON.parse(fs.readFileSync(outPath, "utf8")).versions ?? [] };
  doc.versions = [...doc.versions.filter((v) => v.node_llama_cpp !== pkg.version), entry]
    .sort((a, b) => cmpVersion(a.node_llama_cpp, b.node_llama_cpp));
  fs.mkdirSync(path.dirname(outPath), { recursive: true });
  fs.writeFileSync(outPath, JSON.stringify(doc, null, 1) + "\n");
  process.stderr.write(`${runs.length} runs (${skipped.length} skipped) for ${pkg.version} -> ${outPath}\n`);
  await llama.dispose();
}

main().catch((e) => {
  process.stderr.write(`${e.stack ?? e}\n`);
  process.exit(1);
});
