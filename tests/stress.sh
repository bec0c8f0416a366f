#!/usr/bin/env bash
# The whole suite RUNS times in a row, as `make test` runs it (parallel workers), while
# BUSY busy loops (default 4) keep every core busy:
#   make test-stress [RUNS=10] [BUSY=4] [PYTEST_ARGS="-m 'not slow'"]
# A test that needs a quiet machine fails here first. Exit 0 only when every run passed.
set -u
runs="${1:-10}"
shift || true
busy="${BUSY:-4}"
workers="${TEST_WORKERS:-auto}"
py="${PYTHON:-.venv/bin/python}"
burners=()
for _ in $(seq 1 "$busy"); do
    "$py" -c 'while True: pass' &
    burners+=("$!")
done
trap 'kill "${burners[@]}" 2>/dev/null' EXIT
failed=0
for i in $(seq 1 "$runs"); do
    echo "== stress run $i of $runs ($busy busy loops beside it)"
    if ! "$py" -m pytest -q -p no:cacheprovider -n "$workers" --dist worksteal "$@"; then
        failed=$((failed + 1))
    fi
done
echo "stress: $((runs - failed)) of $runs runs green"
[ "$failed" = 0 ]
