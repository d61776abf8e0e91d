#!/bin/bash
set -euo pipefail
cd /workspace
sed -i 's|return xs\[n // 2\]$|return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2|' stats.py
