"""Memory: the peak of every public path against ``working_memory``.

Usage::

    python benchmarks/bench_memory.py                     # n = 20000, 64 MiB
    python benchmarks/bench_memory.py --n 5000 --working-memory 16
    python benchmarks/bench_memory.py --only cv- --check  # exit 1 if over

Runs each path of ``tests/_memory.py`` (``MEMORY_PATHS``: ``predict`` on
every algorithm, kernel family and dimension, ``return_std``, ``degree=1``,
dense and sparse attention weights, each ``on_empty`` policy, the
binned path's ``predict`` (held to its output and one chunk), the
classifier, the CV's leave-one-out, K-fold, per-feature, underflow and
fallback routes, and the trees on zero-inflated data and on queries sorted
so that the dense region comes in one chunk) under
``sklearn.config_context(working_memory=...)``, each in its own process
under an address-space cap, so that a runaway path reports a failure
instead of taking the machine down. For each it prints:

- ``traced``: the peak traced by ``tracemalloc`` (NumPy's and Python's
  allocations);
- ``rss``: the growth of the resident set, peak during the call over the
  start (Linux; it also sees native buffers that ``tracemalloc`` misses,
  and pages that the allocator keeps, so it is noisier);
- ``output``: the bytes of the result (for a ``fit``, of everything the
  fitted estimator holds);
- ``budget``: ``working_memory + output + slack`` as
  ``tests/_memory.py:memory_budget`` states it (for the CV it grows with
  ``n * n_candidates``), and the verdict: ``OK``, or ``OVER`` with the
  ratio of the traced peak to the budget.
"""

import argparse
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
MIB = 2**20


def _status_kib(field):
    """A ``VmRSS`` / ``VmHWM`` line of /proc/self/status, in KiB, or None."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss():
    """Reset the peak resident set (Linux >= 4.0); whether it could."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def run_case(name, n, m, working_memory):
    """Measure one path in this process; print one JSON line."""
    sys.path.insert(0, str(TESTS))
    import numpy as np  # noqa: F401
    from _memory import (
        MEMORY_PATHS,
        memory_budget,
        output_bytes,
        quietly,
        traced_peak,
    )
    from sklearn import config_context

    path = quietly(lambda: MEMORY_PATHS[name](n, m))
    rss_start = _status_kib("VmRSS")
    can_reset = _reset_peak_rss()
    start = time.perf_counter()
    with config_context(working_memory=working_memory):
        result, peak = quietly(lambda: traced_peak(path.call))
    seconds = time.perf_counter() - start
    hwm = _status_kib("VmHWM")
    if not can_reset or rss_start is None or hwm is None:
        # The peak of the whole process, setup included: an upper bound.
        hwm = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rss_start = rss_start or 0
    output = output_bytes(result)
    record = {
        "traced": peak,
        "rss": max(hwm - rss_start, 0) * 1024,
        "output": output,
        "budget": memory_budget(path, working_memory, output),
        "seconds": seconds,
    }
    print("RESULT " + json.dumps(record), flush=True)


def _cap(max_bytes):
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (max_bytes, max_bytes))

    return limit


def spawn(name, args):
    """Run one path in a child process; its record, or a failure message."""
    command = [
        sys.executable,
        __file__,
        "--case",
        name,
        "--n",
        str(args.n),
        "--queries",
        str(args.queries),
        "--working-memory",
        str(args.working_memory),
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            preexec_fn=_cap(int(args.max_gib * 2**30)),
        )
    except subprocess.TimeoutExpired:
        return f"SKIPPED: over the {args.timeout:g} s limit (--timeout)"
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    if "MemoryError" in done.stderr or "Unable to allocate" in done.stderr:
        return f"FAILED: MemoryError at the {args.max_gib:g} GiB cap"
    if done.returncode < 0:
        return f"FAILED: killed by signal {-done.returncode} (cap {args.max_gib:g} GiB)"
    last = done.stderr.strip().splitlines()[-1:] or ["no output"]
    return f"FAILED: exit {done.returncode}: {last[0][:100]}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="training samples")
    parser.add_argument(
        "--queries",
        type=int,
        default=None,
        help="queries (default n / 4; half of them for attention weights)",
    )
    parser.add_argument(
        "--working-memory", type=float, default=64, help="MiB (default 64)"
    )
    parser.add_argument("--only", default="", help="regular expression on names")
    parser.add_argument(
        "--timeout", type=float, default=120, help="seconds per path (default 120)"
    )
    parser.add_argument(
        "--max-gib",
        type=float,
        default=6,
        help="address-space cap of each path's process, GiB (default 6)",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a path fails or is over"
    )
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.queries is None:
        args.queries = max(args.n // 4, 1)
    if args.case:
        run_case(args.case, args.n, args.queries, args.working_memory)
        return 0

    sys.path.insert(0, str(TESTS))
    from _memory import MEMORY_PATHS

    names = [name for name in MEMORY_PATHS if re.search(args.only, name)]
    print(
        f"# {time.strftime('%Y-%m-%d')}, {platform.machine()}, Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs; n = {args.n}, "
        f"{args.queries} queries, working_memory = {args.working_memory:g} MiB, "
        f"cap {args.max_gib:g} GiB, {args.timeout:g} s a path"
    )
    header = (
        f"{'path':44} {'traced':>9} {'rss':>9} {'output':>9} {'budget':>9} "
        f"{'time':>7}  verdict"
    )
    print(header + "\n" + "-" * len(header), flush=True)
    counts = {"OK": 0, "OVER": 0, "FAILED": 0, "SKIPPED": 0}
    for name in names:
        record = spawn(name, args)
        if isinstance(record, str):
            counts[record.split(":")[0]] += 1
            print(f"{name:44} {record}", flush=True)
            continue
        ratio = record["traced"] / record["budget"]
        verdict = "OK" if ratio <= 1 else f"OVER x{ratio:.1f}"
        counts[verdict.split()[0]] += 1
        mib = {k: record[k] / MIB for k in ("traced", "rss", "output", "budget")}
        print(
            f"{name:44} {mib['traced']:9.1f} {mib['rss']:9.1f} "
            f"{mib['output']:9.1f} {mib['budget']:9.1f} "
            f"{record['seconds']:6.1f}s  {verdict}",
            flush=True,
        )
    print("(MiB; budget = working_memory + output + slack, see tests/_memory.py)")
    print("summary: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    bad = counts["OVER"] + counts["FAILED"] + counts["SKIPPED"]
    return 1 if args.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
