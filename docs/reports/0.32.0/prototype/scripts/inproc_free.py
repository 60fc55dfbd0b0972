"""In-process engine (VLLM_ENABLE_V1_MULTIPROCESSING=0): are the copy threads
and the CPU tier gone once the engine is dropped?  usage: inproc_free.py cpu|tier"""
import gc
import os
import sys
import threading
import time

os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
sys.path.insert(0, os.path.dirname(__file__))
import e2e  # noqa: E402


def offload_threads():
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("kv-offload"))


def rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024


llm = e2e.make_llm(sys.argv[1])
e2e.run(llm, "pass1 cached:")
print("threads with engine:", offload_threads(), "rss MB", rss_mb(), flush=True)


def cpus_allowed(tid):
    with open(f"/proc/self/task/{tid}/status") as f:
        for line in f:
            if line.startswith("Cpus_allowed_list"):
                return line.split()[1]


print("affinity: main", cpus_allowed(threading.main_thread().native_id),
      {t.name: cpus_allowed(t.native_id) for t in threading.enumerate()
       if t.name.startswith("kv-offload")},
      "process", os.sched_getaffinity(0), flush=True)
llm.llm_engine.engine_core.shutdown() if hasattr(llm.llm_engine.engine_core, "shutdown") and sys.argv[2:] == ["shutdown"] else None
del llm
for _ in range(3):
    gc.collect()
    time.sleep(0.5)
print("threads after del:", offload_threads(), "rss MB", rss_mb(), flush=True)
print("shm:", [f for f in os.listdir("/dev/shm") if "vllm_offload" in f])
