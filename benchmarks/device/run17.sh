#!/bin/bash
# session 9, #19: 2 workers vs 1 on the same two vCPUs (taskset -c 2,3 for both), synthetic 30k, alternating
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
uptime
for w in 1 2 1 2; do
  taskset -c 2,3 python3 benchmarks/scale.py synthetic --studies ${N:-30000} --workers $w --digest 2>&1 | grep '^{' | tee -a $OUT/scale.txt | python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'shards', d['shards_s'], 'finish', d['finish_s'], 'serial', d['serial_s'], 'tail', d['tail'] and d['tail']['tail_s'], d['digest'])"
done
uptime
