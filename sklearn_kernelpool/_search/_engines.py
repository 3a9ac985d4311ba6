"""(stub)"""

import contextlib


@contextlib.contextmanager
def neighbour_lists(min_rows=0):
    yield
