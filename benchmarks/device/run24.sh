#!/bin/bash
# session 11, #19: (a) the synthetic plan vectorised (new) against 5080940 (base); (b) 1,024 spill
# buckets with shards of 500 studies (var: 512 shards at 200k) against new's 256 shards of ~780.
# 16 workers, alternating; synthetic 200k, then the OpenI chain 160k (new / var only: the plan change
# does not touch it)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
V=/tmp/var; mkdir -p $V && cp -r src benchmarks $V/
sed -i 's/^N_BUCKETS = 256$/N_BUCKETS = 1024/; s/block: int = 1 << 16/block: int = 1 << 14/' $V/src/radvqa/run/shards.py
grep -n "^N_BUCKETS\|block: int" $V/src/radvqa/run/shards.py
uptime
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'parts', t.get('read_parts'), 'pmax', t.get('read_part_max'), 'psum', t.get('read_part_sum'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'serial', d['serial_s'], 'tail', d['tail'] and d['tail']['tail_s'], 'shardcpu', t['stages_cpu']['total'], 'rss', d['peak_all']['rss_mib'], d['digest'])"; }
run() { # $1 = variant, $2.. = scale.py arguments
  v=$1; shift
  case $v in new) S=$PWD; X=;; base) S=$D/base_s11; X=;; var) S=$V; X="--shard-studies 500";; esac
  echo "-- $v $1 $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=$S/src:/tmp/site python3 $S/benchmarks/scale.py "$@" $X --workers 16 --digest --timeline /tmp/tl/${v}_$1_$RANDOM 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
}
for v in base new var new var base; do run $v synthetic --studies 200000; done
for v in new var var new; do run $v openi --studies 160000 --data $D; done
tar czf $OUT/timelines.tgz -C /tmp tl
uptime
