"""The local dask cluster of the tests, or a skip where dask is missing."""

import contextlib

import pytest


@contextlib.contextmanager
def local_client():
    """A client of two single-threaded workers in this process, over
    loopback TCP: no worker processes to start on a small machine, yet every
    task goes through the scheduler. Stopped on exit."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=False,
        protocol="tcp://",
        host="127.0.0.1",
        # (a free port on loopback: the clusters of parallel test workers
        # never meet)
        dashboard_address="127.0.0.1:0",
    ) as cluster:
        with distributed.Client(cluster) as client:
            yield client
