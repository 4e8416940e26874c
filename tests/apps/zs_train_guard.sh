#!/usr/bin/env bash
# zs_train under misuse (docs/reliability.md), one case per ctest:
#   zs_train_guard.sh CASE ZS_TRAIN WORKDIR MPIRUN [mpirun flags...]
# Cases:
#   overwrite  --overwrite keeps another run's checkpoints until its own first save is complete:
#              a truncated --init-safetensors refuses the run and leaves the directory as it was
#              (that run resumes bitwise); a run killed before its first save has them put back
#              by the next claim; a run that saves removes them then
#   owner      a corrupt owner.json: --resume is refused saying how to recover; --overwrite
#              replaces the checkpoints
#   messages   a resume with another --width names --width first; --lora-rank on a full-model
#              checkpoint says so; a Llama checkpoint resumed as GPT-2 names the family; a Hugging
#              Face config.json's vocab_size 100 is named as such; --optimizer-state-fp32 naming a
#              frozen parameter says it is frozen
#   paths      a --train-shards path with brackets that exists is read as written; --export-hf DIR
#              whose model.safetensors is a directory is refused before work; a full fine-tune
#              from --init-from-hf resumes after the directory is gone (a LoRA run is refused
#              saying it needs its base); a rotary model resumes at a longer --context
source "$(dirname "${BASH_SOURCE[0]}")/zs_train_lib.sh"

# tiny (zs_train_lib.sh) without --width, and a warm-up that fits a one-step run.
t=(--layers 2 --heads 2 --context 32 --batch 4 --warmup 1 --eval-every 3 --eval-batches 1
   --sample-tokens 8 --threads 1)
tiny=("${t[@]}" --width 64)

# The checkpoint directory's files and their checksums (writer.lock aside: it says who holds it).
listing() { (cd "$1" && find . -type f ! -name writer.lock | sort | xargs md5sum); }

case "$case_name" in
  overwrite)
    # A constant learning rate: a run lengthened by --steps continues the shorter one's schedule.
    a=("${tiny[@]}" --lr-schedule constant --save-dir "$work/ck" --save-every 3 --keep 0)
    run_ok "$work/a.txt" 2 "${a[@]}" --steps 6
    run_ok "$work/export.txt" 2 "${tiny[@]}" --steps 1 --export-safetensors "$work/w.safetensors"
    head -c 1000 "$work/w.safetensors" > "$work/trunc.safetensors"
    before=$(listing "$work/ck")
    expect "truncated initial weights" "trunc.safetensors" "${a[@]}" --steps 6 --seed 7 --overwrite \
      --init-safetensors "$work/trunc.safetensors"
    grep -qF "are set aside in $work/ck/.replaced-" "$work/e.txt" ||
      { cat "$work/e.txt"; fail "no note of what --overwrite set aside"; }
    [ "$(listing "$work/ck")" = "$before" ] ||
      { ls -la "$work/ck"; fail "the refused --overwrite changed the directory"; }
    ! ls -d "$work/ck"/.replaced-* 2>/dev/null || fail "a .replaced directory was left"
    echo "refused --overwrite: the directory is as it was"
    # The old run still resumes (nothing of it was lost).
    run_ok "$work/a2.txt" 2 "${a[@]}" --steps 9 --resume
    grep -qF "resumed from $work/ck/step-00000006" "$work/a2.txt" || { cat "$work/a2.txt"; fail "run a does not resume"; }
    # A run killed before its first save: the next claim puts run a's checkpoints back.
    before=$(listing "$work/ck")
    long=(--layers 2 --heads 2 --width 64 --context 32 --batch 4 --threads 1 --steps 3000
          --eval-every 0 --sample-tokens 0 --save-dir "$work/ck" --seed 7 --overwrite)
    "${mpi[@]}" -np 2 "$bin" "${long[@]}" > "$work/k.txt" 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
      grep -qE '^step +2/' "$work/k.txt" && break
      kill -0 $pid 2>/dev/null || break
      sleep 0.1
    done
    grep -qE '^step +2/' "$work/k.txt" || { kill -9 $pid; cat "$work/k.txt"; fail "the long run did not start"; }
    ls -d "$work/ck"/.replaced-* > /dev/null || fail "no .replaced directory while the new run trains"
    # Only this case's ranks: other cases run beside this one under ctest -j and also pass
    # --seed 7 --overwrite, so the pattern names this case's save directory.
    pkill -9 -f -- "--steps 3000 .*--save-dir $(printf '%s' "$work/ck" | sed 's/[][\\.*^$+?(){}|]/\\&/g') --seed 7"
    kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
    sleep 1
    run_ok "$work/a3.txt" 2 "${a[@]}" --steps 12 --resume
    grep -qF "were set aside by --overwrite for a run that ended before its first checkpoint: put back into $work/ck" "$work/a3.txt" ||
      { cat "$work/a3.txt"; fail "the killed run's hand-over was not undone"; }
    grep -qF "resumed from $work/ck/step-00000009" "$work/a3.txt" || { cat "$work/a3.txt"; fail "run a does not resume after the kill"; }
    run_ok "$work/ref.txt" 2 "${tiny[@]}" --lr-schedule constant --steps 12
    same_hash "run a, interrupted by a killed --overwrite, vs uninterrupted" "$work/ref.txt" "$work/a3.txt"
    # A run that saves: the old checkpoints go once its first one is complete.
    run_ok "$work/b.txt" 2 "${a[@]}" --steps 6 --seed 7 --overwrite
    grep -qE "^--overwrite: removed the checkpoints of run [0-9a-f]{16} from $work/ck \(steps 3, 6, 9, 12\) now that $work/ck/step-00000003 is complete" "$work/b.txt" ||
      { cat "$work/b.txt"; fail "no note of the removal after the first save"; }
    [ "$(ls "$work/ck" | grep -c '^step-')" -eq 2 ] || { ls -a "$work/ck"; fail "expected run b's 2 checkpoints"; }
    ! ls -d "$work/ck"/.replaced-* 2>/dev/null || fail "a .replaced directory was left after the save"
    echo "--overwrite: kept until the first save, then removed"
    ;;
  owner)
    a=("${tiny[@]}" --save-dir "$work/ck")
    run_ok "$work/a.txt" 2 "${a[@]}" --steps 3
    echo '{"format": 3' > "$work/ck/owner.json"
    expect "corrupt owner, --resume" "if the checkpoints in $work/ck are this run's, remove it and resume" \
      "${a[@]}" --steps 6 --resume
    run_ok "$work/b.txt" 2 "${a[@]}" --steps 3 --seed 7 --overwrite
    grep -qF -- "--overwrite: the checkpoints of run of unknown id (step 3)" "$work/b.txt" ||
      { cat "$work/b.txt"; fail "--overwrite over a corrupt owner.json"; }
    echo "corrupt owner.json: recovery named; --overwrite replaces"
    ;;
  messages)
    run_ok "$work/g.txt" 2 "${tiny[@]}" --steps 3 --save-dir "$work/g"
    expect "another --width" "the checkpoint does not match this run's model: --width 128 in this run, 64 in the checkpoint; also differing (this run vs the checkpoint): ffn 512 vs 256" \
      "${t[@]}" --width 128 --steps 6 --resume-from "$work/g/step-00000003"
    expect "added --lora-rank" "--lora-rank 4 in this run, but the checkpoint is a full-model one (no LoRA adapters)" \
      "${tiny[@]}" --lora-rank 4 --steps 6 --resume-from "$work/g/step-00000003"
    llama=(--layers 2 --heads 2 --width 64 --context 32 --batch 4 --threads 1 --sample-tokens 0
           --family llama --kv-heads 1)
    run_ok "$work/l.txt" 2 "${llama[@]}" --steps 3 --save-dir "$work/l"
    expect "Llama resumed as GPT-2" "the checkpoint is a llama model (--family llama: rmsnorm, rotary, swiglu), this run a gpt2 one" \
      "${tiny[@]}" --steps 6 --resume-from "$work/l/step-00000003"
    run_ok "$work/hf.txt" 2 "${tiny[@]}" --steps 1 --export-hf "$work/hf"
    sed -i 's/"vocab_size": *256/"vocab_size": 100/' "$work/hf/config.json"
    grep -q '"vocab_size": *100' "$work/hf/config.json" || fail "could not edit config.json"
    expect "config.json vocab 100" "--init-from-hf $work/hf: config.json's vocab_size 100 is too small for byte data (the shipped corpus" \
      --steps 2 --threads 1 --init-from-hf "$work/hf"
    expect "frozen name" "pattern 'embed.wte' matches only frozen parameters (embed.wte is frozen" \
      "${tiny[@]}" --steps 2 --lora-rank 4 --optimizer-state-dtype int8 --optimizer-state-fp32 embed.wte
    ;;
  paths)
    corpus="$(dirname "$bin")/../share/zeroshard/corpus.txt"
    mkdir -p "$work/br[1]"
    /usr/bin/python3 - "$corpus" "$work/br[1]/train.bin" <<'PY' || fail "python3 could not write a shard"
import struct, sys
tokens = list(open(sys.argv[1], "rb").read()[:20000])
header = struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253))
open(sys.argv[2], "wb").write(header + struct.pack("<%dH" % len(tokens), *tokens))
PY
    run_ok "$work/s.txt" 2 "${tiny[@]}" --steps 2 --train-shards "$work/br[1]/train.bin"
    echo "--train-shards with brackets in an existing path: trained"
    mkdir -p "$work/hfx/model.safetensors"
    expect "export-hf over a directory" "--export-hf $work/hfx/model.safetensors: is a directory" \
      "${tiny[@]}" --steps 2 --export-hf "$work/hfx"
    # A full fine-tune from a Hugging Face directory resumes after the directory is gone.
    run_ok "$work/base.txt" 2 "${tiny[@]}" --steps 1 --export-hf "$work/base"
    ft=("${tiny[@]}" --init-from-hf "$work/base" --steps 6)
    run_ok "$work/full.txt" 2 "${ft[@]}"
    run_ok "$work/ft.txt" 2 "${ft[@]}" --save-dir "$work/ft" --save-every 3
    run_ok "$work/lora.txt" 2 "${ft[@]}" --lora-rank 4 --save-dir "$work/lora" --save-every 3
    mv "$work/base" "$work/base.gone"
    run_ok "$work/ftr.txt" 2 "${ft[@]}" --resume-from "$work/ft/step-00000003"
    grep -qF -- "--init-from-hf $work/base does not exist: the model is the one $work/ft/step-00000003 describes" "$work/ftr.txt" ||
      { cat "$work/ftr.txt"; fail "no note of the missing --init-from-hf"; }
    same_hash "full fine-tune resumed without its --init-from-hf" "$work/full.txt" "$work/ftr.txt"
    expect "LoRA without its base" "--init-from-hf $work/base: does not exist, and this LoRA run needs it" \
      "${ft[@]}" --lora-rank 4 --resume-from "$work/lora/step-00000003"
    # Rotary positions: nothing in the parameters depends on the context.
    rope=(--layers 2 --heads 2 --width 64 --batch 4 --threads 1 --sample-tokens 0 --family llama)
    run_ok "$work/r32.txt" 2 "${rope[@]}" --context 32 --steps 3 --save-dir "$work/rope"
    run_ok "$work/r64.txt" 2 "${rope[@]}" --context 64 --steps 5 --resume-from "$work/rope/step-00000003"
    grep -qE '^step +5/5' "$work/r64.txt" || { cat "$work/r64.txt"; fail "rotary resume at a longer context"; }
    expect "learned positions at another context" "--context 64 in this run, 32 in the checkpoint" \
      --layers 2 --heads 2 --width 64 --batch 4 --threads 1 --context 64 --steps 6 \
      --resume-from "$work/ft/step-00000003"
    ;;
  *)
    fail "unknown case $case_name"
    ;;
esac
echo "PASS: $case_name"
