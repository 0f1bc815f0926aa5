#!/bin/bash
# session 9, #19: 16 workers, base (99929ad) vs new, alternating, synthetic 200k; then the OpenI chain 160k (new)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
uptime; nproc
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print('$1', d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'par', t.get('read_parallel'), 'pmax', t.get('read_part_max'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'card', t.get('card'), 'serial', d['serial_s'], 'tail', d['tail'] and d['tail']['tail_s'], 'rss', d['peak_all']['rss_mib'], d['digest'])"; }
for code in new base new base; do
  if [ $code = new ]; then S=$PWD/src; else S=$PWD/.devdata/base_s9/src; fi
  PYTHONPATH=$S:/tmp/site python3 benchmarks/scale.py synthetic --studies 200000 --workers 16 --digest --timeline $OUT/tl_$code 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show $code
done
PYTHONPATH=$PWD/src:/tmp/site python3 benchmarks/scale.py openi --studies 160000 --data .devdata --workers 16 --digest --timeline $OUT/tl_new 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show new
uptime
