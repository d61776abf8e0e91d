#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
[ "$(cat emails.txt 2>/dev/null | tr '\n' ' ')" = "ann@x.org bob@x.org zed@x.org " ] && reward 1 || reward 0
