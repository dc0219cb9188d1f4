#!/usr/bin/env bash
# Start-up time of the CLI and of the packages (issue: throughput, item 4): the median of
# N runs of `cos --help` and of bare imports, wall time. Run alone on the machine.
#   bash benchmarks/startup.sh [N]
# SRC=DIR times another checkout's code with this venv (e.g. a worktree of an older commit).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-7}
PY="$PWD/.venv/bin/python"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() {  # label, command...
  local label=$1; shift
  for _ in $(seq "$N"); do
    local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
    echo "$t1 - $t0" | bc
  done | median | xargs printf "%-40s %.2f s\n" "$label"
}
if [ -n "${SRC:-}" ]; then cd "$SRC"; fi  # the code imported is the current folder's
run "cos --help" $PY -m cos_integrations.cli --help
run "python -c 'import cos_integrations'" $PY -c "import cos_integrations"
run "python -c 'from cos_integrations import ChainOfSummaries'" $PY -c "from cos_integrations import ChainOfSummaries"
run "python -c 'import llamaindex_ext'" $PY -c "import llamaindex_ext"
run "python -c 'import langchain_ext'" $PY -c "import langchain_ext"
