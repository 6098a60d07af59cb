// Finds an npm package for the check tools: from GPUMEM_NODE_MODULES (a
// folder where `npm install PACKAGE` ran), then from tools/. Without it,
// exits 77 (the tests' "skip") with a line on stderr.
"use strict";
const path = require("path");
const { createRequire } = require("module");

function requirePackage(name) {
  const places = [process.env.GPUMEM_NODE_MODULES, __dirname].filter(Boolean);
  for (const dir of places) {
    try {
      return createRequire(path.join(path.resolve(dir), "x.js"))(name);
    } catch (e) {
      if (e.code !== "MODULE_NOT_FOUND") throw e;
    }
  }
  process.stderr.write(`${name} not found (looked in ${places.join(", ")}); set GPUMEM_NODE_MODULES\n`);
  process.exit(77);
}

module.exports = { requirePackage };
