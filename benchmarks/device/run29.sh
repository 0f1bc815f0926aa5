#!/bin/bash
# session 13, #19: the lease's own ceiling first (16 fresh processes of the real chain against one
# alone, cpu_ceiling.py); only where it is at least 14.5x (a lease where 14x on the OpenI chain is
# possible at all) the OpenI chain 160k with 16 workers twice and its 1-worker baseline
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
uptime
PYTHONPATH=$PWD/src:/tmp/site timeout 200 python3 benchmarks/cpu_ceiling.py --procs 1,16,1,16 --work pipeline --studies 2000 2>&1 | tee $OUT/ceiling.txt | grep '"procs"' | cut -c1-260
best=$(grep '"procs": 16' $OUT/ceiling.txt | python3 -c "import json,sys; print(max(json.loads(l)['speedup'] for l in sys.stdin))")
echo "ceiling (best of two) $best"
python3 -c "import sys; sys.exit(0 if float('$best') >= 14.5 else 1)" || { echo "ceiling below 14.5x: no chain runs in this lease"; exit 0; }
. benchmarks/device/show_scale.sh
chain_runs 160000 420
uptime
