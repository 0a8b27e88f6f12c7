#!/bin/sh
# tools/sanitized fails each defect of sanitizer_canary.c, naming it, and
# passes the clean run: the sanitizer run of tools/test cannot pass for
# want of sanitizers (sanitizer builds only).
#
# Usage: check_sanitized.sh SANITIZED CANARY
#
# The inner reports go to a file, not stderr: this test may itself run
# under tools/sanitized, which would take them for its own.
set -u
sanitized=$1 canary=$2
log=$(mktemp "${TMPDIR:-/tmp}/scorch-canary-XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
failures=0

expect() { # mode, exit status wanted (0 or "fail"), text the report holds
    "$sanitized" "$canary" "$1" >/dev/null 2>"$log"
    status=$?
    if [ "$2" = 0 ] && [ "$status" -ne 0 ]; then
        echo "sanitizer_canary $1: exit $status, expected 0; its output:" >&2
    elif [ "$2" = fail ] && [ "$status" -eq 0 ]; then
        echo "sanitizer_canary $1: passed under tools/sanitized; its output:" >&2
    elif [ -n "$3" ] && ! grep -q "$3" "$log"; then
        echo "sanitizer_canary $1: no '$3' in its output:" >&2
    else
        return
    fi
    cat "$log" >&2
    failures=$((failures + 1))
}

for run in "" run-; do
    expect ${run}clean 0 ''
    expect ${run}leak fail 'ERROR: LeakSanitizer: detected memory leaks'
    expect ${run}overflow fail 'ERROR: AddressSanitizer: heap-buffer-overflow'
    expect ${run}undefined fail 'runtime error: signed integer overflow'
done
[ "$failures" -eq 0 ]
