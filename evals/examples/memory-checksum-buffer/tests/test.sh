#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
expected=$(python3 -c "
import hashlib
h = hashlib.sha256(); block = bytes(i % 251 for i in range(251)) * 4096; n = 251 << 20
while n > 0:
    h.update(block[:n]); n -= len(block)
print(h.hexdigest())")
[ "$(tr -d ' \n' < digest.txt 2>/dev/null)" = "$expected" ] && reward 1 || reward 0
