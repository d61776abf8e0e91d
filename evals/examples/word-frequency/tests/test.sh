#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
[ "$(cat top3.txt 2>/dev/null | tr '\n' ' ')" = "the cat sat " ] && reward 1 || reward 0
