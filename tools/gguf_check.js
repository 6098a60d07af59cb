#!/usr/bin/env node
// Reads a GGUF file with Hugging Face's independent reader (@huggingface/gguf)
// and prints what it found as JSON, for tests/weights/test_gguf.cpp to
// compare with gpumem's reader on files gpumem's writer made.
//
//   node tools/gguf_check.js FILE.gguf
//
// The package is looked up from GPUMEM_NODE_MODULES (a folder holding
// node_modules/@huggingface/gguf, made with `npm install @huggingface/gguf`),
// then from here. Without it, exits 77 (the tests' "skip") with a line on stderr.
"use strict";
const path = require("path");
const { requirePackage } = require("./node_package");

const load = () => requirePackage("@huggingface/gguf");

async function main() {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write("usage: node tools/gguf_check.js FILE.gguf\n");
    process.exit(2);
  }
  const { gguf } = load();
  const { metadata, tensorInfos, tensorDataOffset } = await gguf(path.resolve(file), { allowLocalFile: true });
  // BigInts as decimal strings; long arrays as their length, as gpumem prints them.
  const text = (v) =>
    typeof v === "bigint" ? v.toString() : Array.isArray(v) && v.length > 8 ? `[${v.length}]` : v;
  const out = {
    version: metadata.version,
    tensor_count: metadata.tensor_count.toString(),
    kv_count: metadata.kv_count.toString(),
    tensor_data_offset: tensorDataOffset.toString(),
    metadata: Object.fromEntries(
      Object.entries(metadata)
        .filter(([k]) => !["version", "tensor_count", "kv_count"].includes(k))
        .map(([k, v]) => [k, Array.isArray(v) ? v.map(text) : text(v)]),
    ),
    tensors: tensorInfos.map((t) => ({
      name: t.name,
      shape: t.shape.map((d) => d.toString()),
      type: t.dtype,
      offset: t.offset.toString(),
    })),
  };
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(`${e.message}\n`);
  process.exit(1);
});
