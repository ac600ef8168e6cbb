// Runs the @azure/cosmos SDK's own functional tests (copied by run.sh into work/, see README.md)
// against cfp emulator. The tests import the SDK's sources (../../../src/index.js,
// ../../../src/utils/time.js, ...): they resolve here to the same modules of the published package
// pinned in package.json (its dist/esm tree has the layout of src/), so the tests run unchanged
// against the release they were written for.
import { fileURLToPath } from "node:url";
import path from "node:path";
import { defineConfig } from "vitest/config";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, "node_modules/@azure/cosmos/dist/esm");

export default defineConfig({
  resolve: {
    alias: [
      // "../../../../src" and "../../../../src/index.js"
      { find: /^(?:\.\.\/)+src(?:\/index(?:\.js)?)?$/, replacement: path.join(dist, "index.js") },
      // "../../../src/utils/time.js", "../../../../src/documents" (a folder's index)
      {
        find: /^(?:\.\.\/)+src\/(.*?)(?:\.js)?$/,
        replacement: "$1",
        customResolver(id) {
          for (const c of [`${id}.js`, `${id}/index.js`]) {
            const p = path.join(dist, c);
            if (fileExistsSync(p)) return p;
          }
          return null;
        },
      },
    ],
  },
  test: {
    root: path.join(here, "work"),
    include: ["test/**/*.spec.ts"],
    exclude: ["test/internal/**"],
    globalSetup: [path.join(here, "globalSetup.mjs")],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // One file at a time: the tests create and delete databases, some delete all of them, and
    // the machine is small.
    fileParallelism: false,
    reporters: ["default", "json"],
    outputFile: { json: path.join(here, "work", "results.json") },
  },
});

import fs from "node:fs";
function fileExistsSync(p) {
  try {
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}
