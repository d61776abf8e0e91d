#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
[ "$(tr -d ' \n' < total.txt 2>/dev/null)" = "1234" ] && reward 1 || reward 0
