#!/bin/bash
# session 8, #19: synthetic 200k, 16 then 1 worker (speed-up in one call), output teed to $OUT
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
uptime; nproc; git log --oneline -1 2>/dev/null
python3 benchmarks/scale.py synthetic --studies 200000 --workers ${W:-16,1} --digest ${EXTRA:-} 2>&1 | tee $OUT/scale.txt | tail -30
uptime
