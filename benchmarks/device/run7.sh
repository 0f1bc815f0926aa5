#!/bin/bash
# session 6 final figures: final tree (.) vs base_s6 (78f4829, session start) vs base_pre13 (24ce68b), alternating
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
D=$PWD/.devdata
nproc; uptime; python3 --version
echo "== extraction (s6, new) x3"
for t in $D/base_s6 $PWD $D/base_s6 $PWD $D/base_s6 $PWD; do echo "-- $t $(cut -d' ' -f1 /proc/loadavg)"; PYTHONPATH=$t/src:/tmp/site python3 $t/benchmarks/extraction.py --data $D --gold none 2>&1 | grep -E "^speed" | sed 's/(one process.*reports)//'; done
echo "== openi build (new, 8 workers)"
PYTHONPATH=$PWD/src:/tmp/site python3 -c "from radvqa.cli import main; main()" build openi --input $D/NLMCXR_reports.tgz --out /tmp/openi --workers 8 -q 2>&1 | tail -1
echo "== generate (pre13, s6, new) x2"
for t in $D/base_pre13 $D/base_s6 $PWD $D/base_pre13 $D/base_s6 $PWD; do echo "-- $t $(cut -d' ' -f1 /proc/loadavg)"; PYTHONPATH=$t/src:/tmp/site python3 $t/benchmarks/generate.py --scene-graphs /tmp/openi --hold 10000 --repeat 3 2>&1 | grep -E "QA rows:|throughput"; done
echo "== openi build, 1 worker (pre13, s6, new) x3"
for t in $D/base_pre13 $D/base_s6 $PWD $D/base_pre13 $D/base_s6 $PWD $D/base_pre13 $D/base_s6 $PWD; do rm -rf /tmp/ob; TIMEFORMAT="%R s wall %U s user"; { time PYTHONPATH=$t/src:/tmp/site python3 -c "from radvqa.cli import main; main()" build openi --input $D/NLMCXR_reports.tgz --out /tmp/ob --workers 1 -q > /tmp/ob.log 2>&1 ; } 2>/tmp/ob.err; echo "-- $t $(tail -1 /tmp/ob.err) rows $(PYTHONPATH=/tmp/site python3 -c "import pyarrow.dataset as ds; print(ds.dataset('/tmp/ob/qa',format='parquet').count_rows())")"; done
uptime
