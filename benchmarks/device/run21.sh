#!/bin/bash
# session 10, #12 speed on the final code (after the h12f and round-16 merges): compile this code (mypyc), identity pure vs compiled, then pinned alternation pure / compiled on two CPUs, then unpinned
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/mypys .devdata/mypyw/*.whl || exit 1
D=$PWD/.devdata
nproc; uptime; python3 --version; lscpu | grep -E "Model name|Thread|MHz" | head -4
t0=$(date +%s); PYTHONPATH=/tmp/mypys:/tmp/site python3 benchmarks/extraction_compiled.py --build /tmp/rc 2>&1 | tail -3; echo "compile $(( $(date +%s) - t0 )) s"
ls /tmp/rc/src/radvqa/extract/*.so 2>/dev/null | wc -l
echo "== identity compiled vs pure"
PYTHONPATH=$PWD/src:/tmp/site python3 benchmarks/extraction_identity.py --data $D --out /tmp/pure.jsonl 2>&1 | tail -1
PYTHONPATH=/tmp/site python3 benchmarks/extraction_compiled.py --build /tmp/rc --reuse -- benchmarks/extraction_identity.py --data $D --out /tmp/comp.jsonl 2>&1 | tail -1
cmp /tmp/pure.jsonl /tmp/comp.jsonl && echo IDENTICAL; sha256sum /tmp/pure.jsonl /tmp/comp.jsonl | cut -c1-16
f() { grep -E "^speed" | sed 's/(one process.*reports)//; s/ (load.*//; s/speed without the sentence cache (every sentence analysed, as if none repeated)/nocache/'; }
for cpu in 5 11 5 11; do
 echo "-- cpu$cpu pure $(cut -d' ' -f1 /proc/loadavg)"; PYTHONPATH=$PWD/src:/tmp/site taskset -c $cpu python3 benchmarks/extraction.py --data $D --gold none 2>&1 | f
 echo "-- cpu$cpu compiled"; PYTHONPATH=/tmp/site taskset -c $cpu python3 benchmarks/extraction_compiled.py --build /tmp/rc --reuse -- benchmarks/extraction.py --data $D --gold none 2>&1 | f
done
for r in 1 2; do
 echo "-- unpinned pure"; PYTHONPATH=$PWD/src:/tmp/site python3 benchmarks/extraction.py --data $D --gold none 2>&1 | f
 echo "-- unpinned compiled"; PYTHONPATH=/tmp/site python3 benchmarks/extraction_compiled.py --build /tmp/rc --reuse -- benchmarks/extraction.py --data $D --gold none 2>&1 | f
done
uptime
