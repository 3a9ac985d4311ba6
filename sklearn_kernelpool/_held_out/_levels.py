"""The positions of ordered levels in the fit of each held-out part.

An ordered categorical feature whose levels are the sorted values seen in
``fit`` (an int or object column named in ``ordered_features``, not a pandas
categorical, whose declared categories a fit keeps whatever rows it sees)
numbers its levels ``0..L-1`` among the values of the rows it is fitted on
(:func:`.._utils._categorical_input.learn_categories`). A fit on a training
part that misses a level numbers the remaining ones ``0..L'-1``: the
positions after the missing level move down by one, which changes the
distances ``|a - b|`` of the ordered kernel, and a held-out row of the
missing level is an unknown category, at ``max(L' - 1, 1)`` from every key
(:mod:`.._engine._categorical`). The held-out scores of the searches are
those of such refits, so they read the codes of each part's fit:

- leave-one-out: the fit without row ``i`` misses a level only where row
  ``i`` holds it alone; row ``i`` is then an unknown category of a feature
  of ``L - 1`` levels, and the positions of the keys do not matter (every
  key is at the same distance from it);
- K-fold: each fold's fit numbers the levels of its training rows, all of
  them, whatever their weights (a row of weight zero is read by ``fit``).

A :class:`LevelCoding` holds the codes of one fit: those of the points as
queries and as keys, and the number of levels of each feature.
:class:`PartCodings` gives each held-out row the coding of its fit; where no
part misses a level it is the coding of all the rows, the codes as given.
"""

from dataclasses import dataclass

import numpy as np

from .._engine._categorical import check_levels


@dataclass(frozen=True)
class LevelCoding:
    """The category codes of one fit.

    Attributes
    ----------
    queries : ndarray of int of shape (n, n_categorical)
        The codes of the points as the fit reads them as queries (-1: a
        category the fit does not know).
    keys : ndarray of int of shape (n, n_categorical)
        The codes of the points as keys of the fit (those outside its
        training part are never pooled).
    levels : ndarray of int of shape (n_categorical,)
        The number of levels of each ordered feature in the fit, 0 for an
        unordered one (:class:`.._engine._categorical.CategoricalFactor`).
    """

    queries: np.ndarray
    keys: np.ndarray
    levels: np.ndarray


class PartCodings:
    """The :class:`LevelCoding` of the fit of each held-out row.

    Parameters
    ----------
    codings : list of LevelCoding
        The codings of the parts.
    part : ndarray of int of shape (n,) or None, default=None
        The index in ``codings`` of each point's part; None: one coding for
        every point.
    """

    def __init__(self, codings, part=None):
        self.codings = codings
        self.part = part

    def split(self, rows):
        """``(where, coding)`` pairs that cover ``rows``: the indices (into
        ``rows``) of the rows of each coding, a slice of them all where one
        coding holds every row."""
        if self.part is None:
            return [(slice(None), self.codings[0])]
        parts = self.part[rows]
        return [(np.flatnonzero(parts == p), self.codings[p]) for p in np.unique(parts)]


class HeldOutLevels:
    """The codings of the held-out fits of a search.

    Parameters
    ----------
    codes : ndarray of int of shape (n, n_categorical)
        The codes of the points in the fit of all of them.
    levels : ndarray of int of shape (n_categorical,) or None
        The number of levels of each ordered feature, 0 for an unordered one;
        None: every feature unordered.
    sorted_levels : ndarray of bool of shape (n_categorical,) or None, \
            default=None
        The ordered features whose levels are the sorted values seen in
        ``fit``, which each held-out fit numbers among its own rows; None:
        none (the positions of all the rows hold in every fit).

    Attributes
    ----------
    full : LevelCoding
        The coding of the fit of all the points: the codes as given.
    """

    def __init__(self, codes, levels, sorted_levels=None):
        self.codes = np.asarray(codes, dtype=np.intp)
        n_categorical = self.codes.shape[1]
        self.levels = check_levels(levels, n_categorical)
        relearned = np.zeros(n_categorical, dtype=bool)
        if sorted_levels is not None:
            relearned = np.asarray(sorted_levels, dtype=bool).reshape(n_categorical)
        self.relearned = np.flatnonzero(relearned & (self.levels > 0))
        self.full = LevelCoding(self.codes, self.codes, self.levels)

    def _counts(self, j, rows=slice(None)):
        return np.bincount(self.codes[rows, j], minlength=self.levels[j])

    def _alone(self, j):
        """Whether each point holds its level of feature ``j`` alone."""
        return self._counts(j)[self.codes[:, j]] == 1

    def leave_one_out(self):
        """The :class:`PartCodings` of the fits without each point: a point
        that holds a level alone is an unknown category of that feature, of
        one level fewer."""
        queries, levels = self.codes.copy(), self.levels.copy()
        for j in self.relearned:
            alone = self._alone(j)
            queries[alone, j] = -1
            levels[j] -= alone.any()
        if np.array_equal(levels, self.levels):
            return PartCodings([self.full])
        return PartCodings([LevelCoding(queries, self.codes, levels)])

    def recoded_rows(self):
        """The points whose fit without them reads other codes than the fit
        of all the points: those that hold a level alone."""
        alone = np.zeros(len(self.codes), dtype=bool)
        for j in self.relearned:
            alone |= self._alone(j)
        return np.flatnonzero(alone)

    def training(self, train):
        """The :class:`LevelCoding` of the fit of the points ``train``
        (indices or a boolean mask): the positions among the levels they
        hold, -1 for the others."""
        codes, levels = self.codes.copy(), self.levels.copy()
        for j in self.relearned:
            present = self._counts(j, train) > 0
            positions = np.where(present, np.cumsum(present) - 1, -1)
            codes[:, j] = positions[self.codes[:, j]]
            levels[j] = np.count_nonzero(present)
        if np.array_equal(levels, self.levels):
            return self.full
        return LevelCoding(codes, codes, levels)

    def folds(self, groups):
        """The :class:`PartCodings` of the fits without each group of
        ``groups`` (a partition of the points, as K-fold's test sets)."""
        codings = [self.training(groups != g) for g in range(groups.max() + 1)]
        if all(coding is self.full for coding in codings):
            return PartCodings([self.full])
        return PartCodings(codings, groups)

    def split(self, train):
        """The :class:`PartCodings` of the fit of ``train`` for its test
        points."""
        return PartCodings([self.training(train)])

    def parts(self, groups=None, train=None):
        """The :class:`PartCodings` of the held-out fits: those of ``train``
        (a split), of the other groups (``groups``, a partition), or else
        of leave-one-out."""
        if train is not None:
            return self.split(train)
        if groups is not None:
            return self.folds(groups)
        return self.leave_one_out()
