# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The series' CPU offloading managers against upstream's, side by side.

Upstream's pure-Python managers (LRUOffloadingManager, ARCOffloadingManager
with their Backend and CPUBackend, from a released vLLM wheel) are imported
as the package `upstream_kv_offload` from --upstream (the bench harness
extracts them there); the series' come from the vLLM tree on PYTHONPATH.
Every manager gets the same stream of block hashes (32-byte digests, the
key type of upstream's managers; --keys tuple uses vLLM 0.9.2's BlockHash
tuples instead) and is driven the way the connector drives it, per request:

    lookup -> prepare_load + complete_load of the hits
           -> prepare_store of the rest -> complete_store -> touch

Three workloads, each printed as one JSON line per manager:
  reuse    REQUESTS requests of 64 blocks over a POOL-block pool; each
           starts with a prefix of one of DOCUMENTS shared documents
           (popular ones more often) and ends in blocks of its own;
  pool     the same stream on a full pool of 10,000 and of 1,000,000
           blocks: the cost per block must not depend on the pool size;
  pinned   stores into a full pool whose least recently used blocks are
           held by loads in flight (90% of it), against the same pool with
           nothing pinned: finding victims must not scan past pins.

Block operations are the blocks passed to manager calls. The managers of
one comparison advance through the stream in turns of CHUNK requests
(alternating who goes first), so that noise on a shared machine hits them
alike; each round gives a ratio, and the median ratio is reported.
"""
import argparse
import gc
import hashlib
import json
import random
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any, Callable

REQUESTS = 20_000
BLOCKS_PER_REQUEST = 64
POOL = 100_000
DOCUMENTS = 3_000
# Mean rank of the document a request reads (exponential popularity).
MEAN_DOCUMENT_RANK = 400
CHUNK = 2500
OFFLOADED_BLOCK_SIZE = 16

Manager = Any
Factory = Callable[[int], Manager]


def make_key_type(keys: str) -> Callable[[bytes], Any]:
    if keys == "bytes":
        return lambda digest: digest
    from vllm.v1.core.kv_cache_utils import BlockHash
    tokens = tuple(range(OFFLOADED_BLOCK_SIZE))
    return lambda digest: BlockHash(int.from_bytes(digest[:8], "little"),
                                    tokens)


def chain(seed: bytes, length: int, key: Callable[[bytes], Any]) -> list:
    """length chained block hashes, like those of a prompt."""
    digest, hashes = seed, []
    for _ in range(length):
        digest = hashlib.sha256(digest).digest()
        hashes.append(key(digest))
    return hashes


class RequestStream:
    """The requests of a workload, made chunk by chunk (the same chunks on
    every replay): the hashes of a request are fresh in the CPU caches when
    the managers see it, as in the engine, where the scheduler hashes a
    request's blocks as its tokens arrive."""

    def __init__(self, num_requests: int, key: Callable[[bytes], Any],
                 seed: int):
        self.num_requests = num_requests
        self.key = key
        self.seed = seed

    def chunks(self) -> Iterator[list[list]]:
        rng = random.Random(self.seed)
        documents: dict[int, list] = {}
        for start in range(0, self.num_requests, CHUNK):
            chunk = []
            for i in range(start, min(start + CHUNK, self.num_requests)):
                doc = min(int(rng.expovariate(1 / MEAN_DOCUMENT_RANK)),
                          DOCUMENTS - 1)
                if doc not in documents:
                    documents[doc] = chain(b"document %d" % doc,
                                           BLOCKS_PER_REQUEST, self.key)
                shared = rng.randrange(8, BLOCKS_PER_REQUEST + 1)
                own = chain(b"request %d" % i, BLOCKS_PER_REQUEST - shared,
                            self.key)
                chunk.append(documents[doc][:shared] + own)
            yield chunk

    def head(self, num_requests: int) -> "RequestStream":
        return RequestStream(num_requests, self.key, self.seed)


def serve(manager: Manager, requests: list[list]) -> tuple[int, int]:
    """Drive the manager like the connector; (block operations, hits)."""
    block_ops = hits = 0
    for block_hashes in requests:
        num_hits = manager.lookup(block_hashes)
        if num_hits:
            loaded = block_hashes[:num_hits]
            manager.prepare_load(loaded)
            manager.complete_load(loaded)
        output = manager.prepare_store(block_hashes[num_hits:])
        num_stored = 0
        if output is not None:
            num_stored = len(output.block_hashes_to_store)
            manager.complete_store(output.block_hashes_to_store)
        manager.touch(block_hashes)
        hits += num_hits
        block_ops += (2 * len(block_hashes) + 2 * num_hits +
                      len(block_hashes) - num_hits + num_stored)
    return block_ops, hits


def fill(manager: Manager, num_blocks: int, key: Callable[[bytes], Any],
         per_call: int) -> list:
    """Store num_blocks blocks of unrelated hashes, per_call blocks per
    call; return their hashes. With one block per call, the first is the
    least recently used for every manager."""
    hashes = [
        key(hashlib.sha256(b"filler %d" % i).digest())
        for i in range(num_blocks)
    ]
    gc.disable()  # setup only: the GC would rescan the growing pool
    try:
        for start in range(0, num_blocks, per_call):
            output = manager.prepare_store(hashes[start:start + per_call])
            manager.complete_store(output.block_hashes_to_store)
    finally:
        gc.enable()
    return hashes


def side_by_side(factories: dict[str, Factory],
                 pool: int,
                 requests: RequestStream,
                 rounds: int,
                 prepare: Callable[[Manager], None] = lambda m: None) -> dict:
    """Per manager: block ops per second (best round) and hit rate; and the
    median over rounds of each manager's speed relative to the first."""
    names = list(factories)
    rates: dict[str, list[float]] = {name: [] for name in names}
    hit_rates: dict[str, float] = {}
    for round_number in range(rounds):
        managers = {}
        for name in names:
            managers[name] = factories[name](pool)
            prepare(managers[name])
        gc.collect()
        seconds = dict.fromkeys(names, 0.0)
        block_ops = dict.fromkeys(names, 0)
        hits = dict.fromkeys(names, 0)
        order = names if round_number % 2 == 0 else names[::-1]
        for chunk in requests.chunks():
            for name in order:
                t0 = time.perf_counter()
                ops, chunk_hits = serve(managers[name], chunk)
                seconds[name] += time.perf_counter() - t0
                block_ops[name] += ops
                hits[name] += chunk_hits
        for name in names:
            rates[name].append(block_ops[name] / seconds[name])
            hit_rates[name] = hits[name] / (requests.num_requests *
                                            BLOCKS_PER_REQUEST)
        del managers
    first = names[0]
    return {
        name: {
            "mops":
            max(rates[name]) / 1e6,
            "hit_rate":
            hit_rates[name],
            "vs_first":
            statistics.median(r / f
                              for r, f in zip(rates[name], rates[first])),
        }
        for name in names
    }


def pinned_stores(factory: Factory, pool: int, key: Callable[[bytes], Any],
                  pinned_fraction: float, num_stores: int) -> float:
    """µs per prepare_store + complete_store of 16 new blocks into a full
    pool whose pinned_fraction least recently used blocks are being
    loaded."""
    manager = factory(pool)
    filled = fill(manager, pool, key, per_call=1)
    num_pinned = int(pool * pinned_fraction)
    if num_pinned:
        manager.prepare_load(filled[:num_pinned])
    batches = [
        chain(b"store %d" % i, 16, key)[::-1] for i in range(num_stores)
    ]
    gc.collect()
    start = time.perf_counter()
    for batch in batches:
        output = manager.prepare_store(batch)
        assert output is not None and len(output.block_hashes_evicted) == 16
        manager.complete_store(output.block_hashes_to_store)
    return (time.perf_counter() - start) / num_stores * 1e6


def factories(upstream: bool) -> dict[str, Factory]:
    from vllm.v1.kv_offload.arc_manager import ARCOffloadingManager
    from vllm.v1.kv_offload.backends.cpu import CPUBackend
    from vllm.v1.kv_offload.lru_manager import LRUOffloadingManager
    result: dict[str, Factory] = {
        "series LRU":
        lambda n: LRUOffloadingManager(CPUBackend(OFFLOADED_BLOCK_SIZE, n)),
        "series ARC":
        lambda n: ARCOffloadingManager(CPUBackend(OFFLOADED_BLOCK_SIZE, n)),
    }
    if upstream:
        from upstream_kv_offload import arc_manager as upstream_arc
        from upstream_kv_offload import lru_manager as upstream_lru
        from upstream_kv_offload.backends import cpu as upstream_cpu
        result["upstream LRU"] = lambda n: upstream_lru.LRUOffloadingManager(
            upstream_cpu.CPUBackend(OFFLOADED_BLOCK_SIZE, n))
        result["upstream ARC"] = lambda n: upstream_arc.ARCOffloadingManager(
            upstream_cpu.CPUBackend(OFFLOADED_BLOCK_SIZE, n))
    return result


def emit(**row) -> None:
    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream",
                        help="directory holding the upstream_kv_offload "
                        "package (omit to run the series' managers only)")
    parser.add_argument("--keys", choices=("bytes", "tuple"), default="bytes")
    parser.add_argument("--requests", type=int, default=REQUESTS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workload",
                        choices=("reuse", "pool", "pinned"),
                        action="append",
                        help="workloads to run (default: all)")
    args = parser.parse_args()
    if args.upstream:
        sys.path.insert(0, args.upstream)
    key = make_key_type(args.keys)
    managers = factories(bool(args.upstream))
    workloads = args.workload or ["reuse", "pool", "pinned"]
    requests = RequestStream(args.requests, key, seed=0)

    if "reuse" in workloads:
        for policy in ("LRU", "ARC"):
            pair = {
                name: factory
                for name, factory in managers.items() if name.endswith(policy)
            }
            # Upstream first: the ratios are relative to it.
            pair = dict(
                sorted(pair.items(), key=lambda i: "upstream" not in i[0]))
            for name, row in side_by_side(pair, POOL, requests,
                                          args.rounds).items():
                emit(workload="reuse",
                     keys=args.keys,
                     manager=name,
                     pool=POOL,
                     requests=requests.num_requests,
                     **row)

    if "pool" in workloads:
        for name, factory in managers.items():
            for pool in (10_000, 1_000_000):
                sizes = {f"{name} ({pool})": factory}
                row = side_by_side(
                    sizes,
                    pool,
                    requests.head(requests.num_requests // 4),
                    1,
                    lambda m, pool=pool: fill(m, pool, key, per_call=4096))
                emit(workload="pool",
                     keys=args.keys,
                     manager=name,
                     pool=pool,
                     **next(iter(row.values())))

    if "pinned" in workloads:
        for name, factory in managers.items():
            for fraction in (0.0, 0.9):
                emit(workload="pinned",
                     keys=args.keys,
                     manager=name,
                     pool=POOL,
                     pinned_fraction=fraction,
                     us_per_store=pinned_stores(factory,
                                                POOL,
                                                key,
                                                fraction,
                                                num_stores=200))


if __name__ == "__main__":
    main()
