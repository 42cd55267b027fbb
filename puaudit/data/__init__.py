"""Reading tables, the input vocabulary and column roles, generated demo data, limits and JSON.

:func:`load_input` (:mod:`puaudit.data.load`) is the one way in: a path or uploaded bytes,
whatever tool wrote them.
"""

__all__ = ["load_input"]


def __getattr__(name):  # lazy: importing one module of the package stays light
    if name == "load_input":
        from puaudit.data.load import load_input
        return load_input
    raise AttributeError(name)
