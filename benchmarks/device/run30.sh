#!/bin/bash
# session 13, #19: in a lease whose ceiling (run29.sh) was 14.4x by the slowest of 16 processes and
# ~15.8x by their mean, but whose single core is slow (4.35 s for run29's work, against 2.5-3.6 s in
# other leases: a 1-worker OpenI chain of 160k would not fit one 600 s command), the OpenI chain at
# 80k studies: 16 workers twice, then 1 worker (all measured, same lease)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
uptime
. benchmarks/device/show_scale.sh
chain_runs ${STUDIES:-80000} 500
uptime
