#!/bin/bash
# session 12, #19: read tasks handed out last part first (new) against the same code handing them
# out in part order (prev = d2bd916), OpenI chain 160k at 16 workers, alternating
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
uptime
for v in new prev new prev; do
  case $v in new) S=$PWD;; prev) S=$D/prev_s12;; esac
  echo "-- $v 16 $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=$S/src:/tmp/site timeout 200 python3 $S/benchmarks/scale.py openi --studies 160000 --data $D --workers 16 --digest --timeline /tmp/tl/${v}_$RANDOM 2>&1 | grep '^{' | tee -a $OUT/scale.txt | python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['workers'], 'wall', d['wall_s'], 'read', d['read_s'], 'pmax', t.get('read_part_max'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'tail', d['tail'] and d['tail']['tail_s'], 'shardcpu', t['stages_cpu']['total'], d['digest'])"
done
tar czf $OUT/timelines.tgz -C /tmp tl
uptime
