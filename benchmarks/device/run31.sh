#!/bin/bash
# session 14, #19 (a diagnostic, not the target's host): on a host of 32 cores (nvidia-h100-x2), the
# lease's ceiling for 16 processes (cpu_ceiling.py) and the OpenI chain 160k with 16 workers twice and
# 1 worker, to separate the build's own losses from the 16-core hosts' slowdown of 16 busy cores
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
uptime; nproc
PYTHONPATH=$PWD/src:/tmp/site timeout 120 python3 benchmarks/cpu_ceiling.py --procs 1,16,1,16 --work pipeline --studies 2000 2>&1 | tee $OUT/ceiling.txt | grep '"procs"' | cut -c1-200
. benchmarks/device/show_scale.sh
chain_runs ${STUDIES:-160000} 420
uptime
