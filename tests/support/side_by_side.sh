#!/usr/bin/env bash
# Usage: tests/support/side_by_side.sh NAME [--show] -- COMMAND... [:: NAME -- COMMAND...]...
#
# Runs the commands at once (make test puts CPU-bound work beside work that mostly
# waits), each with its output kept in a file of its own, so that none interleaves.
# Prints each one's output once all have ended (a failed one's last, in full), with the
# time each took, also appended to $TEST_PHASES. Exits 1 if any failed.
# One command may be marked --show: its output goes to the terminal as it runs instead
# (the first install, whose progress a newcomer should see).
set -uo pipefail

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
names=()
pids=()
starts=()
shown=()
while [ $# -gt 0 ]; do
  name="$1"
  shift
  show=false
  [ "${1:-}" = "--show" ] && { show=true; shift; }
  [ "${1:-}" = "--" ] || { echo "side_by_side.sh: expected -- after $name" >&2; exit 2; }
  shift
  command=()
  while [ $# -gt 0 ] && [ "$1" != "::" ]; do
    command+=("$1")
    shift
  done
  [ $# -gt 0 ] && shift
  index=${#names[@]}
  names+=("$name")
  starts+=("$SECONDS")
  if $show; then
    shown+=("$index")
    echo "make test: started $name (its output follows as it runs)"
    ( "${command[@]}" 2>&1 | tee "$logs/$index.log"; echo $? >"$logs/$index.status"; echo $SECONDS >"$logs/$index.end" ) &
  else
    echo "make test: started $name"
    ( "${command[@]}" >"$logs/$index.log" 2>&1; echo $? >"$logs/$index.status"; echo $SECONDS >"$logs/$index.end" ) &
  fi
  pids+=($!)
done
wait "${pids[@]}"

failed=0
summary=()
for index in "${!names[@]}"; do
  status=$(cat "$logs/$index.status")
  took=$(($(cat "$logs/$index.end") - ${starts[$index]}))
  line=$(printf 'make test: %-52s %4d s' "${names[$index]}" "$took")
  if [ "$status" != 0 ]; then
    failed=1
    line="$line  FAILED (exit $status)"
  fi
  summary+=("$line")
done
# The passing ones briefly (their last lines say what ran), the failing ones in full;
# a shown one's output is above already.
for index in "${!names[@]}"; do
  if [[ " ${shown[*]} " == *" $index "* ]]; then
    continue
  elif [ "$(cat "$logs/$index.status")" = 0 ]; then
    echo "--- ${names[$index]}: passed; its last lines:"
    tail -n 3 "$logs/$index.log"
  fi
done
for index in "${!names[@]}"; do
  if [ "$(cat "$logs/$index.status")" = 0 ]; then
    continue
  elif [[ " ${shown[*]} " == *" $index "* ]]; then
    echo "--- ${names[$index]}: FAILED; its output is above"
  else
    echo "--- ${names[$index]}: FAILED; its whole output:"
    cat "$logs/$index.log"
  fi
done
for line in "${summary[@]}"; do
  echo "$line"
  # The file's folder is .venv, which the first phase may be the one to make (or fail to).
  [ -n "${TEST_PHASES:-}" ] && [ -d "$(dirname "$TEST_PHASES")" ] && echo "$line" >>"$TEST_PHASES"
done
exit "$failed"
