#!/usr/bin/env bash
# Usage: tests/support/phase.sh NAME COMMAND [ARG...]
#
# Runs one phase of `make test` and prints how long it took, also appending that line to
# $TEST_PHASES (make test prints them all again at the end). Exits with the command's status.
set -uo pipefail

name="$1"
shift
start=$SECONDS
"$@"
status=$?
line=$(printf 'make test: %-52s %4d s' "$name" $((SECONDS - start)))
[ "$status" = 0 ] || line="$line  FAILED (exit $status)"
echo "$line"
[ -n "${TEST_PHASES:-}" ] && echo "$line" >>"$TEST_PHASES"
exit "$status"
