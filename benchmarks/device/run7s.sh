#!/bin/bash
# session 6, #19: same-lease synthetic 200k, 16 then 1 worker, on main 78f4829; each-CPU speed scan before and after
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD/src:/tmp/site
nproc; uptime; python3 --version; lscpu | grep -E "Model name|MHz" | head -3
python3 benchmarks/cpu_ceiling.py --work loop --loop 5000000 --procs 1 --each-cpu 2>&1 | tail -20
python3 benchmarks/scale.py synthetic --studies 200000 --workers 16,1 --digest 2>&1 | tail -12
uptime
python3 benchmarks/cpu_ceiling.py --work loop --loop 5000000 --procs 1 --each-cpu 2>&1 | tail -20
