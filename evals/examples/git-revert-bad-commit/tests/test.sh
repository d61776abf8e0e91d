#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
cd repo || reward 0
grep -qx "threshold = 10" config.ini || reward 0
[ "$(git rev-list --count HEAD)" = "4" ] || reward 0
git log --format=%s | grep -q "tune threshold" || reward 0
reward 1
