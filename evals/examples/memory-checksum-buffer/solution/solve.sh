#!/bin/bash
set -euo pipefail
cd /workspace
python3 - <<'EOF'
import hashlib
block = bytes(i % 251 for i in range(251))
n = 251 << 20
buf = block * (n // 251)                  # the whole buffer at once
open("digest.txt", "w").write(hashlib.sha256(buf).hexdigest() + "\n")
EOF
