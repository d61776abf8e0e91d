#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
cp /tests/test_hidden.py . || reward 0
python3 -m unittest test_stats test_hidden >/tmp/unittest.log 2>&1 && reward 1 || { cat /tmp/unittest.log; reward 0; }
