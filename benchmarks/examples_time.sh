#!/usr/bin/env bash
# The run time of each example on the embedded default model (examples/README.md's "time"
# column): each in a fresh index folder, one after another, alone on the CPU, the model
# already assembled (a first run also assembles it: timed separately as `make demo`).
#   bash benchmarks/examples_time.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/examples-time}
rm -rf "$OUT" && mkdir -p "$OUT"
for ex in quickstart llamaindex_pipeline langchain_retriever miss_triggered_refinement; do
  /usr/bin/time -f "$ex: %e s wall, %M KB peak (python)" -o "$OUT/$ex.time" \
    .venv/bin/python "examples/$ex.py" "$OUT/index-$ex" > "$OUT/$ex.log" 2>&1
  cat "$OUT/$ex.time"
done
# two pages of the Python tutorial (Debian's python3-doc), when installed
if [ -d /usr/share/doc/python3-doc/html/tutorial ]; then
  /usr/bin/time -f "docs_site (2 pages): %e s wall, %M KB peak (python)" -o "$OUT/docs_site.time" \
    .venv/bin/python examples/docs_site.py "$OUT/index-docs" --pages venv,interactive \
    > "$OUT/docs_site.log" 2>&1
  cat "$OUT/docs_site.time"
fi
