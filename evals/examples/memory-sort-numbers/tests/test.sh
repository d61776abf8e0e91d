#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
[ "$(wc -l < sorted.txt 2>/dev/null)" = "1500000" ] || reward 0
sort -n -c sorted.txt 2>/dev/null || reward 0
python3 -c "
import sys
xs = sorted(int(x) for x in open('numbers.txt'))
m = len(xs) // 2
sys.exit(0 if open('median.txt').read().strip() == str((xs[m-1] + xs[m]) / 2) else 1)" && reward 1 || reward 0
