#!/bin/bash
# session 15, #19: on a warm 16-core lease whose ceiling check (run29.sh) gave 13.6x, below run29's
# 14.5x rule but with little slowdown per process, the OpenI chain at 120k studies (the most that
# fits one device call) with 16 workers, 1 worker, 16 workers again; and what CPU the lease has
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
. benchmarks/device/show_scale.sh
uptime
for w in 16 1 16; do
  echo "-- $w $(cut -d' ' -f1 /proc/loadavg)"
  PYTHONPATH=$PWD/src:/tmp/site timeout 470 python3 benchmarks/scale.py openi --studies ${STUDIES:-120000} --data "$D" \
    --workers $w --digest 2>&1 | grep '^{' | tee -a "$OUT/scale.txt" | show
done
lscpu | grep -E "Model name|Thread|Core|Socket" | head -4
