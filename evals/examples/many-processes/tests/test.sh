#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
[ "$(ls out 2>/dev/null | wc -l)" = "200" ] || reward 0
for n in 1 57 200; do
  [ "$(cat out/$n.txt)" = "$(printf "item-$n" | sha1sum | cut -d' ' -f1)" ] || reward 0
done
reward 1
