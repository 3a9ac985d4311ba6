"""The fit of the cross-validated estimators around their candidate search:
the refit of the selected candidate, the methods they answer with
``best_estimator_``, the guarded learned map and the search over linear
columns.

Layer 7. Its modules import from every layer below; never from the
estimators, which they build through the search's ``_get_estimator`` and
``_get_projection`` (as scikit-learn's ``LinearModelCV`` builds its
estimator).
"""
