#!/usr/bin/env bash
# Runs the whole suite several times with CPU burners beside it, as on a busy machine (CI may run on
# a developer's box that is doing other work): a test that fails only here has a race or a deadline
# that assumes an idle machine, and that is a defect to fix at its cause.
#
#   bash scripts/test-under-load.sh            # 3 runs beside 4 burners
#   RUNS=1 BURNERS=8 bash scripts/test-under-load.sh -k chat   # extra arguments go to pytest
#
# The burners are stress-ng's CPU workers when stress-ng is installed (Debian: apt-get install
# stress-ng), else Python busy loops; they stop when the script ends, however it ends. Each run's
# closing line and time are printed at the end; the exit code is 1 if any run failed.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-3}"
BURNERS="${BURNERS:-4}"


burners=()
stop_burners() {
    if [ "${#burners[@]}" -gt 0 ]; then
        kill "${burners[@]}" 2>/dev/null || true
        wait "${burners[@]}" 2>/dev/null || true
    fi
}
trap stop_burners EXIT

if command -v stress-ng >/dev/null; then
    stress-ng --cpu "$BURNERS" --quiet &
    burners+=("$!")
    echo "test-under-load: $BURNERS stress-ng CPU workers" >&2
else
    for _ in $(seq "$BURNERS"); do
        python3 -c 'while True: pass' &
        burners+=("$!")
    done
    echo "test-under-load: $BURNERS Python busy loops (install stress-ng for its CPU workers)" >&2
fi

results=()
failed=0
for run in $(seq "$RUNS"); do
    echo "test-under-load: run $run of $RUNS, load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime)" >&2
    log="$(mktemp)"
    started=$SECONDS
    status=0
    bash scripts/test.sh -q "$@" 2>&1 | tee "$log" || status=$?  # installs first when pyproject.toml changed
    closing="$(grep -E '(passed|failed|error)' "$log" | tail -1)"
    results+=("run $run: $closing ($((SECONDS - started)) s)")
    [ "$status" = 0 ] || failed=1
    rm -f "$log"
done
echo
echo "test-under-load: $BURNERS burners beside the suite"
printf '  %s\n' "${results[@]}"
exit "$failed"
