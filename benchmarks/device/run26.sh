#!/bin/bash
# session 12, #19: replicated source base-major, each read part parsing only its base records
# (new) against dcb9530 (base, openi only), 16 workers, then the 1-worker run of new in the same
# lease; every shard's CPU per stage printed (the extractor's sentence cache: see docs/scale-out.md)
# (arguments: synthetic | openi)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
uptime
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['mode'], d['studies'], d['workers'], 'wall', d['wall_s'], 'cpu', d['cpu_s'], 'read', d['read_s'], 'pmax', t.get('read_part_max'), 'psum', t.get('read_part_sum'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'serial', d['serial_s'], d['serial_frac'], 'tail', d['tail'] and d['tail']['tail_s'], 'stages', t['stages_cpu'], 'rss', d['peak_all']['rss_mib'], d['digest'])"; }
if [ "$1" = openi ]; then A="openi --studies 160000 --data $D"; V="new base new"; else A="synthetic --studies 200000"; V="new new"; fi
run() { # $1 = variant, $2 = workers
  case $1 in new) S=$PWD;; base) S=$D/base_s12;; esac
  echo "-- $1 $2 $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=$S/src:/tmp/site timeout 540 python3 $S/benchmarks/scale.py $A --workers $2 --digest --timeline /tmp/tl/${1}_$2_$RANDOM 2>&1 | grep '^{' | tee -a $OUT/scale.txt | show
}
for v in $V; do run $v 16; done
run new 1
tar czf $OUT/timelines.tgz -C /tmp tl
uptime
