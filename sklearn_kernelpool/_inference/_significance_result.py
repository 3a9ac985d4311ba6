"""SignificanceResult: the statistics and p-values of :func:`significance_test`."""

import numpy as np


class SignificanceResult:
    """The statistics and bootstrap p-values of :func:`significance_test`.

    One row per tested feature, and, for a ``y`` of several outputs, one
    column per output (each output tested on its own).

    Parameters
    ----------
    statistics : ndarray of shape (n_tested,) or (n_tested, n_outputs)
        The statistic ``lambda_j`` of each tested feature.
    null_statistics : ndarray of shape (n_tested, n_resamples) or \
            (n_tested, n_outputs, n_resamples)
        Its bootstrap draws under the null hypothesis.
    features : ndarray of shape (n_tested,)
        The tested features: names (str) where the estimator was fitted
        on string column names, indices (int) otherwise.
    categorical : ndarray of bool of shape (n_tested,)
        Which of them are categorical.

    Attributes
    ----------
    statistics : ndarray of shape (n_tested,) or (n_tested, n_outputs)
        The statistic of each feature: the weighted mean squared partial
        derivative of the fit for a continuous feature, the weighted mean
        squared change of the fit over the other categories for a
        categorical one.
    pvalues : ndarray of the shape of ``statistics``
        ``(1 + #{b : lambda*_b >= lambda}) / (n_resamples + 1)``, in
        ``[1 / (n_resamples + 1), 1]``.
    null_statistics : ndarray
        The draws ``lambda*_b``, the bootstrap axis last.
    features : ndarray of shape (n_tested,)
        The tested features, names or indices.
    categorical : ndarray of bool of shape (n_tested,)
        Which of them are categorical.
    n_resamples : int
        The number of bootstrap draws.

    See Also
    --------
    significance_test : Computes it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool import SignificanceResult
    >>> result = SignificanceResult(
    ...     np.array([2.5, 0.01]), np.array([[0.1, 0.2, 0.3], [0.0, 0.02, 0.05]]),
    ...     np.array([0, 1]), np.array([False, False]))
    >>> result.pvalues
    array([0.25, 0.75])
    >>> print(result)
    feature  kind        statistic  p-value
    0        continuous  2.5        0.25
    1        continuous  0.01       0.75
    (wild bootstrap, 3 resamples)
    """

    def __init__(self, statistics, null_statistics, features, categorical):
        self.statistics = np.asarray(statistics, dtype=np.float64)
        self.null_statistics = np.asarray(null_statistics, dtype=np.float64)
        self.features = np.asarray(features)
        self.categorical = np.asarray(categorical, dtype=bool)
        self.n_resamples = self.null_statistics.shape[-1]
        exceed = np.sum(self.null_statistics >= self.statistics[..., None], axis=-1)
        self.pvalues = (1.0 + exceed) / (self.n_resamples + 1.0)

    def _rows(self):
        """The rows of the table: feature, kind, [output,] statistic, p-value."""
        statistics = self.statistics.reshape(len(self.features), -1)
        pvalues = self.pvalues.reshape(statistics.shape)
        several = self.statistics.ndim == 2
        rows = []
        for j, feature in enumerate(self.features):
            kind = "categorical" if self.categorical[j] else "continuous"
            for k in range(statistics.shape[1]):
                output = [str(k)] if several else []
                numbers = [f"{statistics[j, k]:.4g}", f"{pvalues[j, k]:.4g}"]
                rows.append([str(feature), kind, *output, *numbers])
        return rows

    def __str__(self):
        head = ["feature", "kind"] + (["output"] if self.statistics.ndim == 2 else [])
        table = [head + ["statistic", "p-value"], *self._rows()]
        widths = [max(len(row[c]) for row in table) for c in range(len(head) + 2)]
        lines = [
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
            for row in table
        ]
        lines = [line.rstrip() for line in lines]
        lines.append(f"(wild bootstrap, {self.n_resamples} resamples)")
        return "\n".join(lines)

    def __repr__(self):
        return f"SignificanceResult(\n{self}\n)"

    def to_frame(self):
        """The table as a pandas DataFrame, one row per feature (and output).

        Returns
        -------
        frame : pandas.DataFrame
            Columns ``feature``, ``kind``, ``output`` (with several outputs
            only), ``statistic`` and ``pvalue``.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn_kernelpool import SignificanceResult
        >>> result = SignificanceResult(
        ...     np.array([2.5]), np.array([[0.1, 0.2, 3.0]]), np.array(["x"]),
        ...     np.array([False]))
        >>> result.to_frame()
          feature        kind  statistic  pvalue
        0       x  continuous        2.5     0.5
        """
        import pandas as pd

        statistics = self.statistics.reshape(len(self.features), -1)
        n_outputs = statistics.shape[1]
        frame = {
            "feature": np.repeat(self.features, n_outputs),
            "kind": np.repeat(
                np.where(self.categorical, "categorical", "continuous"), n_outputs
            ),
        }
        if self.statistics.ndim == 2:
            frame["output"] = np.tile(np.arange(n_outputs), len(self.features))
        frame["statistic"] = statistics.ravel()
        frame["pvalue"] = self.pvalues.ravel()
        return pd.DataFrame(frame)
