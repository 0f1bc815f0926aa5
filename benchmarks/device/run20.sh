#!/bin/bash
# session 10, #19: READ_PARTS_PER_WORKER 2 -> 4; alternating new / base (766f4d6) at 16 workers, synthetic 200k and the OpenI chain 160k
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
uptime
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'parts', t.get('read_parts'), 'pmax', t.get('read_part_max'), 'psum', t.get('read_part_sum'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'serial', d['serial_s'], 'tail', d['tail'] and d['tail']['tail_s'], 'shardcpu', t['stages_cpu']['total'], 'rss', d['peak_all']['rss_mib'], d['digest'])"; }
for r in 1 2; do
 for v in new base; do
  if [ $v = new ]; then S=$PWD; else S=$D/base_s10; fi
  echo "-- synth $v $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=$S/src:/tmp/site python3 $S/benchmarks/scale.py synthetic --studies 200000 --workers 16 --digest --timeline $OUT/tl_${v}_$r 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
 done
done
for v in new base; do
  if [ $v = new ]; then S=$PWD; else S=$D/base_s10; fi
  echo "-- openi $v $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=$S/src:/tmp/site python3 $S/benchmarks/scale.py openi --studies 160000 --data $D --workers 16 --digest --timeline $OUT/tl_${v}_o 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
done
uptime
