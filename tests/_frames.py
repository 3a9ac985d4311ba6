"""Data frames shared by the tests of partially linear fits."""

import numpy as np
import pandas as pd


def wage_like(n=200, seed=0, interaction=False):
    """A DataFrame with a continuous column, a 4-level string column and a
    binary category one; ``y`` additive in the categories, or with their
    effect changing the sign of the curve (``interaction``)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n)
    colour = rng.choice(["blue", "green", "red", "white"], n)
    union = rng.choice(["no", "yes"], n)
    effect = pd.Series(colour).map(
        {"blue": 0.0, "green": 0.7, "red": -0.4, "white": 1.2}
    )
    if interaction:
        f = np.sin(2 * x) * np.where(colour == "blue", 2.0, -2.0)
        y = f + 0.2 * rng.normal(size=n)
    else:
        y = np.sin(2 * x) + effect.to_numpy() + 0.5 * (union == "yes")
        y = y + 0.2 * rng.normal(size=n)
    X = pd.DataFrame({"x": x, "colour": colour, "union": union})
    X["union"] = X["union"].astype("category")
    return X, y
