#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
expected=$'hour,count\n2024-05-01T13,2\n2024-05-01T15,1'
[ "$(cat errors.csv 2>/dev/null)" = "$expected" ] && reward 1 || reward 0
