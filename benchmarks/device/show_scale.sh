# the one-line summary of each benchmarks/scale.py JSON line a device run prints and the OpenI chain runs (sourced by run29.sh,
# run30.sh, run31.sh)
show() { python3 -c "
import json,sys
for l in sys.stdin:
    d=json.loads(l); t=d['timings']; print(d['workers'], 'wall', d['wall_s'], 'read', d['read_s'], 'pmax', t.get('read_part_max'), 'shards', d['shards_s'], 'finish', d['finish_s'], 'tail', d['tail'] and d['tail']['tail_s'], 'stages', t['stages_cpu'], d['digest'])"; }
# the OpenI chain with 16 workers twice, then 1 worker: chain_runs STUDIES LIMIT_S (needs D, OUT)
chain_runs() {
  for w in 16 16 1; do
    echo "-- $w $(cut -d' ' -f1 /proc/loadavg)"
    PYTHONPATH=$PWD/src:/tmp/site timeout "$2" python3 benchmarks/scale.py openi --studies "$1" --data "$D" --workers $w --digest 2>&1 | grep '^{' | tee -a "$OUT/scale.txt" | show
  done
}
