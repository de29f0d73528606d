#!/usr/bin/env bash
# Starts gpipe-run on the model $2, with its trace going to $1, sends it
# SIGINT once it has had time to start training, and prints its exit status.
gpipe-run "$2" --stages 2 --microbatches 4 --epochs 1 --trace "$1" &
pid=$!
sleep 3
kill -INT "$pid"
wait "$pid"
echo "exit status $?"
