#!/bin/bash
# session 9, #19 final: synthetic 200k 16 workers (timeline), then the OpenI chain 160k 16 then 1 worker, one call
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
uptime; git log --oneline -1 2>/dev/null
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'pmax', t.get('read_part_max'), 'psum', t.get('read_part_sum'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'card', t.get('card'), 'serial', d['serial_s'], d['serial_frac'], 'tail', d['tail'] and d['tail']['tail_s'], 'rss', d['peak_all']['rss_mib'], d['digest'])"; }
python3 benchmarks/scale.py synthetic --studies 200000 --workers 16 --digest --timeline $OUT/tl 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
python3 benchmarks/scale.py openi --studies 160000 --data .devdata --workers 16 --digest --timeline $OUT/tl 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
uptime
timeout ${LIMIT:-470} python3 benchmarks/scale.py openi --studies 160000 --data .devdata --workers 1 --digest --timeline $OUT/tl 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
uptime
