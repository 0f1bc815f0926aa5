#!/bin/bash
# session 9, #19: where a 16-worker build waits: timelines of synthetic 200k and the OpenI chain
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
uptime; nproc
for spec in "synthetic --studies 200000" "openi --studies 40000 --data .devdata" "openi --studies 160000 --data .devdata"; do
  python3 benchmarks/scale.py $spec --workers 16 --digest --timeline $OUT/tl 2>&1 | grep '^{' | tee -a $OUT/scale.txt | python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); print(d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'shards', d['shards_s'], 'finish', d['finish_s'], 'serial', d['serial_s'], 'tail', d['tail'] and d['tail']['tail_s'], d['tail'] and d['tail']['idle_share'], 'rss', d['peak_all']['rss_mib'], d['timings'].get('card'))"
done
uptime
