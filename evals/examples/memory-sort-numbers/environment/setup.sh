#!/bin/bash
set -euo pipefail
cd /workspace
python3 -c "
import random
r = random.Random(7)
f = open('numbers.txt', 'w')
for _ in range(1500000): f.write('%d\n' % r.randrange(10**9))"
