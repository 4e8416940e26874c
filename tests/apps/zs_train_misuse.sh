#!/usr/bin/env bash
# zs_train under misuse (issue 25, docs/reliability.md), one case per ctest:
#   zs_train_misuse.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   paths     every path flag given empty is refused by name (an unset "$VAR"); a device, a FIFO,
#             a directory where a file is read or written, a missing export directory: refused
#             before the first step, one message, non-zero exit on every rank, no hang
#   defaults  a short run with every other flag at its default (--steps 10), and one step: exit 0
#   memory    a model far beyond the node's memory is refused before work naming bytes needed
#             and available (and the seconds it took); under ulimit -v the process limit is
#             named; --memory-check off starts anyway (and then fails on the allocation)
#   data      ranks whose identical relative --data resolves to different files (different
#             working directories) are refused naming both; equal copies train
#   logfull   --json-log on a disk that fills up (a 16 KiB tmpfs in a private mount namespace):
#             the run stops with a message naming the log and the record, not exit 0 (exit 77
#             where no mount namespace can be made)
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"

case "$case_name" in
  paths)
    for f in config deepspeed-config ds-config data json-log save-dir resume-from \
             export-safetensors init-safetensors export-hf init-from-hf export-adapters; do
      expect "empty --$f" "--$f is empty (an unset shell variable?)" "${tiny[@]}" "--$f" ""
    done
    mkfifo "$work/fifo"
    mkdir -p "$work/dir"
    expect "data device" "--data /dev/zero: is a character device" "${tiny[@]}" --data /dev/zero
    expect "data fifo" "--data $work/fifo: is a FIFO (named pipe)" "${tiny[@]}" --data "$work/fifo"
    expect "data missing" "--data $work/none.txt: does not exist" "${tiny[@]}" --data "$work/none.txt"
    expect "log device" "--json-log /dev/full: is a character device" "${tiny[@]}" --json-log /dev/full
    expect "log dir" "--json-log $work/dir: is a directory" "${tiny[@]}" --json-log "$work/dir"
    expect "ds dir" "--deepspeed-config $work/dir: is a directory, not a regular file" "${tiny[@]}" \
      --deepspeed-config "$work/dir"
    expect "init fifo" "--init-safetensors $work/fifo: is a FIFO" "${tiny[@]}" \
      --init-safetensors "$work/fifo"
    expect "init-from-hf file" "--init-from-hf $work/fifo: is a FIFO (named pipe), not a directory" \
      "${tiny[@]}" --init-from-hf "$work/fifo"
    expect "export dir missing" "--export-safetensors $work/no/m.safetensors: directory $work/no does not exist" \
      "${tiny[@]}" --export-safetensors "$work/no/m.safetensors"
    expect "export over a dir" "--export-safetensors $work/dir: is a directory" "${tiny[@]}" \
      --export-safetensors "$work/dir"
    expect "export-hf over a file" "--export-hf $work/fifo: is a FIFO (named pipe): name a directory" \
      "${tiny[@]}" --export-hf "$work/fifo"
    expect "save-dir under a file" "--save-dir $work/fifo/ckpt: $work/fifo is a FIFO (named pipe), not a directory" \
      "${tiny[@]}" --save-dir "$work/fifo/ckpt"
    expect "save-dir at the root" "--save-dir /zs-no-such-dir/ckpt: would be created at the file system's root (an unset shell variable before it?)" \
      "${tiny[@]}" --save-dir /zs-no-such-dir/ckpt
    expect "export at the root" "--export-safetensors /zs-no-such.safetensors: would be created at the file system's root" \
      "${tiny[@]}" --export-safetensors /zs-no-such.safetensors
    expect "sample prompt" "--sample-prompt is empty" "${tiny[@]}" --sample-prompt ""
    # A directory that does not exist yet under a writable one is fine for the directory flags.
    timeout 120 "${mpi[@]}" -np 2 "$bin" "${tiny[@]}" --steps 2 --export-hf "$work/new/a/hf" \
      > "$work/ok.txt" 2>&1 || { cat "$work/ok.txt"; fail "--export-hf into new directories"; }
    [ -f "$work/new/a/hf/config.json" ] || fail "no export in new directories"
    echo "export into new directories: ok"
    ;;
  defaults)
    # The README's kind of short run: only --steps, every other flag at its default.
    timeout 300 "${mpi[@]}" -np 2 "$bin" --steps 10 > "$work/d10.txt" 2>&1 ||
      { cat "$work/d10.txt"; fail "--steps 10 with default flags exited non-zero"; }
    grep -q "param_hash:" "$work/d10.txt" || fail "--steps 10: no param_hash"
    echo "--steps 10 with default flags: $(grep -E '^step +10/10' "$work/d10.txt" | cut -c1-60)"
    # One step: the warm-up default (50) follows the run down to 1.
    timeout 300 "${mpi[@]}" -np 2 "$bin" --layers 2 --heads 2 --width 64 --context 32 --batch 4 \
      --threads 1 --sample-tokens 0 --steps 1 > "$work/d1.txt" 2>&1 ||
      { cat "$work/d1.txt"; fail "--steps 1 exited non-zero"; }
    grep -q "param_hash:" "$work/d1.txt" || fail "--steps 1: no param_hash"
    echo "--steps 1: $(grep -E '^step +1/1' "$work/d1.txt" | cut -c1-60)"
    ;;
  memory)
    t0=$(date +%s.%N)
    expect "oversized" "not enough memory on this node: its 2 ranks need" --steps 2 --layers 48 \
      --width 8192 --heads 64 --threads 1
    t1=$(date +%s.%N)
    grep -qE "GiB is available \((MemAvailable|cgroup)" "$work/e.txt" || fail "available bytes not named"
    echo "oversized model refused in $(echo "$t1 - $t0" | bc) s (mpirun start included)"
    # The process limit (RLIMIT_AS): 2.5 GB leaves ~1.3 GiB beside MPI's mappings; this model needs
    # ~3 GiB per rank.
    big=(--steps 2 --layers 8 --width 1024 --heads 16 --batch 32 --threads 1 --sample-tokens 0)
    (ulimit -v 2500000
     expect "ulimit -v" "not enough memory for this process: one rank needs" "${big[@]}") ||
      exit 1
    grep -qF "RLIMIT_AS (ulimit -v) leaves" "$work/e.txt" || fail "RLIMIT_AS not named"
    (ulimit -v 2500000
     timeout 120 "${mpi[@]}" -np 2 "$bin" "${big[@]}" --memory-check off > "$work/off.txt" 2>&1)
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/off.txt"; fail "--memory-check off: exit $rc"; }
    grep -q "host allocation of" "$work/off.txt" || { cat "$work/off.txt"; fail "off: no allocation failure"; }
    echo "--memory-check off: started, then $(grep -m1 'zs_train: error' "$work/off.txt")"
    expect "bad value" "--memory-check 'maybe' is not one of on, off" "${tiny[@]}" --memory-check maybe
    ;;
  data)
    mkdir -p "$work/a" "$work/b" "$work/c"
    src=$(dirname "$bin")/../share/zeroshard/corpus.txt
    head -c 40000 "$src" > "$work/a/text.txt"
    tail -c 40000 "$src" > "$work/b/text.txt"
    cp "$work/a/text.txt" "$work/c/text.txt"
    timeout 120 "${mpi[@]}" -np 1 -wdir "$work/a" "$bin" "${tiny[@]}" --steps 2 --data text.txt : \
      -np 1 -wdir "$work/b" "$bin" "${tiny[@]}" --steps 2 --data text.txt > "$work/e.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/e.txt"; fail "different texts: exit $rc"; }
    grep -qF "ranks read different training text: ranks disagree on --data: $work/a/text.txt (40000 bytes" "$work/e.txt" &&
      grep -qF "$work/b/text.txt (40000 bytes" "$work/e.txt" || { cat "$work/e.txt"; fail "files not named"; }
    echo "different texts: $(grep 'zs_train: error' "$work/e.txt")"
    timeout 120 "${mpi[@]}" -np 1 -wdir "$work/a" "$bin" "${tiny[@]}" --steps 2 --data text.txt : \
      -np 1 -wdir "$work/c" "$bin" "${tiny[@]}" --steps 2 --data text.txt > "$work/ok.txt" 2>&1 ||
      { cat "$work/ok.txt"; fail "equal copies in different directories refused"; }
    echo "equal copies in different directories: trained"
    ;;
  logfull)
    unshare -m true 2>/dev/null || { echo "SKIP: no mount namespace (unshare -m)"; exit 77; }
    mkdir -p "$work/small"
    unshare -m bash -c "mount -t tmpfs -o size=16k tmpfs '$work/small' &&
      timeout 120 ${mpi[*]} -np 2 '$bin' ${tiny[*]} --steps 400 \
        --json-log '$work/small/log.jsonl'" > "$work/e.txt" 2>&1
    rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { tail -5 "$work/e.txt"; fail "full log disk: exit $rc"; }
    grep -qE "zs_train: error: --json-log $work/small/log.jsonl: write failed: No space left on device: record [0-9]+ \(step\) not stored" "$work/e.txt" ||
      { tail -20 "$work/e.txt"; fail "no message naming the log and the record"; }
    ! grep -q "param_hash:" "$work/e.txt" || fail "the run went on to the end"
    echo "full log disk: $(grep -m1 'zs_train: error' "$work/e.txt")"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
