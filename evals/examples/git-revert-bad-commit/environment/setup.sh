#!/bin/bash
set -euo pipefail
cd /workspace
export HOME=/tmp
git init -q -b main repo && cd repo
git config user.name setup && git config user.email setup@example.com
printf 'name = demo\nthreshold = 10\n' > config.ini && git add . && git commit -q -m "initial"
echo "x" > other.txt && git add . && git commit -q -m "other"
sed -i 's/threshold = 10/threshold = oops/' config.ini && git commit -q -am "tune threshold"
