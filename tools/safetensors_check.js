#!/usr/bin/env node
// Reads a safetensors file, or a sharded checkpoint's
// model.safetensors.index.json, with Hugging Face's own parser
// (@huggingface/hub's parseSafetensorsMetadata, which checks each tensor's
// dtype, shape and offsets against the file), and prints what it found as
// JSON for tests/weights/test_safetensors_independent.cpp to compare with
// gpumem's reader on files gpumem's writer made.
//
//   node tools/safetensors_check.js DIR FILE
//
// FILE is relative to DIR. The parser fetches from the Hub; a fetch
// that serves DIR's files (byte ranges included) stands in for it, so no
// network is used. The package is looked up from GPUMEM_NODE_MODULES (a
// folder where `npm install @huggingface/hub` ran), then from here.
// Without it, exits 77 (the tests' "skip") with a line on stderr.
"use strict";
const fs = require("fs");
const path = require("path");
const { requirePackage } = require("./node_package");

const load = () => requirePackage("@huggingface/hub");

// Serves https://huggingface.co/local/model/resolve/main/FILE from DIR.
function localFetch(dir) {
  return async (input, init = {}) => {
    const url = new URL(input instanceof URL || typeof input === "string" ? String(input) : input.url);
    const match = url.pathname.match(/\/resolve\/[^/]+\/(.*)$/);
    const file = match && path.join(dir, decodeURIComponent(match[1]));
    if (!file || !fs.existsSync(file)) return new Response("not found", { status: 404 });
    const data = fs.readFileSync(file);
    const range = new Headers(init.headers).get("Range");
    // The Hub answers with an ETag, which the parser requires.
    const etag = { ETag: `"${data.length}"` };
    if (!range) return new Response(init.method === "HEAD" ? null : data, { status: 200, headers: etag });
    const [, from, to] = range.match(/bytes=(\d+)-(\d*)/);
    const end = to === "" ? data.length - 1 : Math.min(Number(to), data.length - 1);
    const body = data.subarray(Number(from), end + 1);
    return new Response(body, {
      status: 206,
      headers: { ...etag, "Content-Range": `bytes ${from}-${end}/${data.length}` },
    });
  };
}

async function main() {
  const [dir, file] = process.argv.slice(2);
  if (!dir || !file) {
    process.stderr.write("usage: node tools/safetensors_check.js DIR FILE\n");
    process.exit(2);
  }
  const { parseSafetensorsMetadata } = load();
  const meta = await parseSafetensorsMetadata({ repo: "local/model", path: file, fetch: localFetch(dir) });
  // One shape for both kinds: tensor name -> {file, dtype, shape, data_offsets}.
  const headers = meta.sharded ? meta.headers : { [file]: meta.header };
  const tensors = {};
  for (const [shard, header] of Object.entries(headers)) {
    for (const [name, info] of Object.entries(header)) {
      if (name === "__metadata__") continue;
      tensors[name] = { file: shard, dtype: info.dtype, shape: info.shape, data_offsets: info.data_offsets };
    }
  }
  process.stdout.write(JSON.stringify({ sharded: meta.sharded, tensors }) + "\n");
}

main().catch((e) => {
  process.stderr.write(`${e.message}\n`);
  process.exit(1);
});
