"""KernelAttentionRegressorCV: bandwidth and kernel selection by cross-validation."""

from numbers import Integral

from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.metrics import get_scorer_names
from sklearn.utils._param_validation import Interval, StrOptions

from ._engine._categorical import CATEGORICAL_FEATURE_CONSTRAINTS
from ._engine._pooling import ON_EMPTY
from ._held_out._criteria import SMOOTHER_CRITERIA
from ._projection import KernelAttentionProjection
from ._regression import KernelAttentionRegressor
from ._search._params import SEARCH_CONSTRAINTS
from ._selection._delegation import BestEstimatorMethods
from ._selection._fit import fit_search, refit_search, score_search
from ._selection._large import fit_large
from ._selection._learned_map import PROJECTION_CONSTRAINT
from ._selection._linear_auto import fit_auto, is_auto
from ._utils._sparse import takes_sparse


class KernelAttentionRegressorCV(BestEstimatorMethods, RegressorMixin, BaseEstimator):
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
    kernels : str, sequence of str or "auto", default="auto"
        Names of kernels of :data:`sklearn_kernelpool.kernels.KERNELS` to
        choose from. ``"auto"``: the Gaussian, and on a large table (the
        large-table selection of ``subsample``) the Epanechnikov kernel too,
        kept where it scores within one standard error of the Gaussian,
        since it predicts from the keys in its support alone.

    bandwidths : int, array-like of shape (n_bandwidths,) or None, default=30
        The isotropic bandwidths to choose from:

        - an int ``m``: ``m`` bandwidths spaced evenly in log scale, from the
          median nearest-neighbour distance to twice the largest distance
          from the mean of the training points, extended past an edge where
          the best candidate lies (see :ref:`bandwidth-selection`).
        - an array-like of floats > 0. A selection on its smallest or
          largest bandwidth issues a
          :class:`~sklearn_kernelpool.BandwidthEdgeWarning`.
        - None: no fixed-width candidate, only the adaptive ones of
          ``n_neighbors`` (which must then be given).

    cv : int, cross-validation generator or iterable, default=None
        How the candidates are scored:

        - None: exact leave-one-out. Every training point is predicted from
          all the others (its whole sample weight removed); points of weight
          zero count for nothing in the scores.
        - an int ``k >= 2``: :class:`~sklearn.model_selection.KFold` with ``k``
          folds;
        - a splitter or an iterable of (train, test) index arrays, as for
          :class:`~sklearn.model_selection.GridSearchCV`; the splits are
          drawn once, so that a generator serves as well as a list.

        Under K-fold, a candidate's score is the mean of its split scores,
        as ``GridSearchCV`` computes them.

    scoring : str, callable or None, default=None
        A regression scorer name or a callable ``scorer(estimator, X, y)``;
        None is the negative mean squared error under leave-one-out (which
        scores its ``n`` predictions at once, as
        :class:`~sklearn.linear_model.RidgeCV` does) and :math:`R^2` under
        K-fold. ``"gcv"`` and
        ``"aicc"`` score each candidate fitted on all the data by
        generalised cross-validation [2]_ or the corrected AIC [3]_ of its
        smoother matrix, from the leave-one-out pass itself
        (``mean_test_score`` is the negated criterion; ``cv=None`` only).
        See :ref:`bandwidth-selection`.

    per_feature : bool or "auto", default="auto"
        After the isotropic selection, learn one width per feature by
        minimising the leave-one-out squared error (or, with
        ``scoring="gcv"`` or ``"aicc"``, that criterion, as R np's
        ``bwmethod="cv.aic"``) with L-BFGS-B on the log widths, from three
        deterministic starts, with an analytic gradient, for the selected
        ``degree``. Needs kernels with a log form (``"gaussian"``,
        ``"exponential"``, ``"cauchy"`` and their aliases). With categorical
        features they are learned on the leave-one-out error only.

        - True: kept where they lower the leave-one-out error (the
          criterion) of the isotropic choice. Needs ``cv=None``.
        - ``"auto"``: kept only where, in addition, the procedure that
          learns them beats the isotropic selection out of fold (five seeded
          folds, or the splits of a K-fold ``cv``) by more than one standard
          error of the paired differences of the held-out errors (the
          one-standard-error rule); learned only where the guard is
          affordable and applies (see :ref:`tabular-learned-widths`).
        - False: one isotropic bandwidth.

        See :ref:`bandwidth-selection` for the bounds, the starts and the guard.

    max_iter : int, default=200
        The iteration cap of L-BFGS-B when learning per-feature widths (and
        lambdas), per start, or a map; a
        :class:`~sklearn.exceptions.ConvergenceWarning` says when it stops.

    degree : {0, 1, 2} or "auto", default="auto"
        The degree of the local polynomial of every candidate and of
        ``best_estimator_`` (see :class:`KernelAttentionRegressor`).
        ``"auto"`` scores degrees 0 and 1 in the same pass and keeps the
        better (degree 0 alone where local-linear fits cannot be scored: no
        more points of positive weight than the features plus two, or
        held-out sums of degree 1 over a quarter of the physical memory),
        then scores local quadratics (degree 2) on up to five features at
        the best fixed width and wider ones, kept where they win by one
        standard error of the paired leave-one-out losses (see
        :ref:`bandwidth-selection`). On a small table (fewer than 20 points
        per parameter of the local line; ``cv=None``, ``scoring=None``, no
        categorical features) it also scores the global least-squares line
        and selects toward the simpler fit by the one-standard-error rule:
        see :ref:`small tables <tabular-small-tables>`. Held-out fits follow
        the estimator's rules for singular and rank-deficient local designs
        (``cv_results_["singular_fraction"]``, ``"rank_deficient_fraction"``).

    on_empty : {"nearest", "mean", "nan", "raise"}, default="nearest"
        What a point with no other point of positive weight in the kernel's
        support gets, while scoring (what a refit without the held-out
        points would give) and in ``best_estimator_`` (see
        :class:`KernelAttentionRegressor`); under ``"nan"`` and ``"raise"``
        a candidate that leaves a point empty scores NaN and ranks last, and
        ``fit`` raises a ``ValueError`` if none is eligible.
        ``cv_results_["empty_fraction"]`` reports the fallbacks.

    algorithm : {"auto", "brute", "kd_tree", "ball_tree", "binned"}, \
            default="auto"
        The algorithm of ``best_estimator_`` (see
        :class:`KernelAttentionRegressor`). Scoring pools every pair, except
        on the binned path (``"binned"``, or ``"auto"`` where the regressor
        would pick it at the smallest candidate width): each candidate then
        costs one FFT convolution, for fixed isotropic widths of one or two
        continuous features; categorical features, explicit
        ``n_neighbors``, ``per_feature`` and ``scoring="gcv"`` or ``"aicc"``
        are refused there with a ``ValueError``. See :ref:`binned`.

    n_jobs : int, default=None
        Threads over blocks of points while scoring (``None`` means 1 unless
        in a :func:`joblib.parallel_config` context; BLAS runs one thread),
        and the ``n_jobs`` of ``best_estimator_``. The scores do not depend
        on it beyond rounding.

    verbose : int, default=0
        How much ``fit`` prints: 0 nothing; 1 the size of the search (as
        :class:`~sklearn.model_selection.GridSearchCV` does), its phases and
        the selected candidate; 2 also the best bandwidth of each kernel; 3
        also the score of every candidate.

    categorical_features : array-like of {bool, int, str} or "from_dtype", \
            default=None
        The categorical features, as for :class:`KernelAttentionRegressor`.

    ordered_features : array-like of {bool, int, str}, "from_dtype" or None, \
            default="from_dtype"
        The ordered ones, as for :class:`KernelAttentionRegressor`.

    categorical_bandwidths : array-like of shape (n_lambdas,), \
            default=(0.0, 0.02, 0.1, 0.3, 0.6, 1.0)
        The values of ``lambda`` in [0, 1] to choose from, one shared by
        every categorical feature, crossed with every kernel and bandwidth
        and scored alike; ``per_feature=True`` learns one ``lambda_j`` per
        feature with the widths (see :ref:`categorical-features`).

    n_neighbors : int, array-like of int, "auto" or None, default="auto"
        Neighbour counts of adaptive-width candidates (see
        :class:`KernelAttentionRegressor`): each kernel with each count, at
        the bandwidth multiplier 1.0, scored alongside the fixed widths
        (alone with ``bandwidths=None``); a count may not exceed the points
        of positive weight of a held-out fit, nor be combined with
        ``per_feature=True`` (``ValueError``). ``"auto"``: the counts 5,
        10, 20, 40 and 80 that every held-out fit can hold, none with
        categorical features or ``per_feature=True``; None: fixed widths
        only. See :ref:`adaptive-widths`.

    linear_features : array-like of {bool, int, str}, "categorical", "auto" \
            or None, default="auto"
        The columns of a global linear term (a partially linear model, see
        :class:`KernelAttentionRegressor`), each candidate scored by exact
        leave-one-out with its own ``coef(h)`` held; a column that the
        smoother of a candidate reproduces is refused. Needs ``cv=None``,
        ``per_feature=False`` and a scoring other than ``"gcv"`` and
        ``"aicc"``; no rules of small tables. ``"auto"`` scores the
        categorical features (of ``categorical_features``, or a DataFrame's
        category, object and string columns) linear against in the kernel
        and keeps the better (``linear_features_``, ``linear_scores_``); it
        keeps them in the kernel unscored under the options above or a
        ``projection``, with no continuous feature, more than one coefficient
        per 10 rows of positive weight (or 100) or a linear part not
        identified; without categorical features it is None. See
        :ref:`linear_features="auto" <tabular-linear-auto>`.

    projection : int, "auto" or None, default=None
        A learned linear map of the keys (:class:`KernelAttentionProjection`,
        at most ``max_iter`` iterations). ``"auto"`` learns a map of rank
        ``min(2, n_features)`` after the search and keeps it only where the
        procedure that learns it beats the search without it out of fold by
        more than one standard error (over the splits of ``cv``, or five
        folds under leave-one-out); an int forces that rank. A kept map
        replaces the selected candidate: ``best_estimator_`` pools the
        mapped keys at unit width and degree 0, with the selected kernel
        (the gaussian where it has no slope). Continuous, dense features
        only. See :ref:`projection`.

    subsample : int >= 500, "auto" or None, default="auto"
        The large-table selection: an exact search on this many rows drawn
        at random fixes all but the width, whose rescaled candidates are then
        scored on held-out rows against all the others. ``"auto"``: 4,000
        rows above 10,000 rows of positive weight; None: always the exact
        search. An approximation; its measured loss, and the parameters with
        which ``"auto"`` stays exact and an int is refused, are in
        :ref:`large-tables`.

    random_state : int, RandomState instance or None, default=None
        The draw of the subsample and held-out rows of the large-table
        selection; an int makes a large fit reproducible. Unused by the
        exact search.

    Attributes
    ----------
    kernel_ : str
        The selected kernel: one of ``kernels``, or ``"constant"`` where the
        global line of a small table is selected (see ``degree``).

    linear_features_ : array-like, "categorical" or None
        The linear columns of ``best_estimator_`` (its ``coef_`` and
        ``coef_se_``): ``linear_features``, or what ``"auto"`` kept.

    linear_scores_ : dict or None
        ``{"kernel": ..., "linear": ...}``, the best scores of the two
        searches where ``"auto"`` compared them; else None.

    bandwidth_ : float or ndarray of shape (n_features,)
        The selected bandwidth; per-feature widths when they were kept
        (``per_feature_``).

    degree_ : int
        The selected degree: ``degree``, or with ``degree="auto"`` that of
        the best candidate; 2 where the local quadratic at kept per-feature
        widths was kept (``best_params_`` stays the isotropic candidate).

    per_feature_ : bool
        Whether learned per-feature widths were kept.

    per_feature_scores_ : dict or None
        With ``per_feature="auto"``, the guard's out-of-fold mean squared
        errors ``{"isotropic": ..., "per_feature": ...}`` (the widths are
        kept where the second is lower by more than one standard error), and
        ``"quadratic"``: the held-out scores of the local quadratic at the
        kept widths, by multiplier; None when the guard did not run.

    best_score_ : float
        The score of the selected model: ``mean_test_score`` of the selected
        candidate, or of kept per-feature widths or a kept map (see
        :ref:`cv-results`).

    n_neighbors_ : int or None
        The neighbour count of the selected candidate when it is adaptive,
        None when its width is fixed.

    best_index_ : int
        Index of the selected candidate in ``cv_results_``: the first in
        ``rank_test_score`` but where a rule keeps a simpler or wider one, or
        a kept map (the last entry), or a compact kernel on a large table
        (see :ref:`cv-results`).

    best_params_ : dict
        ``{"kernel": ..., "bandwidth": ...}`` of that candidate, with its
        ``"degree"``, ``"categorical_bandwidth"``, ``"n_neighbors"`` (then
        ``"bandwidth"`` is the multiplier 1.0), ``"projection"`` or
        ``"linear_features"`` where they were searched.

    cv_results_ : dict of ndarrays
        One entry per candidate, in the order of ``GridSearchCV``'s
        ``param_grid`` (then the global line, then the adaptive candidates,
        whose ``param_n_neighbors`` is masked for the others): the
        ``param_*`` entries, ``params``, ``mean_test_score``,
        ``rank_test_score``, ``empty_fraction`` and, by the path, the
        entries listed in :ref:`cv-results`.

    best_estimator_ : KernelAttentionRegressor
        The selected model refitted on all the data.

    shrunk_fraction_ : float
        ``cv_results_["shrunk_fraction"]`` of the selected candidate: the
        fraction of its held-out local-linear slopes shrunk towards the
        local mean (0 for degree 0; with learned widths, of the isotropic
        candidate they start from).

    effective_df_ : float
        The effective degrees of freedom of ``best_estimator_`` (see
        :meth:`KernelAttentionRegressor.smoother_diagnostics`), computed on
        first access unless the search knows it.

    categorical_bandwidth_ : float or ndarray of shape (n_categorical_features,)
        With categorical features, the selected ``lambda`` (one per feature
        when learned; candidates' in ``cv_results_["param_categorical_bandwidth"]``).

    is_categorical_, is_ordered_ : ndarray of bool of shape (n_features,) or None
        Which features are categorical, and ordered; None when none is.

    categories_ : list of ndarray
        The categories of each categorical feature, sorted (ordered ones in order).

    n_iter_ : int
        The L-BFGS-B iterations, at most ``max_iter``, of the learned
        per-feature widths (and lambdas), or of a kept map, whether the
        widths were kept or not; 1 where nothing was learned, as
        scikit-learn counts an estimator with ``max_iter``.

    projection_ : KernelAttentionProjection or None
        The kept map: every method maps its queries with it first, and
        ``predict_gradient`` answers in the original features. None without.

    projection_scores_ : dict or None
        The out-of-fold mean squared errors ``"without"`` and with the map
        (``"projection"``), their ``"standard_error"`` and whether the map
        was ``"kept"``; None where nothing was compared.

    subsample_, n_held_out_ : int or None
        The rows of the subsample and the held-out rows of the large-table
        selection; None after an exact search.

    subsample_results_ : dict of ndarrays or None
        The ``cv_results_`` of the exact search on the subsample (then
        ``cv_results_`` holds the candidates scored on all the rows); None
        after an exact search.

    n_features_in_ : int
        Number of features seen during ``fit``.

    feature_names_in_ : ndarray of shape (`n_features_in_`,)
        Names of features seen during ``fit``. Defined only when ``X`` has
        feature names that are all strings.

    See Also
    --------
    KernelAttentionRegressor : The estimator whose parameters are selected.
    sklearn.model_selection.GridSearchCV : Refits for every candidate and split.

    Notes
    -----
    Every candidate is scored from one pass over the ``n (n - 1) / 2`` pairs
    of points, in cache-sized blocks; the scores agree with refitting
    without the held-out points to about 1e-14 relative. A search whose
    pooled sums exceed the physical memory is refused with a
    ``MemoryError`` before any work. See :ref:`bandwidth-selection` for the
    held-out formulas, sample weights, the automatic grid and the guard of
    learned widths [1]_.

    References
    ----------
    .. [1] S. Varma and R. Simon, "Bias in error estimation when using
       cross-validation for model selection", BMC Bioinformatics 7 (2006).
    .. [2] P. Craven and G. Wahba, "Smoothing noisy data with spline
       functions", Numerische Mathematik 31 (1979).
    .. [3] C. M. Hurvich, J. S. Simonoff and C.-L. Tsai, "Smoothing parameter
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
    >>> local_linear.cv_results_["rank_deficient_fraction"]
    array([0., 0., 0.])
    """

    _parameter_constraints: dict = {
        **SEARCH_CONSTRAINTS,
        "scoring": [
            StrOptions(set(get_scorer_names()) | set(SMOOTHER_CRITERIA)),
            callable,
            None,
        ],
        "degree": [Interval(Integral, 0, 2, closed="both"), StrOptions({"auto"})],
        "on_empty": [StrOptions(set(ON_EMPTY))],
        **CATEGORICAL_FEATURE_CONSTRAINTS,
        "categorical_bandwidths": ["array-like"],
        "linear_features": [
            "array-like",
            StrOptions({"categorical", "auto"}),
            None,
        ],
        "projection": PROJECTION_CONSTRAINT,
    }

    def __init__(
        self,
        kernels="auto",
        bandwidths=30,
        *,
        cv=None,
        scoring=None,
        per_feature="auto",
        max_iter=200,
        degree="auto",
        on_empty="nearest",
        algorithm="auto",
        n_jobs=None,
        verbose=0,
        categorical_features=None,
        categorical_bandwidths=(0.0, 0.02, 0.1, 0.3, 0.6, 1.0),
        ordered_features="from_dtype",
        n_neighbors="auto",
        linear_features="auto",
        projection=None,
        subsample="auto",
        random_state=None,
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
        self.ordered_features = ordered_features
        self.n_neighbors = n_neighbors
        self.linear_features = linear_features
        self.projection = projection
        self.subsample = subsample
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, sample_weight=None):
        """Score every candidate, select the best and refit it on all the data.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training keys (SciPy sparse ones pooled by brute force).

        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Training values.

        sample_weight : array-like of shape (n_samples,), default=None
            Non-negative weights of the training rows, not all zero. See
            :ref:`bandwidth-selection` for their role in the scores.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        fit = fit_auto if is_auto(self.linear_features) else fit_search
        return fit_large(self, X, y, sample_weight, fit, (score_search, refit_search))

    def _get_estimator(self):
        """An unfitted estimator of the kind the search selects."""
        return KernelAttentionRegressor()

    def _get_projection(self):
        """An unfitted map of the kind the search learns."""
        return KernelAttentionProjection()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        # SciPy sparse X, on the brute-force path, without categorical features.
        kernel = self.linear_features is None or is_auto(self.linear_features)
        tags.input_tags.sparse = kernel and takes_sparse(
            self.algorithm, self.categorical_features
        )
        # One isotropic width over ten features, one of them informative (the
        # common checks' data), smooths the training fit to R^2 < 0.5 at a
        # cross-validated bandwidth; learned per-feature widths do better.
        learned = not isinstance(self.per_feature, str) and bool(self.per_feature)
        tags.regressor_tags.poor_score = not learned
        return tags
