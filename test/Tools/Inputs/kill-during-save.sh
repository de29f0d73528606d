#!/usr/bin/env bash
# Kills (SIGKILL) gpipe-run while it saves a checkpoint after every step, at
# $3 points spread over its run, saving into $1 with the model $2. After each
# kill, a resume must load the newest complete checkpoint: it continues, or
# finds nothing left to train, or (killed before the first save) finds no
# checkpoint yet. A corrupted or half-written checkpoint would be a failure.
# Prints one line per kill and "no checkpoint was ever unloadable".
set -u
dir="$1" model="$2" kills="$3"
args=(--stages 2 --microbatches 2 --epochs 1 --max-steps 40 --lr-schedule constant)
for ((i = 1; i <= kills; ++i)); do
  rm -rf "$dir"
  gpipe-run "$model" "${args[@]}" --save "$dir" --save-every 1 --keep 2 \
    >/dev/null 2>&1 &
  pid=$!
  # Spread the kills over compiling, the first saves and the steady state.
  sleep "$(awk "BEGIN { print 0.4 + $i * 0.35 }")"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  out="$(gpipe-run "$model" "${args[@]}" --resume "$dir" 2>&1)"
  status=$?
  if [ $status -eq 0 ]; then
    echo "kill $i: resumed from $(cat "$dir/latest")"
  elif echo "$out" | grep -q "nothing left to train\|nor a save directory"; then
    echo "kill $i: $(echo "$out" | grep -o 'nothing left to train\|nor a save directory')"
  else
    echo "kill $i: UNLOADABLE: $out"
    exit 1
  fi
done
echo "no checkpoint was ever unloadable"
