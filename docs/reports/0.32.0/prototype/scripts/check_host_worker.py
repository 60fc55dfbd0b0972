"""Round trip through HostOffloadingWorker without an engine (plain asserts)."""
import gc
import weakref

import numpy as np
import torch

from vllm.v1.kv_offload.base import (
    CanonicalKVCacheRef,
    CanonicalKVCaches,
    CanonicalKVCacheTensor,
    GPULoadStoreSpec,
)
from vllm.v1.kv_offload.cpu.common import CPULoadStoreSpec
from vllm.v1.kv_offload.cpu.host_worker import (
    HostOffloadingWorker,
    coalesce_copy_ops,
)


def make_caches(num_blocks, page, num_layers):
    tensors = [
        torch.randint(-128, 127, (num_blocks, page), dtype=torch.int8)
        for _ in range(num_layers)
    ]
    caches = CanonicalKVCaches(
        tensors=[CanonicalKVCacheTensor(t, page) for t in tensors],
        group_data_refs=[[CanonicalKVCacheRef(i, page) for i in range(num_layers)]],
    )
    return tensors, caches


def drain(worker, job_ids):
    worker.wait(set(job_ids))
    results = {}
    while len(results) < len(job_ids):
        for r in worker.get_finished():
            results[r.job_id] = r
    return results


def roundtrip(blocks_per_chunk):
    num_blocks, page, num_layers, num_chunks = 16, 4096, 3, 8
    tensors, caches = make_caches(num_blocks, page, num_layers)
    worker = HostOffloadingWorker(
        kv_caches=caches, blocks_per_chunk=blocks_per_chunk, num_cpu_chunks=num_chunks
    )
    # store blocks 3,4,5,9 (scattered), starting at logical block 0
    gpu_blocks = [3, 4, 5, 9]
    n_chunks = -(-len(gpu_blocks) // blocks_per_chunk)
    cpu_chunks = [6, 2, 7, 0][:n_chunks]
    src = GPULoadStoreSpec(gpu_blocks, group_sizes=[4], block_indices=[0])
    assert worker.submit_store(1, src, CPULoadStoreSpec(cpu_chunks))
    res = drain(worker, [1])
    assert res[1].success and res[1].transfer_size == 4 * page * num_layers, res
    expect = [t[gpu_blocks].clone() for t in tensors]
    # clobber, then load back into other blocks
    dst_blocks = [0, 1, 12, 13]
    for t in tensors:
        t[dst_blocks] = 0
    dst = GPULoadStoreSpec(dst_blocks, group_sizes=[4], block_indices=[0])
    assert worker.submit_load(2, CPULoadStoreSpec(cpu_chunks), dst)
    res = drain(worker, [2])
    assert res[2].success
    for t, e in zip(tensors, expect):
        assert torch.equal(t[dst_blocks], e)
    # out of range: refused, nothing queued
    bad = GPULoadStoreSpec([num_blocks], group_sizes=[1], block_indices=[0])
    assert not worker.submit_store(3, bad, CPULoadStoreSpec([0]))
    worker.shutdown()
    return worker


def check_coalesce():
    src = np.array([0, 10, 20, 100, 110], dtype=np.int64)
    dst = np.array([50, 60, 70, 80, 300], dtype=np.int64)
    sizes = np.array([10, 10, 10, 10, 10], dtype=np.int64)
    s, d, n = coalesce_copy_ops(src, dst, sizes)
    assert s.tolist() == [0, 100, 110] and d.tolist() == [50, 80, 300]
    assert n.tolist() == [30, 10, 10]


def check_freed_without_shutdown():
    _, caches = make_caches(4, 4096, 1)
    worker = HostOffloadingWorker(kv_caches=caches, blocks_per_chunk=1, num_cpu_chunks=2)
    threads = [worker._store_handler._thread, worker._load_handler._thread]
    ref = weakref.ref(worker._store_handler)
    del worker
    gc.collect()
    assert ref() is None
    for t in threads:
        t.join(timeout=5)
        assert not t.is_alive()


check_coalesce()
roundtrip(1)
roundtrip(2)
check_freed_without_shutdown()
print("ok")
