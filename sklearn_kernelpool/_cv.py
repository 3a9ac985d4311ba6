"""KernelAttentionRegressorCV: bandwidth and kernel selection by cross-validation."""

import inspect
import warnings
from numbers import Integral

import numpy as np
from joblib import effective_n_jobs
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import check_scoring, get_scorer_names
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.neighbors import NearestNeighbors
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from . import _categorical_widths
from ._adaptive_loo import AdaptiveHeldOut
from ._algorithm import ALGORITHMS, key_span, prefers_binned
from ._base import (
    N_JOBS_CONSTRAINT,
    validate_fit_data,
    validate_queries,
    validate_sample_weight,
)
from ._binned_cv import BinnedHeldOut
from ._categorical import CATEGORICAL_CONSTRAINTS
from ._categorical_cv import CategoricalHeldOut
from ._chunking import row_batches
from ._diagnostics import (
    SMOOTHER_CRITERIA,
    in_sample_criteria,
    smoother_diagnostics,
)
from ._exceptions import (
    BandwidthEdgeWarning,
    EmptyNeighborhoodWarning,
    LocalLinearFallbackWarning,
)
from ._guard import guard_widths
from ._loo import FALLBACK_BYTES_PER_KEY, HeldOut
from ._pooling import ON_EMPTY
from ._regression import KernelAttentionRegressor
from ._sparse import DENSE_ONLY, dense_keys
from ._validation import (
    check_squares,
    coordinate_limit,
    power_of_two_below,
    relative_weights,
    scale_coordinates,
)
from ._weights import physical_memory
from ._widths import learn_widths, loo_loss
from .kernels import KERNELS

# The neighbour counts of n_neighbors="auto": from a few neighbours to a
# fifth of a table of a few hundred rows, doubling.
AUTO_NEIGHBORS = (5, 10, 20, 40, 80)


def bandwidth_grid(X, size):
    """The automatic grid: ``size`` bandwidths log-spaced over the data's scale.

    From the median distance of a distinct point to its nearest other
    distinct point, to twice the largest distance of a point from the mean
    (which lies between the data's diameter and twice it). With every point
    equal, every bandwidth is 1. The distances are those of ``X`` divided
    by a power of two near its largest coordinate, multiplied back: the
    grid scales with ``X``, however small or large its scale.
    """
    largest = float(np.max(np.abs(X), initial=0.0))
    scale = float(power_of_two_below(largest))
    Z = X / scale  # exact, and of coordinates below 2 in magnitude
    radius = 2.0 * float(np.sqrt(np.max(np.sum((Z - Z.mean(axis=0)) ** 2, axis=1))))
    distinct = np.unique(Z, axis=0)
    if not radius > 0 or len(distinct) < 2:
        return np.ones(size)
    distances, _ = NearestNeighbors(n_neighbors=1).fit(distinct).kneighbors()
    low = min(float(np.median(distances)), radius)
    if not low > 0:
        raise ValueError(
            "The automatic bandwidths start at the median distance of a distinct "
            "point of X to its nearest other one, which is zero in float64 next "
            f"to X's largest coordinate ({largest:.3g}): most points differ "
            "by less than 1e-154 of it. Pass bandwidths as an array, or "
            "rescale X."
        )
    if size == 1:
        return np.array([np.sqrt(low * radius)]) * scale
    return np.geomspace(low, radius, size) * scale


# The automatic grid is extended past its edge at most this many times, by
# this many bandwidths each time.
_MAX_EXTENSIONS = 4
_EXTENSION = 5
# ... and never further than this factor beyond the ends of the grid.
_REACH = 10.0


def _in_grid_order(params, results):
    """The candidates and results in ``GridSearchCV``'s order.

    As :class:`~sklearn.model_selection.ParameterGrid` orders the union of
    the candidates' values (the kernels in their given order).
    """

    def key(p):
        return tuple(sorted(p.items()))

    position = {key(p): i for i, p in enumerate(params)}
    space = {name: sorted({p[name] for p in params}) for name in params[0]}
    space["kernel"] = list(dict.fromkeys(p["kernel"] for p in params))
    merged = list(ParameterGrid(space))
    order = np.array([position[key(p)] for p in merged])
    ordered = {
        name: values[order] for name, values in results.items() if name != "params"
    }
    ordered["params"] = [params[i] for i in order]
    return ordered["params"], ordered


def _merge(params, results, new_params, new_results):
    """The candidates and results of two scorings in ``GridSearchCV``'s order.

    The candidates of both, on the union of their bandwidths, ordered as
    :class:`~sklearn.model_selection.ParameterGrid` orders them.
    """
    combined = {
        name: np.concatenate([values, new_results[name]])
        for name, values in results.items()
        if name != "params"
    }
    combined["params"] = params + new_params
    return _in_grid_order(params + new_params, combined)


def _local_linear_fits(X, Y, n_candidates, n_jobs):
    """Whether ``degree="auto"`` scores local-linear candidates on ``X``.

    A local-linear fit of ``d`` features needs more than ``d + 1`` points to
    determine its slope anywhere, and its held-out sums hold
    ``(d + 1)(d + 2) / 2 + (d + 2) p`` moments per point and candidate (see
    :meth:`._loo.HeldOut.sums_bytes`): they must take at most a quarter of
    the physical memory.
    """
    n, d = X.shape
    if n <= d + 2:
        return False
    columns = (d + 1) * (d + 2) // 2 + (d + 2) * Y.shape[1]
    n_threads = max(1, effective_n_jobs(n_jobs))
    size = 8 * n * columns * max(n_candidates, 1) * (n_threads + 2)
    limit = physical_memory()
    return limit is None or size <= limit / 4


def _stacked_flags(held_out_predictions):
    """``(predictions, empty, flags)`` of :meth:`HeldOut.predictions`' four
    arrays: the singular and the rank-deficient rows stacked on a last axis."""
    predictions, empty, singular, deficient = held_out_predictions
    return predictions, empty, np.stack([singular, deficient], axis=-1)


def _check_grid(X, grid, automatic):
    """Refuse bandwidths with which the scores cannot be computed.

    A bandwidth's square must be a normal float64, and ``X`` divided by the
    smallest one must have finite squared distances in the dtype of ``X``, as
    :class:`KernelAttentionRegressor` requires of its bandwidth.
    ``automatic`` says whether the grid was derived from the scale of ``X``.
    """
    limit = coordinate_limit(np.float64, 1)
    if not (grid.min() >= 1 / limit and grid.max() <= limit):
        what, fix = (
            "bandwidths",
            "Rescale X (for example with a StandardScaler) and the bandwidths.",
        )
        if automatic:
            what = "automatic bandwidths, which follow the scale of X,"
            fix = "Rescale X (for example with a StandardScaler)."
        raise ValueError(
            f"The bandwidths must lie between {1 / limit:.3g} and {limit:.3g}, "
            "where their squares are normal float64 numbers; got "
            f"{what} from {grid.min():.3g} to {grid.max():.3g}. {fix}"
        )
    scale_coordinates(X, grid.min(), X.dtype, "X")


def _quiet_diagnostics(estimator):
    """:func:`._diagnostics.smoother_diagnostics` without the fallback
    warnings of the in-sample fits: as while scoring by leave-one-out, the
    fallbacks of narrow candidates are no news (``predict`` still warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyNeighborhoodWarning)
        warnings.simplefilter("ignore", LocalLinearFallbackWarning)
        return smoother_diagnostics(estimator)


class _Predicted(RegressorMixin, BaseEstimator):
    """Stands in for a fitted estimator whose predictions are known.

    Lets any scikit-learn scorer score held-out predictions computed in one
    pass, instead of refitting an estimator per split and candidate.
    """

    def __init__(self, predictions):
        self.predictions = predictions

    def predict(self, X):
        return self.predictions


def _accepts_sample_weight(scorer):
    # A scikit-learn scorer passes its keyword arguments on to its metric.
    scorer = getattr(scorer, "_score_func", scorer)
    try:
        parameters = inspect.signature(scorer).parameters
    except (TypeError, ValueError):
        return True
    return "sample_weight" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _not_a_regression_scorer(scorer):
    """Why a scikit-learn scorer cannot score a regressor, or "".

    A scorer made by scikit-learn (by name or ``make_scorer``) names the
    method it calls and its metric: it scores a regressor when it calls
    ``predict`` and its metric, if scikit-learn's, is one of
    :mod:`sklearn.metrics`' regression metrics (not a classification,
    ranking or clustering one). Other callables are trusted.
    """
    response = getattr(scorer, "_response_method", "predict")
    if response != "predict":
        return f"scores the output of {response}, which a regressor does not have"
    metric = getattr(scorer, "_score_func", None)
    module = getattr(metric, "__module__", None) or ""
    if module.startswith("sklearn.") and not module.startswith(
        "sklearn.metrics._regression"
    ):
        return f"scores with {metric.__name__}, a classification or clustering metric"
    return ""


def _partition_groups(splits, n):
    """The fold of each point when the test sets partition the points and
    each training set is the rest of them; None otherwise."""
    groups = np.full(n, -1)
    for s, (_, test) in enumerate(splits):
        if np.any(groups[test] >= 0) or len(np.unique(test)) != len(test):
            return None
        groups[test] = s
    if np.any(groups < 0):
        return None
    for s, (train, test) in enumerate(splits):
        if len(train) + len(test) != n or np.any(groups[train] == s):
            return None
        if len(np.unique(train)) != len(train):
            return None
    return groups


def _r2_scores(Y, predictions, sample_weight):
    """R^2 of every candidate's predictions, as ``r2_score`` computes it.

    ``Y`` is (n, n_outputs) and ``predictions`` (n_candidates, n, n_outputs);
    outputs are averaged uniformly, and an output without variance scores 1
    when predicted exactly and 0 otherwise (``force_finite=True``).
    """
    w = np.ones(len(Y)) if sample_weight is None else sample_weight
    numerator = np.einsum("i,cio->co", w, (Y[None] - predictions) ** 2)
    mean = np.average(Y, axis=0, weights=w)
    denominator = w @ (Y - mean) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        scores = 1.0 - numerator / denominator
    constant = denominator == 0
    scores[:, constant] = np.where(numerator[:, constant] == 0, 1.0, 0.0)
    return scores.mean(axis=1)


def _rank(scores):
    """Ranks as GridSearchCV gives them: NaN scores rank last."""
    if np.all(np.isnan(scores)):
        return np.ones(len(scores), dtype=np.int32)
    filled = np.where(np.isnan(scores), np.nanmin(scores) - 1, scores)
    return rankdata(-filled, method="min").astype(np.int32)


def _width(candidate, equals="="):
    """The width of a candidate of ``params``, in words."""
    if "n_neighbors" in candidate:
        return f"n_neighbors={candidate['n_neighbors']}"
    return f"bandwidth{equals}{candidate['bandwidth']:.6g}"


class KernelAttentionRegressorCV(RegressorMixin, BaseEstimator):
    """Attention pooling with its kernel and bandwidth chosen by cross-validation.

    Like :class:`~sklearn.linear_model.RidgeCV` for
    :class:`~sklearn.linear_model.Ridge`: every candidate (kernel, bandwidth)
    is scored from one shared pass over the pairwise distances, instead of a
    refit per candidate and split, and the best one is refitted on all the
    data as ``best_estimator_``, a :class:`KernelAttentionRegressor`. The
    candidates are local-constant (``degree=0``) or local-linear
    (``degree=1``) fits.

    Parameters
    ----------
    kernels : str or sequence of str, default=("gaussian",)
        Names of kernels of :data:`sklearn_kernelpool.kernels.KERNELS` to
        choose from.

    bandwidths : int, array-like of shape (n_bandwidths,) or None, default=30
        The isotropic bandwidths to choose from:

        - an int ``m``: ``m`` bandwidths spaced evenly in log scale, from the
          median distance of a distinct training point to its nearest other
          distinct point, to twice the largest distance of a training point
          from their mean (which lies between the data's diameter and twice
          it). The points are the training points of positive sample weight;
          with one bandwidth it is the geometric mean of the two ends, and
          with all points equal every bandwidth is 1. The grid scales with
          ``X`` exactly (computed on ``X`` divided by a power of two); a
          grid whose squares are not normal float64 numbers (``X`` at a
          scale below about 1e-150 or above 1e150) raises a ``ValueError``.
          When the best candidate is the smallest or largest bandwidth of
          this grid, the grid is extended past that edge, five bandwidths of
          its ratio at a time, at most four times and never beyond ten times
          its ends, until the best is interior (see the Notes).
        - an array-like of floats > 0. A selection on its smallest or
          largest bandwidth issues a
          :class:`~sklearn_kernelpool.BandwidthEdgeWarning`.
        - None: no fixed-width candidate, only the adaptive ones of
          ``n_neighbors`` (which must then be given).

    cv : int, cross-validation generator or iterable, default=None
        How the candidates are scored:

        - None: exact leave-one-out. Every training point is predicted from
          all the others: its own key is removed from its pool, and with
          sample weights its whole weight is removed. Points of weight zero
          are predicted too, and count for nothing in the scores.
        - an int ``k >= 2``: :class:`~sklearn.model_selection.KFold` with ``k``
          folds;
        - a splitter or an iterable of (train, test) index arrays, as for
          :class:`~sklearn.model_selection.GridSearchCV`; the splits are
          drawn once, so that a generator serves as well as a list.

        Under K-fold, the held-out points of a split are predicted from the
        training points of that split, and the score of a candidate is the
        mean of its split scores, exactly as ``GridSearchCV`` computes them
        with that splitter. When the test sets partition the data and each
        training set is the rest, each pair of points is pooled once for both
        sides.

    scoring : str, callable or None, default=None
        A scikit-learn scorer name or a callable ``scorer(estimator, X, y)``.
        None is the negative mean squared error under leave-one-out and
        :math:`R^2` (the estimator's ``score``) under K-fold. Under
        leave-one-out a scorer scores the ``n`` leave-one-out predictions at
        once, as :class:`~sklearn.linear_model.RidgeCV` does. A scikit-learn
        scorer must be a regression one: one that calls ``predict`` with a
        metric of :mod:`sklearn.metrics`' regression metrics (a
        classification, ranking or clustering scorer such as ``"accuracy"``
        raises a ``ValueError``). Splits that hold out a single sample
        (``cv=n_samples``) need a scorer defined on one sample, which
        :math:`R^2` is not: use ``cv=None``, the exact leave-one-out.

        ``"gcv"`` and ``"aicc"`` score each candidate fitted on all the data
        by a criterion of its smoother matrix ``L`` (see
        :meth:`KernelAttentionRegressor.smoother_diagnostics`):
        generalised cross-validation [3]_, ``sigma2 / (1 - tr(L) / n)**2``,
        or the corrected AIC [4]_ (R np's ``bwmethod="cv.aic"``),
        ``log(sigma2) + (1 + tr(L) / n) / (1 - (tr(L) + 2) / n)``, with
        ``sigma2`` the sample-weighted residual mean square and ``n`` the
        rows of positive weight. ``mean_test_score`` is the negated
        criterion (greater is better). They are defined on the whole
        training set: they need ``cv=None`` and ``per_feature=False``
        (``ValueError`` otherwise). They come from the leave-one-out pass
        itself, with no other pass over the pairs of points: each point's
        fit on all the data is its leave-one-out fit with its own key added
        back (for adaptive widths, at its own width, from the same
        distances), so that they cost about what the leave-one-out scores
        cost.

    per_feature : bool or "auto", default=False
        After the isotropic selection, learn one width per feature by
        minimising the leave-one-out squared error with L-BFGS-B on the log
        widths, from the best isotropic bandwidth and two other deterministic
        starts, with an analytic gradient, for the selected ``degree`` (0 or
        1). Needs kernels with a log form (``"gaussian"``,
        ``"exponential"``, ``"cauchy"`` and their aliases).

        - True: the learned widths are kept where they lower the
          leave-one-out error of the isotropic choice. Needs ``cv=None``.
        - ``"auto"``: they are kept only where, in addition, the procedure
          that learns them beats the isotropic selection out of fold: five
          shuffled folds (a fixed seed) or, with a K-fold ``cv``, its
          splits; on each training part the isotropic bandwidth is selected
          by exact leave-one-out and the widths learned from it, and the
          out-of-fold mean squared errors of both are compared.
        - False: one isotropic bandwidth.

        See the Notes for the bounds and the guard against overfitting.

    max_iter : int, default=200
        The iteration cap of L-BFGS-B per start when learning per-feature
        widths. A :class:`~sklearn.exceptions.ConvergenceWarning` is issued
        when the winning start stops there.

    degree : {0, 1} or "auto", default="auto"
        The degree of the local polynomial of every candidate and of
        ``best_estimator_`` (see :class:`KernelAttentionRegressor`): ``0``
        pools the values, ``1`` fits a local-linear model around each query;
        ``"auto"`` scores both degrees in the same pass (the moments of
        degree 1 contain those of degree 0) and keeps the better, as
        ``GridSearchCV`` with ``"degree": [0, 1]`` in its grid would; it
        scores degree 0 alone where local-linear fits cannot be scored:
        with no more training points of positive weight than the features
        plus two, or held-out sums of degree 1 larger than a quarter of the
        physical memory (they grow with the square of the features).
        With ``degree=1`` the held-out predictions are those of the
        local-linear fit without the held-out points, with the fitted
        estimator's minimum-norm slope on rank-deficient local designs (such
        as full one-hot encodings), and a held-out point whose local design
        determines no slope (rank 0) gets the local mean, as the fitted
        estimator's queries do; ``cv_results_["singular_fraction"]`` and
        ``cv_results_["rank_deficient_fraction"]`` report how many, and no
        warning is issued while scoring.

    on_empty : {"nearest", "mean", "nan", "raise"}, default="nearest"
        What a point gets when no other point of positive weight lies in the
        kernel's support (compact kernels), both while scoring and in
        ``best_estimator_``:

        - ``"nearest"``: the value of the nearest other key of positive
          weight (under K-fold: of the training part), ties averaged with
          their weights;
        - ``"mean"``: the weighted mean of the other points' values (under
          K-fold: of the training part);
        - ``"nan"``, ``"raise"``: a candidate that leaves any point with an
          empty neighbourhood is not eligible: its score is NaN and it ranks
          last, as a failing candidate does in ``GridSearchCV``. If no
          candidate is eligible, ``fit`` raises a ``ValueError``.

        Exactly what fitting without the held-out points and predicting them
        would give. ``cv_results_["empty_fraction"]`` reports how many
        predictions fell back.

    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "binned"}, \
            default="auto"
        The algorithm of ``best_estimator_`` (see
        :class:`KernelAttentionRegressor`). Scoring pools every pair, except
        on the binned path: with ``"binned"``, or with ``"auto"`` where
        :class:`KernelAttentionRegressor` would pick it at the smallest
        candidate width of every kernel (one or two continuous features, at
        least 100 000 rows, that width resolved by the default grid), the
        rows are binned once onto a grid resolving the smallest width and
        each candidate costs one FFT convolution (see the user guide's page
        on the binned path for the leave-one-out approximation);
        ``best_estimator_`` is then fitted with ``algorithm="binned"``. It
        scores fixed isotropic widths: ``"binned"`` refuses categorical
        features, more than two features, explicit ``n_neighbors``,
        ``per_feature`` other than False and ``scoring="gcv"`` or
        ``"aicc"`` with a ``ValueError``, and ``n_neighbors="auto"`` then
        scores no adaptive candidate; ``"auto"`` scores those exactly.

    n_jobs : int, default=None
        Threads over blocks of points while scoring (``None`` means 1 unless
        in a :func:`joblib.parallel_config` context), and the ``n_jobs`` of
        ``best_estimator_`` (whose ``None`` runs as many threads as BLAS
        would use: see :class:`KernelAttentionRegressor`). BLAS runs one
        thread while scoring. The scores do not depend on it beyond rounding.

    verbose : int, default=0
        How much ``fit`` prints: 0 nothing; 1 the size of the search
        (``"Fitting 5 folds for each of 30 candidates, totalling 150
        fits"``, like :class:`~sklearn.model_selection.GridSearchCV`), its
        phases and the selected candidate; 2 also the best bandwidth of each
        kernel; 3 also the score of every candidate.

    categorical_features : array-like of {bool, int, str} or "from_dtype", \
            default=None
        The unordered categorical features, as for
        :class:`KernelAttentionRegressor`: they enter the weights through
        the Li-Racine kernel of weight ``lambda`` for a key of another
        category, and the bandwidths apply to the other features.

    categorical_bandwidths : array-like of shape (n_lambdas,), \
            default=(0.0, 0.02, 0.1, 0.3, 0.6, 1.0)
        The values of ``lambda`` in [0, 1] to choose from, one shared by
        every categorical feature: every one is crossed with every kernel and
        bandwidth and scored by the same exact leave-one-out or K-fold
        predictions (each held-out point against every allowed key, with the
        categorical factor in its weights). Unused without categorical
        features. With ``per_feature=True``, one ``lambda_j`` in [1e-3, 1]
        per categorical feature is then learned together with one width per
        continuous feature, by L-BFGS-B on the leave-one-out squared error
        with its analytic gradient, from the selected candidate; they
        replace it only where they lower its leave-one-out error, and
        ``categorical_bandwidth_`` is then an array.

    n_neighbors : int, array-like of int, "auto" or None, default="auto"
        Neighbour counts of adaptive-width candidates (see
        :class:`KernelAttentionRegressor`'s ``n_neighbors``): each kernel
        with each count, at the bandwidth multiplier 1.0 (a point's width is
        the distance to its ``k``-th nearest key), scored by the same exact
        leave-one-out or K-fold as the fixed widths and alongside them
        (``bandwidths=None`` scores them alone). Under leave-one-out a
        point's own key is not its neighbour: its width is the distance to
        its ``k``-th nearest other point, as refitting without it gives;
        under K-fold the neighbours are the training points of the split.
        Rows of weight zero are never neighbours. Each count must not
        exceed the training points of positive weight of any held-out fit
        (``ValueError``). Not combined with ``per_feature=True``
        (``ValueError``). The kernel matrix of adaptive widths is not
        symmetric: these candidates are scored row by row, from exact
        squared distances, in batches within ``working_memory`` shared by
        the ``n_jobs`` threads, about the cost of pooling every point once
        per candidate (:math:`O(n^2 d)`). ``"auto"``: the counts 5, 10, 20,
        40 and 80 that every held-out fit can hold (at most its training
        points of positive weight), none with categorical features or
        ``per_feature=True``; None: fixed widths only.

    Attributes
    ----------
    kernel_ : str
        The selected kernel.

    bandwidth_ : float or ndarray of shape (n_features,)
        The selected bandwidth; per-feature widths when they were kept
        (``per_feature_``).

    degree_ : int
        The selected degree: ``degree``, or with ``degree="auto"`` that of
        the best candidate.

    per_feature_ : bool
        Whether learned per-feature widths were kept.

    per_feature_scores_ : dict or None
        With ``per_feature="auto"``, the out-of-fold mean squared errors of
        the guard, ``{"isotropic": ..., "per_feature": ...}``; None when the
        guard did not run (``per_feature`` not ``"auto"``, or learned widths
        that did not lower the leave-one-out error).

    best_score_ : float
        The score of the selected model: ``mean_test_score`` of the selected
        candidate, or with kept per-feature widths the score of their
        leave-one-out predictions (``cv=None``) or the mean split score of
        the guard's out-of-fold predictions (K-fold ``cv``).

    n_neighbors_ : int or None
        The neighbour count of the selected candidate when it is adaptive,
        None when its width is fixed.

    best_index_ : int
        Index of the selected isotropic candidate in ``cv_results_``.

    best_params_ : dict
        ``{"kernel": ..., "bandwidth": ...}`` of that candidate, with
        ``"degree"`` under ``degree="auto"``, ``"categorical_bandwidth"``
        with categorical features, and ``"n_neighbors"`` when it is adaptive
        (then ``"bandwidth"`` is the multiplier 1.0).

    cv_results_ : dict of ndarrays
        One entry per candidate, in the order of
        ``GridSearchCV(param_grid={"kernel": ..., "bandwidth": ...})``
        (with ``"degree": [0, 1]`` for ``degree="auto"``, and over the
        extended grid when the automatic grid was extended):
        ``param_kernel``, ``param_bandwidth`` (``param_degree``), ``params``,
        ``mean_test_score``, ``rank_test_score`` and ``empty_fraction`` (the
        fraction of the held-out predictions that had an empty neighbourhood
        and fell back to ``on_empty``). Under leave-one-out also ``loo_mse``,
        the sample-weighted leave-one-out mean squared error (averaged over
        the outputs); under K-fold also ``split{k}_test_score`` and
        ``std_test_score``. With ``degree=1`` also ``singular_fraction``,
        the fraction of the held-out predictions of positive pooled weight
        whose local design determined no slope (rank 0) and that fell back
        to the local mean, and ``rank_deficient_fraction``, the fraction
        whose local design was rank-deficient but of positive rank (a
        minimum-norm slope along the directions it determines); both are 0
        for the candidates of degree 0 under ``degree="auto"``. With
        ``scoring="gcv"`` or ``"aicc"`` also ``effective_df``, ``gcv`` and
        ``aicc`` of every candidate fitted on all the data.
        With ``n_neighbors``, the adaptive candidates follow the
        fixed ones, in the order of
        ``ParameterGrid({"kernel": ..., "n_neighbors": ...})`` (with
        ``"degree"`` under ``degree="auto"``), and
        ``param_n_neighbors`` is a masked array, masked for the fixed
        candidates (as ``GridSearchCV`` masks the parameters a candidate
        does not have); their ``param_bandwidth`` is 1.0.

    best_estimator_ : KernelAttentionRegressor
        The selected model refitted on all the data.

    effective_df_ : float
        The effective degrees of freedom of ``best_estimator_``: the trace
        of its smoother matrix on the training data, the sum of each
        training row's own normalised weight in its own fit (0 for rows of
        weight zero). See
        :meth:`KernelAttentionRegressor.smoother_diagnostics`. Computed on
        first access (one pass over the pairs of training keys, within
        ``working_memory``), or known from the search with
        ``scoring="gcv"`` or ``"aicc"``.

    categorical_bandwidth_ : float or ndarray of shape (n_categorical_features,)
        With categorical features, the selected ``lambda`` (one per feature
        when learned with ``per_feature=True``); the candidates'
        are ``cv_results_["param_categorical_bandwidth"]`` (the slowest
        varying parameter of ``cv_results_``).

    is_categorical_ : ndarray of bool of shape (n_features,) or None
        Which features are categorical; None when none is.

    categories_ : list of ndarray
        The categories of each categorical feature, sorted.

    n_iter_ : int
        With ``per_feature``, the L-BFGS-B iterations of the start that
        gave the learned widths.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when ``X`` has
        feature names that are all strings.

    See Also
    --------
    KernelAttentionRegressor : The estimator whose parameters are selected.
    sklearn.model_selection.GridSearchCV : Refits for every candidate and split.
    sklearn.linear_model.RidgeCV : Efficient leave-one-out for ridge regression.

    Notes
    -----
    Leave-one-out and K-fold scoring cost one pass over the ``n (n - 1) / 2``
    pairs of points, in cache-sized blocks whose squared distances are
    reused for every candidate; each block is pooled for both of its sides.
    Memory beyond the data is a few blocks and the pooled sums of every
    candidate; the points that fall back to ``on_empty`` and those whose
    weights underflowed are recomputed in batches of rows within
    scikit-learn's ``working_memory``, as are the per-feature widths. Scores
    agree with refitting without the held-out points to
    rounding (about 1e-14 relative).

    With ``degree=1`` the pass pools the weighted moments
    :math:`[k, k k^T, y, k y^T, y^2, 1]` of the keys and values instead of
    :math:`[y, 1]`: :math:`(d + 1)(d + 2) / 2 + (d + 2) p` columns for
    :math:`d` features and :math:`p` outputs (6 for one feature and one
    output, 78 for ten), which multiplies the pooling products and the
    memory of the pooled sums, ``8 n`` bytes per column and candidate (per
    thread), by that over :math:`p + 1`; then one :math:`d \\times d`
    symmetric eigenproblem per held-out point and candidate solves its fit
    around the point, exactly as :class:`KernelAttentionRegressor` does
    (same rank threshold, for the key count and key mean of the fit
    without the point). This suits the few features that local-linear fits
    are used on. The pooled sums are the result of the pass and are not
    bounded by ``working_memory``: a search whose sums (with a copy per
    thread) exceed the physical memory is refused with a ``MemoryError``
    naming their size, before any work. A nearly singular local design
    (its weight carried by barely more than :math:`d` keys, or by keys whose
    weights span many orders of magnitude) amplifies rounding in both
    computations alike, so that their predictions then agree only to the
    design's conditioning.

    Sample weights: under leave-one-out a point's prediction pools the other
    points with their weights, and the scores weigh each point's error by its
    weight. Under K-fold the training part of a split pools with its weights
    and the split's scorer is called with the held-out weights
    (``scorer(estimator, X_test, y_test, sample_weight=w_test)``), which is
    ``GridSearchCV`` with metadata routing of ``sample_weight`` to both the
    estimator's ``fit`` and the scorer; a callable ``scoring`` must then
    accept ``sample_weight``. An integer weight is not the same as repeated
    rows: leave-one-out removes a point's whole weight, and K-fold splits the
    rows. The weights are first divided by a power of two near the largest,
    which is exact and keeps every sum finite: scorers that normalise the
    weights, as scikit-learn's do, score the same. ``best_estimator_`` is
    fitted with the weights as given.

    Per-feature widths (``per_feature=True``) minimise
    :math:`\\sum_i w_i \\lVert y_i - \\hat y_{-i}\\rVert^2`, where
    :math:`\\hat y_{-i}` pools every point but :math:`i`; without the
    self-term a zero width cannot win. The log width of feature :math:`j` is
    bounded to :math:`[\\log(10^{-3} s_j), \\log(10^3 s_j)]`, :math:`s_j` the
    feature's weighted standard deviation (1 for a constant feature): a width
    of a thousand spreads makes a feature irrelevant. The three starts are the
    best isotropic bandwidth, the same scaled per feature by :math:`s_j` over
    their geometric mean, and twice the best isotropic bandwidth (with one
    feature, the first only: the grid has scanned the curve; a start within
    10% of an earlier one in every width is dropped); the start with the
    smallest leave-one-out error wins. Learned widths are accepted
    only where they lower the leave-one-out error of the isotropic choice
    and, with ``per_feature="auto"``, where the guard finds them better out
    of fold: the selection of the isotropic bandwidth and the learning of
    the widths are both repeated on each training part of five shuffled
    folds (a fixed seed; the splits of ``cv`` under K-fold) and judged on
    its held-out part, cross-validation of the whole procedure as in nested
    cross-validation [2]_. It costs about five more selections and
    learnings on 80% of the data each. With ``degree=1`` the gradient of
    the held-out intercept :math:`b_i = e_1^T A_i^{-1} U_i^T W_i y` is
    :math:`e_1^T A_i^{-1} U_i^T dW_i r_i`, :math:`r_i` the residuals of the
    local fit; a held-out fit with a singular design gets the local mean.

    The automatic grid is extended past the edge of the best candidate
    (five bandwidths of its ratio, only they scored) at most four times,
    until the best is interior, and never beyond ten times its ends: below
    a tenth of the median nearest-neighbour distance a point pools
    essentially its nearest neighbour alone, and above ten times the grid's
    top every weight is within 1% of the others (the global mean, or the
    linear regression under ``degree=1``). It also stops when the new
    candidates score as the edge did or all fall back to ``on_empty``.

    References
    ----------
    .. [1] P. Hall, J. Racine and Q. Li, "Cross-validation and the estimation
       of conditional probability densities", Journal of the American
       Statistical Association 99 (2004).
    .. [2] S. Varma and R. Simon, "Bias in error estimation when using
       cross-validation for model selection", BMC Bioinformatics 7 (2006).
    .. [3] P. Craven and G. Wahba, "Smoothing noisy data with spline
       functions", Numerische Mathematik 31 (1979).
    .. [4] C. M. Hurvich, J. S. Simonoff and C.-L. Tsai, "Smoothing parameter
       selection in nonparametric regression using an improved Akaike
       information criterion", Journal of the Royal Statistical Society B 60
       (1998).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_kernelpool import KernelAttentionRegressorCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 5, size=(100, 1))
    >>> y = 2 * np.sin(X[:, 0]) + X[:, 0] + rng.normal(scale=0.3, size=100)
    >>> reg = KernelAttentionRegressorCV(
    ...     bandwidths=[0.05, 0.2, 1.0], degree=0, n_neighbors=None
    ... ).fit(X, y)
    >>> reg.bandwidth_
    0.2
    >>> reg.cv_results_["rank_test_score"]
    array([2, 1, 3], dtype=int32)
    >>> local_linear = reg.set_params(degree=1).fit(X, y)
    >>> local_linear.bandwidth_, local_linear.best_estimator_.degree
    (0.2, 1)
    >>> local_linear.cv_results_["singular_fraction"]
    array([0., 0., 0.])
    >>> local_linear.cv_results_["rank_deficient_fraction"]
    array([0., 0., 0.])
    """

    _parameter_constraints: dict = {
        "kernels": [StrOptions(set(KERNELS)), "array-like"],
        "bandwidths": [
            Interval(Integral, 1, None, closed="left"),
            "array-like",
            None,
        ],
        "cv": ["cv_object"],
        "scoring": [
            StrOptions(set(get_scorer_names()) | set(SMOOTHER_CRITERIA)),
            callable,
            None,
        ],
        "per_feature": ["boolean", StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "degree": [Interval(Integral, 0, 1, closed="both"), StrOptions({"auto"})],
        "on_empty": [StrOptions(set(ON_EMPTY))],
        "algorithm": [StrOptions(set(ALGORITHMS))],
        "n_jobs": N_JOBS_CONSTRAINT,
        "verbose": ["verbose"],
        "categorical_features": CATEGORICAL_CONSTRAINTS["categorical_features"],
        "categorical_bandwidths": ["array-like"],
        "n_neighbors": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
            "array-like",
            None,
        ],
    }

    def __init__(
        self,
        kernels=("gaussian",),
        bandwidths=30,
        *,
        cv=None,
        scoring=None,
        per_feature=False,
        max_iter=200,
        degree="auto",
        on_empty="nearest",
        algorithm="auto",
        n_jobs=None,
        verbose=0,
        categorical_features=None,
        categorical_bandwidths=(0.0, 0.02, 0.1, 0.3, 0.6, 1.0),
        n_neighbors="auto",
    ):
        self.kernels = kernels
        self.bandwidths = bandwidths
        self.cv = cv
        self.scoring = scoring
        self.per_feature = per_feature
        self.max_iter = max_iter
        self.degree = degree
        self.on_empty = on_empty
        self.algorithm = algorithm
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.categorical_features = categorical_features
        self.categorical_bandwidths = categorical_bandwidths
        self.n_neighbors = n_neighbors

    # -- parameters ----------------------------------------------------------
    def _kernel_names(self):
        names = [self.kernels] if isinstance(self.kernels, str) else self.kernels
        names = list(np.asarray(names, dtype=object).ravel())
        unknown = [n for n in names if not isinstance(n, str) or n not in KERNELS]
        if not names or unknown:
            raise ValueError(
                "kernels must be a kernel name or a non-empty sequence of kernel "
                f"names among {sorted(KERNELS)}; got {self.kernels!r}."
            )
        if self._per_feature_mode():
            flat = [n for n in names if KERNELS[n].log_function is None]
            if flat:
                raise ValueError(
                    "per_feature=True needs kernels with a log form (gaussian, "
                    "exponential, laplacian, cauchy), whose leave-one-out error "
                    f"is differentiable in the widths; got {flat}."
                )
        return names

    def _neighbor_counts(self, categorical=False):
        """The adaptive candidates' neighbour counts, a list (maybe empty).

        ``"auto"`` gives :data:`AUTO_NEIGHBORS`, or none where adaptive
        candidates do not apply (``categorical`` features, or
        ``per_feature=True``); :meth:`fit` then keeps those that every
        held-out fit can hold.
        """
        if isinstance(self.n_neighbors, str):
            if categorical or self._per_feature_mode() is True:
                counts = []
            else:
                counts = list(AUTO_NEIGHBORS)
        elif self.n_neighbors is None:
            counts = []
        elif isinstance(self.n_neighbors, Integral):
            counts = [self.n_neighbors]
        else:
            counts = list(np.asarray(self.n_neighbors, dtype=object).ravel())
            if not counts or not all(
                isinstance(k, Integral) and not isinstance(k, bool) and k >= 1
                for k in counts
            ):
                raise ValueError(
                    "n_neighbors must be None, an int >= 1 or a non-empty "
                    f"sequence of ints >= 1; got {self.n_neighbors!r}."
                )
        if self.bandwidths is None and not counts:
            raise ValueError(
                "bandwidths=None scores adaptive-width candidates only: it "
                "needs n_neighbors (an int or a list of ints); got "
                "n_neighbors=None."
            )
        if counts and self._per_feature_mode() is True:
            raise ValueError(
                "per_feature=True learns fixed per-feature widths and cannot be "
                f"combined with n_neighbors={self.n_neighbors!r}; use "
                "per_feature=False to score adaptive widths."
            )
        return [int(k) for k in counts]

    def _smoother_scoring(self):
        """Whether ``scoring`` is a criterion of the in-sample smoother."""
        return isinstance(self.scoring, str) and self.scoring in SMOOTHER_CRITERIA

    def _check_smoother_scoring(self):
        """Refuse what ``scoring="gcv"`` and ``"aicc"`` do not apply to."""
        if not self._smoother_scoring():
            return
        if self.cv is not None:
            raise ValueError(
                f"scoring={self.scoring!r} is a criterion of the fit on the whole "
                "training set, computed from the trace of its smoother matrix: "
                f"it takes no cross-validation splits; got cv={self.cv!r}. Use "
                "cv=None."
            )
        if self._per_feature_mode() is not False:
            raise ValueError(
                f"scoring={self.scoring!r} selects among the isotropic and "
                "adaptive candidates; per-feature widths are learned on the "
                "leave-one-out error. Use per_feature=False, or scoring=None; "
                f"got per_feature={self.per_feature!r}."
            )

    def _smoother_criteria(self, params, results):
        """Score the candidates by their in-sample criterion.

        ``effective_df``, ``gcv`` and ``aicc`` of each candidate fitted on all
        the training data are in ``results``, computed with its
        leave-one-out predictions (:meth:`_in_sample`); the negated
        criterion replaces ``mean_test_score``. Only with ``scoring="gcv"``
        or ``"aicc"``.
        """
        if self._smoother_scoring():
            results["mean_test_score"] = -results[self.scoring]
        return results

    def _per_feature_mode(self):
        """``per_feature`` as ``"auto"``, True or False."""
        if isinstance(self.per_feature, str):
            return self.per_feature
        return bool(self.per_feature)

    def _bandwidth_grid(self, X):
        if self.bandwidths is None:
            return np.zeros(0)
        if isinstance(self.bandwidths, Integral) and not isinstance(
            self.bandwidths, bool
        ):
            return bandwidth_grid(X, int(self.bandwidths))
        h = np.asarray(self.bandwidths)
        if (
            h.ndim != 1
            or h.size == 0
            or not np.issubdtype(h.dtype, np.number)
            or np.iscomplexobj(h)
        ):
            raise ValueError(
                "bandwidths must be an int >= 1 or a non-empty 1-D array-like of "
                f"floats > 0; got {self.bandwidths!r}."
            )
        h = h.astype(np.float64)
        if not np.all(np.isfinite(h) & (h > 0)):
            raise ValueError(
                f"Every bandwidth must be a finite float > 0; got {h.tolist()}."
            )
        return h

    def _scorer(self, weighted):
        if self.scoring is None or self._smoother_scoring():
            return None
        scorer = check_scoring(self, scoring=self.scoring)
        problem = _not_a_regression_scorer(scorer)
        if problem:
            raise ValueError(
                f"scoring={self.scoring!r} {problem}; KernelAttentionRegressorCV "
                "is a regressor and needs a regression scorer, such as 'r2', "
                "'neg_mean_squared_error' or 'neg_mean_absolute_error', or None "
                "(the negative mean squared error under leave-one-out, R^2 "
                "under K-fold)."
            )
        if weighted and not _accepts_sample_weight(scorer):
            raise ValueError(
                f"With sample_weight, scoring={self.scoring!r} must accept a "
                "sample_weight keyword argument: the held-out errors are "
                "weighted. Use a weighted metric, or no sample_weight."
            )
        return scorer

    def _check_small_folds(self, splits, scorer, X, y, sample_weight):
        """Refuse test folds of one sample that the scorer cannot score.

        A test fold of one sample (``KFold`` with as many folds as samples,
        ``LeaveOneOut``) is scored on that sample alone, where R^2 (the
        default under K-fold) and other scores relative to the held-out
        spread are undefined. The scorer is tried on the first such fold with
        exact and with wrong predictions: an ``UndefinedMetricWarning``, a
        non-finite score or the same score for both refuses it. ``cv=None``
        is the exact leave-one-out, scored over all the held-out predictions
        at once.
        """
        sizes = [len(test) for _, test in splits]
        if min(sizes, default=1) == 0:
            raise ValueError(
                f"cv={self.cv!r} gives a split with an empty test set; every "
                "split must hold out at least one sample."
            )
        small = [test for _, test in splits if len(test) < 2]
        if not small:
            return
        test = small[0]
        if scorer is None:
            scorer = check_scoring(self, scoring=None)
        w_test = None if sample_weight is None else sample_weight[test]
        exact = y[test].astype(np.float64)
        scores = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UndefinedMetricWarning)
            for predictions in (exact, exact + 1.0 + np.abs(exact)):
                scores.append(
                    self._score(
                        scorer,
                        predictions,
                        X[test],
                        y[test],
                        w_test,
                        False,
                        w_test is not None,
                    )
                )
        undefined = any(issubclass(w.category, UndefinedMetricWarning) for w in caught)
        if undefined or not np.all(np.isfinite(scores)) or scores[0] == scores[1]:
            name = "None (R^2)" if self.scoring is None else repr(self.scoring)
            raise ValueError(
                f"cv={self.cv!r} holds out a single sample in {len(small)} of "
                f"its {len(splits)} splits, where scoring={name} is undefined "
                "or cannot tell predictions apart. For leave-one-out use "
                "cv=None, the exact leave-one-out scored over all the held-out "
                "predictions at once; or use fewer folds."
            )

    # -- fit -------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Score every candidate, select the best and refit it on all the data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training keys. SciPy sparse matrices and arrays are made dense
            once and pooled by brute force: ``algorithm="auto"`` picks it,
            and ``"kd_tree"`` or ``"ball_tree"`` raise a ``ValueError``.

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Training values.

        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the training rows, not all zero. See the
            Notes for their role in the scores.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        X_given = X
        X, y = validate_fit_data(self, X, y, multi_output=True, y_numeric=True)
        # The scores need the distances of every pair: sparse keys are made
        # dense for them; the refit takes them as given.
        keys, X = X, dense_keys(X)
        X, codes, lambdas = self._split_categorical(X)
        # The scores square the distances of the data as it is, and the errors.
        check_squares(X, "X", "squared distances")
        check_squares(y.reshape(X.shape[0], -1), "y", "squared errors")
        sample_weight = given_weight = validate_sample_weight(sample_weight, X)
        if sample_weight is not None:
            # Pools and scores are ratios of weighted sums: weights divided by
            # a power of two near their largest give the same bits, and sums
            # of them cannot overflow. Weights that would round to zero next
            # to the largest are refused, as KernelAttentionRegressor does.
            positive = sample_weight > 0
            relative = np.zeros_like(sample_weight)
            relative[positive] = relative_weights(sample_weight[positive], np.float64)
            sample_weight = relative
        names = self._kernel_names()
        counts = self._neighbor_counts(categorical=codes is not None)
        if counts and codes is not None:
            raise ValueError(
                "n_neighbors (adaptive-width candidates) cannot be combined with "
                "categorical_features in KernelAttentionRegressorCV; got "
                f"n_neighbors={self.n_neighbors!r}. Score fixed widths with "
                "categorical features (n_neighbors=None), or fit "
                "KernelAttentionRegressor(n_neighbors=..., "
                "categorical_features=...) directly."
            )
        self._check_smoother_scoring()
        if self._per_feature_mode() is True and self.cv is not None:
            raise ValueError(
                "per_feature=True learns the widths on the leave-one-out error "
                "and scores them there: it needs cv=None; got "
                f"cv={self.cv!r}. per_feature='auto' judges them on the splits "
                "of cv."
            )
        weights = (
            np.ones(X.shape[0]) if sample_weight is None else sample_weight
        ).astype(np.float64)
        positive = weights > 0
        if self.cv is None and np.count_nonzero(positive) < 2:
            raise ValueError(
                "Leave-one-out needs at least two samples of positive weight; "
                f"got {np.count_nonzero(positive)} sample(s)."
            )
        X64 = X.astype(np.float64)
        Y = y.reshape(X.shape[0], -1).astype(np.float64)
        grid = self._bandwidth_grid(X64[positive])
        if len(grid):
            _check_grid(X, grid, automatic=isinstance(self.bandwidths, Integral))
        weighted = sample_weight is not None
        scorer = self._scorer(weighted)
        # The splits once: a generator given as cv can be consumed only once.
        splits = None
        if self.cv is not None:
            cv = check_cv(self.cv, y, classifier=False)
            splits = [(np.asarray(tr), np.asarray(te)) for tr, te in cv.split(X, y)]
            self._check_small_folds(splits, scorer, X, y, sample_weight)
        if isinstance(self.n_neighbors, str):
            # The counts that every held-out fit can hold: those of at most
            # the training points of positive weight of the smallest fit.
            if splits is None:
                available = np.count_nonzero(positive) - 1
            else:
                available = min(np.count_nonzero(positive[tr]) for tr, _ in splits)
            counts = [k for k in counts if k <= available]
            if self.bandwidths is None and not counts:
                raise ValueError(
                    "bandwidths=None scores adaptive-width candidates only, and "
                    "n_neighbors='auto' leaves none: the smallest held-out fit "
                    f"holds {available} point(s) of positive weight, fewer than "
                    f"{AUTO_NEIGHBORS[0]}. Pass bandwidths."
                )

        self._binned = self._binned_scoring(X64[positive], names, grid, codes, counts)
        if self._binned:
            counts = []
        automatic = isinstance(self.bandwidths, Integral)
        if self._placeholder:
            degrees = [0]  # categorical features only: no slope
        elif self.degree == "auto":
            n_candidates = len(names) * (len(grid) * len(lambdas) + len(counts))
            degrees = [0, 1]
            if not _local_linear_fits(X64[positive], Y, n_candidates, self.n_jobs):
                degrees = [0]
                self._say(
                    "Scoring degree 0 alone: local-linear fits of "
                    f"{X.shape[1]} features need more points or memory"
                )
        else:
            degrees = [self.degree]
        self._say_search(X, names, grid, splits, len(degrees), counts, len(lambdas))
        data = (X, X64, y, Y, weights, sample_weight, scorer, weighted, splits)
        self._categorical = codes, lambdas
        params, results, capped = [], None, False
        if len(grid):
            params, results = self._score_grid(data, names, degrees, grid)
            if automatic:
                params, results, capped = self._extend_grid(
                    data, names, degrees, params, results
                )
        fixed_grid = np.unique(results["param_bandwidth"]) if len(grid) else grid
        if counts:
            n_fixed = len(params)
            new_params, new_results = self._score_adaptive(data, names, degrees, counts)
            if results is None:
                params, results = new_params, new_results
            else:
                params = params + new_params
                results = {
                    key: (
                        params
                        if key == "params"
                        else np.concatenate([values, new_results[key]])
                    )
                    for key, values in results.items()
                }
            results["param_n_neighbors"] = np.ma.MaskedArray(
                [p.get("n_neighbors", 0) for p in params],
                mask=np.arange(len(params)) < n_fixed,
                dtype=object,
            )
        results["rank_test_score"] = _rank(results["mean_test_score"])
        self.cv_results_ = results
        if np.all(np.isnan(results["mean_test_score"])):
            raise ValueError(
                "No candidate could be scored: every one left some held-out point "
                f"with an empty neighbourhood under on_empty={self.on_empty!r}, "
                "or its scores were not finite. Use larger bandwidths or "
                "on_empty='nearest'."
            )
        self.best_index_ = int(np.argmin(results["rank_test_score"]))
        self.best_params_ = dict(params[self.best_index_])
        self.kernel_ = self.best_params_["kernel"]
        self.bandwidth_ = float(self.best_params_["bandwidth"])
        if "categorical_bandwidth" in self.best_params_:
            self.categorical_bandwidth_ = self.best_params_["categorical_bandwidth"]
        self.n_neighbors_ = self.best_params_.get("n_neighbors")
        self.degree_ = int(self.best_params_.get("degree", degrees[0]))
        self.best_score_ = float(results["mean_test_score"][self.best_index_])
        self._say_scores(params, names)
        if self.n_neighbors_ is None and (capped or not automatic):
            self._warn_edge(fixed_grid, automatic)
        self.per_feature_ = False
        self.per_feature_scores_ = None
        mode = self._per_feature_mode()
        if mode is True and codes is not None:
            self._say("Learning per-feature widths and lambdas by leave-one-out")
            self._learn_categorical(X, X64, codes, y, Y, weights, scorer, weighted)
        elif mode and codes is None and self.n_neighbors_ is None:
            self._say("Learning per-feature widths by leave-one-out")
            self._learn_widths(data, fixed_grid)
            if self.per_feature_:
                widths = np.round(self.bandwidth_, 6).tolist()
                self._say(f"Per-feature widths: {widths}")
            else:
                self._say("Kept the isotropic bandwidth")
        extra = {}
        if codes is not None:
            extra = {
                "categorical_features": self.categorical_features,
                "categorical_bandwidth": self.categorical_bandwidth_,
            }
        self._say(f"Refitting the selected candidate on all {X.shape[0]} samples")
        self.best_estimator_ = KernelAttentionRegressor(
            kernel=self.kernel_,
            bandwidth=self.bandwidth_,
            degree=self.degree_,
            on_empty=self.on_empty,
            algorithm="binned" if self._binned else self.algorithm,
            n_jobs=self.n_jobs,
            n_neighbors=self.n_neighbors_,
            **extra,
        ).fit(X_given if extra else keys, y, sample_weight=given_weight)
        # (it rescales the weights itself)
        # effective_df_, computed on first access unless known already.
        self._effective_df = None
        if self._smoother_scoring():
            self._effective_df = float(
                self.cv_results_["effective_df"][self.best_index_]
            )
        return self

    @property
    def effective_df_(self):
        """The effective degrees of freedom of ``best_estimator_``.

        The trace of its smoother matrix on the training data (see
        :meth:`KernelAttentionRegressor.smoother_diagnostics`), computed on
        first access by one pass over the pairs of training keys within
        ``working_memory`` (known from the search with ``scoring="gcv"`` or
        ``"aicc"``), so that ``fit`` does not pay for it.
        """
        check_is_fitted(self)
        if getattr(self, "_effective_df", None) is None:
            self._effective_df = _quiet_diagnostics(self.best_estimator_).effective_df
        return self._effective_df

    def _learn_categorical(self, X, X64, codes, y, Y, weights, scorer, weighted):
        """Per-feature widths and lambdas (:mod:`._categorical_widths`), kept
        where they lower the leave-one-out error of the selected candidate."""
        kernel = KERNELS[self.kernel_]
        lambdas = np.full(codes.shape[1], self.categorical_bandwidth_)
        widths, learned, n_iter, loo_mse = _categorical_widths.learn(
            X64, codes, Y, weights, kernel, self.bandwidth_, lambdas
        )
        self.n_iter_ = n_iter
        if not loo_mse < self.cv_results_["loo_mse"][self.best_index_]:
            return
        self.bandwidth_ = widths[0] if self._placeholder else widths
        self.categorical_bandwidth_ = learned
        self.per_feature_ = True
        if scorer is None:
            self.best_score_ = -float(loo_mse)
            return
        predictions = _categorical_widths.loo_predictions(
            X64, codes, Y, weights, kernel, widths, learned
        )
        self.best_score_ = self._score(
            scorer, predictions, X, y, weights, False, weighted
        )

    def _binned_scoring(self, X, names, grid, codes, counts):
        """Whether the candidates are scored on the binned path.

        ``algorithm="binned"`` asks for it and refuses, naming them, the
        options it cannot score; ``"auto"`` picks it where the refit would
        (:func:`._algorithm.prefers_binned`, at the smallest candidate width
        of every kernel) and nothing else forbids it. ``X`` holds the keys
        of positive weight.
        """
        explicit_counts = self.n_neighbors is not None and not isinstance(
            self.n_neighbors, str
        )
        if self.algorithm == "binned":
            problems = []
            if codes is not None:
                problems.append("categorical features")
            if X.shape[1] > 2:
                problems.append(f"{X.shape[1]} features")
            if explicit_counts or self.bandwidths is None:
                problems.append(
                    f"n_neighbors={self.n_neighbors!r} adaptive widths (use "
                    "n_neighbors=None or 'auto', which scores none on this path)"
                )
            if self._per_feature_mode() is not False:
                problems.append(
                    f"per_feature={self.per_feature!r} (per-feature widths are "
                    "learned on the exact leave-one-out error)"
                )
            if self._smoother_scoring():
                problems.append(
                    f"scoring={self.scoring!r} (the trace of the smoother "
                    "matrix is not computed on the binned path)"
                )
            if problems:
                raise ValueError(
                    "algorithm='binned' scores fixed isotropic widths of one or "
                    "two continuous features; "
                    "it cannot take " + "; ".join(problems) + ". Use "
                    "algorithm='auto' or 'brute'."
                )
            return True
        if (
            self.algorithm != "auto"
            or codes is not None
            or not len(grid)
            or explicit_counts
            or self._per_feature_mode() is not False
            or self._smoother_scoring()
        ):
            return False
        span = key_span(X)
        return all(
            prefers_binned(X.shape[0], X.shape[1], grid.min(), span, KERNELS[name])
            for name in names
        )

    def _split_categorical(self, X):
        """The continuous features, the category codes and the lambdas to
        score ([None] without categorical features)."""
        self._placeholder = ()
        if self.is_categorical_ is None:
            return X, None, [None]
        lambdas = np.asarray(self.categorical_bandwidths, dtype=object)
        try:
            lambdas = lambdas.astype(np.float64)
        except (TypeError, ValueError):
            lambdas = None
        if (
            lambdas is None
            or lambdas.ndim != 1
            or lambdas.size == 0
            or not np.all((lambdas >= 0) & (lambdas <= 1))
        ):
            raise ValueError(
                "categorical_bandwidths must be a non-empty 1-D array-like of "
                f"floats in [0, 1]; got {self.categorical_bandwidths!r}."
            )
        n_categorical = int(np.count_nonzero(self.is_categorical_))
        codes = X[:, X.shape[1] - n_categorical :].astype(np.intp)
        X = X[:, : X.shape[1] - n_categorical]
        if X.shape[1] == 0:
            # No continuous feature: one constant one, whose kernel factor is
            # the same for every pair; the bandwidth is then unused.
            X = np.zeros((X.shape[0], 1), dtype=X.dtype)
            self._placeholder = (0,)
        return X, codes, [float(lam) for lam in lambdas]

    def _score_grid(self, data, names, degrees, grid):
        """Score every (bandwidth, degree, kernel) candidate of ``grid``, with
        every categorical bandwidth of ``self._categorical``.

        Returns the candidates in ``GridSearchCV``'s order and their
        results (without ranks).
        """
        X, X64, y, Y, weights, sample_weight, scorer, weighted, splits = data
        codes, lambdas = self._categorical
        space = {"kernel": names, "bandwidth": list(grid)}
        if len(degrees) > 1:
            space["degree"] = degrees
        grid_params = list(ParameterGrid(space))
        kernels = [KERNELS[n] for n in names]
        params, every = [], []
        for lam in lambdas:
            if self._binned:
                held_out = BinnedHeldOut(
                    X64, Y, weights, kernels, grid, degree=max(degrees)
                )
            elif lam is None:
                held_out = HeldOut(
                    X64, Y, weights, kernels, grid, self.n_jobs, degree=max(degrees)
                )
            else:
                held_out = CategoricalHeldOut(
                    X64,
                    codes,
                    np.full(codes.shape[1], lam),
                    Y,
                    weights,
                    kernels,
                    grid,
                    self.n_jobs,
                    degree=max(degrees),
                )
            every.append(self._run(held_out, data, grid_params, degrees))
            if lam is None:
                params += grid_params
            else:
                params += [{**p, "categorical_bandwidth": lam} for p in grid_params]
        results = {key: np.concatenate([r[key] for r in every]) for key in every[0]}
        results["param_kernel"] = np.array([p["kernel"] for p in params], dtype=object)
        results["param_bandwidth"] = np.array([p["bandwidth"] for p in params])
        if len(degrees) > 1:
            results["param_degree"] = np.array(
                [p["degree"] for p in params], dtype=object
            )
        if lambdas != [None]:
            results["param_categorical_bandwidth"] = np.array(
                [p["categorical_bandwidth"] for p in params]
            )
        results["params"] = params
        params, results = _in_grid_order(params, results)
        return params, self._smoother_criteria(params, results)

    def _score_adaptive(self, data, names, degrees, counts):
        """Score every (degree, kernel, n_neighbors) adaptive candidate.

        Returns the candidates in ``ParameterGrid``'s order, at the
        bandwidth multiplier 1.0, and their results (without ranks).
        """
        X, X64, y, Y, weights, sample_weight, scorer, weighted, splits = data
        space = {"kernel": names, "n_neighbors": counts}
        if len(degrees) > 1:
            space["degree"] = degrees
        params = [{"bandwidth": 1.0, **p} for p in ParameterGrid(space)]
        held_out = HeldOut(
            X64,
            Y,
            weights,
            [KERNELS[n] for n in names],
            np.empty(0),
            self.n_jobs,
            degree=max(degrees),
        )
        self._adaptive = AdaptiveHeldOut(held_out, counts)
        try:
            results = self._run(held_out, data, params, degrees)
        finally:
            del self._adaptive
        results["param_kernel"] = np.array([p["kernel"] for p in params], dtype=object)
        results["param_bandwidth"] = np.array([p["bandwidth"] for p in params])
        if len(degrees) > 1:
            results["param_degree"] = np.array(
                [p["degree"] for p in params], dtype=object
            )
        results["params"] = params
        return params, self._smoother_criteria(params, results)

    def _run(self, held_out, data, params, degrees):
        """The leave-one-out or K-fold results of the candidates ``params``."""
        X, X64, y, Y, weights, sample_weight, scorer, weighted, splits = data
        if splits is None:
            return self._loo(held_out, X, y, weights, scorer, weighted, degrees)
        return self._kfold(
            held_out, X, y, sample_weight, scorer, params, splits, degrees
        )

    def _extend_grid(self, data, names, degrees, params, results):
        """Extend the automatic grid past its edge while the best lies there.

        Up to ``_MAX_EXTENSIONS`` times, ``_EXTENSION`` more bandwidths of the
        grid's ratio beyond the edge of the best candidate are scored (only
        them), within ``_REACH`` times beyond the grid's ends: below a tenth
        of the median nearest-neighbour distance a held-out point pools
        essentially its nearest other point alone, and above ten times the
        grid's top (twice the largest distance from the mean) every kernel
        weight is within 1% of the others, so that the fit is the global one
        (the mean, or the linear regression for ``degree=1``). It stops when
        the best candidate is interior, at those limits, when every new
        candidate falls back to ``on_empty`` everywhere, or when the new
        candidates score as the edge did. Returns every scored candidate in
        ``GridSearchCV``'s order over the whole grid, and whether the
        extensions ran out with the best candidate still on an edge.
        """
        X = data[0]
        first = np.unique(results["param_bandwidth"])
        if len(first) < 2:
            return params, results, False
        low, high = first[0] / _REACH, first[-1] * _REACH
        for _ in range(_MAX_EXTENSIONS):
            grid = np.unique(results["param_bandwidth"])
            scores = results["mean_test_score"]
            if np.all(np.isnan(scores)):
                return params, results, False
            best = float(results["param_bandwidth"][int(np.nanargmax(scores))])
            if best == grid[0]:
                ratio = grid[1] / grid[0]
                new = grid[0] / ratio ** np.arange(_EXTENSION, 0, -1)
                new = new[new >= low * (1 - 1e-9)]
            elif best == grid[-1]:
                ratio = grid[-1] / grid[-2]
                new = grid[-1] * ratio ** np.arange(1, _EXTENSION + 1)
                new = new[new <= high * (1 + 1e-9)]
            else:
                return params, results, False
            if not len(new):
                return params, results, False
            try:
                _check_grid(X, new, automatic=True)
            except ValueError:
                return params, results, False
            self._say(
                f"The best bandwidth {best:.6g} is on the edge of the grid: "
                f"scoring {len(new)} more from {new.min():.6g} to {new.max():.6g}"
            )
            new_params, new_results = self._score_grid(data, names, degrees, new)
            edge = float(np.nanmax(scores[results["param_bandwidth"] == best]))
            params, results = _merge(params, results, new_params, new_results)
            new_scores = new_results["mean_test_score"]
            if np.all(new_results["empty_fraction"] == 1.0) or np.allclose(
                new_scores, edge, rtol=1e-12, atol=0.0
            ):
                return params, results, False
        scores = results["mean_test_score"]
        grid = results["param_bandwidth"]
        best = grid[int(np.nanargmax(scores))]
        at_limit = best <= low * (1 + 1e-9) or best >= high * (1 - 1e-9)
        on_edge = best in (grid.min(), grid.max())
        return params, results, bool(on_edge and not at_limit)

    def _warn_edge(self, grid, automatic):
        """Warn when the selected bandwidth is an edge of the scored grid
        (the sorted fixed bandwidths scored)."""
        if len(grid) < 2 or grid[0] < self.bandwidth_ < grid[-1]:
            return
        which = "smallest" if self.bandwidth_ == grid[0] else "largest"
        where = "below" if which == "smallest" else "above"
        if automatic:
            fix = "Pass bandwidths as an array that extends further."
            origin = "automatic bandwidths, after their extension"
        else:
            fix = f"Add bandwidths {where} it."
            origin = "given bandwidths"
        warnings.warn(
            f"The selected bandwidth is the {which} of the {origin} "
            f"({grid[0]:.6g} to {grid[-1]:.6g}): the best bandwidth may lie "
            f"{where} the grid. {fix}",
            BandwidthEdgeWarning,
            stacklevel=3,
        )

    # -- progress ------------------------------------------------------------
    def _say(self, message, level=1):
        if self.verbose >= level:
            print(f"[{type(self).__name__}] {message}")

    def _say_search(self, X, names, grid, splits, n_degrees=1, counts=(), n_lambdas=1):
        n_widths = len(grid) * n_lambdas + len(counts)
        n_candidates = len(names) * n_widths * n_degrees
        what = f"{n_candidates} candidates ({len(names)} kernel(s) x {len(grid)} "
        what += "bandwidths"
        if n_lambdas > 1:
            what += f" x {n_lambdas} categorical bandwidths"
        if n_degrees > 1:
            what += f" x {n_degrees} degrees"
        if counts:
            what += f" + {len(counts)} neighbour counts"
        what += ")"
        if splits is None:
            self._say(
                f"Scoring {what} by leave-one-out over {X.shape[0]} samples, "
                "in one pass over the pairs of points"
            )
        else:
            n_splits = len(splits)
            self._say(
                f"Fitting {n_splits} folds for each of {what}, totalling "
                f"{n_splits * n_candidates} fits, in one pass over the pairs of "
                "points"
            )

    def _say_scores(self, params, names):
        scores = self.cv_results_["mean_test_score"]
        for i, candidate in enumerate(params):
            self._say(
                f"kernel={candidate['kernel']!r}, {_width(candidate)}: "
                f"score={scores[i]:.6g}",
                level=3,
            )
        for name in names:
            mine = [i for i, p in enumerate(params) if p["kernel"] == name]
            if np.all(np.isnan(scores[mine])):
                self._say(f"kernel={name!r}: no eligible bandwidth", level=2)
                continue
            best = mine[int(np.nanargmax(scores[mine]))]
            self._say(
                f"kernel={name!r}: best {_width(params[best], ' ')}, "
                f"score={scores[best]:.6g}",
                level=2,
            )
        self._say(
            f"Selected kernel={self.kernel_!r}, {_width(self.best_params_)}, "
            f"score={self.best_score_:.6g}"
        )

    def _fallback(self, held_out, predictions, empty, queries, allowed_rows):
        """Fill the empty rows of ``predictions`` (candidates, rows, outputs).

        ``queries`` are the indices of the rows among the training points, and
        ``allowed_rows(rows)`` the keys that each of these rows may pool.
        """
        rows = np.flatnonzero(empty.any(axis=0))
        if self.on_empty in ("nan", "raise"):
            return
        # The rows in batches within working_memory: each needs its keys.
        row_bytes = FALLBACK_BYTES_PER_KEY * held_out.X.shape[0]
        for batch in row_batches(len(rows), row_bytes):
            chunk = rows[batch]
            allowed = allowed_rows(chunk)
            if self.on_empty == "nearest":
                values = held_out.nearest_values(queries[chunk], allowed)
            else:
                values = held_out.mean_values(allowed)
            for c in range(predictions.shape[0]):
                hit = empty[c, chunk]
                predictions[c, chunk[hit]] = values[hit]

    def _flat(self, held_out, sums, rows, degrees, groups=None, train=None):
        """Predictions, empty and flagged rows of every fixed-width candidate,
        in ``params`` order (see :meth:`HeldOut.predictions`).

        With two degrees, both come from the same sums (those of degree 1).
        The flags stack the singular and the rank-deficient rows on the last
        axis.
        """
        parts = [
            _stacked_flags(held_out.predictions(sums, rows, groups, train, degree=d))
            for d in degrees
        ]
        flat = []
        for i in range(3):
            # (degrees, kernels, bandwidths, ...) -> ParameterGrid's order:
            # bandwidth, then degree, then kernel.
            stacked = np.stack([part[i] for part in parts])
            stacked = np.moveaxis(stacked, 2, 0)
            flat.append(stacked.reshape(-1, *stacked.shape[3:]))
        return tuple(flat)

    def _held_out(
        self, held_out, rows, degrees, groups=None, train=None, in_sample=False
    ):
        """Held-out predictions, empty and flagged rows of every candidate of
        ``held_out`` (fixed widths) or, while adaptive candidates are scored,
        of those (:meth:`_score_adaptive`), in ``params`` order.

        ``train`` None: every point, excluding its group (its own key under
        leave-one-out when ``groups`` is None); else the ``rows`` held out
        from the ``train`` points. With ``in_sample`` (leave-one-out of fixed
        widths only) also the in-sample summaries of every candidate
        (:meth:`_in_sample`), from the same sums.
        """
        pool = getattr(self, "_adaptive", None)
        if pool is None:
            if train is None:
                sums = held_out.sums_excluding_groups(groups)
            else:
                sums = held_out.sums_split(rows, train)
            flat = self._flat(held_out, sums, rows, degrees, groups, train)
            if in_sample:
                return *flat, self._in_sample(held_out, sums, degrees)
            return flat
        if train is None:
            sums = pool.sums_excluding_groups(groups, in_sample=in_sample)
        else:
            sums = pool.sums_split(rows, train)
        # (degrees, kernels, n_neighbors, ...) is ParameterGrid's order.
        parts = [
            _stacked_flags(pool.predictions(sums, rows, groups, train, degree=d))
            for d in degrees
        ]
        flat = tuple(
            np.stack([part[i] for part in parts]).reshape(-1, *parts[0][i].shape[2:])
            for i in range(3)
        )
        if in_sample:
            return *flat, self._in_sample(pool, sums, degrees, adaptive=True)
        return flat

    def _in_sample(self, held_out, sums, degrees, adaptive=False):
        """``effective_df``, ``gcv`` and ``aicc`` of every candidate of
        ``held_out`` fitted on all the data, in ``params`` order, from the
        leave-one-out pass (:meth:`._loo.HeldOut.in_sample`)."""
        parts = []
        for d in degrees:
            fitted, self_weight = held_out.in_sample(sums, degree=d)
            parts.append(
                in_sample_criteria(held_out.Y, held_out.weights, fitted, self_weight)
            )
        # (degrees, 4, kernels, bandwidths) -> ParameterGrid's order:
        # bandwidth, then degree, then kernel; (degrees, kernels,
        # n_neighbors) is already that of the adaptive candidates.
        order = (1, 0, 2, 3) if adaptive else (1, 3, 0, 2)
        stacked = np.asarray(parts).transpose(order).reshape(4, -1)
        return {"effective_df": stacked[0], "gcv": stacked[2], "aicc": stacked[3]}

    def _loo(self, held_out, X, y, weights, scorer, weighted, degrees):
        n = X.shape[0]
        in_sample = self._smoother_scoring()
        predictions, empty, singular, *summaries = self._held_out(
            held_out, np.arange(n), degrees, in_sample=in_sample
        )

        def others(rows):
            allowed = np.ones((len(rows), n), dtype=bool)
            allowed[np.arange(len(rows)), rows] = False
            return allowed

        self._fallback(held_out, predictions, empty, np.arange(n), others)
        results = self._loo_scores(
            held_out, predictions, empty, X, y, weights, scorer, weighted
        )
        results["empty_fraction"] = empty.mean(axis=1)
        if held_out.degree == 1:
            results["singular_fraction"] = singular[..., 0].mean(axis=1)
            results["rank_deficient_fraction"] = singular[..., 1].mean(axis=1)
        for summary in summaries:
            results.update(summary)
        return results

    def _loo_scores(
        self, held_out, predictions, empty, X, y, weights, scorer, weighted
    ):
        """``mean_test_score`` and ``loo_mse`` of the leave-one-out predictions.

        ``predictions`` (candidates, n, outputs) are those of every point,
        fallbacks included; ``empty`` (candidates, n) the points that fell
        back. A hook: :class:`KernelAttentionClassifierCV` scores them as
        class probabilities.
        """
        errors = np.mean((predictions - held_out.Y[None]) ** 2, axis=2)
        loo_mse = errors @ weights / weights.sum()
        invalid = self.on_empty in ("nan", "raise")
        loo_mse[invalid & empty.any(axis=1)] = np.nan
        if scorer is None:
            scores = -loo_mse
        else:
            scores = np.array(
                [
                    self._score(scorer, pred, X, y, weights, bad, weighted)
                    for pred, bad in zip(predictions, np.isnan(loo_mse), strict=True)
                ]
            )
        return {"mean_test_score": scores, "loo_mse": loo_mse}

    def _split_scores(self, held_out, split, predictions, bad, X, y, w_test, scorer):
        """The score of every candidate on one K-fold split.

        ``split`` is its (train, test) pair, ``predictions`` (candidates,
        n_test, outputs) the held-out predictions of its test points and
        ``bad`` the candidates not eligible on it. A hook:
        :class:`KernelAttentionClassifierCV` scores them as class
        probabilities.
        """
        test = split[1]
        if self.scoring is None and len(test) > 1:
            # The estimator's score, R^2, for every candidate at once.
            scores = _r2_scores(held_out.Y[test], predictions, w_test)
            scores[bad] = np.nan
            return scores
        return np.array(
            [
                self._score(
                    scorer,
                    predictions[c],
                    X[test],
                    y[test],
                    w_test,
                    bad[c],
                    weighted=w_test is not None,
                )
                for c in range(len(predictions))
            ]
        )

    def _score(self, scorer, predictions, X, y, weights, invalid, weighted):
        if invalid:
            return np.nan
        predictions = predictions.reshape(y.shape)
        kwargs = {"sample_weight": weights} if weighted else {}
        return float(scorer(_Predicted(predictions), X, y, **kwargs))

    def _kfold(self, held_out, X, y, sample_weight, scorer, params, splits, degrees):
        n = X.shape[0]
        if scorer is None:
            scorer = check_scoring(self, scoring=None)
        for train, _ in splits:
            if not np.any(held_out.weights[train] > 0):
                raise ValueError(
                    "A cross-validation split has no training sample of positive "
                    "weight."
                )
        groups = _partition_groups(splits, n)
        n_candidates = len(params)
        split_scores = np.empty((n_candidates, len(splits)))
        n_empty = np.zeros(n_candidates)
        n_singular = np.zeros((n_candidates, 2))
        n_held_out = 0
        if groups is not None:
            predictions, empty, singular = self._held_out(
                held_out, np.arange(n), degrees, groups=groups
            )
            self._fallback(
                held_out,
                predictions,
                empty,
                np.arange(n),
                lambda rows: groups[rows][:, None] != groups[None, :],
            )
            per_split = [
                (test, predictions[:, test], empty[:, test], singular[:, test])
                for _, test in splits
            ]
        else:
            per_split = []
            for train, test in splits:
                pred, emp, sing = self._held_out(held_out, test, degrees, train=train)
                keep = np.zeros(n, dtype=bool)
                keep[train] = True
                self._fallback(
                    held_out,
                    pred,
                    emp,
                    test,
                    lambda rows, keep=keep: np.tile(keep, (len(rows), 1)),
                )
                per_split.append((test, pred, emp, sing))
        for s, (test, pred, emp, sing) in enumerate(per_split):
            n_empty += emp.sum(axis=1)
            n_singular += sing.sum(axis=1)
            n_held_out += len(test)
            bad = emp.any(axis=1) & (self.on_empty in ("nan", "raise"))
            w_test = None if sample_weight is None else sample_weight[test]
            split_scores[:, s] = self._split_scores(
                held_out, splits[s], pred, bad, X, y, w_test, scorer
            )
        results = {
            f"split{s}_test_score": split_scores[:, s] for s in range(len(splits))
        }
        results["mean_test_score"] = split_scores.mean(axis=1)
        results["std_test_score"] = split_scores.std(axis=1)
        results["empty_fraction"] = n_empty / n_held_out
        if held_out.degree == 1:
            results["singular_fraction"] = n_singular[:, 0] / n_held_out
            results["rank_deficient_fraction"] = n_singular[:, 1] / n_held_out
        return results

    def _learn_widths(self, data, grid):
        """Learn per-feature widths; keep them as ``per_feature`` says.

        They are kept only where they lower the leave-one-out error of the
        isotropic choice and, with ``per_feature="auto"``, where the guard
        (:func:`._guard.guard_widths`) finds them better out of fold.
        """
        X, X64, y, Y, weights, sample_weight, scorer, weighted, splits = data
        kernel = KERNELS[self.kernel_]
        widths, n_iter, loo_mse, predictions = learn_widths(
            X64,
            Y,
            weights,
            kernel,
            self.bandwidth_,
            degree=self.degree_,
            max_iter=self.max_iter,
        )
        self.n_iter_ = n_iter
        isotropic = np.full(X.shape[1], np.log(self.bandwidth_))
        isotropic_mse = loo_loss(
            isotropic, X64, Y, weights, kernel, gradient=False, degree=self.degree_
        )[0]
        if not loo_mse < isotropic_mse:
            return
        if self._per_feature_mode() == "auto":
            self._say(
                "Comparing the learned widths with the isotropic bandwidth out "
                "of fold, each selected or learned on the training parts"
            )
            guard = guard_widths(
                X64,
                Y,
                weights,
                kernel,
                grid,
                degree=self.degree_,
                splits=splits,
                max_iter=self.max_iter,
            )
            self.per_feature_scores_ = {
                "isotropic": guard.isotropic_loss,
                "per_feature": guard.per_feature_loss,
            }
            self._say(
                f"Out-of-fold mean squared error: isotropic "
                f"{guard.isotropic_loss:.6g}, per-feature {guard.per_feature_loss:.6g}"
            )
            if not guard.keep:
                return
        self.bandwidth_ = widths
        self.per_feature_ = True
        if splits is not None:
            # The score of the learned widths on the splits: those of the
            # guard, whose widths were learned on each training part.
            split_scores = [
                self._score(
                    scorer or check_scoring(self, scoring=None),
                    guard.per_feature_predictions[test],
                    X[test],
                    y[test],
                    None if sample_weight is None else sample_weight[test],
                    False,
                    weighted,
                )
                for _, test in splits
            ]
            self.best_score_ = float(np.mean(split_scores))
        elif scorer is None:
            self.best_score_ = -float(loo_mse)
        else:
            self.best_score_ = self._score(
                scorer, predictions, X, y, weights, False, weighted
            )

    # -- predict and inference, by best_estimator_ ------------------------
    def _best_queries(self, X):
        """``X`` validated as this search's queries, for ``best_estimator_``."""
        check_is_fitted(self)
        if getattr(self, "is_categorical_", None) is None:
            X = validate_queries(self, X)
        return X

    def predict(self, X, return_std=False, return_se=False):
        """Predict with ``best_estimator_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The queries.

        return_std : bool, default=False
            Whether to return the local spread of the training values, as
            :meth:`KernelAttentionRegressor.predict` does.

        return_se : bool, default=False
            Whether to return the standard error of the fitted mean, as
            :meth:`KernelAttentionRegressor.predict` does, at the selected
            parameters (the selection itself is not accounted for).

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_outputs)
            The pooled values.

        y_std, y_se : ndarray of the shape of ``y_pred``
            Only with ``return_std=True``, respectively ``return_se=True``,
            in this order.
        """
        X = self._best_queries(X)
        return self.best_estimator_.predict(
            X, return_std=return_std, return_se=return_se
        )

    def confidence_interval(
        self,
        X,
        *,
        level=0.95,
        method="asymptotic",
        simultaneous=False,
        n_resamples=999,
        random_state=None,
    ):
        """Confidence intervals of the mean function, by ``best_estimator_``.

        See :meth:`KernelAttentionRegressor.confidence_interval` for the
        parameters and the returned ``(lower, upper)``. The intervals hold
        the selected parameters fixed: they do not account for the
        selection itself.
        """
        X = self._best_queries(X)
        return self.best_estimator_.confidence_interval(
            X,
            level=level,
            method=method,
            simultaneous=simultaneous,
            n_resamples=n_resamples,
            random_state=random_state,
        )

    def prediction_interval(self, X, *, level=0.9, method="jackknife+", cv=None):
        """Prediction intervals of new observations, by ``best_estimator_``.

        See :meth:`KernelAttentionRegressor.prediction_interval` for the
        parameters and the returned ``(lower, upper)``. The leave-one-out
        fits hold the selected parameters fixed: the coverage guarantee of
        jackknife+ assumes parameters chosen without the data, and the
        selection of one bandwidth out of a grid is not accounted for.
        """
        X = self._best_queries(X)
        return self.best_estimator_.prediction_interval(
            X, level=level, method=method, cv=cv
        )

    def predict_gradient(self, X, return_se=False):
        """The gradient of the fit at each query, by ``best_estimator_``.

        See :meth:`KernelAttentionRegressor.predict_gradient` for the
        parameters and what is returned.
        """
        X = self._best_queries(X)
        return self.best_estimator_.predict_gradient(X, return_se=return_se)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        # SciPy sparse X, on the brute-force path.
        tags.input_tags.sparse = self.algorithm not in DENSE_ONLY
        # One isotropic width over ten features, one of them informative (the
        # common checks' data), smooths the training fit to R^2 < 0.5 at a
        # cross-validated bandwidth; learned per-feature widths do better.
        tags.regressor_tags.poor_score = self._per_feature_mode() is not True
        return tags
