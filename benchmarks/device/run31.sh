#!/bin/bash
# session 14, #19 (a diagnostic, not the target's host): on a host of 32 cores (nvidia-h100-x2), the
# lease's ceiling for 16 processes (cpu_ceiling.py) and the OpenI chain 160k with 16 workers twice and
# 1 worker, to separate the build's own losses from the 16-core hosts' slowdown of 16 busy cores
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
uptime; nproc
PYTHONPATH=$PWD/src:/tmp/site timeout 120 python3 benchmarks/cpu_ceiling.py --procs 1,16,1,16 --work pipeline --studies 2000 2>&1 | tee $OUT/ceiling.txt | grep '"procs"' | cut -c1-200
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['workers'], 'wall', d['wall_s'], 'read', d['read_s'], 'pmax', t.get('read_part_max'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'tail', d['tail'] and d['tail']['tail_s'], 'stages', t['stages_cpu'], d['digest'])"; }
for w in 16 16 1; do
  echo "-- $w $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=$PWD/src:/tmp/site timeout 420 python3 benchmarks/scale.py openi --studies ${STUDIES:-160000} --data $D --workers $w --digest 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
done
uptime
