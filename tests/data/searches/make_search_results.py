"""Write the results of the searches that ``tests/test_search_results.py``
compares the current package with.

The file holds, for each configuration of ``KernelAttentionRegressorCV`` and
``KernelAttentionClassifierCV``, the numeric entries of ``cv_results_``, the
selected parameters, the best score and the predictions at queries, with the
releases of NumPy, SciPy and scikit-learn that computed them. Changes that
are not meant to move a search below the large-table threshold (new paths,
new parameters with defaults that keep today's answers) must leave them as
they are. Written from the package as it was before such changes::

    python tests/data/searches/make_search_results.py
"""

import pickle
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import scipy
import sklearn

from sklearn_kernelpool import KernelAttentionClassifierCV, KernelAttentionRegressorCV


def _data(n=240, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] ** 2 / 2 - X[:, 2] + 0.2 * rng.normal(size=n)
    w = rng.uniform(0.5, 2.0, n)
    w[rng.choice(n, 10, replace=False)] = 0.0
    return X, y, w, rng.uniform(-2.2, 2.2, (25, d))


def _frame(seed=1):
    X, y, w, Q = _data(seed=seed)
    rng = np.random.default_rng(seed)
    levels = ["north", "south", "west"]

    def frame(Z, n):
        codes = rng.choice(levels, n)
        return pd.DataFrame(
            {
                "a": Z[:, 0],
                "b": Z[:, 1],
                "region": pd.Categorical(codes, categories=levels),
            }
        ), codes

    X_frame, codes = frame(X, len(X))
    y = y + (codes == "south") - 0.5 * (codes == "west")
    Q_frame, _ = frame(Q, len(Q))
    return X_frame, y, w, Q_frame


def configurations():
    """name -> (estimator, X, y, sample_weight, queries, method)."""
    X, y, w, Q = _data()
    X_frame, y_frame, w_frame, Q_frame = _frame()
    labels = (y > np.median(y)).astype(int) + (y > np.quantile(y, 0.8))
    return {
        "default": (KernelAttentionRegressorCV(), X, y, None, Q, "predict"),
        "default_weighted": (KernelAttentionRegressorCV(), X, y, w, Q, "predict"),
        "compact_adaptive": (
            KernelAttentionRegressorCV(kernels=("epanechnikov", "tricube")),
            X,
            y,
            w,
            Q,
            "predict",
        ),
        "kfold": (KernelAttentionRegressorCV(cv=5), X, y, w, Q, "predict"),
        "categorical_auto": (
            KernelAttentionRegressorCV(categorical_features="from_dtype"),
            X_frame,
            y_frame,
            w_frame,
            Q_frame,
            "predict",
        ),
        "categorical_kernel": (
            KernelAttentionRegressorCV(
                categorical_features="from_dtype", linear_features=None
            ),
            X_frame,
            y_frame,
            w_frame,
            Q_frame,
            "predict",
        ),
        "classifier": (
            KernelAttentionClassifierCV(),
            X,
            labels,
            w,
            Q,
            "predict_proba",
        ),
    }


def results(estimator, X, y, sample_weight, queries, method):
    """What a configuration gives: the numeric results, the selected
    parameters, the best score and the predictions."""
    estimator.fit(X, y, sample_weight=sample_weight)
    numeric = {}
    for key, value in estimator.cv_results_.items():
        if key.endswith("_time") or key == "params":
            continue
        value = np.ma.getdata(value) if np.ma.isMaskedArray(value) else value
        value = np.asarray(value)
        if value.dtype.kind in "fiub":
            numeric[key] = value
    return {
        "cv_results": numeric,
        "params": [dict(p) for p in estimator.cv_results_["params"]],
        "best_params": dict(estimator.best_params_),
        "best_score": float(estimator.best_score_),
        "predictions": getattr(estimator, method)(queries),
    }


def main():
    import warnings

    path = Path(__file__).with_name("search_results.pkl")
    written = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, configuration in configurations().items():
            written[name] = results(*configuration)
    written["versions"] = {
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "sklearn": sklearn.__version__,
    }
    with open(path, "wb") as file:
        pickle.dump(written, file)
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
