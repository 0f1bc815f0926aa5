#!/bin/bash
# session 9, #19: speed-up in one call: synthetic 200k (or $MODE), 16 workers then 1 worker, new code
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
uptime
SPEC=${SPEC:-synthetic --studies 200000}
for w in 16 1; do
  timeout ${LIMIT:-570} python3 benchmarks/scale.py $SPEC --workers $w --digest --timeline $OUT/tl 2>&1 | grep '^{' | tee -a $OUT/scale.txt | python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'shards', d['shards_s'], 'finish', d['finish_s'], 'serial', d['serial_s'], 'serial_frac', d['serial_frac'], 'tail', d['tail'] and d['tail']['tail_s'], 'rss', d['peak_all']['rss_mib'], d['digest'])"
  uptime
done
