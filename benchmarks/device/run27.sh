#!/bin/bash
# session 12, #19: the machine's ceiling in the lease of run26.sh (16 fresh processes of the real
# chain started together against one alone), then two more 16-worker OpenI chain runs of new
# (run26.sh's 1-worker run of this lease is their baseline)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
uptime
PYTHONPATH=$PWD/src:/tmp/site timeout 200 python3 benchmarks/cpu_ceiling.py --procs 1,16,1,16 --work pipeline --studies 2000 2>&1 | tee $OUT/ceiling.txt | grep -v '^ ' | cut -c1-400
for i in 1 2; do
  echo "-- new 16 $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=$PWD/src:/tmp/site timeout 200 python3 benchmarks/scale.py openi --studies 160000 --data $D --workers 16 --digest 2>&1 | grep '^{' | tee -a $OUT/scale.txt | python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['workers'], 'wall', d['wall_s'], 'read', d['read_s'], 'pmax', t.get('read_part_max'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'tail', d['tail'] and d['tail']['tail_s'], 'stages', t['stages_cpu'], d['digest'])"
done
uptime
