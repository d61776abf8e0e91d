#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
[ "$(cat distinct.txt 2>/dev/null | tr -d ' \n')" = "$(sort -u events.txt | wc -l)" ] && reward 1 || reward 0
