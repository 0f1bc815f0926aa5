#!/bin/bash
# session 10, #19 on the final code: synthetic 200k, 16 then 1 worker in one call (same lease), timelines
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
uptime
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'shards', d['shards_s'], 'finish', d['finish_s'], 'serial', d['serial_s'], d['serial_frac'], 'tail', d['tail'] and d['tail']['tail_s'], 'shardcpu', t['stages_cpu']['total'], 'rss', d['peak_all']['rss_mib'], d['digest'])"; }
python3 benchmarks/scale.py synthetic --studies 200000 --workers 16 --digest --timeline $OUT/tl 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
uptime
timeout 530 python3 benchmarks/scale.py synthetic --studies 200000 --workers 1 --digest --timeline $OUT/tl 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
uptime
