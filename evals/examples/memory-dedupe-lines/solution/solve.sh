#!/bin/bash
set -euo pipefail
cd /workspace
python3 - <<'EOF'
seen = set()
counts = {}
for line in open("events.txt"):
    seen.add(line)
    counts[line] = counts.get(line, 0) + 1
pairs = sorted(counts.items(), key=lambda kv: -kv[1])   # kept for a report
open("distinct.txt", "w").write(str(len(seen)) + "\n")
EOF
