// Compares vitest's JSON results with known-failures.txt and prints the verdict.
// Usage: node compare.mjs RESULTS.json KNOWN-FAILURES.txt [--report]
// Exit 0 when every test that did not pass is listed and every listed test ran and did not pass
// (the list only shrinks); 1 otherwise; always 0 with --report.
import fs from "node:fs";

const [resultsFile, knownFile, mode] = process.argv.slice(2);
const report = mode === "--report";
const results = JSON.parse(fs.readFileSync(resultsFile, "utf8"));

// known-failures.txt: one test a line, its full name (describe blocks and title joined by " > ",
// as vitest names it), two spaces and "# ", then the reason. Lines starting with # are comments.
const known = new Map();
for (const line of fs.readFileSync(knownFile, "utf8").split("\n")) {
  if (line.trim() === "" || line.startsWith("#")) continue;
  const i = line.indexOf("  # ");
  known.set((i < 0 ? line : line.slice(0, i)).trim(), i < 0 ? "" : line.slice(i + 4).trim());
}

const seen = new Map(); // full name -> status (passed, failed, skipped, pending, todo)
for (const file of results.testResults ?? []) {
  if ((file.assertionResults ?? []).length === 0 && file.status === "failed") {
    // A file that failed to load: none of its tests ran.
    seen.set(`${file.name.replace(/^.*\/work\//, "")} (file)`, "failed");
  }
  for (const t of file.assertionResults ?? []) {
    const name = [...t.ancestorTitles, t.title].join(" > ");
    // Two tests of one name: the name passes only if both do.
    if (seen.get(name) !== "failed") seen.set(name, t.status);
  }
}

let passed = 0, failed = 0, skipped = 0;
const newFailures = [], nowPassing = [], missing = [];
for (const [name, status] of seen) {
  if (status === "passed") {
    passed++;
    if (known.has(name)) nowPassing.push(name);
  } else if (status === "failed") {
    failed++;
    if (!known.has(name)) newFailures.push(name);
  } else {
    skipped++;
  }
}
for (const name of known.keys()) if (!seen.has(name)) missing.push(name);

const log = (s) => process.stderr.write(s + "\n");
log(`js-suite: ${passed} passed, ${failed} failed, ${skipped} skipped (${seen.size} tests)`);
if (report) {
  for (const [name, status] of seen) if (status === "failed") log(`  failing: ${name}${known.has(name) ? "  # " + known.get(name) : ""}`);
}
for (const n of newFailures) log(`js-suite: failing and not in known-failures.txt: ${n}`);
for (const n of nowPassing) log(`js-suite: passing now, remove from known-failures.txt: ${n}`);
for (const n of missing) log(`js-suite: listed in known-failures.txt but not run: ${n}`);
if (report) process.exit(0);
process.exit(newFailures.length + nowPassing.length + missing.length > 0 ? 1 : 0);
