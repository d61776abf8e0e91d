#!/bin/bash
set -euo pipefail
cd /workspace
python3 - <<'EOF'
n = 3000000
sieve = bytearray([1]) * n
sieve[0] = sieve[1] = 0
for i in range(2, int(n ** 0.5) + 1):
    if sieve[i]:
        sieve[i * i::i] = bytes(len(range(i * i, n, i)))
open("primes.txt", "w").write(str(sum(sieve)) + "\n")
EOF
