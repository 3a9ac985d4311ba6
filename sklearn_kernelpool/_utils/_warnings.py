"""The warnings of the package.

A warning's text depends only on the configuration that causes it (the
kernel, the bandwidth, the ``on_empty`` policy), never on the counts of one
call, which are attributes of the warning. So Python's ``"default"`` filter
shows a configuration's warning once per line of the caller, and a search
shows it once per candidate, not once per fold (:mod:`._warn` issues them).
"""


class EmptyNeighborhoodWarning(UserWarning):
    """Warn that queries had no training key inside a compact kernel's support.

    Such queries get the estimator's ``on_empty`` fallback: the value of the
    nearest key, the weighted mean of the training values, or NaN. A larger
    bandwidth, or a kernel with unbounded support, avoids the fallback.

    One call of ``predict``, ``predict_proba`` or ``attention_weights``
    issues at most one such warning. Its text names the kernel, the bandwidth
    and the policy only, so that Python's default filter shows it once per
    configuration and line (once per candidate in a search); the counts of
    the call are its attributes.

    Parameters
    ----------
    message : str
        The text of the warning.

    n_empty : int, default=None
        The number of queries of the call that fell back.

    n_queries : int, default=None
        The number of queries of the call.

    Attributes
    ----------
    n_empty : int
        The number of queries of the call that fell back.

    n_queries : int
        The number of queries of the call.

    Examples
    --------
    >>> import warnings
    >>> from sklearn_kernelpool import EmptyNeighborhoodWarning
    >>> from sklearn_kernelpool import KernelAttentionRegressor
    >>> reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.5)
    >>> reg = reg.fit([[0.0], [1.0]], [0.0, 1.0])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     reg.predict([[0.2], [10.0]])
    array([0., 1.])
    >>> caught[0].category is EmptyNeighborhoodWarning
    True
    >>> caught[0].message.n_empty, caught[0].message.n_queries
    (1, 2)
    """

    def __init__(self, message, n_empty=None, n_queries=None):
        super().__init__(message)
        self.n_empty = n_empty
        self.n_queries = n_queries


class LocalLinearFallbackWarning(UserWarning):
    """Warn that local-linear fits fell back to, or neared, the local mean.

    With ``degree=1`` each query's slope is the minimum-norm solution of its
    local normal equations, over the directions its keys determine
    (numerically: the eigenvalues of the weighted covariance of the keys
    above the rounding error of its computation). A query whose local design
    determines no direction at all (rank 0: its attention weight is carried
    by a single key, or by keys at one point) gets the local-constant
    (``degree=0``) prediction, as do its attention weights and standard
    deviations; ``n_singular`` counts such queries.

    A query of high leverage in its local fit gets its slope shrunk by a
    factor ``s`` in ``[0, 1)`` towards the local mean: the fit would
    otherwise extrapolate a slope resting on few keys, or keys of tiny
    weight. With ``D`` the Mahalanobis distance of the query from the
    weighted mean of its keys (under their weighted covariance), ``n_eff``
    Kish's effective number of keys and the leverage
    ``L = (1 + D**2) / n_eff`` (the variance of the local line's prediction
    in units of one observation's), ``s = 1`` where ``L <= 1`` and
    ``s = exp(-(sqrt(L) - 1)**2 / 2)`` beyond: the shrinkage ``1 - s``
    grows continuously with the leverage, from 0 to 1 far away, where the
    fit is the local mean. The constant kernel's fit, the global
    least-squares line, is never shrunk.
    ``n_shrunk`` counts the queries whose slope was shrunk at all, and
    ``mean_shrinkage`` averages ``1 - s`` over the queries of the call with
    a neighbourhood.

    The warning is issued when a query fell back to the local mean, or when
    some query's slope was shrunk by more than half (``s < 0.5``); a mild
    shrinkage is not warned of. A
    larger bandwidth avoids both, and ``degree=0`` fits the local mean
    everywhere.

    Rank-deficient designs (collinear features such as a full one-hot
    encoding, or fewer than ``n_features + 1`` keys in general position) get
    a slope along the directions they determine and none along the others:
    they do not fall back and are not warned of, but a warning issued for
    the call counts them in ``n_rank_deficient``, and
    :class:`KernelAttentionRegressorCV` reports their share as
    ``cv_results_["rank_deficient_fraction"]``, and that of the shrunk
    slopes as ``cv_results_["shrunk_fraction"]``.

    A robust fit (``robust_iterations`` with ``degree=1``) issues it from
    ``fit`` where the slope of a training row was shrunk at all (``s < 1``)
    in one of its in-sample fits: the plain fit and each iteration's, whose
    residuals set the robustness weights, and the final fit. Where the
    robustness weights leave a row's keys on one side of it, LOWESS
    extrapolates the local line and the robust fit does not
    (:ref:`robust-lowess`). ``n_shrunk_per_fit`` counts those rows in each
    fit; the other counts are those of the final fit at the training rows.

    One call issues at most one such warning. Its text names the kernel, the
    bandwidth and what happened only (see :class:`EmptyNeighborhoodWarning`);
    the counts of the call are its attributes.

    Parameters
    ----------
    message : str
        The text of the warning.

    n_singular : int, default=None
        The number of queries of the call whose local design determines no
        slope.

    n_queries : int, default=None
        The number of queries of the call.

    n_rank_deficient : int, default=None
        The number of queries of the call whose local design is
        rank-deficient but determines a slope (not counted in
        ``n_singular``).

    n_shrunk : int, default=None
        The number of queries of the call whose slope was shrunk
        (``s < 1``).

    mean_shrinkage : float, default=None
        The mean of ``1 - s`` over the queries of the call with a
        neighbourhood.

    n_shrunk_per_fit : tuple of int, default=None
        For a robust fit, the number of training rows whose slope was shrunk
        in each in-sample fit.

    Attributes
    ----------
    n_singular : int
        The number of queries of the call whose local design determines no
        slope.

    n_queries : int
        The number of queries of the call.

    n_rank_deficient : int
        The number of rank-deficient queries of the call that kept a slope.

    n_shrunk : int
        The number of queries of the call whose slope was shrunk towards the
        local mean (``s < 1``).

    mean_shrinkage : float
        The mean of ``1 - s`` over the queries of the call with a
        neighbourhood (those that did not fall back to ``on_empty``): 0 when
        no slope was shrunk, 1 when every one was shrunk to nothing.

    n_shrunk_per_fit : tuple of int or None
        The warning of a robust fit: the number of training rows whose slope
        was shrunk (``s < 1``) in each of its ``robust_iterations + 1``
        in-sample fits, the plain fit's first and the final fit's last. None
        for the warning of a prediction.

    Examples
    --------
    >>> import warnings
    >>> from sklearn_kernelpool import KernelAttentionRegressor
    >>> from sklearn_kernelpool import LocalLinearFallbackWarning
    >>> reg = KernelAttentionRegressor(kernel="boxcar", bandwidth=0.6, degree=1)
    >>> reg = reg.fit([[0.0], [1.0], [2.0]], [0.0, 1.0, 4.0])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     reg.predict([[0.1], [0.5]])
    array([0. , 0.5])
    >>> caught[0].category is LocalLinearFallbackWarning
    True

    Only the key at 0 weighs on the query at 0.1, which so gets the local
    mean; the keys at 0 and 1 determine the line at 0.5:

    >>> caught[0].message.n_singular, caught[0].message.n_queries
    (1, 2)

    Two close keys far from the others determine a steep line, which a query
    beyond them would extrapolate; its slope is shrunk towards the local
    mean instead, here almost entirely:

    >>> X = [[-1.0], [-0.5], [0.0], [0.5], [1.0], [3.0], [3.001]]
    >>> y = [0.0, 0.5, 1.0, 0.5, 0.0, 5.0, 5.3]
    >>> reg = KernelAttentionRegressor(bandwidth=0.3, degree=1).fit(X, y)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     reg.predict([[0.25], [4.001]]).round(2)
    array([0.72, 5.15])
    >>> caught[0].message.n_shrunk, caught[0].message.n_singular
    (1, 0)
    >>> round(caught[0].message.mean_shrinkage, 2)
    0.5
    """

    def __init__(
        self,
        message,
        n_singular=None,
        n_queries=None,
        n_rank_deficient=None,
        n_shrunk=None,
        mean_shrinkage=None,
        n_shrunk_per_fit=None,
    ):
        super().__init__(message)
        self.n_singular = n_singular
        self.n_queries = n_queries
        self.n_rank_deficient = n_rank_deficient
        self.n_shrunk = n_shrunk
        self.mean_shrinkage = mean_shrinkage
        self.n_shrunk_per_fit = n_shrunk_per_fit


class LocalLinearMemoryWarning(UserWarning):
    """Warn that one local-linear query needs more than ``working_memory``.

    With ``degree=1`` and many features, each query's local normal
    equations (a ``n_features x n_features`` matrix, its eigendecomposition,
    and the query's weighted keys) are formed one query at a time within
    scikit-learn's ``working_memory``. When a single query's system exceeds
    it, the queries are solved one at a time and the memory used exceeds
    ``working_memory`` by that much; one call issues at most one such
    warning. Where a single query's system would exceed the physical memory,
    the call raises a ``MemoryError`` instead.

    Parameters
    ----------
    message : str
        The text of the warning.

    row_bytes : int, default=None
        The bytes of one query's local system.

    working_memory_bytes : float, default=None
        The ``working_memory`` of a thread, in bytes.

    Attributes
    ----------
    row_bytes : int
        The bytes of one query's local system.

    working_memory_bytes : float
        The ``working_memory`` of a thread, in bytes.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from sklearn import config_context
    >>> from sklearn_kernelpool import KernelAttentionRegressor
    >>> from sklearn_kernelpool import LocalLinearMemoryWarning
    >>> X = np.random.default_rng(0).normal(size=(50, 300))
    >>> reg = KernelAttentionRegressor(bandwidth=30.0, degree=1)
    >>> reg = reg.fit(X, X[:, 0])
    >>> with config_context(working_memory=1), warnings.catch_warnings(
    ...     record=True
    ... ) as caught:
    ...     warnings.simplefilter("always")
    ...     _ = reg.predict(X[:2])
    >>> [w.category for w in caught] == [LocalLinearMemoryWarning]
    True
    """

    def __init__(self, message, row_bytes=None, working_memory_bytes=None):
        super().__init__(message)
        self.row_bytes = row_bytes
        self.working_memory_bytes = working_memory_bytes


class BandwidthEdgeWarning(UserWarning):
    """Warn that the selected bandwidth is the smallest or largest candidate.

    :class:`KernelAttentionRegressorCV` issues it when the best isotropic
    bandwidth lies on an edge of a grid of bandwidths given as an array (the
    best one may lie beyond it), or on an edge of the automatic grid after
    its extensions ran out. The text says which edge.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from sklearn_kernelpool import BandwidthEdgeWarning
    >>> from sklearn_kernelpool import KernelAttentionRegressorCV
    >>> X = np.linspace(0, 6, 60)[:, None]
    >>> y = np.sin(3 * X[:, 0])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     reg = KernelAttentionRegressorCV(
    ...         bandwidths=[1.0, 2.0], degree=0, n_neighbors=None
    ...     ).fit(X, y)
    >>> caught[0].category is BandwidthEdgeWarning
    True
    >>> reg.bandwidth_
    1.0
    """


class CoarseGridWarning(UserWarning):
    """Warn that the grid of the binned path resolves the width coarsely.

    With ``algorithm="binned"`` and ``n_bins=None``, the grid puts 40 nodes
    per bandwidth over the span of the keys, up to a cap (131072 nodes in
    one dimension, 1024 per feature in two). Keys far apart, an outlier for
    one, stretch the capped grid until it resolves the width with fewer
    than 8 nodes (half the 16 below which ``algorithm="auto"`` takes an
    exact path): the binned sums then blur the kernel over the grid's
    spacing, and the predictions can be far from the exact ones, down to
    the weighted mean of ``y`` everywhere. ``fit`` issues this warning, and
    so do :class:`KernelAttentionRegressorCV` and
    :class:`KernelAttentionClassifierCV` with ``algorithm="binned"`` for
    the candidate widths that their grid resolves so coarsely, whose scores
    then hardly tell the widths apart. Pass a larger ``n_bins``, take out
    the outlying keys, or use ``algorithm="brute"``.

    A given ``n_bins`` is used as it is, and warned of the same way where it
    resolves the width with fewer than 8 nodes; the binning error falls as
    the square of the node spacing. A grid that coarse on purpose (to
    measure its error, say) silences the warning with
    :func:`warnings.catch_warnings`. Loading a saved model does not warn
    again.

    Parameters
    ----------
    message : str
        The text of the warning.

    nodes_per_width : float, default=None
        The fewest grid nodes per width over the features (the smallest
        resolved width's, in a search).

    n_bins : tuple of int, default=None
        The nodes per feature of the grid.

    Attributes
    ----------
    nodes_per_width : float
        The fewest grid nodes per width over the features.

    n_bins : tuple of int
        The nodes per feature of the grid.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from sklearn_kernelpool import CoarseGridWarning
    >>> from sklearn_kernelpool import KernelAttentionRegressor
    >>> X = np.r_[np.linspace(0, 1, 200), 1e6][:, None]
    >>> reg = KernelAttentionRegressor(bandwidth=0.05, algorithm="binned")
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     reg = reg.fit(X, X[:, 0])
    >>> caught[0].category is CoarseGridWarning
    True
    >>> caught[0].message.n_bins, round(caught[0].message.nodes_per_width, 4)
    ((131072,), 0.0066)
    """

    def __init__(self, message, nodes_per_width=None, n_bins=None):
        super().__init__(message)
        self.nodes_per_width = nodes_per_width
        self.n_bins = n_bins


class WeakIdentificationWarning(UserWarning):
    """Warn that linear columns of a partially linear fit are weakly identified.

    With ``linear_features``, the coefficient of a linear column ``Z_j`` is
    determined by the variation of ``Z_j`` that the kernel smoother of the
    other features does not explain: its leave-one-out residuals ``E_j``,
    after those of the other linear columns. Their weighted sum of squares,
    as a fraction of the weighted sum of squares of ``Z_j`` about its mean,
    is the inverse of the variance inflation factor of the coefficient
    (Marquardt, 1970). ``fit`` refuses a column whose fraction is below
    1e-8 (the smoother reproduces it: a ``ValueError`` names it) and issues
    this warning for the columns whose fraction is below ``threshold``,
    1e-2: the smoother explains more than 99% of their variance, and their
    coefficients are hardly separable from the kernel part (see
    :ref:`tabular-partially-linear`).

    Its text names the columns and the threshold only (see
    :class:`EmptyNeighborhoodWarning`); the fractions are its attributes.

    Parameters
    ----------
    message : str
        The text of the warning.

    columns : ndarray of str, default=None
        The weakly identified columns, by their names in
        ``linear_feature_names_``.

    fractions : ndarray of float, default=None
        Their fractions, in the order of ``columns``.

    threshold : float, default=None
        The fraction below which a column is warned of.

    Attributes
    ----------
    columns : ndarray of str
        The weakly identified columns, by their names in
        ``linear_feature_names_``.

    fractions : ndarray of float
        Their fractions, in the order of ``columns``.

    threshold : float
        The fraction below which a column is warned of, 1e-2.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from sklearn_kernelpool import KernelAttentionRegressor
    >>> from sklearn_kernelpool import WeakIdentificationWarning
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(-2, 2, 200)
    >>> X = np.column_stack([x, x + 0.01 * rng.normal(size=200)])
    >>> y = np.sin(x) + X[:, 1] + 0.1 * rng.normal(size=200)
    >>> reg = KernelAttentionRegressor(bandwidth=0.3, linear_features=[1])
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     reg = reg.fit(X, y)
    >>> caught[0].category is WeakIdentificationWarning
    True
    >>> caught[0].message.columns, caught[0].message.threshold
    (array(['x1'], dtype=object), 0.01)
    """

    def __init__(self, message, columns=None, fractions=None, threshold=None):
        super().__init__(message)
        self.columns = columns
        self.fractions = fractions
        self.threshold = threshold
