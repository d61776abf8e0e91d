#!/bin/bash
set -euo pipefail
cd /workspace
export HOME=/tmp
git init -q -b main repo && cd repo
git config user.name setup && git config user.email setup@example.com
echo "# project" > README.md && git add . && git commit -q -m "initial"
echo "print('hi')" > app.py && git add . && git commit -q -m "add app"
