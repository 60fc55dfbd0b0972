#!/bin/bash
# Re-runs the end-to-end checks (one engine at a time, nice 19). Results in
# /root/wip-0.32/results/final-*.json and logs/final-*.log.
W=/root/wip-0.32
export PYTHONPATH=$W/pyroot
run() { # name, env..., args...
  local name=$1; shift
  env "$@" > $W/logs/final-$name.log 2>&1; echo "$name rc=$?"
}
cd /tmp
run off    OUT=$W/results/final-off.json  nice -n 19 /tmp/v032/bin/python $W/tests/e2e.py off
run cpu    OUT=$W/results/final-cpu.json  nice -n 19 /tmp/v032/bin/python $W/tests/e2e.py cpu
run cli    OUT=$W/results/final-cli.json  nice -n 19 /tmp/v032/bin/python $W/tests/e2e.py cli
rm -rf /tmp/fs-tier
run tier-write OUT=$W/results/final-tier-write.json nice -n 19 /tmp/v032/bin/python $W/tests/e2e.py tier write
run tier-read  OUT=$W/results/final-tier-read.json  nice -n 19 /tmp/v032/bin/python $W/tests/e2e.py tier read
run tp2-cpu TP=2 VLLM_CPU_OMP_THREADS_BIND="0|1" OUT=$W/results/final-tp2-cpu.json nice -n 19 /tmp/v032/bin/python $W/tests/e2e.py cpu
run try032-on  nice -n 19 /tmp/v032/bin/python /tmp/try032.py on
run try032-off nice -n 19 /tmp/v032/bin/python /tmp/try032.py off
run inproc-cpu nice -n 19 /tmp/v032/bin/python $W/tests/inproc_free.py cpu
