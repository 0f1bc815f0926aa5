#!/bin/bash
# session 13, #19: in a lease whose ceiling (run29.sh) was 14.4x by the slowest of 16 processes and
# ~15.8x by their mean, but whose single core is slow (4.35 s for run29's work, against 2.5-3.6 s in
# other leases: a 1-worker OpenI chain of 160k would not fit one 600 s command), the OpenI chain at
# 80k studies: 16 workers twice, then 1 worker (all measured, same lease)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
uptime
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['workers'], 'wall', d['wall_s'], 'read', d['read_s'], 'pmax', t.get('read_part_max'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'tail', d['tail'] and d['tail']['tail_s'], 'stages', t['stages_cpu'], d['digest'])"; }
for w in 16 16 1; do
  echo "-- $w $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=$PWD/src:/tmp/site timeout 500 python3 benchmarks/scale.py openi --studies ${STUDIES:-80000} --data $D --workers $w --digest 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
done
uptime
