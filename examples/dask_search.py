"""
===============================================
A bandwidth search and predictions on dask
===============================================

The training data of Nadaraya-Watson pooling must fit in memory, but neither
the hyperparameter search nor the queries need to. This example starts a
local :class:`distributed.LocalCluster`, runs a
:class:`~sklearn.model_selection.GridSearchCV` over kernels and bandwidths on
its workers through joblib's ``"dask"`` backend, then predicts on a dask array
of queries chunk by chunk.

It needs the ``dask`` extra, installed from a clone of the repository with
``python -m pip install ".[dask]"`` run at its root; the documentation shows
it without running it. On a real cluster, pass the
scheduler's address to :class:`distributed.Client` instead.
"""

# %%
# A local cluster
# ---------------
# Two single-threaded workers in this process; with ``processes=True`` (the
# default) they are separate processes, and a script must then run under
# ``if __name__ == "__main__":``.
import dask.array as da
import joblib
import numpy as np
from dask_ml.wrappers import ParallelPostFit
from distributed import Client, LocalCluster
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV

from sklearn_kernelpool import KernelAttentionRegressor, KernelAttentionRegressorCV

cluster = LocalCluster(
    n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
)
client = Client(cluster)

rng = np.random.default_rng(0)
X = rng.uniform(0, 5, size=(2000, 2))
y = 2 * np.sin(X[:, 0]) + X[:, 1] + rng.normal(scale=0.5, size=2000)

# %%
# The search runs on the workers
# ------------------------------
# Every (candidate, split) fit is one task of the cluster. The results are
# those of the same search without dask.
grid = {
    "kernel": ["gaussian", "cauchy"],
    "bandwidth": np.geomspace(0.05, 1.0, 8),
}
search = GridSearchCV(KernelAttentionRegressor(), grid, cv=5, n_jobs=-1)
with joblib.parallel_backend("dask"):
    search.fit(X, y)
print("best:", search.best_params_, f"R^2 = {search.best_score_:.3f}")

# %%
# :class:`~sklearn_kernelpool.KernelAttentionRegressorCV` scores every
# candidate in one pass over the pairs of points, on the threads of one
# machine: under the dask backend it gives the same answer, computed locally.
with joblib.parallel_backend("dask"):
    cv = KernelAttentionRegressorCV(kernels=["gaussian", "cauchy"]).fit(X, y)
print("KernelAttentionRegressorCV:", cv.best_params_)

# %%
# Predicting on a dask array, chunk by chunk
# ------------------------------------------
# Each chunk of queries is pooled on a worker; the fitted estimator is sent
# to the workers once. ``map_blocks`` needs nothing but dask.
queries = da.from_array(rng.uniform(0, 5, size=(100_000, 2)), chunks=(10_000, 2))
estimator = search.best_estimator_
predicted = queries.map_blocks(estimator.predict, drop_axis=1, dtype=np.float64)
print(predicted.compute()[:5])

# %%
# :class:`dask_ml.wrappers.ParallelPostFit` does the same for every predict
# method. To score, compute the predictions (one number per query) and use a
# scikit-learn metric: ``ParallelPostFit.score`` and ``dask_ml.metrics`` on
# dask arrays fail with dask releases after 2025.1 ("cannot broadcast shape
# (nan,)", dask-ml issue 1012).
wrapped = ParallelPostFit(estimator)  # already fitted: used as it is
y_queries = (2 * np.sin(queries[:, 0]) + queries[:, 1]).compute()
y_predicted = wrapped.predict(queries).compute()
print("R^2 on the queries:", r2_score(y_queries, y_predicted))

client.close()
cluster.close()
