#!/bin/bash
set -euo pipefail
cd /workspace
python3 - <<'EOF'
lines = open("numbers.txt").read().split("\n")      # the whole file as strings
nums = sorted(int(x) for x in lines if x)             # and as a sorted list of ints
text = "\n".join(str(n) for n in nums) + "\n"        # and the output in memory
open("sorted.txt", "w").write(text)
m = len(nums) // 2
open("median.txt", "w").write(str((nums[m - 1] + nums[m]) / 2) + "\n")
EOF
