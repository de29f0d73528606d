#!/usr/bin/env bash
# Starts `mpirun -np 2 gpipe-run` on the MLP at K=2 with a 2 s peer timeout,
# saving after every step into $2; once step 2 is saved, sends signal $1
# (STOP: a stalled peer; KILL: a dead one) to rank 1. Prints the job's
# stderr, its exit status, how long it took to end after the signal, and
# whether any of its processes is left. Usage: mpi-peer-failure.sh SIGNAL DIR MODEL
set -u
signal="$1" dir="$2" model="$3"
rm -rf "$dir" && mkdir -p "$dir"
mpirun --oversubscribe --allow-run-as-root -np 2 sh -c \
  'echo $$ > "$0/pid.$OMPI_COMM_WORLD_RANK"; exec gpipe-run "$@"' "$dir" \
  "$model" --stages 2 --microbatches 4 --epochs 1 --max-steps 100000 \
  --lr-schedule constant --peer-timeout 2 --save "$dir/saves" --save-every 1 \
  --keep 1 >"$dir/out" 2>"$dir/err" &
job=$!
for ((i = 0; i < 600; ++i)); do
  [ -e "$dir/saves/step-0000000002" ] && break
  sleep 0.1
done
[ -e "$dir/saves/step-0000000002" ] || { echo "the job never saved step 2"; cat "$dir/err"; exit 1; }
start=$(date +%s.%N)
kill -"$signal" "$(cat "$dir/pid.1")"
wait "$job"
status=$?
end=$(date +%s.%N)
cat "$dir/err"
echo "exit status $status"
awk "BEGIN { t = $end - $start; print (t < 20 ? \"ended within 20 s\" : \"took \" t \" s\") }"
# mpirun has returned; its ranks may take a moment to be reaped.
for rank in 0 1; do
  pid="$(cat "$dir/pid.$rank")"
  for ((i = 0; i < 100; ++i)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "rank $rank is left running: $(ps -o stat=,args= -p "$pid")"
  fi
done
echo "done"
