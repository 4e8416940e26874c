#!/bin/sh
# expect_exit.sh CODE PATTERN COMMAND...: runs COMMAND and passes when it exits with CODE and its
# output (stdout and stderr) has a line matching the extended regular expression PATTERN.
code=$1
pattern=$2
shift 2
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
if [ "$rc" -ne "$code" ]; then
  echo "expect_exit: exit status $rc, expected $code" >&2
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
  echo "expect_exit: no line matches '$pattern'" >&2
  exit 1
fi
