// What the tools that record llama.cpp's own figures share: finding
// node-llama-cpp (in GPUMEM_NODE_MODULES, or beside the tools), or exiting
// 77 with a line on stderr when it is not installed.
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

export const MiB = 1048576;

export async function loadNodeLlamaCpp(here) {
  const places = [process.env.GPUMEM_NODE_MODULES, here].filter(Boolean);
  for (const dir of places) {
    try {
      const resolved = createRequire(path.join(path.resolve(dir), "x.js")).resolve("node-llama-cpp");
      return { lib: await import(pathToFileURL(resolved).href), resolved };
    } catch (e) {
      if (e.code !== "MODULE_NOT_FOUND" && e.code !== "ERR_MODULE_NOT_FOUND") throw e;
    }
  }
  process.stderr.write(`node-llama-cpp not found (looked in ${places.join(", ")}); set GPUMEM_NODE_MODULES\n`);
  process.exit(77);
}
