"""Pictures of fitted estimators: attention heatmaps, kernel shapes, fits.

matplotlib is optional (the ``plot`` extra): it is imported only when a
picture is drawn, and a clear ``ImportError`` says how to install it.
The displays follow scikit-learn's convention: a ``from_estimator``
class method computes what is drawn, ``plot(ax=...)`` draws it, and the
artists are kept as attributes ending in ``_``.

The top layer, with the estimators: its modules may import every layer.
"""
