#!/bin/bash
cd /workspace
reward() { echo "$1" > /logs/verifier/reward.txt; exit 0; }
[ -z "$(find docs -name '*.txt')" ] || reward 0
[ "$(find docs -name '*.md' | wc -l)" = "4" ] || reward 0
grep -qx "deep" docs/a/b/deep.md && grep -qx "keep me" docs/keep.md || reward 0
[ -f docs/image.png ] || reward 0
reward 1
