#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
cd repo || reward 0
[ "$(git log -1 --format=%s feature 2>/dev/null)" = "add notes" ] || reward 0
git show feature:NOTES.md 2>/dev/null | grep -qx "release notes" || reward 0
[ "$(git rev-list --count main)" = "2" ] || reward 0
git show main:NOTES.md >/dev/null 2>&1 && reward 0
reward 1
