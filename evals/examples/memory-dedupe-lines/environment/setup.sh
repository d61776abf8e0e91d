#!/bin/bash
set -euo pipefail
cd /workspace
python3 -c "
import random
r = random.Random(11)
f = open('events.txt', 'w')
for _ in range(1000000): f.write('event-%08d-%s\n' % (r.randrange(700000), 'x' * 20))"
