#!/bin/bash
# session 10, #19 on the final code: the machine's own ceiling (cpu_ceiling, pipeline work, 1 and 16 processes), then the OpenI chain 160k, 16 then 1 worker (same lease)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
uptime
python3 benchmarks/cpu_ceiling.py --procs 1,16,1,16 --work pipeline --studies 2000 2>&1 | tail -5
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'shards', d['shards_s'], 'finish', d['finish_s'], 'serial', d['serial_s'], d['serial_frac'], 'tail', d['tail'] and d['tail']['tail_s'], 'shardcpu', t['stages_cpu']['total'], 'rss', d['peak_all']['rss_mib'], d['digest'])"; }
python3 benchmarks/scale.py openi --studies 160000 --data .devdata --workers 16 --digest --timeline $OUT/tl 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
uptime
timeout 470 python3 benchmarks/scale.py openi --studies 160000 --data .devdata --workers 1 --digest --timeline $OUT/tl 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
uptime
